// SPDX-License-Identifier: LGPL-2.1-or-later

/// Whether the adapter uses LE privacy (resolvable private addresses), as the kernel says it.
public enum LEPrivacySetting: Sendable, Hashable {
    case on
    case off
    /// Not known; the words say why ("the kernel refused the read: …").
    case unknown(String)
}

/// Reads whether an adapter uses LE privacy (the adapter: the kernel's management interface).
public protocol AdapterPrivacyReading: Sendable {
    /// `adapter` is a name such as "hci0".
    func privacy(ofAdapter adapter: String) async -> LEPrivacySetting
}

/// Which connectable adverts this daemon sends: they come from the adapter's own address, the
/// public one unless LE privacy is on (non-connectable adverts take a throw-away address anyway).
public enum ConnectableAdverts: Sendable, Hashable {
    /// None (no L2CAP listener).
    case none
    /// Only the pairing advert while a session waits for its initiator over BLE.
    case pairing
    /// The ring advert too, all the time (no TCP endpoint other machines can reach, protocol §8.3).
    case ringAdvert
}

/// What status and `baton doctor` say about LE privacy: a word, and when it matters a sentence
/// that says what is exposed and the fix.
public struct LEPrivacyFact: Sendable, Hashable {
    public enum Word: String, Sendable, Hashable {
        case on, off, unknown
    }

    public var word: Word
    /// Why it matters or why it is not known; nil when there is nothing to say.
    public var detail: String?
    /// Whether a person should change something (privacy off while connectable adverts go out).
    public var needsFix: Bool

    public init(word: Word, detail: String?, needsFix: Bool) {
        self.word = word
        self.detail = detail
        self.needsFix = needsFix
    }

    /// What to do when privacy is off.
    public static let fix = "set `Privacy = device` in the [General] section of /etc/bluetooth/main.conf, "
        + "then restart bluetooth (sudo systemctl restart bluetooth) and batond"

    /// The fact for a setting and the connectable adverts in use.
    public static func assess(_ setting: LEPrivacySetting, connectable: ConnectableAdverts) -> LEPrivacyFact {
        switch (setting, connectable) {
        case (.on, _):
            return LEPrivacyFact(word: .on, detail: nil, needsFix: false)
        case (.off, .none):
            return LEPrivacyFact(word: .off, detail: nil, needsFix: false)
        case (.off, .pairing):
            return LEPrivacyFact(word: .off, detail: "LE privacy is off: a pairing advert (while bt-pair waits over Bluetooth) "
                + "comes from the adapter's public address, which names this machine; " + fix, needsFix: true)
        case (.off, .ringAdvert):
            return LEPrivacyFact(word: .off, detail: "LE privacy is off: the ring advert is connectable (no network address "
                + "other machines can reach) and comes from the adapter's public address all the time, so anyone nearby "
                + "can follow this machine across epochs; " + fix, needsFix: true)
        case (.unknown(let why), _):
            return LEPrivacyFact(word: .unknown, detail: "whether the adapter uses LE privacy is not known (\(why))", needsFix: false)
        }
    }
}

/// The kernel's Bluetooth management interface (BlueZ doc/mgmt-api.txt), the one command batond
/// sends: Read Controller Information (0x0004). It is allowed on an untrusted HCI_CHANNEL_CONTROL
/// socket, so a process without capabilities may send it. Pure: building the request and parsing
/// the reply, bounds-checked.
public enum MgmtControllerInfo {
    public static let readInfoOpcode: UInt16 = 0x0004
    static let commandComplete: UInt16 = 0x0001
    static let commandStatus: UInt16 = 0x0002
    /// Current settings bit 13 (mgmt-api.txt, "Read Controller Information Command").
    public static let privacyBit: UInt32 = 1 << 13

    /// What one packet read from the socket says about the request for `index`.
    public enum Reply: Sendable, Hashable {
        /// The controller's current settings.
        case settings(UInt32)
        /// The kernel refused (mgmt status code, e.g. 0x11 Invalid Index).
        case failed(status: UInt8)
    }

    /// "hci3" → 3; nil for any other name.
    public static func index(ofAdapter name: String) -> UInt16? {
        guard name.hasPrefix("hci") else { return nil }
        let digits = name.dropFirst(3)
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = UInt16(digits) else { return nil }
        return value
    }

    /// The command: opcode, controller index, parameter length 0 (all little-endian).
    public static func request(index: UInt16) -> [UInt8] {
        [UInt8(readInfoOpcode & 0xFF), UInt8(readInfoOpcode >> 8), UInt8(index & 0xFF), UInt8(index >> 8), 0, 0]
    }

    /// The reply to Read Controller Information for `index` in `packet`, or nil when the packet is
    /// something else (another event, another controller, another command) or cut short.
    public static func reply(_ packet: [UInt8], index: UInt16) -> Reply? {
        func u16(_ at: Int) -> UInt16 { UInt16(packet[at]) | UInt16(packet[at + 1]) << 8 }
        // Event header: event code (2), controller index (2), parameter length (2).
        guard packet.count >= 6 else { return nil }
        let event = u16(0), controller = u16(2), length = Int(u16(4))
        guard controller == index, packet.count >= 6 + length, length >= 3 else { return nil }
        // Command Complete / Status parameters: opcode (2), status (1), then the return parameters.
        guard u16(6) == readInfoOpcode else { return nil }
        let status = packet[8]
        switch event {
        case commandStatus:
            return .failed(status: status == 0 ? 0xFF : status)
        case commandComplete:
            guard status == 0 else { return .failed(status: status) }
            // Address (6), version (1), manufacturer (2), supported settings (4), current settings (4).
            let current = 9 + 6 + 1 + 2 + 4
            guard length >= current - 6 + 4 else { return nil }
            return .settings(UInt32(packet[current]) | UInt32(packet[current + 1]) << 8
                             | UInt32(packet[current + 2]) << 16 | UInt32(packet[current + 3]) << 24)
        default:
            return nil
        }
    }

    /// The setting that a reply says.
    public static func setting(of reply: Reply) -> LEPrivacySetting {
        switch reply {
        case .settings(let current): current & privacyBit != 0 ? .on : .off
        case .failed(status: 0x11): .unknown("the kernel knows no such controller")
        case .failed(let status): .unknown("the kernel refused to read the controller's settings (mgmt status 0x\(String(status, radix: 16)))")
        }
    }
}
