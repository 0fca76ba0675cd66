// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI

/// HOST:PORT (or [V6]:PORT) or ble:ADDRESS/PSM rather than a name or session id.
func isEndpoint(_ text: String) -> Bool {
    if text.hasPrefix("ble:") { return true }
    guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return false }
    return port > 0 && colon > text.startIndex
}

extension PairingEndpoint {
    /// Whether Pair can dial it: TCP entries always, Bluetooth ones with an L2CAP PSM.
    var dialable: Bool { transport != "ble" || psm != 0 }

    /// What Pair takes (and the user sees): HOST:PORT, [V6]:PORT or ble:ADDRESS/0xPSM.
    var target: String {
        if transport == "ble" {
            return psm == 0 ? "\(address) (bluetooth, no channel)" : "ble:\(address)/0x\(String(psm, radix: 16))"
        }
        return address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }
}

/// How a name or session id matched what Discover found.
enum TargetMatch {
    case found(PairingEndpoint)
    case none
    case ambiguous

    /// A name (the device name, or the whole instance name) or a session id; one machine must
    /// match (one session may be seen on several addresses). TCP first; Bluetooth (L2CAP) only
    /// when no TCP endpoint matches.
    init(_ wanted: String, in found: [PairingEndpoint]) {
        let named = found.filter { endpoint in
            endpoint.dialable && (endpoint.sessionID == wanted.lowercased() || endpoint.name == wanted || endpoint.name.hasPrefix(wanted + " ("))
        }
        let tcp = named.filter { $0.transport != "ble" }
        let matches = tcp.isEmpty ? named : tcp
        guard let first = matches.first else { self = .none; return }
        self = matches.allSatisfy({ $0.sessionID == first.sessionID }) ? .found(first) : .ambiguous
    }
}

/// For test harnesses only, never shown in the usage (bt-pair(1), TESTING): answers the final
/// "Add them to this ring?" with yes. Both codes must still be typed: no option skips them.
let testAutoConfirmOption = "--test-auto-confirm"

/// `--yes` once confirmed the code without a person; it is refused, saying why.
let yesIsGone = "--yes is not taken: each person types the code the other machine shows (see bt-pair --help)"
