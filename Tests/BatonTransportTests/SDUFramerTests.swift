// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport
import Testing

@Suite("BLE SDU framing")
struct SDUFramerTests {
    @Test("Frames split into SDUs of at most the MTU and come back whole", arguments: [23, 64, 251, 512, 65_535])
    func roundTrip(mtu: Int) throws {
        var reassembler = try SDUReassembler(mtu: mtu)
        let frames = [
            Frame(type: .ack, requestID: 1, payload: []),
            Frame(type: .fetchActivity, requestID: 2, payload: [1, 2, 3, 4, 0, 0, 0, 5]),
            Frame(type: .activityPayload, requestID: 3, payload: patternedBytes(70_000)),
        ]
        for frame in frames {
            let sdus = try SDUFramer.split(frame, mtu: mtu)
            let encodedCount = Frame.headerLength + frame.payload.count
            #expect(sdus.count == (encodedCount + mtu - 1) / mtu)
            #expect(sdus.allSatisfy { $0.count <= mtu && !$0.isEmpty })
            var rebuilt: [Frame] = []
            for (index, sdu) in sdus.enumerated() {
                let result = try reassembler.append(sdu)
                if index < sdus.count - 1 { #expect(result == nil) }
                if let result { rebuilt.append(result) }
            }
            #expect(rebuilt == [frame])
            #expect(reassembler.isIdle)
        }
    }

    @Test("An MTU below 23 is refused")
    func smallMTU() {
        #expect(throws: TransportError.invalidSDU("MTU 22 below 23")) { try SDUReassembler(mtu: 22) }
        #expect(throws: TransportError.invalidSDU("MTU 12 below 23")) {
            try SDUFramer.split(Frame(type: .ack, requestID: 1, payload: []), mtu: 12)
        }
    }

    @Test("An SDU over the MTU is refused")
    func oversizeSDU() throws {
        var reassembler = try SDUReassembler(mtu: 23)
        #expect(throws: TransportError.invalidSDU("SDU of 24 bytes over MTU 23")) {
            try reassembler.append([UInt8](repeating: 0, count: 24))
        }
        // Errors are final.
        #expect(throws: TransportError.closed) { try reassembler.append(try Frame(type: .ack, requestID: 1, payload: []).encoded()) }
    }

    @Test("An oversize length is refused at the first SDU, before any payload is kept")
    func oversizeHeader() throws {
        var reassembler = try SDUReassembler(mtu: 23)
        let header: [UInt8] = [1, FrameType.pairCommit.rawValue, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42]
        #expect(throws: TransportError.invalidFrame(.payloadTooLarge(limit: 41, actual: 42))) { try reassembler.append(header) }
    }

    @Test("An SDU carrying bytes of two frames is refused")
    func sduSpanningFrames() throws {
        var reassembler = try SDUReassembler(mtu: 64)
        let two = try Frame(type: .ack, requestID: 1, payload: []).encoded() + Frame(type: .ack, requestID: 2, payload: []).encoded()
        #expect(throws: TransportError.invalidSDU("SDU runs past the end of its frame")) { try reassembler.append(two) }
    }

    @Test("A header split over two SDUs and an empty SDU are refused")
    func malformedSDUs() throws {
        var split = try SDUReassembler(mtu: 23)
        #expect(throws: TransportError.invalidSDU("first SDU shorter than a frame header")) { try split.append([1, 1, 0, 0]) }
        var empty = try SDUReassembler(mtu: 23)
        #expect(throws: TransportError.invalidSDU("empty SDU")) { try empty.append([]) }
    }
}
