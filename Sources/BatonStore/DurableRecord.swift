// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
/// One value of type `Value` kept in its own file of a `StateDirectory`, in the checksummed
/// `RecordFormat` container with a JSON body (compact, keys sorted: `JSONValueEncoder`, the same
/// bytes Foundation's `JSONEncoder` wrote with `.sortedKeys`).
///
/// - `load()` returns nil when the file is missing and throws a typed error when it is corrupt,
///   written by a newer schema or format, unreadable, or has a mode looser than 0600.
/// - `save(_:)` replaces the file atomically (see `StateDirectory.writeAtomically`) with mode 0600.
///   It refuses to replace a file that is corrupt or of a newer version, so evidence is never
///   destroyed implicitly: the caller must `quarantine()` it first. A file with a loose mode is
///   replaced (the new file is 0600), since saving does not trust the old contents.
/// - Older schema versions are decoded directly into `Value`; evolve `Value` additively (new
///   optional fields) or migrate before bumping `schemaVersion`.
/// - With a `sealing` key the file is written in the `SealedFormat` container (AES-256-GCM around
///   the same checksummed bytes); a plain file is still read (it is sealed by `sealIfPlain()` or
///   the next save), and a sealed one without the key, or under another key, is a typed error.
public final class DurableRecord<Value: Codable & Sendable>: Sendable {
    public let name: String
    public let schemaVersion: UInt32
    public let directory: StateDirectory
    /// The key the file is sealed with; nil: written plain (0600 only).
    public let sealing: StateSealingKey?

    public init(name: String, schemaVersion: UInt32, in directory: StateDirectory,
                sealing: StateSealingKey? = nil) throws(StoreError) {
        try StateDirectory.validate(name: name)
        guard schemaVersion >= 1 else { throw .invalidConfiguration("schema version must be at least 1") }
        self.name = name
        self.schemaVersion = schemaVersion
        self.directory = directory
        self.sealing = sealing
    }

    /// With a sealing key: rewrites a plain file as a sealed one, byte for byte the same record
    /// inside (validated first: a corrupt or newer file is reported, not sealed). Returns whether
    /// it sealed a file; false when there is no key, no file, or the file is sealed already.
    @discardableResult
    public func sealIfPlain() throws(StoreError) -> Bool {
        guard let sealing else { return false }
        return try directory.writeLock.withLock { _ throws(StoreError) in
            guard let bytes = try directory.readFile(name, enforceMode: true), !SealedFormat.isSealed(bytes) else { return false }
            _ = try RecordFormat.decode(bytes, file: filePath, supportedSchemaVersion: schemaVersion)
            try directory.writeAtomically(try SealedFormat.seal(bytes, name: name, key: sealing, nonce: SystemRandom().bytes(AESGCM.nonceByteCount)),
                                          to: name, mode: 0o600)
            return true
        }
    }

    /// Whether the stored file is sealed (nil: no file). Reads the header only as far as the magic.
    public func isStoredSealed() throws(StoreError) -> Bool? {
        guard let bytes = try directory.readFile(name, enforceMode: false) else { return nil }
        return SealedFormat.isSealed(bytes)
    }

    /// Full path of the record's file.
    public var filePath: String { directory.filePath(name) }

    /// The stored value, or nil if the record has never been saved.
    public func load() throws(StoreError) -> Value? {
        try read(enforceMode: true)
    }

    /// The stored value, or `defaultValue` if the record has never been saved.
    public func load(default defaultValue: @autoclosure () -> Value) throws(StoreError) -> Value {
        try load() ?? defaultValue()
    }

    /// Durably replaces the stored value; when this returns, the new value survives a crash.
    public func save(_ value: Value) throws(StoreError) {
        try directory.writeLock.withLock { _ throws(StoreError) in
            try saveLocked(value)
        }
    }

    /// Atomic read-modify-write with respect to other writers in this process.
    @discardableResult
    public func update(_ transform: (Value?) throws(StoreError) -> Value) throws(StoreError) -> Value {
        try directory.writeLock.withLock { _ throws(StoreError) in
            let updated = try transform(try read(enforceMode: true))
            try writeLocked(updated)
            return updated
        }
    }

    /// Renames the file aside to `<name>.corrupt-<UTC timestamp>` so the next `save` starts fresh.
    /// Returns the new file name, or nil if there was no file.
    @discardableResult
    public func quarantine() throws(StoreError) -> String? {
        try directory.writeLock.withLock { _ throws(StoreError) in
            try directory.quarantineFile(name)
        }
    }

    /// Deletes the record durably (for example when a pairing is forgotten).
    public func remove() throws(StoreError) {
        try directory.writeLock.withLock { _ throws(StoreError) in
            try directory.removeFile(name)
        }
    }

    /// Only with `writeLock` held.
    func saveLocked(_ value: Value) throws(StoreError) {
        // Surfaces corrupt, newer-version and unreadable files instead of overwriting them.
        _ = try read(enforceMode: false)
        try writeLocked(value)
    }

    private func read(enforceMode: Bool) throws(StoreError) -> Value? {
        guard var bytes = try directory.readFile(name, enforceMode: enforceMode) else { return nil }
        if SealedFormat.isSealed(bytes) { bytes = try SealedFormat.open(bytes, name: name, file: filePath, key: sealing) }
        let (_, body) = try RecordFormat.decode(bytes, file: filePath, supportedSchemaVersion: schemaVersion)
        do {
            return try JSONValueDecoder().decode(Value.self, from: Array(body))
        } catch {
            throw .corrupt(file: filePath, reason: "body does not decode as \(Value.self): \(error)")
        }
    }

    private func writeLocked(_ value: Value) throws(StoreError) {
        let body: [UInt8]
        do {
            body = try JSONValueEncoder().encode(value)
        } catch {
            throw .encodingFailed(file: filePath, reason: "\(error)")
        }
        var bytes = try RecordFormat.encode(body: body, schemaVersion: schemaVersion)
        if let sealing {
            bytes = try SealedFormat.seal(bytes, name: name, key: sealing, nonce: SystemRandom().bytes(AESGCM.nonceByteCount))
        }
        try directory.writeAtomically(bytes, to: name, mode: 0o600)
    }
}
