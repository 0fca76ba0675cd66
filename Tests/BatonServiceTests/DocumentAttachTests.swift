// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import Foundation
import Glibc
import Testing
@testable import BatonService

@Suite("BatonServiceTests: Activity1.AttachDocument over the bus (a descriptor, then the advert)", .serialized)
struct DocumentAttachTests {
    func appFile(_ fixture: ServiceFixture, _ bytes: [UInt8], _ name: String = "drawing.svg") throws -> Int32 {
        let path = fixture.bus.directory.appendingPathComponent(name).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let descriptor = open(path, O_RDONLY)
        #expect(descriptor >= 0)
        return descriptor
    }

    @Test func aCommittedSnapshotIsAdvertisedAndAnEditWithdrawsItUntilTheNext() async throws {
        let publisher = FakePublisher()
        var options = FixtureOptions()
        options.publisher = publisher
        try await withService(options) { fixture in
            let store = try SnapshotStore(directory: fixture.stateDirectory + "/documents", perDocumentLimit: 1 << 20, perUserLimit: 1 << 20)
            await fixture.service.useDocuments(store)
            let client = fixture.client
            let path = try await client.createActivity(title: "Sketch")
            _ = try await client.activity(path, "BecomeCurrent")
            #expect(try await eventually { try await client.property(path, "Status") == .string("published") })

            let content = Array("<svg>first</svg>".utf8)
            let descriptor = try appFile(fixture, content)
            defer { close(descriptor) }
            _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("image/svg+xml"), .string("sketch-1")])
            #expect(try await eventually { try await client.property(path, "Status") == .string("published") })
            #expect(try await client.property(path, "Revision") == .uint32(2))
            let uid = getuid()
            let served = try #require(await fixture.service.documentForTransfer(uid: uid))
            #expect(served.info.digest == SHA256.hash(content) && served.info.totalSize == UInt64(content.count))
            #expect(served.info.mediaType == "image/svg+xml" && served.info.documentID == "sketch-1")
            // The advert carries the activity, never the document's bytes or its path.
            let advertised = try #require(publisher.publications.last)
            #expect(!(try advertised.encoded()).containsSubsequence(content))
            #expect(!String(decoding: try advertised.encoded(), as: UTF8.self).contains("documents"))

            // The app edits: nothing is served or advertised until a fresh snapshot.
            _ = try await client.activity(path, "DocumentEdited")
            #expect(try await client.property(path, "Status") == .string("preparing"))
            #expect(await fixture.service.documentForTransfer(uid: uid) == nil)
            #expect(await eventually { publisher.withdrawals == [uid] })
            let publicationsWhileEditing = publisher.publications.count

            let second = try appFile(fixture, Array("<svg>second</svg>".utf8), "drawing-2.svg")
            defer { close(second) }
            _ = try await client.activity(path, "AttachDocument", [.unixFD(second), .string("image/svg+xml"), .string("sketch-1")])
            #expect(try await eventually { try await client.property(path, "Status") == .string("published") })
            #expect(publisher.publications.count == publicationsWhileEditing + 1)
            #expect(await fixture.service.documentForTransfer(uid: uid)?.info.digest == SHA256.hash(Array("<svg>second</svg>".utf8)))
            // The replaced snapshot is gone from the store; one file per activity.
            #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.stateDirectory + "/documents/\(uid)").count == 1)

            // Invalidating the activity removes its snapshot.
            _ = try await client.activity(path, "Invalidate")
            #expect(await eventually { ((try? FileManager.default.contentsOfDirectory(atPath: fixture.stateDirectory + "/documents/\(uid)")) ?? ["x"]).isEmpty })
        }
    }

    @Test func oversizeSnapshotsBadArgumentsAndDisabledDocumentsAreClearErrors() async throws {
        try await withService { fixture in
            let client = fixture.client
            let path = try await client.createActivity(title: "Sketch")
            let descriptor = try appFile(fixture, [UInt8](repeating: 1, count: 2000))
            defer { close(descriptor) }
            await expectError("org.baton.Error.NotReady") {
                _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("image/png"), .string("d")])
            }
            await fixture.service.useDocuments(try SnapshotStore(directory: fixture.stateDirectory + "/documents", perDocumentLimit: 1000, perUserLimit: 1000))
            await expectError("org.baton.Error.PayloadTooLarge") {
                _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("image/png"), .string("d")])
            }
            await expectError("org.baton.Error.InvalidArguments") {
                _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string(""), .string("d")])
            }
            await expectError("org.baton.Error.InvalidArguments") {
                _ = try await client.activity(path, "DocumentEdited")
            }
            // Nothing was committed by the refusals.
            #expect(await fixture.service.documentForTransfer(uid: getuid()) == nil)
        }
    }
}

extension Array where Element == UInt8 {
    func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        return (0...(count - needle.count)).contains { Array(self[$0..<$0 + needle.count]) == needle }
    }
}
