// SPDX-License-Identifier: GPL-2.0-or-later
/// Something the agent observed: from the daemon's ObjectManager or from the notification server.
public enum AgentEvent: Sendable, Hashable {
    /// The notification server is there (at start or after it restarted): ids it gave out before are void.
    case serverAppeared(NotificationCapabilities)
    case serverVanished
    /// InterfacesAdded or a GetManagedObjects entry; a member's newer revision arrives this way too.
    case suggestionAdded(SuggestionSnapshot)
    case suggestionRemoved(path: String)
    /// The reply to the Notify call made for `ticket`.
    case notificationPosted(ticket: UInt64, id: UInt32)
    case notificationFailed(ticket: UInt64)
    case actionInvoked(id: UInt32, key: String)
    /// NotificationClosed; reason 1 expired, 2 dismissed by the user, 3 CloseNotification, 4 other.
    case notificationClosed(id: UInt32, reason: UInt32)
}

/// What the agent should do next; the bus adapter performs these in order.
public enum AgentCommand: Sendable, Hashable {
    /// Notify; the reply comes back as `.notificationPosted(ticket:id:)`.
    case notify(ticket: UInt64, NotificationRequest)
    case close(id: UInt32)
    case continueSuggestion(path: String)
    case openInBrowser(path: String)
    case dismiss(path: String)
}

/// The agent's logic, without I/O: one notification per ring member, replaced in place on a new
/// revision, closed when the suggestion goes, and only ids this agent posted are acted on.
public struct AgentStateMachine: Sendable {
    enum Slot: Sendable, Hashable {
        /// Nothing shown (no server yet, or Notify failed).
        case unposted
        /// Notify sent, id not known yet; `stale` when the suggestion changed meanwhile.
        case posting(ticket: UInt64, stale: Bool)
        case shown(id: UInt32)
        /// The user acted on it or closed it: this revision is not shown again.
        case handled
    }

    struct Entry: Sendable, Hashable {
        var suggestion: SuggestionSnapshot
        var slot: Slot
    }

    private(set) var capabilities: NotificationCapabilities?
    private var entries: [String: Entry] = [:]  // by device
    private var nextTicket: UInt64 = 1

    public init() {}

    /// The notification id shown for `device`, if any (for tests and diagnostics).
    public func notificationID(forDevice device: String) -> UInt32? {
        if case .shown(let id) = entries[device]?.slot { return id }
        return nil
    }

    /// Suggestions the agent currently tracks, by device.
    public var suggestions: [String: SuggestionSnapshot] { entries.mapValues(\.suggestion) }

    public mutating func handle(_ event: AgentEvent) -> [AgentCommand] {
        switch event {
        case .serverAppeared(let capabilities):
            self.capabilities = capabilities
            var commands: [AgentCommand] = []
            for device in entries.keys.sorted() where entries[device]?.slot != .handled {
                entries[device]?.slot = .unposted
                commands += post(device: device, replacing: 0)
            }
            return commands
        case .serverVanished:
            capabilities = nil
            for device in entries.keys where entries[device]?.slot != .handled { entries[device]?.slot = .unposted }
            return []
        case .suggestionAdded(let suggestion):
            return added(suggestion)
        case .suggestionRemoved(let path):
            guard let (device, entry) = entries.first(where: { $0.value.suggestion.path == path }) else { return [] }
            entries[device] = nil
            if case .shown(let id) = entry.slot { return [.close(id: id)] }
            return []  // a Notify still in flight is closed when its id arrives (no entry holds its ticket)
        case .notificationPosted(let ticket, let id):
            guard let device = device(holding: ticket), case .posting(_, let stale)? = entries[device]?.slot else {
                return [.close(id: id)]  // the suggestion went while Notify was in flight
            }
            entries[device]?.slot = .shown(id: id)
            return stale ? post(device: device, replacing: id) : []
        case .notificationFailed(let ticket):
            if let device = device(holding: ticket) { entries[device]?.slot = .unposted }
            return []
        case .actionInvoked(let id, let key):
            guard let device = device(showing: id), let suggestion = entries[device]?.suggestion else { return [] }
            let take: AgentCommand
            switch key {
            case AgentActionKey.clicked:
                take = suggestion.onlyBrowserCanServe ? .openInBrowser(path: suggestion.path) : .continueSuggestion(path: suggestion.path)
            case AgentActionKey.continueHere where !suggestion.onlyBrowserCanServe:
                take = .continueSuggestion(path: suggestion.path)
            case AgentActionKey.openInBrowser where suggestion.hasWebpageURL:
                take = .openInBrowser(path: suggestion.path)
            default:
                return []  // a key this agent never offered for this notification
            }
            entries[device]?.slot = .handled
            return [take, .close(id: id)]
        case .notificationClosed(let id, let reason):
            guard let device = device(showing: id), let suggestion = entries[device]?.suggestion else { return [] }
            entries[device]?.slot = .handled
            // Only the user's own "no" withdraws the offer; expiry or another close keeps it in `baton suggestions`.
            return reason == 2 ? [.dismiss(path: suggestion.path)] : []
        }
    }

    private mutating func added(_ suggestion: SuggestionSnapshot) -> [AgentCommand] {
        let device = suggestion.device
        guard let entry = entries[device] else {
            entries[device] = Entry(suggestion: suggestion, slot: .unposted)
            return post(device: device, replacing: 0)
        }
        // GetManagedObjects and InterfacesAdded can both report the same object at start.
        if entry.suggestion == suggestion { return [] }
        entries[device]?.suggestion = suggestion
        switch entry.slot {
        case .shown(let id):
            return post(device: device, replacing: id)
        case .posting(let ticket, _):
            entries[device]?.slot = .posting(ticket: ticket, stale: true)
            return []
        case .unposted:
            return post(device: device, replacing: 0)
        case .handled:
            // Only a newer revision (a new offer) is shown again after the user answered.
            guard suggestion.path != entry.suggestion.path || suggestion.revision != entry.suggestion.revision else { return [] }
            entries[device]?.slot = .unposted
            return post(device: device, replacing: 0)
        }
    }

    private mutating func post(device: String, replacing id: UInt32) -> [AgentCommand] {
        guard let capabilities, let suggestion = entries[device]?.suggestion else {
            if id != 0 { entries[device]?.slot = .shown(id: id) }
            return []
        }
        let ticket = nextTicket
        nextTicket += 1
        entries[device]?.slot = .posting(ticket: ticket, stale: false)
        return [.notify(ticket: ticket, NotificationContent.request(for: suggestion, capabilities: capabilities, replacing: id))]
    }

    private func device(holding ticket: UInt64) -> String? {
        entries.first { if case .posting(ticket, _) = $0.value.slot { true } else { false } }?.key
    }

    private func device(showing id: UInt32) -> String? {
        entries.first { $0.value.slot == .shown(id: id) }?.key
    }
}
