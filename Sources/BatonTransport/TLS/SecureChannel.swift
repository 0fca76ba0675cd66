// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Dispatch

/// Timeouts and limits of the transport.
public struct TransportConfiguration: Sendable {
    /// A TCP connection must finish the TLS handshake within this time or it is dropped.
    public var handshakeTimeout: Duration
    /// `receive()` waits at most this long for a frame.
    public var idleTimeout: Duration
    /// `send(_:)` gives up when the peer takes no bytes for this long.
    public var writeTimeout: Duration
    /// Connections a listener keeps at once, handshaking or established; more are closed on arrival.
    public var maxConnections: Int
    /// With every handshake slot taken, a newcomer replaces the oldest handshaking connection once
    /// that one has waited this long (so idle strangers cannot keep members out).
    public var evictionAge: Duration

    public init(
        handshakeTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(60),
        writeTimeout: Duration = .seconds(30),
        maxConnections: Int = 32,
        evictionAge: Duration = .seconds(1)
    ) {
        self.evictionAge = evictionAge
        self.handshakeTimeout = handshakeTimeout
        self.idleTimeout = idleTimeout
        self.writeTimeout = writeTimeout
        self.maxConnections = max(1, maxConnections)
    }
}

/// An authenticated, encrypted frame stream with one pinned ring member (§8.1).
/// Sends are serialised, and so are receives; a send and a receive may run at the same time.
public final class SecureChannel: Sendable {
    /// The peer's Ed25519 identity key, as pinned.
    public let peerIdentityKey: [UInt8]
    public let peerDeviceID: DeviceID
    public let configuration: TransportConfiguration

    let session: TLSEngine
    private let frames: FrameStream

    init(session: TLSEngine, peerIdentityKey: [UInt8], configuration: TransportConfiguration) {
        self.session = session
        self.frames = FrameStream(session)
        self.peerIdentityKey = peerIdentityKey
        self.peerDeviceID = DeviceID(identityKey: peerIdentityKey)
        self.configuration = configuration
    }

    /// Sends one frame. Throws `.unencodableFrame` for a frame over its type's limit (nothing is sent),
    /// `.timedOut`, or `.closed`.
    public func send(_ frame: Frame) async throws(TransportError) {
        try await frames.send(frame, until: configuration.writeTimeout.deadlineFromNow)
    }

    /// Sends several frames with one TLS write (a bulk stream's batch, §6.5). Throws `.unencodableFrame`
    /// (nothing sent) when one is over its type's limit, `.timedOut`, or `.closed`.
    public func send(_ frames: [Frame]) async throws(TransportError) {
        try await self.frames.send(frames, until: configuration.writeTimeout.deadlineFromNow)
    }

    /// Writes bytes as they are; for frames already encoded (and for tests that must break the framing).
    func sendEncoded(_ bytes: [UInt8]) async throws(TransportError) {
        try await frames.sendEncoded(bytes, until: configuration.writeTimeout.deadlineFromNow)
    }

    /// The next frame from the peer. Header limits are checked before the payload is buffered; a frame
    /// that breaks them throws `.invalidFrame` and closes the channel.
    public func receive(timeout: Duration? = nil) async throws(TransportError) -> Frame {
        try await receive(until: deadline(after: timeout))
    }

    /// The next frame, or `.timedOut` at `deadline` (one wait across several receives).
    func receive(until deadline: DispatchTime) async throws(TransportError) -> Frame {
        try await frames.receive(until: deadline)
    }

    /// When a wait of `timeout` (nil: the idle timeout) started now ends.
    func deadline(after timeout: Duration?) -> DispatchTime {
        (timeout ?? configuration.idleTimeout).deadlineFromNow
    }

    /// Closes the channel; pending and later sends and receives throw `.closed`. Idempotent.
    public func close() {
        session.close()
    }

    /// Closes the channel at once, dropping what is still queued for the peer instead of sending it
    /// (TCP: a reset): for a peer that may not have another byte, removed from the ring (§6.5, §7.4).
    /// Idempotent; after `close` it does nothing more.
    public func abort() {
        session.abort()
    }

    public var isClosed: Bool { session.isClosed }

    /// The TLS 1.3 suite negotiated (IANA name, such as `TLS_AES_128_GCM_SHA256`).
    public var cipherSuite: String { session.cipherSuite }
}
