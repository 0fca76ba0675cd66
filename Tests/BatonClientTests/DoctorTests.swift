// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
@testable import BatonClient
@testable import BatonCommandLine
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// A stand-in for bluetoothd on a test bus: owns org.bluez and serves one adapter through
/// ObjectManager, powered or not. Not BlueZ: only what `baton doctor` reads.
final class FakeBlueZAdapter: Sendable {
    let connection: DBusConnection
    let powered: Mutex<Bool>

    init(bus: TestBus, powered: Bool) async throws {
        self.powered = Mutex(powered)
        connection = try DBusConnection(bus: .address(bus.address))
        try connection.addObjectManager(at: "/")
        try await connection.export([DBusInterface("org.bluez.Adapter1", properties: [
            DBusProperty("Address", signature: "s") { .string("00:11:22:33:44:55") },
            DBusProperty("Powered", signature: "b") { [self] in .boolean(self.powered.withLock { $0 }) },
        ])], at: "/org/bluez/hci0")
        _ = try await connection.requestName("org.bluez")
    }

    func close() { connection.close() }
}

/// Runs `baton --json doctor` against the given buses; returns the exit status, the findings as
/// (check, result, detail, fix) in printed order, and the raw JSON.
func runDoctor(daemonBus: String, busName: String, bluezBus: String, sessionBus: String) async throws
    -> (status: Int32, findings: [(check: String, result: String, detail: String, fix: String?)], json: JSONValue) {
    let result = try await runTool(try Built.executable("baton"), ["--bus", daemonBus, "--bus-name", busName, "--json", "doctor",
                                                                  "--bluez-bus", bluezBus, "--session-bus", sessionBus])
    let json = try JSONValue.parse(result.stdout)
    guard case .array(let items) = json else { throw FixtureError.timedOut("doctor printed no array: \(result.stdout)") }
    let findings = items.map { item -> (check: String, result: String, detail: String, fix: String?) in
        func text(_ key: String) -> String? { if case .string(let value) = item[key] { value } else { nil } }
        return (text("Check") ?? "", text("Result") ?? "", text("Detail") ?? "", text("Fix"))
    }
    return (result.status, findings, json)
}

@Suite("baton doctor", .serialized)
struct DoctorTests {
    static let order = ["adapter", "bluetoothd", "batond", "ring", "handled-types", "permissions", "notifications", "agent", "browser", "clipboard"]

    @Test("nothing there but batond --no-radio: each failure says what to do")
    func everythingMissing() async throws {
        try await withDaemon { daemon in
            let empty = try TestBus()
            defer { empty.stop() }
            let run = try await runDoctor(daemonBus: daemon.bus.address, busName: daemon.busName,
                                          bluezBus: empty.address, sessionBus: empty.address)
            #expect(run.status == 1)
            #expect(run.findings.map(\.check) == Self.order)
            let byCheck = Dictionary(uniqueKeysWithValues: run.findings.map { ($0.check, $0) })
            #expect(byCheck["adapter"]?.result == "failed")
            #expect(byCheck["adapter"]?.detail.contains("bluetoothd is not running") == true)
            #expect(byCheck["adapter"]?.fix?.contains("systemctl enable --now bluetooth") == true)
            #expect(byCheck["bluetoothd"]?.result == "skipped")
            #expect(byCheck["batond"]?.result == "warning")
            #expect(byCheck["batond"]?.detail.contains("owns \(daemon.busName)") == true)
            // The fixture's batond has no systemd credential: plain files, said (security.md "Key storage at rest").
            #expect(byCheck["batond"]?.detail.contains("keys at rest: plain 0600 files") == true)
            #expect(byCheck["batond"]?.fix?.contains("without --no-radio") == true)
            #expect(byCheck["ring"]?.result == "failed")
            #expect(byCheck["ring"]?.fix?.contains("bt-pair accept") == true)
            #expect(byCheck["handled-types"]?.result == "failed")
            #expect(byCheck["handled-types"]?.fix?.contains("X-Baton-ActivityTypes") == true)
            #expect(byCheck["notifications"]?.result == "failed")
            #expect(byCheck["notifications"]?.fix?.contains("apt-get install dunst") == true)
            #expect(byCheck["agent"]?.result == "failed")
            #expect(byCheck["agent"]?.fix?.contains("systemctl --user enable --now baton-agent") == true)
            // Every line that is not ok or skipped carries a fix; ok and skipped lines carry none.
            for finding in run.findings {
                #expect((finding.fix != nil) == (finding.result == "failed" || finding.result == "warning"), "\(finding)")
            }

            let text = try await runTool(try Built.executable("baton"), ["--bus", daemon.bus.address, "--bus-name", daemon.busName, "doctor",
                                                                        "--bluez-bus", empty.address, "--session-bus", empty.address])
            #expect(text.status == 1)
            #expect(text.stdout.contains("FAILED   adapter"), "\(text.stdout)")
            #expect(text.stdout.contains("skipped  bluetoothd"), "\(text.stdout)")
            #expect(text.stdout.contains("fix: pair: `bt-pair accept`"), "\(text.stdout)")
        }
    }

