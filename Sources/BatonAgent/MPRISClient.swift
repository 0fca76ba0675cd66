// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus

/// The MPRIS calls the media publisher and receiver make (org.mpris.MediaPlayer2 and its Player
/// interface, at /org/mpris/MediaPlayer2 on the player's bus name), over BatonDBus. Every reply is
/// read with its types checked: a player answering nonsense gives nil or a typed error.
public struct MPRISClient: Sendable {
    public static let path = "/org/mpris/MediaPlayer2"
    public static let rootInterface = "org.mpris.MediaPlayer2"
    public static let playerInterface = "org.mpris.MediaPlayer2.Player"
    static let properties = "org.freedesktop.DBus.Properties"
    /// Calls to a player wait this long at most (a hung player must not hold the agent).
    static let timeout: Duration = .seconds(5)

    public let connection: DBusConnection

    public init(connection: DBusConnection) {
        self.connection = connection
    }

    /// The bus names of the MPRIS players on the bus now.
    public func playerNames() async throws -> [String] {
        let reply = try await connection.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                              method: "ListNames", timeout: Self.timeout)
        return (reply.first?.stringArrayValue ?? []).filter(MediaPlayerName.isPlayer(busName:)).sorted()
    }

    /// The player's state now (Player's properties and the root's DesktopEntry), sampled at `now`.
    public func state(of name: String, now: Double) async throws -> MediaPlayerState {
        let all = try await getAll(name, Self.playerInterface)
        var state = MediaPlayerState(sampledAt: now)
        Self.apply(all, to: &state)
        state.desktopEntry = try? await property(name, Self.rootInterface, "DesktopEntry")?.stringValue
        return state
    }

    /// DesktopEntry and SupportedUriSchemes, for choosing a player on the receiving machine.
    public func opening(of name: String) async throws -> MediaOpening.Player {
        let all = try await getAll(name, Self.rootInterface)
        return MediaOpening.Player(busName: name, desktopEntry: all["DesktopEntry"]?.stringValue,
                                   uriSchemes: all["SupportedUriSchemes"]?.stringArrayValue ?? [])
    }

    /// Position in seconds (MPRIS: microseconds, not signalled; read only when needed).
    public func position(of name: String) async throws -> Double? {
        guard let value = try await property(name, Self.playerInterface, "Position") else { return nil }
        return Self.microseconds(value).map { Double($0) / 1_000_000 }
    }

    public func metadata(of name: String) async throws -> [String: DBusValue] {
        try await property(name, Self.playerInterface, "Metadata")?.asDictionary ?? [:]
    }

    public func openURI(_ uri: String, on name: String) async throws {
        _ = try await connection.call(destination: name, path: Self.path, interface: Self.playerInterface, method: "OpenUri",
                                      arguments: [.string(uri)], timeout: Self.timeout)
    }

    /// SetPosition(trackid, µs): players ignore it unless `trackID` is the current track's.
    public func setPosition(_ seconds: Double, trackID: String, on name: String) async throws {
        let micros = Int64((max(0, seconds) * 1_000_000).rounded())
        _ = try await connection.call(destination: name, path: Self.path, interface: Self.playerInterface, method: "SetPosition",
                                      arguments: [.objectPath(trackID), .int64(micros)], timeout: Self.timeout)
    }

    public func play(_ name: String) async throws {
        _ = try await connection.call(destination: name, path: Self.path, interface: Self.playerInterface, method: "Play", timeout: Self.timeout)
    }

    public func pause(_ name: String) async throws {
        _ = try await connection.call(destination: name, path: Self.path, interface: Self.playerInterface, method: "Pause", timeout: Self.timeout)
    }

    // MARK: Reading values

    /// Applies Player properties (GetAll's answer or PropertiesChanged's) to `state`.
    public static func apply(_ properties: [String: DBusValue], to state: inout MediaPlayerState) {
        if let status = properties["PlaybackStatus"]?.stringValue {
            state.status = MediaPlayerState.Status(rawValue: status) ?? .stopped
        }
        if let rate = properties["Rate"]?.doubleValue { state.rate = rate }
        if let position = properties["Position"].flatMap(microseconds) { state.position = Double(position) / 1_000_000 }
        if let metadata = properties["Metadata"]?.asDictionary {
            state.url = metadata["xesam:url"]?.stringValue
            state.trackID = trackID(in: metadata)
            state.title = metadata["xesam:title"]?.stringValue
            state.length = metadata["mpris:length"].flatMap(microseconds).map { Double($0) / 1_000_000 }
        }
    }

    /// mpris:trackid is an object path; some players (Rhythmbox) send a string.
    public static func trackID(in metadata: [String: DBusValue]) -> String? {
        guard let value = metadata["mpris:trackid"]?.stringValue, value.hasPrefix("/") else { return nil }
        return value
    }

    /// MPRIS says x (int64); players also send t, i or u.
    static func microseconds(_ value: DBusValue) -> Int64? {
        switch value.unwrapped {
        case .int64(let number): number
        case .uint64(let number): number <= UInt64(Int64.max) ? Int64(number) : nil
        case .int32(let number): Int64(number)
        case .uint32(let number): Int64(number)
        default: nil
        }
    }

    private func getAll(_ name: String, _ interface: String) async throws -> [String: DBusValue] {
        let reply = try await connection.call(destination: name, path: Self.path, interface: Self.properties, method: "GetAll",
                                              arguments: [.string(interface)], timeout: Self.timeout)
        return reply.first?.asDictionary ?? [:]
    }

    private func property(_ name: String, _ interface: String, _ property: String) async throws -> DBusValue? {
        let reply = try await connection.call(destination: name, path: Self.path, interface: Self.properties, method: "Get",
                                              arguments: [.string(interface), .string(property)], timeout: Self.timeout)
        return reply.first?.unwrapped
    }
}
