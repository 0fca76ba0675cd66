// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import BatonService

/// A running program whose stdout lines can be awaited one by one.
final class RunningTool: Sendable {
    let process: Process
    private let lines: AsyncStream<String>
    private let errorText = TextBox()
    private let exit: Task<Int32, Never>
    private let input: Pipe

    init(_ path: String, _ arguments: [String], stdin: String? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = ChildPipe(), errors = ChildPipe(), input = ChildPipe()
        self.input = input
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input
        let (exitStream, exitContinuation) = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { exitContinuation.yield($0.terminationStatus); exitContinuation.finish() }
        try launch(process)
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        exit = Task { var it = exitStream.makeAsyncIterator(); return await it.next() ?? -1 }

        // Each pipe is read by a thread of its own, with blocking reads until end of file.
        // (Foundation's readabilityHandler once missed the end of a finished bt-pair's output, and
        // the test waited for a line forever with nothing left running.)
        let (stream, continuation) = AsyncStream<String>.makeStream()
        lines = stream
        let outputHandle = output.fileHandleForReading
        Thread {
            var data = Data()
            while case let chunk = outputHandle.availableData, !chunk.isEmpty {
                data.append(chunk)
                while let newline = data.firstIndex(of: 0x0A) {
                    continuation.yield(String(decoding: data[data.startIndex..<newline], as: UTF8.self))
                    data.removeSubrange(data.startIndex...newline)
                }
            }
            continuation.finish()
        }.start()
        let collected = errorText
        let errorHandle = errors.fileHandleForReading
        Thread {
            while case let chunk = errorHandle.availableData, !chunk.isEmpty {
                collected.text.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
            collected.finished.withLock { $0 = true }
        }.start()
    }

    /// Writes to the program's standard input (an answer to a prompt).
    func send(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }

    /// The 6-digit code `bt-pair accept` shows ("Code: NNNNNN" on stderr), once shown.
    func shownCode() async -> String? {
        for _ in 0..<200 {
            if let range = stderr.range(of: #"Code: [0-9]{6}"#, options: .regularExpression) {
                return String(stderr[range].suffix(6))
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// The second code `bt-pair with` shows once its user typed the acceptor's ("Second code: NNNNNN").
    func secondCode() async -> String? {
        for _ in 0..<400 {
            if let range = stderr.range(of: #"Second code: [0-9]{6}"#, options: .regularExpression) {
                return String(stderr[range].suffix(6))
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Closes the program's standard input (no terminal, nothing more typed).
    func closeInput() { try? input.fileHandleForWriting.close() }

    /// The next line of standard output; nil at its end, or after `limit` without one (a test that
    /// waits for a line that never comes fails instead of stalling the suite).
    func nextLine(within limit: Duration = .seconds(60)) async -> String? {
        let lines = lines
        return await withTaskGroup(of: String?.self) { group in
            group.addTask { var it = lines.makeAsyncIterator(); return await it.next() }
            group.addTask { try? await Task.sleep(for: limit); return nil }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
    /// The exit status, once the program ended and its stderr was read to the end (bounded).
    func status() async -> Int32 {
        let status = await exit.value
        await errorsRead()
        return status
    }

    /// Waits, at most 5 s, for the stderr reader to reach end of file (it follows the exit).
    private func errorsRead() async {
        for _ in 0..<250 where !errorText.finished.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
    }
    /// The exit status, the program terminated first if it still runs after `limit` (a hang fails the test instead of stalling the suite).
    func status(killedAfter limit: Duration) async -> Int32 {
        let process = process
        let watchdog = Task {
            try await Task.sleep(for: limit)
            if process.isRunning { process.terminate() }
        }
        defer { watchdog.cancel() }
        let status = await exit.value
        await errorsRead()
        return status
    }
    var stderr: String { errorText.text.withLock { $0 } }
}

final class TextBox: Sendable {
    let text = Mutex("")
    /// Set when the text's source reached end of file.
    let finished = Mutex(false)
}

func productPath(_ name: String) -> String {
    // Test bundles live next to the products in .build/<config>/.
    let bundle = Bundle.main.bundleURL.deletingLastPathComponent()
    for candidate in [bundle.appendingPathComponent(name).path, FileManager.default.currentDirectoryPath + "/.build/debug/" + name]
    where FileManager.default.isExecutableFile(atPath: candidate) {
        return candidate
    }
    return ".build/debug/" + name
}

func json(_ line: String?) -> [String: Any] {
    guard let line, let data = line.data(using: .utf8) else { return [:] }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
}

@Suite struct BtPairCLITests {
    var tool: String { productPath("bt-pair") }

    @Test func acceptWithListRemove() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let common = ["--bus", bus.address, "--json"]
        let accept = try RunningTool(tool, common + ["--bus-name", a.busName, "accept", "--host", "127.0.0.1", "--test-auto-confirm"])
        let offer = json(await accept.nextLine())
        #expect(Set(offer.keys) == ["Port", "SessionId"])
        let port = try #require(offer["Port"] as? Int), session = try #require(offer["SessionId"] as? String)
        // The initiator's user types the code the acceptor shows; the initiator then shows the
        // second code, which the acceptor's user types.
        let with = try RunningTool(tool, common + ["--bus-name", b.busName, "with", "127.0.0.1:\(port)", "--session", session, "--test-auto-confirm"])
        with.send((try #require(await accept.shownCode())) + "\n")
        accept.send((try #require(await with.secondCode(), "with: \(with.stderr)")) + "\n")
        let status = await with.status(killedAfter: .seconds(60)), err = with.stderr
        var lines: [String] = []
        while let line = await with.nextLine() { lines.append(line) }
        #expect(status == 0, "\(err) accept: \(accept.stderr) offer: \(offer)")
        #expect(err.contains("Type the code shown on the other machine:"))
        let result = json(lines.last)
        #expect(result["Result"] as? String == "paired")
        #expect(Set(result.keys) == ["Result", "Name", "DeviceId", "Code"])
        #expect(result["Name"] as? String == "alpha")
        #expect(await accept.status() == 0)
        let acceptResult = json(await accept.nextLine())
        #expect(acceptResult["Code"] as? String == result["Code"] as? String)
        #expect(!err.contains("Code: "))
        #expect(accept.stderr.contains("Code: "))
        #expect(accept.stderr.contains("Type the second code shown on the other machine:"))
        #expect(!accept.stderr.contains("Second code"))

        let (listStatus, listOut, _) = try await runTool(tool, common + ["--bus-name", b.busName, "list"])
        #expect(listStatus == 0)
        let members = (try JSONSerialization.jsonObject(with: Data(listOut.utf8)) as? [[String: Any]]) ?? []
        #expect(Set(members.compactMap { $0["Name"] as? String }) == ["alpha", "beta"])
        // docs/dbus-api.md: the peer's entry has every key; this machine's lacks the peer fields.
        let listKeys: Set<String> = ["Name", "DeviceId", "ShortId", "Self", "PairedSince", "LastSeen", "LastRSSI", "Endpoints", "IntroducedBy", "IntroducerRemoved"]
        for member in members {
            let peerOnly: Set<String> = member["Self"] as? Bool == true ? ["PairedSince", "LastSeen", "LastRSSI", "Endpoints"] : []
            #expect(Set(member.keys).isSubset(of: listKeys) && listKeys.subtracting(peerOnly).subtracting(["LastSeen", "LastRSSI", "IntroducedBy", "IntroducerRemoved"]).isSubset(of: Set(member.keys)),
                    "\(member.keys)")
        }
        let (tableStatus, table, _) = try await runTool(tool, ["--bus", bus.address, "--bus-name", b.busName])
        #expect(tableStatus == 0 && table.contains("alpha") && table.contains("(this machine)"))

        // Issue 23: remove asks first, before anything is removed, whether to remove alpha with what it
        // paired in, now and later; "y" signs one cascading mark.
        let idA = await a.service.deviceID
        let asking = try RunningTool(tool, ["--bus", bus.address, "--bus-name", b.busName, "remove", "alpha"])
        var prompt = ""
        for _ in 0..<200 where !prompt.contains("[y/N]") {
            try? await Task.sleep(for: .milliseconds(50))
            prompt = asking.stderr
        }
        #expect(prompt.contains("Also remove everything alpha paired in, now and later"), "\(prompt)")
        #expect(await b.service.snapshot().isMember(idA), "nothing is removed before the answer")
        asking.send("y\n")
        #expect(await asking.status() == 0)
        #expect(await asking.nextLine()?.contains("Removed alpha and everything it paired in") == true)
        let marks = await b.service.snapshot().roster.removalMarks
        #expect(marks.count == 1 && marks[idA]?.cascading == true)
        #expect(try await runTool(tool, common + ["--bus-name", b.busName, "remove", "alpha"]).0 == 4)
    }

    /// Issue 23 finding 8a: alpha removed gamma; beta, which gamma paired, pairs with alpha. Before
    /// asking to commit, bt-pair on beta says that joining removes gamma (and by whom) and re-keys
    /// this machine; beta's person says no and gamma stays.
    @Test func theReviewSaysWhichMembersJoiningWouldRemove() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let g = try await RingNode.start(bus, name: "gamma")
        let first = try await pairWithoutBus(a.pairing, g.pairing)
        #expect(await eventually(timeout: .seconds(30)) { await g.pairing.session(first.pathB)?.phase.stateName == "paired" })
        let idA = await a.service.deviceID, idG = await g.service.deviceID
        try await a.service.remove(idG.description)
        let second = try await pairWithoutBus(g.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(30)) { await b.pairing.session(second.pathB)?.phase.stateName == "paired" })
        #expect(await b.service.snapshot().roster.members[idG] != nil)

        let common = ["--bus", bus.address, "--json"]
        let accept = try RunningTool(tool, common + ["--bus-name", a.busName, "accept", "--host", "127.0.0.1", "--test-auto-confirm"])
        let offer = json(await accept.nextLine())
        let port = try #require(offer["Port"] as? Int), session = try #require(offer["SessionId"] as? String)
        let with = try RunningTool(tool, ["--bus", bus.address, "--bus-name", b.busName, "with", "127.0.0.1:\(port)", "--session", session])
        with.send((try #require(await accept.shownCode())) + "\n")
        accept.send((try #require(await with.secondCode(), "with: \(with.stderr)")) + "\n")
        var prompt = ""
        for _ in 0..<600 where !prompt.contains("[y/N]") {
            try? await Task.sleep(for: .milliseconds(50))
            prompt = with.stderr
        }
        #expect(prompt.contains("Joining will also remove from this ring: gamma (\(idG.shortForm)), removed by alpha (\(idA.shortForm))."), "\(prompt)")
        #expect(prompt.contains("Joining will also re-key: this machine (generation "), "\(prompt)")
        #expect(prompt.contains("Add them and remove those listed from this ring? [y/N]"), "\(prompt)")
        with.send("n\n")
        #expect(await with.status(killedAfter: .seconds(60)) != 0)
        #expect(await b.service.snapshot().roster.members[idG] != nil, "nothing merged on a no")
        accept.process.terminate()
        _ = await accept.status(killedAfter: .seconds(10))
    }

    /// The initiator's user types something else than the acceptor's code: both fail, nothing joins.
    @Test func aWrongTypedCodeFailsBothSides() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let accept = try RunningTool(tool, ["--bus", bus.address, "--bus-name", a.busName, "--json", "accept", "--host", "127.0.0.1"])
        let offer = json(await accept.nextLine())
        let port = try #require(offer["Port"] as? Int), session = try #require(offer["SessionId"] as? String)
        let with = try RunningTool(tool, ["--bus", bus.address, "--bus-name", b.busName, "with", "127.0.0.1:\(port)", "--session", session], stdin: "n\n")
        #expect(await with.status() == 1, "\(with.stderr)")
        #expect(with.stderr.contains("Type the code shown on the other machine:"))
        #expect(with.stderr.contains("the typed code did not match"))
        #expect(!with.stderr.contains("Second code"))
        // The acceptor, still asking its user for the second code, learns the other side refused.
        #expect(await accept.status(killedAfter: .seconds(60)) == 2, "\(accept.stderr)")
        #expect(accept.stderr.contains("refused or cancelled"))
        #expect(try await b.members(DBusConnection(bus: .address(bus.address))).count == 1)
    }

    /// The acceptor's user types the code it shows itself (the reflex the second code guards
    /// against): both fail, nothing joins.
    @Test func theAcceptorTypingItsOwnCodeFailsBothSides() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let accept = try RunningTool(tool, ["--bus", bus.address, "--bus-name", a.busName, "--json", "accept", "--host", "127.0.0.1"])
        let offer = json(await accept.nextLine())
        let port = try #require(offer["Port"] as? Int), session = try #require(offer["SessionId"] as? String)
        let with = try RunningTool(tool, ["--bus", bus.address, "--bus-name", b.busName, "with", "127.0.0.1:\(port)", "--session", session])
        let code = try #require(await accept.shownCode())
        with.send(code + "\n")
        _ = await with.secondCode()
        accept.send(code + "\n")
        #expect(await accept.status(killedAfter: .seconds(60)) == 1, "\(accept.stderr)")
        #expect(accept.stderr.contains("the typed code did not match"))
        #expect(await with.status(killedAfter: .seconds(60)) == 2, "\(with.stderr)")
        #expect(try await a.members(DBusConnection(bus: .address(bus.address))).count == 1)
        #expect(try await b.members(DBusConnection(bus: .address(bus.address))).count == 1)
    }

    /// No terminal: standard input ends before a code is typed. The session is cancelled with a
    /// message that says so, not a man-in-the-middle warning.
    @Test func noCodeOnStandardInputCancelsWithAClearMessage() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let accept = try RunningTool(tool, ["--bus", bus.address, "--bus-name", a.busName, "--json", "accept", "--host", "127.0.0.1"])
        let offer = json(await accept.nextLine())
        let port = try #require(offer["Port"] as? Int), session = try #require(offer["SessionId"] as? String)
        let with = try RunningTool(tool, ["--bus", bus.address, "--bus-name", b.busName, "with", "127.0.0.1:\(port)", "--session", session])
        with.closeInput()
        #expect(await with.status(killedAfter: .seconds(60)) == 2, "\(with.stderr)")
        #expect(with.stderr.contains("no code was typed: standard input ended"), "\(with.stderr)")
        #expect(!with.stderr.contains("man in the middle"))
        #expect(await accept.status(killedAfter: .seconds(60)) == 2, "\(accept.stderr)")
    }

    /// `--yes` no longer pairs without a person: refused with a usage error saying why.
    @Test func yesIsRefused() async throws {
        for arguments in [["accept", "--yes"], ["with", "h:1", "--session", "0011223344556677", "--yes"]] {
            let (status, _, err) = try await runTool(tool, arguments)
            #expect(status == 64, "\(arguments)")
            #expect(err.contains("each person types the code"), "\(err)")
        }
        let (_, help, _) = try await runTool(tool, ["--help"])
        #expect(!help.contains("--yes") && !help.contains("--test-auto-confirm"))
    }

    /// Issue 26: a dial to a port nothing listens on says so in words with the fix, exit 4; no
    /// "errno", no D-Bus error name (the socket is bound, never listening: the kernel refuses).
    @Test func aClosedPortIsSaidInWordsWithTheFix() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let b = try await RingNode.start(bus, name: "beta")
        let closed = try BoundNotListening()
        defer { closed.close() }
        let (status, out, err) = try await runTool(tool, ["--bus", bus.address, "--bus-name", b.busName, "with", "127.0.0.1:\(closed.port)",
                                                          "--session", "0011223344556677", "--code", "123456"])
        #expect(status == 4, "\(err)")
        #expect(out.isEmpty)
        #expect(err == "bt-pair with: cannot reach \"127.0.0.1:\(closed.port)\": nothing is listening there: is `bt-pair accept` still "
                + "running on that machine, and is the port the one it printed? (UnknownDevice)\n", "\(err)")
        #expect(!err.contains("errno") && !err.contains("org.baton.Error"), "\(err)")
    }

    @Test func usageErrorsExit64() async throws {
        for arguments in [["bogus"], ["with"], ["with", "h:1"], ["--frobnicate"], ["remove"], ["list", "extra"], ["--bus"]] {
            let (status, out, err) = try await runTool(tool, arguments)
            #expect(status == 64, "\(arguments)")
            // One line and where help is, not the whole usage (issue 26).
            #expect(out.isEmpty && err.hasPrefix("bt-pair: ") && err.hasSuffix(" --help'.\n") && !err.contains("usage:"), "\(arguments): \(err)")
        }
        #expect(try await runTool(tool, ["--help"]).0 == 0)
    }
}

/// A TCP socket bound to a free port on 127.0.0.1 that never listens: a connect to it is refused.
struct BoundNotListening {
    let descriptor: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CocoaError(.fileNoSuchFile) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddr in
                bind(fd, sockaddr, length) == 0 && getsockname(fd, sockaddr, &length) == 0
            }
        }
        guard bound else { Glibc.close(fd); throw CocoaError(.fileNoSuchFile) }
        descriptor = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    func close() { Glibc.close(descriptor) }
}
