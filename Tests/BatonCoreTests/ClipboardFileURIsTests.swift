// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The lists of files apps put on the clipboard (text/uri-list, x-special/gnome-copied-files), both
/// ways, and the source's decision on a copy of files (docs/clipboard.md, "Files").
@Suite struct ClipboardFileURIsTests {
    @Test func aURIListIsLinesOfURIsWithoutCommentsOrBlanks() {
        let list = bytes("# a comment\r\nfile:///home/ada/a.txt\r\n\r\n  https://example.org/  \r\nfile:///b\n#x\nfile:///c")
        #expect(ClipboardFileURIs.uriListLines(list) == [bytes("file:///home/ada/a.txt"), bytes("https://example.org/"), bytes("file:///b"), bytes("file:///c")])
        let selection = ClipboardFileURIs.selection(uriList: list)
        #expect(selection.paths == [bytes("/home/ada/a.txt"), bytes("/b"), bytes("/c")])
        #expect(selection.otherURIs == ["https://example.org/"] && !selection.cut)
        #expect(ClipboardFileURIs.uriListLines([]) == [] && ClipboardFileURIs.uriListLines(bytes("\r\n\r\n# only\r\n")) == [])
    }

    @Test func aFileURINamesALocalPathOrNothing() {
        func path(_ uri: String) -> String? { ClipboardFileURIs.localPath(ofFileURI: bytes(uri)).map { String(decoding: $0, as: UTF8.self) } }
        #expect(path("file:///home/ada/Notes%20%C3%BC.txt") == "/home/ada/Notes ü.txt")
        #expect(path("FILE:///a") == "/a")
        #expect(path("file://localhost/etc/hosts") == "/etc/hosts")
        #expect(path("file://LocalHost/x") == "/x")
        #expect(path("file:/short/form") == "/short/form")
        #expect(path("file:///a%2Fb") == "/a/b")
        #expect(path("file:///%e2%82%ac") == "/€")
        // Raw UTF-8 (some apps do not escape it) is taken as it is.
        #expect(path("file:///ünï") == "/ünï")
        for none in ["file://otherhost/a", "file://", "file:", "file:relative", "http://x/a", "/plain/path", "file:///a?b", "file:///a#b",
                     "file:///a%", "file:///a%2", "file:///a%zz", "file:///a%00b", "fil:///a", ""] {
            #expect(path(none) == nil, "\(none)")
        }
        #expect(ClipboardFileURIs.localPath(ofFileURI: bytes("file:///a") + [0] + bytes("b")) == nil)
        // A path that is not UTF-8 is kept byte for byte.
        #expect(ClipboardFileURIs.localPath(ofFileURI: bytes("file:///caf%E9")) == bytes("/caf") + [0xE9])
    }

    @Test func localPathsBecomeURIsThatReadBackAsThemselves() {
        #expect(ClipboardFileURIs.fileURI(path: bytes("/home/ada/Notes ü.txt")) == "file:///home/ada/Notes%20%C3%BC.txt")
        #expect(ClipboardFileURIs.fileURI(path: bytes("/a-b_c.d~e/%#?")) == "file:///a-b_c.d~e/%25%23%3F")
        #expect(ClipboardFileURIs.uriList(paths: [bytes("/a"), bytes("/b c")]) == bytes("file:///a\r\nfile:///b%20c\r\n"))
        #expect(ClipboardFileURIs.gnomeCopiedFiles(paths: [bytes("/a"), bytes("/b")]) == bytes("copy\nfile:///a\nfile:///b"))
        let random = SeededRandomFake(seed: 2483)
        for _ in 0..<500 {
            // Any path of bytes but NUL, from the root: escaped, it reads back byte for byte.
            let path = [UInt8(ascii: "/")] + (0..<random.int(0...60)).map { _ in UInt8(random.int(1...255)) }
            let uri = ClipboardFileURIs.fileURI(path: path)
            #expect(uri.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F })
            #expect(ClipboardFileURIs.localPath(ofFileURI: Array(uri.utf8)) == path)
            #expect(ClipboardFileURIs.selection(uriList: ClipboardFileURIs.uriList(paths: [path, path])).paths == [path, path])
            #expect(ClipboardFileURIs.selection(gnomeCopiedFiles: ClipboardFileURIs.gnomeCopiedFiles(paths: [path]))?.paths == [path])
        }
    }

