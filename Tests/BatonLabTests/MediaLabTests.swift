// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// Issue 28's lab proof (docs/media.md): media handoff through MPRIS over the real radio. alpha's
/// headless mpv (mpv-mpris) plays a stream from the lab's HTTP server; alpha's agent publishes it;
/// beta's daemon hears the advert on hci1 and shows the suggestion; the click (Suggestion1.Continue)
/// makes beta's agent open it in the same player, at alpha's position plus the handoff's time;
/// alpha's agent pauses alpha's player. Three times: into beta's running mpv, into an mpv that
/// beta's agent starts from its desktop entry (the same player, installed, not running), and from
/// alpha's VLC into beta's running VLC.
/// Alone: `scripts/lab/test -- --filter MediaLabTests`.
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct MediaLabTests {
    @Test func playingMediaContinuesOnBetasPlayerOverTheAirAndAlphaPauses() async throws {
        for kind in HeadlessPlayer.Kind.allCases { try #require(kind.missing == nil, "\(kind.missing ?? "")") }
        let rig = try await MediaLab(lab: try DaemonPair())
        defer { rig.stop() }
        try rig.installHeadlessMPVEntry("beta")
        try await rig.startAgent("alpha", media: true)
        try await rig.startAgent("beta", media: false)
        let talk = rig.url("talk.wav")

        // alpha's mpv plays the talk from 20 s; beta's mpv is open, paused on another file.
        _ = try rig.play(.mpv, on: "alpha", "talk.wav", start: 20, pause: false)
        let mpvB = try rig.play(.mpv, on: "beta", "other.wav", start: nil, pause: true)
        let alphaMPV = rig.probe("alpha", .mpv), betaMPV = rig.probe("beta", .mpv)
        #expect(await rig.lab.eventually(120) { await alphaMPV.shows(talk, "Playing", from: 22) }, "alpha's mpv does not play \(talk)")
        #expect(await rig.lab.eventually(120) { await betaMPV.shows(rig.url("other.wav"), "Paused") }, "beta's mpv is not open")

        var seen = Set<String>()
        // 1. beta's running mpv.
        try await handOff("running mpv", rig, source: alphaMPV, target: betaMPV, url: talk, seen: &seen)
        #expect(rig.lab.log("agent-beta").contains("with running(busName: \"org.mpris.MediaPlayer2.mpv\")"), "\(rig.lab.log("agent-beta"))")

        // 2. No player runs on beta, mpv is installed: beta's agent starts it on the URL and seeks it.
        mpvB.stop()
        #expect(await rig.lab.eventually(120) { (try? await betaMPV.status()) == nil }, "beta's mpv did not leave the bus")
        try await alphaMPV.call("Play")
        try await handOff("mpv started by beta's agent", rig, source: alphaMPV, target: betaMPV, url: talk, seen: &seen)
        #expect(rig.lab.log("agent-beta").contains("with launch(desktopID: \"mpv.desktop\")"), "\(rig.lab.log("agent-beta"))")
        // The mpv beta's agent started: paused (and ended by its process id at the end).
        let launched = try await betaMPV.processID()
        defer { if let launched { kill(launched, SIGKILL) } }
        try await betaMPV.call("Pause")

        // 3. VLC: alpha's VLC plays the lecture from 30 s; beta's VLC is open, paused on another file.
        let lecture = rig.url("lecture.wav")
        _ = try rig.play(.vlc, on: "alpha", "lecture.wav", start: 30, pause: false)
        _ = try rig.play(.vlc, on: "beta", "other.wav", start: nil, pause: true)
        let alphaVLC = rig.probe("alpha", .vlc), betaVLC = rig.probe("beta", .vlc)
        #expect(await rig.lab.eventually(120) { await alphaVLC.shows(lecture, "Playing", from: 32) }, "alpha's VLC does not play \(lecture)")
        #expect(await rig.lab.eventually(120) { (try? await betaVLC.url()) == rig.url("other.wav") }, "beta's VLC is not open")
        try await handOff("running VLC", rig, source: alphaVLC, target: betaVLC, url: lecture, seen: &seen)
        #expect(rig.lab.log("agent-beta").contains("with running(busName: \"org.mpris.MediaPlayer2.vlc"), "\(rig.lab.log("agent-beta"))")
        // beta's mpv was not asked to open it.
        #expect(try await betaMPV.url() == talk)
    }

    /// Waits for beta's suggestion of alpha's media (heard over the air), clicks Continue, and
    /// checks: beta's player plays the same URL within 2 s of where alpha's would be (alpha's
    /// position read just before the click, plus the time since); alpha's player is paused no later
    /// than the handoff's end, and alpha stops offering the media.
    func handOff(_ label: String, _ rig: MediaLab, source: MPRISProbe, target: MPRISProbe, url: String, seen: inout Set<String>) async throws {
        var outcome: String?, before = ContinuousClock.now, positionBefore = 0.0
        for _ in 1...3 where outcome == nil {
            let suggestion = try await rig.newSuggestion(besides: seen)
            seen.insert(suggestion)
            let published = await rig.alphaActivity()
            before = ContinuousClock.now
            positionBefore = try #require(try await source.position())
            outcome = try await rig.click(suggestion)
            if outcome == nil { print("LAB media handoff (\(label)): the suggestion was replaced before the click (alpha had \(published), has \(await rig.alphaActivity()))") }
        }
        let returned = ContinuousClock.now
        #expect(outcome == "delivered", "\(rig.logs())")

        #expect(await rig.lab.eventually(120) { (try? await target.url()) == url }, "beta's player did not open \(url)\n\(rig.logs())")
        #expect(await rig.lab.eventually(120) {
            let status = try? await target.status(), position = try? await target.position()
            return status == "Playing" && (position ?? 0) > positionBefore - 2
        }, "beta's player does not play from alpha's position\n\(rig.logs())")
        let positionB = try #require(try await target.position())
        let expected = positionBefore + seconds(ContinuousClock.now - before)
        print(String(format: "LAB media handoff (%@): beta %@ at %.2f s, alpha would be at %.2f s (read %.2f s just before the click); Continue took %.2f s",
                     label, try await target.status() ?? "?", positionB, expected, positionBefore, seconds(returned - before)))
        #expect(abs(positionB - expected) < 2, "beta at \(positionB) s, alpha would be at \(expected) s\n\(rig.logs())")

        #expect(await rig.lab.eventually(120) { (try? await source.status()) == "Paused" }, "alpha's player was not paused\n\(rig.logs())")
        let pausedAt = try #require(try await source.position())
        #expect(pausedAt <= positionBefore + seconds(returned - before) + 1, "alpha paused at \(pausedAt) s, after the handoff ended")
        #expect(await rig.lab.eventually(120) { (try? await rig.alphaOffers()) == false }, "alpha still offers the media\n\(rig.logs())")
        try await Task.sleep(for: .seconds(2))
        #expect(try await rig.alphaOffers() == false, "alpha offers the media again after its pause\n\(rig.logs())")
        print(String(format: "LAB media handoff (%@): alpha paused at %.2f s and withdrew the media", label, pausedAt))
    }
}
