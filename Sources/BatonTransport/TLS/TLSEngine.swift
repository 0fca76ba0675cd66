// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import COpenSSL
import Dispatch
import Synchronization

/// One TLS 1.3 session over any byte transport (§8.1, §8.3): libssl works on two memory BIOs; the
/// bytes it writes go out over the transport, and the bytes the transport receives are fed to it in
/// order. TCP and L2CAP SDUs share this engine and one SSL_CTX per role, so the certificate check, TLS 1.3 and
/// ALPN are the same on both. libssl calls happen under `state`'s lock (an SSL object must not be used
/// by two threads at once); transport I/O happens outside it, so a pending receive never holds up a
/// send or a close. The engine is itself a byte transport: the plaintext stream that frames ride on.
final class TLSEngine: ByteTransport {
    /// An SSL object may move between threads as long as one thread uses it at a time; the mutex
    /// around `State` guarantees that.
    private struct SSLHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct State: Sendable {
        /// Owns both memory BIOs (SSL_set_bio); freed in deinit.
        let handle: SSLHandle
        /// Borrowed from the SSL: where libssl puts the bytes to send.
        let outgoing: SSLHandle
        var ssl: OpaquePointer { handle.pointer }
        var closed = false
    }

    /// One libssl step: done, waiting for bytes from the peer, or failed.
    private enum Step<Value> {
        case done(Value)
        case needsInput
        case failed(TransportError)
    }

    /// The most fed to libssl at a time: several records per trip through the transport, so a bulk
    /// stream pays the task switches and locks once per 128 KiB instead of once per 16 KiB record.
    /// libssl holds at most one such read beside the record it is decrypting. Kept below batond's
    /// fixed mmap threshold (256 KiB), so these buffers come from the heap, not fresh mappings.
    static let inputChunk = 131_072
    /// The largest TLS record's plaintext, with room for a record libssl took in part before.
    private static let recordSlack = 16_640

    let verification: HandshakeVerification
    private let transport: any ByteTransport
    private let state: Mutex<State>
    /// Held while taking bytes out of the outgoing BIO and sending them, so they leave in libssl's order.
    private let outputLock = AsyncLock()
    /// Held while waiting for input, so received bytes are fed to libssl exactly once and in order.
    private let inputLock = AsyncLock()
    private let onClose: Mutex<(@Sendable () -> Void)?>

