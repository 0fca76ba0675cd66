// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// Records what the receiver asked of the desktop; says every entry in `players` is an installed
/// media player, and `defaultPlayer` the default for audio and video files.
final class RecordingMediaDesktop: MediaDesktop {
    let players: Set<String>
    let defaultPlayer: String?
    let asked = Mutex<[String]>([])
    let started = Mutex<[String]>([])
    init(players: Set<String> = [], defaultPlayer: String? = nil) {
        self.players = players
        self.defaultPlayer = defaultPlayer
    }
    func isMediaPlayer(desktopID: String) -> Bool {
        asked.withLock { $0.append(desktopID) }
        return players.contains(desktopID)
    }
    func hasDefaultHandler(scheme: String) -> Bool { false }
    func defaultMediaPlayer(mediaType: String) -> String? {
        asked.withLock { $0.append("default for \(mediaType)") }
        return defaultPlayer
    }
    func launch(desktopID: String, uri: String) throws(LaunchError) { started.withLock { $0.append("\(desktopID) \(uri)") } }
    func openDefault(_ uri: String) async throws { started.withLock { $0.append("default \(uri)") } }
}

final class RecordingLog: AgentLog {
    let lines = Mutex<[String]>([])
    func log(_ line: String) { lines.withLock { $0.append(line) } }
}

/// Red team, the media receiver in the agent (docs/media.md, "Continuing on the other machine"): what
/// a hostile member's activity can make it start, and a Continue that arrives while the player goes.
@Suite("BatonAgentTests: red team, the media receiver", .serialized)
struct MediaReceiverAttackTests {
    static func userInfo(url: String = "https://radio.example/live.ogg", player: String = "mpv") -> [String: PropertyValue] {
        ["url": .string(url), "position": .double(30), "positionTime": .double(Date().timeIntervalSince1970), "rate": .double(1),
         "playing": .boolean(true), "player": .string(player)]
    }

