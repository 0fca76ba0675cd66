// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonDBus
import BatonTestBus
import Foundation
import Testing

/// Debian's python with GObject introspection (the PATH python3 may be another one without gi).
private let debianPython = "/usr/bin/python3"

/// Whether python3-gi and Gtk 3's typelib (gir1.2-gtk-3.0) are installed: scripts/install-deps adds them.
private let gtkAvailable: Bool = {
    guard FileManager.default.isExecutableFile(atPath: debianPython) else { return false }
    let probe = Process()
    probe.executableURL = URL(fileURLWithPath: debianPython)
    probe.arguments = ["-c", "import gi; gi.require_version('Gtk', '3.0'); from gi.repository import Gtk"]
    probe.standardOutput = FileHandle.nullDevice
    probe.standardError = FileHandle.nullDevice
    guard (try? launch(probe)) != nil else { return false }
    probe.waitUntilExit()
    return probe.terminationStatus == 0
}()

/// Where the opened document lives. The agent never offers anything under /tmp (or any hidden or
/// removable place), so the document goes under this user's home, in a directory of its own.
private let documentsParent: URL? = {
    let home = FileManager.default.homeDirectoryForCurrentUser.standardizedFileURL
    let path = home.path
    guard path.hasPrefix("/"), !path.split(separator: "/").contains(where: { $0.hasPrefix(".") }),
          !["/tmp", "/var/tmp", "/run", "/media", "/mnt", "/dev", "/proc", "/sys"].contains(where: { path == $0 || path.hasPrefix($0 + "/") }),
          FileManager.default.isWritableFile(atPath: path) else { return nil }
    return home
}()

/// The GTK program: adds the file to the recently-used list through Gtk.RecentManager, as any GTK
/// app does when it opens a document, and waits until GTK has written the list.
private let gtkProgram = """
    import sys, gi
    gi.require_version("Gtk", "3.0")
    from gi.repository import Gtk, GLib
    path, mime = sys.argv[1], sys.argv[2]
    manager = Gtk.RecentManager.get_default()
    data = Gtk.RecentData()
    data.mime_type = mime
    data.app_name = "baton-gtk-proof"
    data.app_exec = "baton-gtk-proof %u"
    loop = GLib.MainLoop()
    manager.connect("changed", lambda *_: loop.quit())
    GLib.timeout_add_seconds(20, loop.quit)
    if not manager.add_full(GLib.filename_to_uri(path, None), data):
        sys.exit(2)
    loop.run()
    print("added")
    """

/// A real batond (--no-radio, TCP/TLS on 127.0.0.1) under its own bus name on a shared test bus.
final class NamedBatond {
    let process = Process()
    let busName: String

