// SPDX-License-Identifier: LGPL-2.1-or-later
/// Why text is not an endpoint. Endpoints come from D-Bus callers, peers' pairing messages and
/// DNS-SD, so every way of being wrong is a value, never a trap.
public enum EndpointError: Error, Hashable, Sendable {
    /// Longer than `Endpoint.maxTextLength` bytes.
    case tooLong(Int)
    case missingPort
    /// Not a decimal number in 1...65535.
    case badPort
    case emptyHost
    /// Unbalanced brackets, white space, control characters or a slash in the host.
    case badHost
    case badBluetoothAddress(BluetoothAddressError)
    /// Not decimal or 0x-prefixed hex.
    case badPSM
    /// Outside the LE dynamic range 0x80–0xFF.
    case psmOutOfRange(UInt16)
    /// Something after "ble:ADDRESS/PSM" other than "/random".
    case unknownSuffix
}

/// Where a ring member (or a pairing peer) may be reached: a TCP host and port, or an LE L2CAP
/// channel (protocol §7.2, §8.3). Written "host:port", "[v6]:port" or "ble:AA:BB:CC:DD:EE:FF/0xba"
/// with "/random" for a random adapter address.
public enum Endpoint: Hashable, Sendable, CustomStringConvertible {
    case ip(host: String, port: UInt16)
    case bluetooth(address: BluetoothAddress, type: LEAddressType, psm: UInt16)

    /// Longest endpoint text accepted (a 253-byte DNS name, brackets and a port fit).
    public static let maxTextLength = 270
    /// Hints kept per member (newest first).
    public static let maxPerMember = 8
    /// The transfer listener's fixed dynamic PSM ("BA" for Baton), so a hint learnt at pairing
    /// stays valid across restarts (§8.3).
    public static let transferPSM: UInt16 = 0x00BA
    /// LE PSMs a service may pick without an assigned number.
    public static let dynamicPSMs: ClosedRange<UInt16> = 0x80...0xFF

    /// Parses either form. A "ble:" prefix always means Bluetooth, so a malformed Bluetooth
    /// endpoint is reported as such rather than as a strange host name.
    public init(parsing text: String) throws(EndpointError) {
        guard text.utf8.count <= Self.maxTextLength else { throw .tooLong(text.utf8.count) }
        if text.hasPrefix("ble:") {
            self = try Self.parseBluetooth(text.dropFirst(4))
        } else {
            self = try Self.parseIP(text)
        }
    }

    /// The canonical text: IPv6 hosts in brackets, PSMs in lower-case hex.
    public var description: String {
        switch self {
        case .ip(let host, let port):
            return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .bluetooth(let address, let type, let psm):
            return "ble:\(address)/0x\(String(psm, radix: 16))" + (type == .random ? "/random" : "")
        }
    }

    public var port: UInt16? {
        if case .ip(_, let port) = self { port } else { nil }
    }

    public var host: String? {
        if case .ip(let host, _) = self { host } else { nil }
    }

    /// The transfer listener on a member's adapter.
    public static func bluetoothTransfer(address: BluetoothAddress, type: LEAddressType) -> Endpoint {
        .bluetooth(address: address, type: type, psm: transferPSM)
    }

    /// A listener bound to every address ("0.0.0.0", "::" or "[::]").
    public static func isWildcard(host: String) -> Bool { host == "0.0.0.0" || host == "::" || host == "[::]" }

    public var isWildcard: Bool { host.map(Self.isWildcard(host:)) ?? false }

    /// An IP endpoint other machines could use: not a wildcard and not loopback. The ring advert is
    /// connectable only when the device has none of these (§8.3).
    public var isReachableByOtherMachines: Bool {
        guard let host else { return false }
        return !(host.hasPrefix("127.") || host == "::1" || Self.isWildcard(host: host))
    }

