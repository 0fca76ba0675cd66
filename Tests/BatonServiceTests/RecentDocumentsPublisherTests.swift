// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonClient
import BatonCrypto
import BatonStore
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// The list as GLib's GBookmarkFile writes it for Gtk.RecentManager.add_full.
private func recentList(_ path: String, type: String, at date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    let time = formatter.string(from: date)
    let href = URL(fileURLWithPath: path).absoluteString
    return """
        <?xml version="1.0" encoding="UTF-8"?>
        <xbel version="1.0" xmlns:bookmark="http://www.freedesktop.org/standards/desktop-bookmarks" xmlns:mime="http://www.freedesktop.org/standards/shared-mime-info">
          <bookmark href="\(href)" added="\(time)" modified="\(time)" visited="\(time)">
            <info><metadata owner="http://freedesktop.org"><mime:mime-type type="\(type)"/>
              <bookmark:applications><bookmark:application name="test" exec="&apos;test %u&apos;" modified="\(time)" count="1"/></bookmark:applications>
            </metadata></info>
          </bookmark>
        </xbel>
        """
}

@Suite("BatonServiceTests: the session agent offers the document just opened", .serialized)
struct RecentDocumentsPublisherTests {
    @Test("a newly opened document becomes the current activity with its bytes attached and no path anywhere")
    func offersTheOpenedDocument() async throws {
        try await withService { fixture in
            let store = try SnapshotStore(directory: fixture.stateDirectory + "/documents", perDocumentLimit: 1 << 20, perUserLimit: 1 << 20)
            await fixture.service.useDocuments(store)
            let home = fixture.bus.directory.appendingPathComponent("home")
            let documents = home.appendingPathComponent("Documents")
            try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
            let environment = ["XDG_DATA_HOME": home.appendingPathComponent("share").path, "XDG_CONFIG_HOME": home.appendingPathComponent("config").path]
            try FileManager.default.createDirectory(atPath: environment["XDG_DATA_HOME"]!, withIntermediateDirectories: true)
            let content = Array("%PDF-1.4 quarterly report".utf8)
            let file = documents.appendingPathComponent("Quarterly report.pdf")
            try Data(content).write(to: file)
            let list = URL(fileURLWithPath: environment["XDG_DATA_HOME"]! + "/recently-used.xbel")

            let connection = BatonConnection(connection: try fixture.connect())
            defer { connection.close() }
            // The test bus lives in /tmp, which the real filter refuses; everything else is as shipped.
            let filter = RecentDocumentFilter(excludedRoots: RecentDocumentFilter.defaultExcludedRoots.filter { $0 != "/tmp" })
            let start = Date()
            let publisher = RecentDocumentsPublisher(daemon: connection, environment: environment, filter: filter,
                                                     logger: CollectingAgentLog(), since: start)

            // Off by default: the document is not offered.
            try recentList(file.path, type: "application/pdf", at: start.addingTimeInterval(1)).write(to: list, atomically: true, encoding: .utf8)
            await publisher.checkOnce()
            #expect(try await connection.activities().isEmpty)

            try enableRecentPublisher(environment)
            try recentList(file.path, type: "application/pdf", at: start.addingTimeInterval(2)).write(to: list, atomically: true, encoding: .utf8)
            await publisher.checkOnce()
            let path = try #require(try await connection.currentActivityPath())
            let info = try await connection.activity(at: path)
            #expect(info.activityType == RecentDocumentsPublisher.activityType)
            #expect(info.title == "Quarterly report.pdf")
            #expect(info.userInfo == [:] && info.webpageURL == nil)
            #expect(info.document?.mediaType == "application/pdf")
            #expect(info.document.map { !$0.id.contains("/") && !$0.id.contains("Documents") } == true)
            let served = try #require(await fixture.service.documentForTransfer(uid: getuid()))
            #expect(served.info.digest == SHA256.hash(content) && served.info.totalSize == UInt64(content.count))

            // The list rewritten with nothing newer offers nothing again.
            await publisher.checkOnce()
            #expect(try await connection.activities().count == 1)
        }
    }

