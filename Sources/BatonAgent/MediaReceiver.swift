// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The receiving side of the media publisher (docs/media.md): the agent is the handler for
/// `org.baton.media`; it opens the URL in a player here (`MediaOpening.candidates`: the same
/// player, else a running MPRIS player for the scheme, else the desktop's default) and seeks it
/// to the source's position at the pull plus the time the handoff took. Refusing (nothing here
/// plays it) fails the Continue, and the source is not told, so it keeps playing.
public actor MediaReceiver {
    public struct Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
    }

    private let mpris: MPRISClient
    private let desktop: any MediaDesktop
    private let logger: any AgentLog
    private let clock: @Sendable () -> Double
    /// When this machine was last asked WillContinue for media (its own clock): bounds the
    /// handoff's duration whatever the other machine's clock says.
    private var askedAt: Double?
    /// How long a player may take to load the media and show it in its Metadata.
    private let loadTimeout: Duration
    /// The seek of the media opened last, which runs after the Continue was answered; a newer
    /// handoff cancels it.
    private var finishing: Task<Void, Never>?

    public init(session: DBusConnection, desktop: any MediaDesktop, logger: any AgentLog, loadTimeout: Duration = .seconds(30),
                clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        mpris = MPRISClient(connection: session)
        self.desktop = desktop
        self.logger = logger
        self.loadTimeout = loadTimeout
        self.clock = clock
    }

    /// The `ActivityHandler` to register for `MediaActivity.activityType`.
    public nonisolated var handler: some ActivityHandler { MediaHandler(receiver: self) }

    func asked() { askedAt = clock() }

    /// Opens the media and returns where; throws `Refusal` when nothing here plays it.
    @discardableResult
    public func receive(title: String, userInfo: [String: PropertyValue]) async throws(Refusal) -> MediaOpening {
        let media: MediaActivity
        do { media = try MediaActivity(title: title, userInfo: userInfo) } catch {
            logger.log("refusing a media activity that cannot be read: \(error)")
            throw Refusal(description: "the media activity cannot be read (\(error))")
        }
        let asked = askedAt ?? clock()
        askedAt = nil
        var running: [MediaOpening.Player] = []
        for name in (try? await mpris.playerNames()) ?? [] {
            if let player = try? await mpris.opening(of: name) { running.append(player) }
        }
        let scheme = MediaURLPolicy.scheme(of: media.url) ?? ""
        let candidates = MediaOpening.candidates(
            for: media, running: running, sourcePlayerInstalled: media.player.map { desktop.isMediaPlayer(desktopID: $0 + ".desktop") } ?? false,
            hasDefaultHandler: desktop.hasDefaultHandler(scheme: scheme))
        for candidate in candidates {
            do {
                switch candidate {
                case .running(let name): try await openInRunning(name, media, asked)
                case .launch(let id): try await launch(id, media, asked)
                case .desktopDefault:
                    let target = media.seekTarget(now: clock(), askedAt: asked)
                    try await desktop.openDefault(isWebAddress(media.url) ? media.browserURL(at: target) : media.url)
                }
                logger.log("opened the media \(media.title) with \(candidate)")
                return candidate
            } catch {
                logger.log("opening the media \(media.title) with \(candidate) failed: \(error)")
            }
        }
        let refusal = Refusal(description: "no media player here plays \(scheme) URLs")
        logger.log("refusing the media \(media.title): \(refusal)")
        throw refusal
    }

    /// OpenUri (the Continue's answer waits for this much), then, after the answer: wait until the
    /// player's Metadata has the URL (its trackid is then current) and SetPosition.
    private func openInRunning(_ name: String, _ media: MediaActivity, _ asked: Double) async throws {
        let changes = try await mpris.connection.signals(matching: Self.propertiesRule(sender: name))
        if try await Self.url(in: mpris.metadata(of: name)) != media.url {
            try await mpris.openURI(media.url, on: name)
        }
        finish(media) { receiver in
            let trackID = try await receiver.waitForTrack(of: media.url, on: [name], changes: changes).trackID
            try await receiver.seek(name, trackID: trackID, media, asked)
        } failed: { error in
            "\(name) plays the media from where it loaded it: it was not seeked (\(error))"
        }
    }

    /// Starts the player's desktop entry on the URL, then, after the answer, seeks it once it shows
    /// up on MPRIS with the URL. A player that never does still plays the media, from the start (logged).
    private func launch(_ desktopID: String, _ media: MediaActivity, _ asked: Double) async throws {
        let changes = try await mpris.connection.signals(matching: Self.propertiesRule(sender: nil))
        let owners = try await mpris.connection.nameOwnerChanges()
        let merged = AsyncStream<Void> { continuation in
            let a = Task { for await _ in changes { continuation.yield() }; continuation.finish() }
            let b = Task { for await change in owners where MediaPlayerName.isPlayer(busName: change.name) { continuation.yield() } }
            continuation.onTermination = { _ in a.cancel(); b.cancel() }
        }
        try desktop.launch(desktopID: desktopID, uri: media.url)
        finish(media) { receiver in
            let found = try await receiver.waitForTrack(of: media.url, on: nil, changes: merged)
            try await receiver.seek(found.name, trackID: found.trackID, media, asked)
        } failed: { error in
            "\(desktopID) plays the media from the start: it did not show it on MPRIS (\(error))"
        }
    }

    /// Runs the rest of an opening (the player loading, the seek) after the Continue was answered:
    /// a player may take longer to load than batond waits for a handler (docs/media.md). Cancels
    /// the rest of the previous opening.
    private func finish(_ media: MediaActivity, _ work: @escaping @Sendable (MediaReceiver) async throws -> Void,
                        failed: @escaping @Sendable (any Error) -> String) {
        finishing?.cancel()
        let logger = logger
        finishing = Task {
            do {
                try await work(self)
                logger.log("playing the media \(media.title) where the other machine was")
            } catch is CancellationError {
                logger.log("the media \(media.title) was not seeked: a newer handoff came first")
            } catch {
                logger.log(failed(error))
            }
        }
    }

    /// SetPosition, confirmed by the player's Seeked or by its Position (VLC signals Seeked only
    /// while it plays); a player still loading may drop the first one (mpv right after its
    /// Metadata changed), so it is sent again, with a fresh target, up to 3 times.
    private func seek(_ name: String, trackID: String, _ media: MediaActivity, _ asked: Double) async throws {
        try await waitUntilLoaded(name, within: .seconds(2))
        for attempt in 1...3 {
            let seeks = try await mpris.connection.signals(matching: DBusMatchRule(
                sender: name, interface: MPRISClient.playerInterface, member: "Seeked", path: MPRISClient.path))
            let target = media.seekTarget(now: clock(), askedAt: asked)
            let sent = clock()
            try await mpris.setPosition(target, trackID: trackID, on: name)
            let mpris = mpris, clock = clock
            let confirmed = await Self.confirms(seeks, within: .seconds(attempt * 2)) {
                // At the target, or past it by no more than the time since (a player that already plays).
                guard let position = try? await mpris.position(of: name) else { return false }
                return position >= target - 1 && position <= target + (clock() - sent) * max(1, media.rate) + 1
            }
            try Task.checkCancellation()
            if confirmed { break }
            logger.log("\(name) did not confirm the seek to \(Int(target)) s (attempt \(attempt))")
        }
        // A player that was paused stays paused on OpenUri (mpv): playing or paused as the source was.
        if media.playing { try await mpris.play(name) } else { try await mpris.pause(name) }
    }

    /// Waits, at most `limit`, until the player's Metadata has the media's length: mpv says it once
    /// the media is loaded and drops a SetPosition sent before (which cost a 2 s retry in every
    /// lab round). A player that never says a length (a live stream) is seeked after `limit`.
    private func waitUntilLoaded(_ name: String, within limit: Duration) async throws {
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
    private static func confirms(_ stream: AsyncStream<DBusSignal>, within limit: Duration,
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

    /// Waits (event-driven, at most `loadTimeout`) until one of `names` (every player when nil)
    /// has `url` in its Metadata with a trackid; checks at once, then after each event.
    private func waitForTrack<Events: AsyncSequence & Sendable>(
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
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            guard let first else { throw Timeout(description: "no player showed \(url) within \(timeout)") }
            return first
        }
    }

    static func url(in metadata: [String: DBusValue]) -> String? { metadata["xesam:url"]?.stringValue }

    static func propertiesRule(sender: String?) -> DBusMatchRule {
        DBusMatchRule(sender: sender, interface: MPRISClient.properties, member: "PropertiesChanged", path: MPRISClient.path,
                      stringArguments: [0: MPRISClient.playerInterface])
    }
}

