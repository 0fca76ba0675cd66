import BatonCore
import Foundation

/// An installed application that declares activity types it can continue.
public struct DesktopEntry: Sendable, Hashable {
    /// The desktop file id (`org.example.Reader` for `org.example.Reader.desktop`).
    public var id: String
    public var activityTypes: [String]
    public var dbusActivatable: Bool
    /// The raw Exec value, field codes still in.
    public var exec: String?

    public init(id: String, activityTypes: [String], dbusActivatable: Bool, exec: String?) {
        self.id = id
        self.activityTypes = activityTypes
        self.dbusActivatable = dbusActivatable
        self.exec = exec
    }
}

/// Where installed applications come from; tests point the real scanner at a temporary directory.
public protocol DesktopEntrySource: Sendable {
    func entries() -> [DesktopEntry]
}

/// Scans `applications/` under $XDG_DATA_HOME and $XDG_DATA_DIRS (earlier directories win for the
/// same desktop file id), reading only entries with X-Baton-ActivityTypes.
public struct XDGDesktopEntryScanner: DesktopEntrySource {
    static let maxFileBytes = 64 * 1024
    static let maxFiles = 4_096
    static let maxDirectoryDepth = 4

    public var dataDirectories: [String]

    public init(dataDirectories: [String]) {
        self.dataDirectories = dataDirectories
    }

    /// The XDG search path of `environment`, with the specification's defaults.
    public init(environment: [String: String]) {
        var directories: [String] = []
        if let home = environment["XDG_DATA_HOME"], home.hasPrefix("/") {
            directories.append(home)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            directories.append(home + "/.local/share")
        }
        let dirs = environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        directories += dirs.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        self.init(dataDirectories: directories)
    }

    public func entries() -> [DesktopEntry] {
        var seen: Set<String> = []
        var result: [DesktopEntry] = []
        var budget = Self.maxFiles
        for directory in dataDirectories {
            let root = URL(fileURLWithPath: directory).appendingPathComponent("applications")
            for (id, file) in desktopFiles(under: root, prefix: "", depth: 0, budget: &budget) where seen.insert(id).inserted {
                guard let entry = Self.parse(contentsOf: file, id: id) else { continue }
                result.append(entry)
            }
        }
        return result
    }

    private func desktopFiles(under directory: URL, prefix: String, depth: Int, budget: inout Int) -> [(String, URL)] {
        guard depth <= Self.maxDirectoryDepth,
              let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        var found: [(String, URL)] = []
        for name in names.sorted() where !name.hasPrefix(".") {
            guard budget > 0 else { break }
            let url = directory.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                found += desktopFiles(under: url, prefix: prefix + name + "-", depth: depth + 1, budget: &budget)
            } else if name.hasSuffix(".desktop") {
                budget -= 1
                found.append((prefix + String(name.dropLast(".desktop".count)), url))
            }
        }
        return found
    }

    static func parse(contentsOf url: URL, id: String) -> DesktopEntry? {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: maxFileBytes + 1), data.count <= maxFileBytes else { return nil }
        return parse(String(decoding: data, as: UTF8.self), id: id)
    }

    /// Reads the [Desktop Entry] group; nil unless it declares at least one valid activity type.
    public static func parse(_ text: String, id: String) -> DesktopEntry? {
        var inMainGroup = false
        var values: [String: String] = [:]
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                inMainGroup = line == "[Desktop Entry]"
                continue
            }
            guard inMainGroup, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if values[key] == nil { values[key] = value }
        }
        if values["Hidden"] == "true" { return nil }
        let types = (values["X-Baton-ActivityTypes"] ?? "").split(separator: ";").map(String.init)
            .filter { (try? ActivityRecord.validateType($0)) != nil }
        guard !types.isEmpty else { return nil }
        return DesktopEntry(id: id, activityTypes: types, dbusActivatable: values["DBusActivatable"] == "true",
                            exec: values["Exec"].map(unescapeValue))
    }

    /// Desktop-entry string escapes (\s \n \t \r \\).
    static func unescapeValue(_ value: String) -> String {
        var result = ""
        var escaping = false
        for character in value {
            if escaping {
                switch character {
                case "s": result.append(" ")
                case "n": result.append("\n")
                case "t": result.append("\t")
                case "r": result.append("\r")
                default: result.append("\\"); result.append(character)
                }
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                result.append(character)
            }
        }
        if escaping { result.append("\\") }
        return result
    }
}

public enum ExecLine {
    /// Splits an Exec value into arguments per the Desktop Entry spec: double-quoted arguments with
    /// \" \` \$ \\ escapes; field codes (%f, %U, ...) removed and %% kept as %. Nil if malformed.
    public static func arguments(_ exec: String) -> [String]? {
        var arguments: [String] = []
        var current = ""
        var hasCurrent = false
        var inQuotes = false
        var iterator = Array(exec).makeIterator()
        while let character = iterator.next() {
            if inQuotes {
                switch character {
                case "\"": inQuotes = false
                case "\\":
                    guard let next = iterator.next() else { return nil }
                    current.append(next)
                default: current.append(character)
                }
                continue
            }
            switch character {
            case " ", "\t":
                if hasCurrent { arguments.append(current) }
                current = ""
                hasCurrent = false
            case "\"":
                inQuotes = true
                hasCurrent = true
            case "%":
                guard let code = iterator.next() else { return nil }
                if code == "%" {
                    current.append("%")
                    hasCurrent = true
                } else if !"fFuUdDnNickvm".contains(code) {
                    return nil
                }
            default:
                current.append(character)
                hasCurrent = true
            }
        }
        guard !inQuotes else { return nil }
        if hasCurrent { arguments.append(current) }
        return arguments.isEmpty ? nil : arguments
    }
}
