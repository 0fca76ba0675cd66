// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// Issue 28's setting in the lab (docs/media.md, docs/lab.md): two real `batond` (alpha on hci0,
/// beta on hci1) paired over TCP, each user's `baton-agent` in a session of its own (a private
/// session bus each, as the desktop-session tests give each user one), alpha's with `media = on`;
/// a small HTTP server in the VM serving silent WAV files (one network namespace: both machines
/// reach it on loopback). Used by `MediaLabTests` and the benchmark `MediaBenchLabTests`.
final class MediaLab: @unchecked Sendable {
    let lab: DaemonPair
    let sessions: [String: TestBus]
    let server: MediaWebServer
    let media: URL
    private(set) var agents: [String: Process] = [:]
    private(set) var players: [HeadlessPlayer] = []
    /// The test's own connections: the daemons' bus and each session bus.
    let daemons: DBusConnection
    let clients: [String: DBusConnection]

    init(lab: DaemonPair) async throws {
        self.lab = lab
        let twoDaemons = TwoDaemonsLabTests()
        try lab.start(name: "alpha", adapter: "hci0")
        // Suggestions stay while the test takes its steps (the default 10 s away hysteresis could withdraw one).
        try lab.start(name: "beta", adapter: "hci1", extraArguments: ["--away-after", "300"])
        #expect(await lab.eventually(20) { (try? await lab.cli("bt-pair", "beta", ["list"]))?.0 == 0 }, "\(lab.log("beta"))")
        try await twoDaemons.pairOverTCP(lab)
        sessions = ["alpha": try TestBus(), "beta": try TestBus()]
        media = lab.directory.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: media, withIntermediateDirectories: true)
        // Half an hour each (28.8 MB): long enough for any number of rounds.
        for name in ["talk.wav", "lecture.wav"] { try silentWAV(seconds: 1800).write(to: media.appendingPathComponent(name)) }
        try silentWAV(seconds: 5).write(to: media.appendingPathComponent("other.wav"))
        server = try MediaWebServer(directory: media, log: lab.directory.appendingPathComponent("http.log"))
        daemons = try DBusConnection(bus: .address(lab.address))
        clients = ["alpha": try DBusConnection(bus: .address(sessions["alpha"]!.address)),
                   "beta": try DBusConnection(bus: .address(sessions["beta"]!.address))]
        // VLC run as nobody (it refuses root) reaches its home through the lab directory.
        chmod(lab.directory.path, 0o755)
        let server = server
        try #require(await lab.eventually(120) { server.port != nil }, "the web server did not start: \(lab.log("http"))")
    }

    func url(_ file: String) -> String { "http://127.0.0.1:\(server.port ?? 0)/\(file)" }

    /// The session environment of `side`'s user: its own session bus, home and XDG directories.
    func environment(_ side: String) -> [String: String] {
        let home = lab.directory.appendingPathComponent("home-\(side)")
        return ["DBUS_SESSION_BUS_ADDRESS": sessions[side]!.address, "HOME": home.path, "PATH": "/usr/bin:/bin",
                "XDG_CONFIG_HOME": home.appendingPathComponent("config").path, "XDG_DATA_HOME": home.appendingPathComponent("data").path,
                // Only the desktop entries the test installs (not this machine's /usr/share/applications).
                "XDG_DATA_DIRS": home.appendingPathComponent("share").path]
    }

    /// Starts `side`'s agent (log: `agent-SIDE.log`) with `media = on` or off, and waits until it
    /// follows suggestions and handles media.
    func startAgent(_ side: String, media enabled: Bool) async throws {
        let environment = environment(side)
        let config = URL(fileURLWithPath: environment["XDG_CONFIG_HOME"]!).appendingPathComponent("baton")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try "media = \(enabled ? "on" : "off")\n".write(to: config.appendingPathComponent("publishers.conf"), atomically: true, encoding: .utf8)
        agents[side] = try TwoDaemonsLabTests().spawn(product("baton-agent"), ["--bus", lab.address, "--bus-name", lab.busName(side)],
                                                      environment: environment, log: lab.directory.appendingPathComponent("agent-\(side).log").path)
        let lab = lab
        try #require(await lab.eventually(120) {
            lab.log("agent-\(side)").contains("for suggestions") && lab.log("agent-\(side)").contains("handler for org.baton.media")
        }, "\(side)'s agent did not start: \(lab.log("agent-\(side)"))")
    }

    /// Installs a desktop entry `mpv.desktop` for `side`'s user that starts the headless mpv (as a
    /// person's would start mpv), so its agent can start the source's player.
    func installHeadlessMPVEntry(_ side: String) throws {
        let applications = URL(fileURLWithPath: environment(side)["XDG_DATA_HOME"]!).appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try """
            [Desktop Entry]
            Type=Application
            Name=mpv (headless, Baton's lab)
            Categories=AudioVideo;Audio;Video;Player;TV;
            Exec=\(HeadlessPlayer.Kind.mpvPath) --no-config --no-video --ao=null --idle=yes --no-terminal --script=\(HeadlessPlayer.Kind.mprisScript) %U
            """.write(to: applications.appendingPathComponent("mpv.desktop"), atomically: true, encoding: .utf8)
    }

    /// Starts a player in `side`'s session on `file` (log: `KIND-SIDE-N.log`).
    func play(_ kind: HeadlessPlayer.Kind, on side: String, _ file: String, start: Int?, pause: Bool) throws -> HeadlessPlayer {
        let player = try HeadlessPlayer(kind, sessionAddress: sessions[side]!.address,
                                        home: lab.directory.appendingPathComponent("\(kind)-home-\(side)"), url: url(file), start: start,
                                        pause: pause, log: lab.directory.appendingPathComponent("\(kind)-\(side)-\(players.count).log"))
        players.append(player)
        return player
    }

    func probe(_ side: String, _ kind: HeadlessPlayer.Kind) -> MPRISProbe { MPRISProbe(connection: clients[side]!, name: kind.busName) }

    /// beta's suggestions of alpha's media (Suggestion1 objects of type org.baton.media from alpha).
    func mediaSuggestions() async throws -> [String] {
        let reply = try await daemons.call(destination: lab.busName("beta"), path: "/org/baton", interface: "org.freedesktop.DBus.ObjectManager",
                                           method: "GetManagedObjects", timeout: .seconds(30))
        var paths: [String] = []
        for (path, interfaces) in reply.first?.dictionaryValue ?? [:] {
            guard let suggestion = interfaces.asDictionary?["org.baton.Suggestion1"]?.asDictionary,
                  suggestion["ActivityType"]?.stringValue == "org.baton.media", suggestion["DeviceName"]?.stringValue == "alpha",
                  let name = path.objectPathValue else { continue }
            paths.append(name)
        }
        return paths.sorted()
    }

    /// Waits for a suggestion of alpha's media on beta that is not among `seen` (heard over the air).
    func newSuggestion(besides seen: Set<String>) async throws -> String {
        var found: String?
        let heard = await lab.eventually(120) {
            found = ((try? await self.mediaSuggestions()) ?? []).first { !seen.contains($0) }
            return found != nil
        }
        let radios = heard ? "" : ((try? await lab.radioReport()) ?? "")
        return try #require(found, "beta shows no suggestion of alpha's media\n\(logs())\n\(radios)")
    }

    /// The click: Suggestion1.Continue on beta, as the agent's notification action calls it; its
    /// outcome, or nil when alpha published a newer revision before the click (the suggestion is
    /// then gone or refuses with noLongerCurrent, and a newer one replaces it).
    func click(_ suggestion: String) async throws -> String? {
        do {
            return try await daemons.call(destination: lab.busName("beta"), path: suggestion, interface: "org.baton.Suggestion1", method: "Continue",
                                          timeout: .seconds(120)).first?.stringValue ?? ""
        } catch let error as DBusError where error.name == "org.freedesktop.DBus.Error.UnknownObject" || error.message == "noLongerCurrent" {
            return nil
        }
    }

    /// alpha's published media now (Activity1 Revision and UserInfo), for a note when a
    /// suggestion was replaced before the click.
    func alphaActivity() async -> String {
        guard let path = try? await daemons.call(destination: lab.busName("alpha"), path: "/org/baton", interface: "org.baton.Manager1",
                                                 method: "GetCurrentActivity", timeout: .seconds(30)).first?.objectPathValue, path != "/",
              let all = try? await daemons.call(destination: lab.busName("alpha"), path: path, interface: "org.freedesktop.DBus.Properties",
                                                method: "GetAll", arguments: [.string("org.baton.Activity1")], timeout: .seconds(30)).first?.asDictionary
        else { return "none" }
        let info = all["UserInfo"]?.asDictionary ?? [:]
        let fields = ["position", "positionTime", "playing", "rate"].map { "\($0)=\(info[$0].map { "\($0.unwrapped)" } ?? "-")" }
        return "revision \(all["Revision"]?.uint32Value.map(String.init) ?? "?") " + fields.joined(separator: " ")
    }

    /// alpha's current activity path, if it offers one.
    func alphaOffers() async throws -> Bool {
        let path = try await daemons.call(destination: lab.busName("alpha"), path: "/org/baton", interface: "org.baton.Manager1",
                                          method: "GetCurrentActivity", timeout: .seconds(30)).first?.objectPathValue
        return path != nil && path != "/"
    }

    func logs() -> String {
        ["agent-alpha", "agent-beta", "alpha", "beta"].map { "\($0):\n\(lab.log($0).suffix(6_000))" }.joined(separator: "\n") + "\n\(lab.timeline)"
    }

    func stop() {
        for player in players { player.stop() }
        for agent in agents.values where agent.isRunning {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        server.stop()
        daemons.close()
        for client in clients.values { client.close() }
        for session in sessions.values { session.stop() }
        lab.stop()
    }
}

