// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// The identity keys a handshake accepts: the current ring members (§8.1).
/// Supplied through a closure on every handshake, so removing a member refuses it from the next handshake on.
public struct PinSet: Sendable, Equatable {
    public static let keyByteCount = 32
    public private(set) var keys: Set<[UInt8]>

    public init<Keys: Sequence>(_ keys: Keys) where Keys.Element == [UInt8] {
        self.keys = Set(keys.filter { $0.count == Self.keyByteCount })
    }

    public static let empty = PinSet([[UInt8]]())

    public func contains(_ identityKey: [UInt8]) -> Bool { keys.contains(identityKey) }

    public mutating func insert(_ identityKey: [UInt8]) {
        guard identityKey.count == Self.keyByteCount else { return }
        keys.insert(identityKey)
    }

    public mutating func remove(_ identityKey: [UInt8]) { keys.remove(identityKey) }
}

/// Where a listener or connector reads the current pins from.
public typealias PinProvider = @Sendable () -> PinSet
