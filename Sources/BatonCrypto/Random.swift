// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

/// A source of cryptographically secure random bytes. Tests substitute deterministic fakes.
public protocol RandomSource: Sendable {
    func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

extension RandomSource {
    /// `count` fresh random bytes (none for a negative count).
    public func bytes(_ count: Int) -> [UInt8] {
        let count = max(0, count)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }
}

/// The operating system's generator via libcrypto's RAND_bytes.
public struct SystemRandom: RandomSource {
    public init() {}

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, Int(Int32.max))
            let status = RAND_bytes(base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(chunk))
            // Continuing without randomness would silently produce predictable keys and nonces.
            if status != 1 {
                preconditionFailure("RAND_bytes failed: no secure randomness available, cannot continue safely")
            }
            offset += chunk
        }
    }
}
