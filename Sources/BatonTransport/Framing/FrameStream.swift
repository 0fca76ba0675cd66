import BatonCore
import Dispatch
import Synchronization

/// Frames over a byte transport (TLS plaintext, or plain TCP for pairing). Sends are serialised, and
/// so are receives; a send and a receive may run at the same time. Header limits are checked before a
/// payload is buffered.
final class FrameStream: Sendable {
    let transport: any ByteTransport
    private let decoder = Mutex(FrameDecoder())
    private let sendLock = AsyncLock()
    private let receiveLock = AsyncLock()
    /// At most one TLS record (16 KiB) is read at a time, so the decoder never holds more than one
    /// header, one payload within its type's limit, and one record.
    private static let readChunk = 16_384

    init(_ transport: any ByteTransport) {
        self.transport = transport
    }

    /// Encodes and sends one frame; `.unencodableFrame` (nothing sent) for a frame over its type's limit.
    func send(_ frame: Frame, until deadline: DispatchTime) async throws(TransportError) {
        let bytes: [UInt8]
        do { bytes = try frame.encoded() } catch { throw .unencodableFrame(error) }
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
            let decoded: Result<Frame?, WireError> = decoder.withLock { decoder in
                do throws(WireError) { return .success(try decoder.next()) } catch { return .failure(error) }
            }
            switch decoded {
            case .success(let frame?): return frame
            case .failure(let error):
                transport.close()
                throw .invalidFrame(error)
            case .success(nil):
                let bytes = try await transport.receive(upTo: Self.readChunk, until: deadline)
                decoder.withLock { $0.append(bytes) }
            }
        }
    }
}
