// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing
@testable import BatonCore

private func file(_ name: String, _ size: UInt64 = 1, _ type: String = "text/plain") throws -> ClipboardFile {
    try ClipboardFile(name: name, size: size, mediaType: type)
}

private func failure<T>(_ body: () throws(WireError) -> T) -> String? {
    do { _ = try body() } catch { return specName(error) }
    return nil
}

/// A copy of files (§6.7 "Files"): the list, FetchClipboardFile, the uri-lists apps exchange, and the
/// source's decision. Every refusal class, both directions, random round trips.
@Suite struct ClipboardFilesTests {
    // MARK: Names

    @Test func aNameIsOneComponentOfUTF8WithoutControlCharacters() throws {
        for good in ["a", "report.pdf", "Notes ü.txt", "...", ".hidden", "a b", String(repeating: "é", count: 127) + "x", "日本語.txt", "a\\b", "x:y"] {
            #expect(failure { () throws(WireError) in try ClipboardFile.checkName(good) } == nil, "\(good)")
        }
        #expect(failure { () throws(WireError) in try ClipboardFile.checkName("") } == "malformed(file name length)")
        #expect(failure { () throws(WireError) in try ClipboardFile.checkName(String(repeating: "a", count: 256)) } == "malformed(file name length)")
        #expect(failure { () throws(WireError) in try ClipboardFile.checkName(String(repeating: "é", count: 128)) } == "malformed(file name length)")
        for bad in [".", "..", "a/b", "/", "a\nb", "tab\t", "\u{7F}", "nul\u{0}", "\u{1B}[31m"] {
            #expect(failure { () throws(WireError) in try ClipboardFile.checkName(bad) } == "malformed(file name characters)", "\(bad.debugDescription)")
        }
        #expect(failure { () throws(WireError) in try ClipboardFile(name: "a", size: 0, mediaType: "text plain") } == "malformed(media type characters)")
    }

    @Test func theNameOfAPathIsItsLastComponent() {
        #expect(ClipboardFile.name(ofPath: Array("/home/ada/report.pdf".utf8)) == "report.pdf")
        #expect(ClipboardFile.name(ofPath: Array("/home/ada/dir//".utf8)) == "dir")
        #expect(ClipboardFile.name(ofPath: Array("relative".utf8)) == "relative")
        #expect(ClipboardFile.name(ofPath: Array("/".utf8)) == nil)
        #expect(ClipboardFile.name(ofPath: []) == nil)
        #expect(ClipboardFile.name(ofPath: Array("/a/..".utf8)) == nil)
        #expect(ClipboardFile.name(ofPath: Array("/a/b\nc".utf8)) == nil)
        // Not UTF-8 (Latin-1 ü): no name; a directory above that is not UTF-8 does not matter.
        #expect(ClipboardFile.name(ofPath: Array("/tmp/".utf8) + [0xFC]) == nil)
        #expect(ClipboardFile.name(ofPath: [0x2F, 0xFC, 0x2F] + Array("ok".utf8)) == "ok")
    }

    // MARK: The list

    @Test func theListRoundTripsAndIsCheckedInWireOrder() throws {
        let list = try ClipboardFileList(files: [file("notes ü.txt", 3), file("empty", 0, "application/octet-stream")])
        #expect(list.totalSize == 3)
        let bytes = list.encoded
        #expect(bytes == [0x00, 0x02, 12] + Array("notes ü.txt".utf8) + [0, 0, 0, 0, 0, 0, 0, 3] + [10] + Array("text/plain".utf8)
                + [5] + Array("empty".utf8) + [UInt8](repeating: 0, count: 8) + [24] + Array("application/octet-stream".utf8))
        #expect(try ClipboardFileList(encoded: bytes) == list)
        #expect(list.item == (try ClipboardItem(mediaType: "application/x-baton-file-list", size: UInt64(bytes.count))))

