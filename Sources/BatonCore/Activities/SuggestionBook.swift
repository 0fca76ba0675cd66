// SPDX-License-Identifier: LGPL-2.1-or-later
/// A ring member's activity this machine can continue (one per member at most).
public struct Suggestion: Hashable, Sendable {
    /// Unique for the book's life; the service names the D-Bus object after it.
    public let number: Int
    public let member: DeviceID
    public let activityType: String
    public let revision: UInt32
    public let hasWebpageURL: Bool
    /// The advert's keyed type hash: what FetchActivity asks for (§9 step 2).
    public let typeHash: TypeHash

    /// No local handler has the type, but the activity has a webpage URL: offered as "open in
    /// browser" (issue 13). The type's name is unknown here (only its keyed hash was heard).
    public var opensInBrowser: Bool { activityType.isEmpty }
}

/// Which suggestions are offered (swift-nio style: inputs in, actions out). A member's newest
/// accepted advert decides: an activity some local user handles is offered, replacing the
/// member's older suggestion; a revision taken or dismissed here is not offered again.
public struct SuggestionBook: Sendable {
    public enum Action: Hashable, Sendable {
        /// Offer this suggestion (export its object).
        case export(Suggestion)
        /// Take this suggestion back (unexport its object).
        case unexport(Suggestion)
    }

    /// What matching the advert's keyed type hash against the locally handled types gave (§4.3 step 7).
    public enum TypeResolution: Hashable, Sendable {
        /// This type is handled here.
        case handled(String)
        /// No local handler or application has this type.
        case unhandled
        /// Nothing to match with yet (no transfer, or the member's keys unknown): changes nothing.
        case unavailable
    }

    public private(set) var suggestions: [DeviceID: Suggestion] = [:]
    /// The revision per member that was continued or dismissed here.
    public private(set) var settledRevisions: [DeviceID: UInt32] = [:]
    private var lastNumber = 0

    public init() {}

    /// The type among `handled` whose keyed hash is the advert's; the smallest name on a collision.
    public static func resolve(_ typeHash: TypeHash, handled: Set<String>, keys: DerivedKeys) -> TypeResolution {
        handled.sorted().first { keys.typeHash($0) == typeHash }.map(TypeResolution.handled) ?? .unhandled
    }

    /// True when `offer` could change something for this body, so resolving its type (which asks
    /// the activity service) is worth it. A non-activity body needs no resolution either.
    public func needsResolution(member: DeviceID, body: AdvertBody) -> Bool {
        body.isActivity && suggestions[member]?.revision != body.revision && settledRevisions[member] != body.revision
    }

    /// A member's newest accepted advert body.
    public mutating func offer(member: DeviceID, body: AdvertBody, resolution: TypeResolution) -> [Action] {
        guard body.isActivity else { return withdraw(member) }
        if suggestions[member]?.revision == body.revision { return [] }
        // Taken or dismissed: the same revision is not offered again, only a newer one.
        if settledRevisions[member] == body.revision { return [] }
        let type: String
        switch resolution {
        case .unavailable: return []
        // Unhandled but with a webpage URL: a browser can continue it (the type stays unknown).
        case .unhandled where body.flags.contains(.hasWebpageURL): type = ""
        case .unhandled: return withdraw(member)
        case .handled(let name): type = name
        }
        var actions = withdraw(member)
        lastNumber += 1
        let suggestion = Suggestion(number: lastNumber, member: member, activityType: type, revision: body.revision,
                                    hasWebpageURL: body.flags.contains(.hasWebpageURL), typeHash: body.typeHash)
        suggestions[member] = suggestion
        actions.append(.export(suggestion))
        return actions
    }

    /// The export failed: forget the suggestion without unexporting (nothing was exported).
    public mutating func exportFailed(_ suggestion: Suggestion) {
        if suggestions[suggestion.member] == suggestion { suggestions[suggestion.member] = nil }
    }

    /// The member's suggestion goes (it left the ring, or advertises no activity any more).
    public mutating func withdraw(_ member: DeviceID) -> [Action] {
        guard let old = suggestions.removeValue(forKey: member) else { return [] }
        return [.unexport(old)]
    }

    /// Every suggestion goes (the service stops).
    public mutating func withdrawAll() -> [Action] {
        suggestions.keys.sorted { $0.description < $1.description }.flatMap { withdraw($0) }
    }

    public func suggestion(number: Int) -> Suggestion? {
        suggestions.values.first { $0.number == number }
    }

    /// The user continued (delivered) or dismissed the suggestion: its revision is settled and
    /// not offered again. A number no longer offered changes nothing.
    public mutating func settle(number: Int) -> [Action] {
        guard let suggestion = suggestion(number: number) else { return [] }
        settledRevisions[suggestion.member] = suggestion.revision
        return withdraw(suggestion.member)
    }
}
