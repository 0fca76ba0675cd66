// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes frame decoding: FrameDecoder fed a byte stream in arbitrary chunks, and the typed
// payload decoders (Hello, ActivityReference, Error, ActivityRecord, Roster, the document and edit-session frames,
// FetchActivityOfVersions, the clipboard's ClipboardOffer, FetchClipboardData, ClipboardData and FetchClipboardFile).
//
// First byte below 0xC0: stream mode, the rest is a list of chunks (FuzzInput.chunk) appended
// one by one, taking out every complete frame. Otherwise the rest is one payload for the
// decoder numbered by the first byte minus 0xC0 (mod 15). Whatever decodes must encode back to the same
// bytes (the encodings are canonical), except rosters, which are compared after a round trip.
import BatonCore
import BatonCrypto

func checkPayload(_ type: FrameType, _ payload: [UInt8]) {
    switch type {
    case .hello:
        if let hello = try? HelloMessage(payload: payload) {
            fuzzCheck(hello.payload == payload, "Hello does not re-encode to its input")
        }
    case .fetchActivity, .activityContinued:
        if let reference = try? ActivityReference(payload: payload) {
            fuzzCheck(reference.payload == payload, "ActivityReference does not re-encode to its input")
        }
    case .error:
        if let error = try? ErrorFrame(payload: payload) {
            fuzzCheck(error.payload == payload, "ErrorFrame does not re-encode to its input")
        }
    case .activityPayload:
        if let record = try? ActivityRecord(decoding: payload) {
            fuzzCheck((try? record.encoded()) == payload, "ActivityRecord does not re-encode to its input")
        }
    case .ringSync:
        if let roster = try? Roster(decoding: payload) {
            let again = (try? roster.encoded()).flatMap { try? Roster(decoding: $0) }
            fuzzCheck(again == roster, "Roster changes in an encode/decode round trip")
        }
    case .fetchDocument:
        if let request = try? DocumentRequest(payload: payload) {
            fuzzCheck(request.payload == payload, "DocumentRequest does not re-encode to its input")
        }
    case .documentInfo:
        if let info = try? DocumentInfo(payload: payload) {
            fuzzCheck(info.payload == payload, "DocumentInfo does not re-encode to its input")
        }
    case .documentChunk:
        if let chunk = try? DocumentChunk(payload: payload) {
            fuzzCheck(chunk.payload == payload, "DocumentChunk does not re-encode to its input")
        }
    case .claimEditSession:
        if let claim = try? EditSessionClaim(payload: payload) {
            fuzzCheck(claim.payload == payload, "EditSessionClaim does not re-encode to its input")
        }
    case .editSessionGrant:
        if let grant = try? EditSessionGrant(payload: payload) {
            fuzzCheck(grant.payload == payload, "EditSessionGrant does not re-encode to its input")
        }
    case .fetchActivityOfVersions:
        if let asked = try? FetchActivityOfVersions(payload: payload) {
            fuzzCheck(asked.payload == payload, "FetchActivityOfVersions does not re-encode to its input")
        }
    case .clipboardOffer:
        if let offer = try? ClipboardOffer(payload: payload) {
            fuzzCheck(offer.payload == payload, "ClipboardOffer does not re-encode to its input")
        }
    case .fetchClipboardData:
        if let request = try? ClipboardDataRequest(payload: payload) {
            fuzzCheck(request.payload == payload, "ClipboardDataRequest does not re-encode to its input")
        }
    case .fetchClipboardFile:
        if let request = try? ClipboardFileRequest(payload: payload) {
            fuzzCheck(request.payload == payload, "ClipboardFileRequest does not re-encode to its input")
        }
    case .clipboardData:
        if let data = try? ClipboardData(payload: payload) {
            fuzzCheck(data.payload == payload, "ClipboardData does not re-encode to its input")
            fuzzCheck(data.data.count <= ClipboardData.maxDataBytes && data.offset + UInt64(data.data.count) <= data.total,
                      "ClipboardData past its total")
        }
    case .ack, .fetchClipboardOffer, .pairCommit, .pairHello, .pairReveal, .pairSealed:
        break
    }
}

