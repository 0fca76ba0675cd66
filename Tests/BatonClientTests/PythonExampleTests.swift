// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonClient
import BatonCore
import Foundation
import Testing

@Suite("Python example against batond", .serialized)
struct PythonExampleTests {
    static let python = "/usr/bin/python3"
    static var script: String { Built.packageRoot.appendingPathComponent("examples/python/reader.py").path }

    /// python3-dbus and python3-gi (Debian packages) are needed; the test fails clearly without them.
    @Test("reader.py publishes its activity, answers WillSave with fresh state and registers its handler")
    func readerExample() async throws {
        let modules = try await runTool(Self.python, ["-c", "import dbus, dbus.mainloop.glib; from gi.repository import GLib"])
        try #require(modules.status == 0, "install python3-dbus and python3-gi: \(modules.stderr)")

        try await withDaemon { daemon in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.python)
            process.arguments = [Self.script, "--bus", daemon.bus.address, "--bus-name", daemon.busName, "--for", "30"]
            let output = ChildPipe()
            let errors = ChildPipe()
            process.standardOutput = output
            process.standardError = errors
            let exited = AsyncStream.makeStream(of: Int32.self)
            process.terminationHandler = { exited.continuation.yield($0.terminationStatus) }
            try launch(process)
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

            let connection = try daemon.connect()
            defer { connection.close() }
            try await eventually(timeout: .seconds(10), "reader.py's activity becomes current") {
                guard process.isRunning else { return true }
                return try await connection.activities().first?.isCurrent == true
            }
            try #require(process.isRunning, "reader.py exited early: \(String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self))")
            let info = try #require(try await connection.activities().first)
            #expect(info.activityType == "org.example.Reader.reading")
            #expect(info.title == "Dune, page 1")
            #expect(info.needsSave == true)
            #expect(info.version == 1)
            #expect(info.webpageURL == "https://example.org/books/dune")
            let expectedUserInfo: [String: PropertyValue] = [
                "book": .string("Dune"), "page": .integer(1), "progress": .double(0.01), "bookmarked": .boolean(true),
                "cover": .bytes([0x89, 0x50, 0x4E, 0x47]), "openedAt": .date(1_795_953_600),
                "chapters": .array([.string("Prologue"), .string("Book One")]),
                "position": .dictionary(["line": .integer(12), "column": .integer(3)]),
            ]
            #expect(info.userInfo == expectedUserInfo)
            #expect(try await connection.handledTypes() == ["org.example.Reader.reading"])

            // GetPayload runs the WillSave exchange: the example answers with the page it is on now.
            let payload = try await connection.payload(ofActivityAt: info.path)
            #expect(payload.title == "Dune, page 2")
            var freshUserInfo = expectedUserInfo
            freshUserInfo["page"] = .integer(2)
            freshUserInfo["progress"] = .double(0.02)
            #expect(payload.userInfo == freshUserInfo)
            // With --no-radio a current activity may record radio-unavailable, but WillSave was answered in time.
            let lastError = try await connection.activity(at: info.path).lastError
            #expect(lastError != "source-timeout" && lastError != "source-gone", "\(lastError ?? "none")")

            kill(process.processIdentifier, SIGTERM)
            var status: Int32?
            for await code in exited.stream {
                status = code
                break
            }
            #expect(status == 0)
            let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(printed.hasPrefix("activity \(info.path)\n"), "\(printed)")
            #expect(printed.contains("WillSave \(info.path) -> page 2"), "\(printed)")
            try await eventually("activity gone after reader.py quits") { try await connection.activities().isEmpty }
        }
    }
}
