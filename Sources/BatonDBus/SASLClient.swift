// SPDX-License-Identifier: LGPL-2.1-or-later
/// The client side of the bus's authentication (D-Bus specification, "Authentication Protocol"),
/// without I/O: it says what to send and, line by line from the bus, what happens next.
/// EXTERNAL with our effective uid (what the bus checks against the socket's peer credentials, and
/// what libdbus sends), then `NEGOTIATE_UNIX_FD`, then `BEGIN`.
struct SASLClient {
    enum Step: Equatable {
        /// Send these bytes and read the next line.
        case send([UInt8])
        /// Send these bytes (BEGIN); the binary stream starts after them.
        case begin([UInt8], unixFDs: Bool)
        case failed(DBusError)
    }

    private enum State { case start, waitingForOK, waitingForUnixFD, finished }
    private var state = State.start
    let uid: UInt32

    init(uid: UInt32) { self.uid = uid }

    /// The first bytes: a NUL (where other systems pass credentials), then AUTH EXTERNAL.
    mutating func start() -> [UInt8] {
        precondition(state == .start, "SASL started twice")
        state = .waitingForOK
        let digits = Array("0123456789abcdef".utf8)
        let hex = String(uid).utf8.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] }
        return [0] + Array("AUTH EXTERNAL ".utf8) + hex + [13, 10]
    }

    /// One line from the bus, without its `\r\n`.
    mutating func receive(line: [UInt8]) -> Step {
        switch state {
        case .start, .finished:
            state = .finished
            return .failed(DBusError(name: SASLClient.authFailedName, message: "the bus sent a line when none was expected"))
        case .waitingForOK:
            guard line.starts(with: Array("OK ".utf8)) else {
                state = .finished
                return .failed(DBusError(name: SASLClient.authFailedName, message: "the bus refused EXTERNAL authentication as uid \(uid)"))
            }
            state = .waitingForUnixFD
            return .send(Array("NEGOTIATE_UNIX_FD\r\n".utf8))
        case .waitingForUnixFD:
            state = .finished
            // ERROR (or anything else): the connection works without descriptors.
            return .begin(Array("BEGIN\r\n".utf8), unixFDs: line == Array("AGREE_UNIX_FD".utf8))
        }
    }

    static let authFailedName = "org.freedesktop.DBus.Error.AuthFailed"
    /// The longest line the bus may send (dbus-daemon's are under 100 bytes).
    static let maxLineBytes = 16 << 10
}

/// Splits the text the bus sends during authentication into `\r\n`-terminated lines, bounded.
struct SASLLineReader {
    private var pending: [UInt8] = []
    /// A line went over `SASLClient.maxLineBytes` without its end: nothing more can be read.
    private(set) var overlong = false

    /// Takes one byte; returns the line it completed (without `\r\n`), if any. Bytes are taken one
    /// at a time because the bus's first binary message may follow the last line in the same read.
    mutating func take(_ byte: UInt8) -> [UInt8]? {
        guard !overlong else { return nil }
        if byte == UInt8(ascii: "\n"), pending.last == UInt8(ascii: "\r") {
            defer { pending = [] }
            return Array(pending.dropLast())
        }
        pending.append(byte)
        if pending.count >= SASLClient.maxLineBytes { overlong = true }
        return nil
    }
}
