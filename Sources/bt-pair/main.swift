// bt-pair: pair this machine with another one, list the ring, remove a member.
// Thin: parses arguments, talks to batond's org.baton.Ring1 / Pairing1 over D-Bus, prints.
#if canImport(Glibc)
import Glibc
#endif
import BatonDBus
import Dispatch
import Foundation

let usage = """
usage: bt-pair [--bus session|system|ADDRESS] [--bus-name NAME] [--json] [COMMAND]

commands:
  list                      the machines in this ring (the default)
  accept [--host ADDR] [--yes]
                            wait up to 120 s for another machine to pair with this one
  with HOST:PORT --session ID [--yes]
                            pair with the machine running `bt-pair accept` (it prints both)
  with ble:ADDRESS/PSM --session ID [--yes]
                            the same over Bluetooth (L2CAP), to the address and PSM `discover` lists
  with NAME-OR-SESSION [--seconds N] [--yes]
                            the same, finding that machine as `discover` does (over TCP when
                            DNS-SD lists it, else over Bluetooth when its pairing advert offers L2CAP)
  discover [--seconds N]    machines waiting in `bt-pair accept`: on the local network (DNS-SD)
                            and, heard by Bluetooth, nearby (their clear pairing advert)
                            (browses _baton-pair._tcp for N seconds, default 5, at most 30)
  remove DEVICE             remove a member (its name, short id or device id); the others re-key

Both machines show the same 6-digit code; confirm it on each. --yes confirms without asking:
only for scripts that check the code themselves (tests, the demo).
Pairing and removal need root or group `baton`; listing does not.

exit status: 0 done, 1 failure, 2 rejected or cancelled, 3 timed out, 4 not found, 64 usage
"""

enum Exit: Int32 { case ok = 0, failure = 1, rejected = 2, timedOut = 3, notFound = 4, usage = 64 }

struct Options {
    var bus: DBusBusKind = .system
    var busName = "org.baton"
    var json = false
    var yes = false
    var host: String?
    var session: String?
    var seconds: UInt32 = 5
    var command = "list"
    var operands: [String] = []
}

func fail(_ message: String, _ code: Exit) -> Never {
    FileHandle.standardError.write(Data("bt-pair: \(message)\n".utf8))
    exit(code.rawValue)
}

/// Results go to stdout unbuffered, so scripts reading line by line see them at once.
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

func note(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

func parse(_ arguments: [String]) -> Options {
    var options = Options()
    var positional: [String] = []
    var index = 0
    func value(_ flag: String) -> String {
        index += 1
        guard index < arguments.count else { fail("\(flag) needs a value\n\(usage)", .usage) }
        return arguments[index]
    }
    while index < arguments.count {
        let argument = arguments[index]
        switch argument {
        case "-h", "--help":
            print(usage)
            exit(0)
        case "--bus":
            let bus = value(argument)
            options.bus = bus == "session" ? .session : bus == "system" ? .system : .address(bus)
        case "--bus-name": options.busName = value(argument)
        case "--json": options.json = true
        case "--yes": options.yes = true
        case "--host": options.host = value(argument)
        case "--session": options.session = value(argument)
        case "--seconds":
            guard let seconds = UInt32(value(argument)), (1...30).contains(seconds) else { fail("--seconds takes 1-30\n\(usage)", .usage) }
            options.seconds = seconds
        default:
            if argument.hasPrefix("-") { fail("unknown option \(argument)\n\(usage)", .usage) }
            positional.append(argument)
        }
        index += 1
    }
    if let first = positional.first { options.command = first; options.operands = Array(positional.dropFirst()) }
    let arity = ["list": 0, "accept": 0, "with": 1, "remove": 1, "discover": 0]
    guard let wanted = arity[options.command] else { fail("unknown command \(options.command)\n\(usage)", .usage) }
    guard options.operands.count == wanted else { fail("\(options.command) takes \(wanted) operand(s)\n\(usage)", .usage) }
    if options.command == "with" && options.session == nil && isEndpoint(options.operands[0]) {
        fail("with HOST:PORT or ble:ADDRESS/PSM needs --session ID (printed by bt-pair accept)\n\(usage)", .usage)
    }
    return options
}

let ringPath = "/org/baton/ring"

/// HOST:PORT (or [V6]:PORT) or ble:ADDRESS/PSM rather than a name or session id.
func isEndpoint(_ text: String) -> Bool {
    if text.hasPrefix("ble:") { return true }
    guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return false }
    return port > 0 && colon > text.startIndex
}

