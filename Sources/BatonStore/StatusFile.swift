// SPDX-License-Identifier: GPL-2.0-or-later
/// The daemon's lifecycle status as plain, pretty-printed JSON, for `baton status` and humans.
///
/// Unlike `DurableRecord` it has no binary header, so `jq` can read it; it is informational and
/// rewritten on every transition, so a damaged one is simply replaced by the next write. Writes are
/// still atomic (readers never see half a file). Mode 0600: it can reveal device names and the
/// state directory is private to the daemon's user anyway.
public final class StatusFile<Status: Codable & Sendable>: Sendable {
    public let name: String
    public let directory: StateDirectory

    public init(name: String, in directory: StateDirectory) throws(StoreError) {
        try StateDirectory.validate(name: name)
        self.name = name
        self.directory = directory
    }

    public var filePath: String { directory.filePath(name) }

    public func write(_ status: Status) throws(StoreError) {
        // Pretty, keys sorted: byte for byte what Foundation's JSONEncoder wrote with those options.
        let json: [UInt8]
        do {
            json = try JSONValueEncoder(pretty: true).encode(status)
        } catch {
            throw .encodingFailed(file: filePath, reason: "\(error)")
        }
        try directory.writeLock.withLock { _ throws(StoreError) in
            try directory.writeAtomically(json + [UInt8(ascii: "\n")], to: name, mode: 0o600)
        }
    }

    /// The last written status, or nil if there is none.
    public func read() throws(StoreError) -> Status? {
        guard let bytes = try directory.readFile(name, enforceMode: false) else { return nil }
        do {
            return try JSONValueDecoder().decode(Status.self, from: bytes)
        } catch {
            throw .corrupt(file: filePath, reason: "not a valid status: \(error)")
        }
    }

    /// Deletes the status file (on clean shutdown); a missing file is not an error.
    public func remove() throws(StoreError) {
        try directory.writeLock.withLock { _ throws(StoreError) in
            try directory.removeFile(name)
        }
    }
}
