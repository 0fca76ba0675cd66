// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// Every MPRIS signal of one player (PropertiesChanged of its Player interface, Seeked), stamped
/// on arrival on this process's monotonic clock, the same clock as the click; and, while a round
/// runs, the player's state read every 100 ms (VLC signals Seeked only while it plays, so a seek of
/// a paused VLC shows only in its Position), stamped when the answer arrived.
final class MPRISRecorder: Sendable {
    enum Event: Sendable {
        case changed([String: DBusValue])
        case seeked(Double)
        /// GetAll of the Player interface: Position (s), PlaybackStatus, xesam:url.
        case polled(position: Double, status: String, url: String?)
    }

    /// Shared with the subscriptions' handlers (a Mutex cannot be captured).
    final class Log: Sendable {
        let entries = Mutex<[(time: ContinuousClock.Instant, event: Event)]>([])
    }

    private let events = Log()
    private let subscriptions: [DBusSubscription]
    private let connection: DBusConnection
    private let probe: MPRISProbe
    private let poller = Mutex<Task<Void, Never>?>(nil)

    init(_ probe: MPRISProbe) async throws {
        self.probe = probe
        connection = probe.connection
        let events = events
        let changes = try await probe.connection.subscribe(DBusMatchRule(
            sender: probe.name, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: MPRISProbe.path,
            stringArguments: [0: MPRISProbe.player])) { signal in
            let now = ContinuousClock.now
            guard signal.arguments.count >= 2, let changed = signal.arguments[1].asDictionary else { return }
            events.entries.withLock { $0.append((now, .changed(changed))) }
        }
        let seeks = try await probe.connection.subscribe(DBusMatchRule(
            sender: probe.name, interface: MPRISProbe.player, member: "Seeked", path: MPRISProbe.path)) { signal in
            let now = ContinuousClock.now
            guard case .int64(let micros)? = signal.arguments.first?.unwrapped else { return }
            events.entries.withLock { $0.append((now, .seeked(Double(micros) / 1_000_000))) }
        }
        subscriptions = [changes, seeks]
    }

    var count: Int { events.entries.withLock { $0.count } }

    func since(_ index: Int) -> [(time: ContinuousClock.Instant, event: Event)] { events.entries.withLock { Array($0[min(index, $0.count)...]) } }

