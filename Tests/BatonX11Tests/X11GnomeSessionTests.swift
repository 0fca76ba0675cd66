// SPDX-License-Identifier: GPL-2.0-or-later
import BatonMutter
import BatonPublishers
import BatonX11
import Foundation
import Glibc
import Testing

/// GNOME's Wayland session (docs/clipboard.md, "GNOME"): Mutter offers no data control, but keeps
/// its XWayland's CLIPBOARD and the Wayland one the same whatever has the focus, so the X11 adapter
/// on XWayland's display shares the clipboard of Wayland apps. Against a real Mutter 43 and GNOME
/// Shell 43 (nested in a private Xvfb, NestedMutter), with wl-copy and wl-paste as the Wayland apps;
/// the adapter's window is never mapped, so no X window ever has the focus.
@Suite("BatonX11Tests: the X11 adapter on XWayland in GNOME's Wayland session (Mutter, GNOME Shell)", .serialized)
struct X11GnomeSessionTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + binaryBytes(count: 3 << 20)

    @Test("a Wayland app's copy reaches the adapter on XWayland: text, and a 3 MiB PNG Mutter sends in chunks; over the limit fails typed",
          arguments: GnomeCompositor.allCases)
    func waylandCopiesReachTheAdapter(_ compositor: GnomeCompositor) async throws {
        let gnome = try await NestedMutter.start(compositor)
        defer { gnome.stop() }
        // XWayland asks for the cookie of Mutter's authority file: a wrong one is refused.
        let wrong = FileManager.default.temporaryDirectory.appendingPathComponent("baton-xauth-\(UUID().uuidString)")
        try Data(authorityFile([(0xFFFF, [], "", "MIT-MAGIC-COOKIE-1", [UInt8](repeating: 1, count: 16))])).write(to: wrong)
        defer { try? FileManager.default.removeItem(at: wrong) }
        #expect(throws: ClipboardError.unavailable("cannot connect to the X display \(gnome.xDisplay)")) {
            try X11SessionClipboard(display: gnome.xDisplay, authority: wrong.path)
        }
        let clipboard = try X11SessionClipboard(display: gnome.xDisplay, authority: gnome.xAuthority)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        let text = Array("copied in a Wayland app, ünïcode\n".utf8)
        try await gnome.wlCopy(text, arguments: ["-t", "text/plain;charset=utf-8"])
        let change = try #require(await recorder.nextChange(timeout: .seconds(120)))
        #expect(change.types == [ClipboardTypes.text], "\(change)")
        #expect(!change.isSecret)
        #expect(try await clipboard.read(type: ClipboardTypes.text, limit: 1 << 20) == text)

        try await gnome.wlCopy(Self.png, arguments: ["-t", "image/png"])
        let image = try #require(await recorder.nextChange(timeout: .seconds(120)))
        #expect(image.types == ["image/png"], "\(image)")
        #expect(image.revision > change.revision)
        #expect(try await clipboard.read(type: "image/png", limit: 16 << 20) == Self.png)
        await #expect(throws: ClipboardError.overLimit(limit: 100_000)) {
            try await clipboard.read(type: "image/png", limit: 100_000)
        }
        // The adapter still reads after the transfer it gave up.
        #expect(try await clipboard.read(type: "image/png", limit: 16 << 20) == Self.png)
    }

    /// Waits (a guard of 120 s, no more) until `condition` holds.
    func eventually(_ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await condition()
    }

    @Test("what Mutter does to every new owner: it reads the type it prefers at once, before any paste (its clipboard manager)",
          arguments: GnomeCompositor.allCases)
    func mutterReadsEveryNewOwner(_ compositor: GnomeCompositor) async throws {
        let gnome = try await NestedMutter.start(compositor)
        defer { gnome.stop() }
        let clipboard = try X11SessionClipboard(display: gnome.xDisplay, authority: gnome.xAuthority)
        defer { clipboard.close() }
        let provides = ProvideLog()
        try await clipboard.offer(types: ["image/png", ClipboardTypes.text]) { type in
            _ = await provides.called(type)
            return type == ClipboardTypes.text ? Array("read by Mutter before any paste".utf8) : Self.png
        }
        // No app pastes, yet the text is asked for (the type Mutter prefers), and only it.
        #expect(await eventually { await provides.count(ClipboardTypes.text) == 1 })
        #expect(await provides.count("image/png") == 0)
        #expect(await clipboard.statistics.refusedManagerReads == 0)
        // An image alone: the image is read.
        try await clipboard.offer(types: ["image/png"]) { type in
            _ = await provides.called(type)
            return Self.png
        }
        #expect(await eventually { await provides.count("image/png") == 1 })
        #expect(await provides.total == 2)
    }

    @Test("refusing Mutter's read: the offer pastes into Wayland apps, each type produced only at its paste; withdrawn, nothing is left; a Wayland copy takes it",
          arguments: GnomeCompositor.allCases)
    func theAdaptersOfferPastesIntoWaylandApps(_ compositor: GnomeCompositor) async throws {
        let gnome = try await NestedMutter.start(compositor)
        defer { gnome.stop() }
        let clipboard = try X11SessionClipboard(display: gnome.xDisplay, authority: gnome.xAuthority,
                                                configuration: .init(mutterXWayland: true))
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)
        let provides = ProvideLog()
        let text = Array("offered on XWayland, pasted in Wayland\n".utf8)
        try await clipboard.offer(types: [ClipboardTypes.text, "image/png"]) { type in
            _ = await provides.called(type)
            return type == ClipboardTypes.text ? text : Self.png
        }
        #expect(await eventually { await clipboard.statistics.refusedManagerReads == 1 })

        // Listing the types fetches nothing.
        let listed = try await gnome.wlPaste(["--list-types"])
        #expect(listed.status == 0)
        let types = String(decoding: listed.output, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(types.contains("image/png") && types.contains("text/plain;charset=utf-8"), "\(types)")
        #expect(await provides.total == 0)

        let pasted = try await gnome.wlPaste(["-t", "text/plain;charset=utf-8"])
        #expect(pasted.status == 0 && pasted.output == text)
        #expect(await provides.count(ClipboardTypes.text) == 1)
        #expect(await provides.count("image/png") == 0)
        // An X11 app on XWayland pastes from the adapter directly; nothing more is refused.
        let x11 = try await gnome.xclip(["-o", "-selection", "clipboard"])
        #expect(x11.status == 0 && x11.output == text)
        #expect(await provides.count(ClipboardTypes.text) == 2)
        #expect(await clipboard.statistics.refusedManagerReads == 1)
        // 3 MiB: the adapter answers Mutter by INCR.
        let image = try await gnome.wlPaste(["-t", "image/png"])
        #expect(image.status == 0 && image.output == Self.png)
        #expect(await provides.count("image/png") == 1)

        // Withdrawn: Mutter kept nothing, so the clipboard is empty, and no change is reported.
        await clipboard.withdraw()
        let empty = try await gnome.wlPaste(["-t", "text/plain;charset=utf-8"])
        #expect(empty.status != 0 && empty.output.isEmpty)

        // An image alone: Mutter's read of it is refused too, the paste is answered.
        try await clipboard.offer(types: ["image/png"]) { type in
            _ = await provides.called(type)
            return Self.png
        }
        #expect(await eventually { await clipboard.statistics.refusedManagerReads == 2 })
        #expect(await provides.count("image/png") == 1)
        #expect(try await gnome.wlPaste(["-t", "image/png"]).output == Self.png)
        #expect(await provides.count("image/png") == 2)

        // Offered again, then a copy in a Wayland app takes the clipboard: the offer is lost, the copy is a change.
        try await clipboard.offer(types: [ClipboardTypes.text]) { _ in text }
        #expect(await eventually { await clipboard.statistics.refusedManagerReads == 3 })
        let newer = Array("newer".utf8)
        try await gnome.wlCopy(newer, arguments: ["-t", "text/plain;charset=utf-8"])
        var lost = false
        var change: ClipboardChange?
        while !(lost && change != nil), let event = await recorder.next(timeout: .seconds(120)) {
            switch event {
            case .offerLost: lost = true
            case .changed(let copied): change = copied
            case .cleared: break
            }
        }
        #expect(lost)
        #expect(change?.types == [ClipboardTypes.text])
        #expect(try await clipboard.read(type: ClipboardTypes.text, limit: 1 << 20) == newer)
        #expect(await provides.total == 4)
    }

    @Test("a secret copy that Mutter puts back without its marker when its app goes: secret to the adapter on XWayland, an ordinary copy to a plain one",
          arguments: GnomeCompositor.allCases)
    func mutterRestoresASecretWithoutItsMarker(_ compositor: GnomeCompositor) async throws {
        let gnome = try await NestedMutter.start(compositor)
        defer { gnome.stop() }
        let agent = try X11SessionClipboard(display: gnome.xDisplay, authority: gnome.xAuthority, configuration: .init(mutterXWayland: true))
        defer { agent.close() }
        let plain = try X11SessionClipboard(display: gnome.xDisplay, authority: gnome.xAuthority)
        defer { plain.close() }
        let agentEvents = EventRecorder(agent.events), plainEvents = EventRecorder(plain.events)

        // A password manager (a GTK 4 app on Wayland) copies a password, marked secret.
        let app = try gnome.copySecretWithGtk("hunter2")
        for recorder in [agentEvents, plainEvents] {
            let change = try #require(await recorder.nextChange(timeout: .seconds(120)))
            #expect(change.isSecret)
        }
        // It exits: Mutter puts the password back, unmarked.
        kill(app.pid, SIGTERM)
        app.wait()
        let restored = try #require(await plainEvents.nextChange(timeout: .seconds(120)))
        #expect(restored.types == [ClipboardTypes.text] && !restored.isSecret)
        #expect(try await plain.read(type: ClipboardTypes.text, limit: 100) == Array("hunter2".utf8))
        let guarded = try #require(await agentEvents.nextChange(timeout: .seconds(120)))
        #expect(guarded.types == [ClipboardTypes.text] && guarded.isSecret)
        #expect(await agent.statistics.restoredSecrets == 1)

        // The next copy is an ordinary one again.
        try await gnome.wlCopy(Array("ordinary".utf8), arguments: ["-t", "text/plain;charset=utf-8"])
        let next = try #require(await agentEvents.nextChange(timeout: .seconds(120)))
        #expect(!next.isSecret)
        #expect(await agent.statistics.restoredSecrets == 1)
    }
}
