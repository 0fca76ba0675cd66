// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import CBluetooth
import Dispatch
import BatonSystem
import Glibc
import Synchronization

/// Receive-side settings of an L2CAP LE credit-based channel (§8.3).
public struct L2CAPOptions: Sendable {
    /// The MTU this side offers (BT_RCVMTU): the largest SDU it accepts. The kernel returns credits per
    /// received SDU, so a larger MTU keeps more bytes in flight; 65535 is the LE maximum.
    public var receiveMTU: Int

    public static let defaultReceiveMTU = 4096
    /// Valid receive MTUs: the LE minimum 23 up to the 16-bit SDU length limit.
    public static let receiveMTURange = SDUFramer.minimumMTU...65535

    public init(receiveMTU: Int = L2CAPOptions.defaultReceiveMTU) {
        self.receiveMTU = receiveMTU
    }
}

/// Frames over an L2CAP LE credit-based channel (SOCK_SEQPACKET, so each send is one SDU and each
/// receive returns one SDU). Frames go out as SDUs of at most the peer's MTU (SDUFramer) and are rebuilt
/// with SDUReassembler against this side's MTU.
public final class L2CAPFrameChannel: FrameChannel {
    private let socket: OwnedSocket
    private let reassembler: Mutex<SDUReassembler>
    private let sendLock = AsyncLock()
    private let receiveLock = AsyncLock()
    public let configuration: TransportConfiguration
    /// The largest SDU the peer accepts (BT_SNDMTU).
    public let sendMTU: Int
    /// The largest SDU this side accepts (BT_RCVMTU, as the kernel settled it).
    public let receiveMTU: Int
    /// SDUs go out at most this long even to a peer with a larger MTU: the kernel segments a whole SDU
    /// into the socket's send buffer before sending any of it, so a 65535-byte SDU (about 270 PDUs) never
    /// fits the default buffer and the send stalls (seen in the lab).
    public static let maximumSDUSize = 16_384
    /// The SDU size this channel sends: the peer's MTU, capped at `maximumSDUSize`.
    public var sduSize: Int { min(sendMTU, Self.maximumSDUSize) }
    public let peer: L2CAPSocketAddress

    /// Takes ownership of a connected, nonblocking socket; reads both MTUs from the kernel.
    init(socket: OwnedSocket, peer: L2CAPSocketAddress, configuration: TransportConfiguration) throws(TransportError) {
        guard let sendMTU = readMTU(socket, BT_SNDMTU), let receiveMTU = readMTU(socket, BT_RCVMTU) else {
            throw .socket(operation: "getsockopt(BT_SNDMTU/BT_RCVMTU)", errno: errno)
        }
        guard sendMTU >= SDUFramer.minimumMTU else { throw .invalidSDU("peer MTU \(sendMTU) below \(SDUFramer.minimumMTU)") }
        reassembler = Mutex(try SDUReassembler(mtu: receiveMTU))
        self.socket = socket
        self.sendMTU = sendMTU
        self.receiveMTU = receiveMTU
        self.peer = peer
        self.configuration = configuration
    }

    public var isClosed: Bool { socket.isClosed }

    public func close() { socket.close() }

    /// Waits until the kernel has handed every queued SDU to the controller (or `timeout`), then closes.
    /// Closing at once would purge SDUs still waiting for the peer's credits, which can lose the last
    /// frame (an error or a refusal). SHUT_WR is no help: on L2CAP it tells the peer nothing.
    public func closeGracefully(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !socket.isClosed, let queued = queuedBytes(socket), queued > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        close()
    }

    public func send(_ frame: Frame) async throws(TransportError) {
        let sdus = try SDUFramer.split(frame, mtu: sduSize)
        await sendLock.lock()
        defer { sendLock.unlock() }
        for (index, sdu) in sdus.enumerated() {
            // The write timeout counts from the last progress, not from the start of a long frame.
            // Half a frame on the wire would desynchronise the peer's reassembly, so a stall after the
            // first SDU closes the channel.
            try await sendSDU(sdu, until: configuration.writeTimeout.deadlineFromNow, closeOnStall: index > 0)
        }
    }