    @Test("documents in hidden places are never offered")
    func hiddenPlaces() async throws {
        try await withService { fixture in
            let home = fixture.bus.directory.appendingPathComponent("home")
            let hidden = home.appendingPathComponent(".private")
            try FileManager.default.createDirectory(at: hidden, withIntermediateDirectories: true)
            let environment = ["XDG_DATA_HOME": home.path, "XDG_CONFIG_HOME": home.appendingPathComponent("config").path]
            try enableRecentPublisher(environment)
            let file = hidden.appendingPathComponent("secret.pdf")
            try Data("%PDF".utf8).write(to: file)
            let connection = BatonConnection(connection: try fixture.connect())
            defer { connection.close() }
            let filter = RecentDocumentFilter(excludedRoots: [])
            let start = Date()
            let publisher = RecentDocumentsPublisher(daemon: connection, environment: environment, filter: filter,
                                                     logger: CollectingAgentLog(), since: start)
            try recentList(file.path, type: "application/pdf", at: start.addingTimeInterval(1))
                .write(toFile: home.path + "/recently-used.xbel", atomically: true, encoding: .utf8)
            await publisher.checkOnce()
            #expect(try await connection.activities().isEmpty)
        }
    }
}

extension RecentDocumentsPublisherTests {
    @Test("a started publisher sleeps until the list is replaced, follows recent-types, and withdraws when turned off")
    func followsTheListWithoutPolling() async throws {
        try await withService { fixture in
            let store = try SnapshotStore(directory: fixture.stateDirectory + "/documents", perDocumentLimit: 1 << 20, perUserLimit: 1 << 20)
            await fixture.service.useDocuments(store)
            let home = fixture.bus.directory.appendingPathComponent("home")
            let documents = home.appendingPathComponent("Documents")
            try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
            let environment = ["XDG_DATA_HOME": home.appendingPathComponent("share").path, "XDG_CONFIG_HOME": home.appendingPathComponent("config").path]
            let settingsFile = environment["XDG_CONFIG_HOME"]! + "/baton/publishers.conf"
            try FileManager.default.createDirectory(atPath: environment["XDG_CONFIG_HOME"]! + "/baton", withIntermediateDirectories: true)
            try "recent = on\nrecent-types = text/plain\n".write(toFile: settingsFile, atomically: true, encoding: .utf8)
            let pdf = documents.appendingPathComponent("Plan.pdf"), text = documents.appendingPathComponent("Notes.txt")
            try Data("%PDF-1.4".utf8).write(to: pdf)
            try Data("notes".utf8).write(to: text)
            let list = environment["XDG_DATA_HOME"]! + "/recently-used.xbel"

            let connection = BatonConnection(connection: try fixture.connect())
            defer { connection.close() }
            let filter = RecentDocumentFilter(excludedRoots: RecentDocumentFilter.defaultExcludedRoots.filter { $0 != "/tmp" })
            let start = Date()
            let publisher = RecentDocumentsPublisher(daemon: connection, environment: environment, filter: filter,
                                                     logger: CollectingAgentLog(), since: start)
            // The data directory does not exist yet: start makes it and watches it.
            try await publisher.start()
            defer { Task { await publisher.stop() } }

            // Idle: no wakeup at all (the polling publisher read the list's status once a second).
            try await Task.sleep(for: .milliseconds(1500))
            #expect(await publisher.changesHandled == 0)

            // A PDF is not among the chosen types: the list is read, nothing is offered.
            try recentList(pdf.path, type: "application/pdf", at: start.addingTimeInterval(1)).write(toFile: list, atomically: true, encoding: .utf8)
            #expect(try await eventually(timeout: .seconds(10)) { await publisher.changesHandled >= 1 })
            #expect(try await connection.activities().isEmpty)

            // Replaced by rename (Foundation's atomic write, as GLib's): the text file is offered.
            try recentList(text.path, type: "text/plain", at: start.addingTimeInterval(2)).write(toFile: list, atomically: true, encoding: .utf8)
            #expect(await eventually(timeout: .seconds(10)) { (try? await connection.currentActivityPath()) != nil })
            let path = try #require(try await connection.currentActivityPath())
            #expect(try await connection.activity(at: path).title == "Notes.txt")

            // publishers.conf is watched too: turning the publisher off withdraws the offer at once.
            try "recent = off\n".write(toFile: settingsFile, atomically: true, encoding: .utf8)
            // try?: a listing that meets the activity while it is being removed fails ("lacks Type or Status").
            #expect(await eventually(timeout: .seconds(10)) { (try? await connection.activities())?.isEmpty == true })
        }
    }
}

/// publishers.conf with the recent publisher on.
private func enableRecentPublisher(_ environment: [String: String]) throws {
    let directory = environment["XDG_CONFIG_HOME"]! + "/baton"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try "recent = on\n".write(toFile: directory + "/publishers.conf", atomically: true, encoding: .utf8)
}
