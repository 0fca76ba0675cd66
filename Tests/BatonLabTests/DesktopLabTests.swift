// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// What the lab's desktop apps heard: the handler on beta and the source app on alpha.
final class DesktopLabRecorder: Sendable {
    private let state = Mutex<(calls: [String], userInfo: [DBusValue], continued: [String])>(([], [], []))
    func call(_ text: String) { state.withLock { $0.calls.append(text) } }
    func delivered(_ userInfo: DBusValue) { state.withLock { $0.userInfo.append(userInfo) } }
    func wasContinued(_ device: String) { state.withLock { $0.continued.append(device) } }
    var calls: [String] { state.withLock { $0.calls } }
    var userInfo: [DBusValue] { state.withLock { $0.userInfo } }
    var continued: [String] { state.withLock { $0.continued } }
}

/// Issue 13's proof on real bluetoothd: alpha publishes over the air; on beta a real notification
/// server (Debian's dunst on Xvfb) shows what baton-agent posts, and dunst itself invokes the action.
extension TwoDaemonsLabTests {
    static var desktopAvailable: Bool {
        ["/usr/bin/dunst", "/usr/bin/dunstctl", "/usr/bin/Xvfb"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test(.enabled(if: desktopAvailable, "needs dunst, dunstctl and Xvfb (scripts/install-deps)"))
    func aNotificationOnBetaContinuesAlphasActivityOverTheAir() async throws {
        let lab = try DaemonPair()
        defer { lab.stop() }
        // alpha's apps get 20 s to save, so the source can be killed while a fetch waits for it; a
        // fixed port, so beta's endpoint hint still holds after alpha restarts (no DNS-SD in the lab).
        let alphaArguments = ["--save-timeout", "20", "--port", "47321"]
        try lab.start(name: "alpha", adapter: "hci0", extraArguments: alphaArguments)
        try lab.start(name: "beta", adapter: "hci1", extraArguments: ["--away-after", "300"])
        #expect(await lab.eventually(10) { (try? await lab.cli("bt-pair", "beta", ["list"]))?.0 == 0 })
        try await pairOverTCP(lab)

        // The session on beta: the lab bus doubles as its session bus; dunst draws on Xvfb.
        let desktop = try await LabDesktopSession(lab: lab)
        defer { desktop.stop() }
        let opened = lab.directory.appendingPathComponent("opened-url").path
        try writeTestBrowser(in: lab.directory, recordingTo: opened)
        func dunstctl(_ arguments: [String]) async throws -> String { await desktop.dunstctl(arguments) }
        try #require(desktop.answering, "dunst did not start:\n\(desktop.problems.joined(separator: "\n"))")
        _ = try desktop.spawn(product("baton-agent"), ["--bus", lab.address, "--bus-name", "org.baton.beta"],
                                      log: lab.directory.appendingPathComponent("agent.log").path)

        // beta's reader app accepts activity versions 0-1 only.
        let type = "org.example.Reader.reading"
        let recorder = DesktopLabRecorder()
        let reader = try DBusConnection(bus: .address(lab.address))
        defer { reader.close() }
        try await reader.export([DBusInterface("org.baton.ActivityHandler1", methods: [
            DBusMethod("WillContinue", in: [.init("type", "s"), .init("device", "s")], out: [.init("accept", "b")]) { _ in
                recorder.call("WillContinue")
                return [.boolean(true)]
            },
            DBusMethod("Continue", in: [.init("type", "s"), .init("title", "s"), .init("userInfo", "a{sv}"), .init("info", "a{sv}")]) { call in
                recorder.call("Continue \(call.arguments[1].stringValue ?? "")")
                recorder.delivered(call.arguments[2])
                return []
            },
            DBusMethod("FailedToContinue", in: [.init("type", "s"), .init("error", "s"), .init("message", "s")]) { call in
                recorder.call("FailedToContinue \(call.arguments[1].stringValue ?? "")")
                return []
            },
        ])], at: "/reader")
        let versions = DBusValue.propertyDictionary(["Versions": .array(elementSignature: "(xx)", [.structure([.int64(0), .int64(1)])])])
        _ = try await reader.call(destination: "org.baton.beta", path: "/org/baton", interface: "org.baton.Manager1",
                                  method: "RegisterHandlerWithOptions", arguments: [.objectPath("/reader"), .stringArray([type]), versions],
                                  timeout: .seconds(10))

        // alpha's source app (slow to save while `slowSave` is set, to be killed mid-fetch).
        let slowSave = Mutex(false)
        let source = try DBusConnection(bus: .address(lab.address))
        defer { source.close() }
        try await source.export([DBusInterface("org.baton.ActivitySource1", methods: [
            DBusMethod("WillSave", in: [.init("activity", "o")], out: [.init("changes", "a{sv}")]) { _ in
                if slowSave.withLock({ $0 }) { try? await Task.sleep(for: .seconds(15)) }
                return [.propertyDictionary([:])]
            },
            DBusMethod("WasContinued", in: [.init("activity", "o"), .init("device", "s")]) { call in
                recorder.wasContinued(call.arguments[1].stringValue ?? "")
                return []
            },
        ])], at: "/source")
        let userInfo: [String: DBusValue] = ["page": .int64(2), "book": .string("Dune"), "position": .double(0.25)]
        func publish(_ type: String, title: String, version: Int64, url: String? = nil) async throws -> String {
            var options: [String: DBusValue] = ["Version": .int64(version), "Source": .objectPath("/source"), "NeedsSave": .boolean(true)]
            if let url { options["WebpageURL"] = .string(url) }
            let reply = try await source.call(destination: "org.baton.alpha", path: "/org/baton", interface: "org.baton.Manager1", method: "CreateActivity",
                                              arguments: [.string(type), .string(title), .propertyDictionary(userInfo), .propertyDictionary(options)],
                                              timeout: .seconds(10))
            let path = try #require(reply.first?.objectPathValue)
            _ = try await source.call(destination: "org.baton.alpha", path: path, interface: "org.baton.Activity1", method: "BecomeCurrent", timeout: .seconds(10))
            return path
        }
        func invalidate(_ path: String) async throws {
            _ = try await source.call(destination: "org.baton.alpha", path: path, interface: "org.baton.Activity1", method: "Invalidate", timeout: .seconds(10))
        }
        func shown() async -> String { (try? await dunstctl(["count", "displayed"])) ?? "" }
        func history() async -> String { (try? await dunstctl(["history"])) ?? "" }
        let logs = { "beta:\n\(lab.log("beta"))\nagent:\n\(lab.log("agent"))" }

        // 1. Publish on alpha: the notification appears in dunst on beta; dunst invokes its action.
        let first = try await publish(type, title: "Dune, page 2", version: 1)
        #expect(await lab.eventually(30) { await shown() == "1" }, "\(logs())")
        _ = try await dunstctl(["action", "0"])
        #expect(await lab.eventually(20) { recorder.userInfo.count == 1 }, "\(recorder.calls)\n\(logs())")
        #expect(recorder.userInfo.first?.asDictionary == userInfo.mapValues { $0 }, "the handler got other userInfo")
        #expect(recorder.calls == ["WillContinue", "Continue Dune, page 2"])
        #expect(await lab.eventually(15) { recorder.continued == ["beta"] })
        #expect(await lab.eventually(10) { await shown() == "0" })
        // Read back from dunst: a closed notification moves to its history.
        let shownHistory = await history()
        #expect(shownHistory.contains("Reader reading") && shownHistory.contains("from alpha"), "\(shownHistory)")

        // 2. Withdrawing closes the notification.
        try await invalidate(first)
        let second = try await publish(type, title: "Dune, page 3", version: 1)
        #expect(await lab.eventually(30) { await shown() == "1" }, "\(logs())")
        try await invalidate(second)
        #expect(await lab.eventually(30) { await shown() == "0" }, "\(logs())")

        // 3. A version the reader did not declare is refused: FailedToContinue, no Continue, no WasContinued.
        let third = try await publish(type, title: "Dune, page 4", version: 5)
        #expect(await lab.eventually(30) { await shown() == "1" }, "\(logs())")
        _ = try await dunstctl(["action", "0"])
        #expect(await lab.eventually(20) { recorder.calls.last == "FailedToContinue versionUnsupported" }, "\(recorder.calls)\n\(logs())")
        try await Task.sleep(for: .seconds(1))
        #expect(recorder.continued == ["beta"] && recorder.userInfo.count == 1)
        try await invalidate(third)
        #expect(await lab.eventually(30) { await shown() == "0" }, "\(logs())")

        // 4. A type beta has no app for, with a URL: "Open in browser" reaches the test https handler.
        let page = try await publish("org.example.Web.page", title: "A page", version: 1, url: "https://example.org/dune#2")
        #expect(await lab.eventually(30) { await shown() == "1" }, "\(logs())")
        _ = try await dunstctl(["action", "0"])
        #expect(await lab.eventually(20) { (try? String(contentsOfFile: opened, encoding: .utf8)) == "https://example.org/dune#2" }, "\(logs())")
        #expect(await lab.eventually(15) { recorder.continued == ["beta", "beta"] })
        let browserHistory = await history()
        #expect(browserHistory.contains("in the browser"), "\(browserHistory)")
        try await invalidate(page)
        #expect(await lab.eventually(30) { await shown() == "0" }, "\(logs())")

        // 5. The source killed mid-fetch: interrupted; after a restart the retry succeeds.
        slowSave.withLock { $0 = true }
        _ = try await publish(type, title: "Dune, page 5", version: 1)
        let offered = try #require(try await lab.eventually(30) { try await suggestionPath(lab) != nil } ? try await suggestionPath(lab) : nil)
        let taking = Task { try await runTool("/usr/bin/dbus-send", ["--bus=\(lab.address)", "--print-reply", "--reply-timeout=60000",
                                                                     "--dest=org.baton.beta", offered, "org.baton.Suggestion1.Continue"]) }
        try await Task.sleep(for: .seconds(2))
        if let alpha = lab.named["alpha"] { kill(alpha.processIdentifier, SIGKILL); alpha.waitUntilExit() }
        let (status, _, error) = try await taking.value
        #expect(status != 0 && error.contains("interrupted"), "\(error)\n\(logs())")
        slowSave.withLock { $0 = false }
        try lab.start(name: "alpha", adapter: "hci0", extraArguments: alphaArguments)
        #expect(await lab.eventually(20) { (try? await lab.cli("baton", "alpha", ["status"]))?.0 == 0 })
        _ = try await publish(type, title: "Dune, page 6", version: 1)
        // The new revision's suggestion, not the one the killed fetch was for (it stays until beta
        // hears the restarted alpha: taken at once, it is noLongerCurrent).
        #expect(await lab.eventually(30) { ((try? await suggestionPath(lab)) ?? nil).map { $0 != offered } ?? false }, "\(logs())")
        let retry = try #require(try await suggestionPath(lab))
        let (retryStatus, reply, retryError) = try await runTool("/usr/bin/dbus-send", ["--bus=\(lab.address)", "--print-reply",
            "--reply-timeout=60000", "--dest=org.baton.beta", retry, "org.baton.Suggestion1.Continue"])
        #expect(retryStatus == 0 && reply.contains("delivered"), "\(reply)\(retryError)\n\(logs())")
        #expect(recorder.calls.last == "Continue Dune, page 6")
    }

    /// The first Suggestion1 object beta shows, if any.
    func suggestionPath(_ lab: DaemonPair) async throws -> String? {
        let (_, out, _) = try await runTool("/usr/bin/dbus-send", ["--bus=\(lab.address)", "--print-reply", "--dest=org.baton.beta",
            "/org/baton", "org.freedesktop.DBus.ObjectManager.GetManagedObjects"])
        return out.components(separatedBy: "object path \"").dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
            .first { $0.hasPrefix("/org/baton/suggestion/") }
    }

    /// A test "browser": the session's default https handler (mimeapps.list), writing down its URL.
    func writeTestBrowser(in directory: URL, recordingTo file: String) throws {
        let applications = directory.appendingPathComponent("data/applications"), config = directory.appendingPathComponent("config")
        for folder in [applications, config] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        let script = directory.appendingPathComponent("test-browser.sh")
        try "#!/bin/sh\nprintf '%s' \"$1\" > \(file)\n".write(to: script, atomically: true, encoding: .utf8)
        chmod(script.path, 0o755)
        try "[Desktop Entry]\nType=Application\nName=Test Browser\nExec=\(script.path) %u\nMimeType=x-scheme-handler/https;\nNoDisplay=true\n"
            .write(to: applications.appendingPathComponent("org.example.TestBrowser.desktop"), atomically: true, encoding: .utf8)
        try "[Default Applications]\nx-scheme-handler/https=org.example.TestBrowser.desktop\n"
            .write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)
    }

    func spawn(_ path: String, _ arguments: [String], environment: [String: String], log: String? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = environment
        if let log {
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: log)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        process.standardOutput = FileHandle.nullDevice
        try launch(process)
        return process
    }
}
