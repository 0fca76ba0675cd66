// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Dispatch
import Synchronization

/// Frames over a byte transport (TLS plaintext, or plain TCP for pairing). Sends are serialised, and
/// so are receives; a send and a receive may run at the same time. Header limits are checked before a
/// payload is buffered.
///
/// A receive asks the transport for exactly the bytes the current frame still needs (header, then
/// payload), so a payload usually arrives as one array that becomes the frame's payload as it is:
/// no decoder buffer to copy through, and nothing of the next frame is ever held here. Memory: one
/// header and one payload within its type's limit.
final class FrameStream: Sendable {
    let transport: any ByteTransport
    private let sendLock = AsyncLock()
    private let receiveLock = AsyncLock()
    /// The frame being received, kept across calls: a receive that times out part way through a frame
    /// leaves it here for the next one, so the stream stays in step.
    private let partial = Mutex(PartialFrame())

    private struct PartialFrame {
        var header: [UInt8] = []
        var parsed: (type: FrameType, requestID: UInt32, length: Int)?
        var payload: [UInt8] = []
    }

    init(_ transport: any ByteTransport) {
        self.transport = transport
    }

    /// Encodes and sends one frame; `.unencodableFrame` (nothing sent) for a frame over its type's limit.
    func send(_ frame: Frame, until deadline: DispatchTime) async throws(TransportError) {
        try await send([frame], until: deadline)
    }

    /// Encodes `frames` into one buffer and sends it with one write: a bulk sender pays the locks,
    /// the TLS call and the system call once per batch. Nothing is sent when one frame is over its
    /// type's limit (`.unencodableFrame`).
    func send(_ frames: [Frame], until deadline: DispatchTime) async throws(TransportError) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(frames.reduce(0) { $0 + Frame.headerLength + $1.payload.count })
        for frame in frames {
            guard frame.payload.count <= frame.type.maxPayload else {
                throw .unencodableFrame(.payloadTooLarge(limit: frame.type.maxPayload, actual: frame.payload.count))
            }
            bytes.append(contentsOf: [Protocol.version, frame.type.rawValue, 0, 0])
            bytes.appendBigEndian(frame.requestID)
            bytes.appendBigEndian(UInt32(frame.payload.count))
            bytes.append(contentsOf: frame.payload)
        }
        try await sendEncoded(bytes, until: deadline)
    }

    /// Sends bytes as they are, after any send in progress.
    func sendEncoded(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError) {
        await sendLock.lock()
        defer { sendLock.unlock() }
        try await transport.send(bytes, until: deadline)
    }

    /// The next whole frame. Bytes that break the framing rules close the transport (`.invalidFrame`):
    /// the stream cannot be resynchronised after them.
    func receive(until deadline: DispatchTime) async throws(TransportError) -> Frame {
        await receiveLock.lock()
        defer { receiveLock.unlock() }
        while true {
            let (header, parsed, held) = partial.withLock { ($0.header, $0.parsed, $0.payload.count) }
            if let parsed {
                if held == parsed.length {
                    let payload = partial.withLock { state in
                        defer { state = PartialFrame() }
                        return state.payload
                    }
                    return Frame(type: parsed.type, requestID: parsed.requestID, payload: payload)
                }
                let bytes = try await transport.receive(upTo: parsed.length - held, until: deadline)
                partial.withLock { state in
                    // The common case: the whole payload in one read, taken as it is.
                    if state.payload.isEmpty { state.payload = bytes } else { state.payload.append(contentsOf: bytes) }
                }
            } else if header.count == Frame.headerLength {
                do throws(WireError) {
                    let fields = try Frame.parseHeader(header[...])
                    partial.withLock { $0.parsed = fields }
                } catch {
                    transport.close()
                    throw .invalidFrame(error)
                }
            } else {
                let bytes = try await transport.receive(upTo: Frame.headerLength - header.count, until: deadline)
                partial.withLock { $0.header.append(contentsOf: bytes) }
            }
        }
    }
}
