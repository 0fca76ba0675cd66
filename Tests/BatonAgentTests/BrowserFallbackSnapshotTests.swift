// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonDBus
import Testing

/// The daemon marks a suggestion only a browser can serve with Fallback "browser" and an empty
/// ActivityType (it knows only the type's hash); the agent must still show it, as "Open in browser".
@Suite("BatonAgentTests: browser-fallback suggestions from the daemon")
struct BrowserFallbackSnapshotTests {
    @Test func aBrowserFallbackSuggestionIsShownWithOpenInBrowserOnly() throws {
        let properties: [String: DBusValue] = [
            "Device": .string("abcd-ef01"), "DeviceName": .string("laptop"), "ActivityType": .string(""),
            "Revision": .uint32(3), "HasWebpageURL": .boolean(true), "Fallback": .string("browser"),
        ]
        let snapshot = try #require(SuggestionSnapshot(path: "/org/baton/suggestion/4", properties: properties))
        #expect(snapshot.onlyBrowserCanServe)
        let request = NotificationContent.request(for: snapshot, capabilities: NotificationCapabilities(), replacing: 0)
        #expect(request.summary == "Open ‘a web page’ from laptop in the browser")
        #expect(request.actions.contains("Open in browser"))
        #expect(!request.actions.contains("Continue"))
    }

    @Test func anEmptyTypeWithoutTheFallbackIsNotShown() {
        let properties: [String: DBusValue] = ["Device": .string("abcd-ef01"), "ActivityType": .string(""), "Fallback": .string("")]
        #expect(SuggestionSnapshot(path: "/org/baton/suggestion/5", properties: properties) == nil)
    }
}
