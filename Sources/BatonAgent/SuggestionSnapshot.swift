// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus

/// What the agent needs from one org.baton.Suggestion1 object. Built from the raw property
/// dictionary so properties the daemon adds later (Title) are read when present and their absence
/// keeps today's behaviour. `Fallback` "browser" means no local app handles the type (the daemon
/// then knows only its hash, so ActivityType is empty) and only ContinueInBrowser serves it.
public struct SuggestionSnapshot: Sendable, Hashable {
    public var path: String
    /// The ring member's short id: one notification per member.
    public var device: String
    public var deviceName: String
    public var activityType: String
    public var revision: UInt32
    public var title: String?
    public var hasWebpageURL: Bool
    /// Whether a local app can take the activity; nil when the daemon does not say.
    public var hasHandler: Bool?

    public init(path: String, device: String, deviceName: String, activityType: String, revision: UInt32 = 0,
                title: String? = nil, hasWebpageURL: Bool = false, hasHandler: Bool? = nil) {
        self.path = path
        self.device = device
        self.deviceName = deviceName
        self.activityType = activityType
        self.revision = revision
        self.title = title
        self.hasWebpageURL = hasWebpageURL
        self.hasHandler = hasHandler
    }

    /// Nil when the object lacks Device or ActivityType (e.g. listed while being removed).
    public init?(path: String, properties: [String: DBusValue]) {
        let browserFallback = properties["Fallback"]?.stringValue == "browser"
        guard let device = properties["Device"]?.stringValue, !device.isEmpty,
              let type = properties["ActivityType"]?.stringValue, !type.isEmpty || browserFallback else { return nil }
        let title = properties["Title"]?.stringValue
        self.init(path: path, device: device, deviceName: properties["DeviceName"]?.stringValue ?? device,
                  activityType: type, revision: properties["Revision"]?.uint32Value ?? 0,
                  title: title?.isEmpty == true ? nil : title,
                  hasWebpageURL: properties["HasWebpageURL"]?.boolValue ?? false,
                  hasHandler: browserFallback ? false : properties["HasHandler"]?.boolValue)
    }

    /// Only a browser can serve it: the daemon said no local app handles the type, and there is a URL.
    public var onlyBrowserCanServe: Bool { hasWebpageURL && hasHandler == false }
}
