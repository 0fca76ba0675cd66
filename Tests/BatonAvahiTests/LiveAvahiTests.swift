// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus
import Foundation
import Testing

@testable import BatonAvahi

/// Against a real avahi-daemon on a private bus, in a network namespace of its own.
@Suite(.serialized, .enabled(if: AvahiTestEnvironment.shouldRun,
                            "needs root, avahi-daemon, dbus-daemon and network namespaces (see `scripts/avahi-test-env check`)"))
struct LiveAvahiTests {
    /// Starts an environment, a bus connection and runs `body`, always tearing down.
    func withAvahi(_ body: (AvahiTestEnvironment, DBusConnection) async throws -> Void) async throws {
        let environment = try await AvahiTestEnvironment.start()
        do {
            let connection = try DBusConnection(bus: .address(environment.busAddress))
            defer { connection.close() }
            try await body(environment, connection)
        } catch {
            await environment.stop()
            throw error
        }
        await environment.stop()
    }

    static func found(_ name: String) -> @Sendable (AvahiBrowser.Event) -> Bool {
        { if case .found(let endpoint) = $0 { endpoint.name == name } else { false } }
    }

    static func removed(_ name: String) -> @Sendable (AvahiBrowser.Event) -> Bool {
        { if case .removed(let key) = $0 { key.name == name } else { false } }
    }

    static func established(_ name: String) -> @Sendable (AvahiPublisher.Event) -> Bool {
        { $0 == .established(name: name) }
    }

    @Test func publishBrowseResolveAndRecogniseTheMember() async throws {
        try await withAvahi { environment, connection in
            let (laptop, laptopKeys) = try member(1)
            let (phone, phoneKeys) = try member(2)
            let (_, strangerKeys) = try member(3)
            let epoch: UInt64 = 1_950_000
            let name = laptopKeys.mdnsInstanceName(epoch: epoch)

            let browser = AvahiBrowser(connection: connection)
            let browsed = EventLog(browser.events)
            try await browser.start()
            let publisher = AvahiPublisher(connection: connection)
            let published = EventLog(publisher.events)
            try await publisher.publish(name: name, port: 47_001, txt: ["v": "1"])
            try await published.wait("established", Self.established(name))

            // A stranger on the same link is seen but not recognised.
            let stranger = AvahiPublisher(connection: connection)
            let strangerName = strangerKeys.mdnsInstanceName(epoch: epoch)
            try await stranger.publish(name: strangerName, port: 47_009)

            let (event, _) = try await browsed.wait("found \(name)", Self.found(name))
            guard case .found(let endpoint) = event else { return }
            #expect(endpoint.type == BatonServiceType.ring)
            #expect(endpoint.address == AvahiTestEnvironment.address)
            #expect(endpoint.addressProtocol == .inet)
            #expect(endpoint.host == environment.hostName)
            #expect(endpoint.port == 47_001)
            #expect(endpoint.txt == ["v": "1"])
            #expect(endpoint.isLocal)
            #expect(endpoint.interface > 0)

            let directory = InstanceNameDirectory(members: [laptop: laptopKeys, phone: phoneKeys], epoch: epoch)
            #expect(directory.member(forInstanceName: endpoint.name) == laptop)
            try await browsed.wait("found stranger", Self.found(strangerName))
            #expect(directory.member(forInstanceName: strangerName) == nil)
            #expect(await browser.endpoints.count == 2)

            await stranger.close()
            await publisher.close()
            await browser.stop()
        }
    }

    @Test func rotatingTheNameReplacesTheInstanceAndWithdrawRemovesIt() async throws {
        try await withAvahi { _, connection in
            let (_, keys) = try member(4)
            let oldName = keys.mdnsInstanceName(epoch: 10)
            let newName = keys.mdnsInstanceName(epoch: 11)
            let browser = AvahiBrowser(connection: connection)
            let browsed = EventLog(browser.events)
            try await browser.start()
            let publisher = AvahiPublisher(connection: connection)
            let published = EventLog(publisher.events)

            try await publisher.publish(name: oldName, port: 47_002)
            let foundOld = try await browsed.wait("found old", Self.found(oldName)).index

            try await publisher.update(name: newName, port: 47_003, txt: ["e": "11"])
            try await published.wait("established new", Self.established(newName))
            try await browsed.wait(from: foundOld, "removed old", Self.removed(oldName))
            let (event, foundNew) = try await browsed.wait(from: foundOld, "found new", Self.found(newName))
            if case .found(let endpoint) = event {
                #expect(endpoint.port == 47_003 && endpoint.txt == ["e": "11"])
            }
            #expect(await publisher.currentName == newName)

            await publisher.withdraw()
            try await browsed.wait(from: foundNew, "removed new", Self.removed(newName))
            #expect(await browser.endpoints.isEmpty)
            await publisher.close()
            await browser.stop()
        }
    }

