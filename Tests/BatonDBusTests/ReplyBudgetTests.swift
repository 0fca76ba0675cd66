// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// Replies to a connection's own calls have their own budget (issue 24, item 4): they are read
/// while incoming calls wait for the bus to take the outbox, and one over `maxReplyBytes` fails its
/// call at once, saying so. The limits are the connection's configuration, and the library changes
/// no malloc setting of the process. The test plays the bus (OutboxBackpressureTests.FakeBus).
@Suite("BatonDBus: replies to our own calls have their own budget")
struct ReplyBudgetTests {
    typealias FakeBus = OutboxBackpressureTests.FakeBus

    static func connect(_ bus: FakeBus, _ make: @escaping @Sendable () throws -> DBusConnection) async throws -> DBusConnection {
        async let greeted: Void = OutboxBackpressureTests.onThread { try bus.greet() }
        try await Task.sleep(for: .milliseconds(50))
        let service = try make()
        try await greeted
        return service
    }

    /// The serial of the one call `connection` awaits a reply to (polled: the call is sent from a task).
    static func awaitedSerial(_ connection: DBusConnection) async throws -> UInt32 {
        for _ in 0..<500 {
            if let serial = connection.core.onQueue({ connection.core.replies.serials.first }) { return serial }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw DBusError.failed("the call was never sent")
    }

    static func reply(to serial: UInt32, from sender: String, _ body: [DBusValue]) throws -> [UInt8] {
        var reply = DBusMessage(kind: .methodReturn)
        reply.serial = 90_000
        reply.replySerial = serial
        reply.sender = sender
        reply.destination = ":1.7"
        return try reply.encoded(body: body).bytes
    }

    /// Before: with the outbox over its high mark the service stopped reading altogether, so BlueZ's
    /// reply behind callers' calls waited out the call's timeout (batond said "bluetoothd is not
    /// running").
    @Test func aReplyIsReadWhileCallsWaitForTheBusToTakeTheOutbox() async throws {
        let bus = try FakeBus()
        let service = try await Self.connect(bus) { try DBusConnection(bus: .address("unix:path=\(bus.path)")) }
        let big = String(repeating: "r", count: 16 << 10)
        try await service.export([DBusInterface("org.baton.Echo", methods: [
            DBusMethod("Big", out: [DBusArgument("value", "s")]) { _ in [.string(big)] },
        ])], at: "/echo")
        // The service's own call (as batond's to bluetoothd), sent before the flood.
        let started = ContinuousClock.now
        async let answer = service.call(destination: ":1.99", path: "/", interface: "org.bluez.Fake", method: "Get",
                                        timeout: .seconds(20))
        let serial = try await Self.awaitedSerial(service)
        // 1,000 calls whose 16 KiB replies (16 MiB) the bus does not take, then the reply.
        let calls = 1_000
        var stream: [UInt8] = []
        for number in 1...UInt32(calls) {
            var call = DBusMessage.methodCall(destination: ":1.7", path: "/echo", interface: "org.baton.Echo", member: "Big")
            call.serial = number
            call.sender = ":1.\(1_000 + number)"
            stream += try call.encoded(body: []).bytes
        }
        stream += try Self.reply(to: serial, from: ":1.99", [.string("answer")])
        let finalStream = stream
        let written = Task { try await OutboxBackpressureTests.onThread { bus.sendAll(finalStream) } }
        let values = try await answer
        let waited = ContinuousClock.now - started
        #expect(values == [.string("answer")])
        #expect(waited < .seconds(15), "the reply waited \(waited) behind the calls")
        // Calls read meanwhile were held, not dispatched: the outbox stayed near its high mark.
        let outbox = service.core.onQueue { service.core.outboxBytes }
        let configuration = DBusConnectionConfiguration()
        #expect(outbox <= configuration.outboxHighWater + configuration.runningAtMost * (big.utf8.count + 256))
        // Once the bus takes the replies, every held call is answered, in order.
        let returned = try await OutboxBackpressureTests.onThread { () -> Int in
            var returned = 0
            while returned < calls {
                let message = bus.readMessage()
                guard !message.isEmpty else { break }
                if message[1] == 2 { returned += 1 }
            }
            return returned
        }
        try await written.value
        #expect(returned == calls)
        service.close()
    }

    /// Before: a reply over the connection's limit was skipped and the call waited out its timeout
    /// (25 s by default), then failed with NoReply.
    @Test func anOversizedReplyFailsItsCallAtOnceSayingSo() async throws {
        let bus = try FakeBus()
        let limit = 64 << 10
        let service = try await Self.connect(bus) { try DBusConnection(bus: .address("unix:path=\(bus.path)"), maxIncomingMessageBytes: limit) }
        let started = ContinuousClock.now
        async let answer = service.call(destination: ":1.99", path: "/", interface: "org.bluez.Fake", method: "GetManagedObjects",
                                        timeout: .seconds(20))
        let serial = try await Self.awaitedSerial(service)
        let reply = try Self.reply(to: serial, from: ":1.99", [.string(String(repeating: "o", count: 256 << 10))])
        let written = Task { try await OutboxBackpressureTests.onThread { bus.sendAll(reply) } }
        do {
            _ = try await answer
            Issue.record("an oversized reply was returned")
        } catch let error as DBusError {
            #expect(error.name == DBusError.replyTooLargeName, "\(error)")
            #expect(error.message.contains("\(reply.count) bytes") && error.message.contains("\(limit) bytes"), "\(error.message)")
        }
        #expect(ContinuousClock.now - started < .seconds(15), "the call waited for its timeout")
        try await written.value
        // The connection goes on: the next call gets its (small) reply.
        async let next = service.call(destination: ":1.99", path: "/", interface: "org.bluez.Fake", method: "Get", timeout: .seconds(20))
        let nextSerial = try await Self.awaitedSerial(service)
        let small = try Self.reply(to: nextSerial, from: ":1.99", [.uint32(7)])
        try await OutboxBackpressureTests.onThread { bus.sendAll(small) }
        #expect(try await next == [.uint32(7)])
        service.close()
    }

    /// An oversized reply from someone the call did not go to is dropped (it cannot end the call).
    @Test func anOversizedForgedReplyDoesNotEndTheCall() async throws {
        let bus = try FakeBus()
        let service = try await Self.connect(bus) { try DBusConnection(bus: .address("unix:path=\(bus.path)"), maxIncomingMessageBytes: 64 << 10) }
        async let answer = service.call(destination: ":1.99", path: "/", interface: "org.bluez.Fake", method: "Get", timeout: .seconds(20))
        let serial = try await Self.awaitedSerial(service)
        let forged = try Self.reply(to: serial, from: ":1.66", [.string(String(repeating: "o", count: 256 << 10))])
        let real = try Self.reply(to: serial, from: ":1.99", [.uint32(1)])
        try await OutboxBackpressureTests.onThread { bus.sendAll(forged + real) }
        #expect(try await answer == [.uint32(1)])
        service.close()
    }

    /// The next method return or error the service sends (skipping its calls and signals).
    static func nextAnswer(_ bus: FakeBus) async throws -> DBusMessage {
        let bytes = try await OutboxBackpressureTests.onThread { () -> [UInt8] in
            while true {
                let message = bus.readMessage()
                if message.count < 16 || message[1] == 2 || message[1] == 3 { return message }
            }
        }
        return try DBusMessage.parse(bytes, descriptors: [])
    }

    /// The limits are the connection's: here two calls of one caller at most.
    @Test func theLimitsAreTheConnectionsConfiguration() async throws {
        let bus = try FakeBus()
        let service = try await Self.connect(bus) {
            try DBusConnection(bus: .address("unix:path=\(bus.path)"),
                               configuration: DBusConnectionConfiguration(runningPerSender: 1, maxHandlersPerSender: 2))
        }
        let release = Mutex<[CheckedContinuation<Void, Never>]>([])
        try await service.export([DBusInterface("org.baton.Slow", methods: [
            DBusMethod("Wait") { _ in
                await withCheckedContinuation { continuation in release.withLock { $0.append(continuation) } }
                return []
            },
        ])], at: "/slow")
        var stream: [UInt8] = []
        for number in 1...UInt32(3) {
            var call = DBusMessage.methodCall(destination: ":1.7", path: "/slow", interface: "org.baton.Slow", member: "Wait")
            call.serial = number
            call.sender = ":1.8"
            stream += try call.encoded(body: []).bytes
        }
        let finalStream = stream
        try await OutboxBackpressureTests.onThread { bus.sendAll(finalStream) }
        // The third call is refused at once; the first two are being served.
        let parsed = try await Self.nextAnswer(bus)
        #expect(parsed.kind == .error && parsed.errorName == DBusError.limitsExceededName && parsed.replySerial == 3)
        for _ in 0..<200 where release.withLock({ $0.count }) < 1 { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(release.withLock { $0.count } == 1, "runningPerSender 1: one handler runs, the other waits")
        for _ in 0..<2 {
            for _ in 0..<200 where release.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(20)) }
            release.withLock { waiting in for continuation in waiting { continuation.resume() }; waiting = [] }
            let answered = try await Self.nextAnswer(bus)
            #expect(answered.kind == .methodReturn)
        }
        service.close()
    }

    /// Before: opening a connection set glibc's M_MMAP_THRESHOLD for the whole process (every app
    /// linking BatonClient). Unset, glibc raises the threshold to the size of a mapped block freed,
    /// so after a 1 MiB block is freed a 512 KiB one comes from the heap; with 256 KiB set it would
    /// be mapped (IS_MMAPPED, bit 1 of the chunk's size word, glibc's layout).
    @Test func openingAConnectionChangesNoMallocSetting() async throws {
        let bus = try FakeBus()
        let service = try await Self.connect(bus) { try DBusConnection(bus: .address("unix:path=\(bus.path)")) }
        defer { service.close() }
        let large = try #require(malloc(1 << 20))
        free(large)
        let medium = try #require(malloc(512 << 10))
        defer { free(medium) }
        let mapped = medium.load(fromByteOffset: -MemoryLayout<Int>.size, as: UInt.self) & 0x2 != 0
        #expect(!mapped, "a 512 KiB block was mapped: someone set M_MMAP_THRESHOLD")
    }
}
