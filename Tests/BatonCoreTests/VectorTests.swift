// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonCore
import BatonCrypto

/// Test vectors of docs/protocol.md §10, machine-readable in Vectors/protocol-v1.json.
/// Direction 1: inputs → the code's bytes must equal the file's. Direction 2: the file's
/// bytes → the code's decoder must give the file's fields (or the file's error).
/// `BATON_WRITE_VECTORS=path swift test --filter VectorTests` regenerates the file.
struct ProtocolVectors: Codable, Equatable {
    struct KeySchedule: Codable, Equatable {
        /// S_a (the generation's root, issued on `day` a), its commitment S_(a+1024), and the keys
        /// of day a; K_type comes from the commitment (§3, §3.1).
        var secret: String, day: UInt64, commitment: String, tagKey: String, typeKey: String, mdnsKey: String
        var epochs: [EpochVector]
        var typeHashes: [TypeHashVector]
    }
    /// `dayKey` is S_d of the epoch's day d, from which the row's other values derive (§3.1).
    struct EpochVector: Codable, Equatable { var epoch: UInt64, day: UInt64, dayKey: String, tag: String, mask: String, sealKey: String, mdnsInstance: String }
    struct TypeHashVector: Codable, Equatable { var activityType: String, typeHash: String }
    struct RingAdvertVector: Codable, Equatable {
        var comment: String, secret: String, generation: UInt32, epoch: UInt64, sequence: UInt8
        var typeHash: String, revision: UInt32, flags: UInt8, nonce: String, advert: String
    }
    struct PairingAdvertVector: Codable, Equatable {
        var sessionID: String, tcpPublished: Bool, psm: UInt16?, name: String, advert: String
    }
    struct ValueVector: Codable, Equatable { var comment: String, encoded: String }
    struct FrameVector: Codable, Equatable { var type: UInt8, requestID: UInt32, payload: String, frame: String }
    struct PairingVector: Codable, Equatable {
        var sessionID: String, initiatorPrivate: String, initiatorPublic: String, initiatorNonce: String
        var responderPrivate: String, responderPublic: String, responderNonce: String
        var commitment: String, transcriptHash: String, sas: String, sharedSecret: String
        var keyInitiatorToResponder: String, keyResponderToInitiator: String
    }
    struct RejectVector: Codable, Equatable { var decoder: String, input: String, error: String }
    /// §8.1 X from a fixed TLS 1.3 exporter_master_secret (SHA-256 suites): `secret` is S', `exporter` X.
    struct TLSExporterVector: Codable, Equatable {
        var hash: String, exporterMasterSecret: String, label: String, secret: String, exporter: String
    }
    struct ChannelProofVector: Codable, Equatable {
        var role: String, identitySeed: String, identityKey: String, exporter: String
        var signedBytes: String, proof: String
    }

    var keySchedule: KeySchedule
    var ringAdverts: [RingAdvertVector]
    var pairingAdverts: [PairingAdvertVector]
    var values: [ValueVector]
    var frames: [FrameVector]
    var pairing: PairingVector
    var pairingExchange: PairingExchangeVector
    var rosters: [RosterVector]
    var keyMerges: [KeyMergeVector]
    var rosterMerges: [RosterMergeVector]
    var replays: [ReplayVector]
    var rejects: [RejectVector]
    var channelProofs: [ChannelProofVector]
    var tlsExporter: TLSExporterVector
}

func hex(_ bytes: [UInt8]) -> String { bytes.hexString }
func unhex(_ text: String) -> [UInt8] { [UInt8](hex: text)! }

