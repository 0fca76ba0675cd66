// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonClient
import BatonCommandLine
import BatonCore
import BatonDBus
import Foundation
import Testing

/// Runs the built `baton` binary.
struct BatonTool {
    let globalArguments: [String]

    init(daemon: DaemonFixture?) {
        globalArguments = daemon.map { ["--bus", $0.bus.address, "--bus-name", $0.busName] } ?? []
    }

    func run(_ arguments: [String]) async throws -> ToolResult {
        try await runTool(try Built.executable("baton"), globalArguments + arguments)
    }

    /// Runs with --json and parses stdout.
    func json(_ arguments: [String]) async throws -> (ToolResult, JSONValue) {
        let result = try await run(["--json"] + arguments)
        #expect(result.status == 0, "baton \(arguments) failed: \(result.stderr)")
        return (result, try JSONValue.parse(result.stdout))
    }
}

@Suite("baton command line", .serialized)
struct CommandLineTests {
    static let usageFailures: [[String]] = [
        [],
        ["frobnicate"],
        ["--bus"],
        ["--bus", "nowhere", "status"],
        ["--bus-name", "nodots", "status"],
        ["--json=yes", "status"],
        ["status", "extra"],
        ["status", "--verbose"],
        ["publish", "--title", "x"],
        ["publish", "--type", "org.example.A.b"],
        ["publish", "--type", "org.example.A.b", "--title", "x", "--version", "-1"],
        ["publish", "--type", "org.example.A.b", "--title", "x", "--url", "ftp://example.org"],
        ["publish", "--type", "org.example.A.b", "--title", "x", "--for", "soon"],
        ["publish", "--type", "org.example.A.b", "--title", "x", "--current=yes"],
        ["publish", "--type", "org.example.A.b", "--title", "x", "--user-info"],
        ["continue"],
        ["continue", ""],
        ["continue", "/a//b"],
        ["continue", "/org/baton/s1", "/org/baton/s2"],
    ]

