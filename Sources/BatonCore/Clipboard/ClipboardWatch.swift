// SPDX-License-Identifier: LGPL-2.1-or-later
/// The receiver's side (§9 "Clipboard"): per member, the last clipboard kind and revision accepted, which
/// accepted adverts call for asking the member's offer, and the offer ids already taken, so a new copy
/// is taken once and an old one never again. Pure.
public struct ClipboardWatch: Sendable {
    public enum Change: Hashable, Sendable {
        /// Ask the member for its offer (FetchClipboardOffer): it may hold a new copy.
        case ask(DeviceID)
        /// The member offers nothing any more: whatever was taken from it is given up.
        case withdrawn(DeviceID)
    }

    /// A question that got no answer is asked again at the next re-sightings, up to this many
    /// questions per revision (§9 "Clipboard").
    public static let askAttempts = 3

    private struct Heard {
        var kind: ClipboardKind
        var revision: UInt32
        var questions = 1
        /// The last question got no answer, and none is out now.
        var unanswered = false
    }

    private var heard: [DeviceID: Heard] = [:]
    private var taken: [DeviceID: UInt64] = [:]

    public init() {}

    /// An advert of `member` that §4.3 accepted, with its revision and clipboard kind. A kind with a
    /// revision not yet seen with a kind asks for the offer (a copy moves the revision; so does any other
    /// content change, and the offer id then tells a new copy from the one already taken).
    public mutating func hear(_ member: DeviceID, kind: ClipboardKind?, revision: UInt32) -> Change? {
        guard let kind else {
            guard heard.removeValue(forKey: member) != nil else { return nil }
            return .withdrawn(member)
        }
        if var entry = heard[member], entry.kind == kind, entry.revision == revision {
            // A re-sighting asks again only after a question of this revision got no answer.
            guard entry.unanswered, entry.questions < Self.askAttempts else { return nil }
            entry.questions += 1
            entry.unanswered = false
            heard[member] = entry
            return .ask(member)
        }
        heard[member] = Heard(kind: kind, revision: revision)
        return .ask(member)
    }

    /// The question to `member` got no answer (no connection, a broken one, an answer that did not
    /// decode): one of its next re-sightings asks again.
    public mutating func askFailed(_ member: DeviceID) {
        heard[member]?.unanswered = true
    }

    /// The member answered with `offer`: true when it is a copy not taken before (hand it on).
    public mutating func answered(_ member: DeviceID, offer: ClipboardOffer) -> Bool {
        heard[member]?.unanswered = false
        guard taken[member] != offer.offerID else { return false }
        taken[member] = offer.offerID
        return true
    }

    /// The offer `answered` took could not be handed on after all (a files offer whose list could not
    /// be fetched): it is not taken, and one of the next re-sightings asks again, as for a question
    /// that got no answer.
    public mutating func handFailed(_ member: DeviceID, offer: ClipboardOffer) {
        guard taken[member] == offer.offerID else { return }
        taken[member] = nil
        heard[member]?.unanswered = true
    }

    /// The member answered that it offers nothing (`Error(unknownActivity)`: it expired or was taken
    /// back meanwhile). What it advertised stays heard, so its re-sightings do not ask again.
    public mutating func answeredNothing(_ member: DeviceID) -> Change? {
        heard[member]?.unanswered = false
        guard taken.removeValue(forKey: member) != nil else { return nil }
        return .withdrawn(member)
    }

    /// The member left the ring: its offer is gone.
    public mutating func forget(_ member: DeviceID) -> Change? {
        let had = heard.removeValue(forKey: member) != nil
        taken[member] = nil
        return had ? .withdrawn(member) : nil
    }

    public func kind(of member: DeviceID) -> ClipboardKind? { heard[member]?.kind }
}
