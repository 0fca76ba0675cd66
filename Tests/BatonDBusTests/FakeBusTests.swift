// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import BatonTestBus
import CBusSocket
import Dispatch
import Foundation
import Testing

/// One end of a bus connection played by the test: it listens on a socket of its own, answers the
/// EXTERNAL handshake and Hello (naming the client ":1.7"), and then sends whatever bytes and
/// descriptors a test wants, as a misbehaving (or forwarding) bus could. Blocking, with timeouts of
/// several seconds on every read.
final class FakeBus: @unchecked Sendable {
    let directory: String
    let path: String
    private let listener: Int32
    private(set) var peer: Int32 = -1
    private var received: [UInt8] = []
    private let accepted = DispatchSemaphore(value: 0)
    private(set) var authLine = ""

    init() throws {
        directory = NSTemporaryDirectory() + "baton-fakebus-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        path = directory + "/bus"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { room in
            for (index, byte) in path.utf8.enumerated() { room[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 1) == 0 else { throw TestBusError.daemonDidNotStart }
        // The handshake runs while the client's (blocking) connect waits for it.
        let thread = Thread { [self] in serveHandshake() }
        thread.start()
    }

    var address: String { "unix:path=\(path)" }

    deinit {
        if peer >= 0 { close(peer) }
        close(listener)
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func serveHandshake() {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else {
            accepted.signal()
            return
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        _ = setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        peer = connection
        defer { accepted.signal() }
        var nul: UInt8 = 0
        guard recv(connection, &nul, 1, 0) == 1 else { return }
        while let line = readLine() {
            if line.hasPrefix("AUTH EXTERNAL") {
                authLine = line
                write(Array("OK 0123456789abcdef0123456789abcdef\r\n".utf8))
            } else if line == "NEGOTIATE_UNIX_FD" {
                write(Array("AGREE_UNIX_FD\r\n".utf8))
            } else if line == "BEGIN" {
                break
            }
        }
        guard let hello = readMessage(), hello.member == "Hello" else { return }
        var reply = DBusMessage(kind: .methodReturn)
        reply.serial = 1
        reply.replySerial = hello.serial
        reply.sender = "org.freedesktop.DBus"
        reply.destination = ":1.7"
        guard let bytes = try? reply.encoded(body: [.string(":1.7")]).bytes else { return }
        write(bytes)
    }

    /// Waits (up to 10 s) until the client has said Hello and been answered.
    func waitForClient() -> Bool { accepted.wait(timeout: .now() + 10) == .success && peer >= 0 }

    private func readLine() -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while recv(peer, &byte, 1, 0) == 1 {
            if byte == UInt8(ascii: "\n"), line.last == UInt8(ascii: "\r") { return String(decoding: line.dropLast(), as: UTF8.self) }
            line.append(byte)
        }
        return nil
    }

    /// Sends `bytes` with `descriptors` attached to them (one sendmsg).
    func write(_ bytes: [UInt8], descriptors: [Int32] = []) {
        var sent = 0
        while sent < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                descriptors.withUnsafeBufferPointer { fds in
                    baton_send_with_fds(peer, raw.baseAddress! + sent, raw.count - sent, sent == 0 ? fds.baseAddress : nil,
                                        sent == 0 ? Int32(fds.count) : 0)
                }
            }
            guard written > 0 else { return }
            sent += written
        }
    }

    /// The next whole message the client sends, nil when it closed or nothing came within 10 s.
    func readMessage() -> DBusMessage? {
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            if received.count >= 16, let lengths = IncomingMessageFramer.lengths(ofFixedHeader: Array(received[0..<16])),
               received.count >= lengths.total {
                let bytes = Array(received[0..<lengths.total])
                received.removeFirst(lengths.total)
                return try? DBusMessage.parse(bytes, descriptors: [])
            }
            let count = recv(peer, &chunk, chunk.count, 0)
            guard count > 0 else { return nil }
            received += chunk[0..<count]
        }
    }

    /// True once the client has closed its end (read returns end of file), within 10 s.
    func clientHasClosed() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = recv(peer, &chunk, chunk.count, 0)
            if count == 0 { return true }
            if count < 0 { return false }
        }
    }
}