    @Test func publisherRepublishesAfterTheDaemonRestarts() async throws {
        try await withAvahi { environment, connection in
            let (_, keys) = try member(5)
            let name = keys.mdnsInstanceName(epoch: 99)
            let publisher = AvahiPublisher(connection: connection)
            let published = EventLog(publisher.events)
            let browser = AvahiBrowser(connection: connection)
            let browsed = EventLog(browser.events)
            try await browser.start()
            try await publisher.publish(name: name, port: 47_004)
            let first = try await published.wait("established", Self.established(name)).index
            let firstFound = try await browsed.wait("found", Self.found(name)).index

            try await environment.restartAvahi()

            let lost = try await published.wait(from: first + 1, "daemonLost") { $0 == .daemonLost }.index
            try await published.wait(from: lost, "established again", Self.established(name))
            // The browser restarts too: the instance goes away with the daemon and comes back.
            try await browsed.wait(from: firstFound, "removed with the daemon", Self.removed(name))
            let lostBrowse = try await browsed.wait(from: firstFound, "browser daemonLost") { $0 == .daemonLost }.index
            let (event, _) = try await browsed.wait(from: lostBrowse, "found again", Self.found(name))
            if case .found(let endpoint) = event { #expect(endpoint.port == 47_004) }
            await publisher.close()
            await browser.stop()
        }
    }

    @Test func publishingWhileTheDaemonIsDownHappensWhenItComesBack() async throws {
        try await withAvahi { environment, connection in
            let publisher = AvahiPublisher(connection: connection)
            let published = EventLog(publisher.events)
            try await environment.stopAvahi()
            await #expect(throws: AvahiError.daemonUnavailable) {
                try await publisher.publish(name: "waiting-for-avahi", port: 47_005)
            }
            try await environment.startAvahi()
            try await published.wait("established after start", Self.established("waiting-for-avahi"))
            await publisher.close()
        }
    }

    @Test func nameCollisionIsReported() async throws {
        try await withAvahi { _, connection in
            let first = AvahiPublisher(connection: connection)
            let published = EventLog(first.events)
            try await first.publish(name: "same-name", port: 47_006)
            try await published.wait("established", Self.established("same-name"))
            let second = AvahiPublisher(connection: connection)
            await #expect(throws: AvahiError.collision) { try await second.publish(name: "same-name", port: 47_007) }
            // The caller picks another name; the same publisher then works.
            let secondEvents = EventLog(second.events)
            try await second.update(name: "same-name #2", port: 47_007)
            try await secondEvents.wait("established #2", Self.established("same-name #2"))
            await first.close()
            await second.close()
        }
    }

    @Test func pairingEndpointCarriesTheSessionID() async throws {
        try await withAvahi { _, connection in
            let sid: [UInt8] = [0xde, 0xad, 0xbe, 0xef, 0x00, 0x11, 0x22, 0x33]
            let browser = AvahiBrowser(connection: connection, serviceType: BatonServiceType.pairing)
            let browsed = EventLog(browser.events)
            try await browser.start()
            let publisher = AvahiPublisher(connection: connection, serviceType: BatonServiceType.pairing)
            try await publisher.publish(name: "baton pairing", port: 47_008, txt: try PairingEndpointTXT.txt(sessionID: sid))
            let (event, _) = try await browsed.wait("found pairing", Self.found("baton pairing"))
            guard case .found(let endpoint) = event else { return }
            #expect(endpoint.type == BatonServiceType.pairing)
            #expect(PairingEndpointTXT.sessionID(from: endpoint.txt) == sid)
            await publisher.close()
            await browser.stop()
        }
    }

    @Test func browserTableIsBounded() async throws {
        try await withAvahi { _, connection in
            let browser = AvahiBrowser(connection: connection, maxEntries: 2)
            let browsed = EventLog(browser.events)
            try await browser.start()
            var publishers: [AvahiPublisher] = []
            for index in 0..<3 {
                let publisher = AvahiPublisher(connection: connection)
                try await publisher.publish(name: "bounded-\(index)", port: UInt16(47_010 + index))
                publishers.append(publisher)
            }
            let (_, firstIndex) = try await browsed.wait("first found") { if case .found = $0 { true } else { false } }
            try await browsed.wait(from: firstIndex + 1, "second found") { if case .found = $0 { true } else { false } }
            // Give Avahi time to announce the third; it must not enter the table.
            let deadline = ContinuousClock.now + .seconds(10)
            while await browser.droppedItems == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            #expect(await browser.droppedItems == 1)
            #expect(await browser.endpoints.count == 2)
            for publisher in publishers { await publisher.close() }
            await browser.stop()
        }
    }

    @Test func invalidInputIsRejectedLocally() async throws {
        try await withAvahi { _, connection in
            let publisher = AvahiPublisher(connection: connection)
            await #expect(throws: AvahiError.self) { try await publisher.publish(name: "", port: 1) }
            await #expect(throws: AvahiError.self) { try await publisher.publish(name: String(repeating: "x", count: 64), port: 1) }
            await #expect(throws: AvahiError.self) { try await publisher.publish(name: "ok", port: 1, txt: ["a=b": "c"]) }
            let badType = AvahiPublisher(connection: connection, serviceType: "not a type")
            await #expect(throws: AvahiError.invalidServiceType) { try await badType.publish(name: "ok", port: 1) }
            await publisher.close()
            await badType.close()
        }
    }
}

/// Fails (instead of skipping) when CI demands the live environment and it is missing.
@Suite struct AvahiEnvironmentRequirement {
    @Test(.enabled(if: AvahiTestEnvironment.required, "BATON_REQUIRE_AVAHI is not set"))
    func liveEnvironmentIsAvailableWhenRequired() {
        #expect(AvahiTestEnvironment.unavailableReason == nil, "\(AvahiTestEnvironment.unavailableReason ?? "")")
    }
}