    /// Sends one SDU of at most `sendMTU` bytes (SEQPACKET: one send is one SDU). Callers serialise sends.
    func sendSDU(_ sdu: [UInt8], until deadline: DispatchTime, closeOnStall: Bool) async throws(TransportError) {
        do {
            try await socket.sendAll(sdu, until: deadline)
        } catch {
            if closeOnStall { close() }
            throw error
        }
    }

    public func receive(timeout: Duration? = nil) async throws(TransportError) -> Frame {
        let deadline = (timeout ?? configuration.idleTimeout).deadlineFromNow
        await receiveLock.lock()
        defer { receiveLock.unlock() }
        while true {
            let sdu = try await receiveSDU(until: deadline)
            let outcome: Result<Frame?, TransportError> = reassembler.withLock { reassembler in
                do throws(TransportError) { return .success(try reassembler.append(sdu)) } catch { return .failure(error) }
            }
            switch outcome {
            case .success(let frame?): return frame
            case .success(nil): continue
            case .failure(let error):
                close()
                throw error
            }
        }
    }

    /// The next SDU (never empty, at most `receiveMTU` bytes). Callers serialise receives.
    func receiveSDU(until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: receiveMTU)
        // After the peer disconnects, the first recv consumes the pending socket error and returns 0
        // (the shutdown flag turns the error into end-of-stream) although SDUs that arrived before the
        // disconnect are still queued; the next recv returns them. So a 0 is only final when repeated.
        var sawZero = false
        while true {
            // MSG_TRUNC: the result is the SDU's real length even if it did not fit.
            let received = socket.withDescriptor { descriptor in
                (buffer.withUnsafeMutableBytes { raw in retryingInterrupts { Glibc.recv(descriptor, raw.baseAddress, raw.count, Int32(MSG_TRUNC)) } }, errno)
            }
            guard let (count, code) = received else { throw .closed }
            if count > receiveMTU {
                close()
                throw .invalidSDU("SDU of \(count) bytes over MTU \(receiveMTU)")
            }
            if count > 0 { return Array(buffer[0..<count]) }
            if count == 0 {
                if sawZero {
                    close()
                    throw .closed
                }
                sawZero = true
                continue
            }
            if sawZero, code == EAGAIN || code == EWOULDBLOCK {
                // A 0 followed by "nothing yet" on a live channel was an empty SDU, which §8.3 forbids.
                close()
                throw .invalidSDU("empty SDU")
            }
            guard OwnedSocket.isTransient(code) else {
                close()
                throw OwnedSocket.failure("recv", code)
            }
            try await socket.wait(.readable, until: deadline)
        }
    }
}

/// Accepts L2CAP LE channels on one local adapter and PSM.
public final class L2CAPListener: Sendable {
    public let local: L2CAPSocketAddress
    private let socket: OwnedSocket
    private let configuration: TransportConfiguration

    /// Binds `adapterAddress` (the adapter's own address and its type) at `psm`, which must be a dynamic
    /// PSM, and listens.
    public init(adapterAddress: BluetoothAddress, addressType: LEAddressType = .public, psm: UInt16,
                options: L2CAPOptions = L2CAPOptions(), configuration: TransportConfiguration = .init()) throws(TransportError) {
        guard L2CAPSocketAddress.dynamicPSMs.contains(psm) else {
            throw .addressUnavailable("PSM 0x\(String(psm, radix: 16)) outside 0x80–0xFF")
        }
        let local = L2CAPSocketAddress(address: adapterAddress, addressType: addressType, psm: psm)
        socket = try makeL2CAPSocket(local: local, options: options)
        try socket.listen(backlog: 4)
        self.local = local
        self.configuration = configuration
    }

    public func close() { socket.close() }

    /// The next channel, or `.timedOut` after `timeout`.
    public func accept(timeout: Duration) async throws(TransportError) -> L2CAPFrameChannel {
        let deadline = timeout.deadlineFromNow
        while true {
            let (client, peerBytes) = try await socket.accept(until: deadline, addressCapacity: L2CAPSocketAddress.byteCount)
            // Not an LE peer: this listener only serves LE channels (the socket closes as it goes).
            guard let peer = try? L2CAPSocketAddress(bytes: peerBytes[...]) else { continue }
            return try L2CAPFrameChannel(socket: client, peer: peer, configuration: configuration)
        }
    }
}

