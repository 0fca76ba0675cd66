// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Dispatch

/// Opens channels to ring members: TCP, then TLS 1.3 with this device's identity, accepting only pinned peers.
public final class TLSConnector: Sendable {
    private let context: LazyTLSContext
    private let pins: PinProvider
    public let configuration: TransportConfiguration
    /// Every handshake this connector started.
    public let handshakes = HandshakeCounter()

    public init(identity: Ed25519PrivateKey, pins: @escaping PinProvider, configuration: TransportConfiguration = .init()) throws(TransportError) {
        self.context = LazyTLSContext(identity: identity, role: .client)
        self.pins = pins
        self.configuration = configuration
    }

    /// From the next connect on, this connector proves `identity` (the machine got a new one).
    public func use(identity: Ed25519PrivateKey) { context.use(identity: identity) }

    /// The identity the next connect proves (tests).
    public var identityKey: [UInt8] { context.identity.publicKey }

    /// Whether its TLS context exists yet (made at the first connect).
    var contextIsMade: Bool { context.isMade }

    /// Connects and authenticates within `timeout` (TCP connect, handshake and identity proofs together).
    /// This device proves its identity first (§8.1); a server that refuses it closes the connection
    /// (`.closed` or `.connectionFailed`), and a server whose proof verifies under no pinned key fails
    /// with `.peerNotRecognised` before any frame is sent.
    public func connect(host: String, port: UInt16, timeout: Duration = .seconds(10)) async throws(TransportError) -> SecureChannel {
        let deadline = timeout.deadlineFromNow
        let socket = try await OwnedSocket.connectTCP(host: host, port: port, until: deadline)
        return try await context.context().secure(socket, pins: pins, until: deadline, configuration: configuration, counter: handshakes)
    }
}
