// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc
import Synchronization

/// A stream of frames, whatever carries it: pinned TLS (ring members), plain TCP (pairing, whose
/// messages protect themselves, protocol §7) or an L2CAP LE channel (BLE fallback, §8.3).
public protocol FrameChannel: Sendable {
    func send(_ frame: Frame) async throws(TransportError)
    func receive(timeout: Duration?) async throws(TransportError) -> Frame
    func close()
    /// Closes after the peer had the chance to read everything sent (see PlainFrameChannel).
    func closeGracefully(timeout: Duration) async
}

extension SecureChannel: FrameChannel {
    public func closeGracefully(timeout: Duration) async { close() }
}

/// Frames over a plain TCP connection. Used only for pairing: the pairing messages carry their
/// own commit–reveal and AEAD protection, and nothing else may be sent over it.
public final class PlainFrameChannel: FrameChannel {
    private let socket: OwnedSocket
    private let frames: FrameStream
    public let configuration: TransportConfiguration
    /// The peer's numeric address, for logs.
    public let peerDescription: String

    init(socket: OwnedSocket, peer: String, configuration: TransportConfiguration) {
        self.socket = socket
        self.frames = FrameStream(socket)
        peerDescription = peer
        self.configuration = configuration
    }

    public var isClosed: Bool { socket.isClosed }

    public func close() { socket.close() }

    /// Half-closes, then reads until the peer closes too (or `timeout`), then closes. A plain close
    /// with unread bytes in the receive buffer sends a TCP reset, which can destroy the last frame
    /// (an error or a refusal) before the peer reads it.
    public func closeGracefully(timeout: Duration) async {
        guard !socket.isClosed else { return }
        socket.shutdownWrite()
        let deadline = timeout.deadlineFromNow
        while (try? await socket.receiveSome(upTo: 4096, until: deadline)) != nil {}
        close()
    }

    public func send(_ frame: Frame) async throws(TransportError) {
        try await frames.send(frame, until: configuration.writeTimeout.deadlineFromNow)
    }

    public func receive(timeout: Duration? = nil) async throws(TransportError) -> Frame {
        try await frames.receive(until: (timeout ?? configuration.idleTimeout).deadlineFromNow)
    }
}

/// Listens for one pairing peer at a time on plain TCP (`bt-pair accept`).
public final class PlainFrameListener: Sendable {
    public let port: UInt16
    private let socket: OwnedSocket
    private let configuration: TransportConfiguration

    public init(host: String, port: UInt16, configuration: TransportConfiguration = .init()) throws(TransportError) {
        (socket, self.port) = try OwnedSocket.tcpListener(host: host, port: port, backlog: 4)
        self.configuration = configuration
    }

    public func close() { socket.close() }

    /// The next connection, or `.timedOut` after `timeout`.
    public func accept(timeout: Duration) async throws(TransportError) -> PlainFrameChannel {
        let (client, peerAddress) = try await socket.accept(until: timeout.deadlineFromNow)
        client.setOption(Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        return PlainFrameChannel(socket: client, peer: SocketAddress.describe(peerAddress: peerAddress), configuration: configuration)
    }
}

/// Connects to a pairing peer over plain TCP (`bt-pair with`).
public enum PlainFrameConnector {
    public static func connect(host: String, port: UInt16, timeout: Duration = .seconds(10),
                               configuration: TransportConfiguration = .init()) async throws(TransportError) -> PlainFrameChannel {
        let socket = try await OwnedSocket.connectTCP(host: host, port: port, until: timeout.deadlineFromNow)
        return PlainFrameChannel(socket: socket, peer: host, configuration: configuration)
    }
}