    /// Takes ownership of `transport`: it is closed (and `onClose` called) however this ends.
    init(context: TLSContext, transport: any ByteTransport,
         onClose: @escaping @Sendable () -> Void = {}) throws(TransportError) {
        let ssl = LibSSL.api.SSL_new(context.pointer)
        let incoming = BIO_new(BIO_s_mem())
        let outgoing = BIO_new(BIO_s_mem())
        guard let ssl, let incoming, let outgoing else {
            let error = takeSSLError("SSL_new/BIO_new").text
            LibSSL.api.SSL_free(ssl)
            _ = BIO_free(incoming)
            _ = BIO_free(outgoing)
            transport.close()
            onClose()
            throw .library(error)
        }
        LibSSL.api.SSL_set_bio(ssl, incoming, outgoing)
        do { try TLSContext.installCertificate(on: ssl) } catch {
            LibSSL.api.SSL_free(ssl)
            transport.close()
            onClose()
            throw error
        }
        self.transport = transport
        self.verification = HandshakeVerification()
        self.state = Mutex(State(handle: SSLHandle(pointer: ssl), outgoing: SSLHandle(pointer: outgoing)))
        self.onClose = Mutex(onClose)
        // The verification object lives as long as this engine, which outlives the SSL.
        _ = LibSSL.api.SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(verification).toOpaque())
        if context.role == .server { LibSSL.api.SSL_set_accept_state(ssl) } else { LibSSL.api.SSL_set_connect_state(ssl) }
    }

    deinit {
        state.withLock { LibSSL.api.SSL_free($0.ssl) }
        transport.close()
        runOnClose()
    }

    /// Runs the handshake; the peer's identity is not known yet (see `ChannelIdentityExchange`).
    func handshake(until deadline: DispatchTime) async throws(TransportError) {
        do {
            try await drive(until: deadline, timeoutError: .handshakeTimedOut) { state in
                (LibSSL.api.SSL_do_handshake(state.ssl), ())
            }
        } catch .connectionFailed(let text) {
            throw classifyHandshakeFailure(text)
        } catch {
            throw verification.rejection ?? error
        }
        try state.withLock { state throws(TransportError) in try checkNegotiatedSession(state.ssl) }
    }

    /// The TLS exporter value of this session for `label`, with an empty context (RFC 8446 §7.5).
    func exportKeyingMaterial(label: String, count: Int) throws(TransportError) -> [UInt8] {
        try state.withLock { state throws(TransportError) in
            var output = [UInt8](repeating: 0, count: count)
            let labelBytes = Array(label.utf8)
            let status = labelBytes.withUnsafeBufferPointer { labelPointer in
                labelPointer.withMemoryRebound(to: CChar.self) { label in
                    LibSSL.api.SSL_export_keying_material(state.ssl, &output, output.count, label.baseAddress, label.count, nil, 0, 0)
                }
            }
            guard status == 1 else { throw .library(takeSSLError("exporter").text) }
            return output
        }
    }

    /// The TLS suite of this session (an IANA name such as `TLS_AES_128_GCM_SHA256`), for benchmarks and logs.
    var cipherSuite: String {
        state.withLock { state in LibSSL.api.SSL_get_current_cipher(state.ssl).flatMap { LibSSL.api.SSL_CIPHER_standard_name($0) }.map { String(cString: $0) } ?? "" }
    }

    /// Encrypts and sends all of `bytes`.
    func send(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError) {
        guard !bytes.isEmpty else { return }
        // A memory BIO takes everything at once, so one call either writes all bytes or fails.
        try await drive(until: deadline, timeoutError: .timedOut) { state in
            var written = 0
            let status = bytes.withUnsafeBytes { LibSSL.api.SSL_write_ex(state.ssl, $0.baseAddress, $0.count, &written) }
            return (status, ())
        }
    }

    /// Closes the transport; close_notify is not sent (frames carry their own length, so the peer loses
    /// nothing by seeing the stream end instead).
    func close() { end(abort: false) }

    /// Closes the transport dropping what it still queues (`ByteTransport.abort`).
    func abort() { end(abort: true) }

    private func end(abort: Bool) {
        let wasOpen = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen else { return }
        if abort { transport.abort() } else { transport.close() }
        runOnClose()
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    // MARK: Driving libssl

    /// Decrypted bytes: at least one and at most `maximum`. Every record libssl already holds is
    /// decrypted in one go, straight into the array returned (no zero fill, no second copy).
    func receive(upTo maximum: Int, until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        try await drive(until: deadline, timeoutError: .timedOut) { state in
            var status: Int32 = 0
            // Sized by what libssl holds, so a small frame does not cost a large allocation.
            let held = Int(LibSSL.api.SSL_pending(state.ssl)) + Int(BIO_ctrl_pending(LibSSL.api.SSL_get_rbio(state.ssl))) + Self.recordSlack
            let bytes = [UInt8](unsafeUninitializedCapacity: max(1, min(maximum, held))) { buffer, initialized in
                initialized = 0
                repeat {
                    var count = 0
                    status = LibSSL.api.SSL_read_ex(state.ssl, buffer.baseAddress! + initialized, buffer.count - initialized, &count)
                    if status == 1 { initialized += count }
                } while status == 1 && initialized < buffer.count
            }
            // Bytes read before libssl asked for more input (or failed) are delivered; the next call
            // meets the same condition again.
            return (bytes.isEmpty ? status : 1, bytes)
        }
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

    /// Runs one libssl call under the lock and classifies its result.
    private func step<Value>(_ operation: (inout State) -> (status: Int32, value: Value)) -> Step<Value> {
        state.withLock { state in
            guard !state.closed else { return .failed(.closed) }
            ERR_clear_error()
            let (status, value) = operation(&state)
            if status == 1 { return .done(value) }
            switch LibSSL.api.SSL_get_error(state.ssl, status) {
            case SSL_ERROR_WANT_READ: return .needsInput
            case SSL_ERROR_ZERO_RETURN: return .failed(.closed)
            default: return .failed(.connectionFailed(takeSSLError("TLS").text))
            }
        }
    }

    /// Sends whatever libssl has written so far. A failure closes the session: the bytes taken out of
    /// the BIO are gone, so the record stream cannot continue.
    private func flush(until deadline: DispatchTime) async throws(TransportError) {
        guard pendingOutput() > 0 else { return }
        await outputLock.lock()
        defer { outputLock.unlock() }
        let bytes: [UInt8] = state.withLock { state in
            let count = min(Int(BIO_ctrl_pending(state.outgoing.pointer)), Int(Int32.max))
            guard count > 0 else { return [] }
            return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                initialized = max(0, Int(BIO_read(state.outgoing.pointer, buffer.baseAddress, Int32(count))))
            }
        }
        guard !bytes.isEmpty else { return }
        do { try await transport.send(bytes, until: deadline) } catch {
            close()
            throw error
        }
    }

    private func pendingOutput() -> Int {
        state.withLock { Int(BIO_ctrl_pending($0.outgoing.pointer)) }
    }

    /// Waits for bytes from the transport and hands them to libssl.
    private func feed(until deadline: DispatchTime) async throws(TransportError) {
        await inputLock.lock()
        defer { inputLock.unlock() }
        let bytes = try await transport.receive(upTo: Self.inputChunk, until: deadline)
        let accepted = state.withLock { state in
            state.closed ? -1 : bytes.withUnsafeBytes { BIO_write(LibSSL.api.SSL_get_rbio(state.ssl), $0.baseAddress, Int32($0.count)) }
        }
        guard !isClosed else { throw .closed }
        guard Int(accepted) == bytes.count else { throw .library("BIO_write took \(accepted) of \(bytes.count) bytes") }
    }

    private func runOnClose() {
        let callback = onClose.withLock { callback in
            defer { callback = nil }
            return callback
        }
        callback?()
    }

    // MARK: Verdicts

    /// The callbacks' verdict is the most precise; otherwise libssl's reason code.
    private func classifyHandshakeFailure(_ text: String) -> TransportError {
        if let rejection = verification.rejection { return rejection }
        let lowered = text.lowercased()
        if lowered.contains("peer did not return a certificate") || lowered.contains("certificate required") {
            return .peerCertificateMissing
        }
        if lowered.contains("no application protocol") { return .alpnMismatch }
        return .handshakeFailed(text)
    }

    /// After a completed handshake: ALPN must be `baton/1` (a client that offered none is not caught by
    /// the selection callback) and the certificate that was checked must be the one the session uses.
    private func checkNegotiatedSession(_ ssl: OpaquePointer) throws(TransportError) {
        var selected: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        LibSSL.api.SSL_get0_alpn_selected(ssl, &selected, &length)
        guard let selected, Array(UnsafeBufferPointer(start: selected, count: Int(length))) == batonALPN else {
            throw .alpnMismatch
        }
        guard let certificate = LibSSL.api.SSL_get0_peer_certificate(ssl) else { throw .peerCertificateMissing }
        guard let key = ed25519PublicKey(of: certificate) else { throw .peerKeyNotEd25519 }
        guard let verified = verification.certificateKey, verified == key else { throw .peerKeyNotEd25519 }
    }
}

/// Counts TLS handshakes started (for tests that assert how many connections a flow needs).
public final class HandshakeCounter: Sendable {
    private let count = Mutex(0)
    public init() {}
    func increment() { count.withLock { $0 += 1 } }
    public var value: Int { count.withLock { $0 } }
}
