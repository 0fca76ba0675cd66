// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import Testing

@Suite("BatonPublishersTests: clipboard types, secrecy and bounds (issue 27)")
struct SessionClipboardTests {
    @Test("every X11 text alias is one media type, text/plain;charset=utf-8")
    func textAliases() {
        for name in ["UTF8_STRING", "STRING", "TEXT", "text/plain", "text/plain;charset=utf-8", "text/plain;charset=UTF-8"] {
            #expect(ClipboardTypes.mediaType(ofTarget: name) == ClipboardTypes.text, "\(name)")
        }
        #expect(ClipboardTypes.targets(ofMediaType: ClipboardTypes.text).first == "UTF8_STRING")
        #expect(ClipboardTypes.targets(ofMediaType: ClipboardTypes.text).count == 5)
        #expect(ClipboardTypes.targets(ofMediaType: "image/png") == ["image/png"])
        let list = ClipboardTypeList(["TARGETS", "UTF8_STRING", "STRING", "TEXT", "text/plain", "image/png"])
        #expect(list.types == [ClipboardTypes.text, "image/png"])
        #expect(list.dropped.isEmpty)
    }

    @Test("the selection protocol's own targets are no content")
    func protocolTargets() {
        for name in ["TARGETS", "TIMESTAMP", "MULTIPLE", "SAVE_TARGETS", "DELETE", "INCR", "COMPOUND_TEXT"] {
            #expect(ClipboardTypes.mediaType(ofTarget: name) == nil, "\(name)")
        }
        let list = ClipboardTypeList(["TARGETS", "TIMESTAMP", "MULTIPLE", "SAVE_TARGETS", "DELETE"])
        #expect(list.types.isEmpty)
        #expect(list.dropped.isEmpty)
    }

    @Test("names that are no media type are dropped with the reason")
    func garbage() {
        let list = ClipboardTypeList(["image/png", "FOO_BAR", "text/", "/x", "a b/c", "text/html", "image/png"])
        #expect(list.types == ["image/png", "text/html"])
        #expect(list.dropped.map(\.name) == ["FOO_BAR", "text/", "/x", "a b/c"])
        #expect(list.dropped.allSatisfy { $0.reason == .notMediaType })
    }

    @Test("at most 64 types and names of at most 255 bytes; the rest is dropped with a typed reason")
    func bounds() {
        let many = (0..<100).map { "application/x-type-\($0)" }
        let list = ClipboardTypeList(many)
        #expect(list.types == Array(many.prefix(64)))
        #expect(list.dropped.count == 36)
        #expect(list.dropped.allSatisfy { $0.reason == .tooMany })
        #expect(list.dropped.first?.name == "application/x-type-64")

        let long = "application/" + String(repeating: "x", count: 244)  // 256 bytes
        let edge = "application/" + String(repeating: "y", count: 243)  // 255 bytes
        let bounded = ClipboardTypeList([long, edge])
        #expect(bounded.types == [edge])
        #expect(bounded.dropped.count == 1)
        #expect(bounded.dropped.first?.reason == .nameTooLong)
        #expect(bounded.dropped.first?.name.utf8.count == 255)

        // An endless hostile list keeps a bounded record of what it dropped.
        let hostile = ClipboardTypeList((0..<10_000).map { "GARBAGE_\($0)" })
        #expect(hostile.types.isEmpty)
        #expect(hostile.dropped.count == ClipboardTypeList.maximumCount)
    }

    @Test("secret: KDE's hint with the value secret, or the concealed type")
    func secrecy() {
        let hint = ClipboardSecrecy.kdePasswordManagerHint
        #expect(ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", hint], hintValue: Array("secret".utf8)))
        #expect(ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", hint], hintValue: Array("secret\n".utf8)))
        #expect(!ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", hint], hintValue: Array("public".utf8)))
        // Offered but unreadable, or read empty: fail closed.
        #expect(ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", hint], hintValue: nil))
        #expect(ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", hint], hintValue: []))
        #expect(ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", hint], hintValue: Array(" \0".utf8)))
        #expect(ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", ClipboardSecrecy.concealedType], hintValue: nil))
        #expect(!ClipboardSecrecy.isSecret(offered: ["UTF8_STRING", "image/png"], hintValue: nil))
        // Markers are never content types.
        let list = ClipboardTypeList(["UTF8_STRING", hint, ClipboardSecrecy.concealedType])
        #expect(list.types == [ClipboardTypes.text])
        #expect(list.markers == [hint, ClipboardSecrecy.concealedType])
    }

    @Test("STRING is Latin-1 both ways")
    func latin1() {
        #expect(ClipboardTypes.utf8(fromLatin1: [0x41, 0xE9]) == Array("Aé".utf8))
        #expect(ClipboardTypes.latin1(fromUTF8: Array("Aé€".utf8)) == [0x41, 0xE9, UInt8(ascii: "?")])
    }

    @Test("errors read as words a person can act on")
    func errorWords() {
        #expect(ClipboardError.overLimit(limit: 10).description == "the clipboard's content is larger than 10 bytes")
        #expect(ClipboardError.typeNotOffered("image/png").description == "the clipboard holds no image/png")
    }
}
