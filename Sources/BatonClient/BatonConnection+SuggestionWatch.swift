// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonDBus

/// A Suggestion1 object appearing or going, as the daemon's ObjectManager announces it.
public enum SuggestionChange: Sendable, Hashable {
    /// The object's Suggestion1 properties, raw, so properties newer than this library are kept.
    case added(path: String, properties: [String: DBusValue])
    case removed(path: String)
    /// Suggestion1.Title changed (the daemon fetched the activity ahead).
    case retitled(path: String, title: String)
}

extension BatonConnection {
    /// InterfacesAdded / InterfacesRemoved for Suggestion1 objects from the daemon. Subscribe first,
    /// then read `suggestionObjects()`, so nothing that changes in between is missed.
    public func suggestionChanges() async throws(BatonClientError) -> AsyncStream<SuggestionChange> {
        let signals = try await translatingErrors {
            try await dbus.signals(matching: DBusMatchRule(sender: busName, interface: BatonInterface.objectManager,
                                                           path: Self.managerPath))
        }
        let propertyChanges = try await translatingErrors {
            try await dbus.signals(matching: DBusMatchRule(sender: busName, interface: BatonInterface.properties, member: "PropertiesChanged",
                                                           pathNamespace: BatonObjectPath.suggestionPrefix,
                                                           stringArguments: [0: BatonInterface.suggestion]))
        }
        return AsyncStream { continuation in
            let objects = Task {
                for await signal in signals {
                    if let change = Self.suggestionChange(from: signal) { continuation.yield(change) }
                }
                continuation.finish()
            }
            let titles = Task {
                for await signal in propertyChanges {
                    if let change = Self.titleChange(from: signal) {
                        continuation.yield(change)
                    } else if let path = Self.invalidatedTitlePath(from: signal),
                              let title = try? await self.suggestionTitle(at: path), !title.isEmpty {
                        continuation.yield(.retitled(path: path, title: title))
                    }
                }
            }
            continuation.onTermination = { _ in
                objects.cancel()
                titles.cancel()
            }
        }
    }

    /// Every Suggestion1 object now, with its raw properties (GetManagedObjects).
    public func suggestionObjects() async throws(BatonClientError) -> [String: [String: DBusValue]] {
        let reply = try await call(path: Self.managerPath, interface: BatonInterface.objectManager, method: "GetManagedObjects")
        var out: [String: [String: DBusValue]] = [:]
        for (pathValue, interfaces) in reply.first?.dictionaryValue ?? [:] {
            guard let path = pathValue.objectPathValue,
                  let properties = interfaces.asDictionary?[BatonInterface.suggestion]?.asDictionary else { continue }
            out[path] = properties.mapValues(\.unwrapped)
        }
        return out
    }

    /// Suggestion1.Dismiss: this revision is not offered again.
    public func dismissSuggestion(at path: String) async throws(BatonClientError) {
        try await call(OrgBaton.Suggestion1.dismiss, at: path)
    }

    /// Suggestion1.Title as this caller may read it ("" unless a ring user, or not fetched yet).
    public func suggestionTitle(at path: String) async throws(BatonClientError) -> String {
        let reply = try await call(path: path, interface: BatonInterface.properties, method: "Get",
                                   arguments: [.string(BatonInterface.suggestion), .string(OrgBaton.Suggestion1.title.name)])
        return reply.first?.unwrapped.stringValue ?? ""
    }

    /// PropertiesChanged(Suggestion1, _, [..., "Title", ...]) → the suggestion's path (the daemon
    /// invalidates the title rather than broadcasting it); nil for anything else.
    static func invalidatedTitlePath(from signal: DBusSignal) -> String? {
        guard signal.member == "PropertiesChanged", signal.path.hasPrefix(BatonObjectPath.suggestionPrefix + "/"), signal.arguments.count >= 3,
              signal.arguments[0].stringValue == BatonInterface.suggestion,
              signal.arguments[2].stringArrayValue?.contains(OrgBaton.Suggestion1.title.name) == true else { return nil }
        return signal.path
    }

    /// PropertiesChanged(Suggestion1, {Title: s}, _) → `.retitled`; nil for anything else.
    static func titleChange(from signal: DBusSignal) -> SuggestionChange? {
        guard signal.member == "PropertiesChanged", signal.path.hasPrefix(BatonObjectPath.suggestionPrefix + "/"), signal.arguments.count >= 2,
              signal.arguments[0].stringValue == BatonInterface.suggestion,
              let title = signal.arguments[1].asDictionary.flatMap({ OrgBaton.Suggestion1.title.value(in: $0) }) else { return nil }
        return .retitled(path: signal.path, title: title)
    }

    /// Nil for other signals, other interfaces and malformed arguments (the bus is untrusted input).
    static func suggestionChange(from signal: DBusSignal) -> SuggestionChange? {
        guard let path = signal.arguments.first?.objectPathValue, path.hasPrefix(BatonObjectPath.suggestionPrefix + "/") else { return nil }
        switch signal.member {
        case "InterfacesAdded":
            guard signal.arguments.count >= 2,
                  let properties = signal.arguments[1].asDictionary?[BatonInterface.suggestion]?.asDictionary else { return nil }
            return .added(path: path, properties: properties.mapValues(\.unwrapped))
        case "InterfacesRemoved":
            guard signal.arguments.count >= 2, signal.arguments[1].stringArrayValue?.contains(BatonInterface.suggestion) == true else { return nil }
            return .removed(path: path)
        default:
            return nil
        }
    }
}

/// Ring1.DocumentProgress: how much of a continuation's document arrived.
public struct DocumentProgressUpdate: Sendable, Hashable {
    public var activityType: String
    public var received: UInt64
    public var total: UInt64
}

extension BatonConnection {
    /// The daemon's Ring1.DocumentProgress signals for Continue calls made on this connection
    /// (they are sent to the caller only). Subscribe before calling Continue.
    public func documentProgress() async throws(BatonClientError) -> AsyncStream<DocumentProgressUpdate> {
        let signals = try await translatingErrors {
            try await dbus.signals(matching: DBusMatchRule(sender: busName, interface: OrgBaton.Ring1.documentProgress.interface,
                                                           member: OrgBaton.Ring1.documentProgress.name, path: BatonObjectPath.ring))
        }
        return AsyncStream { continuation in
            let task = Task {
                for await signal in signals {
                    guard let (type, received, total) = OrgBaton.Ring1.documentProgress.decode(signal) else { continue }
                    continuation.yield(DocumentProgressUpdate(activityType: type, received: received, total: total))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
