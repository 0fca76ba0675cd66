// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonSway
import BatonWayland
import Foundation
import Testing

private let text = ClipboardTypes.text
private let tenMiB = 10 << 20

@Suite("BatonWaylandTests: the session clipboard on Wayland against headless sway and wl-clipboard (issue 27)", .serialized)
struct WaylandSessionClipboardTests {
    @Test("a wl-copy text copy: one change with text, the primary selection never; read returns its bytes")
    func copyByWlCopy() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        #expect(clipboard.dataControlProtocol == .wlr)  // sway 1.7 offers only wlr-data-control
        let recorder = EventRecorder(clipboard.events)

        await #expect(throws: ClipboardError.noOwner) { try await clipboard.read(type: text, limit: 1024) }
        // A primary copy of its own type: were it reported, the first change would list that type.
        try await sway.wlCopy(Array("not this one".utf8), arguments: ["--primary", "--type", "application/x-baton-primary"])
        let copied = Array("Grüße from wl-copy\n\twith a tab".utf8)
        try await sway.wlCopy(copied)
        // The first event is the clipboard's: the primary copy before it made none.
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
        #expect(try await clipboard.read(type: text, limit: copied.count) == copied)

        // An adapter started after the copy: the copy at its start is no change, but it reads.
        let late = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { late.close() }
        #expect(try await late.read(type: text, limit: 1024) == copied)
    }

    @Test("a PNG copied with wl-copy arrives as image/png and reads back exactly")
    func pngCopy() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        try await sway.wlCopy(pngBytes, arguments: ["--type", "image/png"])
        let change = await recorder.nextChange()
        #expect(change?.types == ["image/png"])
        #expect(try await clipboard.read(type: "image/png", limit: 1 << 20) == pngBytes)
        await #expect(throws: ClipboardError.typeNotOffered(text)) { try await clipboard.read(type: text, limit: 1024) }
    }

    @Test("a copy offering x-kde-passwordManagerHint is secret when it says secret, and when it cannot be read; not when public")
    func secretCopies() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)
        // Debian 12's wl-clipboard (2.1.0) has no --sensitive: a second client of our own offers the
        // hint as `wl-copy --sensitive` does (the hint's value written on request).
        let passwordManager = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { passwordManager.close() }
        let hint = ClipboardSecrecy.kdePasswordManagerHint

        for (value, secret) in [("secret\n", true), ("public", false), ("", true)] {
            try await passwordManager.offer(types: [text, hint]) { type in
                type == hint ? Array(value.utf8) : Array("hunter2".utf8)
            }
            let change = await recorder.nextChange()
            #expect(change?.types == [text], "hint \(value.debugDescription)")
            #expect(change?.isSecret == secret, "hint \(value.debugDescription)")
        }
        #expect(try await clipboard.read(type: text, limit: 64) == Array("hunter2".utf8))
    }

    @Test("our offer is what wl-paste returns, text and PNG; provide runs only at the paste; no event for it")
    func offerPastedByWlPaste() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)
        let log = ProvideLog()
        let offered = Array("offered by baton, ünïcödé".utf8)

        let dropped = try await clipboard.offer(types: [text, "image/png"]) { type in
            await log.called(type)
            return type == text ? offered : pngBytes
        }
        #expect(dropped.isEmpty)
        #expect(await log.total == 0)  // nothing produced before a paste
        let types = try await sway.wlPaste(["--list-types"])
        let listed = Set(String(decoding: types.output, as: UTF8.self).split(separator: "\n").map(String.init))
        #expect(listed.isSuperset(of: ["text/plain;charset=utf-8", "text/plain", "UTF8_STRING", "STRING", "TEXT", "image/png"]))
        #expect(await log.total == 0)

        let pasted = try await sway.wlPaste()
        #expect(pasted.status == 0)
        #expect(pasted.output == offered)
        #expect(await log.count(text) == 1)
        let image = try await sway.wlPaste(["--type", "image/png"])
        #expect(image.output == pngBytes)
        #expect(await log.count("image/png") == 1)
        // STRING is ISO Latin-1.
        let latin1 = try await sway.wlPaste(["--type", "STRING"])
        #expect(latin1.output == ClipboardTypes.latin1(fromUTF8: offered))
        // Reading our own offer goes through the compositor too.
        #expect(try await clipboard.read(type: text, limit: 1024) == offered)
        #expect(await recorder.pending.isEmpty)  // our own offer is no change

        await clipboard.withdraw()
        let after = try await sway.wlPaste()
        #expect(after.status != 0)  // nothing on the clipboard
        #expect(await recorder.pending.isEmpty)  // our withdrawal is no news either
    }

    @Test("a 10 MiB offer pasted by wl-paste and a 10 MiB copy read; an over-limit read fails typed")
    func largeTransfers() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)
        let image = binaryBytes(count: tenMiB)

        try await clipboard.offer(types: ["image/png"]) { _ in image }
        let pasted = try await sway.wlPaste(["--type", "image/png"])
        #expect(pasted.output.count == image.count)
        #expect(pasted.output == image)

        let copied = binaryBytes(count: tenMiB, seed: 99)
        try await sway.wlCopy(copied, arguments: ["--type", "image/png"])
        #expect(await recorder.next() == .offerLost)
        #expect(await recorder.nextChange()?.types == ["image/png"])
        let read = try await clipboard.read(type: "image/png", limit: tenMiB)
        #expect(read == copied)
        await #expect(throws: ClipboardError.overLimit(limit: 1 << 20)) {
            try await clipboard.read(type: "image/png", limit: 1 << 20)
        }
        await #expect(throws: ClipboardError.overLimit(limit: tenMiB - 1)) {
            try await clipboard.read(type: "image/png", limit: tenMiB - 1)
        }
        // The copying client still answers after the reads given up.
        #expect(try await clipboard.read(type: "image/png", limit: tenMiB) == copied)
    }

    @Test("a second copy by wl-copy takes the clipboard from our offer: offerLost, then its change; provide not called")
    func offerLostToWlCopy() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)
        let log = ProvideLog()

        try await clipboard.offer(types: [text]) { type in
            await log.called(type)
            return Array("ours".utf8)
        }
        // A later offer replaces the earlier one without an offerLost.
        try await clipboard.offer(types: [text]) { type in
            await log.called(type)
            return Array("ours, again".utf8)
        }
        #expect(try await sway.wlPaste().output == Array("ours, again".utf8))
        try await sway.wlCopy(Array("theirs".utf8))
        #expect(await recorder.next() == .offerLost)
        let change = await recorder.nextChange()
        #expect(change?.types == [text])
        #expect(change?.revision == 1)
        #expect(try await sway.wlPaste().output == Array("theirs".utf8))
        #expect(await log.total == 1)
    }

    @Test("the copying client going away clears the clipboard")
    func ownerGone() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        let copier = try sway.wlCopyForeground("short-lived")
        #expect(await recorder.nextChange()?.types == [text])
        kill(copier.pid, SIGTERM)
        copier.wait()
        #expect(await recorder.next() == .cleared)
        await #expect(throws: ClipboardError.noOwner) { try await clipboard.read(type: text, limit: 1024) }
    }

    @Test("killing the compositor finishes the event stream; later calls fail as unavailable")
    func compositorKilled() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        sway.stop(signal: SIGKILL)
        #expect(await recorder.next() == nil)
        #expect(await recorder.isFinished)
        do {
            _ = try await clipboard.read(type: text, limit: 16)
            Issue.record("a read after the compositor died succeeded")
        } catch {
            guard case .unavailable = error else {
                Issue.record("expected unavailable, got \(error)")
                return
            }
        }
        do {
            try await clipboard.offer(types: [text]) { _ in [] }
            Issue.record("an offer after the compositor died succeeded")
        } catch {
            guard case .unavailable = error else {
                Issue.record("expected unavailable, got \(error)")
                return
            }
        }
    }

    @Test("whether data control is offered: sway's wlr-data-control, no WAYLAND_DISPLAY, no compositor at the socket")
    func availability() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let environment = sway.environment
        let available = try await onThread { waylandDataControlAvailability(environment: environment, timeout: .seconds(120)) }
        #expect(available == .available(.wlr, version: 2))
        #expect(waylandDataControlAvailability(environment: ["XDG_RUNTIME_DIR": "/tmp"]) == .noDisplay)
        let absent = waylandDataControlAvailability(environment: ["WAYLAND_DISPLAY": "wayland-baton-absent",
                                                                  "XDG_RUNTIME_DIR": sway.runtimeDirectory])
        guard case .cannotConnect = absent else {
            Issue.record("expected cannotConnect, got \(absent)")
            return
        }
        #expect(throws: ClipboardError.self) { try WaylandSessionClipboard(environment: [:]) }
    }
}
