// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import Glibc

/// The credential an X server asks of a client (MIT-MAGIC-COOKIE-1: 16 secret bytes).
public struct X11Cookie: Sendable, Equatable {
    public var name: String
    public var data: [UInt8]

    public init(name: String, data: [UInt8]) {
        self.name = name
        self.data = data
    }
}

/// Why an X authority file could not be used.
public enum X11AuthorityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file is larger than `X11Authority.maximumFileSize`.
    case tooLarge
    /// An entry ends before its fields do, at this byte offset.
    case truncated(at: Int)
    /// More entries than `X11Authority.maximumEntries`.
    case tooManyEntries
    /// The file could not be opened or read (errno).
    case unreadable(Int32)

    public var description: String {
        switch self {
        case .tooLarge: "it is larger than \(X11Authority.maximumFileSize) bytes"
        case .truncated(let offset): "an entry is cut off at byte \(offset)"
        case .tooManyEntries: "it holds more than \(X11Authority.maximumEntries) entries"
        case .unreadable(let code): String(cString: strerror(code))
        }
    }
}

/// An X authority file (the one XAUTHORITY names; GNOME's Mutter writes one for its XWayland,
/// `$XDG_RUNTIME_DIR/.mutter-Xwaylandauth.*`), read to connect to a display the way libXau's
/// best-match rule picks a cookie, but from a file the caller names rather than from the process's
/// environment (the agent's session environment is a dictionary; docs/clipboard.md, "GNOME").
///
/// The format (libXau's, all numbers big-endian): entries one after the other, each a 16-bit
/// address family, then address, display number, authorization name and data, each a 16-bit
/// length and that many bytes. Only MIT-MAGIC-COOKIE-1 is used.
public enum X11Authority {
    /// A desktop's file holds a few entries; more than this is not an authority file.
    public static let maximumFileSize = 1 << 20
    public static let maximumEntries = 4096
    public static let cookieName = "MIT-MAGIC-COOKIE-1"
    /// FamilyLocal (a host's own connections, the address being its host name) and FamilyWild (any).
    static let familyLocal: UInt16 = 256
    static let familyWild: UInt16 = 0xFFFF

    struct Entry: Equatable {
        var family: UInt16
        var address: [UInt8]
        var number: [UInt8]
        var name: [UInt8]
        var data: [UInt8]
    }

    /// The file's entries, every length checked against what is left.
    static func entries(_ bytes: [UInt8]) throws(X11AuthorityError) -> [Entry] {
        guard bytes.count <= maximumFileSize else { throw .tooLarge }
        var entries: [Entry] = []
        var offset = 0
        func number() throws(X11AuthorityError) -> UInt16 {
            guard bytes.count - offset >= 2 else { throw .truncated(at: offset) }
            defer { offset += 2 }
            return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
        }
        func field() throws(X11AuthorityError) -> [UInt8] {
            let length = Int(try number())
            guard bytes.count - offset >= length else { throw .truncated(at: offset) }
            defer { offset += length }
            return Array(bytes[offset..<offset + length])
        }
        while offset < bytes.count {
            guard entries.count < maximumEntries else { throw .tooManyEntries }
            let family = try number()
            entries.append(Entry(family: family, address: try field(), number: try field(), name: try field(), data: try field()))
        }
        return entries
    }

    /// The display number of a local display name (":0", ":0.0", "unix:1"); nil for a display on
    /// another host or a name that is no display.
    public static func localDisplayNumber(_ display: String) -> String? {
        guard let colon = display.lastIndex(of: ":") else { return nil }
        let host = display[..<colon]
        guard host.isEmpty || host == "unix" else { return nil }
        let number = display[display.index(after: colon)...].prefix { $0 != "." }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return String(number)
    }

    /// The cookie for display `number` on this host (`hostname`): the first MIT-MAGIC-COOKIE-1 entry
    /// whose family is wild, or local with this host's name, and whose number is empty or `number`.
    static func cookie(in entries: [Entry], displayNumber number: String, hostname: [UInt8]) -> X11Cookie? {
        let entry = entries.first { entry in
            (entry.family == familyWild || (entry.family == familyLocal && entry.address == hostname))
                && (entry.number.isEmpty || entry.number == Array(number.utf8))
                && entry.name == Array(cookieName.utf8) && !entry.data.isEmpty
        }
        return entry.map { X11Cookie(name: cookieName, data: $0.data) }
    }

    /// The cookie `file` holds for local `display`; nil when the file does not exist, the display
    /// is not local or no entry matches (the connection is then tried without one).
    public static func cookie(file: String, display: String) throws(X11AuthorityError) -> X11Cookie? {
        guard let number = localDisplayNumber(display) else { return nil }
        let descriptor = open(file, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw .unreadable(errno)
        }
        defer { close(descriptor) }
        // At most one byte over the limit is read: more fails before it is buffered.
        var bytes = [UInt8](repeating: 0, count: maximumFileSize + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + count, $0.count - count) }
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else { throw .unreadable(errno) }
            if got == 0 { break }
            count += got
        }
        guard count <= maximumFileSize else { throw .tooLarge }
        bytes.removeSubrange(count...)
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { throw .unreadable(errno) }
        let hostname = name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return cookie(in: try entries(bytes), displayNumber: number, hostname: hostname)
    }
}
