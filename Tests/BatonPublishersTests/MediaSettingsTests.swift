// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import Foundation
import Testing

/// publishers.conf's media lines (docs/publishers.md, docs/media.md).
@Suite struct MediaSettingsTests {
    @Test func mediaIsOffUntilEnabledAndPausingTheSourceIsOnByDefault() {
        let empty = PublisherSettings(parsing: "")
        #expect(!empty.isEnabled(.media) && empty.mediaPausesSource)
        let on = PublisherSettings(parsing: "media = on\n")
        #expect(on.isEnabled(.media) && on.mediaPausesSource)
    }

    @Test(arguments: [("media-pause-source = off", false), ("media-pause-source=on", true), ("media-pause-source = maybe", true),
                      ("media-pause-source = off # keep playing\nmedia = on", false), ("# media-pause-source = off", true)])
    func thePauseKeyIsReadLeniently(_ line: String, _ pauses: Bool) {
        #expect(PublisherSettings(parsing: line).mediaPausesSource == pauses)
    }

    @Test func thePauseKeySurvivesEnablingAPublisher() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-settings-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = ["XDG_CONFIG_HOME": directory.path]
        var settings = PublisherSettings(parsing: "media = on\nmedia-pause-source = off\n")
        try settings.save(environment: environment)
        settings = PublisherSettings.load(environment: environment)
        settings.enabled.insert(.browser)
        try settings.save(environment: environment)
        let loaded = PublisherSettings.load(environment: environment)
        #expect(loaded.isEnabled(.media) && loaded.isEnabled(.browser) && !loaded.mediaPausesSource)
        // The default is not written out: a later Baton's default applies.
        try PublisherSettings(enabled: [.media]).save(environment: environment)
        let text = try String(contentsOf: directory.appendingPathComponent("baton/publishers.conf"), encoding: .utf8)
        #expect(text.contains("media = on\n") && !text.contains("media-pause-source"))
    }

    /// publishers.conf's `media-file-limit`: whole MiB, 0–4096, default 1024; anything else keeps the
    /// default; written back only when not the default.
    @Test func theFileLimitSetting() {
        #expect(PublisherSettings(parsing: "").mediaFileLimitMiB == 1024)
        #expect(PublisherSettings(parsing: "").mediaFileLimitBytes == 1 << 30)
        #expect(PublisherSettings(parsing: "media-file-limit = 0").mediaFileLimitBytes == 0)
        #expect(PublisherSettings(parsing: "media-file-limit = 4096\n").mediaFileLimitBytes == 4 << 30)
        #expect(PublisherSettings(parsing: "media-file-limit=16 # small").mediaFileLimitMiB == 16)
        for bad in ["4097", "-1", "1e3", "99999999999999999999", "", "on", "12 MiB", "٣"] {
            #expect(PublisherSettings(parsing: "media-file-limit = \(bad)").mediaFileLimitMiB == 1024, "\(bad)")
        }
        let chosen = PublisherSettings(parsing: "media = on\nmedia-file-limit = 8\n")
        #expect(PublisherSettings(parsing: chosen.text) == chosen)
        #expect(!PublisherSettings(parsing: "media = on").text.contains("media-file-limit"))
    }
}