/// The vectors as the code computes them from fixed inputs.
func computeVectors() throws -> ProtocolVectors {
    let s = try AdvertisingSecret.issue(root: Array(0..<32), generation: 1, day: testDay)
    let keys = DerivedKeys(secret: s)
    // The first epoch of day a, two in the middle, the first two of day a+1 and one of day a+2.
    let epochs = [UInt64(1_999_968), 2_000_000, 2_000_001, 2_000_064, 2_000_065, 2_000_160].map { e -> ProtocolVectors.EpochVector in
        let m = keys.epochMaterial(e)
        let day = AdvertisingSecret.day(ofEpoch: e)
        return .init(epoch: e, day: day, dayKey: hex(s.ratcheted(toDay: day)!.bytes), tag: hex(m.tag), mask: hex([m.mask]),
                     sealKey: hex(keys.sealKeyBytes(epoch: e)), mdnsInstance: keys.mdnsInstanceName(epoch: e))
    }
    let types = ["org.example.Reader.reading", "org.mozilla.firefox.browsing", "a.b"].map {
        ProtocolVectors.TypeHashVector(activityType: $0, typeHash: hex(keys.typeHash($0).bytes))
    }
    func ring(_ comment: String, epoch: UInt64, sequence: UInt8, body: AdvertBody) -> ProtocolVectors.RingAdvertVector {
        let advert = RingAdvert.seal(body: body, keys: keys, epoch: keys.epochMaterial(epoch), sequence: sequence)
        return .init(comment: comment, secret: hex(s.bytes), generation: s.generation, epoch: epoch, sequence: sequence,
                     typeHash: hex(body.typeHash.bytes), revision: body.revision, flags: body.flags.rawValue | (body.clipboard?.flagBits ?? 0),
                     nonce: hex(RingAdvert.nonce(epoch: epoch, sequence: sequence)), advert: hex(advert))
    }
    let rings = [
        ring("activity with webpage URL", epoch: 2_000_000, sequence: 0,
             body: AdvertBody(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 1, flags: [.hasActivity, .hasWebpageURL])),
        ring("same activity, next sequence, new revision", epoch: 2_000_000, sequence: 1,
             body: AdvertBody(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 2, flags: [.hasActivity])),
        ring("presence advert in the next epoch", epoch: 2_000_001, sequence: 0, body: .presence(revision: 3)),
        ring("document, revision near wrap", epoch: 2_000_001, sequence: 255,
             body: AdvertBody(typeHash: keys.typeHash("a.b"), revision: 0xFF_FFFF, flags: [.hasActivity, .hasDocument, .prefersBLE])),
        ring("presence with a clipboard copy of text (bits 4-5 = 1)", epoch: 2_000_001, sequence: 1, body: .presence(revision: 4, clipboard: .text)),
        ring("activity with a clipboard copy of files (bits 4-5 = 3)", epoch: 2_000_001, sequence: 2,
             body: AdvertBody(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 5, flags: [.hasActivity], clipboard: .files)),
    ]
    let pairingAdverts = try [
        PairingAdvert(sessionID: Array(1...8), tcpPublished: true, psm: 0x0081, name: "workstation"),
        PairingAdvert(sessionID: Array(repeating: 0xAB, count: 8), tcpPublished: false, psm: nil, name: "Laptöp of Ada"),
    ].map { ProtocolVectors.PairingAdvertVector(sessionID: hex($0.sessionID), tcpPublished: $0.tcpPublished, psm: $0.psm, name: $0.name, advert: hex($0.encoded)) }
    let valueSamples: [(String, PropertyValue)] = [
        ("string \"hé\"", .string("hé")), ("integer -2", .integer(-2)), ("double 1.5", .double(1.5)),
        ("true", .boolean(true)), ("false", .boolean(false)), ("bytes 00 ff", .bytes([0, 0xFF])),
        ("date 1e9", .date(1e9)), ("array [1, \"a\"]", .array([.integer(1), .string("a")])),
        ("dictionary {b: true, a: 1, \"é\": []} (keys sorted by UTF-8 bytes)", .dictionary(["b": .boolean(true), "a": .integer(1), "é": .array([])])),
    ]
    let values = try valueSamples.map { ProtocolVectors.ValueVector(comment: $0.0, encoded: hex(try PropertyValueCodec.encode($0.1))) }
    let record = try ActivityRecord(activityType: "org.example.Reader.reading", title: "Chapter 3", userInfo: ["page": .integer(42)],
                                    webpageURL: "https://example.org/book#3", version: 7, revision: 1)
    let fileList = try ClipboardFileList(files: [ClipboardFile(name: "notes ü.txt", size: 3, mediaType: "text/plain"),
                                                 ClipboardFile(name: "empty", size: 0, mediaType: "application/octet-stream")])
    let filesOfferID: UInt64 = 0xFEDC_BA98_7654_3210
    let frameSamples: [Frame] = try [
        Frame(type: .hello, requestID: 0, payload: HelloMessage(deviceID: DeviceID(bytes: Array(0..<16)), rosterDigest: 5, maxFramePayload: 1_048_576).payload),
        Frame(type: .fetchActivity, requestID: 7, payload: ActivityReference(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 1).payload),
        Frame(type: .activityPayload, requestID: 7, payload: record.encoded()),
        Frame(type: .activityContinued, requestID: 8, payload: ActivityReference(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 1).payload),
        Frame(type: .ack, requestID: 8, payload: []),
        Frame(type: .error, requestID: 9, payload: ErrorFrame(code: .unknownActivity, message: "no such activity").payload),
        Frame(type: .fetchDocument, requestID: 10, payload: DocumentRequest(activity: ActivityReference(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 1),
                                                                            digest: DocumentRequest.anySnapshot, offset: 0).payload),
        Frame(type: .documentInfo, requestID: 10, payload: DocumentInfo(totalSize: 3, digest: SHA256.hash([0x61, 0x62, 0x63]), mediaType: "text/plain",
                                                                        documentID: "note-1").payload),
        Frame(type: .documentChunk, requestID: 10, payload: DocumentChunk(offset: 0, data: [0x61, 0x62, 0x63]).payload),
        Frame(type: .fetchDocument, requestID: 11, payload: DocumentRequest(activity: ActivityReference(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 1),
                                                                            digest: SHA256.hash([0x61, 0x62, 0x63]), offset: 2).payload),
        Frame(type: .claimEditSession, requestID: 12, payload: EditSessionClaim(documentID: "note-1", baseRevision: 0).payload),
        Frame(type: .editSessionGrant, requestID: 12, payload: EditSessionGrant(granted: DocumentRevision(revision: 1, digest: SHA256.hash([0x61, 0x62, 0x63]))).payload),
        Frame(type: .error, requestID: 13, payload: ErrorFrame(code: .documentConflict, message: "the copies diverged").payload),
        // Versions 1 and 3-5 asked; the current activity (the payload of id 7) has version 7.
        Frame(type: .fetchActivityOfVersions, requestID: 14, payload: FetchActivityOfVersions(
            activity: ActivityReference(typeHash: keys.typeHash("org.example.Reader.reading"), revision: 1), versions: [1...1, 3...5]).payload),
        Frame(type: .error, requestID: 14, payload: ErrorFrame(code: .versionUnsupported, message: "version not asked for").payload),
        // The clipboard (§6.7): an offer of text in two types, the bytes of one from offset 0, and a
        // request at the end of the item answered by one empty frame.
        Frame(type: .fetchClipboardOffer, requestID: 15, payload: []),
        Frame(type: .clipboardOffer, requestID: 15, payload: ClipboardOffer(
            offerID: 0x0123_4567_89AB_CDEF, kind: .text, expiresIn: 120, account: "ada",
            items: [ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 5), ClipboardItem(mediaType: "text/html", size: 12)]).payload),
        Frame(type: .fetchClipboardData, requestID: 16, payload: ClipboardDataRequest(offerID: 0x0123_4567_89AB_CDEF,
                                                                                      mediaType: "text/plain;charset=utf-8", offset: 0).payload),
        Frame(type: .clipboardData, requestID: 16, payload: ClipboardData(offset: 0, total: 5, data: Array("hello".utf8)).payload),
        Frame(type: .fetchClipboardData, requestID: 17, payload: ClipboardDataRequest(offerID: 0x0123_4567_89AB_CDEF,
                                                                                      mediaType: "text/plain;charset=utf-8", offset: 5).payload),
        Frame(type: .clipboardData, requestID: 17, payload: ClipboardData(offset: 5, total: 5, data: []).payload),
        Frame(type: .error, requestID: 18, payload: ErrorFrame(code: .unknownActivity, message: "clipboard changed").payload),
        // A copy of files (§6.7 "Files"): the offer's one item is the list, fetched as any item; each
        // file is asked for with FetchClipboardFile and streamed as a document; the first again from
        // offset 1 with its digest; the empty one; and the answer for a file that changed.
        Frame(type: .fetchClipboardOffer, requestID: 19, payload: []),
        Frame(type: .clipboardOffer, requestID: 19, payload: ClipboardOffer(offerID: filesOfferID, kind: .files, expiresIn: 120, account: "ada",
                                                                            items: [fileList.item]).payload),
        Frame(type: .fetchClipboardData, requestID: 20, payload: ClipboardDataRequest(offerID: filesOfferID, mediaType: ClipboardFileList.mediaType,
                                                                                      offset: 0).payload),
        Frame(type: .clipboardData, requestID: 20, payload: ClipboardData(offset: 0, total: UInt64(fileList.encoded.count), data: fileList.encoded).payload),
        Frame(type: .fetchClipboardFile, requestID: 21, payload: ClipboardFileRequest(offerID: filesOfferID, index: 0).payload),
        Frame(type: .documentInfo, requestID: 21, payload: DocumentInfo(totalSize: 3, digest: SHA256.hash([0x61, 0x62, 0x63]), mediaType: "text/plain",
                                                                        documentID: "notes ü.txt").payload),
        Frame(type: .documentChunk, requestID: 21, payload: DocumentChunk(offset: 0, data: [0x61, 0x62, 0x63]).payload),
        Frame(type: .fetchClipboardFile, requestID: 22, payload: ClipboardFileRequest(offerID: filesOfferID, index: 0, digest: SHA256.hash([0x61, 0x62, 0x63]),
                                                                                      offset: 1).payload),
        Frame(type: .documentInfo, requestID: 22, payload: DocumentInfo(totalSize: 3, digest: SHA256.hash([0x61, 0x62, 0x63]), mediaType: "text/plain",
                                                                        documentID: "notes ü.txt").payload),
        Frame(type: .documentChunk, requestID: 22, payload: DocumentChunk(offset: 1, data: [0x62, 0x63]).payload),
        Frame(type: .fetchClipboardFile, requestID: 23, payload: ClipboardFileRequest(offerID: filesOfferID, index: 1).payload),
        Frame(type: .documentInfo, requestID: 23, payload: DocumentInfo(totalSize: 0, digest: SHA256.hash([]), mediaType: "application/octet-stream",
                                                                        documentID: "empty").payload),
        Frame(type: .fetchClipboardFile, requestID: 24, payload: ClipboardFileRequest(offerID: filesOfferID, index: 0).payload),
        Frame(type: .error, requestID: 24, payload: ErrorFrame(code: .fileChanged, message: "file changed").payload),
    ]
    let frames = try frameSamples.map { ProtocolVectors.FrameVector(type: $0.type.rawValue, requestID: $0.requestID, payload: hex($0.payload), frame: hex(try $0.encoded())) }

    let session: [UInt8] = Array(0xA0..<0xA8)
    let iPriv = try X25519PrivateKey(rawRepresentation: Array(repeating: 0x11, count: 32))
    let rPriv = try X25519PrivateKey(rawRepresentation: Array(repeating: 0x22, count: 32))
    let nI = [UInt8](repeating: 0x33, count: 16), nR = [UInt8](repeating: 0x44, count: 16)
    let commitment = PairingSession.commitment(publicKey: iPriv.publicKey, nonce: nI)
    let h = SHA256.hash("baton/v1 pair".utf8Bytes + session + commitment + iPriv.publicKey + nI + rPriv.publicKey + nR)
    let z = try iPriv.sharedSecret(with: rPriv.publicKey)
    let k = try HKDF.deriveKey(ikm: z, salt: h, info: "baton/v1 pair keys".utf8Bytes, count: 64)
    let pairing = ProtocolVectors.PairingVector(
        sessionID: hex(session), initiatorPrivate: hex(iPriv.rawRepresentation), initiatorPublic: hex(iPriv.publicKey), initiatorNonce: hex(nI),
        responderPrivate: hex(rPriv.rawRepresentation), responderPublic: hex(rPriv.publicKey), responderNonce: hex(nR),
        commitment: hex(commitment), transcriptHash: hex(h), sas: PairingSession.shortAuthenticationString(transcriptHash: h),
        sharedSecret: hex(z), keyInitiatorToResponder: hex(Array(k[0..<32])), keyResponderToInitiator: hex(Array(k[32..<64])))

    var tampered = unhex(rings[0].advert); tampered[23] ^= 0x80
    let rejects: [ProtocolVectors.RejectVector] = [
        .init(decoder: "ringAdvert", input: hex(Array(unhex(rings[0].advert).dropLast())), error: "malformed(length)"),
        .init(decoder: "ringAdvert", input: "21" + String(repeating: "00", count: 23), error: "unsupportedVersion"),
        .init(decoder: "ringAdvert", input: "13" + String(repeating: "00", count: 23), error: "unknownKind"),
        .init(decoder: "ringAdvert", input: "11" + String(repeating: "5a", count: 23), error: "notRingMember"),
        .init(decoder: "ringAdvert", input: hex(tampered), error: "authenticationFailed"),
        .init(decoder: "frame", input: "02020000000000070000000800000001", error: "unsupportedVersion"),
        .init(decoder: "frame", input: "01020001000000070000000800000001", error: "malformed(reserved)"),
        .init(decoder: "frame", input: "017f00000000000000000000", error: "unknownType"),
        .init(decoder: "frame", input: "01020000000000070000000900000001000000000000", error: "payloadTooLarge"),
        .init(decoder: "frame", input: "010500000000000100000000ff", error: "trailingBytes"),
        .init(decoder: "value", input: "0100000002c3", error: "truncated"),
        .init(decoder: "value", input: "0100000001ff", error: "malformed(string not UTF-8)"),
        .init(decoder: "value", input: "090000000200000001620400000001610" + "4", error: "malformed(dictionary keys not strictly ascending)"),
        .init(decoder: "value", input: "037ff8000000000000", error: "malformed(NaN)"),
        .init(decoder: "value", input: "0a", error: "malformed(value type 10)"),
        .init(decoder: "value", input: String(repeating: "0800000001", count: 16) + "04", error: "tooDeep"),
        .init(decoder: "value", input: "077ff0000000000000", error: "malformed(date not finite)"),
        .init(decoder: "value", input: "07fff0000000000000", error: "malformed(date not finite)"),
        .init(decoder: "frame", input: "010200000000000700000008716b730601000000", error: "malformed(revision)"),
        .init(decoder: "frame", input: hex(try Frame(type: .activityPayload, requestID: 7, payload: activityPayload(type: "reading")).encoded()),
              error: "malformed(activity type labels)"),
        .init(decoder: "frame", input: hex(try Frame(type: .activityPayload, requestID: 7, payload: activityPayload(type: "org..example")).encoded()),
              error: "malformed(activity type labels)"),
        .init(decoder: "frame", input: "010100000000000000000018" + String(repeating: "00", count: 24), error: "truncated"),
        .init(decoder: "frame", input: "01070000000000100000003071" + String(repeating: "00", count: 46) + "01",
              error: "malformed(an offset needs the snapshot's digest)"),
        .init(decoder: "frame", input: "010900000000001000000008" + "0000000000000000", error: "malformed(empty chunk)"),
        .init(decoder: "frame", input: "010800000000001000000029" + "0000000000000003" + String(repeating: "11", count: 32) + "00", error: "truncated"),
        .init(decoder: "frame", input: "010900000000001000010009", error: "payloadTooLarge"),
        .init(decoder: "frame", input: "010a00000000001200000009" + "00" + "0000000000000000", error: "malformed(document id length)"),
        .init(decoder: "frame", input: "010a0000000000120000000a" + "02" + "6e" + "0000000000000000", error: "truncated"),
        .init(decoder: "frame", input: "010b000000000012000000280000000000000000" + String(repeating: "11", count: 32), error: "malformed(revision 0)"),
        .init(decoder: "frame", input: "010b00000000001200000029", error: "payloadTooLarge"),
        // FetchActivityOfVersions (§6.2): range count 0 and 17, a reversed range, a payload that ends
        // inside its range, a byte after it, the revision rule, and a length over 8 + 1 + 16 × 16.
        .init(decoder: "frame", input: "010c00000000001400000009" + "a8020b9f" + "00000001" + "00", error: "malformed(range count)"),
        .init(decoder: "frame", input: "010c00000000001400000009" + "a8020b9f" + "00000001" + "11", error: "malformed(range count)"),
        .init(decoder: "frame", input: "010c00000000001400000019" + "a8020b9f" + "00000001" + "01" + "0000000000000005" + "0000000000000003",
              error: "malformed(range)"),
        .init(decoder: "frame", input: "010c00000000001400000011" + "a8020b9f" + "00000001" + "01" + "0000000000000001", error: "truncated"),
        .init(decoder: "frame", input: "010c0000000000140000001a" + "a8020b9f" + "00000001" + "01" + "0000000000000001" + "0000000000000001" + "00",
              error: "trailingBytes"),
        .init(decoder: "frame", input: "010c00000000001400000019" + "a8020b9f" + "01000000" + "01" + "0000000000000001" + "0000000000000001",
              error: "malformed(revision)"),
        .init(decoder: "frame", input: "010c0000000000140000010a", error: "payloadTooLarge"),
        // The clipboard frames (§6.7).
        .init(decoder: "frame", input: "010d00000000000f00000001" + "00", error: "payloadTooLarge"),
        .init(decoder: "frame", input: "010e00000000000f0000001a" + "0123456789abcdef" + "04" + "0078" + "03616461" + "01" + "0161" + "0000000000000001",
              error: "malformed(kind)"),
        .init(decoder: "frame", input: "010e00000000000f0000001a" + "0123456789abcdef" + "01" + "0000" + "03616461" + "01" + "0161" + "0000000000000001",
              error: "malformed(expiry)"),
        .init(decoder: "frame", input: "010e00000000000f0000001a" + "0123456789abcdef" + "01" + "0e11" + "03616461" + "01" + "0161" + "0000000000000001",
              error: "malformed(expiry)"),
        .init(decoder: "frame", input: "010e00000000000f00000017" + "0123456789abcdef" + "01" + "0078" + "00" + "01" + "0161" + "0000000000000001",
              error: "malformed(account length)"),
        .init(decoder: "frame", input: "010e00000000000f0000001a" + "0123456789abcdef" + "01" + "0078" + "03612f62" + "01" + "0161" + "0000000000000001",
              error: "malformed(account characters)"),
        .init(decoder: "frame", input: "010e00000000000f00000010" + "0123456789abcdef" + "01" + "0078" + "03616461" + "00",
              error: "malformed(item count)"),
        .init(decoder: "frame", input: "010e00000000000f00000010" + "0123456789abcdef" + "01" + "0078" + "03616461" + "11",
              error: "malformed(item count)"),
        .init(decoder: "frame", input: "010e00000000000f0000001a" + "0123456789abcdef" + "01" + "0078" + "03616461" + "01" + "0120" + "0000000000000001",
              error: "malformed(media type characters)"),
        .init(decoder: "frame", input: "010e00000000000f0000001a" + "0123456789abcdef" + "01" + "0078" + "03616461" + "01" + "0161" + "0000000004000001",
              error: "malformed(item size)"),
        .init(decoder: "frame", input: "010e00000000000f00000024" + "0123456789abcdef" + "01" + "0078" + "03616461" + "02" + "0161" + "0000000000000001"
              + "0161" + "0000000000000002", error: "malformed(media type repeated)"),
        .init(decoder: "frame", input: "010e00000000000f0000001b" + "0123456789abcdef" + "01" + "0078" + "03616461" + "01" + "0161" + "0000000000000001" + "00",
              error: "trailingBytes"),
        .init(decoder: "frame", input: "010f00000000001000000012" + "0123456789abcdef" + "01" + "61" + "0000000004000001", error: "malformed(offset)"),
        .init(decoder: "frame", input: "010f00000000001000000011" + "0123456789abcdef" + "00" + "0000000000000000", error: "malformed(media type length)"),
        .init(decoder: "frame", input: "011100000000001000000013" + "0000000000000000" + "0000000000000002" + "616263", error: "malformed(data beyond the item)"),
        .init(decoder: "frame", input: "011100000000001000000010" + "0000000000000000" + "0000000000000002", error: "malformed(empty data)"),
        .init(decoder: "frame", input: "011100000000001000000011" + "0000000000000000" + "0000000004000001" + "61", error: "malformed(item size)"),
        .init(decoder: "frame", input: "01110000000000100000000f" + "0000000000000000" + "00000000000000", error: "truncated"),
        .init(decoder: "frame", input: "011100000000001000010011", error: "payloadTooLarge"),
        .init(decoder: "frame", input: "010e00000000000f00000018" + "0123456789abcdef" + "01" + "0078" + "01ff" + "01" + "0161" + "0000000000000001",
              error: "malformed(account not UTF-8)"),
        .init(decoder: "frame", input: "010e00000000000f0000000c" + "0123456789abcdef" + "01" + "0078" + "41", error: "malformed(account length)"),
        .init(decoder: "frame", input: "010e00000000000f00000018" + "0123456789abcdef" + "01" + "0078" + "0161" + "01" + "0180" + "0000000000000001",
              error: "malformed(media type characters)"),
        .init(decoder: "frame", input: "010e00000000000f00000017" + "0123456789abcdef" + "01" + "0078" + "0161" + "01" + "00" + "0000000000000001",
              error: "malformed(media type length)"),
        .init(decoder: "frame", input: "011100000000001000000010" + "0000000000000003" + "0000000000000002", error: "malformed(data beyond the item)"),
        // FetchClipboardFile (§6.7 "Files"): an index of 256, an offset without the digest, one byte short, one over 50.
        .init(decoder: "frame", input: "011200000000001500000032" + "fedcba9876543210" + "0100" + String(repeating: "00", count: 40), error: "malformed(file index)"),
        .init(decoder: "frame", input: "011200000000001500000032" + "fedcba9876543210" + "0000" + String(repeating: "00", count: 39) + "01",
              error: "malformed(an offset needs the file's digest)"),
        .init(decoder: "frame", input: "011200000000001500000031" + "fedcba9876543210" + "0000" + String(repeating: "00", count: 39), error: "truncated"),
        .init(decoder: "frame", input: "011200000000001500000033", error: "payloadTooLarge"),
        // The list of a files offer (§6.7 "Files"), the item's bytes alone.
        .init(decoder: "fileList", input: "0000", error: "malformed(file count)"),
        .init(decoder: "fileList", input: "0101" + "0161" + "0000000000000001" + "0161", error: "malformed(file count)"),
        .init(decoder: "fileList", input: "0001" + "00", error: "malformed(file name length)"),
        .init(decoder: "fileList", input: "0001" + "01ff" + "0000000000000001" + "0161", error: "malformed(file name not UTF-8)"),
        .init(decoder: "fileList", input: "0001" + "022e2e" + "0000000000000001" + "0161", error: "malformed(file name characters)"),
        .init(decoder: "fileList", input: "0001" + "03612f62" + "0000000000000001" + "0161", error: "malformed(file name characters)"),
        .init(decoder: "fileList", input: "0001" + "020a61" + "0000000000000001" + "0161", error: "malformed(file name characters)"),
        .init(decoder: "fileList", input: "0002" + "0161" + "ffffffffffffffff" + "0161" + "0162" + "0000000000000001" + "0161",
              error: "malformed(file sizes)"),
        .init(decoder: "fileList", input: "0001" + "0161" + "0000000000000001" + "00", error: "malformed(media type length)"),
        .init(decoder: "fileList", input: "0001" + "0161" + "0000000000000001" + "0120", error: "malformed(media type characters)"),
        .init(decoder: "fileList", input: "0001" + "0161" + "0000000000000001" + "0161" + "00", error: "trailingBytes"),
        .init(decoder: "fileList", input: "0002" + "0161" + "0000000000000001" + "0161", error: "truncated"),
        .init(decoder: "pairingAdvert", input: "120102030405060708020000" + "6162ff00" + String(repeating: "00", count: 8), error: "malformed(name)"),
        .init(decoder: "pairingAdvert", input: "120102030405060708020100" + "616263" + String(repeating: "00", count: 9), error: "malformed(psm)"),
        .init(decoder: "pairingAdvert", input: "120102030405060708000081" + "616263" + String(repeating: "00", count: 9), error: "malformed(psm)"),
        .init(decoder: "roster", input: hex(try forgedRoster()), error: "malformed(roster member id)"),
        .init(decoder: "roster", input: hex(try tamperedRoster("secret", .bytes(Array(repeating: 0x67, count: 32)))), error: "badSignature"),
        // The day key of day a+1 claimed for day a, or the root claimed for day a+1: the chain misses the commitment.
        .init(decoder: "roster", input: hex(try tamperedRoster("secret", .bytes(
            AdvertisingSecret.step(Array(repeating: 0x66, count: 32), toDay: testDay + 1)))), error: "badSignature"),
        // The commitment given as the key: 0 ratchet steps do not count (§3.1), C is never a key.
        .init(decoder: "roster", input: hex(try tamperedRoster("secret", .bytes(
            AdvertisingSecret.issue(root: Array(repeating: 0x66, count: 32), generation: 1, day: testDay).chain!.commitment))), error: "badSignature"),
        .init(decoder: "roster", input: hex(try tamperedRoster("day", .integer(Int64(testDay) + 1))), error: "badSignature"),
        .init(decoder: "roster", input: hex(try tamperedRoster("commitment", .bytes(Array(repeating: 0x67, count: 32)))), error: "badSignature"),
        .init(decoder: "roster", input: hex(try tamperedRoster("day", nil)), error: "malformed(roster member)"),
        .init(decoder: "roster", input: hex(try tamperedRoster("name", .string("desktop"))), error: "badSignature"),
        .init(decoder: "roster", input: hex(try tamperedRoster("signature", nil)), error: "malformed(roster member)"),
        .init(decoder: "roster", input: hex(try tamperedRoster("generation", .integer(Int64(UInt32.max)))), error: "malformed(roster member)"),
    ]
    return ProtocolVectors(keySchedule: .init(secret: hex(s.bytes), day: s.day, commitment: hex(s.chain!.commitment), tagKey: hex(keys.tagKey),
                                              typeKey: hex(keys.typeKey), mdnsKey: hex(keys.mdnsKey), epochs: epochs, typeHashes: types),
                           ringAdverts: rings, pairingAdverts: pairingAdverts, values: values, frames: frames, pairing: pairing,
                           pairingExchange: try PairingVectorSource.exchange(), rosters: try PairingVectorSource.rosters(),
                           keyMerges: try PairingVectorSource.keyMerges(), rosterMerges: try PairingVectorSource.rosterMerges(),
                           replays: try PairingVectorSource.replays(keys: keys), rejects: rejects,
                           channelProofs: try channelProofVectors(), tlsExporter: try tlsExporterVector())
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with SHA-256, as §8.1 writes it out.
func hkdfExpandLabel(_ secret: [UInt8], _ label: String, _ context: [UInt8], _ count: Int) throws -> [UInt8] {
    let full = Array(("tls13 " + label).utf8)
    let info = [UInt8(count >> 8), UInt8(count & 0xff), UInt8(full.count)] + full + [UInt8(context.count)] + context
    return try HKDF.expand(prk: secret, info: info, count: count)
}

