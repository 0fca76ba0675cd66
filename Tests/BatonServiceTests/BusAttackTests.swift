// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Synchronization
import Testing
@testable import BatonService

// Issue 24, "attack the bus side from the docs alone on both buses": what another local account
// (nobody, outside group baton) can do to batond through the system bus with the shipped policy
// (dbus/org.baton.conf), on dbus-daemon and on dbus-broker. Each attack stays as a test, whether
// it held or not.

/// A fake of polkitd for the tests that need to hold or forge its answer: it owns
/// org.freedesktop.PolicyKit1 and answers CheckAuthorization only once the test says what to
/// answer (or after 120 s: no). It records each question's subject. It serves any number of
/// batond's questions at once (polkitd, a GDBus service, has no per-caller bound).
final class FakePolkit: Sendable {
    final class State: Sendable {
        let value = Mutex<(subjects: [String], answer: Bool?)>(([], nil))
    }

    let connection: DBusConnection
    private let state = State()

    init(bus: TestBus) async throws {
        connection = try DBusConnection(bus: .address(bus.address),
                                        configuration: DBusConnectionConfiguration(runningPerSender: 4096, runningAtMost: 4096,
                                                                                   maxHandlersPerSender: 4096))
        let state = self.state
        let check = DBusMethod("CheckAuthorization",
                               in: [DBusArgument("subject", "(sa{sv})"), DBusArgument("action", "s"), DBusArgument("details", "a{ss}"),
                                    DBusArgument("flags", "u"), DBusArgument("cancellation", "s")],
                               out: [DBusArgument("result", "(bba{ss})")]) { call in
            state.value.withLock { $0.subjects.append(String(describing: call.arguments.first ?? .string(""))) }
            let deadline = ContinuousClock.now + .seconds(120)
            var answer: Bool?
            while answer == nil && ContinuousClock.now < deadline {
                answer = state.value.withLock { $0.answer }
                if answer == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            return [.structure([.boolean(answer ?? false), .boolean(false), .dictionary(keySignature: "s", valueSignature: "s", [:])])]
        }
        try await connection.export([DBusInterface("org.freedesktop.PolicyKit1.Authority", methods: [check])],
                                    at: "/org/freedesktop/PolicyKit1/Authority")
        _ = try await connection.requestName("org.freedesktop.PolicyKit1")
    }

    var subjects: [String] { state.value.withLock { $0.subjects } }
    /// From now on every question (waiting or new) is answered `authorized`.
    func answer(_ authorized: Bool) { state.value.withLock { $0.answer = authorized } }
    func close() { connection.close() }
}

@Suite("BatonServiceTests: attacks on batond's D-Bus side by another local user (dbus-daemon and dbus-broker)", .serialized)
struct BusAttackTests {
    enum Account {
        case nobody, groupBaton

        var setpriv: [String] {
            switch self {
            case .nobody: ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
            case .groupBaton: ["/usr/bin/setpriv", "--reuid=baton-test", "--regid=baton-test", "--init-groups"]
            }
        }
    }

