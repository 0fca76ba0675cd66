// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import BatonSystem

/// An installed application that declares activity types it can continue.
public struct DesktopEntry: Sendable, Hashable {
    /// The desktop file id (`org.example.Reader` for `org.example.Reader.desktop`).
    public var id: String
    public var activityTypes: [String]
    public var dbusActivatable: Bool
    /// The raw Exec value, field codes still in.
    public var exec: String?
    /// X-Baton-ActivityVersions; nil: every version.
    public var versions: ActivityVersions?

    public init(id: String, activityTypes: [String], dbusActivatable: Bool, exec: String?, versions: ActivityVersions? = nil) {
        self.id = id
        self.activityTypes = activityTypes
        self.dbusActivatable = dbusActivatable
        self.exec = exec
        self.versions = versions
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
        for directory in applicationDirectories {
            for (id, file) in desktopFiles(under: directory, prefix: "", depth: 0, budget: &budget) where seen.insert(id).inserted {
                guard let entry = Self.parse(contentsOf: file, id: id) else { continue }
                result.append(entry)
            }
        }
        return result
    }

    /// `applications/` under each data directory, in search order.
    public var applicationDirectories: [String] {
        dataDirectories.map { ($0.hasSuffix("/") ? String($0.dropLast()) : $0) + "/applications" }
    }

    /// The directories scanned below `applications/` (for watching), depth first, within the limits.
    func subdirectories(under directory: String, depth: Int = 0) -> [String] {
        guard depth < Self.maxDirectoryDepth else { return [] }
        return Self.directoryNames(directory).flatMap { name -> [String] in
            let path = directory + "/" + name
            return Self.isDirectory(path) ? [path] + subdirectories(under: path, depth: depth + 1) : []
        }
    }

    private func desktopFiles(under directory: String, prefix: String, depth: Int, budget: inout Int) -> [(String, String)] {
        guard depth <= Self.maxDirectoryDepth else { return [] }
        var found: [(String, String)] = []
        for name in Self.directoryNames(directory) {
            guard budget > 0 else { break }
            let path = directory + "/" + name
            if Self.isDirectory(path) {
                found += desktopFiles(under: path, prefix: prefix + name + "-", depth: depth + 1, budget: &budget)
            } else if name.hasSuffix(".desktop") {
                budget -= 1
                found.append((prefix + String(name.dropLast(".desktop".count)), path))
            }
        }
        return found
    }

    /// Visible entries of a directory, sorted; empty when it cannot be read.
    static func directoryNames(_ path: String) -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted()
    }

    /// Follows symbolic links, as the specification's lookup does.
    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    static func parse(contentsOf path: String, id: String) -> DesktopEntry? {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) else { return nil }
        var info = stat()
        guard fstat(file.rawValue, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        // One byte over the limit tells a file that is too large; one that cannot be read is skipped.
        guard let bytes = try? file.readAll(upTo: maxFileBytes + 1), bytes.count <= maxFileBytes else { return nil }
        return parse(String(decoding: bytes, as: UTF8.self), id: id)
    }

    /// Reads the [Desktop Entry] group; nil unless it declares at least one valid activity type.
    /// The .desktop key listing the activity versions an app accepts: `1;3-5;`.
    public static let versionsKey = "X-Baton-ActivityVersions"

    public static func parse(_ text: String, id: String) -> DesktopEntry? {
        var inMainGroup = false
        var values: [String: String] = [:]
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = trimmed(rawLine)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                inMainGroup = line == "[Desktop Entry]"
                continue
            }
            guard inMainGroup, let equals = line.firstIndex(of: "=") else { continue }
            let key = trimmed(line[..<equals])
            let value = trimmed(line[line.index(after: equals)...])
            if values[key] == nil { values[key] = value }
        }
        if values["Hidden"] == "true" { return nil }
        let types = (values["X-Baton-ActivityTypes"] ?? "").split(separator: ";").map(String.init)
            .filter { (try? ActivityRecord.validateType($0)) != nil }
        guard !types.isEmpty else { return nil }
        // A malformed version list drops the entry: it meant to restrict versions, so accepting
        // every version could restore a wrong one.
        var versions: ActivityVersions?
        if let declared = values[versionsKey] {
            do { versions = try ActivityVersions(desktopValue: declared) } catch { return nil }
        }
        return DesktopEntry(id: id, activityTypes: types, dbusActivatable: values["DBusActivatable"] == "true",
                            exec: values["Exec"].map(unescapeValue), versions: versions)
    }

    /// Without leading and trailing blanks (lines are already split at newlines).
    static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
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
