// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Testing

@Suite("The agent's media publisher following a real mpv over MPRIS", .serialized)
struct MediaPublisherHostTests {
    @Test("a symlinked local file stays; a stream is published; playback alone never republishes; seek, pause, rate, the setting and the player's exit do")
    func publisherFollowsTheRealPlayer() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: mpvPath), "mpv is missing (Debian package mpv; scripts/install-deps installs it)")
        try #require(FileManager.default.fileExists(atPath: mprisScript), "mpv-mpris is missing (Debian package mpv-mpris; scripts/install-deps installs it)")
        let bus = try TestBus(), session = try TestBus()
        defer { bus.stop(); session.stop() }
        let work = bus.directory
        defer { keepLogs(work, ["agent.log", "mpv.log"]) }
        let media = work.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: media, withIntermediateDirectories: true)
        try silentWAV(seconds: 600).write(to: media.appendingPathComponent("talk.wav"))
        let server = try MediaWebServer(directory: media, log: work.appendingPathComponent("http.log"))
        defer { server.stop() }
        try await eventually(timeout: .seconds(120), "the web server did not start") { server.port != nil }
        let url = "http://127.0.0.1:\(try #require(server.port))/talk.wav"

        // mpv plays a local file first, through a symlink (a local file travels as a document, but
        // only the file itself: the link is not followed).
        let local = media.appendingPathComponent("link.wav").path
        try FileManager.default.createSymbolicLink(atPath: local, withDestinationPath: media.appendingPathComponent("talk.wav").path)
        let mpv = try headlessMPV(session: session, url: local, start: nil, pause: false, log: work.appendingPathComponent("mpv.log"))
        defer { mpv.stop() }
        let probe = PlayerProbe(connection: try DBusConnection(bus: .address(session.address)))
        defer { probe.connection.close() }
        try await eventually(timeout: .seconds(120), "mpv did not play the local file") {
            let status = try? await probe.status(), current = try? await probe.url()
            return status == "Playing" && current?.hasSuffix("link.wav") == true
        }

        let alpha = try NamedBatond(bus: bus, name: "alpha", directory: work)
        defer { alpha.stop() }
        let daemon = try BatonConnection(bus: .address(bus.address), busName: alpha.busName)
        defer { daemon.close() }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        try await eventually(timeout: .seconds(120), "batond did not start") { try await client.nameHasOwner(alpha.busName) }
        let home = work.appendingPathComponent("home")
        let settings = home.appendingPathComponent("config/baton/publishers.conf")
        try FileManager.default.createDirectory(at: settings.deletingLastPathComponent(), withIntermediateDirectories: true)
        try "media = on\n".write(to: settings, atomically: true, encoding: .utf8)
        let agent = try AgentProcess(daemonBus: bus, daemonBusName: alpha.busName, sessionBus: session,
                                     environment: ["HOME": home.path, "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                                                   "XDG_DATA_HOME": home.appendingPathComponent("data").path],
                                     log: work.appendingPathComponent("agent.log"))
        defer { agent.stop() }
        try await eventually(timeout: .seconds(120), "agent did not start: \(agent.logText)") { agent.logText.contains("for suggestions") }

        @Sendable func current() async throws -> ActivityInfo? {
            guard let path = try await daemon.currentActivityPath() else { return nil }
            return try? await daemon.activity(at: path)
        }
        func number(_ info: ActivityInfo?, _ key: String) -> Double? {
            guard case .double(let value)? = info?.userInfo?[key] else { return nil }
            return value
        }

        // The symlink is refused, said in the log, and nothing is published.
        try await eventually(timeout: .seconds(120), "the agent did not refuse the symlink: \(agent.logText)") {
            agent.logText.contains("not publishing the media file link.wav: it is a symbolic link")
        }
        #expect(try await current() == nil, "a symlinked file was published: \(agent.logText)")

        // The player opens the stream: published, with the URL and the position.
        try await probe.call("OpenUri", [.string(url)])
        try await eventually(timeout: .seconds(120), "the stream was not published: \(agent.logText)") {
            try await current()?.userInfo?["url"] == .string(url)
        }
        try await eventually(timeout: .seconds(120), "the stream is not playing") { try await probe.status() == "Playing" }
        try await eventually(timeout: .seconds(120), "the published state is not playing") {
            try await current()?.userInfo?["playing"] == .boolean(true)
        }
        let first = try await current()
        let sampled = try #require(number(first, "positionTime"))

        // Playback alone: 3 s later the same sample is published (extrapolated by whoever reads it).
        try await Task.sleep(for: .seconds(3))
        #expect(number(try await current(), "positionTime") == sampled, "republished while only playing: \(agent.logText)")

        // A seek (Seeked) republishes, with the new position.
        let trackID = try #require(try await probe.property("Metadata")?.asDictionary?["mpris:trackid"]?.objectPathValue)
        try await probe.call("SetPosition", [.objectPath(trackID), .int64(300_000_000)])
        try await eventually(timeout: .seconds(120), "the seek was not published: \(agent.logText)") {
            let position = number(try await current(), "position") ?? 0
            return position >= 299 && position < 330
        }

        // Pause, then a rate change, each republished.
        try await probe.call("Pause")
        try await eventually(timeout: .seconds(120), "the pause was not published") { try await current()?.userInfo?["playing"] == .boolean(false) }
        _ = try await probe.connection.call(destination: probe.name, path: mprisPath, interface: "org.freedesktop.DBus.Properties", method: "Set",
                                            arguments: [.string(playerInterface), .string("Rate"), .variant(.double(1.5))])
        try await eventually(timeout: .seconds(120), "the rate was not published") { number(try await current(), "rate") == 1.5 }

        // The setting off withdraws it at once; on again offers the paused media again.
        try "media = off\n".write(to: settings, atomically: true, encoding: .utf8)
        try await eventually(timeout: .seconds(120), "media = off did not withdraw it") { try await current() == nil }
        try "media = on\n".write(to: settings, atomically: true, encoding: .utf8)
        try await eventually(timeout: .seconds(120), "media = on did not publish it again") { try await current()?.userInfo?["url"] == .string(url) }

        // The player quits (NameOwnerChanged): withdrawn.
        mpv.stop()
        try await eventually(timeout: .seconds(120), "the player's exit did not withdraw it") { try await current() == nil }
    }
}
