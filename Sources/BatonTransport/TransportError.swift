// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// Every failure of the transport. Input from the network never traps; it ends up here.
public enum TransportError: Error, Equatable, Sendable {
    /// The peer's identity proof (§8.1) verifies under no pinned identity key: a stranger, a removed
    /// member, or a proof made for another session or role. The proof carries no key, so none is named.
    case peerNotRecognised
    /// The peer's (throw-away) certificate does not carry an Ed25519 key.
    case peerKeyNotEd25519
    /// The peer presented no certificate.
    case peerCertificateMissing
    /// The peers did not agree on the ALPN protocol `baton/1`.
    case alpnMismatch
    /// The TLS handshake failed for another reason (protocol version, alert, ...), with libssl's text.
    case handshakeFailed(String)
    /// TLS failed after the handshake (for example, the server's alert refusing this client's certificate,
    /// which a TLS 1.3 client only reads after its own handshake completed), with libssl's text.
    case connectionFailed(String)
    /// The handshake did not finish in time.
    case handshakeTimedOut
    /// The TCP connection could not be established in time.
    case connectTimedOut
    /// No frame (or no write progress) within the timeout.
    case timedOut
    /// A frame from the peer broke the framing rules; the channel is closed.
    case invalidFrame(WireError)
    /// A frame given to `send` cannot be encoded (for example, its payload is over the limit).
    case unencodableFrame(WireError)
    /// The peer answered a request with an Error frame.
    case remote(ErrorFrame)
    /// A connection did not open with Hello, or its Hello was refused: the server sent this Error
    /// frame and closed the connection (§6.2).
    case openingRefused(ErrorFrame)
    /// The channel or listener was closed (locally, or the peer closed the connection).
    case closed
    /// The host name or address could not be resolved or parsed.
    case addressUnavailable(String)
    /// A socket call failed; `errno` names the cause.
    case socket(operation: String, errno: Int32)
    /// libssl failed in a way input could not have caused (for example, out of memory).
    case library(String)
    /// This kernel has no Bluetooth sockets (EAFNOSUPPORT and the like): no BLE transport here.
    case bluetoothUnavailable(errno: Int32)
    /// An SDU violated the BLE framing rules (§8.3).
    case invalidSDU(String)
}
