// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonDBus
#if canImport(Glibc)
import Glibc
#endif

/// The doctor lines after BlueZ's: batond runs and owns its name, the ring has members and when
/// each was last heard, this user's handled types, and the session side (notification server, agent).
public struct DaemonChecks: Sendable {
    public var options: GlobalOptions
    /// The user's session bus, where the notification server and baton-agent live.
    public var sessionBus: DBusBusKind
    /// Now, in seconds since 1970 (the clock Ring1's LastSeen uses).
    public var now: Int64

    public init(options: GlobalOptions, sessionBus: DBusBusKind, now: Int64 = Int64(time(nil))) {
        self.options = options
        self.sessionBus = sessionBus
        self.now = now
    }

    /// A member unheard longer than this cannot have a suggestion showing (batond's --away-after is at most 3600).
    static let recentlyHeard: Int64 = 60

    public func run() async -> [DoctorFinding] {
        await daemonFindings() + [await notifications(), await agent()]
    }

    /// LE privacy as batond reads it from the kernel: a warning when it is off while connectable
    /// adverts go out (they come from the public address), nothing while the radio is not ready.
    static func privacy(_ status: DaemonStatus) -> DoctorFinding? {
        switch status.lePrivacy {
        case "on"?:
            return DoctorFinding("privacy", .ok, "LE privacy is on: connectable adverts come from resolvable private addresses that change")
        case "off"?:
            guard let detail = status.lePrivacyDetail else {
                return DoctorFinding("privacy", .ok, "LE privacy is off; batond sends no connectable advert")
            }
            // The detail ends with the fix ("; set `Privacy = device` …"): said once, as the fix.
            guard let split = detail.firstRange(of: "; set ") else { return DoctorFinding("privacy", .warning, detail) }
            return DoctorFinding("privacy", .warning, String(detail[..<split.lowerBound]),
                                 fix: String(detail[detail.index(split.lowerBound, offsetBy: 2)...]))
        case "unknown"?:
            return DoctorFinding("privacy", .warning, status.lePrivacyDetail ?? "whether the adapter uses LE privacy is not known",
                                 fix: "check that /etc/bluetooth/main.conf says `Privacy = device` in [General]")
        default:
            return nil
        }
    }

    func daemonFindings() async -> [DoctorFinding] {
        let skipped = { (why: String) in
            [DoctorFinding("ring", .skipped, why), DoctorFinding("handled-types", .skipped, why),
             DoctorFinding("permissions", .skipped, why)]
        }
        let bus: DBusConnection
        do {
            bus = try DBusConnection(bus: options.bus)
        } catch {
            return [DoctorFinding("batond", .failed, "cannot connect to \(DaemonReachability.busDescription(options.bus)) (\(error))",
                                  fix: "start a bus and batond with " + DaemonReachability.startAdvice(options))]
                + skipped("batond cannot be reached")
        }
        let connection = BatonConnection(connection: bus, busName: options.busName)
        defer { connection.close() }
        guard (try? await bus.nameHasOwner(options.busName)) == true else {
            var fix = "start it with " + DaemonReachability.startAdvice(options)
            if case .system = options.bus, options.busName == BatonConnection.defaultBusName {
                fix = "sudo systemctl enable --now batond (installed by `sudo scripts/install` or the baton package); "
                    + "`journalctl -u batond` says why it stopped"
            }
            return [DoctorFinding("batond", .failed, "batond is not running (nothing owns \(options.busName) on "
                                  + DaemonReachability.busDescription(options.bus) + ")", fix: fix)]
                + skipped("batond is not running")
        }
        var findings: [DoctorFinding] = []
        do {
            let status = try await connection.status()
            let pid = (try? await bus.connectionUnixProcessID(options.busName)).map { "pid \($0), " } ?? ""
            var summary = "runs (\(pid)version \(status.version)), owns \(status.busName), radio \(status.radio)"
            if let secrets = status.secretsAtRest { summary += ", keys at rest: " + Self.secretsAtRestText(secrets) }
            switch (status.state, status.radio) {
            case ("degraded", _):
                findings.append(DoctorFinding("batond", .failed, summary + " (\(status.radioDetail ?? "unavailable")): nothing goes on the air",
                                              fix: "fix the adapter and bluetoothd lines above; batond picks the radio up by itself "
                                                 + "(else `sudo systemctl restart batond`)"))
            case (_, "off"):
                findings.append(DoctorFinding("batond", .warning, summary + ": started with --no-radio, so nothing goes on the air",
                                              fix: "start batond without --no-radio"))
            default:
                findings.append(DoctorFinding("batond", .ok, summary))
            }
            if let privacy = Self.privacy(status) { findings.append(privacy) }
        } catch {
            findings.append(DoctorFinding("batond", .failed, "owns \(options.busName) but does not answer: " + DaemonReachability.sentence(for: error, options: options, command: "doctor"),
                                          fix: "sudo systemctl restart batond; `journalctl -u batond` says what happened"))
            return findings + skipped("batond does not answer")
        }
        findings.append(await ring(connection))
        findings.append(await handledTypes(connection))
        findings.append(await permissions(bus))
        return findings
    }