/// One machine waiting in `bt-pair accept`, as Pairing1.Discover reports it.
struct PairingEndpoint {
    var name: String
    var session: String
    var address: String
    var port: UInt16
    /// "tcp" (DNS-SD) or "ble" (its pairing advert was heard; no TCP endpoint known).
    var transport: String
    /// The L2CAP PSM of a "ble" entry (0: its advert offers no channel).
    var psm: UInt16
    /// "public" or "random" for "ble" entries.
    var addressType: String

    /// Whether Pair can dial it: TCP entries always, Bluetooth ones with an L2CAP PSM.
    var dialable: Bool { transport != "ble" || psm != 0 }

    var target: String {
        if transport == "ble" {
            return psm == 0 ? "\(address) (bluetooth, no channel)" : "ble:\(address)/0x\(String(psm, radix: 16))"
        }
        return address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }
}

func discoverEndpoints(_ connection: DBusConnection, _ options: Options) async throws -> [PairingEndpoint] {
    let reply = try await connection.call(destination: options.busName, path: ringPath, interface: "org.baton.Pairing1", method: "Discover",
                                          arguments: [.uint32(options.seconds)], timeout: .seconds(Int(options.seconds) + 25))
    return (reply.first?.arrayValue ?? []).compactMap(\.asDictionary).compactMap { entry in
        guard let name = entry["Name"]?.stringValue, let session = entry["SessionId"]?.stringValue,
              let address = entry["Address"]?.stringValue, let port = entry["Port"]?.uint16Value else { return nil }
        return PairingEndpoint(name: name, session: session, address: address, port: port,
                               transport: entry["Transport"]?.stringValue ?? "tcp", psm: entry["Psm"]?.uint16Value ?? 0,
                               addressType: entry["AddressType"]?.stringValue ?? "")
    }
}

func discover(_ connection: DBusConnection, _ options: Options) async throws -> Exit {
    let found = try await discoverEndpoints(connection, options)
    if options.json {
        printJSON(found.map { ["name": $0.name, "session": $0.session, "address": $0.address, "port": Int($0.port),
                               "transport": $0.transport, "psm": Int($0.psm), "addressType": $0.addressType] as [String: Any] })
    } else {
        say("NAME                           SESSION           ADDRESS")
        for endpoint in found {
            say(endpoint.name.padding(toLength: 30, withPad: " ", startingAt: 0) + " " + endpoint.session + "  " + endpoint.target)
        }
    }
    if found.isEmpty { note("No machine is waiting in `bt-pair accept` nearby.") }
    return found.isEmpty ? .notFound : .ok
}

/// A name (the device name, or the whole instance name) or a session id, matched against what
/// Discover finds; one machine must match (one session may be seen on several addresses).
func resolveTarget(_ connection: DBusConnection, _ options: Options, _ wanted: String) async throws -> PairingEndpoint {
    let found = try await discoverEndpoints(connection, options)
    let named = found.filter { endpoint in
        endpoint.dialable && (endpoint.session == wanted.lowercased() || endpoint.name == wanted || endpoint.name.hasPrefix(wanted + " ("))
    }
    // TCP first; Bluetooth (L2CAP) only when no TCP endpoint matches.
    let tcp = named.filter { $0.transport != "ble" }
    let matches = tcp.isEmpty ? named : tcp
    guard let first = matches.first else { fail("no machine waiting in `bt-pair accept` matches \(wanted)", .notFound) }
    guard matches.allSatisfy({ $0.session == first.session }) else {
        fail("several machines match \(wanted); use the session id (bt-pair discover lists them)", .failure)
    }
    return first
}

