// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Testing

@Suite("BatonCore: document frames and the receiver's stream check (§6.5)")
struct DocumentFrameTests {
    let digest = SHA256.hash([1, 2, 3])
    var reference: ActivityReference { ActivityReference(typeHash: TypeHash(value: 5), revision: 9) }

    func info(total: UInt64 = 200_000) throws -> DocumentInfo {
        try DocumentInfo(totalSize: total, digest: digest, mediaType: "application/pdf", documentID: "doc")
    }

    @Test func payloadsRoundTripAndTextsAreChecked() throws {
        let request = DocumentRequest(activity: reference, digest: digest, offset: 65_536)
        #expect(try DocumentRequest(payload: request.payload) == request)
        #expect(request.payload.count == DocumentRequest.byteCount)
        #expect(try DocumentInfo(payload: try info().payload) == (try info()))
        let chunk = DocumentChunk(offset: 7, data: [9, 9])
        #expect(try DocumentChunk(payload: chunk.payload) == chunk)
        #expect(throws: WireError.malformed("media type length")) { try DocumentInfo(totalSize: 1, digest: digest, mediaType: "", documentID: "d") }
        #expect(throws: WireError.malformed("document id has control characters")) {
            try DocumentInfo(totalSize: 1, digest: digest, mediaType: "a/b", documentID: "x\ny")
        }
        let longest = try DocumentInfo(totalSize: 1, digest: digest, mediaType: String(repeating: "m", count: 255), documentID: String(repeating: "d", count: 255))
        #expect(longest.payload.count == FrameType.documentInfo.maxPayload)
        #expect(throws: WireError.malformed("media type length")) {
            try DocumentInfo(totalSize: 1, digest: digest, mediaType: String(repeating: "m", count: 256), documentID: "d")
        }
        #expect(throws: WireError.payloadTooLarge(limit: 65_536, actual: 65_537)) {
            try DocumentChunk(payload: DocumentChunk(offset: 0, data: [UInt8](repeating: 0, count: 65_537)).payload)
        }
    }

    @Test func theStreamCheckWantsContiguousChunksOfTheSnapshotAskedFor() throws {
        var check = DocumentStreamCheck(request: DocumentRequest(activity: reference, digest: digest, offset: 100))
        #expect(throws: WireError.unexpectedMessage("DocumentChunk before DocumentInfo")) { try check.accept(DocumentChunk(offset: 100, data: [1])) }
        let other = try DocumentInfo(totalSize: 200_000, digest: SHA256.hash([4]), mediaType: "a/b", documentID: "d")
        #expect(throws: WireError.malformed("another snapshot")) { try check.accept(other) }
        try check.accept(try info())
        #expect(throws: WireError.unexpectedMessage("a second DocumentInfo")) { try check.accept(try info()) }
        #expect(throws: WireError.malformed("chunk out of order")) { try check.accept(DocumentChunk(offset: 0, data: [1])) }
        try check.accept(DocumentChunk(offset: 100, data: [UInt8](repeating: 0, count: 65_536)))
        #expect(check.next == 65_636 && !check.isComplete)
        #expect(throws: WireError.malformed("chunk beyond the snapshot")) {
            try check.accept(DocumentChunk(offset: 65_636, data: [UInt8](repeating: 0, count: 200_000 - 65_636 + 1)))
        }
        try check.accept(DocumentChunk(offset: 65_636, data: [UInt8](repeating: 0, count: 65_536)))
        try check.accept(DocumentChunk(offset: 131_172, data: [UInt8](repeating: 0, count: 200_000 - 131_172)))
        #expect(check.isComplete)

        var past = DocumentStreamCheck(request: DocumentRequest(activity: reference, digest: digest, offset: 300_000))
        #expect(throws: WireError.malformed("offset beyond the snapshot")) { try past.accept(try info()) }
        var empty = DocumentStreamCheck(request: DocumentRequest(activity: reference, digest: DocumentRequest.anySnapshot, offset: 0))
        try empty.accept(try info(total: 0))
        #expect(empty.isComplete)
    }
}
