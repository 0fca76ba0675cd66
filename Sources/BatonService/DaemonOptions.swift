// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore

/// batond's command line, parsed without side effects so it can be tested.
public struct DaemonOptions: Sendable, Hashable {
    public enum Bus: Sendable, Hashable {
        case session, system
        case address(String)
    }

    public var bus: Bus = .system
    public var busName = BatonBusName.daemon
    public var stateDirectory: String
    /// "auto": the first powered adapter.
    public var adapter = "auto"
    /// Address the pairing and transfer listeners bind to.
    public var listenHost = "0.0.0.0"
    /// TCP port of the TLS transfer listener; 0 picks a free one.
    public var transferPort: UInt16 = 0
    /// This machine's name in the ring; the host name by default.
    public var deviceName: String?
    /// Bluetooth company ID in front of the manufacturer data (protocol §2); the same on every member.
    public var companyID: UInt16 = 0xFFFF
    public var saveTimeout: Duration = ServiceConfiguration.defaultSaveTimeout
    public var radioEnabled = true
    /// The bus of avahi-daemon for DNS-SD (§8.2); nil: no DNS-SD.
    public var avahiBus: Bus? = .system
    /// Benchmarks only (hidden, not in the usage): after starting, move the daemon's clock through
    /// this many epochs at once, one rotation each (docs/benchmarks.md, memory after an hour).
    public var simulatedEpochs = 0
    /// Own advertising secrets are replaced once this many days old (security.md, forward window).
    public var rekeyDays: UInt64 = 30
    /// Smoothed RSSI (dBm) from which a member's suggestion is shown (issue 13; unknown RSSI is near).
    public var nearRSSI: Double = -70
    /// Seconds without a member's advert after which its suggestion goes (issue 13 hysteresis).
    public var awayAfter: Double = 10
    /// Fetch a suggestion ahead once it was shown this long; nil: no prefetch (the default).
    public var prefetchAfter: Duration?

    public enum Command: Sendable, Hashable {
        case run(DaemonOptions)
        case showVersion
        case showHelp
    }

    public struct UsageError: Error, Sendable, Hashable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    public static let usage = """
        Usage: batond [--session | --system | --bus-address ADDR] [--bus-name NAME] [--state-dir DIR]
                      [--adapter hciN] [--listen ADDR] [--port N] [--name NAME] [--company-id ID]
                      [--save-timeout SECONDS] [--no-radio] [--avahi-bus ADDR | --no-avahi]
                      [--near-rssi DBM] [--away-after SECONDS] [--prefetch-after SECONDS]
                      [--rekey-days N] [--version] [--help]

          --session            use the session bus (tests, per-user use)
          --system             use the system bus (default)
          --bus-address ADDR   use the bus at ADDR (treated like a session bus)
          --bus-name NAME      bus name to own (default org.baton)
          --state-dir DIR      state directory (default /var/lib/baton on the system bus,
                               $XDG_STATE_HOME/baton otherwise, ~/.local/state/baton when
                               XDG_STATE_HOME is unset)
          --adapter hciN       Bluetooth adapter (default: the first powered one)
          --listen ADDR        numeric address for pairing and transfers (default 0.0.0.0)
          --port N             TCP port of the TLS transfer listener (default 0: any free port)
          --name NAME          this machine's name in the ring (default: the host name)
          --company-id ID      Bluetooth company ID of the adverts, e.g. 0xFFFF (the default);
                               every machine of a ring must use the same
          --save-timeout S     how long apps get to answer WillSave, 0.05-60 s (default 2)
          --no-radio           do not use Bluetooth (activities are kept but not advertised)
          --avahi-bus ADDR     reach avahi-daemon on the bus at ADDR (default: the system bus)
          --no-avahi           no DNS-SD: neither publish nor browse _baton._tcp / _baton-pair._tcp
          --near-rssi DBM      show a member's suggestion from this smoothed RSSI, -127 to 20
                               (default -70; it goes 10 dB lower for 3 s, or after 10 s unheard;
                               an unknown RSSI counts as near)
          --away-after S       a member unheard this long loses its suggestion, 1-3600 (default 10)
          --rekey-days N       replace this machine's advertising secret once it is N days old,
                               1-1024 (default 30); the members learn the new one (RingSync)
          --prefetch-after S   fetch a suggestion ahead once shown S seconds, 0-60 (default: never);
                               accept then delivers the held activity if at most 10 s old
          --version            print the version and exit
          --help               print this help and exit
        """

    init(stateDirectory: String) { self.stateDirectory = stateDirectory }

