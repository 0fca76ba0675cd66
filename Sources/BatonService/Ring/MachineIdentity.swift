// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import BatonSystem
import Glibc

/// The value the advert counters carry to tell this machine from a copy of its state directory
/// (protocol §4.2, security.md "Clones"): SHA-256 of the first machine id file that exists and is
/// not empty (systemd's /etc/machine-id, then D-Bus's). The id itself never reaches the disk of
/// the state directory. Without either file, a random value kept in the state directory stands in;
/// it travels with a copied directory, so clones go unnoticed on such a system.
public enum MachineIdentity {
    public static let defaultPaths = ["/etc/machine-id", "/var/lib/dbus/machine-id"]

    static func value(paths: [String], store: RingStore) -> [UInt8]? {
        for path in paths {
            guard let bytes = smallFileContents(path) else { continue }
            let text = String(decoding: bytes, as: UTF8.self)
            let trimmed = text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()
            guard !trimmed.isEmpty else { continue }
            return SHA256.hash(Array("baton/v1 machine".utf8) + Array(String(trimmed).utf8))
        }
        return try? store.machineFallback()
    }

    /// The first 4 KiB of a file (a machine id is 33 bytes), or nil if it cannot be opened.
    /// Plain Glibc: the daemon links no Foundation (idle memory, docs/benchmarks.md).
    private static func smallFileContents(_ path: String) -> [UInt8]? {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) else { return nil }
        // A read that fails reads as empty: the next file is tried.
        return (try? file.readAll(upTo: 4096, chunkSize: 4096)) ?? []
    }
}
