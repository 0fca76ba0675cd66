// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes the pure parts of a BatonDBus connection with what the bus could send (issue 24, item 5):
// - authentication: the SASL client state machine and its line reader, fed arbitrary lines;
// - the incoming stream with descriptors: bytes cut anywhere, each read carrying 0-3 real
//   descriptors (as SCM_RIGHTS would), through the framer (size limits for calls and replies),
//   the header parser (UNIX_FDS against the descriptors that came) and the stream's attribution;
// - reply matching: replies, oversized replies and malformed ones matched by serial and sender
//   against the calls awaiting replies in a ReplyBook, as the connection does, and the
//   replies read as a caller would get them (DBusMessage.callResult).
//
// Invariants: no trap; SASL sends only what the protocol allows and begins only after OK, with
// descriptors only when the bus said AGREE_UNIX_FD; lines are cut as a reference splitter cuts them
// and never exceed the bound; a call is ended at most once, only by a reply with its serial from
// whom it went to (or an error from the bus); every descriptor handed to the stream is owned by
// exactly one message or closed, and none is left open once the messages and the stream are gone;
// the stream never hands out a message over its limit.
@testable import BatonDBus
import Glibc

let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)

func isOpen(_ descriptor: Int32) -> Bool { fcntl(descriptor, F_GETFD) != -1 }

// MARK: Authentication

func fuzzAuthentication(_ input: inout FuzzInput) {
    let uid = UInt32(input.byte()) << 24 | UInt32(input.byte()) << 16 | UInt32(input.byte()) << 8 | UInt32(input.byte())
    var client = SASLClient(uid: uid)
    let first = client.start()
    let hex = first.dropFirst("\0AUTH EXTERNAL ".utf8.count).dropLast(2)
    fuzzCheck(first.starts(with: [0] + Array("AUTH EXTERNAL ".utf8)) && first.suffix(2) == [13, 10], "AUTH line \(first)")
    var decoded: [UInt8] = []
    var digits = Array(hex)
    while digits.count >= 2 {
        decoded.append(UInt8(String(decoding: digits[0..<2], as: UTF8.self), radix: 16) ?? 0)
        digits.removeFirst(2)
    }
    fuzzCheck(String(decoding: decoded, as: UTF8.self) == String(uid), "AUTH names uid \(decoded), not \(uid)")

    let text = input.rest()
    // Reference: lines as the specification cuts them (ending \r\n), up to the bound.
    var expected: [[UInt8]] = []
    var start = 0
    var index = 0
    while index + 1 < text.count {
        if text[index] == 13, text[index + 1] == 10 {
            expected.append(Array(text[start..<index]))
            index += 2
            start = index
        } else {
            index += 1
        }
    }
    var reader = SASLLineReader()
    var lines: [[UInt8]] = []
    for byte in text {
        if let line = reader.take(byte) {
            fuzzCheck(line.count < SASLClient.maxLineBytes, "a line of \(line.count) bytes")
            lines.append(line)
        }
    }
    if !reader.overlong {
        fuzzCheck(lines == expected, "the reader cut \(lines.count) lines, the reference \(expected.count)")
    } else {
        fuzzCheck(expected.starts(with: lines), "the reader cut lines the reference does not")
    }

    var over = false
    for (number, line) in lines.enumerated() {
        let step = client.receive(line: line)
        if over {
            guard case .failed = step else { fuzzCheck(false, "a step after the end: \(step)"); return }
            continue
        }
        switch step {
        case .send(let bytes):
            fuzzCheck(number == 0 && line.starts(with: Array("OK ".utf8)) && bytes == Array("NEGOTIATE_UNIX_FD\r\n".utf8),
                      "sent \(bytes) after line \(number)")
        case .begin(let bytes, let unixFDs):
            fuzzCheck(number == 1 && lines[0].starts(with: Array("OK ".utf8)) && bytes == Array("BEGIN\r\n".utf8), "BEGIN after line \(number)")
            fuzzCheck(unixFDs == (line == Array("AGREE_UNIX_FD".utf8)), "descriptors agreed wrongly")
            over = true
        case .failed(let error):
            fuzzCheck(error.name == SASLClient.authFailedName, "failure \(error.name)")
            fuzzCheck(number == 0 && !line.starts(with: Array("OK ".utf8)), "failed on an acceptable line \(number)")
            over = true
        }
    }
}

// MARK: The stream with descriptors, and reply matching

let senders: [String?] = [nil, "org.freedesktop.DBus", ":1.1", ":1.2"]

