// SPDX-License-Identifier: GPL-2.0-or-later
import CBluetooth
import BatonTestBus
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// True inside the BlueZ lab VM (scripts/lab/run sets LAB_VM=1); lab tests are skipped elsewhere.
let isInsideLab = ProcessInfo.processInfo.environment["LAB_VM"] == "1"

/// Checks that the lab gives tests what they rely on: a kernel with Bluetooth sockets,
/// bluetoothd on the system bus with every virtual adapter powered, and the guest helpers.
/// Serialized because the helper tests restart bluetoothd and power adapters off.
@Suite("Lab smoke", .serialized, .enabled(if: isInsideLab, "needs the BlueZ lab VM: scripts/lab/test"))
struct LabSmokeTests {
    @Test("an AF_BLUETOOTH L2CAP socket can be created")
    func l2capSocketOpens() {
        let descriptor = socket(AF_BLUETOOTH, Int32(SOCK_SEQPACKET.rawValue), BTPROTO_L2CAP)
        let socketErrno = errno
        #expect(descriptor >= 0, "socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP): \(String(cString: strerror(socketErrno)))")
        if descriptor >= 0 { close(descriptor) }
    }

    @Test("org.bluez exports every lab adapter, powered, at the advertised address")
    func bluezExportsPoweredAdapters() throws {
        let controllers = try LabEnvironment.controllerCount()
        #expect(controllers >= 2)
        let adapters = try SystemBus.bluezAdapterPaths()
        for index in 0..<controllers {
            let path = "/org/bluez/hci\(index)"
            #expect(adapters.contains(path), "\(path) missing from \(adapters.sorted())")
            #expect(try SystemBus.adapterProperty(path, "Powered") == "true")
            let address = try SystemBus.adapterProperty(path, "Address")
            #expect(address == LabEnvironment.variable("LAB_HCI\(index)_ADDR"))
        }
    }

    @Test("the power helper turns an adapter off and on again")
    func powerHelperTogglesAdapter() throws {
        try LabEnvironment.runGuestHelper("power", ["hci1", "off"])
        #expect(try SystemBus.adapterProperty("/org/bluez/hci1", "Powered") == "false")
        try LabEnvironment.runGuestHelper("power", ["hci1", "on"])
        #expect(try SystemBus.adapterProperty("/org/bluez/hci1", "Powered") == "true")
    }

    @Test("restart-bluetoothd brings back a new bluetoothd with all adapters powered")
    func restartHelperRestartsBluetoothd() throws {
        let ownerBefore = try SystemBus.uniqueOwner(of: "org.bluez")
        try LabEnvironment.runGuestHelper("restart-bluetoothd", [])
        let ownerAfter = try SystemBus.uniqueOwner(of: "org.bluez")
        #expect(ownerAfter != ownerBefore)
        let adapters = try SystemBus.bluezAdapterPaths()
        for index in 0..<(try LabEnvironment.controllerCount()) {
            #expect(adapters.contains("/org/bluez/hci\(index)"))
            #expect(try SystemBus.adapterProperty("/org/bluez/hci\(index)", "Powered") == "true")
        }
    }
}

enum LabProbeError: Error, CustomStringConvertible {
    case missingVariable(String)
    case commandFailed(command: String, status: Int32, output: String)
    case unexpectedReply(String)

    var description: String {
        switch self {
        case .missingVariable(let name): "environment variable \(name) is not set"
        case .commandFailed(let command, let status, let output): "\(command) exited \(status): \(output)"
        case .unexpectedReply(let reply): "unexpected dbus-send reply: \(reply)"
        }
    }
}

/// What scripts/lab/run exports into the VM.
enum LabEnvironment {
    static func variable(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name]
    }

    static func controllerCount() throws -> Int {
        guard let text = variable("LAB_CONTROLLERS"), let count = Int(text) else {
            throw LabProbeError.missingVariable("LAB_CONTROLLERS")
        }
        return count
    }

    /// Runs one of scripts/lab/guest's helpers; throws unless it exits 0.
    static func runGuestHelper(_ name: String, _ arguments: [String]) throws {
        guard let directory = variable("LAB_GUEST_DIR") else { throw LabProbeError.missingVariable("LAB_GUEST_DIR") }
        _ = try runCommand(directory + "/" + name, arguments)
    }
}

/// Just enough of the system bus, through dbus-send, to check the lab.
enum SystemBus {
    static func bluezAdapterPaths() throws -> Set<String> {
        let reply = try dbusSend(destination: "org.bluez", path: "/",
                                 method: "org.freedesktop.DBus.ObjectManager.GetManagedObjects", [])
        let marker = "object path \""
        var paths: Set<String> = []
        for line in reply.split(separator: "\n") {
            guard let start = line.range(of: marker)?.upperBound else { continue }
            let path = line[start...].prefix { $0 != "\"" }
            if path.hasPrefix("/org/bluez/hci"), !path.dropFirst("/org/bluez/".count).contains("/") {
                paths.insert(String(path))
            }
        }
        return paths
    }

    /// An org.bluez.Adapter1 property as dbus-send prints its value, without quotes.
    static func adapterProperty(_ path: String, _ name: String) throws -> String {
        let reply = try dbusSend(destination: "org.bluez", path: path, method: "org.freedesktop.DBus.Properties.Get",
                                 ["string:org.bluez.Adapter1", "string:\(name)"])
        // The value line reads e.g. `   variant       boolean true`.
        guard let line = reply.split(separator: "\n").first(where: { $0.contains("variant") }),
              let value = line.split(separator: " ").last else {
            throw LabProbeError.unexpectedReply(reply)
        }
        return value.replacingOccurrences(of: "\"", with: "")
    }

    static func uniqueOwner(of name: String) throws -> String {
        let reply = try dbusSend(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                 method: "org.freedesktop.DBus.GetNameOwner", ["string:\(name)"])
        guard let line = reply.split(separator: "\n").first(where: { $0.contains("string \"") }) else {
            throw LabProbeError.unexpectedReply(reply)
        }
        return line.trimmingCharacters(in: .whitespaces)
    }

    private static func dbusSend(destination: String, path: String, method: String,
                                 _ arguments: [String]) throws -> String {
        try runCommand("/usr/bin/dbus-send",
                       ["--system", "--print-reply", "--dest=\(destination)", path, method] + arguments)
    }
}

/// Runs a program to completion; returns its stdout, throws with stdout and stderr if it fails.
func runCommand(_ executable: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = ChildPipe()
    let errorOutput = ChildPipe()
    process.standardOutput = output
    process.standardError = errorOutput
    process.standardInput = FileHandle.nullDevice
    try launch(process)
    // Small outputs only (dbus-send replies, helper messages), so reading one pipe
    // after the other cannot deadlock on a full pipe buffer in practice.
    let stdoutData = output.fileHandleForReading.readDataToEndOfFile()
    let stderrData = errorOutput.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let stdoutText = String(decoding: stdoutData, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw LabProbeError.commandFailed(command: ([executable] + arguments).joined(separator: " "),
                                          status: process.terminationStatus,
                                          output: stdoutText + String(decoding: stderrData, as: UTF8.self))
    }
    return stdoutText
}
