// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonX11
import BatonSpawn
import BatonXvfb
import Foundation
import Testing

private let text = ClipboardTypes.text
private let tenMiB = 10 << 20

private func seconds(since start: ContinuousClock.Instant) -> String {
    let elapsed = ContinuousClock.now - start
    return String(format: "%.2f s", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

@Suite("BatonX11Tests: the session clipboard on X11 against Xvfb and xclip (issue 27)", .serialized)
struct X11SessionClipboardTests {
    @Test("another client's copy: one change with text types, PRIMARY never; read returns the exact bytes")
    func copyByAnotherClient() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let clipboard = try X11SessionClipboard(display: server.display)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        await #expect(throws: ClipboardError.noOwner) { try await clipboard.read(type: text, limit: 1024) }

        try await xclipCopy(Array("not this one".utf8), display: server.display, selection: "primary")
        let copied = Array("Grüße from xclip\n\twith a tab".utf8)
        try await xclipCopy(copied, display: server.display)
        // The first event is the CLIPBOARD copy: the PRIMARY one before it made none.
        let event = await recorder.next()
        guard case .changed(let change) = event else {
            Issue.record("expected a change, got \(String(describing: event))")
            return
        }
        #expect(change.types == [text])
        #expect(!change.isSecret)
        #expect(change.revision == 1)
        #expect(try await clipboard.read(type: text, limit: 1024) == copied)
        await #expect(throws: ClipboardError.typeNotOffered("image/png")) {
            try await clipboard.read(type: "image/png", limit: 1024)
        }
        await #expect(throws: ClipboardError.overLimit(limit: 4)) { try await clipboard.read(type: text, limit: 4) }
        // Still there after a refused read.
        #expect(try await clipboard.read(type: text, limit: copied.count) == copied)
    }

    @Test("a 10 MiB image copied with xclip reads back exactly (INCR), and not past a smaller limit")
    func largeRead() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let clipboard = try X11SessionClipboard(display: server.display)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        let image = binaryBytes(count: tenMiB)
        try await xclipCopy(image, display: server.display, type: "image/png")
        let change = await recorder.nextChange()
        #expect(change?.types == ["image/png"])
        let start = ContinuousClock.now
        let read = try await clipboard.read(type: "image/png", limit: 16 << 20)
        print("BatonX11Tests: read of 10 MiB from xclip took \(seconds(since: start))")
        #expect(read.count == image.count)
        #expect(read == image)
        #expect(await clipboard.statistics.incrementalReads == 1)
        await #expect(throws: ClipboardError.overLimit(limit: 1 << 20)) {
            try await clipboard.read(type: "image/png", limit: 1 << 20)
        }
        // The adapter is not stuck on the abandoned transfer.
        #expect(try await clipboard.read(type: "image/png", limit: 16 << 20) == image)
    }

    @Test("an offer: nothing produced before a paste; TARGETS, INCR for 10 MiB, the text aliases; a failed provide fails one paste; lost to xclip")
    func offer() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let clipboard = try X11SessionClipboard(display: server.display)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        let image = binaryBytes(count: tenMiB, seed: 7)
        let words = Array("Handoff: copied on alpha, pasted on beta — ünïcödé".utf8)
        let log = ProvideLog()
        let dropped = try await clipboard.offer(types: [text, "image/png"]) { type in
            guard await log.called(type) else { throw ProvideFailed() }
            return type == "image/png" ? image : words
        }
        #expect(dropped.isEmpty)
        #expect(await log.total == 0)

        let listed = try await xclip(["-o", "-selection", "clipboard", "-t", "TARGETS"], display: server.display)
        let targets = Set(String(decoding: listed.output, as: UTF8.self).split(separator: "\n").map(String.init))
        #expect(targets.isSuperset(of: ["TARGETS", "TIMESTAMP", "UTF8_STRING", "text/plain;charset=utf-8", "image/png"]))
        #expect(await log.total == 0)

        let start = ContinuousClock.now
        let pasted = try await xclip(["-o", "-selection", "clipboard", "-t", "image/png"], display: server.display)
        print("BatonX11Tests: paste of 10 MiB into xclip took \(seconds(since: start))")
        #expect(pasted.status == 0)
        #expect(pasted.output.count == image.count)
        #expect(pasted.output == Data(image))
        #expect(await log.count("image/png") == 1)
        // In chunks of at most 256 KiB.
        #expect(await clipboard.statistics.incrementalSends == 1)
        #expect(await clipboard.statistics.chunksSent >= 40)

        let pastedText = try await xclip(["-o", "-selection", "clipboard", "-t", "UTF8_STRING"], display: server.display)
        #expect(Array(pastedText.output) == words)
        #expect(await log.count(text) == 1)
        // Every text alias is answered from the one text type; STRING in Latin-1.
        for alias in ["TEXT", "text/plain", "text/plain;charset=utf-8"] {
            let pasted = try await xclip(["-o", "-selection", "clipboard", "-t", alias], display: server.display)
            #expect(Array(pasted.output) == words, "\(alias)")
        }
        let latin1 = try await xclip(["-o", "-selection", "clipboard", "-t", "STRING"], display: server.display)
        #expect(Array(latin1.output) == ClipboardTypes.latin1(fromUTF8: words))
        #expect(await log.count(text) == 5)

        await log.failNext("image/png")
        let failed = try await xclip(["-o", "-selection", "clipboard", "-t", "image/png"], display: server.display)
        #expect(failed.output.isEmpty)
        let again = try await xclip(["-o", "-selection", "clipboard", "-t", "image/png"], display: server.display)
        #expect(again.output == Data(image))
        #expect(await log.count("image/png") == 3)

        // Our own offer made no change event: the first event is the loss.
        try await xclipCopy(Array("taken".utf8), display: server.display)
        #expect(await recorder.next() == .offerLost)
        let change = await recorder.nextChange()
        #expect(change?.types == [text])
        #expect(try await clipboard.read(type: text, limit: 100) == Array("taken".utf8))
    }

    @Test("a copy marked secret (KDE's hint with secret) is seen as secret; with public it is not")
    func secretCopy() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let watcher = try X11SessionClipboard(display: server.display)
        defer { watcher.close() }
        let recorder = EventRecorder(watcher.events)
        let manager = try X11SessionClipboard(display: server.display)
        defer { manager.close() }

        try await manager.offer(types: [text, ClipboardSecrecy.kdePasswordManagerHint]) { type in
            type == ClipboardSecrecy.kdePasswordManagerHint ? Array("secret".utf8) : Array("hunter2".utf8)
        }
        let secret = await recorder.nextChange()
        #expect(secret?.types == [text])
        #expect(secret?.isSecret == true)

        try await manager.offer(types: [text, ClipboardSecrecy.kdePasswordManagerHint]) { type in
            type == ClipboardSecrecy.kdePasswordManagerHint ? Array("public".utf8) : Array("hello".utf8)
        }
        let ordinary = await recorder.nextChange()
        #expect(ordinary?.types == [text])
        #expect(ordinary?.isSecret == false)
        #expect(try await watcher.read(type: text, limit: 100) == Array("hello".utf8))

        // The adapter's own INCR both ways: 10 MiB in chunks of at most 256 KiB.
        let image = binaryBytes(count: tenMiB, seed: 11)
        try await manager.offer(types: ["image/png", ClipboardSecrecy.concealedType]) { _ in image }
        let concealed = await recorder.nextChange()
        #expect(concealed?.types == ["image/png"])
        #expect(concealed?.isSecret == true)
        let start = ContinuousClock.now
        let read = try await watcher.read(type: "image/png", limit: tenMiB)
        print("BatonX11Tests: 10 MiB from one adapter to another took \(seconds(since: start))")
        #expect(read == image)
        #expect(await watcher.statistics.incrementalReads == 1)
        #expect(await manager.statistics.incrementalSends == 1)
        await #expect(throws: ClipboardError.overLimit(limit: tenMiB - 1)) {
            try await watcher.read(type: "image/png", limit: tenMiB - 1)
        }
        #expect(try await watcher.read(type: "image/png", limit: tenMiB) == image)
    }

    @Test("hostile owners: garbage atoms and over 64 types are bounded; a silent owner times out and the adapter goes on")
    func hostileOwners() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let clipboard = try X11SessionClipboard(display: server.display,
                                                configuration: .init(answerTimeout: .seconds(2)))
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        let many = (0..<100).map { "application/x-baton-test-\($0)" }
        let long = "application/" + String(repeating: "x", count: 300)
        _ = try RawSelectionOwner(display: server.display, targets: ["UTF8_STRING", "TARGETS", long] + many,
                                  garbage: [0x1FFF_FFF0, 0x1FFF_FFF1, 0x7FFF_FFFF])
        let change = await recorder.nextChange()
        #expect(change?.types.count == ClipboardTypeList.maximumCount)
        #expect(change?.types.first == text)
        #expect(change?.dropped.contains { $0.reason == .tooMany } == true)
        #expect(change?.dropped.filter { $0.reason == .notMediaType }.count == 3)
        #expect(change?.dropped.filter { $0.reason == .nameTooLong }.count == 1)
        #expect(change?.types.contains { $0.utf8.count > ClipboardTypeList.maximumNameBytes } == false)
        // It offers text but answers nothing but TARGETS.
        await #expect(throws: ClipboardError.refused) { try await clipboard.read(type: text, limit: 100) }

        _ = try RawSelectionOwner(display: server.display, targets: nil)
        let start = ContinuousClock.now
        await #expect(throws: ClipboardError.timedOut) { try await clipboard.read(type: text, limit: 100) }
        print("BatonX11Tests: a silent owner timed out after \(seconds(since: start))")

        try await xclipCopy(Array("after the silent one".utf8), display: server.display)
        // The silent owner made no change (its TARGETS timed out): the next one is xclip's.
        #expect(await recorder.nextChange()?.types == [text])
        #expect(try await clipboard.read(type: text, limit: 100) == Array("after the silent one".utf8))
    }

    @Test("withdraw gives the clipboard up without an event; the next copy is a change")
    func withdraw() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let clipboard = try X11SessionClipboard(display: server.display)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        try await clipboard.offer(types: [text]) { _ in Array("mine".utf8) }
        #expect(try await xclip(["-o", "-selection", "clipboard"], display: server.display).output == Data("mine".utf8))
        await clipboard.withdraw()
        let after = try await xclip(["-o", "-selection", "clipboard"], display: server.display)
        #expect(after.output.isEmpty)
        #expect(after.status != 0)
        await #expect(throws: ClipboardError.noOwner) { try await clipboard.read(type: text, limit: 100) }

        try await xclipCopy(Array("theirs".utf8), display: server.display)
        let event = await recorder.next()
        #expect(event.map { if case .changed = $0 { true } else { false } } == true, "\(String(describing: event))")
    }

    @Test("a pasting app that stops reading an INCR answer is dropped after the requestor timeout; others go on")
    func stalledRequestor() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let clipboard = try X11SessionClipboard(display: server.display,
                                                configuration: .init(requestorTimeout: .seconds(1)))
        defer { clipboard.close() }

        let image = binaryBytes(count: 2 << 20, seed: 3)
        try await clipboard.offer(types: ["image/png"]) { _ in image }
        let display = server.display
        let stalled = try await onThread { try StalledRequestor(display: display, target: "image/png") }
        #expect(stalled.answerType == stalled.incrAtom)
        var abandoned = 0
        let deadline = ContinuousClock.now + .seconds(30)
        while abandoned == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            abandoned = await clipboard.statistics.abandonedSends
        }
        #expect(abandoned == 1)
        withExtendedLifetime(stalled) {}

        // Another paste, and the adapter reading its own offer (INCR to its own window), still work.
        #expect(try await xclip(["-o", "-selection", "clipboard", "-t", "image/png"], display: server.display).output == Data(image))
        #expect(try await clipboard.read(type: "image/png", limit: 4 << 20) == image)
    }

    @Test("the display going away: reads and offers fail as unavailable, the events end")
    func displayGone() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        let clipboard = try X11SessionClipboard(display: server.display)
        defer { clipboard.close() }
        try await xclipCopy(Array("soon gone".utf8), display: server.display)
        server.stop()
        let events = clipboard.events
        let ended = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await _ in events {}
                return !Task.isCancelled
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(30))  // a guard only
                return false
            }
            defer { group.cancelAll() }
            return await group.next() ?? false
        }
        #expect(ended)
        await #expect { try await clipboard.read(type: text, limit: 100) } throws: { error in
            if case .unavailable = error as? ClipboardError { true } else { false }
        }
        await #expect { try await clipboard.offer(types: [text]) { _ in [] } } throws: { error in
            if case .unavailable = error as? ClipboardError { true } else { false }
        }
    }

    @Test("no display: a typed error, no crash")
    func noDisplay() {
        #expect { try X11SessionClipboard(display: ":65000") } throws: { error in
            if case .unavailable = error as? ClipboardError { true } else { false }
        }
    }

    @Test("a silent owner's TARGETS does not hold up the next copy (its conversion is dropped when the owner changes)")
    func silentOwnerDoesNotDelay() async throws {
        let server = try await XvfbServer.start()
        defer { server.stop() }
        // Far longer than the wait below: the change can only come in time if the stale conversion is dropped.
        let clipboard = try X11SessionClipboard(display: server.display, configuration: .init(answerTimeout: .seconds(300)))
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)
        _ = try RawSelectionOwner(display: server.display, targets: nil)
        try await xclipCopy(Array("next".utf8), display: server.display)
        #expect(await recorder.nextChange(timeout: .seconds(30))?.types == [text])
        #expect(try await clipboard.read(type: text, limit: 100) == Array("next".utf8))
    }
}