    /// Reads the player's state every 100 ms until `stopPolling`.
    func startPolling() {
        let probe = probe, events = events
        let task = Task {
            while !Task.isCancelled {
                if let all = try? await probe.connection.call(destination: probe.name, path: MPRISProbe.path, interface: "org.freedesktop.DBus.Properties",
                                                              method: "GetAll", arguments: [.string(MPRISProbe.player)], timeout: .seconds(30)).first?.asDictionary,
                   case .int64(let micros)? = all["Position"]?.unwrapped, let status = all["PlaybackStatus"]?.stringValue {
                    let now = ContinuousClock.now
                    let url = all["Metadata"]?.asDictionary?["xesam:url"]?.stringValue
                    events.entries.withLock { $0.append((now, .polled(position: Double(micros) / 1_000_000, status: status, url: url))) }
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        poller.withLock { $0?.cancel(); $0 = task }
    }

    func stopPolling() { poller.withLock { $0?.cancel(); $0 = nil } }

    func close() {
        stopPolling()
        for subscription in subscriptions { connection.unsubscribe(subscription) }
    }
}

/// What scripts/lab/bench-media asks for.
enum MediaBench {
    static var rounds: Int? { ProcessInfo.processInfo.environment["BATON_LAB_BENCH_MEDIA_ROUNDS"].flatMap { Int($0) } }
    static var kind: HeadlessPlayer.Kind {
        HeadlessPlayer.Kind(rawValue: ProcessInfo.processInfo.environment["BATON_LAB_BENCH_MEDIA_PLAYER"] ?? "mpv") ?? .mpv
    }
}

/// The media benchmark (docs/benchmarks.md, "Lab: media"): click → playing at the right position on
/// beta, over N rounds in one lab boot. Not a timed test: it prints figures, and fails only when a
/// round does not end playing at the position. Run by `scripts/lab/bench-media`, which sets
/// BATON_LAB_BENCH_MEDIA_ROUNDS (and BATON_LAB_BENCH_MEDIA_PLAYER=mpv|vlc); every other lab run
/// skips it.
@Suite(.serialized, .enabled(if: Lab.isInside && MediaBench.rounds != nil, "the media benchmark runs from scripts/lab/bench-media"))
struct MediaBenchLabTests {

    /// One round's times from the click, in seconds.
    struct Round {
        var opened: Double
        var seeked: Double
        var playing: Double
        var returned: Double
        var error: Double
        /// How the position was first seen at the target: "Seeked" (the signal) or "Position" (a read).
        var seenBy: String
    }

    @Test func benchmarkClickToPlayingAtThePosition() async throws {
        let rounds = max(1, MediaBench.rounds ?? 1), kind = MediaBench.kind
        try #require(kind.missing == nil, "\(kind.missing ?? "")")
        let rig = try await MediaLab(lab: try DaemonPair())
        defer { rig.stop() }
        try await rig.startAgent("alpha", media: true)
        try await rig.startAgent("beta", media: false)
        let talk = rig.url("talk.wav"), other = rig.url("other.wav")
        _ = try rig.play(kind, on: "alpha", "talk.wav", start: 20, pause: false)
        _ = try rig.play(kind, on: "beta", "other.wav", start: nil, pause: true)
        let source = rig.probe("alpha", kind), target = rig.probe("beta", kind)
        try #require(await rig.lab.eventually(120) { await source.shows(talk, "Playing", from: 22) }, "alpha's \(kind) does not play \(talk)")
        try #require(await rig.lab.eventually(120) { (try? await target.url()) == other }, "beta's \(kind) is not open")
        let recorder = try await MPRISRecorder(target)
        defer { recorder.close() }

        var results: [Round] = [], seen = Set<String>()
        for round in 1...rounds {
            if round > 1 {
                // beta back to another file, paused; alpha plays again (and offers it again).
                try await target.call("Pause")
                try await target.call("OpenUri", [.string(other)])
                try #require(await rig.lab.eventually(120) { (try? await target.url()) == other }, "beta's \(kind) did not go back\n\(rig.logs())")
                try await target.call("Pause")
                try await source.call("Play")
                try #require(await rig.lab.eventually(120) { (try? await source.status()) == "Playing" }, "alpha did not play again")
            }
            // Where alpha would be at any instant: its position read just before the click, at rate 1.
            var outcome: String?, replaced = 0, positionBefore = 0.0, sampledAt = ContinuousClock.now, clicked = ContinuousClock.now
            let start = recorder.count
            recorder.startPolling()
            let retriesBefore = rig.lab.log("agent-beta").components(separatedBy: "did not confirm the seek").count
            while outcome == nil {
                let suggestion = try await rig.newSuggestion(besides: seen)
                seen.insert(suggestion)
                let published = await rig.alphaActivity()
                let readAt = ContinuousClock.now
                positionBefore = try #require(try await source.position())
                let read = ContinuousClock.now
                sampledAt = readAt + (read - readAt) / 2
                clicked = ContinuousClock.now
                outcome = try await rig.click(suggestion)
                if outcome == nil {
                    // alpha republished before the click: the newer suggestion is clicked (and timed) instead.
                    replaced += 1
                    print("LAB BENCH media round \(round): the suggestion was replaced before the click (alpha had \(published), has \(await rig.alphaActivity()))")
                    try #require(replaced < 5, "round \(round): every suggestion was replaced before its click\n\(rig.logs())")
                }
            }
            let returned = ContinuousClock.now
            func targetPosition(_ time: ContinuousClock.Instant) -> Double { positionBefore + seconds(time - sampledAt) }
            #expect(outcome == "delivered", "round \(round)\n\(rig.logs())")

            // From beta's player's signals: opened (Metadata with the URL), seeked (Seeked within 2 s of
            // where alpha would be then), playing there (PlaybackStatus Playing at or after that seek).
            var found: Round?
            let done = await rig.lab.eventually(120) {
                found = Self.analyse(recorder.since(start), url: talk, from: clicked, target: targetPosition)
                return found != nil
            }
            recorder.stopPolling()
            var result = try #require(found, "round \(round): beta's \(kind) did not reach the position and play (done: \(done))\n\(rig.logs())")
            result.returned = seconds(returned - clicked)
            // Checked once more against the player's own Position now.
            let now = ContinuousClock.now
            let position = try #require(try await target.position())
            result.error = position - targetPosition(now)
            #expect(abs(result.error) < 2, "round \(round): beta at \(position) s, alpha would be at \(targetPosition(now)) s")
            results.append(result)
            // SetPositions the player did not confirm in time (sent again), from beta's agent's log.
            let retries = rig.lab.log("agent-beta").components(separatedBy: "did not confirm the seek").count - retriesBefore
            print(String(format: "LAB BENCH media round %d (%@): opened %.3f s, seeked %.3f s, playing %.3f s, Continue returned %.3f s, position off by %+.2f s, seeks sent again %d, at the position first seen by %@",
                         round, kind.rawValue, result.opened, result.seeked, result.playing, result.returned, result.error, retries, result.seenBy))
            try #require(await rig.lab.eventually(120) { (try? await source.status()) == "Paused" }, "alpha's \(kind) was not paused\n\(rig.logs())")
        }
        func line(_ name: String, _ values: [Double]) -> String {
            let sorted = values.sorted()
            func at(_ p: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))] }
            return String(format: "%@ p50 %.3f s, p95 %.3f s, min %.3f s, max %.3f s", name, at(0.5), at(0.95), at(0), at(1))
        }
        print("LAB BENCH media click→playing at the position (\(kind.rawValue), \(results.count) rounds): "
              + line("click→playing", results.map(\.playing)) + "; " + line("click→opened", results.map(\.opened)) + "; "
              + line("opened→seeked", results.map { $0.seeked - $0.opened }) + "; " + line("seeked→playing", results.map { $0.playing - $0.seeked })
              + "; " + line("Continue call", results.map(\.returned))
              + "; the position first seen by Seeked in \(results.filter { $0.seenBy == "Seeked" }.count) rounds, by a Position read in "
              + "\(results.filter { $0.seenBy == "Position" }.count)")
        #expect(results.count == rounds)
    }

