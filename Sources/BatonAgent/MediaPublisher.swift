// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonPublishers
import BatonSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Publishes what the session's MPRIS players play as the media activity (docs/media.md), while
/// publishers.conf says `media = on`. Event-driven: NameOwnerChanged for the players coming and
/// going, PropertiesChanged and Seeked for what they do, the settings file's inotify watch; the
/// position is read (Position is not signalled) only when one of those says something changed,
/// and when the activity is about to leave (WillSave). Nothing runs between events.
public actor MediaPublisher: UserActivityDelegate {
    enum Event: Sendable {
        case owner(DBusNameOwnerChange)
        case properties(sender: String, changed: [String: DBusValue])
        case seeked(sender: String, microseconds: Int64)
        case settings
    }

    private let daemon: BatonConnection
    private let mpris: MPRISClient
    private let environment: [String: String]
    private let logger: any AgentLog
    private let clock: @Sendable () -> Double
    private var book = MediaPlayerBook()
    /// The MPRIS names and the player each belongs to (VLC: two names, one player).
    private var names = MediaPlayerNames()
    private var enabled = false
    private var published: MediaActivity?
    /// The player whose media `activity` is.
    private var publishedPlayer: String?
    private var activity: UserActivity?
    /// A player whose media was continued elsewhere: it publishes nothing until it starts playing
    /// again (its pause must not offer the media back to the machine that took it).
    private var handedOff: String?
    /// The local file (its `file:` URL) that could not be sent (too large, not a regular file):
    /// nothing is published for it until another track plays or publishers.conf changes.
    private var refusedFile: String?
    /// The activity whose local file is being copied by batond: it becomes current once the copy is
    /// committed, with the latest state (updates in the meantime only change its fields).
    private var attaching: UserActivity?
    private var feeds: [Task<Void, Never>] = []
    private var inbox: AsyncStream<Event>.Continuation?
    /// Events handled since `start` (diagnostics and tests: none while nothing happens).
    public private(set) var eventsHandled = 0
    /// Publications (creations and updates) sent to batond since `start`.
    public private(set) var publications = 0

    /// `session`: the session bus, where MPRIS players are.
    public init(daemon: BatonConnection, session: DBusConnection, environment: [String: String], logger: any AgentLog,
                clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.daemon = daemon
        mpris = MPRISClient(connection: session)
        self.environment = environment
        self.logger = logger
        self.clock = clock
    }

    /// Subscribes, reads the players there now, and returns; events are handled until `stop`.
    public func start() async throws {
        let connection = mpris.connection
        // Subscriptions first, then the snapshot: nothing between the two is lost.
        let ownerChanges = try await connection.nameOwnerChanges()
        let changes = try await connection.signals(matching: DBusMatchRule(
            interface: MPRISClient.properties, member: "PropertiesChanged", path: MPRISClient.path,
            stringArguments: [0: MPRISClient.playerInterface]))
        let seeks = try await connection.signals(matching: DBusMatchRule(interface: MPRISClient.playerInterface, member: "Seeked", path: MPRISClient.path))
        let (events, inbox) = AsyncStream.makeStream(of: Event.self)
        self.inbox = inbox
        if let file = PublisherSettings.fileURL(environment: environment) {
            do {
                let watch = try RecentDocumentsWatch(files: [file])
                feeds.append(Task {
                    for await _ in watch.changes { inbox.yield(.settings) }
                    withExtendedLifetime(watch) {}
                })
            } catch {
                logger.log("not following publishers.conf for the media publisher: \(error)")
            }
        }
        feeds.append(Task {
            for await change in ownerChanges where MediaPlayerName.isPlayer(busName: change.name) { inbox.yield(.owner(change)) }
        })
        feeds.append(Task {
            for await signal in changes {
                guard signal.arguments.count >= 2, let changed = signal.arguments[1].asDictionary else { continue }
                inbox.yield(.properties(sender: signal.sender, changed: changed))
            }
        })
        feeds.append(Task {
            for await signal in seeks {
                guard let micros = signal.arguments.first.flatMap(MPRISClient.microseconds) else { continue }
                inbox.yield(.seeked(sender: signal.sender, microseconds: micros))
            }
        })
        enabled = PublisherSettings.load(environment: environment).isEnabled(.media)
        await scan()
        feeds.append(Task { [weak self] in
            for await event in events { await self?.handle(event) }
        })
    }

    public func stop() async {
        for feed in feeds { feed.cancel() }
        feeds = []
        inbox?.finish()
        await activity?.invalidate()
        activity = nil
        published = nil
    }

    /// The published activity's daemon path (tests and diagnostics).
    public var activityPath: String? { activity?.objectPath }

    // MARK: Events

    private func handle(_ event: Event) async {
        eventsHandled += 1
        switch event {
        case .settings:
            // The file limit may have changed: a refused file is tried again.
            refusedFile = nil
            let now = PublisherSettings.load(environment: environment).isEnabled(.media)
            if now != enabled {
                enabled = now
                if enabled { await scan() }
            }
        case .owner(let change):
            if change.oldOwner != nil {
                let (removed, successor) = names.remove(change.name)
                if let removed { book.remove(removed) }
                // The player keeps another of its names: known by that one now.
                if let successor { await refresh(successor) }
            }
            if let new = change.newOwner { await add(change.name, owner: new) }
        case .properties(let sender, let changed):
            guard let name = names.player(sender: sender), var state = book.players[name] else { return }
            let before = state
            MPRISClient.apply(changed, to: &state)
            let now = clock()
            // Position is not signalled: carried forward at the old rate, then read when it matters.
            state.position = before.activity?.position(at: now) ?? before.position
            state.sampledAt = now
            if changed["PlaybackStatus"] != nil || changed["Rate"] != nil || changed["Metadata"] != nil,
               let position = try? await mpris.position(of: name) {
                state.position = position
                state.sampledAt = clock()
            }
            // Played again here after it was continued elsewhere: offered again.
            if handedOff == name, before.status != .playing, state.status == .playing { handedOff = nil }
            book.update(name, state)
        case .seeked(let sender, let micros):
            guard let name = names.player(sender: sender), var state = book.players[name] else { return }
            state.position = Double(micros) / 1_000_000
            state.sampledAt = clock()
            book.update(name, state)
        }
        await reconcile()
    }

    /// Reads every player there now (start, or the publisher turned on).
    private func scan() async {
        guard let found = try? await mpris.playerNames() else { return }
        for name in found where names.player(of: name) == nil {
            guard let owner = try? await mpris.connection.nameOwner(name) else { continue }
            await add(name, owner: owner, refreshing: false)
        }
        for name in Set(found.compactMap { names.player(of: $0) }).sorted() { await refresh(name) }
        await reconcile()
    }

    /// Notes a name of a player (its connection's process read from the bus): a new player, or
    /// another name of one already known (then the book keeps knowing it by the least name).
    private func add(_ name: String, owner: String, refreshing: Bool = true) async {
        let process = try? await mpris.connection.connectionUnixProcessID(owner)
        let (player, replaced) = names.add(name, owner: MediaPlayerNames.Owner(connection: owner, process: process))
        if let replaced { book.remove(replaced) }
        if refreshing, player == name || replaced != nil { await refresh(player) }
    }

    private func refresh(_ name: String) async {
        do {
            book.update(name, try await mpris.state(of: name, now: clock()))
        } catch {
            logger.log("cannot read the media player \(name): \(error)")
        }
    }

    /// Publishes, updates or withdraws as `MediaPublishing` says.
    private func reconcile() async {
        if let player = handedOff, book.chosen != player { handedOff = nil }
        let candidate = enabled && handedOff == nil ? book.activity : nil
        if candidate?.url != refusedFile { refusedFile = nil }
        let next = candidate?.file != nil && candidate?.url == refusedFile ? nil : candidate
        switch MediaPublishing.change(from: published, to: next) {
        case .none:
            return
        case .invalidate:
            await activity?.invalidate()
            activity = nil
            published = nil
            publishedPlayer = nil
        case .update:
            guard let next else { return }
            await publish(next, player: book.chosen)
        }
    }

    private func publish(_ media: MediaActivity, player: String?) async {
        let fresh = publishedPlayer != player || published?.url != media.url
        if fresh {
            // Another player or track: a new activity (the old one's WasContinued must not pause this one).
            await activity?.invalidate()
            activity = nil
        }
        let activity = self.activity ?? daemon.makeActivity(type: MediaActivity.activityType)
        Self.fill(activity, with: media)
        activity.version = MediaActivity.version
        activity.needsSave = true
        activity.delegate = self
        self.activity = activity
        published = media
        publishedPlayer = player
        publications += 1
        // Its file is being copied: it becomes current with these fields once the copy is committed.
        if attaching === activity { return }
        if fresh, media.file != nil {
            guard await attach(media, to: activity) else { return }
        }
        do {
            try await activity.becomeCurrent()
        } catch {
            logger.log("publishing the media \(media.title) failed: \(error)")
        }
    }

    /// A local file travels as the activity's document, copied once per track (batond copies it
    /// into its store and commits it before the activity is advertised). A file that cannot be sent
    /// publishes nothing (logged); false then, or when another track came during the copy.
    private func attach(_ media: MediaActivity, to activity: UserActivity) async -> Bool {
        let limit = PublisherSettings.load(environment: environment).mediaFileLimitBytes
        let name = media.file?.name ?? media.title
        let file: FileDescriptor
        do throws(MediaLocalFile.Refusal) { file = try MediaLocalFile.open(url: media.url, limit: limit) } catch {
            logger.log("not publishing the media file \(name): \(error)")
            refusedFile = media.url
            await withdraw(activity)
            return false
        }
        attaching = activity
        defer { if attaching === activity { attaching = nil } }
        do {
            try await activity.attachDocument(descriptor: file.rawValue, mediaType: MediaLocalFile.mediaType(forName: name),
                                              documentID: UUID().uuidString)
            file.close()
            logger.log("attached the media file \(name) to the media activity")
        } catch {
            file.close()
            guard self.activity === activity else { return false }
            logger.log("not publishing the media file \(name): batond did not take a copy (\(error))")
            refusedFile = media.url
            await withdraw(activity)
            return false
        }
        return self.activity === activity
    }

    private func withdraw(_ activity: UserActivity) async {
        await activity.invalidate()
        guard self.activity === activity else { return }
        self.activity = nil
        published = nil
        publishedPlayer = nil
    }

    private static func fill(_ activity: UserActivity, with media: MediaActivity) {
        activity.title = media.title
        activity.userInfo = media.userInfo
        // A browser plays a bare media URL and starts at #t= (the fallback where no agent handles media).
        activity.webpageURL = isWebAddress(media.url) ? URL(string: media.browserURL(at: media.position)) : nil
    }

    // MARK: UserActivityDelegate

    /// The activity is leaving: the position read now, so the other machine starts where this one is.
    public func userActivityWillSave(_ activity: UserActivity) async {
        guard activity === self.activity, let name = publishedPlayer, var state = book.players[name] else { return }
        if let position = try? await mpris.position(of: name) {
            state.position = position
            state.sampledAt = clock()
            book.update(name, state)
        }
        guard let media = book.players[name]?.activity, media.url == published?.url else { return }
        Self.fill(activity, with: media)
        published = media
    }

    /// Continued elsewhere: withdrawn here, and the player paused unless publishers.conf says
    /// `media-pause-source = off`. Done after answering batond (it waits for this call's reply).
    public func userActivityWasContinued(_ activity: UserActivity, on device: String) async {
        guard activity === self.activity, let name = publishedPlayer else { return }
        handedOff = name
        Task { await self.continued(player: name, on: device) }
    }

    private func continued(player name: String, on device: String) async {
        await reconcile()
        guard PublisherSettings.load(environment: environment).mediaPausesSource else {
            logger.log("the media was continued on \(device); not pausing \(name) (media-pause-source = off)")
            return
        }
        do {
            try await mpris.pause(name)
            logger.log("the media was continued on \(device); paused \(name)")
        } catch {
            logger.log("the media was continued on \(device), but pausing \(name) failed: \(error)")
        }
    }
}