/// Reads and drives one MPRIS player on a session bus (the test's own client, not the agent's).
struct MPRISProbe: Sendable {
    static let path = "/org/mpris/MediaPlayer2"
    static let player = "org.mpris.MediaPlayer2.Player"
    let connection: DBusConnection
    let name: String

    func property(_ property: String) async throws -> DBusValue? {
        try await connection.call(destination: name, path: Self.path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                                  arguments: [.string(Self.player), .string(property)], timeout: .seconds(30)).first?.unwrapped
    }

    func call(_ method: String, _ arguments: [DBusValue] = []) async throws {
        _ = try await connection.call(destination: name, path: Self.path, interface: Self.player, method: method, arguments: arguments,
                                      timeout: .seconds(30))
    }

    func url() async throws -> String? { try await property("Metadata")?.asDictionary?["xesam:url"]?.stringValue }
    func status() async throws -> String? { try await property("PlaybackStatus")?.stringValue }

    /// Seconds.
    func position() async throws -> Double? {
        guard case .int64(let micros)? = try await property("Position") else { return nil }
        return Double(micros) / 1_000_000
    }

    /// Whether the player shows `url`, in `status`, at `minimum` seconds or later.
    func shows(_ url: String, _ status: String, from minimum: Double = 0) async -> Bool {
        guard (try? await self.url()) == url, (try? await self.status()) == status else { return false }
        return ((try? await position()) ?? -1) >= minimum
    }

    /// The process that owns the name (the player an agent started).
    func processID() async throws -> Int32? {
        try await connection.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                  method: "GetConnectionUnixProcessID", arguments: [.string(name)], timeout: .seconds(30))
            .first?.uint32Value.map { Int32($0) }
    }
}
