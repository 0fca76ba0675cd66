import BatonCrypto
import Foundation

/// The value the advert counters carry to tell this machine from a copy of its state directory
/// (protocol §4.2, security.md "Clones"): SHA-256 of the first machine id file that exists and is
/// not empty (systemd's /etc/machine-id, then D-Bus's). The id itself never reaches the disk of
/// the state directory. Without either file, a random value kept in the state directory stands in;
/// it travels with a copied directory, so clones go unnoticed on such a system.
public enum MachineIdentity {
    public static let defaultPaths = ["/etc/machine-id", "/var/lib/dbus/machine-id"]

    static func value(paths: [String], store: RingStore) -> [UInt8]? {
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty else { continue }
            return SHA256.hash(Array("baton/v1 machine".utf8) + Array(text.utf8))
        }
        return try? store.machineFallback()
    }
}
