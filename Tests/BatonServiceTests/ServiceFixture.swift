// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonDBus
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// Records publications and succeeds (or fails with `failure`): a fake radio for the service.
final class FakePublisher: ActivityPublisher, @unchecked Sendable {
    private let lock = NSLock()
    private var published: [ActivityRecord] = []
    private var withdrawn: [UInt32] = []
    let failure: RadioError?
    /// Runs as the advert goes on the air (tests look at what was written before it).
    let onPublish: (@Sendable () -> Void)?

    init(failure: RadioError? = nil, onPublish: (@Sendable () -> Void)? = nil) {
        self.failure = failure
        self.onPublish = onPublish
    }

    /// Like the radio: one advert revision for the whole device, +1 per publication (§4.2).
    func publish(_ record: ActivityRecord, uid: UInt32) async throws(RadioError) -> PublishReceipt {
        onPublish?()
        let revision = lock.withLock {
            published.append(record)
            return UInt32(published.count)
        }
        if let failure { throw failure }
        return PublishReceipt(advertRevision: revision, radio: nil)
    }

    func withdraw(uid: UInt32) async { lock.withLock { withdrawn.append(uid) } }

    var publications: [ActivityRecord] { lock.withLock { published } }
    var withdrawals: [UInt32] { lock.withLock { withdrawn } }
}

/// Collects log lines so tests can check that nothing private is logged.
final class CollectingLog: ServiceLog, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func log(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}

/// A running service on a private bus, owning org.baton, plus one client connection.
struct ServiceFixture {
    let bus: TestBus
    let daemonConnection: DBusConnection
    /// The activities actor behind the bus objects.
    let service: Activities
    /// The handlers and session agents (delivery, versions).
    let handlers: Handlers
    let client: DBusConnection
    let stateDirectory: String
    let log: CollectingLog

    func connect() throws -> DBusConnection { try DBusConnection(bus: .address(bus.address)) }

    var statusFilePath: String { stateDirectory + "/status.json" }
}

struct FixtureOptions {
    // Generous: tests that need a source to be late set a short timeout themselves.
    var saveTimeout: Duration = .seconds(3)
    var publisher: FakePublisher? = FakePublisher()
    var radioEnabled = true
    var dataDirectories: [String] = []
    /// Replaces the scanner of `dataDirectories` (for example with a `DesktopEntryIndex`).
    var desktopEntries: (any DesktopEntrySource)?
    var handlerWait: Duration = .seconds(10)
    var busKind: TestBus.Kind = .session
    var serviceDirectory: String?
}

func withService<T>(_ options: FixtureOptions = FixtureOptions(), _ body: (ServiceFixture) async throws -> T) async throws -> T {
    let bus = try TestBus(options.busKind, serviceDirectory: options.serviceDirectory)
    defer { bus.stop() }
    let daemonConnection = try DBusConnection(bus: .address(bus.address))
    defer { daemonConnection.close() }
    let stateDirectory = bus.directory.appendingPathComponent("state").path
    let log = CollectingLog()
    let configuration = ServiceConfiguration(radioEnabled: options.radioEnabled, saveTimeout: options.saveTimeout,
                                             handlerWait: options.handlerWait, handlerCallTimeout: .seconds(5))
    let activityService = ActivityService(
        connection: daemonConnection, configuration: configuration, publisher: options.publisher,
        statusFile: try StatusFile(name: "status.json", in: StateDirectory(path: stateDirectory)),
        desktopEntries: options.desktopEntries ?? XDGDesktopEntryScanner(dataDirectories: options.dataDirectories),
        logger: log)
    try await activityService.start()
    #expect(try await daemonConnection.requestName("org.baton", flags: [.doNotQueue]) == .primaryOwner)
    let client = try DBusConnection(bus: .address(bus.address))
    defer { client.close() }
    let fixture = ServiceFixture(bus: bus, daemonConnection: daemonConnection, service: activityService.activities,
                                 handlers: activityService.handlers, client: client,
                                 stateDirectory: stateDirectory, log: log)
    let result = try await body(fixture)
    await activityService.stop()
    return result
}

// MARK: Client helpers

extension DBusConnection {
    func manager(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call(destination: "org.baton", path: "/org/baton", interface: "org.baton.Manager1", method: method,
                       arguments: arguments, timeout: .seconds(10))
    }

    func activity(_ path: String, _ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call(destination: "org.baton", path: path, interface: "org.baton.Activity1", method: method,
                       arguments: arguments, timeout: .seconds(10))
    }

    func property(_ path: String, _ name: String) async throws -> DBusValue {
        let reply = try await call(destination: "org.baton", path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                                   arguments: [.string("org.baton.Activity1"), .string(name)], timeout: .seconds(10))
        guard let value = reply.first?.variantValue else { throw DBusError.failed("no property value") }
        return value
    }

    /// CreateActivity; returns the object path.
    func createActivity(type: String = "org.example.Reader.reading", title: String = "Chapter 1",
                        userInfo: [String: DBusValue] = [:], options: [String: DBusValue] = [:]) async throws -> String {
        let reply = try await manager("CreateActivity", [.string(type), .string(title), .propertyDictionary(userInfo),
                                                         .propertyDictionary(options)])
        guard let path = reply.first?.objectPathValue else { throw DBusError.failed("CreateActivity returned no path") }
        return path
    }
}

/// Expects `body` to fail with the D-Bus error `name`.
func expectError(_ name: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(name), got success", sourceLocation: sourceLocation)
    } catch let error as DBusError {
        #expect(error.name == name, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(name), got \(error)", sourceLocation: sourceLocation)
    }
}

enum ErrorName {
    static let invalidArguments = "org.baton.Error.InvalidArguments"
    static let payloadTooLarge = "org.baton.Error.PayloadTooLarge"
    static let unknownActivity = "org.baton.Error.UnknownActivity"
    static let notPermitted = "org.baton.Error.NotPermitted"
    static let limitExceeded = "org.baton.Error.LimitExceeded"
    static let alreadyExists = "org.baton.Error.AlreadyExists"
}

/// The day whose keys tests issue (§3.1): today's, or that of `FakeWallClock`'s start if earlier,
/// so a key only ever ratchets forward, whichever clock a test runs the service with.
let testDay: UInt64 = min(AdvertisingSecret.day(ofEpoch: Protocol.epoch(unixSeconds: SystemWallClock().unixSeconds()) - 1),
                          AdvertisingSecret.day(ofEpoch: Protocol.epoch(unixSeconds: 1_800_000_000)))
