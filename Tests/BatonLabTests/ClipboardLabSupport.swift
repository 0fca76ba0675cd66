// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// One account's clipboard on one lab "machine" (ClipboardLabTests): the logind session its programs
/// run in, the environment they get there (display, runtime and config directories, session bus) and
/// the batond they talk to. alpha and beta are two batond on one VM, so baton-desk's programs for
/// alpha get directories and a session bus of their own, as on a machine of their own.
struct ClipboardSeat: Sendable {
    let label: String
    let session: DeskSession
    let busName: String
    let environment: [String: String]

    var exports: String {
        environment.sorted { $0.key < $1.key }.map { "export \($0.key)=\(DeskSession.quote($0.value))" }.joined(separator: "\n")
    }

    /// Runs `script` in the session with this seat's environment: (status, stdout, stderr).
    func run(_ name: String, _ script: String, timeout: Int = 120) async throws -> (Int32, String, String) {
        try await session.run(name, exports + "\n" + script, timeout: timeout)
    }

    /// Starts a long-running program of this seat (exec'd in the session).
    func start(_ name: String, _ command: String) async throws -> DeskSession.Job {
        try await session.start(name, command, environment: environment)
    }

    func baton(_ arguments: String) -> String {
        "\(DeskSession.quote(product("baton"))) --bus system --bus-name \(busName) \(arguments)"
    }

    /// `baton --json clipboard status` of this account, as its user runs it: the agent's side and
    /// batond's (Clipboard1.GetStatus, under "Daemon").
    func status() async throws -> ClipboardLabStatus {
        let (code, out, err) = try await run("status", baton("--json clipboard status"))
        let json = (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any] ?? [:]
        return ClipboardLabStatus(json: json, text: "\(label) status (\(code)): \(out)\(err)")
    }
}

/// What `baton --json clipboard status` said.
struct ClipboardLabStatus: CustomStringConvertible {
    let json: [String: Any]
    let text: String
    var description: String { text }

    var agentRegistered: Bool { json["Registered"] as? Bool == true }
    var sessionClipboard: String { json["SessionClipboard"] as? String ?? "" }
    /// The agent's words for the copy it took from another machine.
    var agentTaken: String? { json["Taken"] as? String }
    var daemon: [String: Any]? { json["Daemon"] as? [String: Any] }
    var daemonRegistered: Bool { daemon?["Registered"] as? Bool == true }
    var offer: [String: Any]? { daemon?["Offer"] as? [String: Any] }
    var offerKind: String? { offer?["Kind"] as? String }
    var offerExpiresIn: Int? { offer?["ExpiresIn"] as? Int }
    var askedBy: [String] { offer?["AskedBy"] as? [String] ?? [] }
    /// (device, media type, size) of each paste of the copy on offer.
    var pastedOn: [String] {
        (offer?["PastedOn"] as? [[String: Any]] ?? []).map { "\($0["Device"] ?? "?") \($0["MediaType"] ?? "?") \($0["Size"] ?? "?")" }
    }
    var taken: [String: Any]? { daemon?["Taken"] as? [String: Any] }
    var takenFrom: String? { taken?["Device"] as? String }
    var takenKind: String? { taken?["Kind"] as? String }
    var offersAnswered: Int { daemon?["OffersAnswered"] as? Int ?? -1 }
    var pastesAnswered: Int { daemon?["PastesAnswered"] as? Int ?? -1 }
}

/// Every clipboard call on the system bus, as root sees them (`dbus-monitor --system`): agents'
/// Clipboard1 calls to batond and batond's ClipboardAgent1 calls to agents, with the caller's and
/// the callee's unique names and the token. So the test sees from outside which agent was handed
/// which copy, and when an agent pasted.
final class ClipboardBusMonitor: @unchecked Sendable {
    struct Call: CustomStringConvertible {
        var time: Double
        var sender: String
        var destination: String
        var member: String
        /// The first uint64 argument (the token of Offered, Withdrawn and Paste).
        var token: UInt64?
        var description: String { String(format: "%.3f", time) + " \(member) \(sender) -> \(destination) token \(token.map(String.init) ?? "-")" }
    }

