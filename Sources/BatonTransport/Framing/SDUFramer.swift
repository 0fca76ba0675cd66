// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// Frames over an L2CAP LE credit-based channel (§8.3): each encoded frame is split into SDUs of at
/// most the negotiated MTU. A frame starts at an SDU boundary and no SDU carries bytes of two frames.
public enum SDUFramer {
    /// LE credit-based channels never negotiate an MTU below 23, which also keeps the 12-byte header in the first SDU.
    public static let minimumMTU = 23

    /// The SDUs of `frame`: all full except the last.
    public static func split(_ frame: Frame, mtu: Int) throws(TransportError) -> [[UInt8]] {
        let encoded: [UInt8]
        do { encoded = try frame.encoded() } catch { throw .unencodableFrame(error) }
        return try split(encoded: encoded, mtu: mtu)
    }

    public static func split(encoded: [UInt8], mtu: Int) throws(TransportError) -> [[UInt8]] {
        guard mtu >= minimumMTU else { throw .invalidSDU("MTU \(mtu) below \(minimumMTU)") }
        return stride(from: 0, to: encoded.count, by: mtu).map { start in
            Array(encoded[start..<min(start + mtu, encoded.count)])
        }
    }
}

/// Rebuilds frames from SDUs received in order. The header is checked against the type's limit when
/// the first SDU arrives, before any payload is kept. Errors are final for the channel.
public struct SDUReassembler: Sendable {
    public let mtu: Int
    private var pending: [UInt8] = []
    private var expectedLength = 0
    private var failed = false

    public init(mtu: Int) throws(TransportError) {
        guard mtu >= SDUFramer.minimumMTU else { throw .invalidSDU("MTU \(mtu) below \(SDUFramer.minimumMTU)") }
        self.mtu = mtu
    }

    /// True when no partial frame is held.
    public var isIdle: Bool { pending.isEmpty }

    /// Adds one SDU; returns the frame it completes, or nil if more SDUs are needed.
    public mutating func append(_ sdu: [UInt8]) throws(TransportError) -> Frame? {
        guard !failed else { throw .closed }
        do {
            return try take(sdu)
        } catch {
            failed = true
            pending = []
            throw error
        }
    }

    private mutating func take(_ sdu: [UInt8]) throws(TransportError) -> Frame? {
        guard !sdu.isEmpty else { throw .invalidSDU("empty SDU") }
        guard sdu.count <= mtu else { throw .invalidSDU("SDU of \(sdu.count) bytes over MTU \(mtu)") }
        if pending.isEmpty {
            guard sdu.count >= Frame.headerLength else { throw .invalidSDU("first SDU shorter than a frame header") }
            let header: (type: FrameType, requestID: UInt32, length: Int)
            do { header = try Frame.parseHeader(sdu[0..<Frame.headerLength]) } catch { throw .invalidFrame(error) }
            expectedLength = Frame.headerLength + header.length
        }
        guard pending.count + sdu.count <= expectedLength else { throw .invalidSDU("SDU runs past the end of its frame") }
        pending.append(contentsOf: sdu)
        guard pending.count == expectedLength else { return nil }
        defer { pending = [] }
        do { return try Frame.decode(pending) } catch { throw .invalidFrame(error) }
    }
}