/// The exporter_master_secret of one real TLS 1.3 session (TLS_AES_128_GCM_SHA256, OpenSSL 3.0
/// `s_client -keylogfile`, its EXPORTER_SECRET line) and the X OpenSSL's SSL_export_keying_material
/// gave in that session for §8.1's label, length 32, no context (`s_client -keymatexport`).
let openSSLSessionExporterSecret = "86ac83f29a66981c576f0d578c79dacef787417ff534de8701edb64e8d1346ee"
let openSSLSessionExporter = "490ee990bb0bef36090bc9759c92ef201558b7775a6674ce3b825c575179bcce"

/// §8.1 X from that exporter_master_secret, by the RFC 8446 §7.5 exporter as §8.1 writes it out.
func tlsExporterVector() throws -> ProtocolVectors.TLSExporterVector {
    let master = unhex(openSSLSessionExporterSecret)
    let emptyHash = SHA256.hash([])
    let derived = try hkdfExpandLabel(master, ChannelIdentityProof.exporterLabel, emptyHash, SHA256.byteCount)
    let exporter = try hkdfExpandLabel(derived, "exporter", emptyHash, ChannelIdentityProof.exporterByteCount)
    return .init(hash: "SHA-256", exporterMasterSecret: hex(master), label: ChannelIdentityProof.exporterLabel,
                 secret: hex(derived), exporter: hex(exporter))
}