    @Test("an adapter powered off, then on; a notification server and the agent on the session bus")
    func adapterAndSession() async throws {
        try await withDaemon { daemon in
            let system = try TestBus()
            let session = try TestBus()
            defer { system.stop(); session.stop() }
            let bluez = try await FakeBlueZAdapter(bus: system, powered: false)
            defer { bluez.close() }
            let desktop = try DBusConnection(bus: .address(session.address))
            defer { desktop.close() }
            _ = try await desktop.requestName("org.freedesktop.Notifications")
            _ = try await desktop.requestName("org.baton.Agent")

            let off = try await runDoctor(daemonBus: daemon.bus.address, busName: daemon.busName,
                                          bluezBus: system.address, sessionBus: session.address)
            let adapterOff = try #require(off.findings.first)
            #expect(adapterOff.check == "adapter")
            #expect(adapterOff.result == "failed")
            #expect(adapterOff.detail == "hci0 (00:11:22:33:44:55) powered off")
            #expect(adapterOff.fix?.hasPrefix("bluetoothctl power on") == true)
            #expect(off.findings.first { $0.check == "bluetoothd" }?.result != "skipped")
            #expect(off.findings.first { $0.check == "notifications" }?.result == "ok")
            #expect(off.findings.first { $0.check == "agent" }?.result == "ok")

            bluez.powered.withLock { $0 = true }
            let on = try await runDoctor(daemonBus: daemon.bus.address, busName: daemon.busName,
                                         bluezBus: system.address, sessionBus: session.address)
            #expect(on.findings.first?.result == "ok")
            #expect(on.findings.first?.detail == "hci0 (00:11:22:33:44:55) powered")
            // Still alone in the ring, so still failing overall.
            #expect(on.status == 1)
        }
    }

    @Test("batond not running: the fix says how to start it; what needs it is skipped")
    func daemonNotRunning() async throws {
        try await withDaemon { daemon in
            let run = try await runDoctor(daemonBus: daemon.bus.address, busName: "org.baton.NobodyHere",
                                          bluezBus: daemon.bus.address, sessionBus: daemon.bus.address)
            #expect(run.status == 1)
            let batond = try #require(run.findings.first { $0.check == "batond" })
            #expect(batond.result == "failed")
            #expect(batond.detail.contains("batond is not running (nothing owns org.baton.NobodyHere"), "\(batond.detail)")
            #expect(batond.fix?.contains("batond --bus-address \(daemon.bus.address) --state-dir DIR --bus-name org.baton.NobodyHere") == true)
            #expect(run.findings.first { $0.check == "ring" }?.result == "skipped")
            #expect(run.findings.first { $0.check == "handled-types" }?.result == "skipped")
            #expect(run.findings.first { $0.check == "permissions" }?.result == "skipped")
        }
    }

