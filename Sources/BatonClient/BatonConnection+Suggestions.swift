import BatonDBus

/// A ring member's activity that can be continued here (org.baton.Suggestion1).
public struct SuggestionInfo: Sendable, Hashable {
    public var path: String
    public var activityType: String
    public var device: String
    public var deviceName: String
    public var hasWebpageURL: Bool
    public var near: Bool
}

extension BatonConnection {
    static let suggestionInterfaceName = "org.baton.Suggestion1"

    /// The suggestions the daemon offers now, from its ObjectManager.
    public func suggestions() async throws(BatonClientError) -> [SuggestionInfo] {
        let reply = try await call(path: Self.managerPath, interface: Self.objectManagerInterface, method: "GetManagedObjects")
        var out: [SuggestionInfo] = []
        for (pathValue, interfaces) in reply.first?.dictionaryValue ?? [:] {
            guard let path = pathValue.objectPathValue,
                  let properties = interfaces.asDictionary?[Self.suggestionInterfaceName]?.asDictionary else { continue }
            out.append(SuggestionInfo(
                path: path, activityType: properties["ActivityType"]?.stringValue ?? "", device: properties["Device"]?.stringValue ?? "",
                deviceName: properties["DeviceName"]?.stringValue ?? "", hasWebpageURL: properties["HasWebpageURL"]?.boolValue ?? false,
                near: properties["Near"]?.boolValue ?? true))
        }
        return out.sorted { $0.path < $1.path }
    }

    /// Suggestion1.Continue; returns the outcome ("delivered", "declined", ...).
    public func continueSuggestionOutcome(at path: String) async throws(BatonClientError) -> String {
        let reply = try await call(path: path, interface: Self.suggestionInterfaceName, method: "Continue")
        return reply.first?.stringValue ?? ""
    }
}