/// §8.1 identity proofs of one fixed identity for a fixed exporter value, both roles.
func channelProofVectors() throws -> [ProtocolVectors.ChannelProofVector] {
    let identity = try Ed25519PrivateKey(seed: Array(repeating: 0x77, count: 32))
    let exporter = Array(UInt8(0x20)..<UInt8(0x40))
    return try [(ChannelIdentityProof.Role.client, "client"), (.server, "server")].map { role, name in
        let proof = try ChannelIdentityProof.make(role: role, exporter: exporter, identity: identity)
        return .init(role: name, identitySeed: hex(identity.seed), identityKey: hex(identity.publicKey), exporter: hex(exporter),
                     signedBytes: hex(ChannelIdentityProof.signedBytes(role: role, exporter: exporter)),
                     proof: hex(proof.encoded))
    }
}

/// An activity value with every key of §6.4 but the given type (to build reject vectors).
func activityPayload(type: String) throws -> [UInt8] {
    try PropertyValueCodec.encode(.dictionary([
        "revision": .integer(1), "title": .string("t"), "type": .string(type), "userInfo": .dictionary([:]), "version": .integer(0),
    ]))
}

/// A one-member roster whose deviceId is not SHA-256(identityKey)[0..<16].
func forgedRoster() throws -> [UInt8] {
    try PropertyValueCodec.encode(.dictionary([
        "version": .integer(1), "removed": .array([]),
        "members": .array([.dictionary([
            "deviceId": .bytes(Array(repeating: 1, count: 16)), "name": .string("x"), "identityKey": .bytes(Array(repeating: 2, count: 32)),
            "secret": .bytes(Array(repeating: 3, count: 32)), "generation": .integer(1), "signature": .bytes(Array(repeating: 4, count: 64)),
            "day": .integer(1), "commitment": .bytes(Array(repeating: 5, count: 32)),
        ])]),
    ]))
}

