// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes advert decoding: ring adverts through AdvertMatcher.receive (a ring of four members)
// and pairing adverts through PairingAdvert(decoding:).
//
// An input is a list of operations; the first byte of each picks one:
//   0 raw bytes (length byte, then bytes) to both decoders; must never be accepted as a ring advert
//   1 a member's real header and tag with fuzzed sequence byte and sealed part: must not open
//   2 a body the harness seals with a member's keys: exercises body checks and replay rules
//   3 a pairing advert (header 0x12, 23 fuzzed bytes); accepted ones must re-encode to the input
//   4 move the matcher's epoch by −1, 0 or +1 (the first 3 per input; later ones are skipped)
import BatonCore
import BatonCrypto

let ringEpoch: UInt64 = 2_000_000

struct RingMember: Sendable {
    let id: DeviceID
    let keys: DerivedKeys
}

let ringMembers: [RingMember] = (1...4).map { index in
    let secret = try! AdvertisingSecret(bytes: [UInt8](repeating: UInt8(index), count: 32), generation: UInt32(index))
    return RingMember(id: DeviceID(identityKey: [UInt8](repeating: UInt8(index), count: 32)), keys: DerivedKeys(secret: secret))
}

let templateMatcher: AdvertMatcher = {
    var matcher = AdvertMatcher(epoch: ringEpoch)
    for (index, member) in ringMembers.enumerated() {
        let secret = try! AdvertisingSecret(bytes: [UInt8](repeating: UInt8(index + 1), count: 32), generation: UInt32(index + 1))
        matcher.setMember(member.id, secret: secret)
    }
    return matcher
}()

/// An epoch move makes the matcher derive every member's keys for three epochs (a few dozen HMACs),
/// which took most of each execution when an input could move up to 64 times. Three moves per input
/// reach every case (in the window, at its edges, beyond it, replay state carried across a move).
let maximumEpochMoves = 3

/// Epoch material of every member for every epoch an input can reach (±3 moves, ±2 more),
/// computed once: per-input HMACs would dominate the fuzzer's time.
let reachableMaterial: [UInt64: [EpochMaterial]] = {
    var table: [UInt64: [EpochMaterial]] = [:]
    for epoch in (ringEpoch - 8)...(ringEpoch + 8) {
        table[epoch] = ringMembers.map { $0.keys.epochMaterial(epoch) }
    }
    return table
}()

func material(_ memberIndex: Int, _ epoch: UInt64) -> EpochMaterial {
    reachableMaterial[epoch]?[memberIndex] ?? ringMembers[memberIndex].keys.epochMaterial(epoch)
}

/// Epoch offsets from the matcher's epoch: −1, 0, +1 are in its window, ±2 are not.
func epochFor(_ selector: UInt8, around epoch: UInt64) -> UInt64 {
    epoch &+ UInt64(bitPattern: Int64(Int(selector % 5) - 2))
}

func runOperations(_ input: inout FuzzInput) {
    var matcher = templateMatcher
    var steps = 0
    var epochMoves = 0
    while !input.isEmpty && steps < 64 {
        steps += 1
        switch input.byte() % 5 {
        case 0:
            let advert = input.bytes(Int(input.byte() % 32))
            if let sighting = try? matcher.receive(advert) {
                fuzzCheck(false, "unsealed bytes accepted from \(sighting.member)")
            }
            _ = try? PairingAdvert(decoding: advert)
        case 1:
            let memberIndex = Int(input.byte()) % ringMembers.count
            let tag = material(memberIndex, epochFor(input.byte(), around: matcher.currentEpoch)).tag
            let advert = [AdvertKind.ring.headerByte] + tag + input.bytes(17)
            if let sighting = try? matcher.receive(advert) {
                fuzzCheck(false, "forged seal accepted for \(sighting.member)")
            }
        case 2:
            let memberIndex = Int(input.byte()) % ringMembers.count
            let member = ringMembers[memberIndex]
            let offsetSelector = input.byte()
            let epoch = epochFor(offsetSelector, around: matcher.currentEpoch)
            let sequence = input.byte()
            let typeHash = TypeHash(value: UInt32(input.byte()) << 24 | UInt32(input.byte()) << 16 | UInt32(input.byte()) << 8 | UInt32(input.byte()))
            let revision = UInt32(input.byte()) << 16 | UInt32(input.byte()) << 8 | UInt32(input.byte())
            let body = AdvertBody(typeHash: typeHash, revision: revision, flags: AdvertFlags(rawValue: input.byte()))
            let advert = RingAdvert.seal(body: body, keys: member.keys, epoch: material(memberIndex, epoch), sequence: sequence)
            let inWindow = offsetSelector % 5 != 0 && offsetSelector % 5 != 4
            do {
                let sighting = try matcher.receive(advert)
                fuzzCheck(inWindow, "advert outside the epoch window accepted")
                fuzzCheck(sighting.member == member.id, "advert attributed to the wrong member")
                fuzzCheck(sighting.epoch == epoch && sighting.sequence == sequence, "epoch or sequence changed in transit")
                fuzzCheck(sighting.body.typeHash == typeHash && sighting.body.revision == revision, "body changed in transit")
                // The same bytes again are a re-sighting (§4.3), never a new revision or a replay error.
                let again = try? matcher.receive(advert)
                fuzzCheck(again?.outcome == .sameRevision, "re-sighting not accepted as sameRevision")
            } catch {
                fuzzCheck(inWindow || error == .notRingMember, "out-of-window advert gave \(error)")
            }
        case 3:
            let advert = [AdvertKind.pairing.headerByte] + input.bytes(23)
            if let decoded = try? PairingAdvert(decoding: advert) {
                var expected = advert
                expected[9] &= 0b11  // reserved flag bits are not carried
                fuzzCheck(decoded.encoded == expected, "pairing advert does not re-encode to its input")
            }
        default:
            let selector = input.byte()
            guard epochMoves < maximumEpochMoves else { continue }
            epochMoves += 1
            matcher.advance(toEpoch: epochFor(selector % 3 + 1, around: matcher.currentEpoch))
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    runOperations(&input)
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    writeSeedsIfRequested {
        let pairing = try! PairingAdvert(sessionID: [1, 2, 3, 4, 5, 6, 7, 8], tcpPublished: true, psm: 0x81, name: "laptop").encoded
        return [
            // A sealed activity advert of member 1, current epoch, then the same again.
            [2, 0, 2, 5, 0, 0, 0, 7, 0, 0, 9, 1, 2, 0, 2, 5, 0, 0, 0, 7, 0, 0, 9, 1],
            // A forged advert with member 2's tag, then a raw ring-looking advert.
            [1, 1, 2] + [UInt8](repeating: 0xAB, count: 17) + [0, 24, 0x11] + [UInt8](repeating: 0x5A, count: 23),
            // A valid pairing advert.
            [3] + Array(pairing.dropFirst()),
            // Epoch change, then a sealed advert in the new window.
            [4, 0, 2, 3, 3, 1, 0, 0, 0, 0, 0, 0, 1, 0],
        ]
    }
    return 0
}
