// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
import BatonPublishers
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `baton publishers`: turns the app-independent publishers (browser tab, recent document, media) on or
/// off, and chooses the recent publisher's media types, in publishers.conf, the one place they all read.
struct PublishersCommand: Subcommand {
    static let name = "publishers"
    static let summary = "show or change which publishers that need no app changes are on (browser, recent, clipboard, media)"
    static let synopsis = "[enable|disable browser|recent|clipboard|media] | recent-types [TYPE...|default]"
    static let details = """
        browser: the page in the focused browser window (Baton extension and baton-browser-host).
        recent: the local document you last opened (session agent, recently-used.xbel).
        clipboard: what you copy, offered to your other machines (session agent; the same as
        baton clipboard enable|disable).
        All are off until enabled. The setting is $XDG_CONFIG_HOME/baton/publishers.conf
        (default ~/.config), read before each publication; the daemon is not needed.
        Prints "NAME on|off" per publisher (with --json: {"Browser": bool, "Recent": bool,
        "Clipboard": bool, "Media": bool}).
        recent-types: the media types recent offers, one per line (with --json:
        {"Types": [...], "Default": bool}); with TYPEs (type/subtype, separated by spaces,
        ";" or ","), offers only those; "default" returns to the built-in set.
        """

    /// The publisher's --json key, UpperCamelCase as every key of baton's JSON (docs/dbus-api.md).
    static func jsonKey(_ publisher: Publisher) -> String {
        publisher.rawValue.prefix(1).uppercased() + publisher.rawValue.dropFirst()
    }

    enum Change: Sendable {
        case enable(Publisher), disable(Publisher)
        /// nil: back to the built-in default.
        case recentTypes([String]?)
    }
    let change: Change?
    let showsRecentTypes: Bool

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        guard let verb = try arguments.popPositional() else {
            change = nil
            showsRecentTypes = false
            return
        }
        if verb == PublisherSettings.recentTypesKey {
            showsRecentTypes = true
            var tokens: [String] = []
            while let token = try arguments.popPositional() { tokens.append(token) }
            if tokens.isEmpty {
                change = nil
            } else if tokens == ["default"] {
                change = .recentTypes(nil)
            } else {
                do { change = .recentTypes(try MediaTypeList.parse(tokens)) } catch { throw UsageError(error.description) }
            }
            return
        }
        showsRecentTypes = false
        guard let name = try arguments.popPositional() else { throw UsageError("\(verb): which publisher? (\(Publisher.allCases.map(\.rawValue).joined(separator: ", ")))") }
        guard let publisher = Publisher(rawValue: name) else { throw UsageError("\(name) is not a publisher (\(Publisher.allCases.map(\.rawValue).joined(separator: ", ")))") }
        switch verb {
        case "enable": change = .enable(publisher)
        case "disable": change = .disable(publisher)
        default: throw UsageError("\(verb): expected enable, disable or recent-types")
        }
        try arguments.expectEnd()
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        var settings = PublisherSettings.load(environment: environment)
        if let change {
            switch change {
            case .enable(let publisher): settings.enabled.insert(publisher)
            case .disable(let publisher): settings.enabled.remove(publisher)
            case .recentTypes(let types): settings.recentMediaTypes = types
            }
            do { try settings.save(environment: environment) } catch {
                context.output.message("baton: cannot write \(PublisherSettings.fileURL(environment: environment)?.path ?? "publishers.conf"): \(error)")
                return ExitStatus.failure
            }
        }
        if showsRecentTypes {
            let types = settings.recentMediaTypes ?? settings.effectiveRecentMediaTypes.sorted()
            context.output.result(json: .object([(key: "Types", value: .array(types.map { .string($0) })),
                                                 (key: "Default", value: .boolean(settings.recentMediaTypes == nil))]),
                                  text: types.joined(separator: "\n"))
            if settings.recentMediaTypes == nil, !context.output.json {
                context.output.message("(the built-in set; `baton publishers recent-types TYPE...` chooses others)")
            }
            return ExitStatus.success
        }
        context.output.result(json: .object(Publisher.allCases.map { (key: Self.jsonKey($0), value: .boolean(settings.isEnabled($0))) }),
                              text: Self.summaryLines(settings).joined(separator: "\n"))
        // Issue 26: "browser on" alone read as done, while the extension still had to be loaded. After
        // `enable browser` always, and in the listing while no browser has the extension installed:
        // what is on, and in which browser what remains (stderr: not in the lines a script reads).
        if settings.isEnabled(.browser) {
            let statuses = Self.browserExtensionStatuses()
            let enabling = if case .enable(.browser) = change { true } else { false }
            if enabling || !statuses.contains(where: { $0.state == .installed }) {
                context.output.message(BrowserExtensionInstall.advice(statuses))
            }
        }
        return ExitStatus.success
    }

    /// The browsers found here and how Baton's extension stands in each (BrowserExtensionInstall).
    static func browserExtensionStatuses() -> [BrowserExtensionInstall.Status] {
        BrowserExtensionInstall.statuses(fileSystem: SystemBrowserFileSystem(),
                                         extensionDirectory: installedExtensionDirectory() ?? "browser/extension")
    }

    /// The unpacked extension a person can load by hand: PREFIX/share/baton/browser-extension beside
    /// this installed program, or in a build tree (REPO/.build/TRIPLE/debug/baton) REPO/browser/extension.
    static func installedExtensionDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let executable = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var parts = executable.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 3 else { return nil }
        parts.removeLast(2)
        let directory = parts.joined(separator: "/") + "/share/baton/browser-extension"
        if access(directory + "/manifest.json", R_OK) == 0 { return directory }
        // A build tree: the first parent directory holding browser/extension.
        while parts.count > 1 {
            let tree = parts.joined(separator: "/") + "/browser/extension"
            if access(tree + "/manifest.json", R_OK) == 0 { return tree }
            parts.removeLast()
        }
        return nil
    }

    static func summaryLines(_ settings: PublisherSettings) -> [String] {
        Publisher.allCases.map { "\($0.rawValue) \(settings.isEnabled($0) ? "on" : "off")" }
    }
}