func exitCode(for error: DBusError) -> Exit {
    switch error.name {
    case "org.baton.Error.UnknownDevice": .notFound
    case "org.baton.Error.NotPermitted": .failure
    default: .failure
    }
}

func printJSON(_ value: Any) {
    if let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), let text = String(data: data, encoding: .utf8) {
        say(text)
    }
}

func plain(_ value: DBusValue) -> Any {
    switch value.unwrapped {
    case .string(let s): s
    case .boolean(let b): b
    case .int64(let i): i
    case .int16(let i): Int(i)
    case .uint16(let i): Int(i)
    default: "\(value.unwrapped)"
    }
}

func formatTime(_ seconds: Int64?) -> String {
    guard let seconds else { return "never" }
    let formatter = DateFormatter()
    formatter.dateFormat = "yyyy-MM-dd HH:mm"
    return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
}

func list(_ connection: DBusConnection, _ options: Options) async throws -> Exit {
    let reply = try await connection.call(destination: options.busName, path: ringPath, interface: "org.baton.Ring1", method: "ListMembers")
    let members = (reply.first?.arrayValue ?? []).compactMap(\.asDictionary)
    if options.json {
        printJSON(members.map { $0.mapValues(plain) })
        return .ok
    }
    say("NAME                 ID         PAIRED SINCE      LAST SEEN         RSSI")
    for member in members {
        let name = member["Name"]?.stringValue ?? "?"
        let isSelf = member["Self"]?.boolValue == true
        let rssi = member["LastRSSI"]?.int16Value.map { String($0) } ?? "-"
        let since = isSelf ? "(this machine)" : formatTime(member["PairedSince"]?.int64Value)
        let seen = isSelf ? "" : formatTime(member["LastSeen"]?.int64Value)
        say(name.padding(toLength: 20, withPad: " ", startingAt: 0) + " " + (member["ShortId"]?.stringValue ?? "?") + "  "
              + since.padding(toLength: 17, withPad: " ", startingAt: 0) + " " + seen.padding(toLength: 17, withPad: " ", startingAt: 0) + " " + rssi)
    }
    return .ok
}

/// Reads one line from standard input without blocking the caller's executor.
func readAnswer() async -> String? {
    await withCheckedContinuation { continuation in
        DispatchQueue(label: "bt-pair.stdin").async { continuation.resume(returning: readLine()) }
    }
}

func property(_ connection: DBusConnection, _ options: Options, _ path: String, _ name: String) async throws -> DBusValue {
    let reply = try await connection.call(destination: options.busName, path: path, interface: "org.freedesktop.DBus.Properties",
                                          method: "Get", arguments: [.string("org.baton.PairingSession1"), .string(name)])
    return reply.first?.unwrapped ?? .string("")
}

/// Follows a pairing session to its end: shows the code, asks, reports.
func follow(_ connection: DBusConnection, _ options: Options, _ path: String) async throws -> Exit {
    let cancel = DispatchSource.makeSignalSource(signal: SIGINT, queue: DispatchQueue(label: "bt-pair.signals"))
    signal(SIGINT, SIG_IGN)
    cancel.setEventHandler {
        Task {
            _ = try? await connection.call(destination: options.busName, path: path, interface: "org.baton.PairingSession1", method: "Cancel")
            fail("cancelled", .rejected)
        }
    }
    cancel.activate()
    var asked = false
    while true {
        let state = try await property(connection, options, path, "State").stringValue ?? ""
        switch state {
        case "confirming" where !asked:
            asked = true
            let code = try await property(connection, options, path, "Code").stringValue ?? ""
            note("Code: \(code)")
            var accepted = options.yes
            if options.yes {
                note("Confirmed automatically (--yes).")
            } else {
                FileHandle.standardError.write(Data("Does the other machine show \(code)? [y/N] ".utf8))
                let answer = (await readAnswer() ?? "").trimmingCharacters(in: .whitespaces).lowercased()
                accepted = answer == "y" || answer == "yes"
            }
            do {
                _ = try await connection.call(destination: options.busName, path: path, interface: "org.baton.PairingSession1",
                                              method: "Confirm", arguments: [.boolean(accepted)])
            } catch let error as DBusError where error.name == "org.baton.Error.NotReady" {
                // The session ended meanwhile (the other side refused or timed out): the next
                // poll reports how, with its exit code.
            }
            if !accepted { note("Refused.") }
        case "paired":
            let name = try await property(connection, options, path, "PeerName").stringValue ?? ""
            let id = try await property(connection, options, path, "PeerId").stringValue ?? ""
            let short = id.count >= 8 ? String(id.prefix(4)) + "-" + String(id.dropFirst(4).prefix(4)) : id
            if options.json { printJSON(["result": "paired", "name": name, "deviceId": id, "code": try await property(connection, options, path, "Code").stringValue ?? ""]) }
            else { say("Paired with \(name) (\(short)).") }
            return .ok
        case "failed":
            let error = try await property(connection, options, path, "Error").stringValue ?? ""
            if options.json { printJSON(["result": "failed", "error": error]) }
            switch error {
            case "rejected": fail("pairing was refused or cancelled; nothing was stored", .rejected)
            case "timed-out": fail("timed out; nothing was stored", .timedOut)
            case "verification-failed": fail("the other side failed verification (a man in the middle?); nothing was stored", .failure)
            default: fail("pairing failed (\(error)); nothing was stored", .failure)
            }
        default: break
        }
        try await Task.sleep(for: .milliseconds(100))
    }
}

