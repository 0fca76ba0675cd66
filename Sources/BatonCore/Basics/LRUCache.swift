// SPDX-License-Identifier: LGPL-2.1-or-later
/// A key-value store holding at most `capacity` entries; inserting into a full cache evicts the
/// least recently used entry. Storage never grows past `capacity` slots, so memory is bounded
/// whatever the input (throw-away BLE addresses arrive without limit).
public struct LRUCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Slot: Sendable {
        var key: Key
        var value: Value
        var newer: Int
        var older: Int
    }

    private static var none: Int { -1 }

    public let capacity: Int
    private var slots: [Slot] = []
    private var slotOfKey: [Key: Int] = [:]
    /// Most recently used.
    private var newest = LRUCache.none
    /// Least recently used: evicted first.
    private var oldest = LRUCache.none

    /// A capacity below 1 is raised to 1.
    public init(capacity: Int) {
        self.capacity = max(1, capacity)
        slots.reserveCapacity(self.capacity)
        slotOfKey.reserveCapacity(self.capacity)
    }

    public var count: Int { slots.count }
    public var isEmpty: Bool { slots.isEmpty }

    /// Reserved element slots of the backing storage; stays at `capacity` (tests check the bound).
    public var storageCapacity: Int { slots.capacity }

    /// Looks up without changing the eviction order.
    public func peek(_ key: Key) -> Value? {
        slotOfKey[key].map { slots[$0].value }
    }

    public func contains(_ key: Key) -> Bool { slotOfKey[key] != nil }

    /// Looks up and marks the entry as most recently used.
    public mutating func get(_ key: Key) -> Value? {
        guard let slot = slotOfKey[key] else { return nil }
        moveToNewest(slot)
        return slots[slot].value
    }

    /// Inserts or replaces, marking the entry most recently used. Returns the entry evicted to make room.
    @discardableResult
    public mutating func set(_ key: Key, _ value: Value) -> (key: Key, value: Value)? {
        if let slot = slotOfKey[key] {
            slots[slot].value = value
            moveToNewest(slot)
            return nil
        }
        var evicted: (key: Key, value: Value)?
        if slots.count >= capacity, oldest != Self.none {
            let victim = slots[oldest]
            evicted = (victim.key, victim.value)
            removeValue(forKey: victim.key)
        }
        slots.append(Slot(key: key, value: value, newer: Self.none, older: Self.none))
        let slot = slots.count - 1
        slotOfKey[key] = slot
        linkAsNewest(slot)
        return evicted
    }

    @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        guard let slot = slotOfKey.removeValue(forKey: key) else { return nil }
        unlink(slot)
        let removed = slots[slot].value
        let last = slots.count - 1
        if slot != last {
            // Move the last slot into the hole and repoint its neighbours.
            slots[slot] = slots[last]
            slotOfKey[slots[slot].key] = slot
            let moved = slots[slot]
            if moved.newer != Self.none { slots[moved.newer].older = slot } else { newest = slot }
            if moved.older != Self.none { slots[moved.older].newer = slot } else { oldest = slot }
        }
        slots.removeLast()
        return removed
    }

    public mutating func removeAll() {
        slots.removeAll(keepingCapacity: true)
        slotOfKey.removeAll(keepingCapacity: true)
        newest = Self.none
        oldest = Self.none
    }

    /// Entries from most to least recently used.
    public var entriesNewestFirst: [(key: Key, value: Value)] {
        var result: [(key: Key, value: Value)] = []
        result.reserveCapacity(slots.count)
        var cursor = newest
        while cursor != Self.none {
            result.append((slots[cursor].key, slots[cursor].value))
            cursor = slots[cursor].older
        }
        return result
    }

    private mutating func unlink(_ slot: Int) {
        let newer = slots[slot].newer
        let older = slots[slot].older
        if newer != Self.none { slots[newer].older = older } else { newest = older }
        if older != Self.none { slots[older].newer = newer } else { oldest = newer }
        slots[slot].newer = Self.none
        slots[slot].older = Self.none
    }

    private mutating func linkAsNewest(_ slot: Int) {
        slots[slot].older = newest
        slots[slot].newer = Self.none
        if newest != Self.none { slots[newest].newer = slot }
        newest = slot
        if oldest == Self.none { oldest = slot }
    }

    private mutating func moveToNewest(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        linkAsNewest(slot)
    }
}
