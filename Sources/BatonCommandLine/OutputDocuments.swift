// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient

/// The JSON documents `baton` and `bt-pair` print, in one place, with exactly the keys
/// docs/dbus-api.md lists under "Machine-readable outputs" (the D-Bus names; a contract test
/// compares the two). A key whose value is unknown is left out.
public enum OutputDocument {
    public typealias Members = [(key: String, value: JSONValue)]

    // MARK: baton

    /// `baton --json status`.
    public static func status(_ status: DaemonStatus) -> JSONValue {
        var members: Members = [("State", .string(status.state)), ("Adapter", .string(status.adapter)), ("Radio", .string(status.radio))]
        if let detail = status.radioDetail { members.append(("RadioDetail", .string(detail))) }
        if let privacy = status.lePrivacy { members.append(("LEPrivacy", .string(privacy))) }
        if let detail = status.lePrivacyDetail { members.append(("LEPrivacyDetail", .string(detail))) }
        let errors = status.errors.map { record in
            JSONValue.object([("Time", .integer(record.time)), ("Category", .string(record.category)),
                              ("Count", .integer(Int64(record.count)))])
        }
        members += [("Version", .string(status.version)), ("BusName", .string(status.busName)), ("Errors", .array(errors))]
        if let agent = status.sessionAgent { members.append(("SessionAgent", .boolean(agent))) }
        if let secrets = status.secretsAtRest { members.append(("SecretsAtRest", .string(secrets))) }
        if let refused = status.ringChangeRefused { members.append(("RingChangeRefused", .string(refused))) }
        if let time = status.ringChangeRefusedTime { members.append(("RingChangeRefusedTime", .integer(time))) }
        return .object(members)
    }

    /// One entry of `baton --json list`: Activity1 properties; other users' activities show
    /// only Path, Type and Status.
    public static func activity(_ activity: ActivityInfo) -> JSONValue {
        var members: Members = [("Path", .string(activity.path)), ("Type", .string(activity.activityType)), ("Status", .string(activity.status))]
        if let title = activity.title { members.append(("Title", .string(title))) }
        if let userInfo = activity.userInfo { members.append(("UserInfo", UserInfoJSON.json(from: userInfo))) }
        if let url = activity.webpageURL { members.append(("WebpageURL", .string(url))) }
        if let version = activity.version { members.append(("Version", .integer(version))) }
        if let needsSave = activity.needsSave { members.append(("NeedsSave", .boolean(needsSave))) }
        if let current = activity.isCurrent { members.append(("Current", .boolean(current))) }
        if let owner = activity.owner { members.append(("Owner", .integer(Int64(owner)))) }
        if let revision = activity.revision { members.append(("Revision", .integer(Int64(revision)))) }
        if let lastError = activity.lastError { members.append(("LastError", .string(lastError))) }
        if let document = activity.document {
            members.append(("Document", .object([("Id", .string(document.id)), ("MediaType", .string(document.mediaType)),
                                                 ("Size", .integer(Int64(clamping: document.size))), ("Digest", .string(document.digest))])))
        }
        if let editSession = activity.editSession { members.append(("EditSession", .string(editSession))) }
        return .object(members)
    }

    /// One entry of `baton --json suggestions`: Suggestion1 properties.
    public static func suggestion(_ suggestion: SuggestionInfo) -> JSONValue {
        .object([("Path", .string(suggestion.path)), ("ActivityType", .string(suggestion.activityType)),
                 ("Device", .string(suggestion.device)), ("DeviceName", .string(suggestion.deviceName)),
                 ("HasWebpageURL", .boolean(suggestion.hasWebpageURL)), ("Near", .boolean(suggestion.near)),
                 ("Revision", .integer(Int64(suggestion.revision)))])
    }

    /// `baton --json continue`.
    public static func continued(_ suggestionPath: String, outcome: String) -> JSONValue {
        .object([("Continued", .string(suggestionPath)), ("Outcome", .string(outcome))])
    }

    /// `baton --json continue --browser`: the webpage URL to open.
    public static func continuedInBrowser(_ suggestionPath: String, url: String) -> JSONValue {
        .object([("Continued", .string(suggestionPath)), ("Outcome", .string("open-url")), ("WebpageURL", .string(url))])
    }