    /// A system-style bus with the shipped org.baton.conf and polkit's own policy (user polkitd may
    /// own org.freedesktop.PolicyKit1, everyone may call it). `fakePolkit`: root may own that name
    /// too (for FakePolkit). `unrequestedReplies`: the bus passes replies nobody asked for (a laxer
    /// bus than Debian's: batond must not rely on the bus to drop forged replies).
    static func bus(_ daemon: TestBus.Daemon, fakePolkit: Bool = false, unrequestedReplies: Bool = false) throws -> TestBus {
        let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-busattack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        let file = directory.appendingPathComponent("policy.conf")
        let baton = InterfaceFiles.packageRoot.appendingPathComponent("dbus/org.baton.conf").path
        let fake = fakePolkit ? #"<policy user="root"><allow own="org.freedesktop.PolicyKit1"/></policy>"# : ""
        let lax = unrequestedReplies
            ? #"<policy context="default"><allow send_requested_reply="false" send_type="method_return"/></policy>"# : ""
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <include>\(baton)</include>
              <include>/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf</include>
              \(fake)
              \(lax)
            </busconfig>
            """.write(to: file, atomically: true, encoding: .utf8)
        chmod(file.path, 0o644)
        let bus = try TestBus(.system(policyFile: file.path), daemon: daemon)
        // systemd-socket-activate (dbus-broker) makes the socket without write access for others.
        chmod(bus.directory.appendingPathComponent("bus").path, 0o666)
        return bus
    }

    static func requireAccounts() throws {
        try #require(getuid() == 0, "runs as root (CI does): runs the attacker as nobody")
        try #require(getgrnam("baton") != nil && getpwnam("baton-test") != nil,
                     "accounts missing: run scripts/test-accounts (scripts/test does)")
    }

    /// Runs one of the attacker's scripts as `account`; its output lines `key=value` by key (the
    /// last of a key wins) and in order.
    @discardableResult
    static func run(_ account: Account, _ bus: TestBus, _ name: String, _ script: String,
                    _ arguments: [String]) async throws -> (results: [String: String], lines: [String]) {
        for (file, text) in [("rawbus.py", busAttackRawBus), (name, script)] {
            let url = bus.directory.appendingPathComponent(file)
            try text.write(to: url, atomically: true, encoding: .utf8)
            chmod(url.path, 0o644)
        }
        let command = account.setpriv + ["/usr/bin/python3", bus.directory.appendingPathComponent(name).path, bus.address] + arguments
        let result = try await runProgram(command[0], Array(command.dropFirst()),
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                                                        "PYTHONPATH": bus.directory.path, "PYTHONDONTWRITEBYTECODE": "1"])
        #expect(result.status == 0, "\(name) as \(account) failed: \(result.stderr)")
        var results: [String: String] = [:]
        let lines = result.stdout.split(separator: "\n").map(String.init)
        for line in lines {
            guard let equals = line.firstIndex(of: "=") else { continue }
            results[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return (results, lines)
    }

    /// Calls as `account` through busAttackCalls: `rows` are (row, path, interface, method, signature, arguments).
    static func calls(_ account: Account, _ bus: TestBus, _ rows: [(String, String, String, String, String, [Any])]) async throws
        -> [String: String] {
        let json = try JSONSerialization.data(withJSONObject: rows.map { [$0.0, $0.1, $0.2, $0.3, $0.4, $0.5] as [Any] })
        return try await run(account, bus, "calls.py", busAttackCalls, [String(decoding: json, as: UTF8.self)]).results
    }

    static let notPermitted = "org.baton.Error.NotPermitted"
    static let ring = "/org/baton/ring"

    /// The child nodes of `path` as root sees them.
    static func children(_ client: DBusConnection, _ path: String) async throws -> [String] {
        let xml = try await client.call(destination: "org.baton", path: path, interface: "org.freedesktop.DBus.Introspectable",
                                        method: "Introspect", arguments: []).first?.stringValue ?? ""
        return xml.components(separatedBy: "<node name=\"").dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
    }

    /// A pairing session started by the group member (it outlives the caller's connection).
    static func groupMemberSession(_ bus: TestBus) async throws -> String {
        let started = try await calls(.groupBaton, bus, [("accept", ring, "org.baton.Pairing1", "Accept", "a{sv}", [["Host": "127.0.0.1"]])])
        let answer = try #require(started["accept"])
        #expect(answer.hasPrefix("ok|"), "\(answer)")
        return String(answer.dropFirst(3)).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
    }

    // MARK: - Guarded calls as nobody, polkit absent

    /// Every call batond decides through group baton or polkit, as nobody with no polkitd: refused
    /// with a sentence, and nothing changed (no session created, the group member's session neither
    /// confirmed, cancelled nor read, nothing removed).
    @Test(arguments: TestBus.Daemon.installed)
    func guardedCallsAsNobodyAreRefusedWithASentenceAndChangeNothing(daemon: TestBus.Daemon) async throws {
        try Self.requireAccounts()
        let bus = try Self.bus(daemon)
        defer { bus.stop() }
        let batond = try await RunningBatond.start(on: bus, ["--listen", "127.0.0.1"])
        defer { batond.stop() }
        let session = try await Self.groupMemberSession(bus)
        #expect(try await Self.children(batond.client, Self.ring + "/pairing").count == 1)
        let membersBefore = try await batond.client.call(destination: "org.baton", path: Self.ring, interface: "org.baton.Ring1",
                                                         method: "ListMembers", arguments: [])
        let stateBefore = try await Self.calls(.groupBaton, bus, [("state", session, "org.freedesktop.DBus.Properties", "Get", "ss",
                                                                   ["org.baton.PairingSession1", "State"])])["state"]

        let properties = "org.freedesktop.DBus.Properties", sessionInterface = "org.baton.PairingSession1"
        let results = try await Self.calls(.nobody, bus, [
            ("Pairing1.Accept", Self.ring, "org.baton.Pairing1", "Accept", "a{sv}", [["Host": "127.0.0.1"]]),
            ("Pairing1.Pair", Self.ring, "org.baton.Pairing1", "Pair", "sa{sv}", ["127.0.0.1:1", ["SessionId": String(repeating: "00", count: 8)]]),
            ("Pairing1.Remove", Self.ring, "org.baton.Pairing1", "Remove", "s", ["no-such-member"]),
            ("Pairing1.RemoveWithIntroduced", Self.ring, "org.baton.Pairing1", "RemoveWithIntroduced", "s", ["no-such-member"]),
            ("Pairing1.ResetIdentity", Self.ring, "org.baton.Pairing1", "ResetIdentity", "", []),
            ("Pairing1.ListIntroduced", Self.ring, "org.baton.Pairing1", "ListIntroduced", "s", ["no-such-member"]),
            ("Pairing1.Discover", Self.ring, "org.baton.Pairing1", "Discover", "u", [1]),
            ("Ring1.Continue", Self.ring, "org.baton.Ring1", "Continue", "ss", ["no-such-member", "org.example.Attack"]),
            ("Confirm", session, sessionInterface, "Confirm", "b", [true]),
            ("ConfirmCode", session, sessionInterface, "ConfirmCode", "s", ["123456"]),
            ("Commit", session, sessionInterface, "Commit", "", []),
            ("Cancel", session, sessionInterface, "Cancel", "", []),
            ("Get Code", session, properties, "Get", "ss", [sessionInterface, "Code"]),
            ("Get PeerName", session, properties, "Get", "ss", [sessionInterface, "PeerName"]),
            ("Get PeerId", session, properties, "Get", "ss", [sessionInterface, "PeerId"]),
            ("Get PeerMembers", session, properties, "Get", "ss", [sessionInterface, "PeerMembers"]),
            ("Get PeerRemovals", session, properties, "Get", "ss", [sessionInterface, "PeerRemovals"]),
            ("Get PeerGenerations", session, properties, "Get", "ss", [sessionInterface, "PeerGenerations"]),
            ("GetAll", session, properties, "GetAll", "s", [sessionInterface]),
            ("Set State", session, properties, "Set", "ssv", [sessionInterface, "State", "paired"]),
            ("Suggestion1.Dismiss", "/org/baton/suggestion/1", "org.baton.Suggestion1", "Dismiss", "", []),
            ("GetManagedObjects", "/org/baton", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", "", []),
        ])
        for row in ["Pairing1.Accept", "Pairing1.Pair", "Pairing1.Remove", "Pairing1.RemoveWithIntroduced", "Pairing1.ResetIdentity", "Pairing1.ListIntroduced",
                    "Pairing1.Discover", "Ring1.Continue"] {
            let answer = try #require(results[row], "\(row) not run on \(daemon)")
            #expect(answer.hasPrefix(Self.notPermitted + "|") && answer.contains("polkit is not running")
                    && answer.contains("sudo adduser $USER baton"), "\(row) on \(daemon): \(answer)")
        }
        for row in ["Confirm", "ConfirmCode", "Commit", "Cancel", "Get Code", "Get PeerName", "Get PeerId", "Get PeerMembers", "Get PeerRemovals",
                    "Get PeerGenerations", "GetAll"] {
            let answer = try #require(results[row], "\(row) not run on \(daemon)")
            #expect(answer.hasPrefix(Self.notPermitted + "|"), "\(row) of another user's session on \(daemon): \(answer)")
        }
        // Properties.Set is not in the policy at all: the bus refuses it.
        #expect(results["Set State"]?.hasPrefix("org.freedesktop.DBus.Error.AccessDenied|") == true, "\(results["Set State"] ?? "")")
        // No suggestion exists without a ring: batond answers that the object is not there.
        #expect(results["Suggestion1.Dismiss"]?.hasPrefix("org.freedesktop.DBus.Error.UnknownObject|") == true,
                "\(results["Suggestion1.Dismiss"] ?? "")")
        // ObjectManager shows nobody the session without its private properties.
        let managed = try #require(results["GetManagedObjects"])
        #expect(managed.hasPrefix("ok|") && managed.contains(session), "\(managed)")
        for secret in ["\"Code\"", "\"PeerName\"", "\"PeerId\"", "\"PeerMembers\"", "\"PeerRemovals\"", "\"PeerGenerations\""] {
            #expect(!managed.contains(secret), "GetManagedObjects shows nobody \(secret) on \(daemon): \(managed)")
        }

        // Nothing changed: still the one session, in its state, and the same members.
        #expect(try await Self.children(batond.client, Self.ring + "/pairing").count == 1)
        let stateAfter = try await Self.calls(.groupBaton, bus, [("state", session, "org.freedesktop.DBus.Properties", "Get", "ss",
                                                                  ["org.baton.PairingSession1", "State"])])["state"]
        #expect(stateAfter == stateBefore && stateAfter?.contains("failed") == false, "\(stateBefore ?? "") -> \(stateAfter ?? "")")
        #expect(try await batond.client.call(destination: "org.baton", path: Self.ring, interface: "org.baton.Ring1",
                                             method: "ListMembers", arguments: []) == membersBefore)
        #expect(batond.process.isRunning)
    }

    // MARK: - Name games

    /// nobody cannot own org.baton, a name below it or polkit's name, not even queued for it (so no
    /// name passes to nobody when batond restarts): the shipped policy and the system default deny it.
    @Test(arguments: TestBus.Daemon.installed)
    func nobodyCannotOwnOrQueueForOrgBatonOrPolkit(daemon: TestBus.Daemon) async throws {
        try Self.requireAccounts()
        let bus = try Self.bus(daemon)
        defer { bus.stop() }
        let batond = try await RunningBatond.start(on: bus)
        let names = ["org.baton", "org.baton.Manager1", "org.baton.second", "org.freedesktop.PolicyKit1"]
        let results = try await Self.run(.nobody, bus, "names.py", busAttackNames, names).results
        for name in names {
            for flags in [0, 4, 2] {
                let answer = try #require(results["\(name)/\(flags)"], "\(name)/\(flags) not tried on \(daemon)")
                #expect(answer == "org.freedesktop.DBus.Error.AccessDenied", "\(name) flags \(flags) on \(daemon): \(answer)")
            }
        }
        // batond restarts: the name goes to the new batond (root), not to a queued attacker.
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        batond.stop()
        #expect(try await eventually(timeout: .seconds(30)) { try await !client.nameHasOwner("org.baton") })
        let again = try await RunningBatond.start(on: bus)
        defer { again.stop() }
        let owner = try await client.nameOwner("org.baton")
        #expect(try await client.connectionUnixProcessID(owner) == UInt32(again.pid))
        #expect(try await client.connectionUnixUser(owner) == 0)
        // Polkit's name is still free: a refusal says polkit is not running, not what a fake answered.
        #expect(try await !client.nameHasOwner("org.freedesktop.PolicyKit1"))
    }

    // MARK: - Forged and held polkit answers

    /// While batond waits for polkit's answer about nobody's Ring1.Continue, nobody sends batond a
    /// CheckAuthorization reply saying "authorized" for every serial batond may have used. Only the
    /// reply of polkit's owner counts: the call is refused with polkit's own answer (no). On a bus
    /// that passes replies nobody asked for, too.
    @Test(arguments: TestBus.Daemon.installed, [false, true])
    func forgedPolkitRepliesAreIgnored(daemon: TestBus.Daemon, unrequestedReplies: Bool) async throws {
        try Self.requireAccounts()
        let bus = try Self.bus(daemon, fakePolkit: true, unrequestedReplies: unrequestedReplies)
        defer { bus.stop() }
        let polkit = try await FakePolkit(bus: bus)
        defer { polkit.close() }
        let batond = try await RunningBatond.start(on: bus)
        defer { batond.stop() }

        let script = #"""
            import sys, threading, time
            from rawbus import *
            import dbus
            address = sys.argv[1]
            result = {}
            def continue_call():
                bus = dbus.bus.BusConnection(address)
                try:
                    bus.call_blocking("org.baton", "/org/baton/ring", "org.baton.Ring1", "Continue", "ss",
                                      ["no-such-member", "org.example.Attack"], timeout=90)
                    result["continue"] = "ok"
                except dbus.exceptions.DBusException as error:
                    result["continue"] = error.get_dbus_name()
            caller = threading.Thread(target=continue_call)
            caller.start()
            # Wait until batond asks polkit (the test's fake tells us through a file), then forge.
            while not os.path.exists(sys.argv[2]):
                time.sleep(0.05)
            forger = Bus(address)
            s = forger.next_serial()
            forger.send(call(s, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", ["org.baton"]))
            owner = forger.wait_reply(s, 30)["body_string"]
            for serial in range(1, 5001):
                forger.send(message(RETURN, forger.next_serial(), [(5, "u", serial), (6, "s", owner)], "(bba{ss})", [(True, False, [])]))
            s = forger.next_serial()
            forger.send(call(s, "org.baton", "/org/baton", "org.freedesktop.DBus.Introspectable", "Introspect"))
            print("ping=%s" % describe(forger.wait_reply(s, 60)), flush=True)
            open(sys.argv[3], "w").close()
            caller.join()
            print("continue=%s" % result.get("continue"), flush=True)
            """#
        let asked = bus.directory.appendingPathComponent("asked").path, forged = bus.directory.appendingPathComponent("forged").path
        async let attack = Self.run(.nobody, bus, "forge.py", script, [asked, forged])
        #expect(await eventually(timeout: .seconds(60)) { !polkit.subjects.isEmpty }, "batond never asked polkit on \(daemon)")
        chmod(bus.directory.path, 0o777)
        FileManager.default.createFile(atPath: asked, contents: nil)
        #expect(await eventually(timeout: .seconds(60)) { FileManager.default.fileExists(atPath: forged) })
        polkit.answer(false)
        let results = try await attack.results
        #expect(results["ping"] == "return", "on \(daemon): \(results)")
        #expect(results["continue"] == Self.notPermitted, "forged polkit reply on \(daemon), unrequested replies \(unrequestedReplies): \(results)")
        #expect(batond.process.isRunning)
    }

    /// A flood of guarded calls from nobody's many connections while polkit does not answer: batond
    /// bounds the questions it has out, so a group member's call and root's are served at once,
    /// not after the flood's 20 s, and a later polkit answer still reaches batond.
    @Test(arguments: TestBus.Daemon.installed)
    func aFloodWaitingForPolkitDoesNotHoldUpOtherCallers(daemon: TestBus.Daemon) async throws {
        try Self.requireAccounts()
        let bus = try Self.bus(daemon, fakePolkit: true)
        defer { bus.stop() }
        let polkit = try await FakePolkit(bus: bus)
        defer { polkit.close() }
        let batond = try await RunningBatond.start(on: bus)
        defer { batond.stop() }

        // 40 connections × 10 calls: more than batond's 256 handlers in all.
        async let flood = Self.run(.nobody, bus, "flood.py", busAttackFlood, ["40", "10"])
        #expect(await eventually(timeout: .seconds(60)) { polkit.subjects.count >= 8 }, "on \(daemon): \(polkit.subjects.count) questions")
        // At most 16 questions about one account are out at once (PolkitQuestions).
        #expect(polkit.subjects.count <= PolkitQuestions().perUser, "on \(daemon): \(polkit.subjects.count) questions")
        let member = try await Self.calls(.groupBaton, bus, [
            ("Remove", Self.ring, "org.baton.Pairing1", "Remove", "s", ["no-such-member"]),
            ("GetStatus", "/org/baton", "org.baton.Manager1", "GetStatus", "", []),
        ])
        #expect(member["Remove"]?.hasPrefix("org.baton.Error.UnknownDevice|") == true, "on \(daemon): \(member)")
        // Served before the flood's questions time out (20 s after they were asked).
        let elapsed = Double(member["elapsed Remove"] ?? "") ?? .infinity
        #expect(elapsed < 10, "a group member's call waited \(elapsed) s behind nobody's flood on \(daemon)")
        let started = ContinuousClock.now
        _ = try await batond.client.call(destination: "org.baton", path: "/org/baton", interface: "org.baton.Manager1", method: "GetStatus",
                                         arguments: [], timeout: .seconds(60))
        #expect(ContinuousClock.now - started < .seconds(10), "root's GetStatus waited behind nobody's flood on \(daemon)")
        polkit.answer(false)
        let tally = try await flood.results
        #expect(tally["sent"] == nil)
        // Every flooded call was answered, none allowed.
        let answered = tally.filter { $0.key.hasPrefix("error:") }.values.compactMap(Int.init).reduce(0, +)
        #expect(answered == 400, "on \(daemon): \(tally)")
        #expect(tally.keys.allSatisfy { $0 == "error:" + Self.notPermitted || $0 == "error:org.freedesktop.DBus.Error.LimitsExceeded" },
                "on \(daemon): \(tally)")
        #expect(batond.process.isRunning)
    }

    /// A caller that leaves while polkit is asked about it: polkit is asked about that connection
    /// (its unique name, which the bus never gives anyone again), batond survives the answer that
    /// comes after it left, and serves the next caller.
    @Test(arguments: TestBus.Daemon.installed)
    func aCallerThatLeavesWhilePolkitIsAskedIsAnsweredIntoTheVoid(daemon: TestBus.Daemon) async throws {
        try Self.requireAccounts()
        let bus = try Self.bus(daemon, fakePolkit: true)
        defer { bus.stop() }
        let polkit = try await FakePolkit(bus: bus)
        defer { polkit.close() }
        let batond = try await RunningBatond.start(on: bus)
        defer { batond.stop() }
        let script = #"""
            import sys
            import dbus
            bus = dbus.bus.BusConnection(sys.argv[1])
            print("name=%s" % bus.get_unique_name(), flush=True)
            try:
                bus.call_blocking("org.baton", "/org/baton/ring", "org.baton.Pairing1", "Remove", "s", ["no-such-member"], timeout=3)
                print("remove=ok", flush=True)
            except dbus.exceptions.DBusException as error:
                print("remove=%s" % error.get_dbus_name(), flush=True)
            """#
        let left = try await Self.run(.nobody, bus, "leave.py", script, []).results
        let name = try #require(left["name"])
        #expect(left["remove"] == "org.freedesktop.DBus.Error.NoReply", "\(left)")
        #expect(await eventually(timeout: .seconds(30)) { polkit.subjects.contains { $0.contains("\"\(name)\"") } },
                "polkit was asked about \(polkit.subjects), not \(name)")
        #expect(try await eventually(timeout: .seconds(30)) { try await !batond.client.nameHasOwner(name) })
        polkit.answer(true)
        let next = try await Self.run(.nobody, bus, "leave.py", script, []).results
        #expect(next["name"] != name)
        #expect(next["remove"] == "org.baton.Error.UnknownDevice", "polkit says yes now: \(next)")
        #expect(batond.process.isRunning)
    }

    // MARK: - Hostile messages

    /// Odd header fields, descriptors where none belong, deep and large values, invalid UTF-8,
    /// unicast signals posing as the bus and BlueZ, forged replies, and every exported method with
    /// a wrong signature, as nobody: batond stays up, answers every call it was given, closes every
    /// descriptor, and keeps what it stored.
    @Test(arguments: TestBus.Daemon.installed)
    func hostileMessagesLeaveBatondUpAnsweringAndItsStateIntact(daemon: TestBus.Daemon) async throws {
        try Self.requireAccounts()
        let bus = try Self.bus(daemon)
        defer { bus.stop() }
        let batond = try await RunningBatond.start(on: bus, ["--listen", "127.0.0.1"])
        defer { batond.stop() }
        let client = batond.client
        let activity = try #require(try await client.call(destination: "org.baton", path: "/org/baton", interface: "org.baton.Manager1",
                                                          method: "CreateActivity",
                                                          arguments: [.string("org.example.Kept"), .string("kept"),
                                                                      .propertyDictionary(["k": .string("v")]), .propertyDictionary([:])])
                                        .first?.objectPathValue)
        let session = try await Self.groupMemberSession(bus)
        func descriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(batond.pid)/fd").count) ?? -1 }
        let before = descriptors()

        let (results, lines) = try await Self.run(.nobody, bus, "hostile.py", busAttackHostile, [])
        let report = lines.joined(separator: "\n")
        #expect(results["done"] != nil, "the attack did not finish on \(daemon):\n\(report)")
        // Every call that reached batond was answered (the bus may refuse a malformed message and
        // drop the connection that sent it: "closed"); none waited out a timeout.
        for line in lines where line.hasSuffix("=noreply") { Issue.record("no answer on \(daemon): \(line)") }
        // What the bus forwards is served: header fields D-Bus does not define are ignored.
        for field in ["unknown field h", "unknown field a{ss} with a repeated key", "unknown field v in v in v", "unknown field a(yv)",
                      "unknown field (ux)"] {
            #expect(results[field] == "return", "\(field) on \(daemon): \(results[field] ?? "")")
        }
        #expect(results["a descriptor in a variant in userInfo"]?.hasPrefix("error:org.baton.Error.") == true, "\(report)")
        #expect(results["64 calls with 4 descriptors each"]?.hasPrefix("error:org.baton.Error.") == true, "\(report)")
        #expect(results["userInfo of 1 MiB"] == "error:org.baton.Error.PayloadTooLarge", "\(report)")
        #expect(results["a dictionary with a repeated key in userInfo"] == "error:org.baton.Error.InvalidArguments", "\(report)")
        for name in ["NameOwnerChanged from a user: org.baton gone", "NameLost from a user", "InterfacesAdded as BlueZ",
                     "PropertiesChanged as BlueZ", "Released as BlueZ", "3,000 forged replies then Ping"] {
            #expect(results[name] == "return", "\(name) on \(daemon): \(results[name] ?? "")")
        }
        let wrong = lines.filter { $0.hasPrefix("wrong signature ") }
        #expect(wrong.count >= 20, "\(report)")
        for line in wrong where !line.contains("=error:") { Issue.record("a wrong signature was served on \(daemon): \(line)") }

        // Up, the same process, every descriptor closed, and what was stored is still there.
        #expect(batond.process.isRunning)
        #expect(try await client.connectionUnixProcessID(try await client.nameOwner("org.baton")) == UInt32(batond.pid))
        #expect(await eventually(timeout: .seconds(30)) { descriptors() <= before + 4 }, "batond holds \(descriptors()), had \(before)")
        let type = try await client.call(destination: "org.baton", path: activity, interface: "org.freedesktop.DBus.Properties",
                                         method: "Get", arguments: [.string("org.baton.Activity1"), .string("Type")])
        #expect(type.first?.variantValue == .string("org.example.Kept"))
        #expect(try await Self.children(client, Self.ring + "/pairing") == [String(session.split(separator: "/").last ?? "")])
        let state = try await Self.calls(.groupBaton, bus, [("state", session, "org.freedesktop.DBus.Properties", "Get", "ss",
                                                             ["org.baton.PairingSession1", "State"])])["state"]
        #expect(state?.hasPrefix("ok|") == true && state?.contains("failed") == false, "\(state ?? "")")
    }
}

@Suite("BatonServiceTests: the bound on questions out to polkit")
struct PolkitQuestionsTests {
    @Test func eachUserAndEveryoneHaveABoundAndAnswersGivePlacesBack() {
        var questions = PolkitQuestions(perUser: 2, inAll: 3)
        func take(_ uid: UInt32) -> Bool { questions.take(uid: uid) }
        let first = take(65534), second = take(65534), third = take(65534)
        #expect(first && second)
        #expect(!third, "a third question about one user")
        let other = take(1000), fourth = take(1001)
        #expect(other)
        #expect(!fourth, "a fourth in all")
        #expect(questions.total == 3)
        questions.give(uid: 65534)
        let freed = take(1001), stillFull = take(65534)
        #expect(freed)
        #expect(!stillFull)
        questions.give(uid: 1000)
        questions.give(uid: 1000)  // more than taken: ignored
        #expect(questions.waiting[1000] == nil && questions.total == 2)
        let again = take(65534)
        #expect(again && questions.total == 3)
    }

    @Test func theDefaultsLeaveMostHandlersAndBusRepliesFree() {
        let questions = PolkitQuestions()
        // batond runs 256 handlers in all; dbus-daemon lets it wait for 128 replies.
        #expect(questions.inAll <= 64 && questions.perUser <= questions.inAll)
        #expect(PolkitQuestions.busy().contains("try again") && PolkitQuestions.busy().contains("sudo adduser $USER baton"))
    }
}
