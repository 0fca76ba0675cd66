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
#if canImport(Glibc)
import Glibc
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

    let mpris: MPRISClient
    private let desktop: any MediaDesktop
    /// Where a local media file that came as the document is saved ($XDG_DATA_HOME/baton/received);
    /// nil: local files are refused.
    private let saver: RecentDocumentReceiver?
    let logger: any AgentLog
    let clock: @Sendable () -> Double
    /// When this machine was last asked WillContinue for media (its own clock): bounds the
    /// handoff's duration whatever the other machine's clock says.
    private var askedAt: Double?
    /// How long a player may take to load the media and show it in its Metadata.
    let loadTimeout: Duration
    /// The seek of the media opened last, which runs after the Continue was answered; a newer
    /// handoff cancels it.
    private var finishing: Task<Void, Never>?

    /// `received`: where local media files are saved (`RecentDocumentReceiver.defaultDirectory`).
    public init(session: DBusConnection, desktop: any MediaDesktop, logger: any AgentLog, received: URL? = nil,
                loadTimeout: Duration = .seconds(30), clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        mpris = MPRISClient(connection: session)
        self.desktop = desktop
        saver = received.map { RecentDocumentReceiver(directory: $0, opener: DesktopURLOpener()) }
        self.logger = logger
        self.loadTimeout = loadTimeout
        self.clock = clock
    }

    /// The `ActivityHandler` to register for `MediaActivity.activityType`.
    public nonisolated var handler: some ActivityHandler { MediaHandler(receiver: self) }

    func asked() { askedAt = clock() }

    /// Opens the media and returns where; throws `Refusal` when nothing here plays it. A local
    /// file's media comes with its bytes as `document` (its descriptor is this call's to close,
    /// whatever happens): saved first, then opened as `file://` the saved copy.
    @discardableResult
    public func receive(title: String, userInfo: [String: PropertyValue], document: ContinuedDocument? = nil) async throws(Refusal) -> MediaOpening {
        var media: MediaActivity
        do { media = try MediaActivity(title: title, userInfo: userInfo) } catch {
            if let document { close(document.descriptor) }
            logger.log("refusing a media activity that cannot be read: \(error)")
            throw Refusal(description: "the media activity cannot be read (\(error))")
        }
        let asked = askedAt ?? clock()
        askedAt = nil
        // The player chosen for a local file by the desktop's default for its type (a media player only).
        var defaultPlayer: String?
        if media.file != nil {
            let saved = try save(media, document)
            media.url = saved.url
            defaultPlayer = saved.defaultPlayer
        } else if let document {
            // A stream brings no document: one that came anyway is closed unread.
            close(document.descriptor)
        }
        var running: [MediaOpening.Player] = []
        for name in (try? await mpris.playerNames()) ?? [] {
            if let player = try? await mpris.opening(of: name) { running.append(player) }
        }
        let scheme = MediaURLPolicy.scheme(of: media.url) ?? ""
        let candidates = MediaOpening.candidates(
            for: media, running: running, sourcePlayerInstalled: media.player.map { desktop.isMediaPlayer(desktopID: $0 + ".desktop") } ?? false,
            hasDefaultHandler: media.file == nil ? desktop.hasDefaultHandler(scheme: scheme) : defaultPlayer != nil)
        for candidate in candidates {
            do {
                switch candidate {
                case .running(let name): try await openInRunning(name, media, asked)
                case .launch(let id): try await launch(id, media, asked)
                case .desktopDefault where media.file != nil:
                    // A local file: the default player for its type, started on the saved copy and seeked as the
                    // source's player would be; never the desktop's default for the file (a .desktop file, a script).
                    guard let defaultPlayer else { throw Refusal(description: "no default media player for the file's type") }
                    try await launch(defaultPlayer, media, asked)
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
        let refusal = Refusal(description: media.file == nil ? "no media player here plays \(scheme) URLs"
                              : "no media player here plays the file (saved as \(URL(string: media.url)?.path ?? media.url))")
        logger.log("refusing the media \(media.title): \(refusal)")
        throw refusal
    }

    /// Saves the local file that came as the document ($XDG_DATA_HOME/baton/received, a safe name,
    /// never replacing a file, 0600) and returns its `file:` URL, and the desktop's default player
    /// for its type when that is a media player and the type is audio or video.
    private func save(_ media: MediaActivity, _ document: ContinuedDocument?) throws(Refusal) -> (url: String, defaultPlayer: String?) {
        let name = media.file?.name ?? media.title
        guard let document else {
            logger.log("refusing the media file \(name): it came without its bytes")
            throw Refusal(description: "the media file \(name) came without its document")
        }
        guard let saver else {
            close(document.descriptor)
            throw Refusal(description: "the media file \(name) cannot be saved: no data directory (HOME or XDG_DATA_HOME)")
        }
        let saved: URL
        do { saved = try saver.save(document, named: name) } catch {
            logger.log("refusing the media file \(name): saving it failed: \(error)")
            throw Refusal(description: "the media file \(name) cannot be saved (\(error))")
        }
        logger.log("saved the media file \(name) as \(saved.path)")
        let type = document.mediaType
        let player = MediaActivity.LocalFile.isMediaType(type) ? desktop.defaultMediaPlayer(mediaType: type) : nil
        return (saved.absoluteString, player)
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
            try await receiver.receive(title: activity.title, userInfo: activity.userInfo, document: activity.document)
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
                                    receiver: MediaReceiver(session: session, desktop: GioMediaDesktop(), logger: logger,
                                                            received: RecentDocumentReceiver.defaultDirectory(environment: environment)))
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