    /// `baton --json publish`: `onAir` says whether the activity went on the air.
    public static func published(path: String, type: String, current: Bool, status: String, lastError: String?, onAir: Bool) -> JSONValue {
        var members: Members = [("Path", .string(path)), ("Type", .string(type)), ("Current", .boolean(current)), ("Status", .string(status))]
        if let lastError { members.append(("LastError", .string(lastError))) }
        members.append(("OnAir", .boolean(onAir)))
        return .object(members)
    }

    /// `baton --json handled-types`.
    public static func handledTypes(_ types: [String]) -> JSONValue { .array(types.map { .string($0) }) }

    // MARK: bt-pair

    /// One entry of `bt-pair --json list`: a Ring1.ListMembers entry.
    public static func ringMember(_ member: RingMember) -> JSONValue {
        var members: Members = [("Name", .string(member.name)), ("DeviceId", .string(member.deviceID)),
                                ("ShortId", .string(member.shortID)), ("Self", .boolean(member.isSelf))]
        if let pairedSince = member.pairedSince { members.append(("PairedSince", .integer(pairedSince))) }
        if let lastSeen = member.lastSeen { members.append(("LastSeen", .integer(lastSeen))) }
        if let lastRSSI = member.lastRSSI { members.append(("LastRSSI", .integer(Int64(lastRSSI)))) }
        if let endpoints = member.endpoints { members.append(("Endpoints", .array(endpoints.map { .string($0) }))) }
        if let introducedBy = member.introducedBy { members.append(("IntroducedBy", .string(introducedBy))) }
        if let removed = member.introducerRemoved { members.append(("IntroducerRemoved", .boolean(removed))) }
        return .object(members)
    }

    /// One entry of `bt-pair --json discover`: a Pairing1.Discover entry.
    public static func pairingEndpoint(_ endpoint: PairingEndpoint) -> JSONValue {
        .object([("Name", .string(endpoint.name)), ("SessionId", .string(endpoint.sessionID)), ("Address", .string(endpoint.address)),
                 ("Port", .integer(Int64(endpoint.port))), ("Host", .string(endpoint.host)), ("Transport", .string(endpoint.transport)),
                 ("Psm", .integer(Int64(endpoint.psm))), ("AddressType", .string(endpoint.addressType))])
    }

    /// `bt-pair --json accept`: what the other machine needs.
    public static func acceptOffer(port: UInt16, sessionID: String) -> JSONValue {
        .object([("Port", .integer(Int64(port))), ("SessionId", .string(sessionID))])
    }

    /// `bt-pair --json with` (and the end of `accept`): paired.
    public static func paired(name: String, deviceID: String, code: String) -> JSONValue {
        .object([("Result", .string("paired")), ("Name", .string(name)), ("DeviceId", .string(deviceID)), ("Code", .string(code))])
    }

    /// `bt-pair --json with` (and the end of `accept`): failed, with PairingSession1.Error.
    public static func pairingFailed(error: String) -> JSONValue {
        .object([("Result", .string("failed")), ("Error", .string(error))])
    }

    /// `bt-pair --json remove`: `introduced` are the short ids of the members the removed one paired
    /// into the ring (transitively, those a removal with what it introduced takes out now);
    /// `alsoRemoved` says whether it was removed with what it introduced (--yes: one cascading mark,
    /// which also takes out what it pairs in later).
    /// `bt-pair reset-identity --json`: the new device id and the one the other members still list.
    public static func identityReset(deviceID: String, previousDeviceID: String) -> JSONValue {
        .object([("Result", .string("identity-reset")), ("DeviceId", .string(deviceID)), ("PreviousDeviceId", .string(previousDeviceID))])
    }

    public static func removed(device: String, introduced: [String] = [], alsoRemoved: Bool = false) -> JSONValue {
        .object([("Result", .string("removed")), ("Device", .string(device)), ("Introduced", .array(introduced.map { .string($0) })),
                 ("IntroducedRemoved", .boolean(alsoRemoved))])
    }
}
