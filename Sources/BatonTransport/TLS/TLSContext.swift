// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import COpenSSL
import Glibc
import Synchronization

/// The ALPN protocol every Baton connection negotiates (§8.1), in wire form (length-prefixed).
let batonALPN: [UInt8] = Array("baton/1".utf8)
private let batonALPNWire: [UInt8] = [UInt8(batonALPN.count)] + batonALPN

/// Per-connection verification state. libssl's callbacks reach it through the SSL object's
/// app-data slot (ex_data index 0); the owning connection keeps it alive as long as the SSL.
final class HandshakeVerification: Sendable {
    private struct State {
        var certificateKey: [UInt8]?
        var rejection: TransportError?
    }

    private let state = Mutex(State())

    init() {}

    /// The peer's certificate key (a throw-away key, not its identity).
    var certificateKey: [UInt8]? { state.withLock { $0.certificateKey } }
    var rejection: TransportError? { state.withLock { $0.rejection } }

    func accept(_ key: [UInt8]) { state.withLock { $0.certificateKey = key } }

    func reject(_ error: TransportError) {
        state.withLock { if $0.rejection == nil { $0.rejection = error } }
    }

    static func from(ssl: OpaquePointer?) -> HandshakeVerification? {
        guard let ssl, let raw = LibSSL.api.SSL_get_ex_data(ssl, 0) else { return nil }
        return Unmanaged<HandshakeVerification>.fromOpaque(raw).takeUnretainedValue()
    }

    /// Checks the leaf certificate only: its key must be Ed25519. The key is a throw-away one (§8.1):
    /// who the peer is, the identity proof inside the channel says. Signature, names and dates are
    /// ignored; the TLS CertificateVerify message proves possession of the key.
    fileprivate static func verifyPeer(_ storeContext: OpaquePointer?) -> Int32 {
        guard let storeContext,
              let rawSSL = X509_STORE_CTX_get_ex_data(storeContext, LibSSL.api.SSL_get_ex_data_X509_STORE_CTX_idx()),
              let verification = from(ssl: OpaquePointer(rawSSL))
        else { return 0 }
        guard let certificate = X509_STORE_CTX_get0_cert(storeContext) else {
            verification.reject(.peerCertificateMissing)
            X509_STORE_CTX_set_error(storeContext, X509_V_ERR_APPLICATION_VERIFICATION)
            return 0
        }
        guard let key = ed25519PublicKey(of: certificate) else {
            verification.reject(.peerKeyNotEd25519)
            X509_STORE_CTX_set_error(storeContext, X509_V_ERR_APPLICATION_VERIFICATION)
            return 0
        }
        verification.accept(key)
        return 1
    }

    /// Server side: select `baton/1` or fail the handshake with no_application_protocol.
    fileprivate static func selectALPN(
        ssl: OpaquePointer?,
        out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
        outLength: UnsafeMutablePointer<UInt8>?,
        offered: UnsafePointer<UInt8>?,
        offeredLength: UInt32
    ) -> Int32 {
        guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_ALERT_FATAL }
        // The client's list is a sequence of length-prefixed names; every length is bounds-checked.
        var index = 0
        let total = Int(offeredLength)
        while index < total {
            let length = Int(offered[index])
            let start = index + 1
            guard length > 0, start + length <= total else { break }
            if length == batonALPN.count && (0..<length).allSatisfy({ offered[start + $0] == batonALPN[$0] }) {
                out.pointee = offered + start
                outLength.pointee = UInt8(length)
                return SSL_TLSEXT_ERR_OK
            }
            index = start + length
        }
        from(ssl: ssl)?.reject(.alpnMismatch)
        return SSL_TLSEXT_ERR_ALERT_FATAL
    }
}

/// The raw 32-byte key of an Ed25519 certificate, nil for any other key type.
func ed25519PublicKey(of certificate: OpaquePointer) -> [UInt8]? {
    guard let key = X509_get0_pubkey(certificate), EVP_PKEY_get_id(key) == EVP_PKEY_ED25519 else { return nil }
    var bytes = [UInt8](repeating: 0, count: PinSet.keyByteCount)
    var length = bytes.count
    guard EVP_PKEY_get_raw_public_key(key, &bytes, &length) == 1, length == PinSet.keyByteCount else {
        ERR_clear_error()
        return nil
    }
    return bytes
}

/// Text of the oldest libssl/libcrypto error on this thread, and the queue emptied.
func takeSSLError(_ context: String) -> (reason: Int32, text: String) {
    let code = ERR_get_error()
    ERR_clear_error()
    guard code != 0 else { return (0, context) }
    var text = [CChar](repeating: 0, count: 256)
    ERR_error_string_n(code, &text, text.count)
    let message = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return (ERR_GET_REASON(code), "\(context): \(message)")
}

