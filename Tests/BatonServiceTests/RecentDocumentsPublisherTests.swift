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

/// publishers.conf with the recent publisher on.
private func enableRecentPublisher(_ environment: [String: String]) throws {
    let directory = environment["XDG_CONFIG_HOME"]! + "/baton"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try "recent = on\n".write(toFile: directory + "/publishers.conf", atomically: true, encoding: .utf8)
}