    /// GetStatus "SecretsAtRest" in words (docs/security.md "Key storage at rest").
    public static func secretsAtRestText(_ word: String) -> String {
        switch word {
        case "plain": "plain 0600 files (no systemd credential key)"
        case "sealed-host": "sealed with systemd-creds (this machine's host key)"
        case "sealed-host+tpm2": "sealed with systemd-creds (TPM2 and this machine's host key)"
        case "sealed-tpm2": "sealed with systemd-creds (TPM2)"
        default: word
        }
    }

    /// What this user may do, found the way batond decides (docs/security.md, "Who may continue and
    /// pair"): first whether the bus lets the calls through, asked of the bus itself with calls to
    /// an object batond does not have (an older bus policy refuses them, AccessDenied; else batond
    /// answers that there is no such object); then root, batond's own user and group baton are
    /// allowed; anyone else is asked of polkit on the same bus, for this connection, never
    /// prompting (flags 0), as batond asks for its callers.
    func permissions(_ bus: DBusConnection) async -> DoctorFinding {
        func throughBus(_ path: String, _ interface: String, _ method: String) async -> Bool? {
            do {
                _ = try await bus.call(destination: options.busName, path: path, interface: interface, method: method, timeout: .seconds(10))
                return true
            } catch let error as DBusError {
                return error.name == DBusError.accessDeniedName ? false : true
            } catch {
                return nil
            }
        }
        let membership = GroupMembership.current()
        let daemonUser = try? await bus.connectionUnixUser(options.busName)
        let privileged = geteuid() == 0 || membership.inProcess || daemonUser == geteuid()
        func permission(_ action: PolkitAction, probe: Bool?) async -> Permission {
            guard let probe else { return .unknown }
            guard probe else { return .refusedByBus }
            if privileged { return .privilege }
            do {
                let reply = try await bus.call(destination: Polkit.busName, path: Polkit.authorityPath, interface: Polkit.authorityInterface,
                                               method: "CheckAuthorization",
                                               arguments: Polkit.checkArguments(subject: bus.uniqueName, action: action, interactive: false),
                                               timeout: .seconds(5))
                return .polkit(Polkit.answer(reply: reply) ?? .failed("unexpected reply"))
            } catch let error as DBusError {
                return .polkit(Polkit.answer(error: error))
            } catch {
                return .unknown
            }
        }
        let continuing = await permission(.continueSuggestions,
                                          probe: await throughBus("/org/baton/suggestion/doctor", BatonInterface.suggestion, "Dismiss"))
        let pairing = await permission(.pair, probe: await throughBus("/org/baton/doctor", BatonInterface.pairing, "Discover"))
        return Self.permissionsFinding(continuing: continuing, pairing: pairing, membership: membership)
    }

    /// How this user may reach one of batond's guarded actions.
    public enum Permission: Sendable, Equatable {
        /// Root, batond's own user or group baton: allowed without polkit.
        case privilege
        /// The bus policy refuses the call before batond sees it (an older org.baton.conf).
        case refusedByBus
        /// Left to polkit, which answered this.
        case polkit(PolkitAnswer)
        /// The bus could not be asked.
        case unknown
    }

    /// Whether this process, and this user in the group database, are in group baton.
    public struct GroupMembership: Sendable, Equatable {
        public var inProcess: Bool
        public var listed: Bool
        public init(inProcess: Bool, listed: Bool) {
            self.inProcess = inProcess
            self.listed = listed
        }

