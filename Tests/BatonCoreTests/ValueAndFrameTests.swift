// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

func randomValue(_ random: SeededRandomFake, depth: Int = 1) -> PropertyValue {
    let choice = depth >= 4 ? random.int(0...6) : random.int(0...8)
    switch choice {
    case 0: return .string(String(decoding: random.bytes(random.int(0...12)).map { 0x61 + $0 % 26 }, as: UTF8.self) + (random.next() % 3 == 0 ? "é☃" : ""))
    case 1: return .integer(Int64(bitPattern: random.next()))
    case 2: return .double(Double(Int64(bitPattern: random.next() >> 12)) / 7.0)
    case 3: return .boolean(random.next() % 2 == 0)
    case 4: return .bytes(random.bytes(random.int(0...16)))
    case 5: return .date(Double(random.int(0...2_000_000_000)) + 0.5)
    case 6: return .boolean(false)
    case 7: return .array((0..<random.int(0...4)).map { _ in randomValue(random, depth: depth + 1) })
    default:
        var d: [String: PropertyValue] = [:]
        for i in 0..<random.int(0...4) { d["k\(i)\(random.int(0...9))"] = randomValue(random, depth: depth + 1) }
        return .dictionary(d)
    }
}

@Suite struct PropertyValueTests {
    @Test func randomRoundTrips() throws {
        let random = SeededRandomFake(seed: 7)
        for _ in 0..<2_000 {
            let value = randomValue(random)
            let bytes = try PropertyValueCodec.encode(value)
            #expect(try PropertyValueCodec.decode(bytes) == value)
            #expect(try PropertyValueCodec.encode(PropertyValueCodec.decode(bytes)) == bytes)  // canonical
        }
    }

    @Test func knownEncoding() throws {
        let bytes = try PropertyValueCodec.encode(.dictionary(["b": .boolean(true), "a": .integer(1)]))
        #expect(bytes == [0x09, 0, 0, 0, 2, 0, 0, 0, 1, 0x61, 0x02, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x62, 0x05])
    }

    @Test func everyTruncationIsRejected() throws {
        let value: PropertyValue = .dictionary(["title": .string("hello"), "list": .array([.integer(1), .bytes([1, 2]), .date(3)])])
        let bytes = try PropertyValueCodec.encode(value)
        for cut in 0..<bytes.count {
            #expect(throws: WireError.self) { try PropertyValueCodec.decode(Array(bytes[0..<cut])) }
        }
        #expect(throws: WireError.trailingBytes) { try PropertyValueCodec.decode(bytes + [0]) }
    }

    @Test func malformedClasses() throws {
        #expect(throws: WireError.malformed("value type 10")) { try PropertyValueCodec.decode([0x0A]) }
        #expect(throws: WireError.malformed("string not UTF-8")) { try PropertyValueCodec.decode([0x01, 0, 0, 0, 1, 0xFF]) }
        #expect(throws: WireError.malformed("NaN")) { try PropertyValueCodec.decode([0x03] + Double.nan.bitPattern.bigEndianBytes) }
        #expect(throws: WireError.malformed("NaN")) { try PropertyValueCodec.encode(.double(.nan)) }
        // §6.4: a date must be finite (NaN included); a double may be infinite.
        #expect(throws: WireError.malformed("NaN")) { try PropertyValueCodec.encode(.date(.nan)) }
        #expect(throws: WireError.malformed("date not finite")) { try PropertyValueCodec.encode(.date(.infinity)) }
        #expect(throws: WireError.malformed("date not finite")) { try PropertyValueCodec.encode(.date(-.infinity)) }
        #expect(throws: WireError.malformed("date not finite")) { try PropertyValueCodec.decode([0x07] + Double.infinity.bitPattern.bigEndianBytes) }
        #expect(try PropertyValueCodec.decode(PropertyValueCodec.encode(.double(-.infinity))) == .double(-.infinity))
        // Keys out of order, and equal keys.
        let unordered: [UInt8] = [0x09, 0, 0, 0, 2, 0, 0, 0, 1, 0x62, 0x04, 0, 0, 0, 1, 0x61, 0x04]
        #expect(throws: WireError.malformed("dictionary keys not strictly ascending")) { try PropertyValueCodec.decode(unordered) }
        let duplicate: [UInt8] = [0x09, 0, 0, 0, 2, 0, 0, 0, 1, 0x61, 0x04, 0, 0, 0, 1, 0x61, 0x04]
        #expect(throws: WireError.malformed("dictionary keys not strictly ascending")) { try PropertyValueCodec.decode(duplicate) }
        // "é" precomposed and decomposed: byte-distinct, equal as Swift strings.
        let equivalent: [UInt8] = [0x09, 0, 0, 0, 2, 0, 0, 0, 3, 0x65, 0xCC, 0x81, 0x04, 0, 0, 0, 2, 0xC3, 0xA9, 0x04]
        #expect(throws: WireError.malformed("duplicate key")) { try PropertyValueCodec.decode(equivalent) }
        // Counts that promise more than the bytes hold are refused before allocating.
        #expect(throws: WireError.truncated) { try PropertyValueCodec.decode([0x08, 0xFF, 0xFF, 0xFF, 0xFF]) }
        #expect(throws: WireError.truncated) { try PropertyValueCodec.decode([0x09, 0x7F, 0xFF, 0xFF, 0xFF]) }
        #expect(throws: WireError.truncated) { try PropertyValueCodec.decode([0x06, 0xFF, 0xFF, 0xFF, 0xFF]) }
    }

