// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Testing

/// The receiver's last candidate (docs/media.md, "Continuing on the other machine", step 4): no
/// player runs on beta and the source's player is not installed there, but beta's desktop has a
/// default handler for http (its mimeapps.list names a desktop entry of a recording script). The
/// agent hands it the URL with the media-fragment time `#t=` at the seek target.
@Suite("Media handoff to the desktop's default handler for the scheme", .serialized)
struct MediaDesktopDefaultHostTests {
    @Test("with no player on beta, its default http handler gets alpha's URL with #t= at alpha's position plus the handoff time; alpha pauses")
    func theDefaultHandlerGetsTheURLAtTheTime() async throws {
        try #require(HeadlessPlayer.Kind.mpv.missing == nil, "\(HeadlessPlayer.Kind.mpv.missing ?? "")")
        let pair = try await MediaHostPair()
        defer { pair.stop() }
        let work = pair.work
        defer { keepLogs(work, ["agent-a.log", "agent-b.log", "mpv-a.log", "http.log"]) }

        let media = work.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: media, withIntermediateDirectories: true)
        try silentWAV(seconds: 600).write(to: media.appendingPathComponent("talk.wav"))
        let server = try MediaWebServer(directory: media, log: work.appendingPathComponent("http.log"))
        defer { server.stop() }
        try await eventually(timeout: .seconds(120), "the web server did not start") { server.port != nil }
        let url = "http://127.0.0.1:\(try #require(server.port))/talk.wav"
        let mpvA = try headlessMPV(session: pair.sessionA, url: url, start: 20, pause: false, log: work.appendingPathComponent("mpv-a.log"))
        defer { mpvA.stop() }
        let clientA = try DBusConnection(bus: .address(pair.sessionA.address))
        defer { clientA.close() }
        let playerA = PlayerProbe(connection: clientA)
        try await eventually(timeout: .seconds(120), "alpha's mpv did not play \(url) for 4 s") {
            let status = try? await playerA.status(), position = try? await playerA.position()
            return status == "Playing" && (position ?? 0) >= 24
        }

        // beta's desktop: a recording script as the default handler of http and https (its own
        // mimeapps.list and applications directory; no mpv.desktop anywhere it looks).
        let opened = work.appendingPathComponent("opened.txt")
        let script = work.appendingPathComponent("recorder.sh")
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> \(opened.path)\n".write(to: script, atomically: true, encoding: .utf8)
        #expect(chmod(script.path, 0o755) == 0)
        let dataB = URL(fileURLWithPath: pair.environments[1]["XDG_DATA_HOME"]!), configB = URL(fileURLWithPath: pair.environments[1]["XDG_CONFIG_HOME"]!)
        try FileManager.default.createDirectory(at: dataB.appendingPathComponent("applications"), withIntermediateDirectories: true)
        try """
            [Desktop Entry]
            Type=Application
            Name=Recorder (Baton's test)
            Exec=\(script.path) %u
            MimeType=x-scheme-handler/http;x-scheme-handler/https;
            """.write(to: dataB.appendingPathComponent("applications/org.example.Recorder.desktop"), atomically: true, encoding: .utf8)
        try """
            [Default Applications]
            x-scheme-handler/http=org.example.Recorder.desktop
            x-scheme-handler/https=org.example.Recorder.desktop
            """.write(to: configB.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)

        try pair.settings(0, "media = on\n")
        try pair.settings(1, "media = off\n")
        let agentA = try await pair.agent(0, log: "agent-a.log")
        let agentB = try await pair.agent(1, log: "agent-b.log")
        defer { agentA.stop(); agentB.stop() }
        try await eventually(timeout: .seconds(120), "alpha published no media: \(agentA.logText)") {
            try await pair.offered()?.userInfo?["url"] == .string(url)
        }

        let before = ContinuousClock.now
        let positionBefore = try #require(try await playerA.position())
        #expect(try await pair.continueOnBeta() == "delivered", "beta's agent: \(agentB.logText)")
        let returned = ContinuousClock.now
        #expect(agentB.logText.contains("opened the media talk.wav with desktopDefault"), "beta's agent: \(agentB.logText)")

        // The handler was started once, on the URL with #t= at a whole second between alpha's
        // position when asked and its position when the Continue returned.
        try await eventually(timeout: .seconds(120), "the default handler was not started: \(agentB.logText)") {
            FileManager.default.fileExists(atPath: opened.path)
        }
        let lines = try String(contentsOf: opened, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 1, "\(lines)")
        let line = try #require(lines.first)
        #expect(line.hasPrefix(url + "#t="), "\(line)")
        let time = try #require(Int(line.dropFirst((url + "#t=").count)), "\(line)")
        let latest = positionBefore + seconds(returned - before)
        print("media handoff (desktop default): #t=\(time), alpha at \(positionBefore) s when asked, \(latest) s when answered")
        #expect(Double(time) >= positionBefore.rounded(.down) && Double(time) <= latest, "#t=\(time), alpha \(positionBefore)–\(latest) s")

        // Opened: alpha is told and pauses.
        try await eventually(timeout: .seconds(120), "alpha's mpv was not paused: \(agentA.logText)") { try await playerA.status() == "Paused" }
        try await eventually(timeout: .seconds(120), "alpha still offers the media") { try await pair.daemonA.currentActivityPath() == nil }
    }
}
