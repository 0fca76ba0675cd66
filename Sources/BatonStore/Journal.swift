// SPDX-License-Identifier: GPL-2.0-or-later
/// A bounded, durable list of entries keyed by id: the request journal that lets the daemon replay
/// a request lost in a crash exactly once.
///
/// Storage choice: every change rewrites the whole journal as one `DurableRecord`. The journal is
/// small (its capacity is a few hundred request ids), so a rewrite costs the same single fsync an
/// append would, and it reuses the one atomic, checksummed format: there is no torn-tail recovery,
/// no per-record framing and no compaction to get wrong. An append log would only pay off for
/// journals far larger than this one.
///
/// Entries are kept oldest first. Recording an id that is already present replaces that entry and
/// makes it the newest; beyond `capacity` the oldest entries are pruned.
public final class Journal<Entry: Codable & Sendable & Identifiable>: Sendable
where Entry.ID: Codable & Sendable & Hashable {
    public let capacity: Int
    private let storage: DurableRecord<[Entry]>

    public init(name: String, capacity: Int, schemaVersion: UInt32 = 1, in directory: StateDirectory) throws(StoreError) {
        guard capacity >= 1 else { throw .invalidConfiguration("journal capacity must be at least 1, got \(capacity)") }
        self.capacity = capacity
        self.storage = try DurableRecord(name: name, schemaVersion: schemaVersion, in: directory)
    }

    public var filePath: String { storage.filePath }

    /// Adds `entry`; it is on disk when this returns. Returns the entries pruned to stay within capacity.
    @discardableResult
    public func record(_ entry: Entry) throws(StoreError) -> [Entry] {
        var pruned: [Entry] = []
        try storage.update { (current: [Entry]?) throws(StoreError) -> [Entry] in
            var entries = (current ?? []).filter { $0.id != entry.id }
            entries.append(entry)
            let excess = entries.count - capacity
            if excess > 0 {
                pruned = Array(entries.prefix(excess))
                entries.removeFirst(excess)
            }
            return entries
        }
        return pruned
    }

    /// All entries, oldest first.
    public func entries() throws(StoreError) -> [Entry] {
        try storage.load() ?? []
    }

    /// Removes the entry with `id`, durably. Returns it, or nil (and writes nothing) if absent.
    @discardableResult
    public func remove(id: Entry.ID) throws(StoreError) -> Entry? {
        try storage.directory.writeLock.withLock { _ throws(StoreError) -> Entry? in
            let entries = try storage.load() ?? []
            guard let removed = entries.first(where: { $0.id == id }) else { return nil }
            try storage.saveLocked(entries.filter { $0.id != id })
            return removed
        }
    }

    /// See `DurableRecord.quarantine()`.
    @discardableResult
    public func quarantine() throws(StoreError) -> String? {
        try storage.quarantine()
    }
}