    @Test func depthAndSizeLimits() throws {
        var deep: PropertyValue = .integer(1)
        for _ in 0..<15 { deep = .array([deep]) }
        #expect(deep.depth == 16)
        let ok = try PropertyValueCodec.encode(deep)
        #expect(try PropertyValueCodec.decode(ok) == deep)
        let tooDeep: PropertyValue = .array([deep])
        #expect(throws: WireError.tooDeep(limit: 16)) { try PropertyValueCodec.encode(tooDeep) }
        #expect(throws: WireError.tooDeep(limit: 16)) { try PropertyValueCodec.decode([UInt8]([0x08, 0, 0, 0, 1]).repeated(16) + [0x04]) }
        let big: [String: PropertyValue] = ["blob": .bytes([UInt8](repeating: 0, count: 70_000))]
        #expect(throws: WireError.self) { try ActivityRecord.encodeUserInfo(big) }
    }
}

extension UInt64 { var bigEndianBytes: [UInt8] { var out: [UInt8] = []; out.appendBigEndian(self); return out } }
extension Array { func repeated(_ n: Int) -> [Element] { (0..<n).flatMap { _ in self } } }

@Suite struct ActivityRecordTests {
    @Test func validatesFields() throws {
        let record = try ActivityRecord(activityType: "org.example.Reader.reading", title: "Chapter 3",
                                        userInfo: ["page": .integer(42), "at": .date(1.5e9)], webpageURL: "https://example.org/book#3",
                                        version: 2, revision: 77)
        let decoded = try ActivityRecord(decoding: record.encoded())
        #expect(decoded == record)
        for bad in ["", "noDots", "a..b", ".a", "a.b c", "a.b/c", String(repeating: "a.", count: 70) + "a"] {
            #expect(throws: WireError.self) { try ActivityRecord(activityType: bad, title: "", userInfo: [:], webpageURL: nil, version: 0) }
        }
        for bad in ["ftp://x.org", "https://", "javascript:alert(1)", "https://a b.org"] {
            #expect(throws: WireError.self) { try ActivityRecord(activityType: "a.b", title: "", userInfo: [:], webpageURL: bad, version: 0) }
        }
        #expect(throws: WireError.self) { try ActivityRecord(activityType: "a.b", title: String(repeating: "x", count: 257), userInfo: [:], webpageURL: nil, version: 0) }
        #expect(throws: WireError.malformed("version")) { try ActivityRecord(activityType: "a.b", title: "", userInfo: [:], webpageURL: nil, version: -1) }
    }

    @Test func rejectsUnknownOrMissingKeys() throws {
        let base = try ActivityRecord(activityType: "a.b", title: "t", userInfo: [:], webpageURL: nil, version: 0).propertyValue
        guard case .dictionary(var entries) = base else { return }
        entries["extra"] = .boolean(true)
        #expect(throws: WireError.malformed("activity has unknown keys")) { try ActivityRecord(value: .dictionary(entries)) }
        entries["extra"] = nil
        entries["title"] = nil
        #expect(throws: WireError.malformed("title missing")) { try ActivityRecord(value: .dictionary(entries)) }
    }
}