    @Test func gnomesListSaysCopyOrCutThenURIs() {
        let copy = ClipboardFileURIs.selection(gnomeCopiedFiles: bytes("copy\nfile:///a\nfile:///b\n"))
        #expect(copy?.paths == [bytes("/a"), bytes("/b")] && copy?.cut == false)
        let cut = ClipboardFileURIs.selection(gnomeCopiedFiles: bytes("cut\r\nfile:///a\r\nsmb://server/share"))
        #expect(cut?.paths == [bytes("/a")] && cut?.cut == true && cut?.otherURIs == ["smb://server/share"])
        #expect(ClipboardFileURIs.selection(gnomeCopiedFiles: bytes("copy"))?.paths == [])
        for bad in ["", "move\nfile:///a", "file:///a", "Copy\nfile:///a"] {
            #expect(ClipboardFileURIs.selection(gnomeCopiedFiles: bytes(bad)) == nil, "\(bad)")
        }
    }

    // MARK: The source's decision

    func decide(_ entries: [(String, ClipboardFileCopy.Facts)], limit: UInt64 = ClipboardFileList.totalLimit) -> Result<ClipboardFileList, ClipboardFileCopy.Refusal> {
        ClipboardFileCopy.list(entries.map { (bytes($0.0), $0.1) }, mediaType: { $0.hasSuffix(".png") ? "image/png" : $0.hasSuffix(".bad") ? "not a type" : "text/plain" },
                               totalLimit: limit)
    }

    func refusal(_ result: Result<ClipboardFileList, ClipboardFileCopy.Refusal>) -> String? {
        if case .failure(let why) = result { return why.description }
        return nil
    }

    @Test func regularFilesAreListedWithTheirNamesSizesAndTypes() throws {
        let list = try decide([("/h/a.png", .regular(size: 5)), ("/h/b", .regular(size: 0)), ("/h/c.bad", .regular(size: 2))]).get()
        #expect(list.files == [try ClipboardFile(name: "a.png", size: 5, mediaType: "image/png"), try ClipboardFile(name: "b", size: 0, mediaType: "text/plain"),
                               try ClipboardFile(name: "c.bad", size: 2, mediaType: "application/octet-stream")])
        // Two files of one name (from two folders) are both listed.
        #expect(try decide([("/x/a.png", .regular(size: 1)), ("/y/a.png", .regular(size: 1))]).get().files.count == 2)
    }

    @Test func everyRefusalSaysWhatStandsInTheWay() {
        #expect(refusal(decide([])) == "it names no file")
        #expect(refusal(decide((0...256).map { ("/f\($0)", .regular(size: 0)) })) == "it holds 257 files; at most 256 are shared at once")
        #expect(refusal(decide((0..<256).map { ("/f\($0)", .regular(size: 0)) })) == nil)
        #expect(refusal(decide([("/a", .regular(size: 1)), ("/h/docs", .directory)])) == "docs is a folder; folders are not shared, copy the files in it")
        #expect(refusal(decide([("/dev/null", .special)])) == "null is not a regular file (a device, pipe or socket)")
        #expect(refusal(decide([("/root/secret", .unreadable("Permission denied"))])) == "secret cannot be read: Permission denied")
        #expect(refusal(decide([("/a\nb", .regular(size: 1))]))?.hasPrefix("the name of /a\nb is not UTF-8") == true)
        #expect(refusal(ClipboardFileCopy.list([([0x2F, 0xFC], .regular(size: 1))], mediaType: { _ in "text/plain" }))?.contains("is not UTF-8") == true)
        #expect(refusal(decide([("/a", .regular(size: 6)), ("/b", .regular(size: 5))], limit: 10))
                == "the files add up to 11 bytes, more than the 10 shared at once")
        #expect(refusal(decide([("/a", .regular(size: .max)), ("/b", .regular(size: 1))])) == "the files are too large to add up")
    }

    // MARK: The receiver's book

    @Test func anOfferWhoseListCouldNotBeHadIsAskedForAgain() throws {
        var watch = ClipboardWatch()
        let member = deviceID(1)
        let offer = try ClipboardOffer(offerID: 5, kind: .files, expiresIn: 120, account: "ada",
                                       items: [ClipboardItem(mediaType: ClipboardFileList.mediaType, size: 20)])
        var change = watch.hear(member, kind: .files, revision: 1)
        #expect(change == .ask(member))
        var taken = watch.answered(member, offer: offer)
        #expect(taken)
        // The list did not arrive: not taken, and the next sighting of the same revision asks again.
        watch.handFailed(member, offer: offer)
        change = watch.hear(member, kind: .files, revision: 1)
        #expect(change == .ask(member))
        taken = watch.answered(member, offer: offer)
        #expect(taken)
        // Another offer's failure does not untake this one.
        watch.handFailed(member, offer: try ClipboardOffer(offerID: 6, kind: .files, expiresIn: 120, account: "ada", items: offer.items))
        taken = watch.answered(member, offer: offer)
        #expect(!taken)
        change = watch.hear(member, kind: .files, revision: 1)
        #expect(change == nil)
    }
}
