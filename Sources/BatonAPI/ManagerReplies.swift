// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonDBus

/// Manager1.GetStatus (`a{sv}`).
public struct ManagerStatus: Sendable, Hashable {
    /// One entry of "Errors": a failure category, how often and when it last happened.
    public struct ErrorRecord: Sendable, Hashable {
        /// Unix seconds of the latest occurrence.
        public var time: Int64
        public var category: String
        public var count: UInt32

        public init(time: Int64, category: String, count: UInt32) {
            self.time = time
            self.category = category
            self.count = count
        }
    }

    /// starting, running, degraded, stopping
    public var state: String
    public var adapter: String
    /// off, advertising, scanning, both, unavailable
    public var radio: String
    /// Why the radio is unavailable ("bluetoothd is not running"); nil when it is not, or from
    /// a daemon that does not say.
    public var radioDetail: String?
    /// Whether the adapter uses LE privacy: on, off or unknown; nil while the radio is not ready,
    /// or from a daemon that does not say.
    public var lePrivacy: String?
    /// When LE privacy matters: what the public address exposes and the fix, or why it is unknown.
    public var lePrivacyDetail: String?
    public var errors: [ErrorRecord]
    /// Whether the calling user runs a session agent (baton-agent) that can start handler apps;
    /// nil from a daemon that does not say.
    public var sessionAgent: Bool?
    /// How the daemon keeps its keys on disk: "plain" (0600 files) or "sealed-host",
    /// "sealed-host+tpm2", "sealed-tpm2" (systemd-creds); nil from a daemon that does not say.
    public var secretsAtRest: String?
    /// The last ring change (a pairing join, a removal, a RingSync) refused because the ring record
    /// could not be saved: what, why and the fix; nil when none was in this run of the daemon, or
    /// from a daemon that does not say.
    public var ringChangeRefused: String?
    /// When it was refused (Unix seconds); set with `ringChangeRefused`.
    public var ringChangeRefusedTime: Int64?

    public init(state: String, adapter: String, radio: String, radioDetail: String? = nil, lePrivacy: String? = nil,
                lePrivacyDetail: String? = nil, errors: [ErrorRecord] = [], sessionAgent: Bool? = nil, secretsAtRest: String? = nil,
                ringChangeRefused: String? = nil, ringChangeRefusedTime: Int64? = nil) {
        self.ringChangeRefused = ringChangeRefused
        self.ringChangeRefusedTime = ringChangeRefusedTime
        self.lePrivacy = lePrivacy
        self.lePrivacyDetail = lePrivacyDetail
        self.sessionAgent = sessionAgent
        self.secretsAtRest = secretsAtRest
        self.state = state
        self.adapter = adapter
        self.radio = radio
        self.radioDetail = radioDetail
        self.errors = errors
    }

    public init(_ value: DBusValue) throws(BatonAPIError) {
        guard let status = value.asDictionary else { throw .unexpectedReply("GetStatus returned '\(value.signature)'") }
        guard let state = status["State"]?.stringValue, let adapter = status["Adapter"]?.stringValue,
              let radio = status["Radio"]?.stringValue else {
            throw .unexpectedReply("GetStatus lacks State, Adapter or Radio strings")
        }
        var errors: [ErrorRecord] = []
        if let records = status["Errors"] {
            guard let items = records.arrayValue else { throw .unexpectedReply("GetStatus Errors is not an array") }
            for item in items {
                guard let record = item.asDictionary, let time = record["Time"]?.int64Value,
                      let category = record["Category"]?.stringValue, let count = record["Count"]?.uint32Value else {
                    throw .unexpectedReply("GetStatus error record lacks Time (x), Category (s) or Count (u)")
                }
                errors.append(ErrorRecord(time: time, category: category, count: count))
            }
        }
        var detail: String?
        if let value = status["RadioDetail"] {
            guard let text = value.stringValue else { throw .unexpectedReply("GetStatus RadioDetail is not a string") }
            detail = text
        }
        var privacy: String?
        if let value = status["LEPrivacy"] {
            guard let text = value.stringValue else { throw .unexpectedReply("GetStatus LEPrivacy is not a string") }
            privacy = text
        }
        var privacyDetail: String?
        if let value = status["LEPrivacyDetail"] {
            guard let text = value.stringValue else { throw .unexpectedReply("GetStatus LEPrivacyDetail is not a string") }
            privacyDetail = text
        }
        var agent: Bool?
        if let value = status["SessionAgent"] {
            guard let flag = value.boolValue else { throw .unexpectedReply("GetStatus SessionAgent is not a boolean") }
            agent = flag
        }
        var secrets: String?
        if let value = status["SecretsAtRest"] {
            guard let text = value.stringValue else { throw .unexpectedReply("GetStatus SecretsAtRest is not a string") }
            secrets = text
        }
        var refused: String?
        if let value = status["RingChangeRefused"] {
            guard let text = value.stringValue else { throw .unexpectedReply("GetStatus RingChangeRefused is not a string") }
            refused = text
        }
        var refusedTime: Int64?
        if let value = status["RingChangeRefusedTime"] {
            guard let time = value.int64Value else { throw .unexpectedReply("GetStatus RingChangeRefusedTime is not an int64") }
            refusedTime = time
        }
        self.init(state: state, adapter: adapter, radio: radio, radioDetail: detail, lePrivacy: privacy, lePrivacyDetail: privacyDetail,
                  errors: errors, sessionAgent: agent, secretsAtRest: secrets, ringChangeRefused: refused, ringChangeRefusedTime: refusedTime)
    }