    public static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Command {
        var bus: Bus?
        var busName = BatonBusName.daemon
        var stateDirectory: String?
        var adapter = "auto"
        var listenHost = "0.0.0.0"
        var transferPort: UInt16 = 0
        var rekeyDays: UInt64 = 30
        var deviceName: String?
        var companyID: UInt16 = 0xFFFF
        var saveTimeout = ServiceConfiguration.defaultSaveTimeout
        var radioEnabled = true
        var avahiBus: Bus? = .system
        var avahiChosen = false
        var simulatedEpochs = 0
        var nearRSSI: Double = -70
        var awayAfter: Double = 10
        var prefetchAfter: Duration?
        var index = 0
        func value(_ option: String) throws(UsageError) -> String {
            index += 1
            guard index < arguments.count, !arguments[index].isEmpty else { throw UsageError(message: "\(option) needs a value") }
            return arguments[index]
        }
        func setBus(_ chosen: Bus) throws(UsageError) {
            guard bus == nil else { throw UsageError(message: "give only one of --session, --system, --bus-address") }
            bus = chosen
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--help", "-h": return .showHelp
            case "--version": return .showVersion
            case "--session": try setBus(.session)
            case "--system": try setBus(.system)
            case "--bus-address": try setBus(.address(try value(argument)))
            case "--bus-name":
                busName = try value(argument)
                guard isValidWellKnownName(busName) else { throw UsageError(message: "--bus-name is not a valid bus name") }
            case "--state-dir":
                let directory = try value(argument)
                guard directory.hasPrefix("/") else { throw UsageError(message: "--state-dir must be an absolute path") }
                stateDirectory = directory
            case "--adapter":
                adapter = try value(argument)
                guard adapter.hasPrefix("hci"), let number = Int(adapter.dropFirst(3)), number >= 0, number < 1024 else {
                    throw UsageError(message: "--adapter must look like hci0")
                }
            case "--save-timeout":
                let text = try value(argument)
                guard let seconds = Double(text), seconds.isFinite, seconds >= 0.05, seconds <= 60 else {
                    throw UsageError(message: "--save-timeout must be a number of seconds between 0.05 and 60")
                }
                saveTimeout = .milliseconds(Int64((seconds * 1000).rounded()))
            case "--no-radio": radioEnabled = false
            case "--near-rssi":
                guard let dbm = Double(try value(argument)), dbm.isFinite, dbm >= -127, dbm <= 20 else {
                    throw UsageError(message: "--near-rssi takes a number of dBm between -127 and 20")
                }
                nearRSSI = dbm
            case "--away-after":
                guard let seconds = Double(try value(argument)), seconds.isFinite, seconds >= 1, seconds <= 3600 else {
                    throw UsageError(message: "--away-after takes 1 to 3600 seconds")
                }
                awayAfter = seconds
            case "--prefetch-after":
                guard let seconds = Double(try value(argument)), seconds.isFinite, seconds >= 0, seconds <= 60 else {
                    throw UsageError(message: "--prefetch-after takes 0 to 60 seconds")
                }
                prefetchAfter = .milliseconds(Int64((seconds * 1000).rounded()))
            case "--avahi-bus", "--no-avahi":
                guard !avahiChosen else { throw UsageError(message: "give only one of --avahi-bus, --no-avahi") }
                avahiChosen = true
                avahiBus = argument == "--no-avahi" ? nil : .address(try value(argument))
            case "--listen":
                listenHost = try value(argument)
                guard listenHost.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else {
                    throw UsageError(message: "--listen takes a numeric IPv4 or IPv6 address")
                }
            case "--rekey-days":
                guard let days = UInt64(try value(argument)), (1...AdvertisingSecret.chainDays).contains(days) else {
                    throw UsageError(message: "--rekey-days takes a number of days from 1 to 1024")
                }
                rekeyDays = days
            case "--port":
                guard let port = UInt16(try value(argument)) else { throw UsageError(message: "--port takes a number from 0 to 65535") }
                transferPort = port
            case "--company-id":
                let text = try value(argument)
                let digits = text.lowercased().hasPrefix("0x") ? String(text.dropFirst(2)) : text
                guard let id = UInt16(digits, radix: text.lowercased().hasPrefix("0x") ? 16 : 10) else {
                    throw UsageError(message: "--company-id takes a 16-bit number such as 0xFFFF")
                }
                companyID = id
            case "--name":
                let name = try value(argument)
                guard name.utf8.count <= 64 else { throw UsageError(message: "--name is at most 64 bytes") }
                deviceName = name
            case "--simulate-epochs":
                guard let count = Int(try value(argument)), count >= 0, count <= 100_000 else {
                    throw UsageError(message: "--simulate-epochs takes a number from 0 to 100000")
                }
                simulatedEpochs = count
            default:
                throw UsageError(message: "unknown option \(argument)")
            }
            index += 1
        }
        let chosenBus = bus ?? .system
        if stateDirectory == nil {
            if chosenBus == .system {
                stateDirectory = "/var/lib/baton"
            } else if let stateHome = environment["XDG_STATE_HOME"], stateHome.hasPrefix("/") {
                stateDirectory = stateHome + "/baton"
            } else if let home = environment["HOME"], home.hasPrefix("/") {
                // The base-directory specification's default for an unset or relative XDG_STATE_HOME.
                stateDirectory = (home.hasSuffix("/") ? String(home.dropLast()) : home) + "/.local/state/baton"
            } else {
                throw UsageError(message: "--state-dir is required when not on the system bus and neither XDG_STATE_HOME nor HOME is an absolute path")
            }
        }
        var options = DaemonOptions(stateDirectory: stateDirectory ?? "/var/lib/baton")
        options.bus = chosenBus
        options.busName = busName
        options.adapter = adapter
        options.saveTimeout = saveTimeout
        options.radioEnabled = radioEnabled
        options.avahiBus = avahiBus
        options.listenHost = listenHost
        options.companyID = companyID
        options.transferPort = transferPort
        options.deviceName = deviceName
        options.simulatedEpochs = simulatedEpochs
        options.nearRSSI = nearRSSI
        options.awayAfter = awayAfter
        options.prefetchAfter = prefetchAfter
        options.rekeyDays = rekeyDays
        return .run(options)
    }

    /// Well-known name rules: 2+ dot-separated elements of [A-Za-z0-9_-], not starting with a digit, <= 255 bytes.
    static func isValidWellKnownName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, bytes.first != UInt8(ascii: ":") else { return false }
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.utf8.first, !(first >= 0x30 && first <= 0x39) else { return false }
            return element.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F || $0 == 0x2D }
        }
    }
}
