// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The first two doctor lines: is there a powered adapter (BlueZ over the system bus), and which
/// bluetoothd runs with or without its experimental interfaces.
public struct BlueZChecks: Sendable {
    /// Where bluetoothd is looked for: the system bus, or a test's bus.
    public var bus: DBusBusKind
    /// The installed bluetoothd, asked for its version when the running one's binary cannot be read.
    public var installedBluetoothd = "/usr/libexec/bluetooth/bluetoothd"
    public var mainConf = "/etc/bluetooth/main.conf"

    public init(bus: DBusBusKind) { self.bus = bus }

    static let bluezName = "org.bluez"
    /// From 5.77 LEAdvertisement1's MinInterval, MaxInterval and TxPower work without -E.
    static let stableIntervals = BluetoothdVersion(major: 5, minor: 77)
    static let oldestTested = BluetoothdVersion(major: 5, minor: 66)
    static let startBluez = "sudo apt-get install bluez && sudo systemctl enable --now bluetooth"

    public func run() async -> [DoctorFinding] {
        let connection: DBusConnection
        do {
            connection = try DBusConnection(bus: bus)
        } catch {
            return [DoctorFinding("adapter", .failed, "the system bus cannot be reached (\(error)), so neither BlueZ nor batond can work",
                                  fix: "sudo apt-get install dbus && sudo systemctl start dbus"),
                    DoctorFinding("bluetoothd", .skipped, "no system bus")]
        }
        defer { connection.close() }
        guard (try? await connection.nameHasOwner(Self.bluezName)) == true else {
            return [DoctorFinding("adapter", .failed, "bluetoothd is not running (nothing owns org.bluez on the system bus)",
                                  fix: Self.startBluez),
                    DoctorFinding("bluetoothd", .skipped, "bluetoothd is not running")]
        }
        let objects: [String: [String: [String: DBusValue]]]
        do {
            objects = Self.managedObjects(try await connection.call(
                destination: Self.bluezName, path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects", timeout: .seconds(5)))
        } catch {
            return [DoctorFinding("adapter", .failed, "bluetoothd does not answer (\(error))", fix: "sudo systemctl restart bluetooth"),
                    await bluetoothd(connection, experimentalInterface: false)]
        }
        let adapters = objects.filter { $0.value["org.bluez.Adapter1"] != nil }.sorted { $0.key < $1.key }
        let experimentalInterface = adapters.contains { $0.value["org.bluez.AdvertisementMonitorManager1"] != nil }
        return [Self.adapterFinding(adapters.map { ($0.key, $0.value["org.bluez.Adapter1"] ?? [:]) }),
                await bluetoothd(connection, experimentalInterface: experimentalInterface)]
    }

    static func adapterFinding(_ adapters: [(path: String, properties: [String: DBusValue])]) -> DoctorFinding {
        guard !adapters.isEmpty else {
            return DoctorFinding("adapter", .failed, "bluetoothd runs but sees no Bluetooth adapter",
                                 fix: "plug in an adapter; if one is there, `rfkill list` and `sudo rfkill unblock bluetooth`, "
                                    + "and `dmesg | grep -i bluetooth` for its firmware. Without Bluetooth, `sudo scripts/demo` "
                                    + "shows Baton working in the lab")
        }
        func describe(_ adapter: (path: String, properties: [String: DBusValue])) -> String {
            let name = adapter.path.split(separator: "/").last.map(String.init) ?? adapter.path
            return adapter.properties["Address"]?.stringValue.map { "\(name) (\($0))" } ?? name
        }
        let powered = adapters.filter { $0.properties["Powered"]?.boolValue == true }
        guard !powered.isEmpty else {
            return DoctorFinding("adapter", .failed, adapters.map(describe).joined(separator: ", ") + " powered off",
                                 fix: "bluetoothctl power on (if it stays off: sudo rfkill unblock bluetooth)")
        }
        return DoctorFinding("adapter", .ok, powered.map(describe).joined(separator: ", ") + " powered")
    }

    func bluetoothd(_ connection: DBusConnection, experimentalInterface: Bool) async -> DoctorFinding {
        var commandLine: [String] = []
        var executable: String?
        if let pid = try? await connection.connectionUnixProcessID(Self.bluezName) {
            commandLine = Self.readCommandLine(pid: pid)
            // The running binary (readable as root or its user); a test's fake is not bluetoothd.
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"),
               exe.hasSuffix("/bluetoothd") { executable = exe }
        }
        if executable == nil, FileManager.default.isExecutableFile(atPath: installedBluetoothd) { executable = installedBluetoothd }
        let version = executable.flatMap(Self.version(of:))
        let experimental = experimentalInterface || commandLine.contains("-E") || commandLine.contains("--experimental")
            || Self.experimentalSetting(in: (try? String(contentsOfFile: mainConf, encoding: .utf8)) ?? "")
        return Self.bluetoothdFinding(version: version, experimental: experimental)
    }

    static func bluetoothdFinding(version: BluetoothdVersion?, experimental: Bool) -> DoctorFinding {
        let mode = experimental ? "experimental interfaces on" : "experimental interfaces off"
        let enable = "optional: set `Experimental = true` under [General] in /etc/bluetooth/main.conf, then "
            + "`sudo systemctl restart bluetooth`"
        guard let version else {
            return DoctorFinding("bluetoothd", .warning, "version unknown, \(mode)",
                                 fix: "check `/usr/libexec/bluetooth/bluetoothd --version` (5.66 or later is tested)")
        }
        if version < oldestTested {
            return DoctorFinding("bluetoothd", .warning, "\(version), \(mode); older than \(oldestTested), the oldest tested",
                                 fix: "upgrade bluez to \(oldestTested) or later (Debian 12 ships 5.66)")
        }
        if version < stableIntervals && !experimental {
            return DoctorFinding("bluetoothd", .warning,
                                 "\(version), \(mode): advert interval and TX power are left to bluetoothd (before "
                                    + "\(stableIntervals) they need experimental mode); adverts still work", fix: enable)
        }
        return DoctorFinding("bluetoothd", .ok, "\(version), \(mode)")
    }

    /// GetManagedObjects' a{oa{sa{sv}}} as dictionaries.
    static func managedObjects(_ reply: [DBusValue]) -> [String: [String: [String: DBusValue]]] {
        var objects: [String: [String: [String: DBusValue]]] = [:]
        for (path, interfaces) in reply.first?.dictionaryValue ?? [:] {
            guard let path = path.stringValue else { continue }
            var byInterface: [String: [String: DBusValue]] = [:]
            for (interface, properties) in interfaces.dictionaryValue ?? [:] {
                guard let interface = interface.stringValue else { continue }
                var values: [String: DBusValue] = [:]
                for (name, value) in properties.dictionaryValue ?? [:] { if let name = name.stringValue { values[name] = value.unwrapped } }
                byInterface[interface] = values
            }
            objects[path] = byInterface
        }
        return objects
    }

    static func readCommandLine(pid: UInt32) -> [String] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return [] }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `Experimental = true` in main.conf's [General] section.
    static func experimentalSetting(in text: String) -> Bool {
        var section = ""
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.whitespaceTrimmed
            if line.hasPrefix("[") { section = line; continue }
            guard section == "[General]", !line.hasPrefix("#") else { continue }
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.whitespaceTrimmed }
            if parts.count == 2, parts[0] == "Experimental" { return parts[1].lowercased() == "true" }
        }
        return false
    }

    /// `bluetoothd --version` prints "5.66".
    static func version(of executable: String) -> BluetoothdVersion? {
        guard let output = standardOutput(ofProgram: executable, arguments: ["--version"]) else { return nil }
        return BluetoothdVersion(String(decoding: output, as: UTF8.self))
    }
}

/// bluetoothd's "MAJOR.MINOR" version.
public struct BluetoothdVersion: Sendable, Comparable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public init?(_ text: String) {
        let parts = text.whitespaceTrimmed.split(separator: ".")
        guard parts.count >= 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { return nil }
        self.init(major: major, minor: minor)
    }

    public var description: String { "bluetoothd \(major).\(minor)" }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.major, lhs.minor) < (rhs.major, rhs.minor) }
}
