// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus

/// DNS-SD service types Baton uses (protocol §5, §8.2).
public enum BatonServiceType {
    /// Ring members' TLS endpoints; instance names rotate every epoch.
    public static let ring = "_baton._tcp"
    /// A device waiting in `bt-pair accept`; TXT `sid=<16 hex>`.
    public static let pairing = "_baton-pair._tcp"
}

/// Avahi's address family selector (`AvahiProtocol`).
public enum AvahiProtocol: Int32, Sendable, Hashable {
    case unspecified = -1
    case inet = 0
    case inet6 = 1
}

/// Network interface index as Avahi uses it; `-1` means all interfaces.
public typealias AvahiInterfaceIndex = Int32
public let avahiAnyInterface: AvahiInterfaceIndex = -1

/// Bus names, paths and interfaces of avahi-daemon's D-Bus API.
enum AvahiBus {
    static let name = "org.freedesktop.Avahi"
    static let serverPath = "/"
    static let server = "org.freedesktop.Avahi.Server"
    static let server2 = "org.freedesktop.Avahi.Server2"
    static let entryGroup = "org.freedesktop.Avahi.EntryGroup"
    static let serviceBrowser = "org.freedesktop.Avahi.ServiceBrowser"

    /// `AvahiServerState`.
    enum ServerState: Int32 {
        case invalid = 0, registering = 1, running = 2, collision = 3, failure = 4
    }

    /// `AvahiEntryGroupState`.
    enum EntryGroupState: Int32 {
        case uncommitted = 0, registering = 1, established = 2, collision = 3, failure = 4
    }

    /// `AvahiLookupResultFlags` bits.
    static let resultLocal: UInt32 = 8
    static let resultOurOwn: UInt32 = 16

    /// NameOwnerChanged for org.freedesktop.Avahi only.
    static let ownerChangedRule = DBusMatchRule(
        sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
        path: "/org/freedesktop/DBus", stringArguments: [0: name])

    /// (name, old owner, new owner) of a NameOwnerChanged signal; nil owners for "".
    static func ownerChange(_ signal: DBusSignal) -> (name: String, oldOwner: String?, newOwner: String?)? {
        guard signal.member == "NameOwnerChanged", signal.arguments.count == 3,
            let name = signal.arguments[0].stringValue, let old = signal.arguments[1].stringValue,
            let new = signal.arguments[2].stringValue
        else { return nil }
        return (name, old.isEmpty ? nil : old, new.isEmpty ? nil : new)
    }
}

/// DNS-SD TXT records as `key=value` strings (RFC 6763 §6), validated and bounded both ways.
public enum TXTRecord {
    /// RFC 6763 §6.1: each string is at most 255 bytes.
    public static let maxEntryBytes = 255
    /// Keeps the whole record well inside one mDNS packet.
    public static let maxTotalBytes = 1300
    /// Received records with more strings are cut here.
    public static let maxEntries = 64

    /// Encodes `txt` (sorted by key, so equal dictionaries give equal records) as Avahi's `aay`.
    public static func encode(_ txt: [String: String]) throws(AvahiError) -> [[UInt8]] {
        var total = 0
        var out: [[UInt8]] = []
        for key in txt.keys.sorted() {
            let keyBytes = Array(key.utf8)
            // Keys are printable US-ASCII other than '=' (RFC 6763 §6.4).
            guard !keyBytes.isEmpty, keyBytes.allSatisfy({ (0x20...0x7E).contains($0) && $0 != UInt8(ascii: "=") }) else {
                throw .invalidInput("TXT key \(key.debugDescription)")
            }
            let entry = keyBytes + [UInt8(ascii: "=")] + Array((txt[key] ?? "").utf8)
            guard entry.count <= maxEntryBytes else { throw .invalidInput("TXT entry \(key) is longer than 255 bytes") }
            total += entry.count + 1
            out.append(entry)
        }
        guard total <= maxTotalBytes else { throw .invalidInput("TXT record is longer than \(maxTotalBytes) bytes") }
        guard out.count <= maxEntries else { throw .invalidInput("more than \(maxEntries) TXT entries") }
        return out
    }

    /// Decodes received strings: the first occurrence of a key wins (RFC 6763 §6.4), keys compare
    /// case-insensitively and are returned lowercased; entries that are not UTF-8, have an empty key
    /// or are too long are skipped. A string without '=' is a boolean attribute with value "".
    public static func decode(_ strings: [[UInt8]]) -> [String: String] {
        var out: [String: String] = [:]
        for entry in strings.prefix(maxEntries) where !entry.isEmpty && entry.count <= maxEntryBytes {
            let separator = entry.firstIndex(of: UInt8(ascii: "=")) ?? entry.endIndex
            let valueStart = separator < entry.endIndex ? entry.index(after: separator) : entry.endIndex
            guard separator > entry.startIndex,
                let key = String(validating: entry[..<separator], as: UTF8.self),
                let value = String(validating: entry[valueStart...], as: UTF8.self)
            else { continue }
            let folded = key.lowercased()
            if out[folded] == nil { out[folded] = value }
        }
        return out
    }

    static func dbusValue(_ entries: [[UInt8]]) -> DBusValue {
        .array(elementSignature: "ay", entries.map { DBusValue.bytes($0) })
    }
}

/// DNS-SD instance names: non-empty, at most 63 bytes of UTF-8 (RFC 6763 §4.1.1).
enum InstanceName {
    static let maxBytes = 63

    static func validate(_ name: String) throws(AvahiError) {
        let count = name.utf8.count
        guard count > 0, count <= maxBytes else { throw .invalidInput("instance name must be 1...63 bytes") }
        guard !name.utf8.contains(0) else { throw .invalidInput("instance name contains NUL") }
    }
}

/// TXT content of a `_baton-pair._tcp` endpoint: `sid=<16 hex>` (protocol §5).
public enum PairingEndpointTXT {
    public static let sessionIDBytes = 8

    public static func txt(sessionID: [UInt8]) throws(AvahiError) -> [String: String] {
        guard sessionID.count == sessionIDBytes else { throw .invalidInput("pairing session id must be 8 bytes") }
        return ["sid": lowercaseHex(sessionID)]
    }

    /// The session id from a discovered endpoint's TXT, nil when absent or malformed.
    public static func sessionID(from txt: [String: String]) -> [UInt8]? {
        guard let text = txt["sid"], text.utf8.count == sessionIDBytes * 2 else { return nil }
        var bytes: [UInt8] = []
        var high: UInt8?
        for digit in text.utf8 {
            guard let value = hexValue(digit) else { return nil }
            if let h = high { bytes.append(h << 4 | value); high = nil } else { high = value }
        }
        return bytes
    }

    static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

func lowercaseHex(_ bytes: [UInt8]) -> String {
    let alphabet = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    for byte in bytes {
        text.append(alphabet[Int(byte >> 4)])
        text.append(alphabet[Int(byte & 0x0f)])
    }
    return String(decoding: text, as: UTF8.self)
}
