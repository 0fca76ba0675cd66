import BatonAPI
import BatonCore
import BatonDBus

/// A ring member's activity that this machine can continue: offered on D-Bus as an
/// org.baton.Suggestion1 object under /org/baton (so InterfacesAdded announces it), listed by
/// `baton suggestions`, taken with Suggestion1.Continue or `baton continue PATH`.
struct Suggestion: Sendable {
    var path: String
    var member: DeviceID
    var activityType: String
    var revision: UInt32
    var hasWebpageURL: Bool
}

extension ActivityService {
    /// Every activity type some local user can continue: registered handlers and installed apps.
    func allHandledTypes() -> Set<String> {
        var types = Set(handlers.values.flatMap(\.types))
        for entry in desktopEntries.entries() { types.formUnion(entry.activityTypes) }
        return types
    }
}

extension RingService {
    /// Keeps the member's suggestion in step with its newest accepted advert.
    func suggest(for sighting: Sighting) async {
        let member = sighting.member
        let body = sighting.body
        guard body.isActivity else {
            withdrawSuggestion(of: member)
            return
        }
        if let existing = suggestions[member], existing.revision == body.revision { return }
        // Taken or dismissed: the same revision is not offered again, only a newer one.
        if settledRevisions[member] == body.revision { return }
        guard let activities = transfer?.activities, let keys = matcher.keys(of: member) else { return }
        // The type hash is keyed with the member's secret: hash what we handle and compare (§4.3 step 7).
        let handled = await activities.allHandledTypes()
        guard let type = handled.sorted().first(where: { keys.typeHash($0) == body.typeHash }) else {
            withdrawSuggestion(of: member)
            return
        }
        withdrawSuggestion(of: member)
        nextSuggestion += 1
        let suggestion = Suggestion(path: "\(BatonObjectPath.suggestionPrefix)/\(nextSuggestion)", member: member, activityType: type,
                                    revision: body.revision, hasWebpageURL: body.flags.contains(.hasWebpageURL))
        suggestions[member] = suggestion
        do {
            try await connection.export([suggestionInterface(suggestion)], at: suggestion.path)
            log("batond: suggestion \(suggestion.path): continue \(type) from \(memberName(member))")
        } catch {
            suggestions[member] = nil
            log("batond: cannot offer a suggestion: \(error)")
        }
    }

    func withdrawSuggestion(of member: DeviceID) {
        guard let old = suggestions.removeValue(forKey: member) else { return }
        try? connection.unexport(path: old.path)
    }

    func withdrawAllSuggestions() {
        for member in Array(suggestions.keys) { withdrawSuggestion(of: member) }
    }

    func takeSuggestion(_ path: String, caller: String) async throws -> String {
        guard let suggestion = suggestions.values.first(where: { $0.path == path }) else {
            throw DBusError(name: BatonErrorName.unknownObject, message: "the suggestion is gone")
        }
        // The activity is delivered to the caller's own handlers: any local user may take it.
        let uid = try await connection.connectionUnixUser(caller)
        let outcome = try await continueActivity(from: suggestion.member.description, type: suggestion.activityType, uid: uid)
        if outcome == "delivered" {
            settledRevisions[suggestion.member] = suggestion.revision
            withdrawSuggestion(of: suggestion.member)
        }
        return outcome
    }

    func suggestionInterface(_ suggestion: Suggestion) -> DBusInterface {
        let path = suggestion.path
        let near = book.proximity[suggestion.member]?.detector.allowsSuggestion ?? true
        let properties: [String: DBusValue] = [
            "Device": .string(suggestion.member.shortForm), "DeviceName": .string(memberName(suggestion.member)),
            "ActivityType": .string(suggestion.activityType), "Revision": .uint32(suggestion.revision),
            "HasWebpageURL": .boolean(suggestion.hasWebpageURL), "Near": .boolean(near),
        ]
        let signatures = ["Device": "s", "DeviceName": "s", "ActivityType": "s", "Revision": "u", "HasWebpageURL": "b", "Near": "b"]
        return DBusInterface(BatonInterface.suggestion, methods: [
            DBusMethod("Continue", out: [DBusArgument("outcome", "s")]) { [weak self] call in
                guard let self else { return [] }
                return [.string(try await self.takeSuggestion(path, caller: call.sender))]
            },
            DBusMethod("Dismiss") { [weak self] _ in
                guard let self else { return [] }
                await self.dismiss(path)
                return []
            },
        ], properties: signatures.keys.sorted().map { name in
            DBusProperty(name, signature: signatures[name] ?? "s") { properties[name] ?? .string("") }
        })
    }

    func dismiss(_ path: String) {
        guard let (member, suggestion) = suggestions.first(where: { $0.value.path == path }) else { return }
        settledRevisions[member] = suggestion.revision
        withdrawSuggestion(of: member)
    }
}
