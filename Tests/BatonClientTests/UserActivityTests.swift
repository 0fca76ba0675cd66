// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonClient
import BatonCore
import BatonDBus
import Foundation
import Synchronization
import Testing

/// Answers WillSave by writing fresh state into the activity, and records continuations.
final class FreshStateDelegate: UserActivityDelegate {
    let saves = Mutex(0)
    let continuedOn = Mutex<[String]>([])

    func userActivityWillSave(_ activity: UserActivity) async {
        let count = saves.withLock { count in
            count += 1
            return count
        }
        activity.addUserInfoEntries(from: ["page": .integer(Int64(100 + count))])
        activity.title = "Saved \(count)"
    }

    func userActivityWasContinued(_ activity: UserActivity, on device: String) async {
        continuedOn.withLock { $0.append(device) }
    }
}

@Suite("UserActivity against batond", .serialized)
struct UserActivityTests {
    static let type = "org.example.Reader.reading"

    @Test("create, update, become current, resign and invalidate round-trip through the daemon")
    func lifecycle() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let activity = connection.makeActivity(type: Self.type)
            activity.title = "Chapter 1"
            activity.userInfo = ["page": .integer(12), "when": .date(1_795_953_600), "raw": .bytes([1, 2, 3]),
                                 "nested": .dictionary(["tags": .array([.string("a"), .double(0.5), .boolean(true)])])]
            activity.webpageURL = URL(string: "https://example.org/book#12")
            activity.version = 3
            #expect(activity.objectPath == nil)

            let path = try await activity.publish()
            #expect(activity.objectPath == path)
            var info = try await connection.activity(at: path)
            #expect(info.activityType == Self.type)
            #expect(info.title == "Chapter 1")
            #expect(info.userInfo == activity.userInfo)
            #expect(info.webpageURL == "https://example.org/book#12")
            #expect(info.version == 3)
            #expect(info.isCurrent == false)
            #expect(info.status == "idle")
            #expect(info.owner == getuid())
            #expect(try await connection.currentActivityPath() == nil)

            // Local changes reach the daemon with becomeCurrent; a removed URL is removed there too.
            activity.title = "Chapter 2"
            activity.userInfo["page"] = .integer(40)
            activity.webpageURL = nil
            activity.version = 4
            try await activity.becomeCurrent()
            info = try await connection.activity(at: path)
            #expect(info.title == "Chapter 2")
            #expect(info.userInfo?["page"] == .integer(40))
            #expect(info.webpageURL == nil)
            #expect(info.version == 4)
            #expect(info.isCurrent == true)
            #expect(try await connection.currentActivityPath() == path)
            #expect(try await connection.activities().map(\.path) == [path])

            try await activity.resignCurrent()
            #expect(try await activity.fetchInfo().isCurrent == false)
            #expect(try await connection.currentActivityPath() == nil)