    @Test("usage errors exit 64 with one line and where help is on stderr, nothing on stdout", arguments: usageFailures)
    func usageErrors(_ arguments: [String]) async throws {
        let result = try await BatonTool(daemon: nil).run(arguments)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        #expect(result.stdout.isEmpty)
        // Issue 26: not the whole usage again, one line and "Try 'baton [COMMAND] --help'.".
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[2].isEmpty, "\(arguments): \(result.stderr)")
        #expect(result.stderr.hasPrefix("baton: "))
        #expect(lines.count > 1 && lines[1].hasPrefix("Try 'baton") && lines[1].hasSuffix(" --help'."), "\(result.stderr)")
        #expect(!result.stderr.contains("usage: baton"))
    }

    @Test("a command's usage error points at that command's help")
    func commandUsageErrorNamesTheCommand() async throws {
        let result = try await BatonTool(daemon: nil).run(["status", "--verbose"])
        #expect(result.status == 64)
        #expect(result.stderr == "baton: status: unknown option --verbose\nTry 'baton status --help'.\n", "\(result.stderr)")
    }

    @Test("help COMMAND shows that command's help; help of no command is a usage error")
    func helpCommand() async throws {
        let tool = BatonTool(daemon: nil)
        let general = try await tool.run(["--help"])
        for command in ["status", "continue", "diag", "publish"] {
            let viaHelp = try await tool.run(["help", command])
            let viaOption = try await tool.run([command, "--help"])
            #expect(viaHelp.status == 0 && viaHelp.stdout == viaOption.stdout, "help \(command)")
            #expect(viaHelp.stdout != general.stdout && viaHelp.stdout.hasPrefix("usage: baton [GLOBAL OPTIONS] \(command)"), "\(viaHelp.stdout)")
        }
        let unknown = try await tool.run(["help", "frobnicate"])
        #expect(unknown.status == 64 && unknown.stdout.isEmpty && unknown.stderr.hasSuffix("Try 'baton --help'.\n"), "\(unknown.stderr)")
    }

    @Test("diag rssi: --json --output writes one JSON document; --watch into a pipe has no screen escapes")
    func diagOutputAndWatch() async throws {
        try await withDaemon { daemon in
            let tool = BatonTool(daemon: daemon)
            let file = daemon.bus.directory.appendingPathComponent("radio.json").path
            let written = try await tool.run(["--json", "diag", "rssi", "--output", file])
            #expect(written.status == 0, "\(written.stderr)")
            // Issue 26: the file was empty when no advertiser was heard (as without a radio here).
            let text = try String(contentsOfFile: file, encoding: .utf8)
            let document = try JSONValue.parse(text)
            #expect(document["Version"] != nil && document["State"] != nil && document["Radio"] != nil, "\(text)")
            #expect(document["Advertisers"] == .array([]) && document["RadioNotices"] != nil, "\(text)")

            // stdout is a pipe here: dumps one after another, no clear-screen escapes.
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try Built.executable("baton"))
            process.arguments = tool.globalArguments + ["diag", "rssi", "--watch", "--interval", "0.2"]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            try launch(process)
            try await Task.sleep(for: .seconds(2))
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(!output.isEmpty)
            #expect(!output.contains("\u{1B}"), "\(output.debugDescription)")
        }
    }

    @Test("a bad --user-info names the JSON path")
    func userInfoErrorPath() async throws {
        let result = try await BatonTool(daemon: nil).run(
            ["publish", "--type", "org.example.A.b", "--title", "x", "--user-info", #"{"pages": [1, {"$date": "soon"}]}"#])
        #expect(result.status == 64)
        #expect(result.stderr.contains("$.pages[1].$date"), "\(result.stderr)")
    }

    @Test("help goes to stdout and exits 0")
    func help() async throws {
        let tool = BatonTool(daemon: nil)
        let general = try await tool.run(["--help"])
        #expect(general.status == 0)
        for command in ["publish", "status", "list", "continue", "handled-types"] {
            #expect(general.stdout.contains("  \(command) "))
        }
        let publish = try await tool.run(["publish", "-h"])
        #expect(publish.status == 0)
        #expect(publish.stdout.contains("--user-info JSON"))
    }

    @Test("status and handled-types print JSON")
    func statusAndHandledTypes() async throws {
        try await withDaemon { daemon in
            let tool = BatonTool(daemon: daemon)
            let (_, status) = try await tool.json(["status"])
            #expect(status["BusName"] == .string(daemon.busName))
            #expect(status["State"] != nil && status["Radio"] != nil && status["Adapter"] != nil && status["Version"] != nil)
            guard case .array = status["Errors"] else {
                Issue.record("errors is not an array: \(status)")
                return
            }
            // No baton-agent runs for this user: the status says apps cannot be started.
            #expect(status["SessionAgent"] == .boolean(false))
            let statusText = try await tool.run(["status"])
            #expect(statusText.stdout.contains("Agent:    none"), "\(statusText.stdout)")
            let agent = try daemon.connect()
            _ = try await agent.registerAgent(at: "/org/baton/Agent")
            let (_, withAgent) = try await tool.json(["status"])
            #expect(withAgent["SessionAgent"] == .boolean(true))
            agent.close()

            let (_, noTypes) = try await tool.json(["handled-types"])
            #expect(noTypes == .array([]))
            let connection = try daemon.connect()
            defer { connection.close() }
            _ = try await connection.registerHandler(for: ["org.example.B.b", "org.example.A.a"]) { _ in }
            let (_, types) = try await tool.json(["handled-types"])
            #expect(types == .array([.string("org.example.A.a"), .string("org.example.B.b")]))
            let text = try await tool.run(["handled-types"])
            #expect(text.stdout == "org.example.A.a\norg.example.B.b\n")
        }
    }

    @Test("publish holds the activity until SIGTERM; list shows it with its userInfo")
    func publishAndList() async throws {
        try await withDaemon { daemon in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try Built.executable("baton"))
            process.arguments = ["--bus", daemon.bus.address, "--bus-name", daemon.busName, "--json", "publish",
                                 "--type", "org.example.Reader.reading", "--title", "Chapter 9", "--current", "--version", "2",
                                 "--url", "https://example.org/9", "--needs-save",
                                 "--user-info", #"{"page": 9, "ratio": 0.5, "tag": {"$bytes": "AQI="}, "at": {"$date": "2026-11-29T12:00:00Z"}, "list": [true, "x"]}"#]
            let output = ChildPipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            let exited = AsyncStream.makeStream(of: Int32.self)
            process.terminationHandler = { exited.continuation.yield($0.terminationStatus) }
            try launch(process)
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

            let connection = try daemon.connect()
            defer { connection.close() }
            try await eventually("published activity becomes current") { try await connection.activities().first?.isCurrent == true }
            let info = try #require(try await connection.activities().first)
            #expect(info.title == "Chapter 9")
            #expect(info.isCurrent == true)
            #expect(info.version == 2)
            #expect(info.needsSave == true)
            #expect(info.webpageURL == "https://example.org/9")
            #expect(info.userInfo == ["page": .integer(9), "ratio": .double(0.5), "tag": .bytes([1, 2]),
                                      "at": .date(1_795_953_600), "list": .array([.boolean(true), .string("x")])])
            // WillSave goes to the publishing process, which answers with the state it has.
            #expect(try await connection.payload(ofActivityAt: info.path).title == "Chapter 9")

            let tool = BatonTool(daemon: daemon)
            let (_, list) = try await tool.json(["list"])
            guard case .array(let entries) = list, entries.count == 1 else {
                Issue.record("list is not one activity: \(list)")
                return
            }
            #expect(entries[0]["Path"] == .string(info.path))
            #expect(entries[0]["Type"] == .string("org.example.Reader.reading"))
            #expect(entries[0]["Current"] == .boolean(true))
            #expect(entries[0]["UserInfo"]?["tag"] == .object([("$bytes", .string("AQI="))]))
            #expect(entries[0]["UserInfo"]?["at"] == .object([("$date", .string("2026-11-29T12:00:00Z"))]))
            #expect(entries[0]["UserInfo"]?["ratio"] == .double(0.5))
            let text = try await tool.run(["list"])
            #expect(text.stdout.hasPrefix(info.path + "\torg.example.Reader.reading\t"))
            #expect(text.stdout.contains("\tcurrent\tChapter 9"))

            kill(process.processIdentifier, SIGTERM)
            var status: Int32?
            for await code in exited.stream {
                status = code
                break
            }
            #expect(status == 0)
            let printed = try JSONValue.parse(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
            #expect(printed["Path"] == .string(info.path))
            #expect(printed["Current"] == .boolean(true))
            try await eventually("activity invalidated after SIGTERM") { try await connection.activities().isEmpty }
        }
    }

    @Test("publish --for exits by itself and invalidates the activity")
    func publishFor() async throws {
        try await withDaemon { daemon in
            let result = try await BatonTool(daemon: daemon).run(
                ["publish", "--type", "org.example.Reader.reading", "--title", "Brief", "--for", "0.3"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.hasPrefix("/org/baton/activity/"))
            #expect(result.stderr.contains("invalidated"))
            let connection = try daemon.connect()
            defer { connection.close() }
            #expect(try await connection.activities().isEmpty)
        }
    }

    @Test("daemon errors exit 1 with batond's message and the error's short name on stderr, not its D-Bus name")
    func daemonErrors() async throws {
        try await withDaemon { daemon in
            let tool = BatonTool(daemon: daemon)
            let badType = try await tool.run(["publish", "--type", "nodots", "--title", "x", "--for", "0"])
            #expect(badType.status == 1)
            #expect(badType.stdout.isEmpty)
            #expect(badType.stderr.contains(" (InvalidArguments)\n") && !badType.stderr.contains("org.baton.Error"), "\(badType.stderr)")

            let tooBig = try await tool.run(["publish", "--type", "org.example.A.b", "--title", String(repeating: "t", count: 300), "--for", "0"])
            #expect(tooBig.status == 1)
            #expect(tooBig.stderr.contains("(PayloadTooLarge)") && !tooBig.stderr.contains("org.baton.Error"), "\(tooBig.stderr)")

            // No suggestions exist without the radio: an unknown object is the daemon's error path.
            let unknown = try await tool.run(["--json", "continue", "/org/baton/suggestion/nonexistent"])
            #expect(unknown.status == 1)
            #expect(unknown.stdout.isEmpty)
            // Issue 26: the bus's error put in words, with the fix; no raw D-Bus text.
            #expect(unknown.stderr.contains("baton continue: batond has no such suggestion"), "\(unknown.stderr)")
            #expect(unknown.stderr.contains("`baton suggestions` lists those there are"), "\(unknown.stderr)")
            #expect(!unknown.stderr.contains("org.freedesktop.DBus"), "\(unknown.stderr)")
        }
        let bus = try TestBus()
        defer { bus.stop() }
        let noDaemon = try await runTool(try Built.executable("baton"), ["--bus", bus.address, "--bus-name", "org.baton.Nobody", "status"])
        #expect(noDaemon.status == 1)
        #expect(noDaemon.stderr.contains("batond is not running on the bus at"), "\(noDaemon.stderr)")
        #expect(!noDaemon.stderr.contains("org.freedesktop.DBus"), "\(noDaemon.stderr)")
        // Nothing listening at the bus address: said in words, not "Failed to connect to socket".
        let noBus = try await runTool(try Built.executable("baton"), ["--bus", "unix:path=\(bus.directory.path)/absent", "status"])
        #expect(noBus.status == 1)
        #expect(noBus.stderr.contains("nothing listens on the bus at unix:path="), "\(noBus.stderr)")
        #expect(!noBus.stderr.contains("org.freedesktop.DBus") && !noBus.stderr.contains("errno"), "\(noBus.stderr)")
    }
}
