// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus

/// The media receiver's waits on the player it opened the media in (docs/media.md, "Continuing on
/// the other machine"): the track showing up, the media loading, the seek confirmed.
extension MediaReceiver {
    /// SetPosition, confirmed by the player's Seeked or by its Position (VLC signals Seeked only
    /// while it plays); a player still loading may drop the first one (mpv right after its
    /// Metadata changed), so it is sent again, with a fresh target, in windows of 2, 4 and 12 s (the
    /// last one long: a loaded machine may take seconds to answer, and a seek that lands late is
    /// still seen by the Position reads). Then Play or Pause as the source was; a player that
    /// waited paused at its target while the confirmation took long is behind the source by as
    /// much, so once it plays it is checked against a fresh target and seeked again (twice at most).
    func seek(_ name: String, trackID: String, _ media: MediaActivity, _ asked: Double) async throws {
        try await waitUntilLoaded(name, within: .seconds(2))
        let started = clock()
        _ = try await seekConfirmed(name, trackID: trackID, media, asked, windows: [2, 4, 12])
        // A player that was paused stays paused on OpenUri (mpv): playing or paused as the source was.
        if media.playing { try await mpris.play(name) } else { try await mpris.pause(name) }
        // Quick (the quiet case): nothing more to do.
        guard media.playing, clock() - started > Self.drift else { return }
        for _ in 1...2 {
            let target = media.seekTarget(now: clock(), askedAt: asked)
            guard let position = try await mpris.position(of: name), abs(position - target) > Self.drift else { return }
            logger.log("\(name) plays at \(Int(position)) s, the other machine at \(Int(target)) s: seeking it again")
            _ = try await seekConfirmed(name, trackID: trackID, media, asked, windows: [4])
        }
    }

    /// How far from the source's position a playing player may be after the seek (seconds).
    static let drift = 1.0

    /// Sends SetPosition to the target of the moment and waits for its confirmation, once per
    /// window (seconds); true when one was confirmed.
    private func seekConfirmed(_ name: String, trackID: String, _ media: MediaActivity, _ asked: Double, windows: [Int]) async throws -> Bool {
        for (attempt, window) in windows.enumerated() {
            let seeks = try await mpris.connection.signals(matching: DBusMatchRule(
                sender: name, interface: MPRISClient.playerInterface, member: "Seeked", path: MPRISClient.path))
            let target = media.seekTarget(now: clock(), askedAt: asked)
            let sent = clock()
            try await mpris.setPosition(target, trackID: trackID, on: name)
            let mpris = mpris, clock = clock
            let confirmed = await Self.confirms(seeks, within: .seconds(window)) {
                // At the target, or past it by no more than the time since (a player that already plays).
                guard let position = try? await mpris.position(of: name) else { return false }
                return position >= target - 1 && position <= target + (clock() - sent) * max(1, media.rate) + 1
            }
            try Task.checkCancellation()
            if confirmed { return true }
            logger.log("\(name) did not confirm the seek to \(Int(target)) s within \(window) s (attempt \(attempt + 1))")
        }
        return false
    }

    /// Waits, at most `limit`, until the player's Metadata has the media's length: mpv says it once
    /// the media is loaded and drops a SetPosition sent before (which cost a 2 s retry in every
    /// lab round). A player that never says a length (a live stream) is seeked after `limit`.
    func waitUntilLoaded(_ name: String, within limit: Duration) async throws {
        let updates = try await mpris.connection.signals(matching: Self.propertiesRule(sender: name))
        if try await mpris.metadata(of: name)["mpris:length"] != nil { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await signal in updates where signal.arguments.count >= 2 {
                    if signal.arguments[1].asDictionary?["Metadata"]?.asDictionary?["mpris:length"] != nil { return }
                }
            }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Whether `stream` yields, or `arrived` (asked every 250 ms: Position is not signalled) holds,
    /// within `limit` (the stream ends either way).
    static func confirms(_ stream: AsyncStream<DBusSignal>, within limit: Duration,
                                 arrived: @escaping @Sendable () async -> Bool) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await stream.first { _ in true } != nil }
            group.addTask {
                let deadline = ContinuousClock.now + limit
                while ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(250))
                    if Task.isCancelled { return false }
                    if await arrived() { return true }
                }
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    struct Timeout: Error, CustomStringConvertible {
        var description: String
    }

    /// Waits (at most `loadTimeout`) until one of `names` (every player when nil) has `url` in its
    /// Metadata with a trackid; checks at once, then after each event and every second.
    func waitForTrack<Events: AsyncSequence & Sendable>(
        of url: String, on names: [String]?, changes: Events
    ) async throws -> (name: String, trackID: String) where Events.Element: Sendable {
        let mpris = self.mpris, timeout = loadTimeout
        @Sendable func check() async -> (name: String, trackID: String)? {
            var candidates = names ?? []
            if names == nil { candidates = (try? await mpris.playerNames()) ?? [] }
            for name in candidates {
                guard let metadata = try? await mpris.metadata(of: name), Self.url(in: metadata) == url,
                      let trackID = MPRISClient.trackID(in: metadata) else { continue }
                return (name, trackID)
            }
            return nil
        }
        return try await withThrowingTaskGroup(of: (name: String, trackID: String)?.self) { group in
            group.addTask {
                if let found = await check() { return found }
                var iterator = changes.makeAsyncIterator()
                while try await iterator.next() != nil {
                    if let found = await check() { return found }
                }
                return nil
            }
            // A signal missed or never sent (VLC's two connections, a loaded machine) must not cost
            // the seek: while waiting, checked again every second too.
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(1))
                    if let found = await check() { return found }
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw Timeout(description: "no player showed \(url) within \(timeout)")
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let found = next { return found }
            }
            throw Timeout(description: "no player showed \(url) within \(timeout)")
        }
    }

    static func url(in metadata: [String: DBusValue]) -> String? { metadata["xesam:url"]?.stringValue }

    static func propertiesRule(sender: String?) -> DBusMatchRule {
        DBusMatchRule(sender: sender, interface: MPRISClient.properties, member: "PropertiesChanged", path: MPRISClient.path,
                      stringArguments: [0: MPRISClient.playerInterface])
    }
}