let directDecoders: [FrameType] = [.hello, .fetchActivity, .error, .activityPayload, .ringSync, .fetchDocument, .documentInfo, .documentChunk,
                                   .claimEditSession, .editSessionGrant, .fetchActivityOfVersions, .clipboardOffer, .fetchClipboardData,
                                   .clipboardData, .fetchClipboardFile]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let mode = input.byte()
    guard mode < 0xC0 else {
        checkPayload(directDecoders[Int(mode - 0xC0) % directDecoders.count], input.rest())
        return 0
    }
    var decoder = FrameDecoder()
    var stream: [UInt8] = []
    var consumed = 0
    streaming: while !input.isEmpty {
        let chunk = input.chunk()
        decoder.append(chunk)
        stream += chunk
        while true {
            let frame: Frame?
            do { frame = try decoder.next() } catch { break streaming }
            guard let frame else { break }
            guard let encoded = try? frame.encoded() else {
                fuzzCheck(false, "decoded frame cannot be encoded")
                return 0
            }
            fuzzCheck(Array(stream[consumed..<consumed + encoded.count]) == encoded, "frame does not re-encode to its bytes")
            consumed += encoded.count
            checkPayload(frame.type, frame.payload)
        }
        fuzzCheck(decoder.bufferedByteCount == stream.count - consumed, "decoder lost or invented bytes")
    }
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    writeSeedsIfRequested {
        let id = DeviceID(identityKey: [UInt8](repeating: 3, count: 32))
        let hello = HelloMessage(deviceID: id, rosterDigest: 4, maxFramePayload: 262_144).payload
        let reference = ActivityReference(typeHash: TypeHash(value: 0xDEAD_BEEF), revision: 12).payload
        let versioned = try! FetchActivityOfVersions(activity: ActivityReference(typeHash: TypeHash(value: 0xDEAD_BEEF), revision: 12),
                                                     versions: [1...1, 3...5]).payload
        let error = ErrorFrame(code: .unknownActivity, message: "gone").payload
        let record = try! ActivityRecord(activityType: "org.example.editor", title: "Notes",
                                         userInfo: ["page": .integer(3), "tags": .array([.string("a"), .bytes([1, 2])]),
                                                    "when": .date(1_700_000_000), "zoom": .double(1.5), "dark": .boolean(true)],
                                         webpageURL: "https://example.org/n", version: 2, revision: 9).encoded()
        let secret = try! AdvertisingSecret.issue(root: [UInt8](repeating: 9, count: 32), generation: 3, day: 20_833)
        let identity = try! Ed25519PrivateKey(seed: [UInt8](repeating: 3, count: 32))
        let member = try! RosterMember.signed(name: "desk", identity: identity, secret: secret)
        let gone = DeviceID(identityKey: [UInt8](repeating: 4, count: 32))
        let roster = try! Roster(version: 5, members: [member], removalMarks: [gone: RemovalMark.make(removing: gone, by: identity)]).encoded()

        var stream: [UInt8] = [0]
        for (type, payload) in [(FrameType.hello, hello), (.fetchActivity, reference), (.error, error),
                                (.activityPayload, record), (.ringSync, roster), (.ack, [])] {
            let frame = try! Frame(type: type, requestID: 7, payload: payload).encoded()
            // Split each frame in two chunks to exercise reassembly.
            stream.appendChunk(Array(frame.prefix(5)))
            stream.appendChunk(Array(frame.dropFirst(5)))
        }
        return [stream, [0xC0] + hello, [0xC1] + reference, [0xC2] + error, [0xC3] + record, [0xC4] + roster, [0xCA] + versioned]
    }
    return 0
}