/// A one-member roster whose entry is not signed by its own identity key, or whose generation
/// is 2³²−1 (§7.3): `field` replaces one field of a correctly signed entry.
func tamperedRoster(_ field: String, _ value: PropertyValue?) throws -> [UInt8] {
    let identity = try Ed25519PrivateKey(seed: Array(repeating: 0x55, count: 32))
    let member = try RosterMember.signed(name: "laptop", identity: identity,
                                         secret: AdvertisingSecret.issue(root: Array(repeating: 0x66, count: 32), generation: 1, day: testDay))
    guard case .dictionary(var entry) = member.propertyValue else { return [] }
    entry[field] = value
    return try PropertyValueCodec.encode(.dictionary([
        "version": .integer(1), "removed": .array([]), "members": .array([.dictionary(entry)]),
    ]))
}

/// Decodes a frame and its payload by type (§6.2), as the `frame` reject vectors expect.
func decodeFrameAndPayload(_ bytes: [UInt8]) throws(WireError) {
    let frame = try Frame.decode(bytes)
    switch frame.type {
    case .hello: _ = try HelloMessage(payload: frame.payload)
    case .fetchActivity, .activityContinued: _ = try ActivityReference(payload: frame.payload)
    case .activityPayload: _ = try ActivityRecord(decoding: frame.payload)
    case .error: _ = try ErrorFrame(payload: frame.payload)
    case .ringSync: _ = try Roster(decoding: frame.payload)
    case .fetchDocument: _ = try DocumentRequest(payload: frame.payload)
    case .documentInfo: _ = try DocumentInfo(payload: frame.payload)
    case .documentChunk: _ = try DocumentChunk(payload: frame.payload)
    case .claimEditSession: _ = try EditSessionClaim(payload: frame.payload)
    case .editSessionGrant: _ = try EditSessionGrant(payload: frame.payload)
    case .fetchActivityOfVersions: _ = try FetchActivityOfVersions(payload: frame.payload)
    case .clipboardOffer: _ = try ClipboardOffer(payload: frame.payload)
    case .fetchClipboardData: _ = try ClipboardDataRequest(payload: frame.payload)
    case .clipboardData: _ = try ClipboardData(payload: frame.payload)
    case .fetchClipboardFile: _ = try ClipboardFileRequest(payload: frame.payload)
    default: break
    }
}

