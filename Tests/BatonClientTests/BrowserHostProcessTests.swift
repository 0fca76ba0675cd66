// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// The browser's side of native messaging, played by the test: frames to the host's stdin, and
/// the host's frames read back from its stdout.
struct FakeBrowser {
    let process = Process()
    let stdin = ChildPipe()
    let stdout = ChildPipe()
    let received = HostFrames()

    init(daemon: DaemonFixture, enabled: Bool = true) throws {
        try self.init(busAddress: daemon.bus.address, busName: daemon.busName, directory: daemon.bus.directory, enabled: enabled)
    }

    init(busAddress: String, busName: String, directory: URL, enabled: Bool = true, log: URL? = nil) throws {
        process.executableURL = URL(fileURLWithPath: try Built.executable("baton-browser-host"))
        // What Chromium passes: the extension's origin.
        process.arguments = ["chrome-extension://ncnikhcegemmombopokkmfofiobceefk/"]
        var environment = ProcessInfo.processInfo.environment
        environment["BATON_BUS"] = busAddress
        environment["BATON_BUS_NAME"] = busName
        environment["XDG_CONFIG_HOME"] = try publisherConfig(in: directory, browser: enabled)
        process.environment = environment
        process.standardInput = stdin
        process.standardOutput = stdout
        if let log {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: log)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try launch(process)
        received.collect(from: stdout.fileHandleForReading)
    }

    func send(_ json: String) throws {
        let body = Array(json.utf8)
        let length = UInt32(body.count)
        try stdin.fileHandleForWriting.write(contentsOf: withUnsafeBytes(of: length) { Array($0) } + body)
    }

    /// The browser closing: the host sees end of file.
    func close() throws {
        try stdin.fileHandleForWriting.close()
        for _ in 0..<500 where process.isRunning { usleep(10_000) }
    }

    /// SIGKILL: a process started by Foundation's Process inherits a mask with SIGTERM blocked.
    func kill() { if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) } }
}

/// What the host wrote to its stdout (to the browser), split into native messaging frames. A
/// thread of its own reads the pipe until the host closes it.
final class HostFrames: Sendable {
    private let bytes = Mutex<[UInt8]>([])

