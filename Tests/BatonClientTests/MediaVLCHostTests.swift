// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Testing

/// VLC 3.0 headless (dummy interface, its D-Bus control module) on both machines: it owns two MPRIS
/// names, `org.mpris.MediaPlayer2.vlc` and `org.mpris.MediaPlayer2.vlc.instancePID`, one player.
@Suite("Media handoff through MPRIS between two real VLC players and two daemons", .serialized)
struct MediaVLCHostTests {
    @Test("alpha's VLC: a pause and a play by hand are published; continued on beta's VLC at alpha's position, alpha paused and not offered again")
    func vlcToVLC() async throws {
        try #require(HeadlessPlayer.Kind.vlc.missing == nil, "\(HeadlessPlayer.Kind.vlc.missing ?? "")")
        let pair = try await MediaHostPair()
        defer { pair.stop() }
        let work = pair.work, sessionA = pair.sessionA, sessionB = pair.sessionB
        defer { keepLogs(work, ["agent-a.log", "agent-b.log", "vlc-a.log", "vlc-b.log", "http.log"]) }

        let media = work.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: media, withIntermediateDirectories: true)
        try silentWAV(seconds: 600).write(to: media.appendingPathComponent("talk.wav"))
        try silentWAV(seconds: 5).write(to: media.appendingPathComponent("other.wav"))
        let server = try MediaWebServer(directory: media, log: work.appendingPathComponent("http.log"))
        defer { server.stop() }
        try await eventually(timeout: .seconds(120), "the web server did not start") { server.port != nil }
        let url = "http://127.0.0.1:\(try #require(server.port))/talk.wav"

        let vlcA = try HeadlessPlayer(.vlc, sessionAddress: sessionA.address, home: sessionA.directory.appendingPathComponent("vlc-home"), url: url,
                                      start: 20, pause: false, log: work.appendingPathComponent("vlc-a.log"))
        defer { vlcA.stop() }
        let clientA = try DBusConnection(bus: .address(sessionA.address)), clientB = try DBusConnection(bus: .address(sessionB.address))
        defer { clientA.close(); clientB.close() }
        let playerA = PlayerProbe(connection: clientA, name: HeadlessPlayer.Kind.vlc.busName)
        let playerB = PlayerProbe(connection: clientB, name: HeadlessPlayer.Kind.vlc.busName)
        try await eventually(timeout: .seconds(120), "alpha's VLC did not play \(url) for 4 s") {
            let status = try? await playerA.status(), current = try? await playerA.url(), position = try? await playerA.position()
            return status == "Playing" && current == url && (position ?? 0) >= 24
        }
        // One player, two MPRIS names.
        let names = try await clientA.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                           method: "ListNames").first?.stringArrayValue ?? []
        #expect(names.filter { $0.hasPrefix("org.mpris.MediaPlayer2.vlc") }.count == 2, "\(names)")

        try pair.settings(0, "media = on\n")
        try pair.settings(1, "media = off\n")
        let agentA = try await pair.agent(0, log: "agent-a.log")
        defer { agentA.stop() }
        let agentB = try await pair.agent(1, log: "agent-b.log")
        defer { agentB.stop() }
        let daemonA = pair.daemonA
        try await eventually(timeout: .seconds(120), "alpha published no media: \(agentA.logText)") {
            try await pair.offered()?.userInfo?["playing"] == .boolean(true)
        }
        let published = try #require(try await pair.offered())
        #expect(published.activityType == "org.baton.media" && published.userInfo?["url"] == .string(url)
                && published.userInfo?["player"] == .string("vlc"), "\(published)")

        // A pause and a play by hand: each published (VLC signals them under its unique name, which
        // owns both MPRIS names; the publisher reads it as one player).
        try await playerA.call("Pause")
        try await eventually(timeout: .seconds(120), "the pause was not published: \(agentA.logText)") {
            try await pair.offered()?.userInfo?["playing"] == .boolean(false)
        }
        try await playerA.call("Play")
        try await eventually(timeout: .seconds(120), "the play was not published: \(agentA.logText)") {
            try await pair.offered()?.userInfo?["playing"] == .boolean(true)
        }

        // beta's VLC runs, paused on another file: the same player as the source's.
        let vlcB = try HeadlessPlayer(.vlc, sessionAddress: sessionB.address, home: sessionB.directory.appendingPathComponent("vlc-home"),
                                      url: url.replacingOccurrences(of: "talk.wav", with: "other.wav"), start: nil, pause: true,
                                      log: work.appendingPathComponent("vlc-b.log"))
        defer { vlcB.stop() }
        try await eventually(timeout: .seconds(120), "beta's VLC did not appear on MPRIS") { (try? await playerB.url())?.hasSuffix("other.wav") == true }

        let before = ContinuousClock.now
        let positionBefore = try #require(try await playerA.position())
        let outcome = try await pair.continueOnBeta()
        #expect(outcome == "delivered", "beta's agent: \(agentB.logText)")
        let returned = ContinuousClock.now
        try await eventually(timeout: .seconds(120), "beta's VLC did not open \(url): \(agentB.logText)") { (try? await playerB.url()) == url }
        try await eventually(timeout: .seconds(120), "beta's VLC did not seek: \(agentB.logText)") {
            let status = try? await playerB.status(), position = try? await playerB.position()
            return status == "Playing" && (position ?? 0) > positionBefore - 2
        }
        let positionB = try #require(try await playerB.position())
        let expected = positionBefore + seconds(ContinuousClock.now - before)
        print("media handoff (VLC): beta at \(positionB) s, alpha would be at \(expected) s (read \(positionBefore) s before the Continue)")
        #expect(abs(positionB - expected) < 2, "beta at \(positionB) s, alpha would be at \(expected) s; beta's agent: \(agentB.logText)")

        // alpha's VLC is paused by its agent, no later than the handoff's end, and stays withdrawn.
        try await eventually(timeout: .seconds(120), "alpha's VLC was not paused: \(agentA.logText)") { try await playerA.status() == "Paused" }
        let pausedAt = try #require(try await playerA.position())
        #expect(pausedAt <= positionBefore + seconds(returned - before) + 1, "alpha paused at \(pausedAt) s, after the handoff ended")
        try await eventually(timeout: .seconds(120), "alpha still offers the media: \(agentA.logText)") { try await daemonA.currentActivityPath() == nil }
        try await Task.sleep(for: .seconds(2))
        #expect(try await daemonA.currentActivityPath() == nil, "alpha offers the media again after its pause: \(agentA.logText)")
    }
}