/// The handler batond calls: WillContinue notes the time (the handoff starts), Continue opens.
struct MediaHandler: ActivityHandler {
    let receiver: MediaReceiver

    func willContinue(type: String, from device: String) async -> Bool {
        await receiver.asked()
        return true
    }

    func `continue`(_ activity: ContinuedActivity) async {
        try? await continueOrRefuse(activity)
    }

    func continueOrRefuse(_ activity: ContinuedActivity) async throws(BatonClientError) {
        do {
            try await receiver.receive(title: activity.title, userInfo: activity.userInfo)
        } catch {
            throw BatonClientError(.failed, error.description)
        }
    }
}

/// The agent's media parts, started by `AgentProgram`: the publisher (idle until `media = on`) and
/// the receiver, registered as the handler for media across batond restarts.
public struct MediaAgentParts: Sendable {
    public let publisher: MediaPublisher
    public let receiver: MediaReceiver

    public static func start(daemon: BatonConnection, session: DBusConnection, environment: [String: String], logger: any AgentLog) async -> MediaAgentParts {
        let parts = MediaAgentParts(publisher: MediaPublisher(daemon: daemon, session: session, environment: environment, logger: logger),
                                    receiver: MediaReceiver(session: session, desktop: GioMediaDesktop(), logger: logger))
        do { try await parts.publisher.start() } catch { logger.log("not following media players: \(error)") }
        let type = MediaActivity.activityType
        do {
            _ = try await daemon.registerHandlerAcrossRestarts(
                parts.receiver.handler, for: [type],
                registered: { logger.log("registered as handler for \(type)") },
                registrationFailed: { error in logger.log("not receiving media until batond restarts: \(error)") })
        } catch {
            logger.log("not receiving media: \(error)")
        }
        return parts
    }
}
