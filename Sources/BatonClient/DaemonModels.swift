// SPDX-License-Identifier: LGPL-2.1-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BatonAPI
import BatonCore
import BatonDBus

/// Manager1.GetStatus and the manager's properties.
public struct DaemonStatus: Sendable, Hashable {
    public typealias ErrorRecord = ManagerStatus.ErrorRecord

    /// starting, running, degraded, stopping
    public var state: String
    public var adapter: String
    /// off, advertising, scanning, both, unavailable
    public var radio: String
    /// Why the radio is unavailable; nil when it is not.
    public var radioDetail: String?
    /// Whether the adapter uses LE privacy: on, off or unknown; nil while the radio is not ready
    /// or from a daemon that does not say.
    public var lePrivacy: String?
    /// When it matters: what the public address exposes and the fix, or why it is unknown.
    public var lePrivacyDetail: String?
    public var errors: [ErrorRecord]
    public var version: String
    public var busName: String
    /// Whether this user runs a session agent (baton-agent) that can start handler apps; nil from
    /// a daemon that does not say.
    public var sessionAgent: Bool?
    /// "plain" or "sealed-host", "sealed-host+tpm2", "sealed-tpm2"; nil from a daemon that does not say.
    public var secretsAtRest: String?
    /// The last ring change refused because the ring record could not be saved (what, why, the
    /// fix) and when (Unix seconds); nil when none, or from a daemon that does not say.
    public var ringChangeRefused: String?
    public var ringChangeRefusedTime: Int64?

    init(status: ManagerStatus, managerProperties: [String: DBusValue]) throws(BatonClientError) {
        guard let version = OrgBaton.Manager1.version.value(in: managerProperties), let busName = OrgBaton.Manager1.busName.value(in: managerProperties) else {
            throw .unexpectedReply("Manager1 lacks the Version or BusName property")
        }
        state = status.state
        adapter = status.adapter
        radio = status.radio
        radioDetail = status.radioDetail
        lePrivacy = status.lePrivacy
        lePrivacyDetail = status.lePrivacyDetail
        errors = status.errors
        sessionAgent = status.sessionAgent
        secretsAtRest = status.secretsAtRest
        ringChangeRefused = status.ringChangeRefused
        ringChangeRefusedTime = status.ringChangeRefusedTime
        self.version = version
        self.busName = busName
    }
}

/// An org.baton.Activity1 object as the daemon shows it. Only the owner sees more than the type and
/// status; the other fields are nil for other users' activities.
public struct ActivityInfo: Sendable, Hashable {
    public var path: String
    public var activityType: String
    /// idle, preparing, published, failed
    public var status: String
    public var title: String?
    public var userInfo: [String: PropertyValue]?
    /// Nil when there is none or it is not visible.
    public var webpageURL: String?
    public var version: Int64?
    public var needsSave: Bool?
    public var isCurrent: Bool?
    public var owner: UInt32?
    public var revision: UInt32?
    /// A category such as "source-timeout"; nil when none or not visible.
    public var lastError: String?
    /// Activity1.EditSession: "this", the owning member's device id, "" (no document), nil (not visible).
    public var editSession: String?
    /// The attached document snapshot (Activity1.Document); nil when none or not visible.
    public var document: ActivityDocumentInfo?

    init(path: String, properties: [String: DBusValue]) throws(BatonClientError) {
        guard let type = OrgBaton.Activity1.activityType.value(in: properties), let status = OrgBaton.Activity1.status.value(in: properties) else {
            throw .unexpectedReply("activity \(path) lacks Type or Status")
        }
        self.path = path
        activityType = type
        self.status = status
        title = OrgBaton.Activity1.title.value(in: properties)
        if let userInfo = properties[OrgBaton.Activity1.userInfo.name] { self.userInfo = try decoding { () throws(BatonAPIError) in try PropertyValueCoding.decodeUserInfo(userInfo) } }
        webpageURL = OrgBaton.Activity1.webpageURL.value(in: properties).flatMap { $0.isEmpty ? nil : $0 }
        version = OrgBaton.Activity1.version.value(in: properties)
        needsSave = OrgBaton.Activity1.needsSave.value(in: properties)
        isCurrent = OrgBaton.Activity1.current.value(in: properties)
        owner = OrgBaton.Activity1.owner.value(in: properties)
        revision = OrgBaton.Activity1.revision.value(in: properties)
        lastError = OrgBaton.Activity1.lastError.value(in: properties).flatMap { $0.isEmpty ? nil : $0 }
        editSession = OrgBaton.Activity1.editSession.value(in: properties)
        document = OrgBaton.Activity1.document.value(in: properties).flatMap(ActivityDocumentInfo.init)
    }
}