/// An SSL_CTX configured for Baton: TLS 1.3 only, ALPN `baton/1`, both sides present a certificate,
/// no session resumption (every connection gets a fresh certificate key and a fresh identity proof).
/// The certificate is not on the CTX: each connection gets its own throw-away one (`installCertificate`),
/// so nothing a stranger sees in the handshake links two connections (§8.1). `identity` signs the proof
/// inside the channel.
/// An SSL_CTX is safe to share between threads once configured (openssl-threads(7)); nothing changes it later.
final class TLSContext: @unchecked Sendable {
    enum Role { case server, client }

    let pointer: OpaquePointer
    let role: Role
    let identity: Ed25519PrivateKey

    init(identity: Ed25519PrivateKey, role: Role) throws(TransportError) {
        ignoreBrokenPipeSignals()
        let libssl = try LibSSL.load()
        guard let context = libssl.SSL_CTX_new(role == .server ? libssl.TLS_server_method() : libssl.TLS_client_method()) else {
            throw .library(takeSSLError("SSL_CTX_new").text)
        }
        self.pointer = context
        self.role = role
        self.identity = identity
        try configure()
    }

    deinit {
        LibSSL.api.SSL_CTX_free(pointer)
    }

    private func configure() throws(TransportError) {
        let tls13 = Int(TLS1_3_VERSION)
        guard LibSSL.api.SSL_CTX_ctrl(pointer, SSL_CTRL_SET_MIN_PROTO_VERSION, tls13, nil) == 1,
              LibSSL.api.SSL_CTX_ctrl(pointer, SSL_CTRL_SET_MAX_PROTO_VERSION, tls13, nil) == 1
        else { throw .library(takeSSLError("TLS 1.3 only").text) }

        let noTicket: UInt64 = 1 << 14  // SSL_OP_NO_TICKET, a macro Swift cannot import
        _ = LibSSL.api.SSL_CTX_set_options(pointer, noTicket)
        _ = LibSSL.api.SSL_CTX_set_num_tickets(pointer, 0)
        _ = LibSSL.api.SSL_CTX_ctrl(pointer, SSL_CTRL_SET_SESS_CACHE_MODE, Int(SSL_SESS_CACHE_OFF), nil)
        // Writes are retried after EAGAIN with the same bytes, possibly at a different address.
        _ = LibSSL.api.SSL_CTX_ctrl(pointer, SSL_CTRL_MODE, Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)

        // Every TLS 1.3 suite stays allowed (§8.1 names none); the order puts the cheapest first on
        // this CPU: AES-128-GCM where the CPU has AES instructions (about 5 % less CPU per byte than
        // AES-256-GCM, OpenSSL's default first choice), ChaCha20-Poly1305 where it has none.
        guard LibSSL.api.SSL_CTX_set_ciphersuites(pointer, Self.cipherSuitePreference) == 1 else {
            throw .library(takeSSLError("cipher suites").text)
        }
        let serverPreference: UInt64 = 1 << 22  // SSL_OP_CIPHER_SERVER_PREFERENCE, a macro Swift cannot import
        if role == .server { _ = LibSSL.api.SSL_CTX_set_options(pointer, serverPreference) }

        LibSSL.api.SSL_CTX_set_verify(pointer, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        LibSSL.api.SSL_CTX_set_cert_verify_callback(pointer, { storeContext, _ in
            HandshakeVerification.verifyPeer(storeContext)
        }, nil)

        switch role {
        case .server:
            LibSSL.api.SSL_CTX_set_alpn_select_cb(pointer, { ssl, out, outLength, offered, offeredLength, _ in
                HandshakeVerification.selectALPN(
                    ssl: ssl, out: out, outLength: outLength, offered: offered, offeredLength: offeredLength)
            }, nil)
        case .client:
            // Unlike most of libssl, this returns 0 on success.
            guard LibSSL.api.SSL_CTX_set_alpn_protos(pointer, batonALPNWire, UInt32(batonALPNWire.count)) == 0 else {
                throw .library(takeSSLError("ALPN").text)
            }
        }

    }

    /// TLS 1.3 suites, cheapest first on this machine.
    static let cipherSuitePreference = cpuHasAESInstructions()
        ? "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
        : "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"

    /// Whether the CPU flags in /proc/cpuinfo name AES instructions (x86 `aes`, Arm `aes`).
    private static func cpuHasAESInstructions() -> Bool {
        guard let file = fopen("/proc/cpuinfo", "r") else { return true }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 8192)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("flags") || text.hasPrefix("Features") else { continue }
            return text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).contains("aes")
        }
        return true
    }

    /// Gives `ssl` a certificate for a key made for this connection alone.
    static func installCertificate(on ssl: OpaquePointer) throws(TransportError) {
        let key: Ed25519PrivateKey
        do { key = try Ed25519PrivateKey() } catch { throw .library("ephemeral key: \(error)") }
        let certificate = try SelfSignedCertificate(key: key)
        guard LibSSL.api.SSL_use_certificate(ssl, certificate.certificate) == 1,
              LibSSL.api.SSL_use_PrivateKey(ssl, certificate.key) == 1,
              LibSSL.api.SSL_check_private_key(ssl) == 1
        else { throw .library(takeSSLError("certificate").text) }
    }
}

