// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// Decoding of Manager1/Activity1 arguments (and WillSave answers) into typed values.
extension ActivityService {
    static func decode<T>(_ body: () throws(RegistryError) -> T) throws(DBusError) -> T {
        do {
            return try body()
        } catch {
            throw DBusError(error)
        }
    }

    static func decodeOptions(_ value: DBusValue) throws(DBusError) -> ActivityOptions {
        guard let entries = value.asDictionary else { throw DBusError.invalidArguments("options must be a{sv}") }
        var options = ActivityOptions()
        for (key, raw) in entries {
            switch key {
            case "WebpageURL":
                guard case .string(let url) = raw else { throw DBusError.invalidArguments("option WebpageURL must be a string (s)") }
                options.webpageURL = url.isEmpty ? nil : url
            case "Version":
                guard case .int64(let version) = raw else { throw DBusError.invalidArguments("option Version must be int64 (x)") }
                options.version = version
            case "NeedsSave":
                guard case .boolean(let needsSave) = raw else { throw DBusError.invalidArguments("option NeedsSave must be a boolean (b)") }
                options.needsSave = needsSave
            case "Source":
                guard case .objectPath(let path) = raw else { throw DBusError.invalidArguments("option Source must be an object path (o)") }
                options.sourcePath = path
            default:
                // The key is the caller's own option name, not payload; bounded so the message stays short.
                throw DBusError.invalidArguments("unknown option \"\(key.prefix(64))\"")
            }
        }
        return options
    }

    /// Update's and WillSave's dictionary of changes.
    static func decodeChanges(_ value: DBusValue, allowed: Set<String>) throws(DBusError) -> ActivityChanges {
        guard let entries = value.asDictionary else { throw DBusError.invalidArguments("changes must be a{sv}") }
        var changes = ActivityChanges()
        for (key, raw) in entries {
            guard allowed.contains(key) else { throw DBusError.invalidArguments("unknown or read-only property \"\(key.prefix(64))\"") }
            switch key {
            case "Title":
                guard case .string(let title) = raw else { throw DBusError.invalidArguments("Title must be a string (s)") }
                changes.title = title
            case "UserInfo":
                changes.userInfo = try decode { () throws(RegistryError) in try PropertyValueCoding.registryUserInfo(raw) }
            case "WebpageURL":
                guard case .string(let url) = raw else { throw DBusError.invalidArguments("WebpageURL must be a string (s)") }
                changes.webpageURL = .some(url.isEmpty ? nil : url)
            case "Version":
                guard case .int64(let version) = raw else { throw DBusError.invalidArguments("Version must be int64 (x)") }
                changes.version = version
            case "NeedsSave":
                guard case .boolean(let needsSave) = raw else { throw DBusError.invalidArguments("NeedsSave must be a boolean (b)") }
                changes.needsSave = needsSave
            default:
                throw DBusError.invalidArguments("unknown property \"\(key.prefix(64))\"")
            }
        }
        return changes
    }
}
