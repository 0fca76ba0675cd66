// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonClient
import BatonCore
import BatonDBus
import BatonPublishers
import BatonServiceFakes
import BatonSway
import BatonTestBus
import BatonX11
import BatonXvfb
import Foundation
import Glibc
import Synchronization
import Testing
@testable import BatonService

/// The universal clipboard from app to app (issue 27): two paired daemons on a test bus (fake radios
/// carry the adverts), two Xvfb displays, baton-agent's real clipboard bridge on each, xclip as the
/// copying and the pasting app.
@Suite("BatonServiceTests: the clipboard from xclip on one display to xclip on another, through two daemons and their agents", .serialized)
struct ClipboardAgentEndToEndTests {
    final class Lines: AgentLog, Sendable {
        let lines = Mutex<[String]>([])
        func log(_ line: String) { lines.withLock { $0.append(line) } }
    }

    /// One machine: its daemon, radio, session (an Xvfb display, or a headless sway), the agent's
    /// bridge and the user's publishers.conf.
    struct Machine {
        let node: TransferNode
        let radio: FakeRadio
        /// The X11 session's display; nil in a Wayland session.
        let xvfb: XvfbServer?
        /// The Wayland session's compositor; nil in an X11 session.
        let sway: HeadlessSway?
        var display: XvfbServer { xvfb! }
        let bridge: ClipboardBridge
        let environment: [String: String]
        let log: Lines
        var clipboard: ClipboardService { node.parts.clipboard }

        static func start(_ bus: TestBus, name: String, wayland: Bool = false) async throws -> Machine {
            let radio = FakeRadio()
            let node = try await TransferNode.start(bus, name: name, radio: radio)
            let xvfb = wayland ? nil : try await XvfbServer.start()
            let sway = wayland ? try await HeadlessSway.start() : nil
            let home = bus.directory.appendingPathComponent("home-\(name)").path
            var environment = ["HOME": home, "XDG_CONFIG_HOME": home + "/config", "XDG_RUNTIME_DIR": home + "/run"]
            if let xvfb { environment["DISPLAY"] = xvfb.display }
            // The compositor's socket by its absolute path: the user's runtime directory is its own.
            if let sway { environment["WAYLAND_DISPLAY"] = sway.runtimeDirectory + "/" + sway.display }
            try FileManager.default.createDirectory(atPath: home + "/run", withIntermediateDirectories: true)
            try PublisherSettings(enabled: [.clipboard]).save(environment: environment)
            let daemon = BatonConnection(connection: try DBusConnection(bus: .address(bus.address)), busName: node.busName)
            let log = Lines()
            let bridge = ClipboardBridge(daemon: daemon, environment: environment, logger: log)
            try await bridge.start()
            return Machine(node: node, radio: radio, xvfb: xvfb, sway: sway, bridge: bridge, environment: environment, log: log)
        }

        func setClipboard(_ on: Bool) throws { try PublisherSettings(enabled: on ? [.clipboard] : []).save(environment: environment) }

        func stop() async {
            await bridge.stop()
            await node.stop()
            xvfb?.stop()
            sway?.stop()
        }
    }

    /// The clipboard end-to-end tests' start: a fresh test bus, alpha (an X11 session) and beta (X11, a
    /// Wayland session, or what `makeBeta` starts), paired through `client`, each agent registered.
    /// `close()` at the test's end, as the defers it replaces did: the client, then the bus.
    struct Paired {
        let bus: TestBus
        let client: DBusConnection
        let alpha: Machine
        let beta: Machine

        static func start(betaWayland: Bool = false, beta makeBeta: ((TestBus) async throws -> Machine)? = nil) async throws -> Paired {
            let bus = try TestBus()
            var client: DBusConnection?
            do {
                let alpha = try await Machine.start(bus, name: "alpha")
                let beta = if let makeBeta { try await makeBeta(bus) } else { try await Machine.start(bus, name: "beta", wayland: betaWayland) }
                let connection = try DBusConnection(bus: .address(bus.address))
                client = connection
                try await pair(alpha.node, beta.node, client: connection)
                for machine in [alpha, beta] {
                    #expect(await eventually(timeout: .seconds(120)) { await machine.bridge.settled(\.registered) }, "\(machine.log.lines.withLock { $0 })")
                }
                return Paired(bus: bus, client: connection, alpha: alpha, beta: beta)
            } catch {
                client?.close()
                bus.stop()
                throw error
            }
        }

        func close() {
            client.close()
            bus.stop()
        }
    }

    /// Carries `from`'s newest advert to `to`'s radio once it differs from `before`; returns it.
    @discardableResult
    func carryAdvert(from: Machine, to: Machine, after before: [UInt8]?) async throws -> [UInt8] {
        #expect(await eventually(timeout: .seconds(120)) { from.radio.lastAdvert != before }, "no new advert")
        let advert = try #require(from.radio.lastAdvert)
        to.radio.hear(advert)
        return advert
    }