    init(bus: TestBus, name: String, directory: URL) throws {
        busName = "org.baton.Gtk\(name.capitalized)"
        let state = directory.appendingPathComponent("state-\(name)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        process.executableURL = URL(fileURLWithPath: try Built.executable("batond"))
        process.arguments = ["--bus-address", bus.address, "--bus-name", busName, "--state-dir", state.path, "--no-radio", "--no-avahi",
                             "--listen", "127.0.0.1", "--name", name, "--save-timeout", "2"]
        process.environment = ["PATH": "/usr/bin:/bin", "XDG_DATA_HOME": directory.appendingPathComponent("daemon-data-\(name)").path,
                               "XDG_DATA_DIRS": directory.appendingPathComponent("daemon-data-dirs").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try launch(process)
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A real baton-agent for one daemon, its environment a private home; its log goes to `log`.
final class AgentProcess {
    let process = Process()
    let log: URL

    init(daemonBus: TestBus, daemonBusName: String, sessionBus: TestBus, environment: [String: String], log: URL) throws {
        self.log = log
        FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: try Built.executable("baton-agent"))
        process.arguments = ["--bus", daemonBus.address, "--bus-name", daemonBusName]
        process.environment = environment.merging(["DBUS_SESSION_BUS_ADDRESS": sessionBus.address, "PATH": "/usr/bin:/bin"]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        try launch(process)
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

@Suite("Recent documents from a GTK program to a second daemon's default application", .serialized,
       .enabled(if: gtkAvailable, "python3-gi or Gtk 3's typelib is missing (scripts/install-deps installs python3-gi and gir1.2-gtk-3.0)"),
       .enabled(if: documentsParent != nil, "no writable home outside /tmp and hidden places for the opened document"))
struct RecentDocumentsGtkTests {
    @Test("Gtk.RecentManager opening a document makes the agent publish it; on a paired daemon it opens in the default app")
    func gtkDocumentReachesTheOtherMachinesDefaultApplication() async throws {
        let bus = try TestBus(), sessionB = try TestBus()
        defer { bus.stop(); sessionB.stop() }
        let work = bus.directory
        let documents = try #require(documentsParent).appendingPathComponent("baton-gtk-proof-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: documents) }
        var content = Data("%PDF-1.4\n".utf8)
        content.append(Data((0..<300_000).map { _ in UInt8.random(in: 0...255) }))
        let file = documents.appendingPathComponent("Quarterly report.pdf")
        try content.write(to: file)

        // Two daemons on the test bus, paired over TCP on loopback.
        let alpha = try NamedBatond(bus: bus, name: "alpha", directory: work), beta = try NamedBatond(bus: bus, name: "beta", directory: work)
        defer { alpha.stop(); beta.stop() }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        for daemon in [alpha, beta] {
            #expect(try await eventually(timeout: .seconds(20)) { try await client.nameHasOwner(daemon.busName) }, "\(daemon.busName) did not start")
        }
        try await pairOverTCP(acceptor: alpha.busName, initiator: beta.busName, client: client)

        // A's user: recent = on. B's user: a test application is the default for PDF (mimeapps.list).
        let homeA = work.appendingPathComponent("home-a"), homeB = work.appendingPathComponent("home-b")
        let environmentA = ["HOME": homeA.path, "XDG_DATA_HOME": homeA.appendingPathComponent("data").path,
                            "XDG_CONFIG_HOME": homeA.appendingPathComponent("config").path]
        try FileManager.default.createDirectory(at: homeA.appendingPathComponent("config/baton"), withIntermediateDirectories: true)
        try "recent = on\n".write(to: homeA.appendingPathComponent("config/baton/publishers.conf"), atomically: true, encoding: .utf8)
        let opened = work.appendingPathComponent("opened")
        let environmentB = try registerRecordingHandler(home: homeB, records: opened)

        let agentA = try AgentProcess(daemonBus: bus, daemonBusName: alpha.busName, sessionBus: bus, environment: environmentA,
                                      log: work.appendingPathComponent("agent-a.log"))
        let agentB = try AgentProcess(daemonBus: bus, daemonBusName: beta.busName, sessionBus: sessionB, environment: environmentB,
                                      log: work.appendingPathComponent("agent-b.log"))
        defer { agentA.stop(); agentB.stop() }
        for agent in [agentA, agentB] {
            // Logged after the watch and the handler registration are in place.
            #expect(try await eventually(timeout: .seconds(20)) { agent.logText.contains("for suggestions") }, "agent did not start: \(agent.logText)")
        }

        // The GTK program opens the document.
        let gtk = try await runTool(debianPython, ["-c", gtkProgram, file.path, "application/pdf"], environment: environmentA.merging(["PATH": "/usr/bin:/bin"]) { $1 })
        #expect(gtk.status == 0 && gtk.stdout == "added\n", "GTK program: \(gtk.stderr)")
        let list = try String(contentsOfFile: environmentA["XDG_DATA_HOME"]! + "/recently-used.xbel", encoding: .utf8)
        #expect(list.contains("baton-gtk-proof"), "GTK did not write the list")

        // A publishes it: the display name as title, the file attached with its digest, no path anywhere.
        let daemonA = try BatonConnection(bus: .address(bus.address), busName: alpha.busName)
        defer { daemonA.close() }
        #expect(try await eventually(timeout: .seconds(20)) { try await daemonA.currentActivityPath() != nil }, "no activity: \(agentA.logText)")
        let path = try #require(try await daemonA.currentActivityPath())
        let activity = try await daemonA.activity(at: path)
        #expect(activity.activityType == "org.baton.recent-document")
        #expect(activity.title == "Quarterly report.pdf")
        #expect(activity.webpageURL == nil && (activity.userInfo ?? [:]).isEmpty)
        let digest = try await runTool("/usr/bin/sha256sum", [file.path]).stdout.split(separator: " ").first.map(String.init)
        #expect(activity.document?.digest == digest && activity.document?.size == UInt64(content.count))
        #expect(activity.document?.mediaType == "application/pdf")
        let everything = try await client.call(destination: alpha.busName, path: path, interface: "org.freedesktop.DBus.Properties",
                                               method: "GetAll", arguments: [.string(BatonInterface.activity)])
        #expect(!"\(everything)".contains(documents.lastPathComponent), "a path in the activity: \(everything)")
        #expect(!"\(everything)".contains(file.path))

        // B continues it: the snapshot is fetched over TLS, B's agent saves it and GIO opens it with the test app.
        let outcome = try await client.call(destination: beta.busName, path: BatonObjectPath.ring, interface: BatonInterface.ring,
                                            method: "Continue", arguments: [.string("alpha"), .string("org.baton.recent-document")])
        #expect(outcome.first?.stringValue == "delivered")
        let record = opened.appendingPathComponent("path")
        #expect(try await eventually(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: record.path) },
                "the default application was not started: \(agentB.logText)")
        let openedPath = try String(contentsOf: record, encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(openedPath == homeB.appendingPathComponent("data/baton/received/Quarterly report.pdf").path)
        #expect(try Data(contentsOf: opened.appendingPathComponent("bytes")) == content)
    }
}

/// A .desktop application in `home`'s data directory, the default for application/pdf by
/// mimeapps.list, whose Exec records the file it was given (bytes, then its path); B's environment.
private func registerRecordingHandler(home: URL, records: URL) throws -> [String: String] {
    let data = home.appendingPathComponent("data"), config = home.appendingPathComponent("config")
    let applications = data.appendingPathComponent("applications")
    try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: records, withIntermediateDirectories: true)
    let script = home.appendingPathComponent("record-opened")
    try """
        #!/bin/sh
        cat "$1" > '\(records.path)/bytes.tmp' && mv '\(records.path)/bytes.tmp' '\(records.path)/bytes'
        printf '%s\\n' "$1" > '\(records.path)/path.tmp' && mv '\(records.path)/path.tmp' '\(records.path)/path'
        """.write(to: script, atomically: true, encoding: .utf8)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
    try """
        [Desktop Entry]
        Type=Application
        Name=Baton test PDF recorder
        Exec=\(script.path) %f
        MimeType=application/pdf;
        NoDisplay=true
        """.write(to: applications.appendingPathComponent("baton-test-pdf-recorder.desktop"), atomically: true, encoding: .utf8)
    try "[Default Applications]\napplication/pdf=baton-test-pdf-recorder.desktop\n"
        .write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)
    // /usr/share for the shared MIME database only (GIO finds the file's type by its name there);
    // the default application comes from this home's mimeapps.list.
    return ["HOME": home.path, "XDG_DATA_HOME": data.path, "XDG_CONFIG_HOME": config.path, "XDG_DATA_DIRS": "/usr/share"]
}

/// Pairs two real daemons through Pairing1 over TCP on loopback, both users confirming.
func pairOverTCP(acceptor: String, initiator: String, client: DBusConnection) async throws {
    func call(_ destination: String, _ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await client.call(destination: destination, path: path, interface: interface, method: method, arguments: arguments)
    }
    func property(_ destination: String, _ path: String, _ name: String) async throws -> DBusValue {
        let reply = try await call(destination, path, "org.freedesktop.DBus.Properties", "Get", [.string(BatonInterface.pairingSession), .string(name)])
        return reply.first?.unwrapped ?? .string("")
    }
    let pathA = try #require(try await call(acceptor, BatonObjectPath.ring, BatonInterface.pairing, "Accept", [.propertyDictionary([:])]).first?.objectPathValue)
    let port = try #require(try await property(acceptor, pathA, "Port").uint16Value)
    let session = try #require(try await property(acceptor, pathA, "SessionId").stringValue)
    let pathB = try #require(try await call(initiator, BatonObjectPath.ring, BatonInterface.pairing, "Pair",
                                            [.string("127.0.0.1:\(port)"), .propertyDictionary(["SessionId": .string(session)])]).first?.objectPathValue)
    let sides = [(acceptor, pathA), (initiator, pathB)]
    for (name, path) in sides {
        #expect(try await eventually(timeout: .seconds(20)) { try await property(name, path, "State").stringValue == "confirming" })
    }
    let code = try #require(try await property(acceptor, pathA, "Code").stringValue)
    _ = try await call(initiator, pathB, BatonInterface.pairingSession, "ConfirmCode", [.string(code)])
    // The initiator then shows the second code; the acceptor's user types it.
    #expect(try await eventually(timeout: .seconds(20)) { try await property(initiator, pathB, "Code").stringValue?.count == 6 })
    let second = try #require(try await property(initiator, pathB, "Code").stringValue)
    _ = try await call(acceptor, pathA, BatonInterface.pairingSession, "ConfirmCode", [.string(second)])
    for (name, path) in sides {
        #expect(try await eventually(timeout: .seconds(20)) { try await property(name, path, "State").stringValue == "reviewing" })
        _ = try await call(name, path, BatonInterface.pairingSession, "Commit")
    }
    for (name, path) in sides {
        #expect(try await eventually(timeout: .seconds(20)) { try await property(name, path, "State").stringValue == "paired" })
    }
}
