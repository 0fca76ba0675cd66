// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why a native messaging frame was refused. The browser is trusted more than a peer, but a page
/// can still shape what the extension sends, so nothing here traps.
public enum NativeMessageFramingError: Error, Equatable, Sendable {
    /// The length prefix announces more than `limit` bytes.
    case messageTooLarge(length: UInt32, limit: Int)
    /// The stream ended inside a frame (after `received` of `expected` bytes).
    case truncated(expected: Int, received: Int)
}

/// The browsers' native messaging framing: a 4-byte length in native byte order, then that many
/// bytes of UTF-8 JSON. Chromium refuses host→browser messages over 1 MiB; the same bound is kept
/// for browser→host messages since ours are a title and a URL.
public enum NativeMessageFraming {
    public static let maximumMessageLength = 1 << 20
    static let prefixLength = 4

    /// The frame for `message`, or `.messageTooLarge` when the browser would refuse it.
    public static func frame(_ message: [UInt8], limit: Int = maximumMessageLength) throws(NativeMessageFramingError) -> [UInt8] {
        guard message.count <= limit else {
            throw .messageTooLarge(length: UInt32(clamping: message.count), limit: limit)
        }
        let length = UInt32(message.count)
        return withUnsafeBytes(of: length) { Array($0) } + message
    }
}

/// Splits a byte stream into messages; feed it whatever `read` returned, in order.
public struct NativeMessageDecoder: Sendable {
    public let limit: Int
    private var buffer: [UInt8] = []

    public init(limit: Int = NativeMessageFraming.maximumMessageLength) {
        self.limit = limit
    }

    /// Appends `bytes` and returns every message now complete. After an error the stream is out
    /// of step for good: the caller stops reading.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws(NativeMessageFramingError) -> [[UInt8]] {
        buffer.append(contentsOf: bytes)
        var messages: [[UInt8]] = []
        var start = 0
        while buffer.count - start >= NativeMessageFraming.prefixLength {
            let length = buffer.withUnsafeBytes { raw in
                raw.loadUnaligned(fromByteOffset: start, as: UInt32.self)
            }
            // Checked before anything is allocated for it.
            guard Int(length) <= limit else { throw .messageTooLarge(length: length, limit: limit) }
            let bodyStart = start + NativeMessageFraming.prefixLength
            guard buffer.count - bodyStart >= Int(length) else { break }
            messages.append(Array(buffer[bodyStart..<(bodyStart + Int(length))]))
            start = bodyStart + Int(length)
        }
        buffer.removeFirst(start)
        return messages
    }

    /// Call at end of input: a partial frame left over is an error.
    public func finish() throws(NativeMessageFramingError) {
        guard !buffer.isEmpty else { return }
        if buffer.count < NativeMessageFraming.prefixLength {
            throw .truncated(expected: NativeMessageFraming.prefixLength, received: buffer.count)
        }
        let length = buffer.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        throw .truncated(expected: NativeMessageFraming.prefixLength + Int(length), received: buffer.count)
    }
}
