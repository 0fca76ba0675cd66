// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import BatonTestBus
import Foundation
import CBusSocket
import Synchronization
import Testing

/// While the bus takes a service's replies slower than callers ask (a client pipelining 40,000
/// Introspect calls took batond to 135 MiB), the service stops reading: what is not yet read waits
/// in the bus and the kernel, and the replies it holds stay under the outbox's high mark. Here the
/// test plays the bus on a socket of its own, so it decides when replies are taken.
@Suite("BatonDBus: replies the bus does not take pause reading")
struct OutboxBackpressureTests {
    /// The bus side of one connection: SASL, Hello, then raw messages.
    final class FakeBus: @unchecked Sendable {
        let path: String
        let listener: Int32
        var peer: Int32 = -1

        init() throws {
            path = "/tmp/baton-fakebus-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            #expect(bound == 0)
            #expect(listen(listener, 1) == 0)
        }

        deinit {
            close(listener)
            if peer >= 0 { close(peer) }
            unlink(path)
        }

        func line() -> String {
            var bytes: [UInt8] = []
            var byte: UInt8 = 0
            while recv(peer, &byte, 1, 0) == 1 {
                if byte == 0 && bytes.isEmpty { continue }
                bytes.append(byte)
                if bytes.suffix(2) == [13, 10] { break }
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        func sendAll(_ bytes: [UInt8]) {
            var sent = 0
            while sent < bytes.count {
                let count = bytes.withUnsafeBytes { Glibc.send(peer, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { return }
                sent += count
            }
        }

        /// Reads one whole message and returns its bytes.
        func readMessage() -> [UInt8] {
            func exactly(_ count: Int) -> [UInt8] {
                var bytes = [UInt8](repeating: 0, count: count)
                var got = 0
                while got < count {
                    let received = bytes.withUnsafeMutableBytes { recv(peer, $0.baseAddress! + got, count - got, 0) }
                    guard received > 0 else { return [] }
                    got += received
                }
                return bytes
            }
            let fixed = exactly(16)
            guard let lengths = IncomingMessageFramer.lengths(ofFixedHeader: fixed) else { return [] }
            return fixed + exactly(lengths.total - 16)
        }

        /// Accepts the connection and answers SASL and Hello as dbus-daemon does.
        func greet() throws {
            peer = accept(listener, nil, nil)
            #expect(line().hasPrefix("AUTH EXTERNAL"))
            sendAll(Array("OK 0123456789abcdef0123456789abcdef\r\n".utf8))
            #expect(line() == "NEGOTIATE_UNIX_FD\r\n")
            sendAll(Array("AGREE_UNIX_FD\r\n".utf8))
            #expect(line() == "BEGIN\r\n")
            _ = readMessage()
            var reply = DBusMessage(kind: .methodReturn)
            reply.serial = 1
            reply.replySerial = 1
            reply.sender = "org.freedesktop.DBus"
            reply.destination = ":1.7"
            sendAll(try reply.encoded(body: [.string(":1.7")]).bytes)
        }
    }

    /// Runs blocking socket work on a thread of its own, never on the pool the service's handlers need.
    static func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }

    @Test func aServiceStopsReadingWhileTheBusTakesNoReplies() async throws {
        let bus = try FakeBus()
        async let greeted: Void = Self.onThread { try bus.greet() }
        try await Task.sleep(for: .milliseconds(50))
        let service = try DBusConnection(bus: .address("unix:path=\(bus.path)"))
        try await greeted
        // Both readiness watches of the socket exist from the start: filling the socket makes none
        // (made then, at the descriptor limit it failed and nothing flushed again: batond wedged).
        let socket = try #require(service.core.socketDescriptor)
        let watchesAtStart = Set(epollInstances().filter { $0.watched.contains(socket) }.map(\.instance))
        #expect(watchesAtStart.count == 2)
        let served = Atomic<Int>(0)
        let reply = String(repeating: "r", count: 16 << 10)
        try await service.export([DBusInterface("org.baton.Echo", methods: [
            DBusMethod("Big", out: [DBusArgument("value", "s")]) { _ in
                served.add(1, ordering: .relaxed)
                return [.string(reply)]
            },
        ])], at: "/echo")
        // 2,000 calls of 16 KiB replies each (32 MiB in all), written while nothing is read back.
        let calls = 2_000
        var stream: [UInt8] = []
        for serial in 1...UInt32(calls) {
            var call = DBusMessage.methodCall(destination: ":1.7", path: "/echo", interface: "org.baton.Echo", member: "Big")
            call.serial = serial
            // Each from a caller of its own, so the limit of calls per caller plays no part.
            call.sender = ":1.\(1_000 + serial)"
            stream += try call.encoded(body: []).bytes
        }
        let finalStream = stream
        async let written: Void = Self.onThread { bus.sendAll(finalStream) }
        // Let the service run until it stops on its own.
        var last = -1
        while served.load(ordering: .relaxed) != last {
            last = served.load(ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(300))
        }
        let outbox = service.core.onQueue { service.core.outboxBytes }
        #expect(Set(epollInstances().filter { $0.watched.contains(socket) }.map(\.instance)) == watchesAtStart)
        #expect(last < calls / 2, "the service kept reading: \(last) calls served with no reply taken")
        // Over the high mark only by the replies of handlers already running when it was crossed, at
        // most `runningAtMost` (without the pause: all 2,000, 33 MB; without that cap, under load,
        // 14 MB: every call read had started before the first reply was counted).
        let bound = DBusConnectionConfiguration().outboxHighWater + DBusConnectionConfiguration().runningAtMost * (reply.utf8.count + 256)
        #expect(outbox <= bound, "the outbox holds \(outbox) bytes")
        // Once the bus takes the replies, every call is served and answered.
        let (returned, refused) = try await Self.onThread { () -> (Int, Int) in
            var returned = 0, refused = 0
            while returned + refused < calls {
                let message = bus.readMessage()
                guard !message.isEmpty else { break }
                if message[1] == 2 { returned += 1 } else if message[1] == 3 { refused += 1 }
            }
            return (returned, refused)
        }
        try await written
        #expect(returned == calls && refused == 0)
        #expect(served.load(ordering: .relaxed) == calls)
        service.close()
    }

    /// Calls accepted but waiting for their caller's earlier ones start only while the bus keeps up:
    /// their replies, built regardless, made the outbox hold 1 GiB in an attack (128 pipelined
    /// GetManagedObjects of 4 MB from each of two connections).
    @Test func waitingCallsStartOnlyWhileTheBusTakesReplies() async throws {
        let bus = try FakeBus()
        async let greeted: Void = Self.onThread { try bus.greet() }
        try await Task.sleep(for: .milliseconds(50))
        let service = try DBusConnection(bus: .address("unix:path=\(bus.path)"))
        try await greeted
        let served = Atomic<Int>(0)
        let reply = String(repeating: "r", count: 64 << 10)
        try await service.export([DBusInterface("org.baton.Echo", methods: [
            DBusMethod("Big", out: [DBusArgument("value", "s")]) { _ in
                served.add(1, ordering: .relaxed)
                return [.string(reply)]
            },
        ])], at: "/echo")
        // 128 calls of one caller (all accepted: the limit per caller), 8 MiB of replies in all.
        let calls = DBusConnectionConfiguration().maxHandlersPerSender
        var stream: [UInt8] = []
        for serial in 1...UInt32(calls) {
            var call = DBusMessage.methodCall(destination: ":1.7", path: "/echo", interface: "org.baton.Echo", member: "Big")
            call.serial = serial
            call.sender = ":1.8"
            stream += try call.encoded(body: []).bytes
        }
        let finalStream = stream
        try await Self.onThread { bus.sendAll(finalStream) }
        var last = -1
        while served.load(ordering: .relaxed) != last {
            last = served.load(ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(300))
        }
        let outbox = service.core.onQueue { service.core.outboxBytes }
        #expect(last < calls, "every accepted call ran although the bus took no reply (\(last))")
        #expect(outbox <= DBusConnectionConfiguration().outboxHighWater + DBusConnectionConfiguration().runningPerSender * (reply.utf8.count + 256), "the outbox holds \(outbox) bytes")
        let returned = try await Self.onThread { () -> Int in
            var returned = 0
            while returned < calls {
                let message = bus.readMessage()
                guard !message.isEmpty else { break }
                if message[1] == 2 { returned += 1 }
            }
            return returned
        }
        #expect(returned == calls)
        #expect(served.load(ordering: .relaxed) == calls)
        service.close()
    }
}