/// A method call from ":1.9", as the bus would forward it.
func fakeBusCall(serial: UInt32, member: String, interface: String = "org.baton.Fake", body: [DBusValue] = [],
                 descriptorCount: UInt32? = nil) throws -> [UInt8] {
    var call = DBusMessage.methodCall(destination: ":1.7", path: "/fake", interface: interface, member: member)
    call.serial = serial
    call.sender = ":1.9"
    var bytes = try call.encoded(body: body)
    for descriptor in bytes.descriptors { close(descriptor) }
    if let descriptorCount {
        // Field 9 (UNIX_FDS) naming `descriptorCount`, whatever travels with the bytes.
        bytes.bytes = UnknownHeaderField.adding([9, 1, UInt8(ascii: "u"), 0] + (0..<4).map { UInt8(truncatingIfNeeded: descriptorCount >> (8 * $0)) },
                                                to: bytes.bytes)
    }
    return bytes.bytes
}

/// The inode of an open descriptor (what identifies a file across duplicates).
func inode(_ descriptor: Int32) -> UInt64 {
    var status = stat()
    return fstat(descriptor, &status) == 0 ? UInt64(status.st_ino) : 0
}

@Suite("BatonDBus: a bus that sends what it should not (fake bus)")
struct FakeBusTests {
    private static func connect(_ bus: FakeBus) throws -> DBusConnection {
        let connection = try DBusConnection(bus: .address(bus.address))
        #expect(bus.waitForClient())
        #expect(connection.uniqueName == ":1.7")
        return connection
    }

    /// A call whose header breaks the specification is answered with an error and dropped; the
    /// connection lives on (before: any header error closed it, and batond exited).
    @Test func aMalformedCallIsAnsweredAndTheConnectionLivesOn() async throws {
        let bus = try FakeBus()
        let connection = try Self.connect(bus)
        defer { connection.close() }
        // EXTERNAL names the effective uid, as libdbus does (what the bus compares with the peer's).
        let hex = String(geteuid()).utf8.map { String($0, radix: 16) }.joined()
        #expect(bus.authLine == "AUTH EXTERNAL \(hex)")
        // Interface "nodots" is no interface name.
        bus.write(try fakeBusCall(serial: 77, member: "Anything", interface: "nodots"))
        let error = try #require(bus.readMessage())
        #expect(error.kind == .error && error.replySerial == 77 && error.destination == ":1.9")
        #expect(error.errorName == DBusError.invalidArgsName)
        // A malformed call that wants no reply gets none; the next call is answered as usual.
        var quiet = try fakeBusCall(serial: 78, member: "Anything", interface: "nodots")
        quiet[2] |= DBusMessage.noReplyExpectedFlag
        bus.write(quiet)
        bus.write(try fakeBusCall(serial: 79, member: "Ping", interface: "org.freedesktop.DBus.Peer"))
        let pong = try #require(bus.readMessage())
        #expect(pong.kind == .methodReturn && pong.replySerial == 79)
        #expect(connection.core.socketDescriptor != nil)
    }

    /// A message whose header names a descriptor that did not come with it closes the connection:
    /// the descriptors can no longer be attributed (before, the message was taken).
    @Test func aDescriptorCountThatDoesNotMatchClosesTheConnection() async throws {
        let bus = try FakeBus()
        let connection = try Self.connect(bus)
        defer { connection.close() }
        bus.write(try fakeBusCall(serial: 80, member: "Ping", interface: "org.freedesktop.DBus.Peer", descriptorCount: 1))
        #expect(bus.clientHasClosed())
        #expect(await eventually(timeout: .seconds(10)) { connection.core.socketDescriptor == nil })
    }

    /// Call A names a descriptor but none came with it (the kernel drops what a process at its
    /// descriptor limit cannot take); call B brings its own. Before, descriptors waited in one queue:
    /// A took B's file (another caller's) and B was refused. Now nothing reaches a handler and the
    /// connection closes, as libdbus and sd-bus do.
    @Test func aCallNeverTakesAnotherCallsDescriptor() async throws {
        let bus = try FakeBus()
        let connection = try Self.connect(bus)
        defer { connection.close() }
        let tally = Tally()
        try await connection.export([DBusInterface("org.baton.Fake", methods: [
            DBusMethod("Take", in: [DBusArgument("file", "h")]) { call in
                if case .unixFD(let descriptor) = call.arguments.first {
                    tally.add(String(inode(descriptor)))
                    close(descriptor)
                }
                return []
            },
        ])], at: "/fake")
        var pipeB: [Int32] = [-1, -1]
        #expect(pipe(&pipeB) == 0)
        defer { close(pipeB[0]); close(pipeB[1]) }
        let callA = try fakeBusCall(serial: 81, member: "Take", body: [.unixFD(pipeB[0])])
        let callB = try fakeBusCall(serial: 82, member: "Take", body: [.unixFD(pipeB[0])])
        bus.write(callA)  // its descriptor lost on the way
        bus.write(callB, descriptors: [pipeB[0]])
        #expect(bus.clientHasClosed())
        #expect(!tally.entries.contains(String(inode(pipeB[0]))), "a handler got another call's descriptor")
    }

