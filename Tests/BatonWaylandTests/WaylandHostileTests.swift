// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonWayland
import BatonPublishers
import BatonSway
import Foundation
import Testing

private let text = ClipboardTypes.text

@Suite("BatonWaylandTests: hostile clients under headless sway, and the wire parser's bounds (issue 27)", .serialized)
struct WaylandHostileTests {
    @Test("a copy offering 300 names (garbage, over-long, duplicates): 64 types, the rest dropped with reasons")
    func hostileTypeList() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: .patient)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        let long = "application/" + String(repeating: "x", count: 300)
        let names = ["not a media type", long, "UTF8_STRING", "TEXT", "text/plain"]
            + (0..<300).map { "application/x-baton-\($0)" } + ["application/x-baton-1"]
        // And a name that is not UTF-8: the compositor relays it as it is.
        let owner = try RawWaylandOwner(environment: sway.environment, names: names, rawNames: [[0x69, 0x6D, 0xC3, 0x28, 0x2F, 0x78]],
                                        answers: ["UTF8_STRING": .bytes(Array("from the raw client".utf8))])
        defer { owner.stop() }
        let change = try #require(await recorder.nextChange())
        #expect(change.types.count == ClipboardTypeList.maximumCount)
        #expect(change.types.first == text)
        #expect(change.dropped.contains(.init(name: "not a media type", reason: .notMediaType)))
        #expect(change.dropped.first == .init(name: "im\u{FFFD}(/x", reason: .notMediaType))
        #expect(change.dropped.contains { $0.reason == .nameTooLong })
        #expect(change.dropped.contains { $0.reason == .tooMany })
        // Of 306 distinct names, only the first 256 are kept; the rest are counted.
        #expect(change.dropped.contains(.init(name: "50 more types", reason: .tooMany)))
        #expect(!change.isSecret)
        // Text is read through the name a reader prefers that the owner offers (UTF8_STRING here).
        #expect(try await clipboard.read(type: text, limit: 64) == Array("from the raw client".utf8))
        // A name the owner offers but does not answer: nothing written is refused.
        await #expect(throws: ClipboardError.refused) { try await clipboard.read(type: "application/x-baton-7", limit: 64) }
    }

    @Test("an owner that never answers: the read times out, a hint it never answers makes the copy secret, the next copy still arrives")
    func silentOwner() async throws {
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        // The answer timeout is what this test times: 2 s instead of 15.
        let configuration = WaylandSessionClipboard.Configuration(answerTimeout: .seconds(2), connectTimeout: .seconds(120))
        let clipboard = try WaylandSessionClipboard(environment: sway.environment, configuration: configuration)
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)

        let hint = ClipboardSecrecy.kdePasswordManagerHint
        let owner = try RawWaylandOwner(environment: sway.environment, names: ["text/plain;charset=utf-8", hint],
                                        answers: ["text/plain;charset=utf-8": .silent, hint: .silent])
        let change = try #require(await recorder.nextChange())
        #expect(change.types == [text])
        #expect(change.isSecret)  // the hint could not be read: fail closed
        await #expect(throws: ClipboardError.timedOut) { try await clipboard.read(type: text, limit: 64) }
        owner.stop()
        #expect(await recorder.next() == .cleared)

        try await sway.wlCopy(Array("after the silent one".utf8))
        // The loop goes on (no read here: this adapter's 2 s would be a race with wl-copy on a loaded machine).
        #expect(await recorder.nextChange()?.isSecret == false)
    }

    @Test("the wire parser: bad sizes, strings without NUL or past the end, bad UTF-8 are typed errors")
    func wireBounds() throws {
        func message(_ words: [UInt32], extra: [UInt8] = []) -> [UInt8] {
            words.flatMap { word in withUnsafeBytes(of: word) { Array($0) } } + extra
        }
        func inbox(_ bytes: [UInt8]) -> WaylandInbox {
            var inbox = WaylandInbox()
            bytes.withUnsafeBytes { inbox.append($0) }
            return inbox
        }
        var short = inbox(message([5, 4 << 16]))
        #expect(throws: WaylandWireError.badSize(4)) { try short.next() }
        var huge = inbox(message([5, 8192 << 16]))
        #expect(throws: WaylandWireError.badSize(8192)) { try huge.next() }
        var unaligned = inbox(message([5, 10 << 16]))
        #expect(throws: WaylandWireError.badSize(10)) { try unaligned.next() }
        var partial = inbox(message([5, 16 << 16 | 3, 1]))
        #expect(try partial.next() == nil)  // the rest has not arrived
        var whole = inbox(message([5, 12 << 16 | 3, 42]))
        #expect(try whole.next() == WaylandMessage(object: 5, opcode: 3, arguments: message([42])))

        func arguments(_ bytes: [UInt8]) -> WaylandArguments {
            WaylandArguments(WaylandMessage(object: 5, opcode: 0, arguments: bytes))
        }
        var good = arguments(message([4], extra: Array("abc\0".utf8)))
        #expect(try good.string() == "abc")
        var null = arguments(message([0]))
        #expect(try null.string() == nil)
        var noNul = arguments(message([4], extra: Array("abcd".utf8)))
        #expect(throws: WaylandWireError.badString) { try noNul.string() }
        var inner = arguments(message([4], extra: [0x61, 0, 0x62, 0]))
        #expect(throws: WaylandWireError.badString) { try inner.string() }
        var pastEnd = arguments(message([4000], extra: Array("abc\0".utf8)))
        #expect(throws: WaylandWireError.truncated) { try pastEnd.string() }
        var huge32 = arguments(message([UInt32.max]))
        #expect(throws: WaylandWireError.truncated) { try huge32.string() }
        var badUTF8 = arguments(message([3], extra: [0xC3, 0x28, 0, 0]))
        #expect(try badUTF8.string() == "\u{FFFD}(")  // another client's garbage, kept as garbage
        var empty = arguments([])
        #expect(throws: WaylandWireError.truncated) { try empty.uint() }

        var request = WaylandRequest(object: 7, opcode: 1)
        request.string("image/png")
        #expect(request.bytes == message([7, 24 << 16 | 1, 10], extra: Array("image/png\0\0\0".utf8)))
        var tooBig = WaylandRequest(object: 7, opcode: 1)
        tooBig.string(String(repeating: "x", count: 5000))
        #expect(tooBig.bytes == nil)
    }
}