/// What Activity1.Document says of a snapshot: never where it is stored.
public struct ActivityDocumentInfo: Sendable, Hashable {
    public var id: String
    public var mediaType: String
    public var size: UInt64
    /// SHA-256, lowercase hex.
    public var digest: String

    /// Nil for the empty dictionary (no document) or an incomplete one.
    init?(_ entries: [String: DBusValue]) {
        guard let id = entries["Id"]?.stringValue, let mediaType = entries["MediaType"]?.stringValue,
              let size = entries["Size"]?.uint64Value, let digest = entries["Digest"]?.stringValue else { return nil }
        self.id = id
        self.mediaType = mediaType
        self.size = size
        self.digest = digest
    }
}

/// Activity1.GetPayload: the state that would leave the machine.
public struct ActivityPayload: Sendable, Hashable {
    public var activityType: String
    public var title: String
    public var userInfo: [String: PropertyValue]
    public var webpageURL: String?
    public var version: Int64

    init(_ dictionary: [String: DBusValue]) throws(BatonClientError) {
        guard let type = dictionary["Type"]?.stringValue, let title = dictionary["Title"]?.stringValue,
              let userInfo = dictionary["UserInfo"], let version = dictionary["Version"]?.int64Value else {
            throw .unexpectedReply("GetPayload lacks Type, Title, UserInfo or Version")
        }
        activityType = type
        self.title = title
        self.userInfo = try decoding { () throws(BatonAPIError) in try PropertyValueCoding.decodeUserInfo(userInfo) }
        webpageURL = dictionary["WebpageURL"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        self.version = version
    }
}

/// An activity continued from another device, as delivered to an `ActivityHandler`.
public struct ContinuedActivity: Sendable, Hashable {
    public var activityType: String
    public var title: String
    public var userInfo: [String: PropertyValue]
    public var webpageURL: URL?
    public var version: Int64
    /// The name of the device it came from.
    public var device: String
    /// The activity's document, pulled and checked against its digest before delivery; nil when it has none.
    public var document: ContinuedDocument?

    public init(activityType: String, title: String, userInfo: [String: PropertyValue], webpageURL: URL?, version: Int64, device: String,
                document: ContinuedDocument? = nil) {
        self.document = document
        self.activityType = activityType
        self.title = title
        self.userInfo = userInfo
        self.webpageURL = webpageURL
        self.version = version
        self.device = device
    }
}

/// A document that came with a continued activity (docs/dbus-api.md, ActivityHandler1.Continue).
public struct ContinuedDocument: Sendable, Hashable {
    public var id: String
    public var mediaType: String
    public var size: UInt64
    /// SHA-256 of the bytes, lowercase hex.
    public var digest: String
    /// A read-only descriptor of the daemon's checked copy, positioned at 0. The handler owns it
    /// and closes it (after copying or reading what it needs).
    public var descriptor: Int32

    public init(id: String, mediaType: String, size: UInt64, digest: String, descriptor: Int32) {
        self.id = id
        self.mediaType = mediaType
        self.size = size
        self.digest = digest
        self.descriptor = descriptor
    }
}

/// A handler registered with `BatonConnection.registerHandler`.
public struct HandlerRegistration: Sendable, Hashable {
    /// The handler object's path on this connection.
    public var path: String
    public var types: [String]
    /// The versions it declared; nil: every version.
    public var versions: ActivityVersions? = nil
}
