// SPDX-License-Identifier: LGPL-2.1-or-later
/// A user activity as it travels in ActivityPayload (§6.4) and as apps publish it.
public struct ActivityRecord: Hashable, Sendable {
    public static let maxTitleBytes = 256
    public static let maxTypeBytes = 128
    public static let maxURLBytes = 2_048

    public var activityType: String
    public var title: String
    public var userInfo: [String: PropertyValue]
    public var webpageURL: String?
    public var version: Int64
    public var revision: UInt32

    /// Validates every field; the errors name the field, never its content.
    public init(activityType: String, title: String, userInfo: [String: PropertyValue], webpageURL: String?,
                version: Int64, revision: UInt32 = 0) throws(WireError) {
        try Self.validateType(activityType)
        guard title.utf8.count <= Self.maxTitleBytes else { throw .payloadTooLarge(limit: Self.maxTitleBytes, actual: title.utf8.count) }
        if let webpageURL { try Self.validateURL(webpageURL) }
        guard version >= 0 else { throw .malformed("version") }
        _ = try Self.encodeUserInfo(userInfo)
        self.activityType = activityType
        self.title = title
        self.userInfo = userInfo
        self.webpageURL = webpageURL
        self.version = version
        self.revision = revision & AdvertBody.maxRevision
    }

    /// Reverse-DNS: 1–128 bytes of [A-Za-z0-9.-], at least one dot, no empty label.
    public static func validateType(_ type: String) throws(WireError) {
        let bytes = Array(type.utf8)
        guard !bytes.isEmpty, bytes.count <= maxTypeBytes else { throw .malformed("activity type length") }
        let allowed = bytes.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x2D }
        guard allowed else { throw .malformed("activity type characters") }
        let labels = type.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty }) else { throw .malformed("activity type labels") }
    }

    public static func validateURL(_ url: String) throws(WireError) {
        guard url.utf8.count <= maxURLBytes else { throw .payloadTooLarge(limit: maxURLBytes, actual: url.utf8.count) }
        let lower = url.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), url.count > 8,
              !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw .malformed("webpageURL") }
    }

    public static func encodeUserInfo(_ userInfo: [String: PropertyValue]) throws(WireError) -> [UInt8] {
        try PropertyValueCodec.encode(.dictionary(userInfo), limit: PropertyValue.maxUserInfoBytes)
    }

    public var propertyValue: PropertyValue {
        var entries: [String: PropertyValue] = [
            "revision": .integer(Int64(revision)),
            "title": .string(title),
            "type": .string(activityType),
            "userInfo": .dictionary(userInfo),
            "version": .integer(version),
        ]
        if let webpageURL { entries["webpageURL"] = .string(webpageURL) }
        return .dictionary(entries)
    }

    public func encoded() throws(WireError) -> [UInt8] {
        try PropertyValueCodec.encode(propertyValue, limit: FrameType.activityPayload.maxPayload)
    }

    public init(decoding bytes: [UInt8]) throws(WireError) {
        let value = try PropertyValueCodec.decode(bytes, limit: FrameType.activityPayload.maxPayload)
        try self.init(value: value)
    }

    public init(value: PropertyValue) throws(WireError) {
        guard let entries = value.dictionaryValue else { throw .malformed("activity is not a dictionary") }
        let known: Set<String> = ["revision", "title", "type", "userInfo", "version", "webpageURL"]
        guard Set(entries.keys).isSubset(of: known) else { throw .malformed("activity has unknown keys") }
        guard let type = entries["type"]?.stringValue else { throw .malformed("activity type missing") }
        guard let title = entries["title"]?.stringValue else { throw .malformed("title missing") }
        guard let userInfo = entries["userInfo"]?.dictionaryValue else { throw .malformed("userInfo missing") }
        guard let version = entries["version"]?.integerValue else { throw .malformed("version missing") }
        guard let revision = entries["revision"]?.integerValue, revision >= 0, revision <= Int64(AdvertBody.maxRevision) else {
            throw .malformed("revision")
        }
        var url: String?
        if let raw = entries["webpageURL"] {
            guard let string = raw.stringValue else { throw .malformed("webpageURL") }
            url = string
        }
        try self.init(activityType: type, title: title, userInfo: userInfo, webpageURL: url, version: version, revision: UInt32(revision))
    }
}
