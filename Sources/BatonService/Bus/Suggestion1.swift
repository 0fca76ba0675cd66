import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.Suggestion1: one object per suggestion, under /org/baton so InterfacesAdded announces it.
extension RingBus: SuggestionBoard {
    public func offer(_ suggestion: ShownSuggestion) async throws {
        try await connection.export([suggestionInterface(suggestion)], at: suggestion.path)
    }

    public func withdraw(_ suggestion: ShownSuggestion) async {
        try? connection.unexport(path: suggestion.path)
    }

    func suggestionInterface(_ suggestion: ShownSuggestion) -> DBusInterface {
        let path = suggestion.path
        let properties: [String: DBusValue] = [
            "Device": .string(suggestion.member.shortForm), "DeviceName": .string(suggestion.memberName),
            "ActivityType": .string(suggestion.activityType), "Revision": .uint32(suggestion.revision),
            "HasWebpageURL": .boolean(suggestion.hasWebpageURL), "Near": .boolean(suggestion.near),
        ]
        let signatures = ["Device": "s", "DeviceName": "s", "ActivityType": "s", "Revision": "u", "HasWebpageURL": "b", "Near": "b"]
        return DBusInterface(BatonInterface.suggestion, methods: [
            DBusMethod("Continue", out: [DBusArgument("outcome", "s")]) { [weak self] call in
                guard let self, let continuation = self.continuation else { return [] }
                // The activity is delivered to the caller's own handlers: any local user may take it.
                let uid = try await self.connection.connectionUnixUser(call.sender)
                return [.string(try await mappingFailures { () throws(ServiceFailure) in try await continuation.take(path, uid: uid) })]
            },
            DBusMethod("Dismiss") { [weak self] _ in
                await self?.continuation?.dismiss(path)
                return []
            },
        ], properties: signatures.keys.sorted().map { name in
            DBusProperty(name, signature: signatures[name] ?? "s") { properties[name] ?? .string("") }
        })
    }
}
