// SPDX-License-Identifier: GPL-2.0-or-later
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

    public func titleKnown(_ suggestion: ShownSuggestion, title: String) async {
        // Invalidated, not sent: a broadcast would show the title to every account; a ring user's
        // client reads it (the getter answers only ring users).
        try? connection.emitPropertiesChanged(path: suggestion.path, interface: BatonInterface.suggestion,
                                              changed: [:], invalidated: [OrgBaton.Suggestion1.title.name])
    }

    /// Ring1.DocumentProgress, unicast to the caller of Continue: nobody else learns what it pulls.
    public func documentProgress(_ progress: DocumentProgress, to caller: String) async {
        try? connection.emitSignal(path: BatonObjectPath.ring, interface: BatonInterface.ring, name: OrgBaton.Ring1.documentProgress.name,
                                   arguments: [.string(progress.activityType), .uint64(progress.received), .uint64(progress.total)],
                                   destination: caller)
    }

    /// The caller's uid when it may act on suggestions: one of the machine's ring users
    /// (PrivilegePolicy), else as polkit's org.baton.continue answers (the active local session).
    func requireRingUser(_ sender: String) async throws -> UInt32 {
        try await requireAccess(.continueSuggestions, sender)
    }

    func suggestionInterface(_ suggestion: ShownSuggestion) -> DBusInterface {
        let path = suggestion.path
        // One table with the client (BatonAPI): names, signatures, values.
        let properties = SuggestionProperties(device: suggestion.member.shortForm, deviceName: suggestion.memberName,
                                              activityType: suggestion.activityType, revision: suggestion.revision,
                                              hasWebpageURL: suggestion.hasWebpageURL, near: suggestion.near,
                                              fallback: suggestion.fallback).dbusProperties
        let signatures = SuggestionProperties.signatures
        return DBusInterface(BatonInterface.suggestion, methods: [
            // A suggestion is a ring member's activity, and the ring belongs to the machine: only its
            // ring users (root, the daemon's user, group baton: PrivilegePolicy, as for Ring1.Continue)
            // and whom polkit allows org.baton.continue (the active local session) may act on it; it
            // is then delivered to that caller's own handlers.
            DBusMethod(OrgBaton.Suggestion1.continue) { [weak self] call in
                guard let self, let continuation = self.continuation else { return [] }
                let uid = try await self.requireRingUser(call.sender)
                return [.string(try await mappingFailures { () throws(ServiceFailure) in try await continuation.take(path, uid: uid, caller: call.sender) })]
            },
            DBusMethod(OrgBaton.Suggestion1.continueInBrowser) { [weak self] call in
                guard let self, let continuation = self.continuation else { return [] }
                // The URL goes only to the caller (this reply), whose session opens it.
                let uid = try await self.requireRingUser(call.sender)
                return [.string(try await mappingFailures { () throws(ServiceFailure) in try await continuation.continueInBrowser(path, uid: uid) })]
            },
            DBusMethod(OrgBaton.Suggestion1.dismiss) { [weak self] call in
                guard let self else { return [] }
                _ = try await self.requireRingUser(call.sender)
                await self.continuation?.dismiss(path)
                return []
            },
        ], properties: signatures.keys.sorted().map { name in
            // Title is known only once the activity was fetched ahead: asked when read, and only
            // ring users and callers polkit allows org.baton.continue read it (others, and broadcasts with
            // no caller, get "").
            if name == OrgBaton.Suggestion1.title.name {
                return DBusProperty(name, signature: "s") { [weak self] in
                    // No title yet (the usual case): nothing to hide, and no lookup of the caller.
                    guard let self, let title = await self.continuation?.title(ofSuggestionAt: path), !title.isEmpty,
                          let sender = DBusCallContext.sender, (try? await self.requireRingUser(sender)) != nil else { return .string("") }
                    return .string(title)
                }
            }
            return DBusProperty(name, signature: signatures[name] ?? "s") { properties[name] ?? .string("") }
        })
    }
}
