// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Testing

/// A local file travels as a document first (docs/media.md, "What travels"): alpha's mpv plays a
/// file of this machine; alpha's agent attaches it to the media activity (once per track), beta's
/// agent saves the copy and its running mpv plays it at alpha's position; alpha pauses.
@Suite("Media handoff of a local file between two real mpv players and two daemons", .serialized)
struct MediaFileHostTests {
    @Test("over the limit nothing is published; within it the file goes once as the document, and beta's mpv plays the saved copy at alpha's position")
    func aLocalFileTravelsAsADocument() async throws {
        try #require(HeadlessPlayer.Kind.mpv.missing == nil, "\(HeadlessPlayer.Kind.mpv.missing ?? "")")
        let pair = try await MediaHostPair()
        defer { pair.stop() }
        let work = pair.work
        defer { keepLogs(work, ["agent-a.log", "agent-b.log", "mpv-a.log", "mpv-b.log"]) }

        // A 10-minute file (9.6 MB) in a directory whose path must not leave alpha.
        let media = work.appendingPathComponent("private-music-of-alpha")
        try FileManager.default.createDirectory(at: media, withIntermediateDirectories: true)
        let talk = media.appendingPathComponent("talk.wav")
        try patternedWAV(seconds: 600).write(to: talk)
        try silentWAV(seconds: 5).write(to: media.appendingPathComponent("other.wav"))

        let mpvA = try headlessMPV(session: pair.sessionA, url: talk.path, start: 20, pause: false, log: work.appendingPathComponent("mpv-a.log"))
        defer { mpvA.stop() }
        let clientA = try DBusConnection(bus: .address(pair.sessionA.address)), clientB = try DBusConnection(bus: .address(pair.sessionB.address))
        defer { clientA.close(); clientB.close() }
        let playerA = PlayerProbe(connection: clientA), playerB = PlayerProbe(connection: clientB)
        try await eventually(timeout: .seconds(120), "alpha's mpv did not play \(talk.path) for 4 s") {
            let status = try? await playerA.status(), current = try? await playerA.url(), position = try? await playerA.position()
            return status == "Playing" && current?.hasSuffix("/talk.wav") == true && (position ?? 0) >= 24
        }

        // A 1 MiB limit: the file is over it, nothing is published, and the agent says why.
        try pair.settings(0, "media = on\nmedia-file-limit = 1\n")
        try pair.settings(1, "media = off\n")
        let agentA = try await pair.agent(0, log: "agent-a.log")
        let agentB = try await pair.agent(1, log: "agent-b.log")
        defer { agentA.stop(); agentB.stop() }
        try await eventually(timeout: .seconds(120), "alpha's agent did not refuse the file: \(agentA.logText)") {
            agentA.logText.contains("not publishing the media file talk.wav: it is 9 MiB, over the 1 MiB limit")
        }
        #expect(try await pair.offered() == nil, "an over-limit file was published: \(agentA.logText)")

        // The default limit (1 GiB): published, the file attached, its name but no path or URL in what alpha offers.
        try pair.settings(0, "media = on\n")
        try await eventually(timeout: .seconds(120), "the file was not published: \(agentA.logText)") {
            try await pair.offered()?.userInfo?["fileName"] == .string("talk.wav")
        }
        let published = try #require(try await pair.offered())
        let size = try #require(try FileManager.default.attributesOfItem(atPath: talk.path)[.size] as? Int)
        #expect(published.activityType == "org.baton.media" && published.title == "talk.wav" && published.webpageURL == nil)
        #expect(published.userInfo?["url"] == nil && published.userInfo?["playing"] == .boolean(true))
        #expect(published.document?.size == UInt64(size) && published.document?.mediaType.hasPrefix("audio/") == true, "\(published)")
        let texts = (published.userInfo ?? [:]).values.compactMap { value -> String? in if case .string(let text) = value { text } else { nil } }
        #expect(!texts.contains { $0.contains("private-music-of-alpha") || $0.contains("/") }, "\(texts)")

        // A seek, a pause and a play update the same activity: the file is attached once.
        let path = try #require(try await pair.daemonA.currentActivityPath())
        let trackID = try #require(try await playerA.property("Metadata")?.asDictionary?["mpris:trackid"]?.objectPathValue)
        try await playerA.call("SetPosition", [.objectPath(trackID), .int64(100_000_000)])
        try await eventually(timeout: .seconds(120), "the seek was not published: \(agentA.logText)") {
            guard case .double(let position)? = try await pair.offered()?.userInfo?["position"] else { return false }
            return position >= 99 && position < 130
        }
        try await playerA.call("Pause")
        try await eventually(timeout: .seconds(120), "the pause was not published") { try await pair.offered()?.userInfo?["playing"] == .boolean(false) }
        try await playerA.call("Play")
        try await eventually(timeout: .seconds(120), "the play was not published") { try await pair.offered()?.userInfo?["playing"] == .boolean(true) }
        #expect(try await pair.daemonA.currentActivityPath() == path)
        #expect(agentA.logText.components(separatedBy: "attached the media file talk.wav").count == 2, "\(agentA.logText)")

        // beta's mpv runs, paused on another file: the source's player.
        let mpvB = try headlessMPV(session: pair.sessionB, url: media.appendingPathComponent("other.wav").path, start: nil, pause: true,
                                   log: work.appendingPathComponent("mpv-b.log"))
        defer { mpvB.stop() }
        try await eventually(timeout: .seconds(120), "beta's mpv did not appear on MPRIS") { (try? await playerB.status()) == "Paused" }

        let before = ContinuousClock.now
        let positionBefore = try #require(try await playerA.position())
        let outcome = try await pair.continueOnBeta()
        #expect(outcome == "delivered", "beta's agent: \(agentB.logText)")
        let returned = ContinuousClock.now

        // beta saved the copy in its received directory (the same bytes, 0600) and its mpv plays it at alpha's position.
        let saved = URL(fileURLWithPath: pair.environments[1]["XDG_DATA_HOME"]!).appendingPathComponent("baton/received/talk.wav")
        let savedURL = saved.absoluteString
        try await eventually(timeout: .seconds(120), "beta's mpv did not open \(savedURL): \(agentB.logText)") { (try? await playerB.url()) == savedURL }
        #expect(try Data(contentsOf: saved) == Data(contentsOf: talk))
        #expect(try FileManager.default.attributesOfItem(atPath: saved.path)[.posixPermissions] as? Int == 0o600)
        try await eventually(timeout: .seconds(120), "beta's mpv did not seek: \(agentB.logText)") {
            let status = try? await playerB.status(), position = try? await playerB.position()
            return status == "Playing" && (position ?? 0) > positionBefore - 2
        }
        let positionB = try #require(try await playerB.position())
        let expected = positionBefore + seconds(ContinuousClock.now - before)
        print("media handoff (local file): beta at \(positionB) s, alpha would be at \(expected) s (read \(positionBefore) s before the Continue)")
        #expect(abs(positionB - expected) < 2, "beta at \(positionB) s, alpha would be at \(expected) s; beta's agent: \(agentB.logText)")

        // alpha's mpv is paused no later than the handoff's end; the offer is withdrawn.
        try await eventually(timeout: .seconds(120), "alpha's mpv was not paused: \(agentA.logText)") { try await playerA.status() == "Paused" }
        let pausedAt = try #require(try await playerA.position())
        #expect(pausedAt <= positionBefore + seconds(returned - before) + 1, "alpha paused at \(pausedAt) s, after the handoff ended")
        try await eventually(timeout: .seconds(120), "alpha still offers the media") { try await pair.daemonA.currentActivityPath() == nil }
    }
}