func run(_ options: Options) async -> Exit {
    let connection: DBusConnection
    do { connection = try DBusConnection(bus: options.bus) } catch { fail("cannot connect to the bus: \(error)", .failure) }
    defer { connection.close() }
    do {
        switch options.command {
        case "accept":
            var accept: [String: DBusValue] = [:]
            if let host = options.host { accept["Host"] = .string(host) }
            let reply = try await connection.call(destination: options.busName, path: ringPath, interface: "org.baton.Pairing1",
                                                  method: "Accept", arguments: [.propertyDictionary(accept)])
            guard let path = reply.first?.objectPathValue else { fail("unexpected reply from batond", .failure) }
            let port = try await property(connection, options, path, "Port").uint16Value ?? 0
            let session = try await property(connection, options, path, "SessionId").stringValue ?? ""
            note("Waiting up to 120 s. On the other machine run:\n  bt-pair with \(options.host ?? "THIS-HOST"):\(port) --session \(session)")
            if options.json { printJSON(["port": Int(port), "session": session]) }
            return try await follow(connection, options, path)
        case "discover":
            return try await discover(connection, options)
        case "with":
            var target = options.operands[0]
            var pairOptions: [String: DBusValue] = ["SessionId": .string(options.session ?? "")]
            if !isEndpoint(target) {
                let endpoint = try await resolveTarget(connection, options, target)
                note("Found \(endpoint.name) at \(endpoint.target).")
                target = endpoint.target
                pairOptions["SessionId"] = .string(endpoint.session)
                if endpoint.transport == "ble", ["public", "random"].contains(endpoint.addressType) { pairOptions["AddressType"] = .string(endpoint.addressType) }
            }
            let reply = try await connection.call(destination: options.busName, path: ringPath, interface: "org.baton.Pairing1", method: "Pair",
                                                  arguments: [.string(target), .propertyDictionary(pairOptions)], timeout: .seconds(40))
            guard let path = reply.first?.objectPathValue else { fail("unexpected reply from batond", .failure) }
            note("Connected; exchanging keys...")
            return try await follow(connection, options, path)
        case "remove":
            _ = try await connection.call(destination: options.busName, path: ringPath, interface: "org.baton.Pairing1",
                                          method: "Remove", arguments: [.string(options.operands[0])])
            if options.json { printJSON(["result": "removed", "device": options.operands[0]]) } else { say("Removed \(options.operands[0]); the ring re-keys.") }
            return .ok
        default:
            return try await list(connection, options)
        }
    } catch let error as DBusError {
        fail("\(error.name): \(error.message)", exitCode(for: error))
    } catch {
        fail("\(error)", .failure)
    }
}


let options = parse(Array(CommandLine.arguments.dropFirst()))
let code = await run(options)
exit(code.rawValue)
