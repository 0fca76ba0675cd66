import BatonCore
import BatonCrypto
import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc

/// Opens channels to ring members: TCP, then TLS 1.3 with this device's identity, accepting only pinned peers.
public final class TLSConnector: Sendable {
    private let context: TLSContext
    private let pins: PinProvider
    public let configuration: TransportConfiguration

    public init(identity: Ed25519PrivateKey, pins: @escaping PinProvider, configuration: TransportConfiguration = .init()) throws(TransportError) {
        self.context = try TLSContext(identity: identity, role: .client)
        self.pins = pins
        self.configuration = configuration
    }

    /// Connects and authenticates within `timeout` (TCP connect and handshake together). Addresses of a
    /// name are tried in order. An unpinned server fails with `.peerNotPinned` before this device sends
    /// anything but its certificate.
    ///
    /// In TLS 1.3 the client finishes its handshake before the server has judged the client's
    /// certificate: a server that refuses this device shows up as `.connectionFailed` or `.closed` on the
    /// first `receive()`.
    public func connect(host: String, port: UInt16, timeout: Duration = .seconds(10)) async throws(TransportError) -> SecureChannel {
        let deadline = timeout.deadlineFromNow
        let addresses = try await SocketAddress.resolve(host: host, port: port, passive: false)
        var lastError = TransportError.addressUnavailable(host)
        for address in addresses {
            let descriptor: Int32
            do {
                descriptor = try await TCPConnect.connect(to: address, until: deadline)
            } catch {
                lastError = error
                if error == .connectTimedOut { break }
                continue
            }
            let connection = try TLSConnection(context: context, descriptor: descriptor, pins: pins, onClose: {})
            do {
                let key = try await connection.handshake(until: deadline)
                return SecureChannel(connection: connection, peerIdentityKey: key, configuration: configuration)
            } catch {
                connection.close()
                throw error
            }
        }
        throw lastError
    }

}

/// Nonblocking TCP connect with a deadline, shared by the TLS and plain connectors.
enum TCPConnect {
    static func connect(to address: SocketAddress, until deadline: DispatchTime) async throws(TransportError) -> Int32 {
        let descriptor = try makeStreamSocket(family: address.family)
        setSocketOption(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        let status = address.withSockaddr { Glibc.connect(descriptor, $0, $1) }
        if status != 0 {
            let code = errno
            guard code == EINPROGRESS else {
                Glibc.close(descriptor)
                throw .socket(operation: "connect", errno: code)
            }
            switch await waitForSocket(descriptor, .writable, until: deadline) {
            case .ready: break
            case .timedOut:
                Glibc.close(descriptor)
                throw .connectTimedOut
            case .cancelled:
                Glibc.close(descriptor)
                throw .closed
            }
            var socketError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &socketError, &length)
            guard socketError == 0 else {
                Glibc.close(descriptor)
                throw .socket(operation: "connect", errno: socketError)
            }
        }
        return descriptor
    }
}
