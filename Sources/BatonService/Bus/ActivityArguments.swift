// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// Decoding of Manager1/Activity1 arguments (and WillSave answers) into typed values.
extension ActivityBus {
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

    /// The options of RegisterHandlerWithOptions: unknown keys and malformed versions are refused
    /// (a handler that meant to restrict its versions must not silently accept all of them).
    static func decodeHandlerVersions(_ value: DBusValue) throws(DBusError) -> ActivityVersions? {
        guard let options = value.asDictionary else { throw DBusError.invalidArguments("options must be a{sv}") }
        if let unknown = options.keys.sorted().first(where: { $0 != "Versions" }) {
            throw DBusError.invalidArguments("unknown option \(unknown)")
        }
        guard let raw = options["Versions"] else { return nil }
        guard case .array("(xx)", let elements) = raw.unwrapped else { throw DBusError.invalidArguments("Versions must be a(xx)") }
        var pairs: [(Int64, Int64)] = []
        for element in elements {
            guard let fields = element.structValue, fields.count == 2, let first = fields[0].int64Value, let last = fields[1].int64Value else {
                throw DBusError.invalidArguments("Versions must be a(xx)")
            }
            pairs.append((first, last))
        }
        do {
            return try ActivityVersions(pairs: pairs)
        } catch {
            switch error {
            case .empty: throw DBusError.invalidArguments("Versions: give at least one range")
            case .tooManyRanges: throw DBusError.invalidArguments("Versions: at most \(ActivityVersions.maxRanges) ranges")
            case .reversedRange, .malformed: throw DBusError.invalidArguments("Versions: each range is (first, last) with first <= last")
            }
        }
    }

    /// RegisterHandler's handler path and types: a path other than /, 1 to 64 valid activity types.
    static func decodeHandler(_ arguments: [DBusValue]) throws(DBusError) -> (path: String, types: [String], versions: ActivityVersions?) {
        guard arguments.count == 2 || arguments.count == 3, let path = arguments[0].objectPathValue,
              let types = arguments[1].stringArrayValue else {
            throw DBusError.invalidArguments("RegisterHandler takes (o handler, as types[, a{sv} options])")
        }
        let versions = arguments.count == 3 ? try decodeHandlerVersions(arguments[2]) : nil
        guard path != "/" else { throw DBusError.invalidArguments("handler must be an object path other than /") }
        guard !types.isEmpty, types.count <= 64 else { throw DBusError.invalidArguments("give 1 to 64 activity types") }
        for type in types {
            do {
                try ActivityRecord.validateType(type)
            } catch {
                throw DBusError.invalidArguments("invalid activity type")
            }
        }
        return (path, types, versions)
    }
}
