// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonService
import BatonServiceFakes
import BatonSystem
import BatonTestBus
import Foundation
import Glibc
import Synchronization
import Testing

/// Run as `nobody` against two daemons on one bus, while root's agents hold a copy (root copied on
/// alpha, beta's agent was handed it as TOKEN). Prints `step=result` (the D-Bus error name, or ok),
/// then `ready`, listens to every signal it may receive until a line on standard input, prints
/// them as `signals=` JSON, offers a copy of its own, prints `end` and stays connected until a line. argv: bus address, alpha's and beta's bus names, TOKEN, the unique name
/// of root's agent connection on beta.
let foreignClipboardScript = #"""
import fcntl, json, os, sys, time
import dbus, dbus.mainloop.glib
from gi.repository import GLib

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
address, alpha, beta, token, root_agent = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
bus = dbus.bus.BusConnection(address)
TEXT = "text/plain;charset=utf-8"
signals = []
def heard(*args, **keywords):
    signals.append({"sender": str(keywords.get("sender")), "interface": str(keywords.get("interface")),
                    "member": str(keywords.get("member")), "args": repr(args)})
bus.add_signal_receiver(heard, sender_keyword="sender", interface_keyword="interface", member_keyword="member")

def step(name, call):
    try:
        call()
        print("%s=ok" % name, flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (name, error.get_dbus_name()), flush=True)

def clipboard(name, method, signature="", args=()):
    return bus.call_blocking(name, "/org/baton/clipboard", "org.baton.Clipboard1", method, signature, list(args))

