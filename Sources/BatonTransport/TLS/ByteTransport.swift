// SPDX-License-Identifier: GPL-2.0-or-later
import Dispatch
import Synchronization

/// What a TLS session's records travel over: an ordered, reliable byte stream. Implemented by a TCP
/// socket (OwnedSocket) and by an L2CAP SDU pipe (SDUByteStream). The TLS engine serialises sends,
/// and serialises receives.
protocol ByteTransport: Sendable {
    /// Sends all of `bytes`. A failure may leave part of them on the wire; the engine then closes.
    func send(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError)
    /// Between 1 and `maximum` bytes; `.closed` at the end of the stream.
    func receive(upTo maximum: Int, until deadline: DispatchTime) async throws(TransportError) -> [UInt8]
    /// Ends the stream and wakes pending sends and receives. Idempotent.
    func close()
    /// As `close`, and what is queued to go out is dropped rather than sent (a peer that may not
    /// have it any more, §6.5). Idempotent.
    func abort()
}

/// An ordered, reliable carrier of SDUs (an L2CAP LE channel, or a fake in tests). Sends are serialised
/// by the caller, and so are receives.
protocol SDUPipe: Sendable {
    /// The largest SDU `sendSDU` may be given.
    var sduSize: Int { get }
    func sendSDU(_ sdu: [UInt8], until deadline: DispatchTime, closeOnStall: Bool) async throws(TransportError)
    /// The next SDU, never empty.
    func receiveSDU(until deadline: DispatchTime) async throws(TransportError) -> [UInt8]
    func close()
}

extension L2CAPFrameChannel: SDUPipe {}

/// A byte stream carried as SDUs (§8.3): bytes go out in SDUs of at most the pipe's SDU size, and SDU
/// boundaries mean nothing on the way in.
final class SDUByteStream: ByteTransport {
    private let pipe: any SDUPipe
    /// What is left of the last SDU when it was larger than a receive asked for.
    private let leftover = Mutex<[UInt8]>([])

    /// Takes ownership of `pipe`: it is closed however this ends.
    init(_ pipe: any SDUPipe) throws(TransportError) {
        guard pipe.sduSize >= SDUFramer.minimumMTU else {
            pipe.close()
            throw .invalidSDU("SDU size \(pipe.sduSize) below \(SDUFramer.minimumMTU)")
        }
        self.pipe = pipe
    }

    deinit { pipe.close() }

    /// A stall closes the pipe: part of a TLS record on the wire cannot be taken back.
    func send(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError) {
        for sdu in try SDUFramer.split(encoded: bytes, mtu: pipe.sduSize) {
            try await pipe.sendSDU(sdu, until: deadline, closeOnStall: true)
        }
    }

    func receive(upTo maximum: Int, until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        var bytes = leftover.withLock { leftover in
            defer { leftover = [] }
            return leftover
        }
        if bytes.isEmpty { bytes = try await pipe.receiveSDU(until: deadline) }
        guard bytes.count > maximum else { return bytes }
        let rest = Array(bytes[maximum...])
        leftover.withLock { $0 = rest }
        return Array(bytes[..<maximum])
    }

    func close() { pipe.close() }

    /// Closing an L2CAP channel purges the SDUs it still queues (L2CAPChannel `closeGracefully`).
    func abort() { pipe.close() }
}
