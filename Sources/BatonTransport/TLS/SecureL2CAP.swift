// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Dispatch

/// Pinned TLS 1.3 over L2CAP LE channels, the BLE fallback between ring members (§8.3): the same throw-away
/// certificates, identity proofs, pin check and ALPN as over TCP; the TLS byte stream travels as SDUs.
public final class SecureL2CAP: Sendable {
    private let serverContext: LazyTLSContext
    private let clientContext: LazyTLSContext
    private let pins: PinProvider
    public let configuration: TransportConfiguration
    /// Every handshake started here, either side.
    public let handshakes = HandshakeCounter()

    public init(identity: Ed25519PrivateKey, pins: @escaping PinProvider, configuration: TransportConfiguration = .init()) throws(TransportError) {
        serverContext = LazyTLSContext(identity: identity, role: .server)
        clientContext = LazyTLSContext(identity: identity, role: .client)
        self.pins = pins
        self.configuration = configuration
    }

    /// From the next channel on, both sides prove `identity` (the machine got a new one).
    public func use(identity: Ed25519PrivateKey) {
        serverContext.use(identity: identity)
        clientContext.use(identity: identity)
    }

    /// The identity the next channel proves (tests).
    public var identityKey: [UInt8] { serverContext.identity.publicKey }

    /// Whether its server and client TLS contexts exist yet (each made at its first use).
    var contextsMade: (server: Bool, client: Bool) { (serverContext.isMade, clientContext.isMade) }

    /// Runs the server side of the handshake on a channel from an `L2CAPListener`, within the
    /// configuration's handshake timeout. An unpinned client fails with `.peerNotRecognised`.
    public func accept(_ channel: L2CAPFrameChannel) async throws(TransportError) -> SecureChannel {
        try await secure(channel, context: serverContext, until: configuration.handshakeTimeout.deadlineFromNow)
    }

    /// Opens an L2CAP LE channel to `psm` on the peer and authenticates it, all within `timeout`.
    public func connect(adapterAddress: BluetoothAddress, adapterAddressType: LEAddressType = .public,
                        peerAddress: BluetoothAddress, peerAddressType: LEAddressType, psm: UInt16,
                        timeout: Duration = .seconds(10)) async throws(TransportError) -> SecureChannel {
        let deadline = timeout.deadlineFromNow
        let channel = try await L2CAPConnector.connect(
            adapterAddress: adapterAddress, adapterAddressType: adapterAddressType, peerAddress: peerAddress,
            peerAddressType: peerAddressType, psm: psm, timeout: timeout, configuration: configuration)
        return try await secure(channel, context: clientContext, until: deadline)
    }

    func secure(_ pipe: any SDUPipe, context: LazyTLSContext, until deadline: DispatchTime) async throws(TransportError) -> SecureChannel {
        try await context.context().secure(try SDUByteStream(pipe), pins: pins, until: deadline, configuration: configuration, counter: handshakes)
    }

    /// The server side over any SDU pipe (tests use an in-memory one).
    func accept(pipe: any SDUPipe) async throws(TransportError) -> SecureChannel {
        try await secure(pipe, context: serverContext, until: configuration.handshakeTimeout.deadlineFromNow)
    }

    /// The client side over any SDU pipe.
    func connect(pipe: any SDUPipe) async throws(TransportError) -> SecureChannel {
        try await secure(pipe, context: clientContext, until: configuration.handshakeTimeout.deadlineFromNow)
    }
}