        func decode(_ bytes: [UInt8]) -> String? { failure { () throws(WireError) in try ClipboardFileList(encoded: bytes) } }
        let one: [UInt8] = [1] + Array("a".utf8) + [0, 0, 0, 0, 0, 0, 0, 1] + [1, 0x61]
        #expect(decode([0, 1] + one) == nil)
        #expect(decode([0, 0]) == "malformed(file count)")
        #expect(decode([0x01, 0x01] + one) == "malformed(file count)")
        #expect(decode([0xFF, 0xFF]) == "malformed(file count)")
        #expect(decode([0]) == "truncated")
        #expect(decode([]) == "truncated")
        #expect(decode([0, 1, 0]) == "malformed(file name length)")
        #expect(decode([0, 1, 2, 0x61]) == "truncated")
        #expect(decode([0, 1, 1, 0xFF] + Array(one.dropFirst(2))) == "malformed(file name not UTF-8)")
        #expect(decode([0, 1, 2, 0x2E, 0x2E] + Array(one.dropFirst(2))) == "malformed(file name characters)")
        #expect(decode([0, 1, 3, 0x61, 0x2F, 0x62] + Array(one.dropFirst(2))) == "malformed(file name characters)")
        #expect(decode([0, 1, 1, 0x0A] + Array(one.dropFirst(2))) == "malformed(file name characters)")
        #expect(decode([0, 1, 1, 0x61, 0, 0, 0]) == "truncated")
        #expect(decode([0, 1] + Array(one.dropLast(2)) + [0]) == "malformed(media type length)")
        #expect(decode([0, 1] + Array(one.dropLast(1)) + [0x20]) == "malformed(media type characters)")
        #expect(decode([0, 1] + one + [0]) == "trailingBytes")
        // Sizes whose sum does not fit 64 bits, caught at the file that overflows.
        let big: [UInt8] = [1, 0x61] + [UInt8](repeating: 0xFF, count: 8) + [1, 0x61]
        let small: [UInt8] = [1, 0x62] + [0, 0, 0, 0, 0, 0, 0, 1] + [1, 0x61]
        #expect(decode([0, 2] + big + small) == "malformed(file sizes)")
        #expect(decode([0, 2] + big + [1, 0x62] + [UInt8](repeating: 0, count: 8) + [1, 0x61]) == nil)
        #expect(decode([UInt8](repeating: 0, count: ClipboardFileList.maxEncodedBytes + 1)) == "payloadTooLarge")
        #expect(failure { () throws(WireError) in try ClipboardFileList(files: []) } == "malformed(file count)")
        #expect(failure { () throws(WireError) in try ClipboardFileList(files: Array(repeating: try! file("a"), count: 257)) } == "malformed(file count)")
        #expect(failure { () throws(WireError) in try ClipboardFileList(files: [try! file("a", .max), try! file("b", 1)]) } == "malformed(file sizes)")
    }

    @Test func theLargestListFitsItsBoundAndRandomListsRoundTrip() throws {
        let longest = String(repeating: "n", count: 255), type = String(repeating: "t", count: 100) + "/" + String(repeating: "x", count: 154)
        let largest = try ClipboardFileList(files: (0..<256).map { _ in try file(longest, 1, type) })
        #expect(largest.encoded.count == ClipboardFileList.maxEncodedBytes)
        #expect(try ClipboardFileList(encoded: largest.encoded) == largest)
        let random = SeededRandomFake(seed: 27)
        let alphabet = Array("abcdé ü.-_日~#%".unicodeScalars)
        for _ in 0..<300 {
            let files = try (0..<random.int(1...20)).map { _ in
                var name = String(String.UnicodeScalarView((0..<random.int(1...40)).map { _ in alphabet[random.int(0...alphabet.count - 1)] }))
                if name == "." || name == ".." || name.utf8.count > 255 { name = "x" }
                return try file(name, random.next() >> 40, ["text/plain", "image/png", "application/pdf"][random.int(0...2)])
            }
            let list = try ClipboardFileList(files: files)
            #expect(try ClipboardFileList(encoded: list.encoded) == list)
            // Every cut of a valid list fails, typed, and never crashes.
            let cut = random.int(0...list.encoded.count - 1)
            #expect(failure { () throws(WireError) in try ClipboardFileList(encoded: Array(list.encoded.prefix(cut))) } != nil)
        }
    }

    @Test func batondsLimitIsOneGibibyteInAll() throws {
        let fits = try ClipboardFileList(files: [file("a", ClipboardFileList.totalLimit - 1), file("b", 1)])
        #expect(fits.refusal() == nil)
        let over = try ClipboardFileList(files: [file("a", ClipboardFileList.totalLimit), file("b", 1)])
        #expect(over.refusal() == "the files add up to 1073741825 bytes, more than the 1073741824 shared at once")
        #expect(over.refusal(totalLimit: .max) == nil)
    }

    // MARK: FetchClipboardFile

    @Test func fetchClipboardFileIsFiftyBytesCheckedAsTheSpecSays() throws {
        let digest = SHA256.hash(Array("abc".utf8))
        let request = try ClipboardFileRequest(offerID: 0xFEDC_BA98_7654_3210, index: 1, digest: digest, offset: 2)
        #expect(request.payload.count == 50 && request.payload.count == ClipboardFileRequest.byteCount)
        #expect(request.payload == [0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10, 0, 1] + digest + [0, 0, 0, 0, 0, 0, 0, 2])
        #expect(try ClipboardFileRequest(payload: request.payload) == request)
        #expect(FrameType.fetchClipboardFile.rawValue == 0x12 && FrameType.fetchClipboardFile.maxPayload == 50)
        let any = try ClipboardFileRequest(offerID: 1, index: 255)
        #expect(any.asksForAnyDigest && any.offset == 0)
        func decode(_ bytes: [UInt8]) -> String? { failure { () throws(WireError) in try ClipboardFileRequest(payload: bytes) } }
        #expect(decode(Array(any.payload.prefix(8)) + [0x01, 0x00] + Array(any.payload.dropFirst(10))) == "malformed(file index)")
        #expect(decode(Array(any.payload.dropLast(8)) + [0, 0, 0, 0, 0, 0, 0, 1]) == "malformed(an offset needs the file's digest)")
        #expect(decode(Array(request.payload.dropLast())) == "truncated")
        #expect(decode(request.payload + [0]) == "trailingBytes")
        #expect(failure { () throws(WireError) in try ClipboardFileRequest(offerID: 1, index: 256) } == "malformed(file index)")
        #expect(failure { () throws(WireError) in try ClipboardFileRequest(offerID: 1, index: 0, digest: [1]) } == "malformed(digest length)")
        // A 51-byte payload is refused at the header, before it is read.
        #expect(failure { () throws(WireError) in try Frame.parseHeader([1, 0x12, 0, 0, 0, 0, 0, 1, 0, 0, 0, 51][...]) } == "payloadTooLarge")
    }

    @Test func theAnswerMustDescribeTheListedFile() throws {
        let listed = try file("notes.txt", 3, "text/plain")
        let digest = SHA256.hash(Array("abc".utf8))
        let fresh = try ClipboardFileRequest(offerID: 9, index: 0)
        let resumed = try ClipboardFileRequest(offerID: 9, index: 0, digest: digest, offset: 1)
        let info = try DocumentInfo(totalSize: 3, digest: digest, mediaType: "text/plain", documentID: "notes.txt")
        #expect(fresh.describes(info, file: listed) && resumed.describes(info, file: listed))
        for other in [try DocumentInfo(totalSize: 4, digest: digest, mediaType: "text/plain", documentID: "notes.txt"),
                      try DocumentInfo(totalSize: 3, digest: digest, mediaType: "text/html", documentID: "notes.txt"),
                      try DocumentInfo(totalSize: 3, digest: digest, mediaType: "text/plain", documentID: "other.txt")] {
            #expect(!fresh.describes(other, file: listed))
        }
        let otherDigest = try DocumentInfo(totalSize: 3, digest: SHA256.hash([1]), mediaType: "text/plain", documentID: "notes.txt")
        #expect(fresh.describes(otherDigest, file: listed) && !resumed.describes(otherDigest, file: listed))
    }

    @Test func aDocumentAddressMakesTheRequestOfItsKind() throws {
        let activity = ActivityReference(typeHash: TypeHash(value: 7), revision: 3)
        let document = try DocumentAddress.activity(activity).request(digest: DocumentRequest.anySnapshot, offset: 0, requestID: 5)
        #expect(document == Frame(type: .fetchDocument, requestID: 5, payload: DocumentRequest(activity: activity, digest: DocumentRequest.anySnapshot, offset: 0).payload))
        let clip = try DocumentAddress.clipboardFile(offerID: 4, index: 2).request(digest: SHA256.hash([]), offset: 9, requestID: 6)
        #expect(clip == Frame(type: .fetchClipboardFile, requestID: 6, payload: try ClipboardFileRequest(offerID: 4, index: 2, digest: SHA256.hash([]), offset: 9).payload))
        #expect(failure { () throws(WireError) in try DocumentAddress.clipboardFile(offerID: 4, index: 2).request(digest: DocumentRequest.anySnapshot, offset: 1, requestID: 7) }
                == "malformed(an offset needs the file's digest)")
        // The stream check is the document's: from the offset, with the digest asked for.
        var check = DocumentStreamCheck(digest: SHA256.hash(Array("abc".utf8)), offset: 1)
        #expect(failure { () throws(WireError) in try check.accept(try DocumentInfo(totalSize: 3, digest: SHA256.hash([1]), mediaType: "a", documentID: "b")) }
                == "malformed(another snapshot)")
        try check.accept(try DocumentInfo(totalSize: 3, digest: SHA256.hash(Array("abc".utf8)), mediaType: "a", documentID: "b"))
        try check.accept(DocumentChunk(offset: 1, data: Array("bc".utf8)))
        #expect(check.isComplete)
    }

    @Test func fileChangedIsErrorCodeEleven() throws {
        let frame = ErrorFrame(code: .fileChanged, message: "file changed")
        #expect(frame.payload == [0, 11, 0, 12] + Array("file changed".utf8))
        #expect(try ErrorFrame(payload: frame.payload) == frame)
        #expect(failure { () throws(WireError) in try ErrorFrame(payload: [0, 12, 0, 0]) } == "malformed(error code 12)")
    }
}