    /// Attack: activities naming as their player a terminal's, a browser's and an office suite's
    /// desktop entry (all installed here, none a media player but the browser as far as the desktop
    /// says), and URLs that are no network stream. Found: the receiver started `<player>.desktop`
    /// on the member's URL whatever the entry was. Fixed: only an entry the desktop says is a media
    /// player (its Categories), never a browser's. Held: nothing is started for the URLs, and with
    /// no player here the Continue is refused (the source keeps playing).
    @Test func aHostileActivityStartsNothing() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let session = try DBusConnection(bus: .address(bus.address))
        defer { session.close() }
        let desktop = RecordingMediaDesktop(players: ["firefox.desktop", "mpv.desktop"])
        // No player will show the media on this bus: the last step's wait for it ends after 3 s.
        let receiver = MediaReceiver(session: session, desktop: desktop, logger: RecordingLog(), loadTimeout: .seconds(3))
        for player in ["xterm", "org.gnome.Terminal", "libreoffice-writer", "firefox"] {
            await #expect(throws: MediaReceiver.Refusal.self, "\(player)") {
                try await receiver.receive(title: "Song", userInfo: Self.userInfo(player: player))
            }
        }
        for url in ["file:///etc/passwd", "javascript:alert(1)", "data:audio/ogg;base64,AAAA", "https://u:p@radio.example/a"] {
            await #expect(throws: MediaReceiver.Refusal.self, "\(url)") { try await receiver.receive(title: "Song", userInfo: Self.userInfo(url: url)) }
        }
        #expect(desktop.started.withLock { $0 }.isEmpty, "started: \(desktop.started.withLock { $0 })")
        #expect(!desktop.asked.withLock { $0 }.contains { $0.hasPrefix("file") })
        // The player of the source, a media player here: started on the URL.
        try await receiver.receive(title: "Song", userInfo: Self.userInfo())
        #expect(desktop.started.withLock { $0 } == ["mpv.desktop https://radio.example/live.ogg"])
    }

    /// Attack: the only player here goes away as it is asked to open the media (it accepts OpenUri,
    /// then leaves the bus). Held: the receiver does not hang or crash and starts nothing else. The
    /// Continue is answered once the player took the URL (OpenUri returned: docs/media.md, batond's
    /// handler wait is 10 s and a player may take longer to load), so this one counts as opened and
    /// the source pauses; the seek that follows fails within the load time and says so in the log.
    /// Once the player is gone, the next Continue is refused at once.
    @Test func aPlayerThatLeavesWhileOpeningIsNotSeekedAndThenRefused() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let session = try DBusConnection(bus: .address(bus.address))
        defer { session.close() }
        let player = try DBusConnection(bus: .address(bus.address))
        _ = try await player.requestName("org.mpris.MediaPlayer2.leaving", flags: [.doNotQueue])
        let opened = Mutex<[String]>([])
        try await player.export([
            DBusInterface("org.mpris.MediaPlayer2", properties: [
                DBusProperty("DesktopEntry", signature: "s") { .string("leaving") },
                DBusProperty("SupportedUriSchemes", signature: "as") { .array(elementSignature: "s", [.string("https")]) },
            ]),
            DBusInterface("org.mpris.MediaPlayer2.Player", methods: [
                DBusMethod("OpenUri", in: [DBusArgument("Uri", "s")]) { call in
                    opened.withLock { $0.append(call.arguments.first?.stringValue ?? "") }
                    Task {
                        try? await Task.sleep(for: .milliseconds(50))
                        player.close()
                    }
                    return []
                },
            ], properties: [
                DBusProperty("Metadata", signature: "a{sv}") { .dictionary(keySignature: "s", valueSignature: "v", [:]) },
                DBusProperty("PlaybackStatus", signature: "s") { .string("Paused") },
            ]),
        ], at: "/org/mpris/MediaPlayer2")
        let desktop = RecordingMediaDesktop()
        let log = RecordingLog()
        // The load time is what is under test here: how long a player that never shows the media is waited for.
        let receiver = MediaReceiver(session: session, desktop: desktop, logger: log, loadTimeout: .seconds(3))
        let opening = try await receiver.receive(title: "Song", userInfo: Self.userInfo(player: "leaving"))
        #expect(opening == .running(busName: "org.mpris.MediaPlayer2.leaving"))
        #expect(opened.withLock { $0 } == ["https://radio.example/live.ogg"])
        #expect(desktop.started.withLock { $0 }.isEmpty)
        #expect(await eventually(timeout: .seconds(120)) { log.lines.withLock { $0 }.contains { $0.contains("it was not seeked") } },
                "\(log.lines.withLock { $0 })")
        // Nothing left running: with no player at all, the next one is refused at once.
        #expect(await eventually(timeout: .seconds(120)) { (try? await session.nameHasOwner("org.mpris.MediaPlayer2.leaving")) == false })
        await #expect(throws: MediaReceiver.Refusal.self) { try await receiver.receive(title: "Song", userInfo: Self.userInfo()) }
        #expect(log.lines.withLock { $0 }.contains { $0.contains("refusing the media") }, "\(log.lines.withLock { $0 })")
    }

    /// GIO's side of the fix: the entries a member's player name may start are those whose
    /// Categories name a media player (mpv's, VLC's, Rhythmbox's as Debian ships them), never a
    /// terminal's, an office suite's, a browser's or one without Categories.
    @Test func theDesktopCallsOnlyMediaPlayersAPlayer() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-entries-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let entries: [(String, String?, Bool)] = [
            ("mpv", "AudioVideo;Audio;Video;Player;TV;", true), ("vlc", "AudioVideo;Player;Recorder;", true),
            ("rhythmbox", "GNOME;GTK;AudioVideo;Audio;Player;", true), ("xterm", "System;TerminalEmulator;", false),
            ("writer", "Office;WordProcessor;", false), ("firefox", "GNOME;GTK;Network;WebBrowser;", false), ("bare", nil, false),
            ("audacity", "AudioVideo;Audio;AudioVideoEditing;", false), ("obs", "AudioVideo;Recorder;", false),
            ("carla", "AudioVideo;Audio;Midi;X-Digital_Processing;", false),
        ]
        for (name, categories, isPlayer) in entries {
            let file = directory.appendingPathComponent("\(name).desktop")
            try """
                [Desktop Entry]
                Type=Application
                Name=\(name)
                Exec=/bin/true %U
                \(categories.map { "Categories=\($0)" } ?? "")
                """.write(to: file, atomically: true, encoding: .utf8)
            #expect(GioMediaDesktop.isMediaPlayer(desktopFile: file.path) == isPlayer, "\(name)")
        }
        #expect(!GioMediaDesktop.isMediaPlayer(desktopFile: directory.appendingPathComponent("missing.desktop").path))
    }
}