/// A self-signed X.509 v3 certificate made in memory (§8.1): CN `baton` (the same for every device),
/// for a throw-away key. The SSL takes its own references, so this owner frees its copies when done.
final class SelfSignedCertificate {
    let certificate: OpaquePointer
    let key: OpaquePointer

    static let commonName = "baton"

    init(key ephemeral: Ed25519PrivateKey) throws(TransportError) {
        guard let key = ephemeral.seed.withUnsafeBufferPointer({
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count)
        }) else { throw .library(takeSSLError("Ed25519 key").text) }
        guard let certificate = X509_new() else {
            EVP_PKEY_free(key)
            throw .library(takeSSLError("X509_new").text)
        }
        self.key = key
        self.certificate = certificate
        try fill()
    }

    private func fill() throws(TransportError) {
        var serialBytes = [UInt8](repeating: 0, count: 8)
        guard RAND_bytes(&serialBytes, Int32(serialBytes.count)) == 1 else { throw .library(takeSSLError("serial").text) }
        // Positive and non-zero, as RFC 5280 asks.
        let serial = (serialBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } >> 1) | 1
        guard let subject = X509_get_subject_name(certificate),
              X509_set_version(certificate, Int(X509_VERSION_3)) == 1,
              ASN1_INTEGER_set_uint64(X509_get_serialNumber(certificate), serial) == 1,
              // Dates are ignored by verification (§8.1); the widest RFC 5280 range.
              ASN1_TIME_set_string_X509(X509_getm_notBefore(certificate), "19700101000000Z") == 1,
              ASN1_TIME_set_string_X509(X509_getm_notAfter(certificate), "99991231235959Z") == 1,
              X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, Self.commonName, -1, -1, 0) == 1,
              X509_set_issuer_name(certificate, subject) == 1,
              X509_set_pubkey(certificate, key) == 1,
              X509_sign(certificate, key, nil) > 0  // Ed25519 names no digest
        else { throw .library(takeSSLError("certificate").text) }
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }
}

/// libssl writes to sockets with write(2); a peer that vanished would raise SIGPIPE and end the process.
/// Ignoring it turns that into EPIPE, which the transport reports as `.closed`.
func ignoreBrokenPipeSignals() {
    _ = signal(SIGPIPE, SIG_IGN)
}

/// A TLSContext made at its first connection, not when its listener or connector is: an idle daemon
/// never touched libssl's configuration code or the algorithms it fetches (idle RSS,
/// docs/benchmarks.md). Made once, then shared; a failure is thrown to that connection and the next
/// one tries again. `use(identity:)` swaps the identity (a machine given a new one, `bt-pair
/// reset-identity`): the next connection gets a context for it; channels already open keep theirs.
final class LazyTLSContext: Sendable {
    private struct State {
        var identity: Ed25519PrivateKey
        var made: TLSContext?
    }

    private let role: TLSContext.Role
    private let state: Mutex<State>

    init(identity: Ed25519PrivateKey, role: TLSContext.Role) {
        // Before any socket of the transport exists, as the eager context did.
        ignoreBrokenPipeSignals()
        self.state = Mutex(State(identity: identity, made: nil))
        self.role = role
    }

    func context() throws(TransportError) -> TLSContext {
        try state.withLock { (state: inout State) throws(TransportError) -> TLSContext in
            if let made = state.made { return made }
            let context = try TLSContext(identity: state.identity, role: role)
            state.made = context
            return context
        }
    }

    /// From now on connections prove `identity`; the context for the old one is dropped (made again lazily).
    func use(identity: Ed25519PrivateKey) {
        state.withLock { state in
            state.identity = identity
            state.made = nil
        }
    }

    /// The identity the next connection proves (tests).
    var identity: Ed25519PrivateKey { state.withLock { $0.identity } }

    /// Whether the context was made (tests).
    var isMade: Bool { state.withLock { $0.made != nil } }
}