    func collect(from handle: FileHandle) {
        let thread = Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                self.bytes.withLock { $0.append(contentsOf: data) }
            }
        }
        thread.start()
    }

    /// Every complete frame so far, each as the JSON object it carries.
    var messages: [[String: Any]] {
        let buffer = bytes.withLock { $0 }
        var messages: [[String: Any]] = []
        var start = 0
        while buffer.count - start >= 4 {
            let length = Int(buffer[start..<(start + 4)].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
            guard buffer.count - start - 4 >= length else { break }
            let body = Data(buffer[(start + 4)..<(start + 4 + length)])
            messages.append((try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? ["unreadable": body.count])
            start += 4 + length
        }
        return messages
    }
}

/// A config directory whose publishers.conf turns the browser publisher on or off.
func publisherConfig(in daemon: DaemonFixture, browser: Bool) throws -> String {
    try publisherConfig(in: daemon.bus.directory, browser: browser)
}

/// The same, made inside `parent`.
func publisherConfig(in parent: URL, browser: Bool) throws -> String {
    let directory = parent.appendingPathComponent("config-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory.appendingPathComponent("baton"), withIntermediateDirectories: true)
    try "browser = \(browser ? "on" : "off")\n".write(to: directory.appendingPathComponent("baton/publishers.conf"), atomically: true, encoding: .utf8)
    return directory.path
}

/// Polls `probe` until it returns a value (the host and browser talk to the daemon in their own time).
func awaitValue<T>(_ what: String, timeout: Duration = .seconds(120), _ probe: () async throws -> T?) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let value = try await probe() { return value }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw FixtureError.timedOut(what)
}

@Suite("baton-browser-host against batond", .serialized)
struct BrowserHostProcessTests {
    @Test("pages become the current activity, tab switches update it, losing focus resigns, closing ends it")
    func pageLifecycle() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let browser = try FakeBrowser(daemon: daemon)
            defer { browser.kill() }

            // The host offers to open pages continued from other devices in its browser.
            _ = try await awaitValue("handler registered") {
                try await connection.handledTypes().contains("org.baton.web-browsing") ? true : nil
            }

            try browser.send(#"{"kind":"current","title":"Example","url":"https://example.org/a","scrollX":0,"scrollY":640}"#)
            let path = try await awaitValue("current activity") { try await connection.currentActivityPath() }
            var info = try await connection.activity(at: path)
            #expect(info.activityType == "org.baton.web-browsing")
            #expect(info.title == "Example")
            #expect(info.webpageURL == "https://example.org/a")
            #expect(info.userInfo == ["scrollX": .double(0), "scrollY": .double(640)])

            // A private page never goes to the daemon, whatever the extension sends.
            try browser.send(#"{"kind":"current","title":"Secret","url":"file:///home/me/secret.html"}"#)
            try browser.send(#"{"kind":"current","title":"Second tab","url":"http://example.org/b"}"#)
            info = try await awaitValue("tab switch") {
                let info = try await connection.activity(at: path)
                return info.title == "Example" ? nil : info
            }
            #expect(info.title == "Second tab")
            #expect(info.webpageURL == "http://example.org/b")
            #expect(info.userInfo == [:])
            #expect(try await connection.activities().count == 1)

            try browser.send(#"{"kind":"resign"}"#)
            _ = try await awaitValue("resigned") { try await connection.currentActivityPath() == nil ? true : nil }
            #expect(try await connection.activity(at: path).isCurrent == false)

            try browser.close()
            _ = try await awaitValue("activity ended") { try await connection.activities().isEmpty ? true : nil }
            #expect(!browser.process.isRunning)
            #expect(browser.process.terminationStatus == 0)
        }
    }

    @Test("a frame announcing more than the limit stops the host and ends its activity")
    func oversizedFrame() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let browser = try FakeBrowser(daemon: daemon)
            defer { browser.kill() }
            try browser.send(#"{"kind":"current","title":"Example","url":"https://example.org/"}"#)
            _ = try await awaitValue("current activity") { try await connection.currentActivityPath() }
            try browser.stdin.fileHandleForWriting.write(contentsOf: [0xff, 0xff, 0xff, 0x7f])
            _ = try await awaitValue("host stopped") { browser.process.isRunning ? nil : true }
            _ = try await awaitValue("activity ended") { try await connection.activities().isEmpty ? true : nil }
        }
    }

    @Test("with the browser publisher off (the default) nothing is published, and turning it off ends the activity")
    func optIn() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let off = try FakeBrowser(daemon: daemon, enabled: false)
            defer { off.kill() }
            try off.send(#"{"kind":"current","title":"Example","url":"https://example.org/"}"#)
            // The host answers in order: once the handler is registered and a later page is handled, the first was skipped.
            _ = try await awaitValue("handler registered") {
                try await connection.handledTypes().contains("org.baton.web-browsing") ? true : nil
            }
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await connection.activities().isEmpty)
            try off.close()

            let on = try FakeBrowser(daemon: daemon, enabled: true)
            defer { on.kill() }
            try on.send(#"{"kind":"current","title":"Example","url":"https://example.org/"}"#)
            _ = try await awaitValue("published when on") { try await connection.currentActivityPath() }
            let config = try #require(on.process.environment?["XDG_CONFIG_HOME"])
            try "browser = off\n".write(toFile: config + "/baton/publishers.conf", atomically: true, encoding: .utf8)
            try on.send(#"{"kind":"current","title":"Other","url":"https://example.org/other"}"#)
            _ = try await awaitValue("withdrawn when turned off") { try await connection.activities().isEmpty ? true : nil }
        }
    }
}