    @Test("permissions: group baton, polkit's answers and an older bus policy each say what this user may do and the fix")
    func permissionsFindings() {
        let outside = DaemonChecks.GroupMembership(inProcess: false, listed: false)
        func finding(_ continuing: DaemonChecks.Permission, _ pairing: DaemonChecks.Permission,
                     _ membership: DaemonChecks.GroupMembership = .init(inProcess: false, listed: false)) -> DoctorFinding {
            DaemonChecks.permissionsFinding(continuing: continuing, pairing: pairing, membership: membership)
        }
        let member = finding(.privilege, .privilege, .init(inProcess: true, listed: true))
        #expect(member.result == .ok && member.detail.contains("may continue") && member.detail.contains("may pair"))
        let active = finding(.polkit(.authorized), .polkit(.challenge))
        #expect(active.result == .ok && active.detail.contains("allowed through polkit (the active session")
                && active.detail.contains("administrator's password"), "\(active.detail)")
        let elsewhere = finding(.polkit(.notAuthorized), .polkit(.notAuthorized))
        #expect(elsewhere.result == .failed && elsewhere.detail.contains("may not continue")
                && elsewhere.detail.contains("needs group `baton` or the active session") && elsewhere.detail.contains("may not pair"),
                "\(elsewhere.detail)")
        #expect(elsewhere.fix == "continue from the desktop session you are logged in at; or sudo adduser $USER baton, then log out and back in")
        let noPolkit = finding(.polkit(.unavailable), .polkit(.unavailable))
        #expect(noPolkit.result == .failed && noPolkit.detail.contains("polkit is not running"))
        #expect(noPolkit.fix?.contains("sudo systemctl start polkit") == true && noPolkit.fix?.contains("sudo adduser $USER baton") == true)
        let notInstalled = finding(.polkit(.unknownAction), .polkit(.unknownAction))
        #expect(notInstalled.result == .failed && notInstalled.detail.contains("org.baton.policy is not installed"))
        let oldPolicy = finding(.refusedByBus, .refusedByBus, outside)
        #expect(oldPolicy.result == .failed && oldPolicy.detail.contains("older policy") && oldPolicy.fix?.contains("reinstall baton") == true)
        let stale = finding(.polkit(.notAuthorized), .polkit(.notAuthorized), .init(inProcess: false, listed: true))
        #expect(stale.result == .failed && stale.fix?.contains("log out and back in") == true && stale.fix?.contains("newgrp baton") == true)
        #expect(finding(.polkit(.timedOut), .privilege).result == .warning)
        #expect(finding(.unknown, .privilege).result == .warning)
    }

    /// Issue 26: as an ordinary user `baton continue` was refused with raw D-Bus text while doctor
    /// was all green. Asked of a system-style bus with the shipped policy, as each kind of account.
    @Test("permissions on the shipped system policy without polkitd: nobody is told the fix, group baton and root may continue")
    func permissionsOnTheSystemPolicy() async throws {
        try #require(getuid() == 0, "runs as root (CI does), to start programs as other users")
        try #require(getgrnam("baton") != nil && getpwnam("baton-test") != nil,
                     "accounts missing: run scripts/test-accounts (scripts/test does)")
        let policy = Built.packageRoot.appendingPathComponent("dbus/org.baton.conf").path
        let daemon = try await DaemonFixture(busKind: .system(policyFile: policy), busName: "org.baton")
        defer { daemon.stop() }
        let empty = try TestBus()
        defer { empty.stop() }
        func doctor(_ setpriv: [String]) async throws -> (check: String, result: String, detail: String, fix: String?) {
            let arguments = setpriv + [try Built.executable("baton"), "--bus", daemon.bus.address, "--json", "doctor",
                                       "--bluez-bus", empty.address, "--session-bus", empty.address]
            let result = try await runTool(arguments[0], Array(arguments.dropFirst()),
                                           environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
            let json = try JSONValue.parse(result.stdout)
            guard case .array(let items) = json else { throw FixtureError.timedOut("doctor printed no array: \(result.stdout) \(result.stderr)") }
            for item in items {
                func text(_ key: String) -> String? { if case .string(let value) = item[key] { value } else { nil } }
                if text("Check") == "permissions" { return ("permissions", text("Result") ?? "", text("Detail") ?? "", text("Fix")) }
            }
            throw FixtureError.timedOut("no permissions finding: \(result.stdout)")
        }
        // No polkitd runs on this bus: only group baton may (PolkitTests has the real polkitd).
        let nobody = try await doctor(["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        #expect(nobody.result == "failed" && nobody.detail.contains("may not continue") && nobody.detail.contains("polkit is not running"),
                "\(nobody)")
        #expect(nobody.fix?.contains("sudo adduser $USER baton, then log out and back in") == true, "\(nobody)")
        let member = try await doctor(["/usr/bin/setpriv", "--reuid=baton-test", "--regid=baton-test", "--init-groups"])
        #expect(member.result == "ok" && member.detail.contains("may continue") && member.detail.contains("may pair"), "\(member)")
        let root = try await doctor([])
        #expect(root.result == "ok", "\(root)")
    }

    @Test("bluetoothd versions: before 5.77 without experimental mode is a warning with the setting to change")
    func bluetoothdVersions() {
        let old = BlueZChecks.bluetoothdFinding(version: BluetoothdVersion("5.66"), experimental: false)
        #expect(old.result == .warning)
        #expect(old.detail.hasPrefix("bluetoothd 5.66, experimental interfaces off"))
        #expect(old.fix?.contains("Experimental = true") == true)
        #expect(BlueZChecks.bluetoothdFinding(version: BluetoothdVersion("5.66"), experimental: true).result == .ok)
        #expect(BlueZChecks.bluetoothdFinding(version: BluetoothdVersion("5.82\n"), experimental: false).result == .ok)
        #expect(BlueZChecks.bluetoothdFinding(version: BluetoothdVersion("5.50"), experimental: true).result == .warning)
        #expect(BlueZChecks.bluetoothdFinding(version: nil, experimental: false).result == .warning)
        #expect(BluetoothdVersion("not a version") == nil)
        #expect(BlueZChecks.experimentalSetting(in: "[General]\n#Experimental = true\nExperimental = true\n"))
        #expect(!BlueZChecks.experimentalSetting(in: "[General]\nExperimental = false\n[Policy]\nExperimental = true\n"))
    }

    @Test("ring members: when each was last heard; none recently is a warning")
    func ringMembers() {
        let heard = RingMember(name: "laptop", deviceID: "00", shortID: "abcd-ef01", isSelf: false, lastSeen: 995)
        let never = RingMember(name: "desktop", deviceID: "01", shortID: "1234-5678", isSelf: false)
        let recent = DaemonChecks.ringFinding([heard, never], now: 1000)
        #expect(recent.result == .ok)
        #expect(recent.detail == "laptop (abcd-ef01) last heard 5 s ago, desktop (1234-5678) never heard")
        let stale = DaemonChecks.ringFinding([heard], now: 1000 + 600)
        #expect(stale.result == .warning)
        #expect(stale.detail.contains("last heard 10 min ago"))
        #expect(stale.fix != nil)
        // Issue 26: alone, the fix says who may pair (not only root or group baton) and what `with NAME` needs.
        let alone = DaemonChecks.ringFinding([], now: 1000)
        #expect(alone.result == .failed)
        #expect(alone.fix == "pair: `bt-pair accept` on one machine, `bt-pair with NAME` on the other (NAME needs Bluetooth or "
                + "avahi-daemon on both; else the `bt-pair with HOST:PORT --session ID` line `bt-pair accept` prints); as root, "
                + "in group baton or with an administrator's password (polkit asks for it)")
    }

    @Test("LE privacy: off with connectable adverts is a warning whose fix is main.conf's Privacy = device")
    func privacyFinding() throws {
        func status(_ privacy: String?, _ detail: String?) throws -> DaemonStatus {
            try DaemonStatus(status: ManagerStatus(state: "running", adapter: "hci0", radio: "both", lePrivacy: privacy, lePrivacyDetail: detail),
                             managerProperties: ["Version": .string("0.1.0"), "BusName": .string("org.baton")])
        }
        #expect(DaemonChecks.privacy(try status(nil, nil)) == nil)
        #expect(DaemonChecks.privacy(try status("on", nil))?.result == .ok)
        #expect(DaemonChecks.privacy(try status("off", nil))?.result == .ok)
        let fact = LEPrivacyFact.assess(.off, connectable: .ringAdvert)
        let off = try #require(DaemonChecks.privacy(try status("off", fact.detail)))
        #expect(off.result == .warning)
        #expect(off.detail.contains("public address") && !off.detail.contains("main.conf"))
        #expect(off.fix == LEPrivacyFact.fix)
        let unknown = try #require(DaemonChecks.privacy(try status("unknown", "whether the adapter uses LE privacy is not known (x)")))
        #expect(unknown.result == .warning && unknown.detail.contains("not known (x)") && unknown.fix?.contains("Privacy = device") == true)
    }
}
