import BatonCore
import COpenSSL
import Dispatch
import Synchronization

/// What SecureChannel needs of a TLS session, whatever carries its records.
protocol TLSSession: Sendable {
    func write(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError)
    func readFrame(until deadline: DispatchTime) async throws(TransportError) -> Frame
    func close()
    var isClosed: Bool { get }
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

/// One TLS session whose records travel over an SDU pipe (§8.3): libssl works on two memory BIOs; the
/// bytes it writes go out as SDUs of at most the pipe's SDU size, and received SDUs are fed to it in
/// order. SDU boundaries mean nothing to TLS: the SDUs carry one byte stream. The SSL_CTX is the same as
/// over TCP, so the same pin check, TLS 1.3 and ALPN apply.
final class SDUStreamTLSConnection: TLSSession {
    private struct SSLHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct State: Sendable {
        /// Owns both memory BIOs (SSL_set_bio); freed in deinit.
        let handle: SSLHandle
        /// Borrowed from the SSL: where libssl puts the bytes to send.
        let outgoing: SSLHandle
        var ssl: OpaquePointer { handle.pointer }
        var decoder = FrameDecoder()
        var closed = false
    }

    private enum Step<Value> {
        case done(Value)
        case needsInput
        case failed(TransportError)
    }

    /// At most one TLS record (16 KiB) is read at a time, as over TCP.
    private static let readChunk = 16_384

    let verification: HandshakeVerification
    private let pipe: any SDUPipe
    private let state: Mutex<State>
    /// Held while taking bytes out of the outgoing BIO and sending them, so they leave in libssl's order.
    private let outputLock = AsyncLock()
    /// Held while waiting for an SDU, so each SDU is fed to libssl exactly once and in order.
    private let inputLock = AsyncLock()

    /// Takes ownership of `pipe`: it is closed however this ends.
    init(context: TLSContext, pipe: any SDUPipe, pins: @escaping PinProvider) throws(TransportError) {
        guard pipe.sduSize >= SDUFramer.minimumMTU else {
            pipe.close()
            throw .invalidSDU("SDU size \(pipe.sduSize) below \(SDUFramer.minimumMTU)")
        }
        guard let ssl = SSL_new(context.pointer) else {
            pipe.close()
            throw .library(takeSSLError("SSL_new").text)
        }
        guard let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            pipe.close()
            throw .library(takeSSLError("BIO_new").text)
        }
        SSL_set_bio(ssl, incoming, outgoing)
        self.pipe = pipe
        self.verification = HandshakeVerification(pins: pins)
        self.state = Mutex(State(handle: SSLHandle(pointer: ssl), outgoing: SSLHandle(pointer: outgoing)))
        // The verification object lives as long as this connection, which outlives the SSL.
        _ = SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(verification).toOpaque())
        if context.role == .server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
    }

    deinit {
        state.withLock { SSL_free($0.ssl) }
        pipe.close()
    }

    /// Runs one libssl call under the lock and classifies its result.
    private func step<Value>(_ operation: (inout State) -> (status: Int32, value: Value)) -> Step<Value> {
        state.withLock { state in
            guard !state.closed else { return .failed(.closed) }
            ERR_clear_error()
            let (status, value) = operation(&state)
            if status == 1 { return .done(value) }
            switch SSL_get_error(state.ssl, status) {
            case SSL_ERROR_WANT_READ: return .needsInput
            case SSL_ERROR_ZERO_RETURN: return .failed(.closed)
            default:
                let error = takeSSLError("TLS")
                return .failed(.connectionFailed(error.text))
            }
        }
    }

    /// Sends whatever libssl has written so far, in SDUs of at most the pipe's size. A stall closes the
    /// pipe: part of a record on the wire cannot be taken back.
    private func flush(until deadline: DispatchTime) async throws(TransportError) {
        guard pendingOutput() > 0 else { return }
        await outputLock.lock()
        defer { outputLock.unlock() }
        let bytes: [UInt8] = state.withLock { state in
            let count = Int(BIO_ctrl_pending(state.outgoing.pointer))
            guard count > 0 else { return [] }
            var bytes = [UInt8](repeating: 0, count: count)
            let read = bytes.withUnsafeMutableBytes { BIO_read(state.outgoing.pointer, $0.baseAddress, Int32($0.count)) }
            return read > 0 ? Array(bytes.prefix(Int(read))) : []
        }
        for sdu in try SDUFramer.split(encoded: bytes, mtu: pipe.sduSize) {
            try await pipe.sendSDU(sdu, until: deadline, closeOnStall: true)
        }
    }

    private func pendingOutput() -> Int {
        state.withLock { Int(BIO_ctrl_pending($0.outgoing.pointer)) }
    }

    /// Waits for one SDU and hands it to libssl.
    private func feed(until deadline: DispatchTime) async throws(TransportError) {
        await inputLock.lock()
        defer { inputLock.unlock() }
        let sdu = try await pipe.receiveSDU(until: deadline)
        let accepted = state.withLock { state in
            state.closed ? -1 : sdu.withUnsafeBytes { BIO_write(SSL_get_rbio(state.ssl), $0.baseAddress, Int32($0.count)) }
        }
        guard !isClosed else { throw .closed }
        guard Int(accepted) == sdu.count else { throw .library("BIO_write took \(accepted) of \(sdu.count) bytes") }
    }

    /// Repeats `operation` until it completes, sending its output and feeding it input in between.
    private func drive<Value>(
        until deadline: DispatchTime,
        timeoutError: TransportError,
        _ operation: (inout State) -> (status: Int32, value: Value)
    ) async throws(TransportError) -> Value {
        while true {
            let outcome = step(operation)
            do {
                // Also after a failure: the alert that tells the peer why.
                try await flush(until: deadline)
            } catch {
                if case .failed(let failure) = outcome { throw failure }
                throw error == .timedOut ? timeoutError : error
            }
            switch outcome {
            case .done(let value): return value
            case .failed(let error): throw error
            case .needsInput:
                do { try await feed(until: deadline) } catch .timedOut { throw timeoutError }
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
            throw classifyBatonHandshakeFailure(text, verification: verification)
        } catch {
            throw verification.rejection ?? error
        }
        return try state.withLock { state throws(TransportError) in
            try checkNegotiatedBatonSession(state.ssl, verification: verification)
        }
    }

    func write(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError) {
        guard !bytes.isEmpty else { return }
        // A memory BIO takes everything at once, so one call either writes all bytes or fails.
        try await drive(until: deadline, timeoutError: .timedOut) { state in
            var written = 0
            let status = bytes.withUnsafeBytes { SSL_write_ex(state.ssl, $0.baseAddress, $0.count, &written) }
            return (status, ())
        }
    }

    /// The next whole frame. A framing error closes the connection.
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

    /// Closes the pipe; close_notify is not sent (frames carry their own length, so the peer loses
    /// nothing by seeing the channel end instead).
    func close() {
        let wasOpen = state.withLock { state in
            guard !state.closed else { return false }
            state.closed = true
            return true
        }
        if wasOpen { pipe.close() }
    }

    var isClosed: Bool { state.withLock { $0.closed } }
}
