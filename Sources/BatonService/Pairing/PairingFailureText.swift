// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonTransport

// MARK: Why a pairing dial or listener failed, in words a person can act on (issue 26)

/// Pair's and Accept's messages reach a person through bt-pair: what went wrong and what to check,
/// never an errno number ("connect failed (errno 111)") or a Swift value's debug text.
extension PairingService {
    /// How the dial went out: to a `bt-pair accept` at HOST:PORT, or at ble:ADDRESS/PSM.
    enum DialRoute { case network, bluetooth }

    /// Why the dial to an acceptor failed, with the fix ("cannot reach X: " precedes it).
    static func describeDial(_ error: TransportError, over route: DialRoute = .network) -> String {
        switch (error, route) {
        case (.socket(_, let code), .network): networkDialFailure(code)
        case (.socket(_, let code), .bluetooth): bluetoothDialFailure(code)
        case (.connectTimedOut, .network), (.timedOut, .network), (.handshakeTimedOut, .network): noAnswerOnTheNetwork
        case (.connectTimedOut, .bluetooth), (.timedOut, .bluetooth), (.handshakeTimedOut, .bluetooth): noAnswerOverBluetooth
        case (.addressUnavailable, .network):
            // Short: the caller's name precedes it, and the whole message stays within 120 characters.
            "unknown host: use the HOST:PORT `bt-pair accept` printed"
        case (.addressUnavailable, .bluetooth):
            "that is not an address and PSM to dial: use the ble:ADDRESS/PSM `bt-pair discover` lists"
        case (.bluetoothUnavailable, _):
            "this machine's kernel has no Bluetooth sockets: pair over the network with the HOST:PORT line `bt-pair accept` printed"
        case (.closed, _):
            "the other machine closed the connection: run `bt-pair accept` there again and pair with the session it prints"
        default:
            "the connection failed (\(echoed("\(error)", limit: 80))): run `bt-pair accept` on the other machine again and retry"
        }
    }

    /// Why a listener for `bt-pair accept --host ADDR` could not be opened, with the fix.
    static func describeListen(_ error: TransportError) -> String {
        switch error {
        case .socket(_, EADDRNOTAVAIL):
            "that address is not one of this machine's (`ip address` lists them)"
        case .socket(_, EADDRINUSE):
            "no free port on that address; try again"
        case .socket(_, EACCES), .socket(_, EPERM):
            "this machine does not allow listening there"
        case .socket(_, EAFNOSUPPORT):
            "this machine has no IPv6 (or no IPv4) networking for that address: give an address of the other kind"
        case .socket(_, let code):
            "the listener could not be opened (\(systemText(code)))"
        case .addressUnavailable:
            "that address cannot be used here (`ip address` lists this machine's)"
        default:
            "the listener could not be opened (\(echoed("\(error)", limit: 80)))"
        }
    }

    static let noAnswerOnTheNetwork =
        "no answer in time: is that machine on and on this network, is the address the one `bt-pair accept` printed, "
        + "and does no firewall there drop the port?"
    static let noAnswerOverBluetooth =
        "no answer over Bluetooth in time: is that machine nearby with Bluetooth on, and is `bt-pair accept` still running there "
        + "(`bt-pair discover` lists it)?"

    static func networkDialFailure(_ code: Int32) -> String {
        switch code {
        case ECONNREFUSED:
            "nothing is listening there: is `bt-pair accept` still running on that machine, and is the port the one it printed?"
        case EHOSTUNREACH, EHOSTDOWN:
            "that machine cannot be reached: is it on and on the same network as this one, and is the address the one "
                + "`bt-pair accept` printed?"
        case ENETUNREACH, ENETDOWN:
            "this machine has no route to that network: is it connected (Wi-Fi or cable), and is the address the one "
                + "`bt-pair accept` printed?"
        case ETIMEDOUT:
            noAnswerOnTheNetwork
        case EACCES, EPERM:
            "a firewall on this machine refused the connection: let it through to that address and port, or pair over Bluetooth "
                + "(`bt-pair with NAME`)"
        case ECONNRESET, ECONNABORTED, EPIPE:
            "that machine dropped the connection: run `bt-pair accept` there again and pair with the session it prints"
        case EADDRNOTAVAIL, EAFNOSUPPORT:
            "this machine cannot dial that kind of address (is IPv6 off here?): use the HOST:PORT line `bt-pair accept` printed "
                + "with an IPv4 address"
        case EMFILE, ENFILE, ENOBUFS, ENOMEM:
            "batond is out of resources for another connection: try again in a moment (`systemctl status batond`)"
        default:
            "the connection failed (\(systemText(code))): check the address and that `bt-pair accept` still runs on that machine"
        }
    }

    static func bluetoothDialFailure(_ code: Int32) -> String {
        switch code {
        case ECONNREFUSED:
            "that machine is not listening for pairing over Bluetooth: is `bt-pair accept` still running there, and is the PSM "
                + "the one `bt-pair discover` lists?"
        case EHOSTDOWN, EHOSTUNREACH, ETIMEDOUT:
            noAnswerOverBluetooth
        case ENETDOWN, ENETUNREACH, ENODEV:
            "this machine's Bluetooth adapter is off or gone: `bluetoothctl power on`, then try again"
        case EBUSY, EALREADY, EINPROGRESS:
            "this machine's Bluetooth adapter is busy connecting elsewhere: try again in a moment"
        case ECONNRESET, ECONNABORTED, EPIPE:
            "that machine dropped the Bluetooth connection: run `bt-pair accept` there again, or pair over the network"
        case EACCES, EPERM:
            "the kernel refused the Bluetooth connection (batond lacks CAP_NET_RAW or the adapter's security refused it): "
                + "`baton doctor` checks what batond needs"
        default:
            "the Bluetooth connection failed (\(systemText(code))): try again, or pair over the network"
        }
    }

    /// The C library's words for an errno ("Protocol not available"), never its number.
    static func systemText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "an unexpected system error" }
        let words = String(cString: text)
        return words.hasPrefix("Unknown error") ? "an unexpected system error" : words.prefix(1).lowercased() + words.dropFirst()
    }
}
