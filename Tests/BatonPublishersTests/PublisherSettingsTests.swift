import BatonPublishers
import Foundation
import Testing

@Suite("BatonPublishersTests: the opt-in settings file")
struct PublisherSettingsTests {
    @Test func everyPublisherIsOffUntilEnabled() {
        #expect(PublisherSettings(parsing: "").enabled.isEmpty)
        #expect(PublisherSettings.load(environment: ["XDG_CONFIG_HOME": "/nonexistent-\(UUID().uuidString)"]).enabled.isEmpty)
    }

    @Test func linesAreReadLeniently() {
        let settings = PublisherSettings(parsing: """
            # comment
            browser = on   # trailing comment
            recent=off
            future = on
            recent = maybe
            garbage
            """)
        #expect(settings.enabled == [.browser])
    }

    @Test func whatIsSavedIsWhatIsLoaded() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("publishers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = ["XDG_CONFIG_HOME": directory.path]
        try PublisherSettings(enabled: [.recent]).save(environment: environment)
        #expect(PublisherSettings.load(environment: environment) == PublisherSettings(enabled: [.recent]))
        let text = try String(contentsOf: directory.appendingPathComponent("baton/publishers.conf"), encoding: .utf8)
        #expect(text.contains("browser = off\n") && text.contains("recent = on\n"))
    }

    @Test func theFileLivesInTheUsersConfigDirectory() {
        #expect(PublisherSettings.fileURL(environment: ["XDG_CONFIG_HOME": "/c", "HOME": "/h"])?.path == "/c/baton/publishers.conf")
        #expect(PublisherSettings.fileURL(environment: ["XDG_CONFIG_HOME": "relative", "HOME": "/h"])?.path == "/h/.config/baton/publishers.conf")
        #expect(PublisherSettings.fileURL(environment: [:]) == nil)
    }
}