def memfd(data, seals):
    fd = os.memfd_create("nobody", os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd

def offer(fd, size=5):
    return clipboard(alpha, "Offer", "sa(st)uh", ["text", [(TEXT, dbus.UInt64(size))], dbus.UInt32(0), dbus.types.UnixFd(fd)])

SEALED = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
step("paste-root-token", lambda: clipboard(beta, "Paste", "ts", [dbus.UInt64(token), TEXT]))
results = set()
for guess in [token + 1, token - 1, token ^ 1, 0, 1, 2**64 - 1]:
    try:
        clipboard(beta, "Paste", "ts", [dbus.UInt64(guess % 2**64), TEXT])
        results.add("ok")
    except dbus.exceptions.DBusException as error:
        results.add(error.get_dbus_name())
print("paste-guess=%s" % ",".join(sorted(results)), flush=True)
step("offer-without-agent", lambda: offer(memfd(b"nobod", SEALED)))
step("withdraw", lambda: clipboard(alpha, "Withdraw"))
step("restrict", lambda: clipboard(alpha, "Restrict", "bu", [True, dbus.UInt32(1)]))
step("unregister", lambda: clipboard(alpha, "UnregisterAgent"))
step("agent-offered", lambda: bus.call_blocking(root_agent, "/org/baton/client/clipboard_agent", "org.baton.ClipboardAgent1", "Offered",
                                                "tssa(st)", [dbus.UInt64(token + 7), "rogue", "text", [(TEXT, dbus.UInt64(5))]]))
step("agent-withdrawn", lambda: bus.call_blocking(root_agent, "/org/baton/client/clipboard_agent", "org.baton.ClipboardAgent1", "Withdrawn",
                                                  "t", [dbus.UInt64(token)]))
step("register-root-path", lambda: clipboard(beta, "RegisterAgent", "o", [dbus.ObjectPath("/org/baton/client/clipboard_agent")]))
step("register-alpha", lambda: clipboard(alpha, "RegisterAgent", "o", [dbus.ObjectPath("/nobody/agent")]))
# Contents that could still change, or are no memory file at all.
reader, writer = os.pipe()
os.write(writer, b"nobod")
step("offer-pipe", lambda: offer(reader))
step("offer-unsealed", lambda: offer(memfd(b"nobod", 0)))
step("offer-future-write", lambda: offer(memfd(b"nobod", 0x0010 | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)))
step("offer-write-only-sealed", lambda: offer(memfd(b"nobod", fcntl.F_SEAL_WRITE)))
step("offer-dev-zero", lambda: offer(os.open("/dev/zero", os.O_RDONLY)))
step("offer-longer", lambda: offer(memfd(b"nobody", SEALED)))
print("ready", flush=True)

loop = GLib.MainLoop()
def stdin_ready(source, condition):
    sys.stdin.readline()
    loop.quit()
    return False
GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, stdin_ready)
GLib.timeout_add(300000, loop.quit)
loop.run()
print("signals=%s" % json.dumps(signals), flush=True)
# Past the 2 s window of nobody's own Restrict(local_only) above, which would keep this copy here.
time.sleep(3)
step("offer-own", lambda: offer(memfd(b"nobod", SEALED)))
# Connected until told (an agent's connection leaving takes its copy back).
print("end", flush=True)
sys.stdin.readline()
"""#

/// Red team, the clipboard and another local Unix user (docs/dbus-api.md "Clipboard": "no account can
/// offer, restrict, paste or see another's copy"; docs/security.md, multi-user machines), on
/// dbus-daemon and dbus-broker.
@Suite("BatonServiceTests: red team, the clipboard and other local users", .serialized)
struct ClipboardAttackLocalUserTests {
    static let text = "text/plain;charset=utf-8"

    final class Held: Sendable {
        let offers = Mutex<[ClipboardOfferedCopy]>([])
        let withdrawn = Mutex<[UInt64]>([])
        var handlers: ClipboardAgentHandlers {
            ClipboardAgentHandlers(offered: { copy in self.offers.withLock { $0.append(copy) } },
                                   withdrawn: { token in self.withdrawn.withLock { $0.append(token) } })
        }
    }

    /// Attack, as `nobody`, while root's copy from alpha is held by root's agent on beta: paste root's
    /// token, guess tokens, offer without an agent, Withdraw, Restrict and UnregisterAgent (each acts
    /// for the caller only), call root's agent's ClipboardAgent1 directly (a fake copy, a fake
    /// withdrawal), register at root's agent's path, offer a pipe, an unsealed memfd, one sealed only
    /// against future writes, one sealed only against writes, /dev/zero and contents longer than the
    /// items; meanwhile listen to every signal it can receive while root copies and pastes again.
    /// Held: UnknownObject for every paste, NotPermitted without an agent and from root's agent,
    /// InvalidArguments for every descriptor that could change or does not match; root's copy stays
    /// offered and held, pastes, and is handed to root only; no signal carries anything of the
    /// clipboard. What nobody can do, as documented (one copy per machine): its own copy replaces
    /// root's as the machine's offer.
    @Test(arguments: TestBus.Daemon.installed)
    func nobodyCannotTouchRootsClipboard(daemon: TestBus.Daemon) async throws {
        try #require(getuid() == 0, "runs as root (CI does) so that nobody is another user")
        let bus = try TestBus(daemon: daemon)
        defer { bus.stop() }
        let radioA = FakeRadio(), radioB = FakeRadio()
        let a = try await TransferNode.start(bus, name: "alpha", radio: radioA), b = try await TransferNode.start(bus, name: "beta", radio: radioB)
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        try await pair(a, b, client: client)
        let rootA = BatonConnection(connection: try DBusConnection(bus: .address(bus.address)), busName: a.busName)
        let rootB = BatonConnection(connection: try DBusConnection(bus: .address(bus.address)), busName: b.busName)
        defer { rootA.close(); rootB.close() }
        let heldA = Held(), heldB = Held()
        try await rootA.registerClipboardAgent(heldA.handlers)
        try await rootB.registerClipboardAgent(heldB.handlers)

        func copy(_ text: String) async throws -> ClipboardOfferedCopy {
            let bytes = Array(text.utf8)
            let file = try SealedMemoryFile.make(name: "copy", bytes: bytes)
            let before = radioA.lastAdvert, handed = heldB.offers.withLock { $0.count }
            try await rootA.offerClipboard(kind: .text, items: [ClipboardItem(mediaType: Self.text, size: UInt64(bytes.count))], contents: file.rawValue)
            #expect(await eventually(timeout: .seconds(120)) { radioA.lastAdvert != before })
            radioB.hear(try #require(radioA.lastAdvert))
            #expect(await eventually(timeout: .seconds(120)) { heldB.offers.withLock { $0.count } > handed })
            return try #require(heldB.offers.withLock { $0.last })
        }
        let secret = "root's copied secret"
        let held = try await copy(secret)

        let script = bus.directory.appendingPathComponent("clipboard-\(UUID().uuidString).py")
        try foreignClipboardScript.write(to: script, atomically: true, encoding: .utf8)
        chmod(script.path, 0o644)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", script.path,
                             bus.address, a.busName, b.busName, "\(held.token)", rootB.dbus.uniqueName]
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"]
        let input = ChildPipe(), output = ChildPipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try launch(process)
        defer {
            try? input.fileHandleForWriting.close()
            if process.isRunning { process.terminate() }
        }
        let lines = LineReader(output.fileHandleForReading)
        var seen: [String: String] = [:]
        while let line = await lines.next(), line != "ready" {
            guard let equals = line.firstIndex(of: "=") else { continue }
            seen[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        #expect(seen["paste-root-token"] == "org.baton.Error.UnknownObject", "\(seen)")
        #expect(seen["paste-guess"] == "org.baton.Error.UnknownObject", "\(seen)")
        #expect(seen["offer-without-agent"] == "org.baton.Error.NotPermitted")
        for step in ["withdraw", "restrict", "unregister", "register-root-path", "register-alpha"] {
            #expect(seen[step] == "ok", "\(step): \(seen[step] ?? "missing")")
        }
        for step in ["agent-offered", "agent-withdrawn"] {
            #expect(seen[step] == "org.baton.Error.NotPermitted", "\(step): \(seen[step] ?? "missing")")
        }
        for step in ["offer-pipe", "offer-unsealed", "offer-future-write", "offer-write-only-sealed", "offer-dev-zero", "offer-longer"] {
            #expect(seen[step] == "org.baton.Error.InvalidArguments", "\(step): \(seen[step] ?? "missing")")
        }

        // Root's copy is untouched: still alpha's offer, root's agent still holds it and pastes it.
        #expect(await a.parts.clipboard.offeredKind == .text)
        guard case .success(let current) = await a.parts.clipboard.answerOffer(member: "beta") else { Issue.record("root's copy is no longer offered"); return }
        #expect(current.account == "root")
        #expect(heldB.withdrawn.withLock { $0 }.isEmpty && heldB.offers.withLock { $0.count } == 1, "nobody's calls reached root's agent")
        #expect(try await rootB.pasteBytes(token: held.token, mediaType: Self.text, limit: 1024) == Array(secret.utf8))
        // A new copy, while nobody listens: handed to root's agent only, nobody's registration at beta gets nothing.
        let again = try await copy("root's second secret")
        #expect(try await rootB.pasteBytes(token: again.token, mediaType: Self.text, limit: 1024) == Array("root's second secret".utf8))
        #expect(await b.parts.clipboard.takenTokens(of: 65_534).isEmpty)
        #expect(await b.parts.clipboard.agent(of: 0)?.busName == rootB.dbus.uniqueName, "nobody's registration displaced root's agent")

        try input.fileHandleForWriting.write(contentsOf: Data("done\n".utf8))
        while let line = await lines.next(), line != "end" {
            guard let equals = line.firstIndex(of: "=") else { continue }
            seen[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        let signals = try #require(seen["signals"], "the listener printed nothing")
        #expect(signals.contains("NameAcquired"), "the listener heard nothing at all: \(signals)")
        for word in ["secret", "clipboard", Self.text, "\(held.token)", "\(again.token)"] {
            #expect(!signals.lowercased().contains(word.lowercased()), "a signal nobody received carries \(word): \(signals.prefix(2000))")
        }
        // Documented, not a leak: one copy per machine, so nobody's own copy is now alpha's offer.
        #expect(seen["offer-own"] == "ok")
        guard case .success(let replaced) = await a.parts.clipboard.answerOffer(member: "beta") else { Issue.record("nobody's copy was not offered"); return }
        #expect(replaced.account == "nobody")
        try input.fileHandleForWriting.write(contentsOf: Data("done\n".utf8))
        await a.stop()
        await b.stop()
    }
}

/// Lines of a child's output, read off the cooperative pool.
final class LineReader: @unchecked Sendable {
    private let handle: FileHandle
    private var buffer = Data()
    init(_ handle: FileHandle) { self.handle = handle }

    func next() async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                while !self.buffer.contains(UInt8(ascii: "\n")) {
                    let chunk = self.handle.availableData
                    if chunk.isEmpty { break }
                    self.buffer.append(chunk)
                }
                guard let end = self.buffer.firstIndex(of: UInt8(ascii: "\n")) else {
                    continuation.resume(returning: nil)
                    return
                }
                let line = String(decoding: self.buffer[..<end], as: UTF8.self)
                self.buffer.removeSubrange(...end)
                continuation.resume(returning: line)
            }
        }
    }
}
