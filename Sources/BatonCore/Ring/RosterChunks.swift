// SPDX-License-Identifier: LGPL-2.1-or-later

/// Pairing message 3 in parts (§7.2): a roster larger than one sealed message travels as several
/// `{"msg": "roster", "roster": part, "more": true}` messages and a last one without `more`; the
/// receiver joins the parts in order and decodes the whole (at most the RingSync limit).
public enum RosterChunks {
    /// Roster bytes per message: with the keys around them a message stays within
    /// `PairingSession.maxSealedPlaintext` (4,096).
    public static let maxPartBytes = 3_968
    /// The joined roster's limit: the RingSync limit (§6.2), so every roster that syncs also pairs.
    public static let maxTotalBytes = FrameType.ringSync.maxPayload

    /// The messages that carry `roster`, in order (one for a roster of at most `maxPartBytes`).
    public static func messages(for roster: [UInt8]) -> [[String: PropertyValue]] {
        var out: [[String: PropertyValue]] = []
        var start = 0
        repeat {
            let end = min(start + maxPartBytes, roster.count)
            var message: [String: PropertyValue] = ["msg": .string("roster"), "roster": .bytes(Array(roster[start..<end]))]
            if end < roster.count { message["more"] = .boolean(true) }
            out.append(message)
            start = end
        } while start < roster.count
        return out
    }

    /// Joins received parts. `add` returns the whole roster's bytes with its last part, nil before.
    public struct Assembler: Sendable {
        private var bytes: [UInt8] = []
        public init() {}

        public mutating func add(_ message: [String: PropertyValue]) throws(WireError) -> [UInt8]? {
            guard let part = message["roster"]?.bytesValue else { throw .unexpectedMessage("roster") }
            let more: Bool
            switch message["more"] {
            case nil: more = false
            case .boolean(let value)?: more = value
            default: throw .malformed("roster more")
            }
            // Any split is accepted; only the total is bounded.
            guard bytes.count + part.count <= Self.limit else {
                throw .payloadTooLarge(limit: Self.limit, actual: bytes.count + part.count)
            }
            bytes += part
            return more ? nil : bytes
        }

        static var limit: Int { RosterChunks.maxTotalBytes }
    }
}
