import BatonCore
import COpenSSL
import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc
import Synchronization

/// One TLS session over one nonblocking TCP socket. libssl calls happen under `state`'s lock (an SSL
/// object must not be used by two threads at once); waiting for the socket happens outside it, so a
/// pending receive never holds up a send or a close.
final class TLSConnection: TLSSession {
    /// An SSL object may move between threads as long as one thread uses it at a time; the mutex
    /// around `State` guarantees that.
    private struct SSLHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct State: Sendable {
        /// Owned here, freed in deinit.
        let handle: SSLHandle
        var ssl: OpaquePointer { handle.pointer }
        var decoder = FrameDecoder()
        var closed = false
    }

    /// One libssl step: done, or which way the socket must become ready first.
    private enum Step<Value> {
        case done(Value)
        case wait(SocketReadiness)
        case failed(TransportError)
    }

    /// At most one TLS record (16 KiB) is read at a time, so the frame decoder never holds more than
    /// one header, one payload within its type's limit, and one record.
    private static let readChunk = 16_384

    let descriptor: Int32
    let verification: HandshakeVerification
    private let state: Mutex<State>
    private let onClose: Mutex<(@Sendable () -> Void)?>

    /// Takes ownership of `descriptor`: it is closed (and `onClose` called) however this ends.
    init(context: TLSContext, descriptor: Int32, pins: @escaping PinProvider, onClose: @escaping @Sendable () -> Void) throws(TransportError) {
        guard let ssl = SSL_new(context.pointer) else {
            Glibc.close(descriptor)
            onClose()
            throw .library(takeSSLError("SSL_new").text)
        }
        self.descriptor = descriptor
        self.verification = HandshakeVerification(pins: pins)
        self.state = Mutex(State(handle: SSLHandle(pointer: ssl)))
        self.onClose = Mutex(onClose)
        // The verification object lives as long as this connection, which outlives the SSL.
        _ = SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(verification).toOpaque())
        guard SSL_set_fd(ssl, descriptor) == 1 else { throw .library(takeSSLError("SSL_set_fd").text) }
        if context.role == .server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
    }

    deinit {
        state.withLock { SSL_free($0.ssl) }
        Glibc.close(descriptor)
        runOnClose()
    }

    private func runOnClose() {
        let callback = onClose.withLock { callback in
            defer { callback = nil }
            return callback
        }
        callback?()
    }

    /// Runs one libssl call under the lock and classifies its result.
    private func step<Value>(_ operation: (inout State) -> (status: Int32, value: Value)) -> Step<Value> {
        state.withLock { state in
            guard !state.closed else { return .failed(.closed) }
            ERR_clear_error()
            let (status, value) = operation(&state)
            if status == 1 { return .done(value) }
            switch SSL_get_error(state.ssl, status) {
            case SSL_ERROR_WANT_READ: return .wait(.readable)
            case SSL_ERROR_WANT_WRITE: return .wait(.writable)
            case SSL_ERROR_ZERO_RETURN:
                return .failed(.closed)
            case SSL_ERROR_SYSCALL:
                let code = errno
                ERR_clear_error()
                return .failed(code == 0 || code == EPIPE || code == ECONNRESET ? .closed : .socket(operation: "TLS I/O", errno: code))
            default:
                let error = takeSSLError("TLS")
                // OpenSSL 3 reports a peer that closed without close_notify this way; for frames (which
                // carry their own length) that is an ordinary end of stream.
                if error.reason == SSL_R_UNEXPECTED_EOF_WHILE_READING { return .failed(.closed) }
                return .failed(.connectionFailed(error.text))
            }
        }
    }

    /// Repeats `operation` until it completes, waiting for the socket in between.
    private func drive<Value>(
        until deadline: DispatchTime,
        timeoutError: TransportError,
        _ operation: (inout State) -> (status: Int32, value: Value)
    ) async throws(TransportError) -> Value {
        while true {
            switch step(operation) {
            case .done(let value): return value
            case .failed(let error): throw error
            case .wait(let readiness):
                switch await waitForSocket(descriptor, readiness, until: deadline) {
                case .ready: continue
                case .timedOut: throw timeoutError
                case .cancelled: throw .closed
                }
            }
        }
    }

    /// Runs the handshake and returns the verified peer identity key.
    func handshake(until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        do {
            try await drive(until: deadline, timeoutError: .handshakeTimedOut) { state in
                (SSL_do_handshake(state.ssl), ())
            }
        } catch .connectionFailed(let text) {
            throw classifyHandshakeFailure(text)
        } catch {
            throw verification.rejection ?? error
        }
        return try checkNegotiatedSession()
    }

    private func classifyHandshakeFailure(_ text: String) -> TransportError {
        classifyBatonHandshakeFailure(text, verification: verification)
    }
}