    /// Waits until `machine`'s agent offered a copy of `kind` and batond took it: its advert is out
    /// then (the radio's advertise is awaited inside Offer). The daemon's shelf alone says so a
    /// moment before the advert moves.
    func offered(_ machine: Machine, _ kind: ClipboardKind) async -> Bool {
        guard await eventually(timeout: .seconds(120), {
            await machine.bridge.settled { if case .offered(_, kind, _) = $0.ringOffer { true } else { false } }
        }) else { return false }
        return await machine.clipboard.offeredKind == kind
    }

    func paste(_ machine: Machine, type: String? = nil) async throws -> XclipResult {
        try await xclip(["-selection", "clipboard", "-o"] + (type.map { ["-t", $0] } ?? []), display: machine.display.display)
    }

    @Test func textAndAPNGCrossAtThePasteSecretExpiredAndDisabledCopiesDoNot() async throws {
        let paired = try await Paired.start()
        defer { paired.close() }
        let (bus, alpha, beta) = (paired.bus, paired.alpha, paired.beta)

        // Text: copied on alpha, offered (the advert only says so), taken on beta without a byte moving.
        let text = Array("Grüße from alpha's xclip\n".utf8)
        var before = alpha.radio.lastAdvert
        try await xclipCopy(text, display: alpha.display.display)
        #expect(await offered(alpha, .text), "\(alpha.log.lines.withLock { $0 })")
        try await carryAdvert(from: alpha, to: beta, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held?.kind == .text } })
        #expect(await alpha.clipboard.dataRequestsAnswered == 0)
        // What each bridge wrote for `baton clipboard status` (it runs in this process, not as baton-agent: read, not load).
        #expect(ClipboardAgentStatus.read(environment: alpha.environment)?.offer == "text: text/plain;charset=utf-8 \(text.count) bytes")
        #expect(ClipboardAgentStatus.read(environment: beta.environment)?.taken == "text from alpha: text/plain;charset=utf-8 \(text.count) bytes")
        var pasted = try await paste(beta)
        #expect(pasted.status == 0 && Array(pasted.output) == text)
        #expect(await alpha.clipboard.dataRequestsAnswered == 1)

        // A PNG, by its media type only.
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png += (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        before = alpha.radio.lastAdvert
        try await xclipCopy(png, display: alpha.display.display, type: "image/png")
        #expect(await offered(alpha, .image))
        try await carryAdvert(from: alpha, to: beta, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held?.kind == .image } })
        #expect(await alpha.clipboard.dataRequestsAnswered == 1)
        pasted = try await paste(beta, type: "image/png")
        #expect(pasted.status == 0 && Array(pasted.output) == png)
        #expect(await alpha.clipboard.dataRequestsAnswered == 2)
        // Beta's copy from alpha is never offered back to the ring.
        #expect(await beta.clipboard.offeredKind == nil)

        // A copy marked secret (KDE's hint, as KeePassXC sets it): not read, not offered, and the
        // earlier offer is taken back; beta's agent is told and gives its clipboard up.
        let provided = Mutex<[String]>([])
        let manager = try X11SessionClipboard(display: alpha.display.display)
        defer { manager.close() }
        before = alpha.radio.lastAdvert
        try await manager.offer(types: [ClipboardTypes.text, ClipboardSecrecy.kdePasswordManagerHint]) { type in
            provided.withLock { $0.append(type) }
            return type == ClipboardSecrecy.kdePasswordManagerHint ? Array("secret".utf8) : Array("hunter2".utf8)
        }
        #expect(await eventually(timeout: .seconds(120)) { alpha.log.lines.withLock { $0 }.contains { $0.contains("marked secret") } })
        #expect(await eventually(timeout: .seconds(120)) { await alpha.bridge.settled { $0.ringOffer == .none } })
        #expect(await alpha.clipboard.offeredKind == nil)
        try await carryAdvert(from: alpha, to: beta, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held == nil } })
        // Only the hint was read (to see that it says secret), never the text.
        #expect(!provided.withLock { $0 }.contains(ClipboardTypes.text))
        // Beta's agent gave its clipboard up: nothing to paste there (the PNG's type included).
        pasted = try await paste(beta, type: "image/png")
        #expect(pasted.status != 0 || pasted.output.isEmpty)

        // An offer that expired (an app shortened it to 1 s) is not handed over when asked later.
        let handedBefore = await beta.bridge.copiesHandedOver
        before = alpha.radio.lastAdvert
        try await xclipCopy(Array("gone soon".utf8), display: alpha.display.display)
        let app = BatonConnection(connection: try DBusConnection(bus: .address(bus.address)), busName: alpha.node.busName)
        defer { app.close() }
        #expect(await offered(alpha, .text))
        #expect(await eventually(timeout: .seconds(120)) { alpha.radio.lastAdvert != before })
        let expiring = try #require(alpha.radio.lastAdvert)
        // Within Restrict's 2 s of the copy.
        try await app.restrictClipboard(localOnly: false, expiresIn: 1)
        let restrictedAt = ContinuousClock.now
        #expect(await eventually(timeout: .seconds(120)) { await alpha.clipboard.offeredKind == nil })
        let asked = await alpha.clipboard.offerRequestsAnswered
        beta.radio.hear(expiring)
        #expect(await eventually(timeout: .seconds(120)) { await alpha.clipboard.offerRequestsAnswered > asked })

        // Turned off on alpha: the agent unregisters, a copy there is offered nowhere.
        try alpha.setClipboard(false)
        #expect(await eventually(timeout: .seconds(120)) { await alpha.bridge.settled { !$0.enabled } })
        #expect(await alpha.clipboard.agent(of: getuid()) == nil)
        try await xclipCopy(Array("made while off".utf8), display: alpha.display.display)
        #expect(try await paste(alpha).output == Data("made while off".utf8))
        #expect(await alpha.clipboard.offeredKind == nil)

        // On again: the copy made while off stays unoffered; the next one crosses, and it is the
        // first copy beta's agent was handed since the expired one (which never reached it).
        try alpha.setClipboard(true)
        #expect(await eventually(timeout: .seconds(120)) { await alpha.bridge.settled(\.registered) })
        #expect(await alpha.clipboard.offeredKind == nil)
        // Restrict marks the account's next copy within its 2 s as well (docs/dbus-api.md): the
        // next copy is made once that window is over.
        try await Task.sleep(until: restrictedAt + .seconds(ClipboardService.restrictWindow + 1), clock: .continuous)
        before = alpha.radio.lastAdvert
        try await xclipCopy(Array("on again".utf8), display: alpha.display.display)
        #expect(await offered(alpha, .text))
        try await carryAdvert(from: alpha, to: beta, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held?.kind == .text } })
        #expect(await beta.bridge.copiesHandedOver == handedBefore + 1)
        pasted = try await paste(beta)
        #expect(pasted.status == 0 && pasted.output == Data("on again".utf8))

        // Alpha's display goes away: its agent stops sharing, and says why.
        alpha.display.stop()
        #expect(await eventually(timeout: .seconds(120)) { await alpha.bridge.settled { !$0.enabled } })
        #expect(await alpha.clipboard.agent(of: getuid()) == nil)
        #expect(ClipboardAgentStatus.read(environment: alpha.environment)?.problem?.contains("was lost") == true)

        await alpha.stop()
        await beta.stop()
    }
    /// An X11 session on alpha, a Wayland one (headless sway, wlr-data-control) on beta: the agent
    /// chooses each session's adapter, and a copy crosses both ways only at the paste.
    @Test func aCopyCrossesBetweenAnX11AndAWaylandSessionAtThePaste() async throws {
        let paired = try await Paired.start(betaWayland: true)
        defer { paired.close() }
        let (alpha, beta) = (paired.alpha, paired.beta)
        let sway = try #require(beta.sway)
        #expect(ClipboardAgentStatus.read(environment: beta.environment)?.sessionClipboard.hasSuffix("(zwlr_data_control_manager_v1)") == true)

        // xclip on alpha's X display, wl-paste in beta's Wayland session.
        let text = Array("from X11 to Wayland, ünïcode\n".utf8)
        var before = alpha.radio.lastAdvert
        try await xclipCopy(text, display: alpha.display.display)
        #expect(await offered(alpha, .text), "\(alpha.log.lines.withLock { $0 })")
        try await carryAdvert(from: alpha, to: beta, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held?.kind == .text } }, "\(beta.log.lines.withLock { $0 })")
        #expect(await alpha.clipboard.dataRequestsAnswered == 0)
        var pasted = try await sway.wlPaste(["-t", "text/plain;charset=utf-8"])
        #expect(pasted.status == 0 && pasted.output == text)
        #expect(await alpha.clipboard.dataRequestsAnswered == 1)
        #expect(await beta.clipboard.offeredKind == nil)

        // wl-copy in beta's session, xclip -o on alpha.
        let back = Array("and back from Wayland".utf8)
        before = beta.radio.lastAdvert
        try await sway.wlCopy(back, arguments: ["-t", "text/plain;charset=utf-8"])
        #expect(await offered(beta, .text), "\(beta.log.lines.withLock { $0 })")
        try await carryAdvert(from: beta, to: alpha, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await alpha.bridge.settled { $0.held?.kind == .text } })
        #expect(await beta.clipboard.dataRequestsAnswered == 0)
        let result = try await paste(alpha)
        #expect(result.status == 0 && Array(result.output) == back)
        #expect(await beta.clipboard.dataRequestsAnswered == 1)

        await alpha.stop()
        await beta.stop()
    }
}