            await activity.invalidate()
            #expect(!activity.isValid)
            #expect(try await connection.activities().isEmpty)
            await expectActivityGone { _ = try await connection.activity(at: path) }
            await expectClientError(BatonClientError.Code.unknownActivity.rawValue) { try await activity.becomeCurrent() }
        }
    }

    @Test("a second current activity makes the first resign")
    func currentIsExclusive() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let first = connection.makeActivity(type: Self.type)
            let second = connection.makeActivity(type: "org.example.Reader.editing")
            try await first.becomeCurrent()
            try await second.becomeCurrent()
            #expect(try await first.fetchInfo().isCurrent == false)
            #expect(try await second.fetchInfo().isCurrent == true)
            #expect(try await connection.currentActivityPath() == second.objectPath)
        }
    }

    // Answered WillSave: the daemon waits up to 30 s here, so a loaded machine cannot turn the answer into a timeout.
    @Test("the delegate's fresh state is what GetPayload returns")
    func willSaveAnswered() async throws {
        try await withDaemon(saveTimeout: 30) { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let delegate = FreshStateDelegate()
            let activity = connection.makeActivity(type: Self.type)
            activity.title = "Stale"
            activity.userInfo = ["page": .integer(1), "book": .string("Dune")]
            activity.needsSave = true
            activity.delegate = delegate
            let path = try await activity.publish()

            // Another connection asks, as the transfer would.
            let observer = try daemon.connect()
            defer { observer.close() }
            let payload = try await observer.payload(ofActivityAt: path)
            #expect(delegate.saves.withLock { $0 } == 1)
            #expect(payload.title == "Saved 1")
            #expect(payload.userInfo == ["page": .integer(101), "book": .string("Dune")])
            #expect(payload.activityType == Self.type)
            #expect(try await connection.activity(at: path).lastError == nil)
        }
    }

    @Test("without a delegate, WillSave sends the latest local properties")
    func willSaveWithoutDelegate() async throws {
        try await withDaemon(saveTimeout: 30) { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let activity = connection.makeActivity(type: Self.type)
            activity.needsSave = true
            activity.title = "Published"
            let path = try await activity.publish()
            activity.title = "Edited locally"
            activity.userInfo = ["scroll": .double(0.75)]
            let payload = try await connection.payload(ofActivityAt: path)
            #expect(payload.title == "Edited locally")
            #expect(payload.userInfo == ["scroll": .double(0.75)])
        }
    }

    @Test("the delegate is held weakly")
    func delegateIsWeak() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let activity = connection.makeActivity(type: Self.type)
            do {
                let delegate = FreshStateDelegate()
                activity.delegate = delegate
                #expect(activity.delegate != nil)
            }
            #expect(activity.delegate == nil)
        }
    }

    @Test("daemon errors surface as BatonClientError with the org.baton.Error name")
    func daemonErrors() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let badType = connection.makeActivity(type: "no-dots")
            await expectClientError(BatonClientError.Code.invalidArguments.rawValue) { try await badType.publish() }
            #expect(badType.objectPath == nil)

            let tooBig = connection.makeActivity(type: Self.type)
            tooBig.userInfo = ["blob": .bytes(Array(repeating: 7, count: 70_000))]
            await expectClientError(BatonClientError.Code.payloadTooLarge.rawValue) { try await tooBig.publish() }

            let activity = connection.makeActivity(type: Self.type)
            try await activity.publish()
            activity.userInfo = ["bad": .double(.nan)]
            do throws(BatonClientError) {
                try await activity.becomeCurrent()
                Issue.record("NaN was accepted")
            } catch {
                #expect(error.code == .invalidArguments)
                #expect(!error.message.isEmpty)
            }

            await expectActivityGone { _ = try await connection.payload(ofActivityAt: "/org/baton/activity/u\(getuid())_999999") }
        }
    }

    @Test("closing the connection invalidates its activities")
    func connectionOwnsActivities() async throws {
        try await withDaemon { daemon in
            let observer = try daemon.connect()
            defer { observer.close() }
            let connection = try daemon.connect()
            let activity = connection.makeActivity(type: Self.type)
            try await activity.becomeCurrent()
            #expect(try await observer.activities().count == 1)
            connection.close()
            try await eventually("activity gone after disconnect") { try await observer.activities().isEmpty }
        }
    }

    @Test("two daemons on one bus under different names stay apart")
    func nonDefaultBusName() async throws {
        try await withDaemon { daemon in
            let second = Process()
            second.executableURL = URL(fileURLWithPath: try Built.executable("batond"))
            let otherName = daemon.busName + ".Second"
            let stateDirectory = daemon.bus.directory.appendingPathComponent("state2").path
            second.arguments = ["--bus-address", daemon.bus.address, "--bus-name", otherName, "--state-dir", stateDirectory, "--no-radio", "--no-avahi"]
            second.standardError = FileHandle.nullDevice
            try launch(second)
            defer {
                kill(second.processIdentifier, SIGKILL)
                for _ in 0..<200 where second.isRunning { usleep(10_000) }
            }
            let probe = try daemon.rawConnection()
            defer { probe.close() }
            try await eventually("second daemon owns its name") { try await probe.nameHasOwner(otherName) }

            let first = try daemon.connect()
            defer { first.close() }
            let other = try BatonConnection(bus: .address(daemon.bus.address), busName: otherName)
            defer { other.close() }
            // Kept alive for the whole check: a UserActivity the app drops is invalidated (like NSUserActivity).
            let activity = first.makeActivity(type: Self.type)
            try await activity.publish()
            let listed = try await first.activities()
            #expect(listed.count == 1, "\(listed)")
            #expect(try await other.activities().isEmpty)
            #expect(try await other.status().busName == otherName)
            withExtendedLifetime(activity) {}
        }
    }

    @Test("status reports the daemon's state")
    func status() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let status = try await connection.status()
            #expect(["starting", "running", "degraded"].contains(status.state))
            #expect(status.busName == daemon.busName)
            #expect(!status.version.isEmpty)
            #expect(["off", "unavailable"].contains(status.radio), "radio is disabled: \(status.radio)")
        }
    }

    @Test("no daemon on the bus gives the bus's error name")
    func noDaemon() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let connection = try BatonConnection(bus: .address(bus.address), busName: "org.baton.Nobody")
        defer { connection.close() }
        await expectClientError(DBusError.serviceUnknownName) { _ = try await connection.handledTypes() }
    }
}

@Suite("UserActivity concurrency against batond")
struct UserActivityConcurrencyTests {
    @Test("concurrent edits and publishes from many tasks end with the daemon holding the last state")
    func concurrentEdits() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let activity = connection.makeActivity(type: "org.example.Reader.reading")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<40 {
                    group.addTask {
                        activity.addUserInfoEntries(from: ["task\(task)": .integer(Int64(task))])
                        activity.title = "Task \(task)"
                        if task % 4 == 0 { try await activity.becomeCurrent() } else { try await activity.publish() }
                    }
                }
                try await group.waitForAll()
            }
            try await activity.publish()
            let info = try await activity.fetchInfo()
            #expect(info.userInfo?.count == 40)
            #expect(info.userInfo == activity.userInfo)
            #expect(info.title == activity.title)
            #expect(info.isCurrent == true)
            #expect(try await connection.activities().count == 1)
        }
    }
}
