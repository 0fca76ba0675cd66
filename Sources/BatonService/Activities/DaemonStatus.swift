// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore

/// The daemon lifecycle state, as Manager1.GetStatus and the status file say it.
public enum DaemonState: String, Sendable, Codable, Hashable {
    case starting, running, degraded, stopping
}

/// The status JSON file: lifecycle and per-activity state only, never titles, userInfo or URLs.
public struct DaemonStatus: Sendable, Codable, Hashable {
    public struct ActivityEntry: Sendable, Codable, Hashable {
        public var objectPath: String
        public var type: String
        public var status: String
        public var current: Bool
        /// A FailureCategory raw value, or nil.
        public var lastError: String?
    }

    public var state: DaemonState
    public var busName: String
    public var adapter: String
    /// off, advertising, scanning, both, unavailable
    public var radio: String
    /// Why the radio is unavailable; absent otherwise.
    public var radioDetail: String?
    /// Whether the adapter uses LE privacy (on, off, unknown) and, when it matters, why; absent
    /// while the radio is not ready.
    public var lePrivacy: String?
    public var lePrivacyDetail: String?
    public var activities: [ActivityEntry]
    public var errors: [ErrorRecord]
    /// Unix seconds of this snapshot.
    public var updated: Int64
}

/// What the radio can do now, as Manager1.GetStatus and the status file say it: one word
/// (off, advertising, scanning, both, unavailable) and, when it cannot work, why.
public struct RadioSummary: Sendable, Hashable {
    public enum Word: String, Sendable, Hashable {
        case off, advertising, scanning, both, unavailable
    }

    public var word: Word
    /// Why the radio is unavailable ("bluetoothd is not running"); nil otherwise.
    public var detail: String?
    /// Whether the adapter uses LE privacy, with the connectable adverts in use; nil when the
    /// radio is not ready or nobody reads it.
    public var privacy: LEPrivacyFact?

    public init(_ word: Word, detail: String? = nil, privacy: LEPrivacyFact? = nil) {
        self.word = word
        self.detail = detail
        self.privacy = privacy
    }

    public static let off = RadioSummary(.off)

    /// The daemon is degraded when the radio it was asked to use cannot work.
    public var isUnavailable: Bool { word == .unavailable }

    /// "unavailable (bluetoothd is not running)", "both".
    public var description: String { detail.map { "\(word.rawValue) (\($0))" } ?? word.rawValue }
}

/// A publisher that can say what its radio is doing (the radio service in batond), so the status
/// reports the radio's real condition rather than the mere presence of a publisher.
protocol RadioSummaryReporting: Sendable {
    func radioSummary() async -> RadioSummary
}

extension RadioService: RadioSummaryReporting {
    /// Scanning runs whenever the adapter is ready; advertising when an advert is registered.
    /// BlueZ's own state is asked first: the radio's event stream may not have delivered it yet
    /// (right after start).
    func radioSummary() async -> RadioSummary {
        guard let port else { return RadioSummary(.unavailable, detail: "BlueZ cannot be reached on the system bus") }
        let state = if let bluez = port as? BlueZRadio { await bluez.status().state } else { book.state }
        knownState = state
        knownPrivacy = state == .ready ? await privacyFact(port: port) : nil
        return summary(state)
    }

    /// What the radio does now as this actor last learnt it, without asking the adapter again (a
    /// publication's receipt): the state from `radioSummary` or a later event, the privacy read then.
    func knownSummary() -> RadioSummary {
        guard port != nil else { return RadioSummary(.unavailable, detail: "BlueZ cannot be reached on the system bus") }
        return summary(knownState ?? book.state)
    }

    private func summary(_ state: RadioState) -> RadioSummary {
        switch state {
        case .unavailable(let why): RadioSummary(.unavailable, detail: why)
        case .poweredOff: RadioSummary(.unavailable, detail: "the adapter is powered off")
        case .ready: RadioSummary(planner.onAir == .nothing ? .scanning : .both, privacy: knownPrivacy)
        }
    }

    /// LE privacy as the kernel says it for this radio's adapter, with the connectable adverts this
    /// daemon sends: the pairing advert whenever an adapter is ready (its L2CAP listener), the ring
    /// advert too while it is connectable (no TCP endpoint others can reach, §8.3).
    func privacyFact(port: any RadioPort) async -> LEPrivacyFact? {
        guard let privacyReader, let bluez = port as? BlueZRadio,
              let path = await bluez.status().adapterPath, let adapter = path.split(separator: "/").last else { return nil }
        let setting = await privacyReader.privacy(ofAdapter: String(adapter))
        return LEPrivacyFact.assess(setting, connectable: planner.ringAdvertConnectable ? .ringAdvert : .pairing)
    }

    /// The reader of the adapter's LE privacy setting (batond: the kernel's); without one, status
    /// does not say.
    public func usePrivacyReader(_ reader: any AdapterPrivacyReading) {
        privacyReader = reader
    }
}
