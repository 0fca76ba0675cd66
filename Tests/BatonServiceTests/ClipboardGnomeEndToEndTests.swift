// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonClient
import BatonDBus
import BatonMutter
import BatonPublishers
import BatonServiceFakes
import BatonTestBus
import BatonXvfb
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// The universal clipboard into and out of GNOME's Wayland session (docs/clipboard.md, "GNOME"):
/// alpha in an X11 session (Xvfb), beta in GNOME (Mutter or GNOME Shell, nested, with XWayland), two
/// paired daemons, baton-agent's real bridge on each; xclip on alpha, wl-copy and wl-paste on beta.
@Suite("BatonServiceTests: the clipboard between an X11 session and GNOME's Wayland session, through two daemons and their agents", .serialized)
struct ClipboardGnomeEndToEndTests {
    typealias Machine = ClipboardAgentEndToEndTests.Machine
    typealias Paired = ClipboardAgentEndToEndTests.Paired
    let helpers = ClipboardAgentEndToEndTests()

    /// Beta: its daemon, and its agent in the GNOME session's environment (WAYLAND_DISPLAY, DISPLAY,
    /// XAUTHORITY as gnome-session exports them).
    func gnomeMachine(_ bus: TestBus, gnome: NestedMutter) async throws -> Machine {
        let radio = FakeRadio()
        let node = try await TransferNode.start(bus, name: "beta", radio: radio)
        let home = bus.directory.appendingPathComponent("home-beta").path
        var environment = gnome.environment
        environment["HOME"] = home
        environment["XDG_CONFIG_HOME"] = home + "/config"
        // The user's runtime directory is its own; the compositor's socket is named by its absolute path.
        environment["XDG_RUNTIME_DIR"] = home + "/run"
        try FileManager.default.createDirectory(atPath: home + "/run", withIntermediateDirectories: true)
        try PublisherSettings(enabled: [.clipboard]).save(environment: environment)
        let daemon = BatonConnection(connection: try DBusConnection(bus: .address(bus.address)), busName: node.busName)
        let log = ClipboardAgentEndToEndTests.Lines()
        let bridge = ClipboardBridge(daemon: daemon, environment: environment, logger: log)
        try await bridge.start()
        return Machine(node: node, radio: radio, xvfb: nil, sway: nil, bridge: bridge, environment: environment, log: log)
    }

    @Test("the agent uses XWayland in GNOME; xclip's copy pastes with wl-paste there and wl-copy's with xclip -o, each pulled only at the paste",
          arguments: GnomeCompositor.allCases)
    func aCopyCrossesIntoAndOutOfGnome(_ compositor: GnomeCompositor) async throws {
        let gnome = try await NestedMutter.start(compositor)
        defer { gnome.stop() }
        let paired = try await Paired.start(beta: { try await gnomeMachine($0, gnome: gnome) })
        defer { paired.close() }
        let (alpha, beta) = (paired.alpha, paired.beta)
        #expect(ClipboardAgentStatus.read(environment: beta.environment)?.sessionClipboard
                == "X11 display \(gnome.xDisplay) (XWayland in GNOME's Wayland session)")

        // xclip on alpha, taken on beta without a byte moving, pasted by a Wayland app there.
        let text = Array("from X11 into GNOME, ünïcode\n".utf8)
        var before = alpha.radio.lastAdvert
        try await xclipCopy(text, display: alpha.display.display)
        #expect(await helpers.offered(alpha, .text), "\(alpha.log.lines.withLock { $0 })")
        try await helpers.carryAdvert(from: alpha, to: beta, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held?.kind == .text } }, "\(beta.log.lines.withLock { $0 })")
        // GNOME's clipboard manager asks beta's agent for the text as soon as it takes the clipboard,
        // before any paste can: refused, so only the paste pulls the bytes, once.
        #expect(await alpha.clipboard.dataRequestsAnswered == 0)
        let listed = try await gnome.wlPaste(["--list-types"])
        #expect(String(decoding: listed.output, as: UTF8.self).contains("text/plain;charset=utf-8"))
        #expect(await alpha.clipboard.dataRequestsAnswered == 0)
        let pasted = try await gnome.wlPaste(["-t", "text/plain;charset=utf-8"])
        #expect(pasted.status == 0 && pasted.output == text)
        #expect(await alpha.clipboard.dataRequestsAnswered == 1)
        #expect(await beta.clipboard.offeredKind == nil)

        // wl-copy in GNOME, seen by beta's agent through XWayland, pasted on alpha.
        let back = Array("and back out of GNOME".utf8)
        before = beta.radio.lastAdvert
        try await gnome.wlCopy(back, arguments: ["-t", "text/plain;charset=utf-8"])
        #expect(await helpers.offered(beta, .text), "\(beta.log.lines.withLock { $0 })")
        try await helpers.carryAdvert(from: beta, to: alpha, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await alpha.bridge.settled { $0.held?.kind == .text } })
        #expect(await beta.clipboard.dataRequestsAnswered == 0)
        let result = try await helpers.paste(alpha)
        #expect(result.status == 0 && Array(result.output) == back)
        #expect(await beta.clipboard.dataRequestsAnswered == 1)

        await alpha.stop()
        await beta.stop()
    }
}
