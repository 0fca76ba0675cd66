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
    public var errors: [ErrorRecord]
    public var version: String
    public var busName: String

    init(status: ManagerStatus, managerProperties: [String: DBusValue]) throws(BatonClientError) {
        guard let version = managerProperties["Version"]?.stringValue, let busName = managerProperties["BusName"]?.stringValue else {
            throw .unexpectedReply("Manager1 lacks the Version or BusName property")
        }
        state = status.state
        adapter = status.adapter
        radio = status.radio
        radioDetail = status.radioDetail
        errors = status.errors
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

    init(path: String, properties: [String: DBusValue]) throws(BatonClientError) {
        guard let type = properties["Type"]?.stringValue, let status = properties["Status"]?.stringValue else {
            throw .unexpectedReply("activity \(path) lacks Type or Status")
        }
        self.path = path
        activityType = type
        self.status = status
        title = properties["Title"]?.stringValue
        if let userInfo = properties["UserInfo"] { self.userInfo = try decoding { () throws(BatonAPIError) in try PropertyValueCoding.decodeUserInfo(userInfo) } }
        webpageURL = properties["WebpageURL"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        version = properties["Version"]?.int64Value
        needsSave = properties["NeedsSave"]?.boolValue
        isCurrent = properties["Current"]?.boolValue
        owner = properties["Owner"]?.uint32Value
        revision = properties["Revision"]?.uint32Value
        lastError = properties["LastError"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        editSession = properties["EditSession"]?.stringValue
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

    public init(activityType: String, title: String, userInfo: [String: PropertyValue], webpageURL: URL?, version: Int64, device: String) {
        self.activityType = activityType
        self.title = title
        self.userInfo = userInfo
        self.webpageURL = webpageURL
        self.version = version
        self.device = device
    }
}

/// A handler registered with `BatonConnection.registerHandler`.
public struct HandlerRegistration: Sendable, Hashable {
    /// The handler object's path on this connection.
    public var path: String
    public var types: [String]
}
