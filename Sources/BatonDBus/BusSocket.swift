// SPDX-License-Identifier: LGPL-2.1-or-later
internal import CBusSocket
import BatonSystem
import Glibc

/// Connecting to a bus: its address (D-Bus specification, "Server Addresses"), the socket, and the
/// SASL EXTERNAL handshake ("Authentication Protocol"). Blocking, done once per connection.
enum BusSocket {
    /// How long connecting, authenticating and `Hello` may take together.
    static let handshakeTimeoutSeconds = 25

    /// The address of the system or session bus, as libdbus and sd-bus find it.
    static func address(of bus: DBusBusKind) throws(DBusError) -> String {
        switch bus {
        case .address(let address): return address
        case .system:
            return getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) } ?? "unix:path=/var/run/dbus/system_bus_socket"
        case .session:
            if let address = getenv("DBUS_SESSION_BUS_ADDRESS").map({ String(cString: $0) }), !address.isEmpty { return address }
            if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
                var status = stat()
                let path = runtime + "/bus"
                if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK, status.st_uid == getuid() { return "unix:path=" + path }
            }
            throw DBusError(name: "org.freedesktop.DBus.Error.NotSupported",
                            message: "no session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus is no socket")
        }
    }

    enum Endpoint: Equatable {
        case path(String)
        case abstract(String)
    }

    /// The Unix-socket endpoints an address lists, in order (`;` separates alternatives).
    static func endpoints(in address: String) throws(DBusError) -> [Endpoint] {
        var endpoints: [Endpoint] = []
        var unsupported: [String] = []
        for entry in address.split(separator: ";", omittingEmptySubsequences: true) {
            guard let colon = entry.firstIndex(of: ":") else { throw .invalidArgs("bus address without a transport: '\(entry.prefix(100))'") }
            let transport = entry[..<colon]
            var keys: [String: String] = [:]
            for pair in entry[entry.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: true) {
                guard let equals = pair.firstIndex(of: "="), let value = unescape(pair[pair.index(after: equals)...]) else {
                    throw .invalidArgs("malformed bus address: '\(entry.prefix(100))'")
                }
                keys[String(pair[..<equals])] = value
            }
            guard transport == "unix" else {
                unsupported.append(String(transport))
                continue
            }
            if let path = keys["path"] {
                endpoints.append(.path(path))
            } else if let name = keys["abstract"] {
                endpoints.append(.abstract(name))
            } else if keys["runtime"] == "yes", let runtime = getenv("XDG_RUNTIME_DIR") {
                endpoints.append(.path(String(cString: runtime) + "/bus"))
            } else {
                throw .invalidArgs("unix bus address without path or abstract: '\(entry.prefix(100))'")
            }
        }
        guard !endpoints.isEmpty else {
            throw DBusError(name: "org.freedesktop.DBus.Error.NotSupported",
                            message: "no supported transport in the bus address (only unix; got \(unsupported.joined(separator: ", ")))")
        }
        return endpoints
    }

    /// `%xx` escapes of a value.
    private static func unescape(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A connected, authenticated socket and whether descriptors may be passed on it.
    struct Connected: ~Copyable {
        var socket: FileDescriptor
        let unixFDs: Bool
    }

    /// A connected, authenticated socket (blocking, with the handshake timeout) for the first
    /// endpoint that answers, and whether descriptors may be passed on it. A socket that fails to
    /// authenticate closes as its owner goes.
    static func open(_ address: String) throws(DBusError) -> Connected {
        var lastError = DBusError.failed("cannot connect to the bus")
        for endpoint in try endpoints(in: address) {
            do throws(DBusError) {
                let socket = try connect(endpoint)
                let unixFDs = try authenticate(socket.rawValue)
                return Connected(socket: socket, unixFDs: unixFDs)
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    private static func connect(_ endpoint: Endpoint) throws(DBusError) -> FileDescriptor {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let name: [UInt8]
        let shown: String
        switch endpoint {
        case .path(let path):
            name = Array(path.utf8)
            shown = path
        case .abstract(let abstract):
            name = [0] + Array(abstract.utf8)  // a leading NUL names the abstract namespace
            shown = "@" + abstract
        }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !name.isEmpty, name.count < capacity, !(name.dropFirst().contains(0)), !(name.first == 0 && name.count == 1) else {
            throw .invalidArgs("bus socket name is empty or too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { room in
            for (index, byte) in name.enumerated() { room[index] = byte }
        }
        let created = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard created >= 0 else { throw .failed("cannot make a socket: errno \(errno)") }
        // Closed as it goes when connecting fails.
        let owned = FileDescriptor(taking: created)
        let socket = owned.rawValue
        var timeout = timeval(tv_sec: handshakeTimeoutSeconds, tv_usec: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, length) }
        }
        guard connected == 0 else {
            let code = errno
            owned.close()
            let reason = String(cString: strerror(code))
            switch code {
            case ENOENT: throw DBusError(name: "org.freedesktop.DBus.Error.FileNotFound", message: "Failed to connect to socket \(shown): \(reason)")
            case ECONNREFUSED: throw DBusError(name: "org.freedesktop.DBus.Error.NoServer", message: "Failed to connect to socket \(shown): \(reason)")
            case EACCES, EPERM: throw DBusError(name: DBusError.accessDeniedName, message: "Failed to connect to socket \(shown): \(reason)")
            default: throw .failed("Failed to connect to socket \(shown): \(reason)")
            }
        }
        return owned
    }

    /// Authenticates as `SASLClient` says (EXTERNAL with our effective uid, then
    /// `NEGOTIATE_UNIX_FD`, then `BEGIN`). True when the bus agreed to pass descriptors.
    static func authenticate(_ socket: Int32) throws(DBusError) -> Bool {
        var client = SASLClient(uid: geteuid())
        try send(socket, client.start())
        var reader = SASLLineReader()
        while true {
            let line = try readLine(socket, &reader)
            switch client.receive(line: line) {
            case .send(let bytes): try send(socket, bytes)
            case .begin(let bytes, let unixFDs):
                try send(socket, bytes)
                return unixFDs
            case .failed(let error): throw error
            }
        }
    }

    private static func send(_ socket: Int32, _ bytes: [UInt8]) throws(DBusError) {
        var sent = 0
        while sent < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                retryingInterrupts { Glibc.send(socket, raw.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            }
            guard written > 0 else { throw DBusError(name: DBusError.disconnectedName, message: "the bus closed the connection during authentication") }
            sent += written
        }
    }

    /// One `\r\n`-terminated line of the text protocol, read a byte at a time: the bus sends nothing
    /// unasked before BEGIN, so this never takes bytes of the binary stream.
    private static func readLine(_ socket: Int32, _ reader: inout SASLLineReader) throws(DBusError) -> [UInt8] {
        var byte: UInt8 = 0
        while !reader.overlong {
            let received = retryingInterrupts { recv(socket, &byte, 1, 0) }
            guard received == 1 else {
                throw DBusError(name: SASLClient.authFailedName,
                                message: received == 0 ? "the bus closed the connection during authentication" : "no answer from the bus during authentication")
            }
            if let line = reader.take(byte) { return line }
        }
        throw DBusError(name: SASLClient.authFailedName, message: "overlong line from the bus during authentication")
    }

    // MARK: Nonblocking I/O with descriptors

    /// Receives up to `buffer.count` bytes with their descriptors: (bytes, descriptors), (0, []) when
    /// nothing is there now, nil when the bus is gone or descriptors were lost on the way
    /// (MSG_CTRUNC: at the descriptor limit the kernel drops what it cannot install). A message
    /// whose descriptors are lost cannot be told from one that never had them, so the connection
    /// must close (libdbus and sd-bus do the same); the descriptors that did come are closed.
    static func receive(_ socket: Int32, into buffer: inout [UInt8], descriptors room: inout [Int32]) -> (Int, [Int32])? {
        var count: Int32 = 0
        var truncated: Int32 = 0
        let received = buffer.withUnsafeMutableBytes { bytes in
            room.withUnsafeMutableBufferPointer { fds in
                retryingInterrupts {
                    baton_recv_with_fds(socket, bytes.baseAddress, bytes.count, fds.baseAddress, Int32(fds.count), &count, &truncated)
                }
            }
        }
        if received < 0 { return errno == EAGAIN ? (0, []) : nil }
        let descriptors = count == 0 ? [] : Array(room[0..<Int(count)])
        if truncated != 0 {
            DescriptorNumbers.close(descriptors)
            return nil
        }
        return received == 0 ? nil : (received, descriptors)
    }

    /// Sends from `bytes[offset...]` with `descriptors` attached: how many bytes went, 0 when the
    /// socket is full, nil when the bus is gone.
    static func send(_ socket: Int32, _ bytes: [UInt8], from offset: Int, descriptors: [Int32]) -> Int? {
        let written = bytes.withUnsafeBytes { raw in
            descriptors.withUnsafeBufferPointer { fds in
                retryingInterrupts {
                    baton_send_with_fds(socket, raw.baseAddress! + offset, raw.count - offset, fds.baseAddress, Int32(fds.count))
                }
            }
        }
        if written < 0 { return errno == EAGAIN ? 0 : nil }
        return written
    }
}
