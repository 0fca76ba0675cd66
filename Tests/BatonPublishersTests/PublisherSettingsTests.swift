// SPDX-License-Identifier: GPL-2.0-or-later
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

@Suite("BatonPublishersTests: the recent publisher's media types")
struct RecentMediaTypesSettingTests {
    @Test func absentMeansTheBuiltInSet() {
        let settings = PublisherSettings(parsing: "recent = on\n")
        #expect(settings.recentMediaTypes == nil)
        #expect(settings.effectiveRecentMediaTypes == PublisherSettings.defaultRecentMediaTypes)
        #expect(settings.effectiveRecentMediaTypes.contains("application/pdf"))
    }

    @Test func aValidLineChoosesTheTypesInLowerCase() {
        let settings = PublisherSettings(parsing: "recent-types = application/pdf; Text/Plain ;image/svg+xml  # mine\n")
        #expect(settings.recentMediaTypes == ["application/pdf", "text/plain", "image/svg+xml"])
        #expect(settings.effectiveRecentMediaTypes == ["application/pdf", "text/plain", "image/svg+xml"])
    }

    @Test(arguments: ["recent-types = application/pdf;text/*", "recent-types = ", "recent-types = pdf",
                      "recent-types = text/plain; charset=utf-8", "recent-types = a/b/c", "recent-types = /plain", "recent-types = text/.plain"])
    func aMalformedLineIsSkippedWhole(line: String) {
        #expect(PublisherSettings(parsing: line + "\n").recentMediaTypes == nil)
    }

    @Test func chosenTypesSurviveSavingAndLoading() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("publishers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = ["XDG_CONFIG_HOME": directory.path]
        let chosen = PublisherSettings(enabled: [.recent], recentMediaTypes: ["text/markdown", "application/pdf"])
        try chosen.save(environment: environment)
        #expect(PublisherSettings.load(environment: environment) == chosen)
        let text = try String(contentsOf: directory.appendingPathComponent("baton/publishers.conf"), encoding: .utf8)
        #expect(text.contains("recent-types = text/markdown;application/pdf\n"))
        // Back to the default: no line, so a later Baton's default applies.
        try PublisherSettings(enabled: [.recent]).save(environment: environment)
        #expect(PublisherSettings.load(environment: environment).recentMediaTypes == nil)
    }

    @Test func argumentsAreCheckedTokenByToken() throws {
        #expect(try MediaTypeList.parse(["application/pdf;text/plain", "image/png,IMAGE/PNG"]) == ["application/pdf", "text/plain", "image/png"])
        #expect(throws: MediaTypeList.Invalid(token: "text/*")) { try MediaTypeList.parse(["application/pdf", "text/*"]) }
        #expect(throws: MediaTypeList.Invalid(token: "")) { try MediaTypeList.parse([" ; "]) }
        #expect(MediaTypeList.isMediaType("application/vnd.oasis.opendocument.text"))
        #expect(!MediaTypeList.isMediaType("application/" + String(repeating: "x", count: 128)))
        #expect(!MediaTypeList.isMediaType("täxt/plain"))
    }
}