func fuzzStream(_ input: inout FuzzInput) {
    guard devNull >= 0 else { return }
    let limit = 64 + Int(input.byte()) * 16
    let replyLimit = 64 + Int(input.byte()) * 16
    // Calls awaiting replies, in the connection's own book (each call's waiter is its serial), and
    // who must answer each, kept apart to check the book against.
    var book = ReplyBook<UInt32>()
    var expectedOf: [UInt32: String?] = [:]
    for _ in 0..<Int(input.byte() % 8) {
        let serial = UInt32(input.byte() % 16)
        let destination = senders[Int(input.byte()) % senders.count]
        book.awaitReply(to: serial, sentTo: destination, serial)
        expectedOf[serial] = ReplyMatch.expectedSender(forCallTo: destination)
    }
    var ended: Set<UInt32> = []
    /// Whether the reply ended a call.
    func end(_ serial: UInt32?, sender: String?, isError: Bool) -> Bool {
        guard let call = book.takeCall(endedBy: serial, from: sender, isError: isError) else {
            if let serial, !ended.contains(serial), let expected = expectedOf[serial], let expected {
                fuzzCheck(sender != expected, "a reply from the expected sender was refused")
            }
            return false
        }
        fuzzCheck(call == serial, "a reply to \(String(describing: serial)) ended call \(call)")
        let expected = expectedOf[call] ?? nil
        fuzzCheck(expected == nil || sender == expected || (isError && sender == "org.freedesktop.DBus"), "a forged reply ended a call")
        fuzzCheck(!ended.contains(call), "call \(call) ended twice")
        ended.insert(call)
        return true
    }

    var stream = IncomingMessageStream(limit: limit, replyLimit: replyLimit)
    var handed: [Int32] = []
    var kept: [DBusMessage] = []
    var broken = false
    while !input.isEmpty, !broken {
        let chunk = input.chunk()
        var descriptors: [Int32] = []
        for _ in 0..<Int(input.byte() % 4) {
            let descriptor = fcntl(devNull, F_DUPFD_CLOEXEC, 0)
            guard descriptor >= 0 else { break }
            descriptors.append(descriptor)
        }
        handed += descriptors
        guard !chunk.isEmpty else {
            // A read carries bytes; descriptors with none would be a kernel oddity: close them.
            for descriptor in descriptors { _ = close(descriptor) }
            continue
        }
        let refused = chunk.withUnsafeBytes { stream.feed($0, descriptors: descriptors) }
        for message in refused {
            fuzzCheck(message.totalBytes > (message.isReply ? replyLimit : limit), "refused a message within its limit")
            if message.isReply { _ = end(message.replySerial, sender: message.sender, isError: message.type == OversizedMessage.error) }
        }
        while true {
            let message: DBusMessage?
            do {
                message = try stream.next()
            } catch {
                broken = true
                break
            }
            for attempt in stream.takeMalformed() where attempt.type == 2 || attempt.type == 3 {
                _ = end(attempt.replySerial, sender: attempt.sender, isError: false)
            }
            guard let message else { break }
            fuzzCheck(message.bytes.count <= (message.kind == .methodReturn || message.kind == .error ? replyLimit : limit),
                      "a message of \(message.bytes.count) bytes passed")
            for descriptor in message.received?.descriptors ?? [] {
                fuzzCheck(handed.contains(descriptor) && isOpen(descriptor), "message owns descriptor \(descriptor) not handed or closed")
            }
            if message.kind == .methodReturn || message.kind == .error {
                if end(message.replySerial, sender: message.sender, isError: message.kind == .error) {
                    // What the caller gets: its own descriptors (duplicates), closed here as a caller would.
                    if case .success(let values) = message.callResult {
                        for value in values { _ = value.closingDescriptors() }
                    }
                }
            }
            if kept.count < 8 { kept.append(message) }
        }
    }
    // Descriptors of messages still held are open, and no two held messages share one.
    var owned: [Int32] = []
    for message in kept { owned += message.received?.descriptors ?? [] }
    fuzzCheck(Set(owned).count == owned.count, "two messages own the same descriptor")
    for descriptor in owned { fuzzCheck(isOpen(descriptor), "descriptor \(descriptor) of a held message is closed") }
    kept = []
    stream.discard()
    for descriptor in Set(handed) { fuzzCheck(!isOpen(descriptor), "descriptor \(descriptor) left open") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard count <= 1 << 18 else { return 0 }
    var input = FuzzInput(data, count)
    if input.byte() & 1 == 0 { fuzzAuthentication(&input) } else { fuzzStream(&input) }
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    writeSeedsIfRequested {
        var seeds: [[UInt8]] = []
        seeds.append([0, 0, 0, 3, 232] + Array("OK 0123456789abcdef0123456789abcdef\r\nAGREE_UNIX_FD\r\n".utf8))
        seeds.append([0, 0, 0, 0, 0] + Array("REJECTED EXTERNAL\r\n".utf8))
        seeds.append([0, 0, 0, 0, 0] + Array("OK 00\r\nERROR\r\nDATA\r\n".utf8))
        // A reply to serial 3 from :1.1 (awaited from :1.1), one with a descriptor, and a call.
        func message(_ kind: DBusMessage.Kind, replySerial: UInt32?, sender: String, fds: Bool) -> [UInt8] {
            var message = kind == .methodCall
                ? DBusMessage.methodCall(destination: ":1.7", path: "/p", interface: "org.x", member: "M")
                : DBusMessage(kind: kind)
            message.serial = 9
            message.replySerial = replySerial
            message.sender = sender
            if kind == .error { message.errorName = "org.x.Error" }
            var body: [DBusValue] = [.string("x")]
            if fds { body.append(.unixFD(fcntl(devNull, F_DUPFD_CLOEXEC, 0))) }
            let encoded: (bytes: [UInt8], descriptors: [Int32]) = (try? message.encoded(body: body)) ?? ([], [])
            for descriptor in encoded.descriptors { _ = close(descriptor) }
            if fds, case .unixFD(let descriptor) = body[1] { _ = close(descriptor) }
            return encoded.bytes
        }
        var stream: [UInt8] = [1, 255, 255, 2, 3, 2]
        stream.appendChunk(message(.methodReturn, replySerial: 3, sender: ":1.1", fds: false))
        stream.append(0)
        stream.appendChunk(message(.methodReturn, replySerial: 3, sender: ":1.1", fds: true))
        stream.append(1)
        stream.appendChunk(message(.error, replySerial: 5, sender: "org.freedesktop.DBus", fds: false))
        stream.append(0)
        stream.appendChunk(message(.methodCall, replySerial: nil, sender: ":1.9", fds: true))
        stream.append(1)
        seeds.append(stream)
        // Small limits: the same messages refused as oversized.
        var small = stream
        small[1] = 0
        small[2] = 0
        seeds.append(small)
        return seeds
    }
    return 0
}
