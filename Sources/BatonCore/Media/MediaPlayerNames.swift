// SPDX-License-Identifier: LGPL-2.1-or-later
/// The MPRIS names on a session bus and the player each belongs to (docs/media.md). One process is
/// one player, known by the least of its names: VLC 3.0 owns `org.mpris.MediaPlayer2.vlc` and
/// `org.mpris.MediaPlayer2.vlc.instancePID` on two connections of one process, and both signal
/// every change; counted as two players, the pause of one name left the other "playing" and
/// offered the media again after it was continued elsewhere.
public struct MediaPlayerNames: Sendable {
    /// Who owns a name: its connection (unique name) and that connection's process, when the bus said.
    public struct Owner: Equatable, Sendable {
        public var connection: String
        public var process: UInt32?

        public init(connection: String, process: UInt32?) {
            self.connection = connection
            self.process = process
        }

        func samePlayer(as other: Owner) -> Bool {
            connection == other.connection || (process != nil && process == other.process)
        }
    }

    private var owners: [String: Owner] = [:]

    public init() {}

    /// Every name known.
    public var names: [String] { owners.keys.sorted() }

    /// The name the player owning `name` is known by (nil for a name not known).
    public func player(of name: String) -> String? {
        guard let owner = owners[name] else { return nil }
        return group(of: owner).first
    }

    /// The player whose connection sent a signal (signals carry the unique name).
    public func player(sender: String) -> String? {
        guard let owner = owners.values.first(where: { $0.connection == sender }) else { return nil }
        return group(of: owner).first
    }

    /// `name` now belongs to `owner` (a name that changes owner is removed first). Returns the
    /// name its player is known by now, and the one it was known by before when that changes (its
    /// new name sorts first).
    @discardableResult
    public mutating func add(_ name: String, owner: Owner) -> (player: String, replaced: String?) {
        let before = group(of: owner).first
        owners[name] = owner
        let now = group(of: owner).first ?? name
        return (now, before.flatMap { $0 == now ? nil : $0 })
    }

    /// `name` left the bus. `removed`: the name the player was known by, when it was this one (or
    /// the name was not known); `successor`: the name the player is known by now, when it keeps
    /// another.
    @discardableResult
    public mutating func remove(_ name: String) -> (removed: String?, successor: String?) {
        guard let owner = owners[name] else { return (name, nil) }
        let before = group(of: owner).first
        owners[name] = nil
        guard before == name else { return (nil, nil) }
        return (name, group(of: owner).first)
    }

    private func group(of owner: Owner) -> [String] {
        owners.filter { $0.value.samePlayer(as: owner) }.keys.sorted()
    }
}