@Suite struct FrameTests {
    @Test func roundTripEveryType() throws {
        let random = SeededRandomFake(seed: 3)
        for type in FrameType.allCases {
            let payload = random.bytes(min(type.maxPayload, 40))
            let frame = Frame(type: type, requestID: UInt32(truncatingIfNeeded: random.next()), payload: payload)
            #expect(try Frame.decode(frame.encoded()) == frame)
        }
    }

    @Test func headerErrors() throws {
        let good = try Frame(type: .fetchActivity, requestID: 5, payload: [1, 2, 3, 4, 0, 0, 0, 9]).encoded()
        var v = good; v[0] = 2
        #expect(throws: WireError.unsupportedVersion(2)) { try Frame.decode(v) }
        var t = good; t[1] = 0x7E
        #expect(throws: WireError.unknownType(0x7E)) { try Frame.decode(t) }
        var r = good; r[3] = 1
        #expect(throws: WireError.malformed("reserved")) { try Frame.decode(r) }
        var l = good; l[11] = 9
        #expect(throws: WireError.payloadTooLarge(limit: 8, actual: 9)) { try Frame.decode(l) }
        #expect(throws: WireError.trailingBytes) { try Frame.decode(good + [0]) }
        #expect(throws: WireError.truncated) { try Frame.decode(Array(good.dropLast())) }
        #expect(throws: WireError.payloadTooLarge(limit: 8, actual: 9)) {
            try Frame(type: .fetchActivity, requestID: 1, payload: [UInt8](repeating: 0, count: 9)).encoded()
        }
    }

    @Test func oversizeLengthIsRefusedBeforeThePayloadArrives() {
        var decoder = FrameDecoder()
        decoder.append([1, 0x03, 0, 0, 0, 0, 0, 1, 0x7F, 0xFF, 0xFF, 0xFF])
        #expect(throws: WireError.payloadTooLarge(limit: 262_144, actual: 0x7FFF_FFFF)) { try decoder.next() }
    }

    @Test func streamSplitAtEveryPosition() throws {
        let frames = [
            Frame(type: .hello, requestID: 1, payload: HelloMessage(deviceID: deviceID(1), rosterDigest: 3, maxFramePayload: 1 << 20).payload),
            Frame(type: .fetchActivity, requestID: 2, payload: ActivityReference(typeHash: TypeHash(value: 9), revision: 4).payload),
            Frame(type: .ack, requestID: 2, payload: []),
        ]
        let stream = try frames.flatMap { try $0.encoded() }
        for split in 0...stream.count {
            var decoder = FrameDecoder()
            var out: [Frame] = []
            decoder.append(Array(stream[0..<split]))
            while let frame = try decoder.next() { out.append(frame) }
            decoder.append(Array(stream[split...]))
            while let frame = try decoder.next() { out.append(frame) }
            #expect(out == frames)
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test func typedPayloads() throws {
        let hello = HelloMessage(deviceID: deviceID(4), rosterDigest: 99, maxFramePayload: 4096)
        #expect(try HelloMessage(payload: hello.payload) == hello)
        #expect(throws: WireError.truncated) { try HelloMessage(payload: Array(hello.payload.dropLast())) }
        let ref = ActivityReference(typeHash: TypeHash(value: 0xAABBCCDD), revision: 0xFF_FFFF)
        #expect(try ActivityReference(payload: ref.payload) == ref)
        #expect(throws: WireError.malformed("revision")) { try ActivityReference(payload: [0, 0, 0, 0, 1, 0, 0, 0]) }
        let error = ErrorFrame(code: .unknownActivity, message: String(repeating: "é", count: 200))
        #expect(error.message.utf8.count == 256)
        #expect(try ErrorFrame(payload: error.payload) == error)
        #expect(throws: WireError.malformed("error code 99")) { try ErrorFrame(payload: [0, 99, 0, 0]) }
    }

    @Test func replyCacheIsBoundedAndPerPeer() {
        var cache = ReplyCache(capacity: 2)
        let reply = Frame(type: .ack, requestID: 1, payload: [])
        cache.store(peer: deviceID(1), requestID: 1, reply: reply)
        cache.store(peer: deviceID(1), requestID: 2, reply: reply)
        cache.store(peer: deviceID(1), requestID: 3, reply: reply)
        #expect(cache.reply(peer: deviceID(1), requestID: 1) == nil)
        #expect(cache.reply(peer: deviceID(1), requestID: 3) == reply)
        #expect(cache.reply(peer: deviceID(2), requestID: 3) == nil)
    }
}
