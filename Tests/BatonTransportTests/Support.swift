// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import COpenSSL
import Dispatch
import Glibc
import Synchronization
import Testing

/// Pins that a test changes while listeners and connectors run.
final class MutablePins: Sendable {
    private let pins: Mutex<PinSet>

    init(_ keys: [[UInt8]]) { pins = Mutex(PinSet(keys)) }

    var provider: PinProvider { { [self] in pins.withLock { $0 } } }
    func remove(_ key: [UInt8]) { pins.withLock { $0.remove(key) } }
}

/// Collects a listener's handshake failures.
final class FailureLog: Sendable {
    private let failures = Mutex<[TransportError]>([])

    var record: @Sendable (TransportError) -> Void { { [self] error in failures.withLock { $0.append(error) } } }
    var all: [TransportError] { failures.withLock { $0 } }

    /// Waits (polling, bounded) until `count` failures arrived.
    func waitForCount(_ count: Int, within seconds: Double = 5) async -> [TransportError] {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while all.count < count && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return all
    }
}

struct TimeLimitExceeded: Error {}

/// Runs `body`, failing instead of hanging when it takes longer than `seconds`: a guard against a
/// hang, not a timing (beside two CPU hogs, 200 readiness waits took over 20 s).
func withTimeLimit<Result: Sendable>(
    _ seconds: Double = 120,
    _ body: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Result?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else { throw TimeLimitExceeded() }
        return result
    }
}

/// Two devices pinned to each other, a listener for the server and a connector for the client.
struct PinnedPair: Sendable {
    let serverIdentity: Ed25519PrivateKey
    let clientIdentity: Ed25519PrivateKey
    let serverPins: MutablePins
    let clientPins: MutablePins
    let listener: TLSListener
    let connector: TLSConnector
    let failures: FailureLog
    let host: String

    init(host: String = "127.0.0.1", configuration: TransportConfiguration = .init()) throws {
        serverIdentity = try Ed25519PrivateKey()
        clientIdentity = try Ed25519PrivateKey()
        serverPins = MutablePins([clientIdentity.publicKey])
        clientPins = MutablePins([serverIdentity.publicKey])
        failures = FailureLog()
        self.host = host
        listener = try TLSListener(identity: serverIdentity, pins: serverPins.provider, host: host, port: 0,
                                   configuration: configuration, onHandshakeFailure: failures.record)
        connector = try TLSConnector(identity: clientIdentity, pins: clientPins.provider, configuration: configuration)
    }

    func connect() async throws -> SecureChannel {
        try await connector.connect(host: host, port: listener.port, timeout: .seconds(5))
    }

    /// Connects and accepts; returns (client side, server side).
    func connectedChannels() async throws -> (client: SecureChannel, server: SecureChannel) {
        async let accepted = listener.accept()
        let client = try await connect()
        return (client, try await accepted)
    }
}

/// Serves echo on every accepted channel until the listener closes.
func startEchoServer(_ listener: TLSListener) -> Task<Void, Never> {
    Task {
        while let channel = try? await listener.accept() {
            Task {
                while let frame = try? await channel.receive() {
                    try? await channel.send(frame)
                }
            }
        }
    }
}

enum RawClientOutcome: Equatable, Sendable {
    /// SSL_connect failed.
    case handshakeRefused
    /// The handshake completed locally but the first read failed (TLS 1.3 server refusing our certificate).
    case refusedAfterHandshake
    /// The server sent data.
    case readData
}

/// An SSL_CTX handed to a blocking helper thread; only that thread uses it.
struct RawContext: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A plain blocking OpenSSL client, to offer what the transport itself never would.
/// Runs on its own dispatch queue (blocking), with 5 s socket timeouts.
func runRawClient(port: UInt16, context: RawContext, verification: HandshakeVerification? = nil) async -> RawClientOutcome {
    await withCheckedContinuation { continuation in
        blockingQueue().async {
            continuation.resume(returning: rawClientBlocking(port: port, context: context.pointer, verification: verification))
        }
    }
}

private func rawClientBlocking(port: UInt16, context: OpaquePointer, verification: HandshakeVerification?) -> RawClientOutcome {
    guard let descriptor = try? rawTCPConnect(port: port) else { return .handshakeRefused }
    defer { close(descriptor) }
    guard let ssl = SSL_new(context) else { return .handshakeRefused }
    defer { SSL_free(ssl) }
    if let verification {
        // Baton contexts carry no certificate; each connection gets a throw-away one (§8.1).
        guard (try? TLSContext.installCertificate(on: ssl)) != nil else { return .handshakeRefused }
        _ = SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(verification).toOpaque())
    }
    _ = SSL_set_fd(ssl, descriptor)
    defer { ERR_clear_error() }
    guard SSL_connect(ssl) == 1 else { return .handshakeRefused }
    var byte: UInt8 = 0
    return SSL_read(ssl, &byte, 1) > 0 ? .readData : .refusedAfterHandshake
}

/// A blocking TCP connection to 127.0.0.1 with 5 s receive and send timeouts.
func rawTCPConnect(port: UInt16) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TransportError.socket(operation: "socket", errno: errno) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard status == 0 else {
        let code = errno
        close(descriptor)
        throw TransportError.socket(operation: "connect", errno: code)
    }
    return descriptor
}

/// Blocking work must stay off the global concurrent queues: on Linux they also run Swift's cooperative
/// executor, and a blocked thread there can stall the very server the blocking call waits for.
/// A private queue runs on an overcommitting thread of its own.
func blockingQueue() -> DispatchQueue {
    DispatchQueue(label: "baton.transport.tests.blocking")
}

/// Blocks (on its own queue) until the peer closes the raw socket; true if it did within the socket timeout.
func waitForPeerClose(_ descriptor: Int32) async -> Bool {
    await withCheckedContinuation { continuation in
        blockingQueue().async {
            var buffer = [UInt8](repeating: 0, count: 64)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count > 0 { continue }
                // 0: orderly close; ECONNRESET: reset. EAGAIN means the 5 s timeout passed.
                continuation.resume(returning: count == 0 || errno == ECONNRESET)
                return
            }
        }
    }
}

/// A payload of `count` bytes that is not all one value, so misordered chunks would show.
func patternedBytes(_ count: Int, seed: UInt8 = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ $0 >> 8) }
}
