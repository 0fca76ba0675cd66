import BatonAPI
import BatonCore

/// The suggestions part of the continuation: one per member whose newest accepted advert carries
/// an activity some local user can continue. Taken or dismissed revisions are not offered again.
struct SuggestionList: Sendable {
    var byMember: [DeviceID: Suggestion] = [:]
    /// The revision per member that was continued or dismissed here.
    var settledRevisions: [DeviceID: UInt32] = [:]
    var nextNumber = 0

    /// Whether this advert body still needs a new suggestion (not the one shown, not settled).
    func wantsOffer(_ member: DeviceID, revision: UInt32) -> Bool {
        if let existing = byMember[member], existing.revision == revision { return false }
        return settledRevisions[member] != revision
    }

    mutating func nextPath() -> String {
        nextNumber += 1
        return "\(BatonObjectPath.suggestionPrefix)/\(nextNumber)"
    }

    func suggestion(at path: String) -> Suggestion? { byMember.values.first { $0.path == path } }

    mutating func settle(_ suggestion: Suggestion) { settledRevisions[suggestion.member] = suggestion.revision }
}