    /// The round's times from beta's player's signals since the click, or nil while it is not yet
    /// playing at the position. Its status before the click is Paused (reset so).
    static func analyse(_ events: [(time: ContinuousClock.Instant, event: MPRISRecorder.Event)], url: String, from clicked: ContinuousClock.Instant,
                        target: (ContinuousClock.Instant) -> Double) -> Round? {
        var status = "Paused", opened: ContinuousClock.Instant?, seeked: ContinuousClock.Instant?, seenBy = ""
        for (time, event) in events {
            switch event {
            case .changed(let changed):
                if let value = changed["PlaybackStatus"]?.stringValue { status = value }
                if opened == nil, changed["Metadata"]?.asDictionary?["xesam:url"]?.stringValue == url { opened = time }
            case .seeked(let position):
                if opened != nil, seeked == nil, abs(position - target(time)) < 2 { (seeked, seenBy) = (time, "Seeked") }
            case .polled(let position, let polled, let current):
                status = polled
                if opened == nil, current == url { opened = time }
                if opened != nil, current == url, seeked == nil, abs(position - target(time)) < 2 { (seeked, seenBy) = (time, "Position") }
            }
            if let opened, let seeked, status == "Playing" {
                return Round(opened: seconds(opened - clicked), seeked: seconds(seeked - clicked), playing: seconds(time - clicked), returned: 0, error: 0,
                             seenBy: seenBy)
            }
        }
        return nil
    }
}