    private let process = Process()
    private let text = Mutex("")
    private var uids: [String: UInt32] = [:]

    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        process.arguments = ["--system", "type='method_call',interface='org.baton.Clipboard1'",
                             "type='method_call',interface='org.baton.ClipboardAgent1'"]
        let out = ChildPipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try launch(process)
        let handle = out.fileHandleForReading
        Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                self.text.withLock { $0 += String(decoding: data, as: UTF8.self) }
            }
        }.start()
    }

    var isRunning: Bool { process.isRunning }

    /// The method calls seen so far, oldest first: a message starts at a line that is not indented
    /// ("method call time=... sender=... -> destination=... member=..."), its arguments follow indented.
    var calls: [Call] {
        var calls: [Call] = []
        var current: Call?
        func finish() { if let call = current { calls.append(call) }; current = nil }
        for line in text.withLock({ $0 }).split(separator: "\n") {
            guard line.hasPrefix(" ") else {
                finish()
                guard line.hasPrefix("method call ") else { continue }
                func field(_ name: String) -> String? {
                    guard let range = line.range(of: " " + name + "=") else { return nil }
                    return String(line[range.upperBound...].prefix { $0 != " " && $0 != ";" })
                }
                guard let member = field("member"), let sender = field("sender"), let destination = field("destination") else { continue }
                current = Call(time: Double(field("time") ?? "") ?? 0, sender: sender, destination: destination, member: member, token: nil)
                continue
            }
            let argument = line.trimmingCharacters(in: .whitespaces)
            if current != nil, current?.token == nil, argument.hasPrefix("uint64 ") { current?.token = UInt64(argument.dropFirst(7)) }
        }
        finish()
        return calls
    }

    /// The uid of a connection (GetConnectionUnixUser, as root), remembered: an agent's name stays
    /// resolvable after it left.
    func uid(of name: String) async -> UInt32? {
        if let known = uids[name] { return known }
        let (_, out, _) = (try? await runTool("/usr/bin/dbus-send", ["--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                                     "org.freedesktop.DBus.GetConnectionUnixUser", "string:\(name)"])) ?? (1, "", "")
        guard let value = out.split(separator: "\n").last.flatMap({ UInt32($0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "uint32 ", with: "")) })
        else { return nil }
        uids[name] = value
        return value
    }

    /// Resolves the uid of every agent that registered so far (while they are still connected).
    func resolveAgents() async -> [String: UInt32] {
        var agents: [String: UInt32] = [:]
        for call in calls where call.member == "RegisterAgent" {
            if let uid = await uid(of: call.sender) { agents[call.sender] = uid }
        }
        return agents
    }

    var log: String { "clipboard calls on the system bus:\n" + calls.map(\.description).joined(separator: "\n") }

    func stop() { if process.isRunning { kill(process.processIdentifier, SIGTERM) } }
}

enum ClipboardLab {
    /// The programs the test runs and the Debian package of each (scripts/install-deps installs them).
    static let programs = ["/usr/bin/Xvfb": "xvfb", "/usr/bin/xclip": "xclip", "/usr/bin/sway": "sway", "/usr/bin/wl-paste": "wl-clipboard",
                           "/usr/bin/dbus-daemon": "dbus-daemon", "/usr/bin/dbus-monitor": "dbus-bin", "/usr/bin/dbus-send": "dbus-bin"]

    static var missingPrograms: [String] {
        programs.keys.sorted().filter { !FileManager.default.isExecutableFile(atPath: $0) }.map { "\($0) (Debian package \(programs[$0]!))" }
    }

    /// A valid PNG of `width` x `height` noise pixels (python3's zlib), owned by `user`: large enough
    /// that both X11 hops go by INCR.
    static func makePNG(at path: String, width: Int, height: Int, owner user: String) async throws -> [UInt8] {
        let script = """
            import os, struct, sys, zlib
            w, h = int(sys.argv[2]), int(sys.argv[3])
            def chunk(kind, data):
                return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
            rows = b"".join(b"\\x00" + os.urandom(w * 3) for _ in range(h))
            png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
            open(sys.argv[1], "wb").write(png)
            """
        let (code, _, err) = try await runTool("/usr/bin/python3", ["-c", script, path, "\(width)", "\(height)"])
        guard code == 0 else { throw DeskSessionError.noSession("making the PNG failed: \(err)") }
        _ = try await runTool("/bin/chown", ["\(user):", path])
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Writes `text` to `path` for `user` to copy.
    static func write(_ bytes: [UInt8], to path: String, owner user: String) async throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        _ = try await runTool("/bin/chown", ["\(user):", path])
    }
}

/// The files of a copy of files in the lab (issue 27's file lists): two files of `owner`, a short
/// text with a space and a non-ASCII letter in its name and a few hundred KiB of noise, and a file
/// holding their `text/uri-list` (RFC 2483, CRLF lines, as a file manager puts it on the clipboard)
/// for xclip to copy.
struct ClipboardLabFiles {
    let paths: [String]
    let contents: [[UInt8]]
    /// The file holding the uri-list.
    let list: String

    static func make(in directory: String, owner: String, binarySize: Int = 300 * 1024) async throws -> ClipboardLabFiles {
        var generator = SystemRandomNumberGenerator()
        let contents = [Array("notes for beta, \(UUID().uuidString)\n".utf8), (0..<binarySize).map { _ in UInt8.random(in: .min ... .max, using: &generator) }]
        let paths = [directory + "/notes ü.txt", directory + "/scan.bin"]
        for (path, bytes) in zip(paths, contents) { try await ClipboardLab.write(bytes, to: path, owner: owner) }
        let list = directory + "/files.uri-list"
        try await ClipboardLab.write(ClipboardFileURIs.uriList(paths: paths.map { Array($0.utf8) }), to: list, owner: owner)
        return ClipboardLabFiles(paths: paths, contents: contents, list: list)
    }

    /// The file sizes, as `ClipboardLabStatus.pastedOn` ends its entries.
    var sizes: [String] { contents.map { "\($0.count)" } }

    /// The local paths a pasted uri-list (or GNOME's list) names.
    static func localPaths(_ pasted: String) -> [String] {
        ClipboardFileURIs.uriListLines(Array(pasted.utf8)).compactMap { ClipboardFileURIs.localPath(ofFileURI: $0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// What is wrong with a pasted list: nil when it names one local copy of each file, in order,
    /// under `folder`, with the file's name and bytes.
    func mismatch(_ pasted: String, under folder: String) -> String? {
        let local = Self.localPaths(pasted)
        guard local.count == paths.count else { return "\(local.count) local files of \(paths.count) in \(pasted.debugDescription)" }
        for (index, path) in local.enumerated() {
            guard path.hasPrefix(folder + "/") else { return "\(path) is not under \(folder)" }
            guard (path as NSString).lastPathComponent == (paths[index] as NSString).lastPathComponent else { return "\(path) is not named as \(paths[index])" }
            let bytes = FileManager.default.contents(atPath: path).map { Array($0) } ?? []
            guard bytes == contents[index] else { return "\(path): \(bytes.count) bytes, not the \(contents[index].count) of \(paths[index])" }
        }
        return nil
    }
}
