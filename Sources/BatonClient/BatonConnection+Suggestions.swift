// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonDBus

/// A ring member's activity that can be continued here (org.baton.Suggestion1).
public struct SuggestionInfo: Sendable, Hashable {
    public var path: String
    public var activityType: String
    public var device: String
    public var deviceName: String
    public var hasWebpageURL: Bool
    public var near: Bool
    /// The member's advert revision this suggestion stands for.
    public var revision: UInt32

    init(path: String, _ properties: SuggestionProperties) {
        self.path = path
        activityType = properties.activityType
        device = properties.device
        deviceName = properties.deviceName
        hasWebpageURL = properties.hasWebpageURL
        near = properties.near
        revision = properties.revision
    }
}

extension BatonConnection {
    /// The suggestions the daemon offers now, from its ObjectManager.
    public func suggestions() async throws(BatonClientError) -> [SuggestionInfo] {
        let reply = try await call(path: Self.managerPath, interface: BatonInterface.objectManager, method: "GetManagedObjects")
        var out: [SuggestionInfo] = []
        for (pathValue, interfaces) in reply.first?.dictionaryValue ?? [:] {
            guard let path = pathValue.objectPathValue,
                  let properties = interfaces.asDictionary?[BatonInterface.suggestion]?.asDictionary else { continue }
            out.append(SuggestionInfo(path: path, SuggestionProperties(properties)))
        }
        return out.sorted { $0.path < $1.path }
    }

    /// Suggestion1.ContinueInBrowser (a suggestion whose Fallback is "browser"): the source is told
    /// it was continued and the webpage URL is returned, for the caller to open (xdg-open).
    /// `timeout`: how long to wait for the daemon (nil: the bus default).
    public func continueSuggestionInBrowser(at path: String, timeout: Duration? = nil) async throws(BatonClientError) -> String {
        try await call(OrgBaton.Suggestion1.continueInBrowser, at: path, timeout: timeout)
    }

    /// Suggestion1.Continue; returns the outcome ("delivered", "declined", ...).
    public func continueSuggestionOutcome(at path: String) async throws(BatonClientError) -> String {
        // A stopping daemon answers with no outcome: "".
        let reply = try await invoke(OrgBaton.Suggestion1.continue, at: path)
        return reply.first?.stringValue ?? ""
    }
}