    /// Descriptors that arrive with the rest of a message (not its first bytes) belong to no message
    /// begun there: the connection closes, and no handler gets them.
    @Test func descriptorsAfterAMessagesFirstBytesCloseTheConnection() async throws {
        let bus = try FakeBus()
        let connection = try Self.connect(bus)
        defer { connection.close() }
        let tally = Tally()
        try await connection.export([DBusInterface("org.baton.Fake", methods: [
            DBusMethod("Take", in: [DBusArgument("file", "h")]) { call in
                if case .unixFD(let descriptor) = call.arguments.first {
                    tally.add(String(inode(descriptor)))
                    close(descriptor)
                }
                return []
            },
        ])], at: "/fake")
        var pipe1: [Int32] = [-1, -1]
        #expect(pipe(&pipe1) == 0)
        defer { close(pipe1[0]); close(pipe1[1]) }
        let call = try fakeBusCall(serial: 83, member: "Take", body: [.unixFD(pipe1[0])])
        bus.write(Array(call[0..<24]))
        // The client reads the first part on its own before the rest is sent.
        let socket = try #require(connection.core.socketDescriptor)
        #expect(await eventually(timeout: .seconds(10)) {
            var poll = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            return Glibc.poll(&poll, 1, 0) == 0
        })
        bus.write(Array(call[24...]), descriptors: [pipe1[0]])
        #expect(bus.clientHasClosed())
        #expect(tally.entries.isEmpty)
    }
}

@Suite("BatonDBus: descriptors stay with their message")
struct DescriptorAttributionTests {
    /// Two messages, each with one descriptor, cut anywhere: each message gets the descriptor
    /// that came with its first bytes.
    @Test func eachMessageGetsItsOwnDescriptors() throws {
        var pipes: [Int32] = [-1, -1]
        #expect(pipe(&pipes) == 0)
        defer { close(pipes[0]); close(pipes[1]) }
        let a = try fakeBusCall(serial: 1, member: "Take", body: [.unixFD(pipes[0])])
        let b = try fakeBusCall(serial: 2, member: "Take", body: [.unixFD(pipes[1])])
        for cut in [1, 7, 16, 40, a.count - 1, a.count, a.count + b.count] {
            var stream = IncomingMessageStream(limit: 1 << 20)
            let whole = a + b
            var start = 0
            var messages: [DBusMessage] = []
            while start < whole.count {
                // The kernel hands a message's descriptors over with the read holding its first
                // byte, and ends that read at the end of the data that carried them (A's whole
                // send); a read may hold A's tail and B's start.
                var end = min(start + cut, whole.count)
                var descriptors: [Int32] = []
                if start == 0 {
                    end = min(end, a.count)
                    descriptors.append(fcntl(pipes[0], F_DUPFD_CLOEXEC, 0))
                } else if start <= a.count, a.count < end {
                    descriptors.append(fcntl(pipes[1], F_DUPFD_CLOEXEC, 0))
                }
                _ = Array(whole[start..<end]).withUnsafeBytes { stream.feed($0, descriptors: descriptors) }
                while let message = try stream.next() { messages.append(message) }
                start = end
            }
            #expect(messages.map(\.serial) == [1, 2], "cut \(cut)")
            let inodes = try messages.map { message -> UInt64 in
                let values = try message.arguments(budget: .standard)
                guard case .unixFD(let descriptor) = values.first else { return 0 }
                defer { close(descriptor) }
                return inode(descriptor)
            }
            #expect(inodes == [inode(pipes[0]), inode(pipes[1])], "cut \(cut)")
        }
    }

    /// A malformed header drops that message alone, with what is needed to answer it.
    @Test func aMalformedMessageIsDroppedAlone() throws {
        let bad = try fakeBusCall(serial: 5, member: "Anything", interface: "nodots")
        let good = try fakeBusCall(serial: 6, member: "Ping", interface: "org.freedesktop.DBus.Peer")
        var stream = IncomingMessageStream(limit: 1 << 20)
        _ = (bad + good).withUnsafeBytes { stream.feed($0, descriptors: []) }
        let message = try #require(try stream.next())
        #expect(message.serial == 6)
        let dropped = stream.takeMalformed()
        #expect(dropped.count == 1)
        #expect(dropped.first?.serial == 5 && dropped.first?.sender == ":1.9" && dropped.first?.expectsReply == true)
    }
}
