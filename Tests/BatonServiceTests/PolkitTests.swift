// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// The real polkitd (Debian's package polkitd) on a private system-style bus, with this tree's
/// dbus/org.baton.policy and a rule of the test's own. polkitd reads actions and rules only from
/// /usr/share/polkit-1/actions, /etc/polkit-1/rules.d and /usr/share/polkit-1/rules.d: it runs in
/// a mount namespace of its own (unshare -m) where a private directory is mounted over each, so
/// nothing on this machine is changed and the machine's own rules (50-default.rules: group sudo is
/// the administrator) take no part. polkitd, started as root, switches to the user polkitd by
/// itself, as under systemd.
final class PolkitDaemon: @unchecked Sendable {
    static let executable = "/usr/lib/polkit-1/polkitd"
    let process = Process()

    /// `rules`: JavaScript rule files by name (none: polkit's defaults of the .policy file decide).
    init(bus: TestBus, directory: URL, rules: [String: String]) async throws {
        let actions = directory.appendingPathComponent("actions"), etcRules = directory.appendingPathComponent("etc-rules")
        let usrRules = directory.appendingPathComponent("usr-rules")
        for folder in [actions, etcRules, usrRules] {
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            chmod(folder.path, 0o755)
        }
        let policy = InterfaceFiles.packageRoot.appendingPathComponent("dbus/org.baton.policy")
        try FileManager.default.copyItem(at: policy, to: actions.appendingPathComponent("org.baton.policy"))
        for (name, text) in rules {
            try text.write(to: etcRules.appendingPathComponent(name), atomically: true, encoding: .utf8)
            chmod(etcRules.appendingPathComponent(name).path, 0o644)
        }
        let script = "mount --bind \(actions.path) /usr/share/polkit-1/actions"
            + " && mount --bind \(etcRules.path) /etc/polkit-1/rules.d"
            + " && mount --bind \(usrRules.path) /usr/share/polkit-1/rules.d"
            + " && exec \(Self.executable) --no-debug"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = ["--mount", "--propagation", "private", "/bin/sh", "-c", script]
        process.environment = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try launch(process)
        let probe = try DBusConnection(bus: .address(bus.address))
        defer { probe.close() }
        // Owned by this polkitd (unshare and sh exec it: same pid), not one of an earlier phase that
        // was killed and whose connection the bus has not dropped yet.
        let pid = UInt32(process.processIdentifier)
        let started = try await eventually(timeout: .seconds(60)) {
            guard self.process.isRunning else { return true }
            return (try? await probe.connectionUnixProcessID("org.freedesktop.PolicyKit1")) == pid
        }
        guard started, process.isRunning else {
            stop()
            throw PolkitTestError.polkitdDidNotStart
        }
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Stops it and waits until the bus has dropped its name (the next phase starts from there).
    func stop(on bus: TestBus) async throws {
        stop()
        let probe = try DBusConnection(bus: .address(bus.address))
        defer { probe.close() }
        #expect(try await eventually(timeout: .seconds(60)) { try await !probe.nameHasOwner("org.freedesktop.PolicyKit1") })
    }

    deinit { stop() }
}

enum PolkitTestError: Error { case polkitdDidNotStart }

/// One call as another account: prints "name|message" (name "ok" when it succeeded).
let polkitClientScript = #"""
import sys
import dbus

address, interface, method, signature = sys.argv[1:5]
args = sys.argv[5:]
if signature.endswith("a{sv}"):
    args.append(dbus.Dictionary({}, signature="sv"))  # empty options
bus = dbus.bus.BusConnection(address)
try:
    bus.call_blocking("org.baton", "/org/baton/ring", interface, method, signature, args, timeout=60)
    print("ok|", flush=True)
except dbus.exceptions.DBusException as error:
    print("%s|%s" % (error.get_dbus_name(), error.get_dbus_message()), flush=True)
"""#

@Suite("BatonServiceTests: polkit decides for callers outside group baton", .serialized)
struct PolkitTests {
    enum Account {
        case nobody, groupBaton

        var setpriv: [String] {
            switch self {
            case .nobody: ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
            case .groupBaton: ["/usr/bin/setpriv", "--reuid=baton-test", "--regid=baton-test", "--init-groups"]
            }
        }
    }

    struct Answer: CustomStringConvertible {
        var name: String
        var message: String
        var description: String { "\(name): \(message)" }
    }

    func call(_ account: Account, _ bus: TestBus, _ interface: String, _ method: String, _ signature: String,
              _ arguments: [String]) async throws -> Answer {
        let scriptURL = bus.directory.appendingPathComponent("polkit-client.py")
        try polkitClientScript.write(to: scriptURL, atomically: true, encoding: .utf8)
        chmod(scriptURL.path, 0o644)
        let command = account.setpriv + ["/usr/bin/python3", scriptURL.path, bus.address, interface, method, signature] + arguments
        let (status, output, errors) = try await runTool(command[0], Array(command.dropFirst()),
                                                         environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
        #expect(status == 0, "\(account) client failed: \(errors)")
        let line = output.split(separator: "\n").last.map(String.init) ?? ""
        let parts = line.split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        return Answer(name: parts.first ?? "", message: parts.count > 1 ? parts[1] : "")
    }

    func continueMember(_ account: Account, _ bus: TestBus) async throws -> Answer {
        try await call(account, bus, "org.baton.Ring1", "Continue", "ss", ["no-such-member", "org.example.Polkit.check"])
    }

    func removeMember(_ account: Account, _ bus: TestBus) async throws -> Answer {
        try await call(account, bus, "org.baton.Pairing1", "Remove", "s", ["no-such-member"])
    }

    /// Starting a pairing as either side (bt-pair accept, bt-pair with): org.baton.pair, as Remove.
    func startPairing(_ account: Account, _ bus: TestBus) async throws -> [Answer] {
        [try await call(account, bus, "org.baton.Pairing1", "Accept", "a{sv}", []),
         try await call(account, bus, "org.baton.Pairing1", "Pair", "sa{sv}", ["127.0.0.1:9"])]
    }

    /// `baton doctor`'s permissions line (Result, Detail) as nobody.
    func doctorAsNobody(_ bus: TestBus, empty: TestBus) async throws -> (result: String, detail: String) {
        let baton = try batondExecutable().deletingLastPathComponent().appendingPathComponent("baton").path
        let command = Account.nobody.setpriv + [baton, "--bus", bus.address, "--json", "doctor", "--bluez-bus", empty.address,
                                                "--session-bus", empty.address]
        let (_, output, errors) = try await runTool(command[0], Array(command.dropFirst()),
                                                    environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
        let items = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]], "\(output) \(errors)")
        let line = try #require(items.first { $0["Check"] as? String == "permissions" }, "\(output)")
        return (line["Result"] as? String ?? "", line["Detail"] as? String ?? "")
    }

    static let notPermitted = "org.baton.Error.NotPermitted"
    /// Past the permission check: the member does not exist.
    static let served = "org.baton.Error.UnknownDevice"

    /// A policy file for the test bus: the shipped org.baton.conf and polkit's own (user polkitd owns
    /// org.freedesktop.PolicyKit1, everyone may call it), as on a Debian system bus.
    static func busPolicy(in directory: URL) throws -> String {
        let file = directory.appendingPathComponent("system-policy.conf")
        let baton = InterfaceFiles.packageRoot.appendingPathComponent("dbus/org.baton.conf").path
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <include>\(baton)</include>
              <include>/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf</include>
            </busconfig>
            """.write(to: file, atomically: true, encoding: .utf8)
        chmod(file.path, 0o644)
        return file.path
    }

    @Test func realPolkitdDecidesForOrdinaryUsersAndGroupBatonNeedsNoPolkit() async throws {
        try #require(getuid() == 0, "runs as root (CI does): starts polkitd and programs as other users")
        try #require(getgrnam("baton") != nil && getpwnam("baton-test") != nil,
                     "accounts missing: run scripts/test-accounts (scripts/test does)")
        try #require(FileManager.default.isExecutableFile(atPath: PolkitDaemon.executable),
                     "polkitd missing: scripts/install-deps installs the package polkitd")
        let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-polkit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bus = try TestBus(.system(policyFile: try Self.busPolicy(in: directory)))
        defer { bus.stop() }
        let daemon = try await RunningBatond.start(on: bus, ["--listen", "127.0.0.1"])
        defer { daemon.stop() }
        let empty = try TestBus()
        defer { empty.stop() }

        // polkit's defaults alone: org.baton.continue is for the active session, which an account
        // without a logind session (here, and over ssh) is not; org.baton.pair needs an
        // administrator's password and no authentication agent runs to ask for it.
        do {
            let polkitd = try await PolkitDaemon(bus: bus, directory: directory, rules: [:])
            defer { polkitd.stop() }
            let refused = try await continueMember(.nobody, bus)
            #expect(refused.name == Self.notPermitted, "\(refused)")
            #expect(refused.message.contains("active local desktop session") && refused.message.contains("sudo adduser $USER baton"),
                    "\(refused)")
            let pairing = try await removeMember(.nobody, bus)
            #expect(pairing.name == Self.notPermitted, "\(pairing)")
            // With AllowUserInteraction and no authentication agent polkit answers "challenge".
            #expect(pairing.message.contains("administrator's password") && pairing.message.contains("no polkit agent")
                    && pairing.message.contains("sudo adduser $USER baton"), "\(pairing)")
            // Neither side of a pairing starts for an ordinary account without an administrator
            // (an attacker's local account cannot open the acceptor's window nor dial out).
            for started in try await startPairing(.nobody, bus) {
                #expect(started.name == Self.notPermitted && started.message.contains("administrator's password"), "\(started)")
            }
            // Group baton is allowed without polkit, as before.
            let member = try await continueMember(.groupBaton, bus)
            #expect(member.name == Self.served, "\(member)")
            let doctor = try await doctorAsNobody(bus, empty: empty)
            #expect(doctor.result == "failed" && doctor.detail.contains("needs group `baton` or the active session"), "\(doctor)")
            try await polkitd.stop(on: bus)
        }

        // A local rule grants org.baton.continue to the account: polkit allows it, and only that.
        do {
            let rule = """
                polkit.addRule(function(action, subject) {
                    if (action.id == "org.baton.continue" && subject.user == "nobody") { return polkit.Result.YES; }
                });
                """
            let polkitd = try await PolkitDaemon(bus: bus, directory: directory, rules: ["49-baton-test.rules": rule])
            defer { polkitd.stop() }
            let allowed = try await continueMember(.nobody, bus)
            #expect(allowed.name == Self.served, "\(allowed)")
            let pairing = try await removeMember(.nobody, bus)
            #expect(pairing.name == Self.notPermitted, "\(pairing)")
            // The active session's right to continue is no right to pair.
            #expect(try await startPairing(.nobody, bus).allSatisfy { $0.name == Self.notPermitted })
            let doctor = try await doctorAsNobody(bus, empty: empty)
            #expect(doctor.result == "ok" && doctor.detail.contains("allowed through polkit"), "\(doctor)")
            try await polkitd.stop(on: bus)
        }

        // polkitd not running: group baton only, and the refusal says so.
        let absent = try await continueMember(.nobody, bus)
        #expect(absent.name == Self.notPermitted, "\(absent)")
        #expect(absent.message.contains("polkit is not running") && absent.message.contains("sudo adduser $USER baton"), "\(absent)")
        let doctor = try await doctorAsNobody(bus, empty: empty)
        #expect(doctor.result == "failed" && doctor.detail.contains("polkit is not running"), "\(doctor)")
        #expect(try await continueMember(.groupBaton, bus).name == Self.served)
        #expect(try await removeMember(.groupBaton, bus).name == Self.served)
        // The daemon survived every refusal.
        #expect(try await daemon.client.nameHasOwner("org.baton"))
    }
}
