// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonDBus

/// Where the agent writes what it did (stderr in the executable, a collector in tests).
public protocol AgentLog: Sendable {
    func log(_ line: String)
}

/// Opens a URL with the user's default browser (GIO in the executable, a recorder in tests).
public protocol URLOpener: Sendable {
    func open(_ url: String) async throws
}

/// The bus adapter around `AgentStateMachine`: feeds it the daemon's suggestions and the
/// notification server's signals, one event at a time, and performs the commands it returns.
public actor SuggestionAgent {
    private let daemon: BatonConnection
    private let notifications: NotificationServerClient
    private let urlOpener: (any URLOpener)?
    private let logger: any AgentLog
    /// Whether to serve Agent1 to batond (Manager1.RegisterAgent), again after each batond restart.
    private let launchesApps: Bool
    private var machine = AgentStateMachine()
    private let inbox: AsyncStream<AgentEvent>
    private let inboxContinuation: AsyncStream<AgentEvent>.Continuation
    private var feeds: [Task<Void, Never>] = []

    /// `daemon`: batond's bus (system by default); `session`: where the notification server is.
    /// `launchesApps`: register as this user's session agent, so batond has apps started here.
    public init(daemon: BatonConnection, session: DBusConnection, urlOpener: (any URLOpener)? = nil, launchesApps: Bool = false,
                logger: any AgentLog) {
        self.daemon = daemon
        self.launchesApps = launchesApps
        notifications = NotificationServerClient(connection: session)
        self.urlOpener = urlOpener
        self.logger = logger
        (inbox, inboxContinuation) = AsyncStream.makeStream()
    }

    /// Subscribes, reads the present state and returns; events are handled until `stop()`.
    public func start() async throws {
        // Subscriptions first, then the snapshot: nothing between the two is lost.
        let suggestionChanges = try await daemon.suggestionChanges()
        let serverEvents = try await notifications.events()
        let serverOwners = try await notifications.connection.nameOwnerChanges(for: NotificationServerClient.busName)
        let daemonOwners = try await daemon.daemonOwnerChanges()
        let inbox = inboxContinuation
        feeds.append(Task { [weak self] in
            for await change in suggestionChanges {
                if case .retitled(let path, let title) = change {
                    // The title arrives after the object: the notification is replaced in place.
                    if let event = await self?.retitled(path: path, title: title) { inbox.yield(event) }
                } else if let event = Self.event(for: change) {
                    inbox.yield(event)
                }
            }
        })
        feeds.append(Task { for await event in serverEvents { inbox.yield(event) } })
        feeds.append(Task { [weak self] in
            for await change in serverOwners {
                if change.newOwner == nil { inbox.yield(.serverVanished) } else { await self?.readCapabilities() }
            }
        })
        feeds.append(Task { [weak self] in
            // A restarted daemon numbers its suggestions afresh: resynchronise from its ObjectManager.
            for await change in daemonOwners {
                if change.newOwner == nil { await self?.forgetSuggestions() } else {
                    await self?.registerAsAgent()
                    await self?.resynchronise()
                }
            }
        })
        await readCapabilities()
        await registerAsAgent()
        await resynchronise()
        let events = self.inbox
        feeds.append(Task { [weak self] in
            for await event in events { await self?.apply(event) }
        })
    }

    public func stop() {
        for feed in feeds { feed.cancel() }
        feeds = []
        inboxContinuation.finish()
    }

    /// The notification shown for a ring member, if any (diagnostics and tests).
    public func notificationID(forDevice device: String) -> UInt32? { machine.notificationID(forDevice: device) }

    private var tracked: Set<String> = []

    /// The tracked suggestion at `path` with its new title, as an update; nil when not tracked.
    private func retitled(path: String, title: String) -> AgentEvent? {
        guard var suggestion = machine.suggestions.values.first(where: { $0.path == path }) else { return nil }
        suggestion.title = title.isEmpty ? nil : title
        return .suggestionAdded(suggestion)
    }

    private func resynchronise() async {
        do {
            let objects = try await daemon.suggestionObjects()
            for path in tracked.subtracting(objects.keys) { inboxContinuation.yield(.suggestionRemoved(path: path)) }
            for (path, properties) in objects.sorted(by: { $0.key < $1.key }) {
                if let event = Self.event(for: .added(path: path, properties: properties)) { inboxContinuation.yield(event) }
            }
        } catch {
            logger.log("cannot read suggestions from \(daemon.busName): \(error)")
        }
    }

    private func registerAsAgent() async {
        guard launchesApps else { return }
        do {
            try await AgentService.register(with: daemon, logger: logger)
            logger.log("registered with \(daemon.busName) as this user's session agent")
        } catch {
            logger.log("cannot register with \(daemon.busName) as the session agent: \(error)")
        }
    }

    private func forgetSuggestions() {
        for path in tracked { inboxContinuation.yield(.suggestionRemoved(path: path)) }
    }

    private func readCapabilities() async {
        do {
            inboxContinuation.yield(.serverAppeared(NotificationCapabilities(try await notifications.capabilities())))
        } catch {
            logger.log("no notification server yet: \(error)")
        }
    }

    private static func event(for change: SuggestionChange) -> AgentEvent? {
        switch change {
        case .added(let path, let properties):
            // An object without the fields a notification needs reads as gone, never as a crash.
            guard let snapshot = SuggestionSnapshot(path: path, properties: properties) else { return .suggestionRemoved(path: path) }
            return .suggestionAdded(snapshot)
        case .removed(let path):
            return .suggestionRemoved(path: path)
        case .retitled:
            return nil  // needs the tracked suggestion: `retitled(path:title:)`
        }
    }

    private func apply(_ event: AgentEvent) async {
        switch event {
        case .suggestionAdded(let suggestion): tracked.insert(suggestion.path)
        case .suggestionRemoved(let path): tracked.remove(path)
        default: break
        }
        for command in machine.handle(event) { await perform(command) }
    }

    private func perform(_ command: AgentCommand) async {
        let inbox = inboxContinuation
        switch command {
        case .notify(let ticket, let request):
            do {
                let id = try await notifications.notify(request)
                inbox.yield(.notificationPosted(ticket: ticket, id: id))
            } catch {
                logger.log("Notify failed: \(error)")
                inbox.yield(.notificationFailed(ticket: ticket))
            }
        case .close(let id):
            do { try await notifications.close(id: id) } catch { logger.log("CloseNotification \(id) failed: \(error)") }
        case .continueSuggestion(let path):
            // Continuing fetches over the network: the event loop must not wait for it.
            // A failure is told in a notification of its own (the suggestion's is closed by then).
            let daemon = self.daemon, logger = self.logger, notifications = self.notifications
            Task {
                let reason: String?
                do throws(BatonClientError) {
                    let outcome = try await daemon.continueSuggestionOutcome(at: path)
                    logger.log("continue \(path): \(outcome)")
                    reason = ContinueFailureNotice.reason(outcome: outcome)
                } catch {
                    logger.log("continue \(path) failed: \(error)")
                    reason = ContinueFailureNotice.reason(error)
                }
                guard let reason else { return }
                do { _ = try await notifications.notify(ContinueFailureNotice.request(reason: reason)) } catch {
                    logger.log("Notify (continue failed) failed: \(error)")
                }
            }
        case .dismiss(let path):
            let daemon = self.daemon, logger = self.logger
            Task {
                do { try await daemon.dismissSuggestion(at: path) } catch { logger.log("dismiss \(path) failed: \(error)") }
            }
        case .openInBrowser(let path):
            let daemon = self.daemon, logger = self.logger, opener = self.urlOpener
            Task { await BrowserFallback.open(path: path, daemon: daemon, opener: opener, logger: logger) }
        }
    }
}