    /// Newest first, each endpoint once, at most `maxPerMember`.
    public static func merge(new: [Endpoint], old: [Endpoint]) -> [Endpoint] {
        var seen: Set<Endpoint> = []
        return Array((new + old).filter { seen.insert($0).inserted }.prefix(maxPerMember))
    }

    /// A DNS-SD resolved address as a hint; nil for an empty or wildcard address, a zero port and
    /// IPv6 link-local addresses (they need a zone the resolver does not give).
    public static func hint(resolvedAddress address: String, port: UInt16) -> Endpoint? {
        guard port > 0, !address.isEmpty, !isWildcard(host: address), !address.lowercased().hasPrefix("fe80:"),
              let endpoint = try? Endpoint(parsing: Endpoint.ip(host: address, port: port).description),
              case .ip = endpoint else { return nil }
        return endpoint
    }

    /// What pairing teaches about the peer (§7.2), best first: the host its TCP connection came
    /// from with each announced port, then its announced endpoints that are not wildcards, then,
    /// after pairing over L2CAP, its adapter's transfer listener. Unparsable announcements are skipped.
    public static func pairingHints(announced: [String], observedHost: String?, bluetoothPeer: (BluetoothAddress, LEAddressType)?) -> [Endpoint] {
        let parsed = announced.compactMap { text -> Endpoint? in
            guard let endpoint = try? Endpoint(parsing: text), case .ip = endpoint else { return nil }
            return endpoint
        }
        var hints: [Endpoint] = []
        if let observedHost, !observedHost.isEmpty, observedHost != "?" {
            for case .ip(_, let port) in parsed {
                if let endpoint = try? Endpoint(parsing: Endpoint.ip(host: observedHost, port: port).description) { hints.append(endpoint) }
            }
        }
        hints += parsed.filter { !$0.isWildcard }
        if let (address, type) = bluetoothPeer { hints.append(.bluetoothTransfer(address: address, type: type)) }
        return hints
    }

    private static func parseIP(_ text: String) throws(EndpointError) -> Endpoint {
        guard let colon = text.lastIndex(of: ":") else { throw .missingPort }
        let portText = text[text.index(after: colon)...]
        guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let port = UInt16(portText), port > 0 else { throw .badPort }
        var host = Substring(text[..<colon])
        if host.hasPrefix("[") || host.hasSuffix("]") {
            guard host.hasPrefix("["), host.hasSuffix("]"), host.count >= 2 else { throw .badHost }
            host = host.dropFirst().dropLast()
        }
        guard !host.isEmpty else { throw .emptyHost }
        let forbidden: Set<Character> = ["[", "]", "/", " "]
        guard !host.contains(where: { forbidden.contains($0) || $0.isWhitespace || $0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }) else {
            throw .badHost
        }
        return .ip(host: String(host), port: port)
    }

    private static func parseBluetooth(_ rest: Substring) throws(EndpointError) -> Endpoint {
        var parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        var type = LEAddressType.public
        if parts.count == 3 {
            guard parts[2] == "random" else { throw .unknownSuffix }
            type = .random
            parts.removeLast()
        }
        guard parts.count == 2 else { throw parts.count < 2 ? .badPSM : .unknownSuffix }
        let address: BluetoothAddress
        do { address = try BluetoothAddress(String(parts[0])) } catch { throw .badBluetoothAddress(error) }
        let psmText = parts[1]
        let psm: UInt16?
        if psmText.lowercased().hasPrefix("0x") {
            let digits = psmText.dropFirst(2)
            psm = digits.allSatisfy(\.isHexDigit) ? UInt16(digits, radix: 16) : nil
        } else {
            psm = psmText.allSatisfy { $0.isASCII && $0.isNumber } ? UInt16(psmText) : nil
        }
        guard let psm else { throw .badPSM }
        guard dynamicPSMs.contains(psm) else { throw .psmOutOfRange(psm) }
        return .bluetooth(address: address, type: type, psm: psm)
    }
}