/// The name docs/protocol.md uses for an error (payload details dropped where the spec has none).
func specName(_ error: WireError) -> String {
    switch error {
    case .malformed(let what): "malformed(\(what))"
    case .unsupportedVersion: "unsupportedVersion"
    case .unknownKind: "unknownKind"
    case .unknownType: "unknownType"
    case .payloadTooLarge: "payloadTooLarge"
    case .tooDeep: "tooDeep"
    default: "\(error)"
    }
}

@Suite struct VectorTests {
    func fileVectors() throws -> ProtocolVectors {
        let url = try #require(Bundle.module.url(forResource: "protocol-v1", withExtension: "json", subdirectory: "Vectors"))
        return try JSONDecoder().decode(ProtocolVectors.self, from: Data(contentsOf: url))
    }

    @Test func codeProducesTheFilesBytes() throws {
        let computed = try computeVectors()
        if let path = ProcessInfo.processInfo.environment["BATON_WRITE_VECTORS"] {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try encoder.encode(computed).write(to: URL(fileURLWithPath: path))
        }
        #expect(try fileVectors() == computed)
    }

    @Test func fileBytesDecodeToTheFilesFields() throws {
        let v = try fileVectors()
        for ring in v.ringAdverts {
            let s = try AdvertisingSecret(bytes: unhex(ring.secret), generation: ring.generation)
            var matcher = AdvertMatcher(epoch: ring.epoch)
            matcher.setMember(deviceID(1), secret: s)
            let sighting = try matcher.receive(unhex(ring.advert))
            #expect(sighting.sequence == ring.sequence)
            #expect(sighting.body.revision == ring.revision)
            #expect(sighting.body.flags.rawValue | (sighting.body.clipboard?.flagBits ?? 0) == ring.flags)
            #expect(hex(sighting.body.typeHash.bytes) == ring.typeHash)
        }
        for p in v.pairingAdverts {
            let decoded = try PairingAdvert(decoding: unhex(p.advert))
            #expect(hex(decoded.sessionID) == p.sessionID)
            #expect(decoded.psm == p.psm)
            #expect(decoded.name == p.name)
            #expect(decoded.tcpPublished == p.tcpPublished)
        }
        for value in v.values {
            let decoded = try PropertyValueCodec.decode(unhex(value.encoded))
            #expect(try hex(PropertyValueCodec.encode(decoded)) == value.encoded)
        }
        for f in v.frames {
            let frame = try Frame.decode(unhex(f.frame))
            #expect(frame.type.rawValue == f.type && frame.requestID == f.requestID && hex(frame.payload) == f.payload)
        }
        for c in v.channelProofs {
            let proof = try ChannelIdentityProof(decoding: unhex(c.proof))
            let role: ChannelIdentityProof.Role = c.role == "client" ? .client : .server
            let other: ChannelIdentityProof.Role = c.role == "client" ? .server : .client
            let candidates = [try Ed25519PrivateKey(seed: Array(repeating: 0x55, count: 32)).publicKey, unhex(c.identityKey)]
            #expect(proof.signer(among: candidates, role: role, exporter: unhex(c.exporter)) == unhex(c.identityKey))
            #expect(proof.signer(among: candidates, role: other, exporter: unhex(c.exporter)) == nil)
        }
        let p = v.pairing
        let i = try X25519PrivateKey(rawRepresentation: unhex(p.initiatorPrivate))
        #expect(hex(try i.sharedSecret(with: unhex(p.responderPublic))) == p.sharedSecret)
        #expect(PairingSession.shortAuthenticationString(transcriptHash: unhex(p.transcriptHash)) == p.sas)
    }

