import BatonCore
import Synchronization

/// Rebuilds frames from a byte stream (plain TCP, or TLS plaintext): decodes what it holds and pulls
/// more bytes while no frame is whole. Header limits are checked before a payload is buffered.
final class FrameStreamDecoder: Sendable {
    private let decoder = Mutex(FrameDecoder())

    /// The next whole frame. Throws `.invalidFrame` when the bytes break the framing rules: the stream
    /// cannot be resynchronised after that, so the caller closes it.
    func next(pulling more: () async throws(TransportError) -> [UInt8]) async throws(TransportError) -> Frame {
        while true {
            let decoded: Result<Frame?, WireError> = decoder.withLock { decoder in
                do throws(WireError) { return .success(try decoder.next()) } catch { return .failure(error) }
            }
            switch decoded {
            case .success(let frame?): return frame
            case .failure(let error): throw .invalidFrame(error)
            case .success(nil):
                let bytes = try await more()
                decoder.withLock { $0.append(bytes) }
            }
        }
    }
}
