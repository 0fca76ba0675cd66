// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonClient
import Foundation
import Synchronization
import Testing

/// Records what would have been opened with the default application.
private final class RecordingURLOpener: URLOpener {
    let opened = Mutex<[String]>([])
    func open(_ url: String) async throws { opened.withLock { $0.append(url) } }
}

@Suite("BatonAgentTests: a received recent document is saved and opened")
struct RecentDocumentReceiverTests {
    private func continued(title: String, bytes: [UInt8], in directory: URL) throws -> ContinuedActivity {
        let source = directory.appendingPathComponent("snapshot-\(UUID().uuidString)")
        try Data(bytes).write(to: source)
        let descriptor = open(source.path, O_RDONLY)
        try #require(descriptor >= 0)
        return ContinuedActivity(activityType: RecentDocumentsPublisher.activityType, title: title, userInfo: [:], webpageURL: nil, version: 0,
                                 device: "laptop", document: ContinuedDocument(id: "d", mediaType: "application/pdf", size: UInt64(bytes.count),
                                                                               digest: "", descriptor: descriptor))
    }

    @Test func theBytesAreSavedUnderTheDisplayNameAndOpened() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("receiver-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let opener = RecordingURLOpener()
        let receiver = RecentDocumentReceiver(directory: root.appendingPathComponent("received"), opener: opener)
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }

        let first = try await receiver.receive(try continued(title: "Report.pdf", bytes: bytes, in: root))
        #expect(first.lastPathComponent == "Report.pdf")
        #expect(try Array(Data(contentsOf: first)) == bytes)
        // A second one of the same name never replaces the first.
        let second = try await receiver.receive(try continued(title: "Report.pdf", bytes: [1, 2, 3], in: root))
        #expect(second.lastPathComponent == "Report (2).pdf")
        #expect(try Array(Data(contentsOf: first)) == bytes)
        #expect(opener.opened.withLock { $0 } == [first.absoluteString, second.absoluteString])
    }

    @Test func aPeersTitleCannotLeaveTheDirectoryOrHide() {
        #expect(RecentDocumentReceiver.safeName("../../.bashrc") == "_.._.bashrc")
        #expect(RecentDocumentReceiver.safeName(".hidden") == "hidden")
        #expect(RecentDocumentReceiver.safeName("") == "document")
        #expect(RecentDocumentReceiver.safeName("a/b\nc") == "a_b_c")
    }

    @Test func anActivityWithoutADocumentIsRefused() async {
        let receiver = RecentDocumentReceiver(directory: URL(fileURLWithPath: "/nonexistent"), opener: RecordingURLOpener())
        await #expect(throws: RecentDocumentReceiver.Failure.noDocument) {
            try await receiver.receive(ContinuedActivity(activityType: RecentDocumentsPublisher.activityType, title: "x", userInfo: [:],
                                                         webpageURL: nil, version: 0, device: "d"))
        }
    }
}