    /// §8.1's computation of X gives what OpenSSL exported in a real session.
    @Test func theExporterOfSection8Point1IsWhatOpenSSLExports() throws {
        let v = try fileVectors()
        #expect(v.tlsExporter.exporterMasterSecret == openSSLSessionExporterSecret)
        #expect(v.tlsExporter.exporter == openSSLSessionExporter)
        #expect(v.tlsExporter.label == ChannelIdentityProof.exporterLabel)
    }

    @Test func rejectVectorsFailAsTheSpecSays() throws {
        let v = try fileVectors()
        let s = try AdvertisingSecret.issue(root: unhex(v.keySchedule.secret), generation: 1, day: v.keySchedule.day)
        for reject in v.rejects {
            let input = unhex(reject.input)
            do {
                switch reject.decoder {
                case "ringAdvert":
                    var matcher = AdvertMatcher(epoch: 2_000_000)
                    matcher.setMember(deviceID(1), secret: s)
                    _ = try matcher.receive(input)
                case "frame": try decodeFrameAndPayload(input)
                case "pairingAdvert": _ = try PairingAdvert(decoding: input)
                case "fileList": _ = try ClipboardFileList(encoded: input)
                case "roster": _ = try Roster(decoding: input)
                default: _ = try PropertyValueCodec.decode(input)
                }
                Issue.record("\(reject.decoder) \(reject.input) was accepted")
            } catch {
                #expect((error as? WireError).map(specName) == reject.error, "\(reject.decoder) \(reject.input)")
            }
        }
    }
}