/// Opens L2CAP LE channels. The kernel makes the LE connection itself, which needs the peer to be
/// advertising connectably (it scans for the peer first).
public enum L2CAPConnector {
    public static func connect(adapterAddress: BluetoothAddress, adapterAddressType: LEAddressType = .public,
                               peerAddress: BluetoothAddress, peerAddressType: LEAddressType, psm: UInt16,
                               timeout: Duration = .seconds(10), options: L2CAPOptions = L2CAPOptions(),
                               configuration: TransportConfiguration = .init()) async throws(TransportError) -> L2CAPFrameChannel {
        guard L2CAPSocketAddress.dynamicPSMs.contains(psm) else {
            throw .addressUnavailable("PSM 0x\(String(psm, radix: 16)) outside 0x80–0xFF")
        }
        let deadline = timeout.deadlineFromNow
        let local = L2CAPSocketAddress(address: adapterAddress, addressType: adapterAddressType, psm: 0)
        let peer = L2CAPSocketAddress(address: peerAddress, addressType: peerAddressType, psm: psm)
        let socket = try makeL2CAPSocket(local: local, options: options)
        // A socket dropped on timeout closes, which also cancels the kernel's pending LE connection.
        try await socket.connect(to: peer, until: deadline)
        return try L2CAPFrameChannel(socket: socket, peer: peer, configuration: configuration)
    }
}

/// A nonblocking, close-on-exec L2CAP SEQPACKET socket bound to `local`, security level low (the pairing
/// messages and TLS protect the content) and the receive MTU from `options`. LE addresses make the kernel
/// (6.1) use LE credit-based flow control by itself; BT_MODE is only settable with its ECRED switch on.
func makeL2CAPSocket(local: L2CAPSocketAddress, options: L2CAPOptions) throws(TransportError) -> OwnedSocket {
    guard L2CAPOptions.receiveMTURange.contains(options.receiveMTU) else {
        throw .invalidSDU("receive MTU \(options.receiveMTU) outside \(L2CAPOptions.receiveMTURange)")
    }
    let socket = try OwnedSocket.make(family: AF_BLUETOOTH, type: Int32(SOCK_SEQPACKET.rawValue), protocol: BTPROTO_L2CAP)
    var security = bt_security(level: UInt8(BT_SECURITY_LOW), key_size: 0)
    var receiveMTU = UInt16(options.receiveMTU)
    // BT_RCVMTU only after bind: before it the socket's address type is BR/EDR and the kernel refuses.
    let configured = socket.withDescriptor { descriptor in
        setsockopt(descriptor, SOL_BLUETOOTH, BT_SECURITY, &security, socklen_t(MemoryLayout<bt_security>.size)) == 0
            && local.withSockaddr({ bind(descriptor, $0, $1) }) == 0
            && setsockopt(descriptor, SOL_BLUETOOTH, BT_RCVMTU, &receiveMTU, socklen_t(MemoryLayout<UInt16>.size)) == 0
    }
    guard configured == true else { throw .socket(operation: "setsockopt/bind", errno: errno) }
    return socket
}

private func readMTU(_ socket: OwnedSocket, _ option: Int32) -> Int? {
    var value: UInt16 = 0
    var length = socklen_t(MemoryLayout<UInt16>.size)
    guard socket.withDescriptor({ getsockopt($0, SOL_BLUETOOTH, option, &value, &length) }) == 0 else { return nil }
    return Int(value)
}

/// Bytes the socket still holds for sending (TIOCOUTQ reports the free send space on Bluetooth sockets).
private func queuedBytes(_ socket: OwnedSocket) -> Int? {
    var free: Int32 = 0
    var sendBuffer: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    let measured = socket.withDescriptor { descriptor in
        ioctl(descriptor, UInt(TIOCOUTQ), &free) == 0 && getsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &sendBuffer, &length) == 0
    }
    guard measured == true else { return nil }
    return max(0, Int(sendBuffer) - Int(free))
}
