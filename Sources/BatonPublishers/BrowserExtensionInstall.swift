// SPDX-License-Identifier: GPL-2.0-or-later

/// What the browser publisher still needs in each browser on this machine (issue 26): which system
/// browsers are here, whether Baton's extension is installed where each loads it from by itself,
/// and, where it is not or cannot be, the one thing the person has to do. Pure: the file system is
/// read through `BrowserFileSystem`, so the decision is tested with a fake one
/// (docs/publishers.md, "Installing the extension").
public enum BrowserExtensionInstall {
    /// Debian's Chromium launcher (/usr/bin/chromium, through /etc/chromium.d/extensions) passes every
    /// entry of this directory to `--load-extension`: `scripts/install` links Baton's unpacked extension here.
    public static let chromiumSystemExtension = "/usr/share/chromium/extensions/baton"
    /// Firefox's system scope (app-system-share) for the Firefox application id; the entry's name is
    /// the extension's gecko id. Debian's firefox-esr loads it unsigned (its build allows unsigned
    /// add-ons in the system scope, and `extensions.autoDisableScopes` 3 leaves the scope enabled).
    public static let firefoxSystemExtension =
        "/usr/share/mozilla/extensions/{ec8030f7-c20a-464f-9b0e-13a3a9e97384}/browser-host@baton.org"
    /// Where Chromium (any build) finds the host when the extension asks for it.
    public static let chromiumNativeHost = "/etc/chromium/native-messaging-hosts/org.baton.browser_host.json"

    /// The browsers Baton knows how to reach, each found by the program its package installs.
    public enum Browser: String, CaseIterable, Sendable {
        /// Debian's chromium package: its launcher loads the system extension directory.
        case chromium
        /// Debian's firefox-esr: loads unsigned extensions from the system scope.
        case firefoxESR
        /// Mozilla's own Firefox (its .deb or tarball, the snap): only extensions Mozilla signed.
        case firefox
        /// Google's Chrome: loads no unpacked extension from the system, and its system
        /// native-messaging directory is under /etc/opt.
        case googleChrome

        public var displayName: String {
            switch self {
            case .chromium: "Chromium"
            case .firefoxESR: "Firefox ESR"
            case .firefox: "Firefox"
            case .googleChrome: "Google Chrome"
            }
        }

        /// Any of these present means the browser is installed.
        public var programs: [String] {
            switch self {
            case .chromium: ["/usr/lib/chromium/chromium"]
            case .firefoxESR: ["/usr/lib/firefox-esr/firefox-esr"]
            case .firefox: ["/usr/lib/firefox/firefox", "/opt/firefox/firefox", "/snap/bin/firefox"]
            case .googleChrome: ["/opt/google/chrome/chrome"]
            }
        }

        /// Where the browser loads Baton's extension from by itself; nil: nowhere without the person.
        public var systemExtension: String? {
            switch self {
            case .chromium: BrowserExtensionInstall.chromiumSystemExtension
            case .firefoxESR: BrowserExtensionInstall.firefoxSystemExtension
            case .firefox, .googleChrome: nil
            }
        }
    }

    /// One browser found here, and how Baton's extension stands in it.
    public struct Status: Equatable, Sendable {
        public enum State: Equatable, Sendable {
            /// Installed where the browser loads it by itself (at its next start).
            case installed
            /// The browser could load it from the system, but it is not there.
            case notInstalled
            /// This browser loads it only by hand (unsigned for Mozilla's Firefox; Chrome's rules).
            case byHandOnly
        }
        public var browser: Browser
        public var state: State
        /// One sentence: where it is, or what the person has to do.
        public var advice: String
    }

    /// The browsers found through `fileSystem`, in `Browser.allCases` order. `extensionDirectory` is
    /// the unpacked extension a person can load by hand (the installed copy, or the source tree's).
    public static func statuses(fileSystem: some BrowserFileSystem, extensionDirectory: String) -> [Status] {
        Browser.allCases.compactMap { browser in
            guard browser.programs.contains(where: fileSystem.isExecutable) else { return nil }
            switch browser {
            case .chromium:
                if fileSystem.exists(chromiumSystemExtension + "/manifest.json") {
                    return Status(browser: browser, state: .installed,
                                  advice: "installed system-wide (\(chromiumSystemExtension)); Chromium loads it in every profile when it starts next")
                }
                return Status(browser: browser, state: .notInstalled,
                              advice: "not installed system-wide: install Baton as root (sudo scripts/install, or the baton package) to link it into /usr/share/chromium/extensions, "
                                  + "or load it by hand: chrome://extensions, Developer mode, \"Load unpacked\", \(extensionDirectory)")
            case .firefoxESR:
                if fileSystem.exists(firefoxSystemExtension + "/manifest.json") {
                    return Status(browser: browser, state: .installed,
                                  advice: "installed system-wide (\(firefoxSystemExtension)); Firefox ESR loads it in every profile when it starts next")
                }
                return Status(browser: browser, state: .notInstalled,
                              advice: "not installed system-wide: install Baton as root (sudo scripts/install, or the baton package) to link it into /usr/share/mozilla/extensions, "
                                  + "or load it until Firefox quits: about:debugging, \"This Firefox\", \"Load Temporary Add-on\", \(extensionDirectory)/manifest.json")
            case .firefox:
                return Status(browser: browser, state: .byHandOnly,
                              advice: "Mozilla's Firefox loads only extensions Mozilla signed, and Baton's is not signed: load it until Firefox quits "
                                  + "(about:debugging, \"This Firefox\", \"Load Temporary Add-on\", \(extensionDirectory)/manifest.json), or use Debian's firefox-esr, which loads it by itself")
            case .googleChrome:
                return Status(browser: browser, state: .byHandOnly,
                              advice: "Chrome loads no unpacked extension from the system: chrome://extensions, Developer mode, \"Load unpacked\", \(extensionDirectory); "
                                  + "and mkdir -p ~/.config/google-chrome/NativeMessagingHosts && cp \(chromiumNativeHost) ~/.config/google-chrome/NativeMessagingHosts/")
            }
        }
    }

    /// What `baton publishers enable browser` says on stderr: what is on and what remains.
    public static func advice(_ statuses: [Status]) -> String {
        let installed = statuses.filter { $0.state == .installed }.map(\.browser.displayName)
        var lines: [String]
        if statuses.isEmpty {
            lines = ["the browser publisher setting is on, but it publishes nothing until Baton's extension runs in a browser, "
                + "and none Baton knows was found here (Debian's chromium or firefox-esr load it from a system install)"]
        } else if installed.isEmpty {
            lines = ["the browser publisher setting is on, but it publishes nothing until Baton's extension runs in a browser; no browser here has it yet:"]
        } else {
            lines = ["the browser publisher is on: Baton's extension is installed for \(installed.joined(separator: " and "))"
                + " (a browser already running loads it when it starts again):"]
        }
        for status in statuses { lines.append("  \(status.browser.displayName): \(status.advice)") }
        lines.append("docs/publishers.md (\"Installing the extension\") has the details")
        return lines.joined(separator: "\n")
    }
}

/// The little `BrowserExtensionInstall` reads of the file system.
public protocol BrowserFileSystem {
    /// The path exists, following links (a link whose target is gone does not).
    func exists(_ path: String) -> Bool
    func isExecutable(_ path: String) -> Bool
}

#if canImport(Glibc)
import Glibc

/// The machine's own file system, read with access(2).
public struct SystemBrowserFileSystem: BrowserFileSystem {
    public init() {}
    public func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
    public func isExecutable(_ path: String) -> Bool { access(path, X_OK) == 0 }
}
#endif