/// The callbacks' verdict is the most precise; otherwise libssl's reason code.
func classifyBatonHandshakeFailure(_ text: String, verification: HandshakeVerification) -> TransportError {
    if let rejection = verification.rejection { return rejection }
    let lowered = text.lowercased()
    if lowered.contains("peer did not return a certificate") || lowered.contains("certificate required") {
        return .peerCertificateMissing
    }
    if lowered.contains("no application protocol") {
        return .alpnMismatch
    }
    return .handshakeFailed(text)
}

/// After a completed handshake: ALPN must be `baton/1` (a client that offered none is not caught by
/// the selection callback) and the certificate that was pinned must be the one the session uses.
func checkNegotiatedBatonSession(_ ssl: OpaquePointer, verification: HandshakeVerification) throws(TransportError) -> [UInt8] {
    var selected: UnsafePointer<UInt8>?
    var length: UInt32 = 0
    SSL_get0_alpn_selected(ssl, &selected, &length)
    guard let selected, Array(UnsafeBufferPointer(start: selected, count: Int(length))) == batonALPN else {
        throw .alpnMismatch
    }
    guard let certificate = SSL_get0_peer_certificate(ssl) else { throw .peerCertificateMissing }
    guard let key = ed25519PublicKey(of: certificate) else { throw .peerKeyNotEd25519 }
    guard let verified = verification.verifiedKey, verified == key else {
        throw .peerNotPinned(identityKey: key)
    }
    return key
}

extension TLSConnection {

    private func checkNegotiatedSession() throws(TransportError) -> [UInt8] {
        try state.withLock { state throws(TransportError) in
            try checkNegotiatedBatonSession(state.ssl, verification: verification)
        }
    }

    /// Writes all of `bytes` or throws.
    func write(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError) {
        guard !bytes.isEmpty else { return }
        try await drive(until: deadline, timeoutError: .timedOut) { state in
            var written = 0
            // A retry after WANT_WRITE passes the same bytes again, as libssl requires.
            let status = bytes.withUnsafeBytes { SSL_write_ex(state.ssl, $0.baseAddress, $0.count, &written) }
            return (status, ())
        }
    }

    /// The next whole frame. A framing error closes the connection: the stream cannot be resynchronised.
    func readFrame(until deadline: DispatchTime) async throws(TransportError) -> Frame {
        var chunk = [UInt8](repeating: 0, count: Self.readChunk)
        while true {
            let decoded: Result<Frame?, WireError> = state.withLock { state in
                do throws(WireError) { return .success(try state.decoder.next()) } catch { return .failure(error) }
            }
            switch decoded {
            case .success(let frame?): return frame
            case .success(nil): break
            case .failure(let error):
                close()
                throw .invalidFrame(error)
            }
            try await drive(until: deadline, timeoutError: .timedOut) { state in
                var count = 0
                let status = chunk.withUnsafeMutableBytes { SSL_read_ex(state.ssl, $0.baseAddress, $0.count, &count) }
                if status == 1 { state.decoder.append(Array(chunk[0..<count])) }
                return (status, ())
            }
        }
    }

    /// Sends close_notify if the socket takes it right away, then shuts the socket down, which also wakes
    /// any task waiting on it. The descriptor itself is closed when the last user lets go (deinit).
    func close() {
        let wasOpen = state.withLock { state in
            guard !state.closed else { return false }
            state.closed = true
            ERR_clear_error()
            _ = SSL_shutdown(state.ssl)
            ERR_clear_error()
            return true
        }
        guard wasOpen else { return }
        _ = shutdown(descriptor, Int32(SHUT_RDWR))
        runOnClose()
    }

    var isClosed: Bool { state.withLock { $0.closed } }
}
