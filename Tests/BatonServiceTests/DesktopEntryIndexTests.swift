// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// A temporary XDG data directory with an `applications/` folder.
struct DesktopFolder {
    let root: URL
    var applications: URL { root.appendingPathComponent("applications") }

    init() throws {
        root = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-index-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("applications"), withIntermediateDirectories: true)
    }

    func write(_ id: String, types: String, into folder: URL? = nil) throws {
        try "[Desktop Entry]\nExec=\(id)\nX-Baton-ActivityTypes=\(types)\n"
            .write(to: (folder ?? applications).appendingPathComponent(id + ".desktop"), atomically: true, encoding: .utf8)
    }

    func remove() { try? FileManager.default.removeItem(at: root) }
}

@Suite("BatonServiceTests: the handled-types index (issue 12)")
struct DesktopEntryIndexTests {
    @Test func answersFromMemoryUntilAFolderChanges() throws {
        let folder = try DesktopFolder()
        defer { folder.remove() }
        try folder.write("reader", types: "org.e.Reader.t;")
        let index = DesktopEntryIndex(scanner: XDGDesktopEntryScanner(dataDirectories: [folder.root.path]))
        for _ in 0..<5 { #expect(index.entries().map(\.id) == ["reader"]) }
        #expect(index.scanCount == 1)
    }

    @Test func followsANewDesktopFileAndARemovedOne() async throws {
        let folder = try DesktopFolder()
        defer { folder.remove() }
        let index = DesktopEntryIndex(scanner: XDGDesktopEntryScanner(dataDirectories: [folder.root.path]))
        #expect(index.entries().isEmpty)
        try folder.write("writer", types: "org.e.Writer.t;")
        #expect(await eventually { index.entries().map(\.id) == ["writer"] })
        // The write's last events (rename, close) may still arrive: let them, then ask again and again.
        try await Task.sleep(for: .milliseconds(300))
        _ = index.entries()
        let scans = index.scanCount
        for _ in 0..<5 { #expect(index.entries().map(\.id) == ["writer"]) }
        #expect(index.scanCount == scans)
        try FileManager.default.removeItem(at: folder.applications.appendingPathComponent("writer.desktop"))
        #expect(await eventually { index.entries().isEmpty })
    }

    @Test func followsSubfoldersAndAnApplicationsFolderCreatedLater() async throws {
        let root = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-index-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let index = DesktopEntryIndex(scanner: XDGDesktopEntryScanner(dataDirectories: [root.path]))
        #expect(index.entries().isEmpty)
        let vendor = root.appendingPathComponent("applications/vendor")
        try FileManager.default.createDirectory(at: vendor, withIntermediateDirectories: true)
        #expect(await eventually { index.entries().isEmpty && index.scanCount >= 2 })
        try "[Desktop Entry]\nExec=x\nX-Baton-ActivityTypes=org.e.Vendor.t;\n"
            .write(to: vendor.appendingPathComponent("app.desktop"), atomically: true, encoding: .utf8)
        #expect(await eventually { index.entries().map(\.id) == ["vendor-app"] })
    }

    /// The continuation asks for the handled types on every new revision heard: from memory.
    @Test func handledTypesPerAdvertDoNotRescan() async throws {
        let folder = try DesktopFolder()
        defer { folder.remove() }
        try folder.write("reader", types: "org.e.Reader.t;")
        let index = DesktopEntryIndex(scanner: XDGDesktopEntryScanner(dataDirectories: [folder.root.path]))
        var options = FixtureOptions()
        options.desktopEntries = index
        try await withService(options) { fixture in
            for _ in 0..<20 { #expect(await fixture.handlers.allHandledTypes() == ["org.e.Reader.t"]) }
            #expect(index.scanCount == 1)
        }
    }
}
