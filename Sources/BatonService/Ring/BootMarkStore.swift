// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore

/// The advert sender's boot mark (SenderBootMark, protocol §4.2 "Restarts") in a directory that
/// lives as long as the boot and that a restored state directory does not roll back (batond:
/// systemd's RuntimeDirectory, a tmpfs kept across restarts; `$XDG_RUNTIME_DIR/baton` for a session
/// daemon). One file per state directory (named by a digest of its path), so daemons with other
/// state directories in one runtime directory (tests, the lab) do not read each other's mark.
/// Written atomically (temporary file and rename), mode 0600, in a 0700 subdirectory `advert`.
public final class BootMarkStore: Sendable {
    public enum Reading: Sendable, Equatable {
        /// No mark: nothing was persisted under any secret in this boot (the first start of a boot).
        case absent
        case present(SenderBootMark)
        /// Unreadable or malformed (removed, so the next save starts a fresh one).
        case unreadable(String)
    }

    private let record: DurableRecord<SenderBootMark>

    public init(runtimeDirectory: String, stateDirectory: String) throws(StoreError) {
        let name = "mark-" + Array(SHA256.hash(Array(stateDirectory.utf8)).prefix(8)).hexString
        record = try DurableRecord(name: name, schemaVersion: 1, in: StateDirectory(path: runtimeDirectory + "/advert"))
    }

    public var filePath: String { record.filePath }

    public func read() -> Reading {
        do {
            return try record.load().map { .present($0) } ?? .absent
        } catch {
            try? record.remove()
            return .unreadable("\(error)")
        }
    }

    public func save(_ mark: SenderBootMark) throws(StoreError) { try record.save(mark) }
    /// The mark's record itself: the radio writes it on its publish path (RadioService.persist).
    var durable: DurableRecord<SenderBootMark> { record }
}