        static func current() -> GroupMembership {
            guard let group = getgrnam("baton") else { return GroupMembership(inProcess: false, listed: false) }
            let gid = group.pointee.gr_gid
            var names: [String] = []
            var member = group.pointee.gr_mem
            while let pointer = member?.pointee {
                names.append(String(cString: pointer))
                member = member?.advanced(by: 1)
            }
            let count = getgroups(0, nil)
            var groups = [gid_t](repeating: 0, count: Int(max(count, 0)))
            let got = getgroups(count, &groups)
            let inProcess = getegid() == gid || (got > 0 && groups.prefix(Int(got)).contains(gid))
            let user = getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) }
            let primary = getpwuid(geteuid()).map { $0.pointee.pw_gid == gid } ?? false
            return GroupMembership(inProcess: inProcess, listed: primary || user.map(names.contains) == true)
        }
    }

    static func permissionsFinding(continuing: Permission, pairing: Permission, membership: GroupMembership) -> DoctorFinding {
        let join = "sudo adduser $USER baton, then log out and back in"
        let pairs: String
        switch pairing {
        case .privilege: pairs = "may pair and remove machines"
        case .polkit(.authorized): pairs = "may pair and remove machines (allowed through polkit)"
        case .polkit(.challenge): pairs = "pairing and removal ask for an administrator's password (polkit)"
        case .unknown: pairs = "could not ask whether it may pair"
        default: pairs = "may not pair or remove machines (root, group `baton` or an administrator through polkit may)"
        }
        let refused = "this user may not continue or dismiss suggestions, so a notification's Continue and `baton continue` are refused"
        let stale = membership.listed && !membership.inProcess
        func failed(_ why: String, fix: String) -> DoctorFinding {
            if stale {
                return DoctorFinding("permissions", .failed, refused + ": " + why
                                     + " (you were added to group `baton` after this session started); " + pairs,
                                     fix: "log out and back in (or run `newgrp baton` in this shell)")
            }
            return DoctorFinding("permissions", .failed, refused + ": " + why + "; " + pairs, fix: fix)
        }
        switch continuing {
        case .unknown:
            return DoctorFinding("permissions", .warning, "could not ask the bus what this user may do", fix: "check the batond line")
        case .privilege:
            return DoctorFinding("permissions", .ok, "this user may continue and dismiss suggestions (root or group `baton`); " + pairs)
        case .polkit(.authorized):
            return DoctorFinding("permissions", .ok, "this user may continue and dismiss suggestions: allowed through polkit "
                                 + "(the active session, or a local polkit rule); " + pairs)
        case .refusedByBus:
            return failed("the installed bus policy (org.baton.conf) lets only root and group `baton` call batond for that "
                          + "(an older policy: the current one leaves it to batond and polkit)",
                          fix: "reinstall baton (`sudo scripts/install` or the package) so the active session may continue; or " + join)
        case .polkit(.notAuthorized), .polkit(.challenge), .polkit(.dismissed):
            return failed("it needs group `baton` or the active session, and polkit says this is not the active local desktop "
                          + "session (e.g. ssh, or a session in the background)",
                          fix: "continue from the desktop session you are logged in at; or " + join)
        case .polkit(.unavailable):
            return failed("it needs group `baton` or the active session, and polkit is not running, so only group `baton` may",
                          fix: "sudo systemctl start polkit (package polkitd); or " + join)
        case .polkit(.unknownAction):
            return failed("polkit does not know org.baton.continue (org.baton.policy is not installed in /usr/share/polkit-1/actions)",
                          fix: "reinstall baton (`sudo scripts/install` or the package); or " + join)
        case .polkit(.timedOut), .polkit(.failed):
            return DoctorFinding("permissions", .warning, "polkit could not say whether this user may continue suggestions; " + pairs,
                                 fix: "`systemctl status polkit` and `journalctl -u polkit` say why; or " + join)
        }
    }

    func ring(_ connection: BatonConnection) async -> DoctorFinding {
        let members: [RingMember]
        do {
            members = try await connection.ringMembers().filter { !$0.isSelf }
        } catch {
            return DoctorFinding("ring", .failed, "cannot read the ring: " + DaemonReachability.sentence(for: error, options: options, command: "doctor"),
                                 fix: "run `bt-pair list` as root to see whether the ring is readable")
        }
        return Self.ringFinding(members, now: now)
    }

    /// Who may pair, and that `with NAME` finds the other machine only over Bluetooth or DNS-SD.
    static let pairingFix = "pair: `bt-pair accept` on one machine, `bt-pair with NAME` on the other (NAME needs Bluetooth or "
        + "avahi-daemon on both; else the `bt-pair with HOST:PORT --session ID` line `bt-pair accept` prints); as root, "
        + "in group baton or with an administrator's password (polkit asks for it)"

    static func ringFinding(_ members: [RingMember], now: Int64) -> DoctorFinding {
        guard !members.isEmpty else {
            return DoctorFinding("ring", .failed, "this machine is alone in its ring: suggestions come only from paired machines",
                                 fix: Self.pairingFix)
        }
        let described = members.map { member in
            let heard = member.lastSeen.map { "last heard \(Self.age(now - $0)) ago" } ?? "never heard"
            return "\(member.name) (\(member.shortID)) \(heard)"
        }.joined(separator: ", ")
        let recent = members.contains { member in member.lastSeen.map { now - $0 <= recentlyHeard } ?? false }
        guard recent else {
            return DoctorFinding("ring", .warning, described + ": none heard in the last \(recentlyHeard) s",
                                 fix: "bring a member near with batond running there (its `baton doctor` should be clean); "
                                    + "every machine of a ring must use the same --company-id")
        }
        return DoctorFinding("ring", .ok, described)
    }

    static func age(_ seconds: Int64) -> String {
        switch max(0, seconds) {
        case ..<120: "\(max(0, seconds)) s"
        case ..<7200: "\(seconds / 60) min"
        case ..<172_800: "\(seconds / 3600) h"
        default: "\(seconds / 86400) days"
        }
    }

    func handledTypes(_ connection: BatonConnection) async -> DoctorFinding {
        do {
            let types = try await connection.handledTypes().sorted()
            guard !types.isEmpty else {
                return DoctorFinding("handled-types", .failed, "no app of this user handles any activity type, so nothing can be continued here",
                                     fix: "install an app that does (a .desktop file with X-Baton-ActivityTypes=TYPE;), or start one "
                                        + "that registers a handler (e.g. examples/python/reader.py --handler-only)")
            }
            return DoctorFinding("handled-types", .ok, types.joined(separator: ", "))
        } catch {
            return DoctorFinding("handled-types", .failed, "cannot read them: " + DaemonReachability.sentence(for: error, options: options, command: "doctor"),
                                 fix: "baton handled-types shows the same error; check the batond line")
        }
    }

    static let notificationsName = "org.freedesktop.Notifications"
    static let agentName = "org.baton.Agent"

    func notifications() async -> DoctorFinding {
        guard let session = try? DBusConnection(bus: sessionBus) else {
            return DoctorFinding("notifications", .failed, "no session bus here, so no notification can be shown",
                                 fix: "run `baton doctor` in your desktop session (DBUS_SESSION_BUS_ADDRESS unset)")
        }
        defer { session.close() }
        guard (try? await session.nameHasOwner(Self.notificationsName)) == true else {
            return DoctorFinding("notifications", .failed, "no notification server on the session bus (nothing owns \(Self.notificationsName))",
                                 fix: "log into a desktop that has one (GNOME, Plasma), or install one: sudo apt-get install dunst")
        }
        return DoctorFinding("notifications", .ok, "a notification server owns \(Self.notificationsName)")
    }

    func agent() async -> DoctorFinding {
        guard let session = try? DBusConnection(bus: sessionBus) else {
            return DoctorFinding("agent", .skipped, "no session bus")
        }
        defer { session.close() }
        guard (try? await session.nameHasOwner(Self.agentName)) == true else {
            return DoctorFinding("agent", .failed, "baton-agent is not running in this session: suggestions are not shown",
                                 fix: "systemctl --user enable --now baton-agent (or log in again: /etc/xdg/autostart/baton-agent.desktop)")
        }
        return DoctorFinding("agent", .ok, "baton-agent owns \(Self.agentName)")
    }
}