    public var dbusValue: DBusValue {
        let records = errors.map { record in
            DBusValue.propertyDictionary([
                "Time": .int64(record.time), "Category": .string(record.category), "Count": .uint32(record.count),
            ])
        }
        var status: [String: DBusValue] = [
            "State": .string(state), "Adapter": .string(adapter), "Radio": .string(radio),
            "Errors": .array(elementSignature: "a{sv}", records),
        ]
        if let radioDetail { status["RadioDetail"] = .string(radioDetail) }
        if let lePrivacy { status["LEPrivacy"] = .string(lePrivacy) }
        if let lePrivacyDetail { status["LEPrivacyDetail"] = .string(lePrivacyDetail) }
        if let sessionAgent { status["SessionAgent"] = .boolean(sessionAgent) }
        if let secretsAtRest { status["SecretsAtRest"] = .string(secretsAtRest) }
        if let ringChangeRefused { status["RingChangeRefused"] = .string(ringChangeRefused) }
        if let ringChangeRefusedTime { status["RingChangeRefusedTime"] = .int64(ringChangeRefusedTime) }
        return .propertyDictionary(status)
    }
}

/// The properties of an org.baton.Suggestion1 object: a ring member's activity that can be
/// continued here.
public struct SuggestionProperties: Sendable, Hashable {
    /// The member's short id.
    public var device: String
    public var deviceName: String
    public var activityType: String
    public var revision: UInt32
    public var hasWebpageURL: Bool
    /// Whether the member is close enough to hand off to (true when the daemon does not say).
    public var near: Bool
    /// "browser" when no local handler has the type and only the webpage URL can serve (take it
    /// with ContinueInBrowser; ActivityType is then ""); "" otherwise.
    public var fallback: String
    /// The activity's title once the daemon has fetched it ahead (prefetch); "" until then.
    public var title: String

    /// The D-Bus signature of each property (OrgBaton.Suggestion1's declarations).
    public static let signatures = Dictionary(uniqueKeysWithValues: OrgBaton.Suggestion1.members.filter { $0.kind == .property }
        .map { ($0.name, $0.inSignature) })

    public init(device: String, deviceName: String, activityType: String, revision: UInt32 = 0, hasWebpageURL: Bool = false, near: Bool = true,
                fallback: String = "", title: String = "") {
        self.title = title
        self.device = device
        self.deviceName = deviceName
        self.activityType = activityType
        self.revision = revision
        self.hasWebpageURL = hasWebpageURL
        self.near = near
        self.fallback = fallback
    }

    /// Missing properties read as empty (a suggestion being withdrawn may list fewer).
    public init(_ properties: [String: DBusValue]) {
        self.init(device: properties["Device"]?.stringValue ?? "", deviceName: properties["DeviceName"]?.stringValue ?? "",
                  activityType: properties["ActivityType"]?.stringValue ?? "", revision: properties["Revision"]?.uint32Value ?? 0,
                  hasWebpageURL: properties["HasWebpageURL"]?.boolValue ?? false, near: properties["Near"]?.boolValue ?? true,
                  fallback: properties["Fallback"]?.stringValue ?? "", title: properties["Title"]?.stringValue ?? "")
    }

    public var dbusProperties: [String: DBusValue] {
        [
            "Device": .string(device), "DeviceName": .string(deviceName), "ActivityType": .string(activityType),
            "Revision": .uint32(revision), "HasWebpageURL": .boolean(hasWebpageURL), "Near": .boolean(near),
            "Fallback": .string(fallback), "Title": .string(title),
        ]
    }
}
