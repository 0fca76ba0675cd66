// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import Testing

/// A fake file system: the paths that exist (targets of links included) and the executables.
struct FakeBrowserFileSystem: BrowserFileSystem {
    var files: Set<String> = []
    var executables: Set<String> = []
    func exists(_ path: String) -> Bool { files.contains(path) || executables.contains(path) }
    func isExecutable(_ path: String) -> Bool { executables.contains(path) }
}

@Suite("BatonPublishersTests: what the browser publisher still needs in each browser (issue 26)")
struct BrowserExtensionInstallTests {
    static let chromium = "/usr/lib/chromium/chromium"
    static let firefoxESR = "/usr/lib/firefox-esr/firefox-esr"
    static let extensionDirectory = "/usr/share/baton/browser-extension"

    func statuses(_ fileSystem: FakeBrowserFileSystem) -> [BrowserExtensionInstall.Status] {
        BrowserExtensionInstall.statuses(fileSystem: fileSystem, extensionDirectory: Self.extensionDirectory)
    }

    @Test("the system locations are the ones scripts/install links and the browsers read")
    func locations() {
        #expect(BrowserExtensionInstall.chromiumSystemExtension == "/usr/share/chromium/extensions/baton")
        // Firefox's application id, and the gecko id of browser/extension/manifest.json.
        #expect(BrowserExtensionInstall.firefoxSystemExtension
            == "/usr/share/mozilla/extensions/{ec8030f7-c20a-464f-9b0e-13a3a9e97384}/browser-host@baton.org")
    }

    @Test("a browser that is not installed is not mentioned; none at all says so and claims nothing")
    func noBrowser() {
        #expect(statuses(FakeBrowserFileSystem()).isEmpty)
        // The extension links alone (the browser removed) do not make a browser.
        let linksOnly = FakeBrowserFileSystem(files: [BrowserExtensionInstall.chromiumSystemExtension + "/manifest.json"])
        #expect(statuses(linksOnly).isEmpty)
        let advice = BrowserExtensionInstall.advice([])
        #expect(advice.hasPrefix("the browser publisher setting is on, but it publishes nothing"))
        #expect(advice.contains("none Baton knows was found"))
    }

    @Test("Chromium and Firefox ESR without the system install: the setting is on, nothing is published, and how to fix it")
    func notInstalled() {
        let found = statuses(FakeBrowserFileSystem(executables: [Self.chromium, Self.firefoxESR]))
        #expect(found.map(\.browser) == [.chromium, .firefoxESR])
        #expect(found.allSatisfy { $0.state == .notInstalled })
        #expect(found[0].advice.contains("sudo scripts/install") && found[0].advice.contains("\"Load unpacked\", \(Self.extensionDirectory)"))
        #expect(found[1].advice.contains("sudo scripts/install") && found[1].advice.contains("about:debugging"))
        #expect(found[1].advice.contains("\(Self.extensionDirectory)/manifest.json"))
        let advice = BrowserExtensionInstall.advice(found)
        #expect(advice.hasPrefix("the browser publisher setting is on, but it publishes nothing until Baton's extension runs in a browser; no browser here has it yet:"))
        #expect(!advice.contains("the browser publisher is on:"))
        #expect(advice.contains("\n  Chromium: not installed system-wide") && advice.contains("\n  Firefox ESR: not installed system-wide"))
    }

    @Test("installed system-wide: the browser loads it at its next start, and the rest still says what remains")
    func installed() {
        let fileSystem = FakeBrowserFileSystem(files: [BrowserExtensionInstall.chromiumSystemExtension + "/manifest.json"],
                                               executables: [Self.chromium, Self.firefoxESR])
        let found = statuses(fileSystem)
        #expect(found.map(\.state) == [.installed, .notInstalled])
        #expect(found[0].advice.contains("Chromium loads it in every profile when it starts next"))
        let advice = BrowserExtensionInstall.advice(found)
        #expect(advice.hasPrefix("the browser publisher is on: Baton's extension is installed for Chromium"))
        #expect(advice.contains("Firefox ESR: not installed system-wide"))

        var both = fileSystem
        both.files.insert(BrowserExtensionInstall.firefoxSystemExtension + "/manifest.json")
        #expect(statuses(both).map(\.state) == [.installed, .installed])
        #expect(BrowserExtensionInstall.advice(statuses(both)).hasPrefix("the browser publisher is on: Baton's extension is installed for Chromium and Firefox ESR"))
    }

    @Test("a link whose installed extension is gone counts as not installed")
    func danglingLink() {
        // exists() follows links: the fake holds only what a link reaches. The link itself without its
        // target is just not in `files`.
        let found = statuses(FakeBrowserFileSystem(files: [BrowserExtensionInstall.firefoxSystemExtension], executables: [Self.firefoxESR]))
        #expect(found.map(\.state) == [.notInstalled])
    }

    @Test("Mozilla's Firefox and Google Chrome only by hand, said plainly (unsigned; no system directory)")
    func byHandOnly() {
        for program in ["/usr/lib/firefox/firefox", "/opt/firefox/firefox", "/snap/bin/firefox"] {
            let found = statuses(FakeBrowserFileSystem(executables: [program]))
            #expect(found.map(\.browser) == [.firefox], "\(program)")
            #expect(found.first?.state == .byHandOnly)
            #expect(found.first?.advice.contains("loads only extensions Mozilla signed, and Baton's is not signed") == true)
            #expect(found.first?.advice.contains("firefox-esr") == true)
        }
        let chrome = statuses(FakeBrowserFileSystem(executables: ["/opt/google/chrome/chrome"]))
        #expect(chrome.map(\.state) == [.byHandOnly])
        #expect(chrome.first?.advice.contains("~/.config/google-chrome/NativeMessagingHosts/") == true)
        // By hand only is not installed: the headline does not claim the publisher works.
        #expect(BrowserExtensionInstall.advice(chrome).hasPrefix("the browser publisher setting is on, but it publishes nothing"))
    }
}
