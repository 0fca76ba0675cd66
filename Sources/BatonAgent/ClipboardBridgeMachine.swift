// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonPublishers

/// Something the clipboard bridge observed (docs/clipboard.md, "The agent").
public enum ClipboardBridgeEvent: Sendable, Equatable {
    /// publishers.conf read (at start and whenever it changes): `clipboard = on` or not.
    case settings(enabled: Bool)
    /// batond owns its bus name (at start, or it restarted): it knows no agent of ours.
    case daemonAppeared
    case daemonVanished
    /// RegisterAgent failed (the command's outcome).
    case registrationFailed(String)
    /// What the session clipboard reported.
    case session(ClipboardEvent)
    /// The read asked for by `.read(revision:types:)` is done: the items read (media type and exact
    /// size, in order), and what was left out with the reason, for the log.
    case readDone(revision: UInt64, items: [ClipboardItem], leftOut: [String])
    /// Offer (the command's outcome) failed.
    case offerFailed(revision: UInt64, String)
    /// A member's copy of this account (ClipboardAgent1.Offered): its token and offered items.
    case offered(token: UInt64, device: String, kind: ClipboardKind, items: [ClipboardItem])
    /// Taking the session clipboard with that copy's types (the command's outcome) failed.
    case takeFailed(token: UInt64, String)
    /// ClipboardAgent1.Withdrawn.
    case withdrawn(token: UInt64)
    /// The read asked for by `.readFiles` found files and looked at each (as the user): offer them as
    /// `copy` (the agent's id for it).
    case filesRead(revision: UInt64, copy: UInt64, files: [ClipboardFile])
    /// The read asked for by `.readFiles` found files that are not shared, and why (in words).
    case filesRefused(revision: UInt64, String)
    /// A member's copy of files for this account (ClipboardAgent1.OfferedFiles).
    case offeredFiles(token: UInt64, device: String, files: [ClipboardFile])
    /// A member pasted a file of our files copy `copy` and it had changed (or gone) since the copy:
    /// batond took the offer back.
    case fileChanged(copy: UInt64, String)
    /// Pasting a member's copy failed (why, in words): for the status.
    case pasteFailed(String)
}

/// What the bridge's adapters do next, in order.
public enum ClipboardBridgeCommand: Sendable, Hashable {
    /// Clipboard1.RegisterAgent (its failure comes back as `.registrationFailed`).
    case register
    /// Clipboard1.UnregisterAgent: batond takes the copy back and forgets what it handed over.
    case unregister
    /// Read these types of the session clipboard's copy `revision` into one sealed memory file,
    /// at most `limit` bytes in all; comes back as `.readDone`.
    case read(revision: UInt64, types: [String], limit: Int)
    /// Read the list of files `type` (text/uri-list or x-special/gnome-copied-files) of copy
    /// `revision` and look at each local file it names: comes back as `.filesRead` or `.filesRefused`;
    /// when it names no local file, the copy is read as `.read(revision, otherwise, limit)` would.
    case readFiles(revision: UInt64, type: String, otherwise: [String], limit: Int)
    /// Clipboard1.OfferFiles with the files `.filesRead` gave.
    case offerFiles(revision: UInt64, copy: UInt64, files: [ClipboardFile])
    /// Clipboard1.Offer with what the read of `revision` produced, of this kind.
    case offer(revision: UInt64, kind: ClipboardKind)
    /// Clipboard1.Withdraw.
    case withdraw
    /// Take the session clipboard with these media types for the member's copy `token`.
    case take(token: UInt64, types: [String])
    /// Give the session clipboard up (the copy taken for a member is gone).
    case release
    case log(String)
}

/// The bridge's decisions between the session clipboard and batond, without I/O: what is offered
/// to the ring, what is taken from it, and what is never offered (a secret copy, anything while
/// off, a member's copy this machine took). The adapters (`ClipboardBridge`) carry the commands out.
public struct ClipboardBridgeMachine: Sendable, Hashable {
    /// The most the bridge reads of one copy, all types together.
    public static let defaultReadLimit = 64 << 20

    /// What this machine offers the ring.
    public enum RingOffer: Sendable, Hashable {
        case none
        /// Being read (revision of the session clipboard's change).
        case reading(revision: UInt64)
        /// Offered to batond.
        case offered(revision: UInt64, kind: ClipboardKind, items: [ClipboardItem])
        /// Files offered to batond, as the agent's copy `copy` (batond asks for each file by it).
        case offeredFiles(revision: UInt64, copy: UInt64, files: [ClipboardFile])
    }

    /// A member's copy held on the session clipboard.
    public struct Held: Sendable, Hashable {
        public var token: UInt64
        public var device: String
        public var kind: ClipboardKind
        public var items: [ClipboardItem]
        /// The files of a copy of files (its `items` are empty then).
        public var files: [ClipboardFile] = []
    }

    public private(set) var enabled = false
    public private(set) var daemonPresent = false
    /// RegisterAgent was sent and not refused, on the present batond.
    public private(set) var registered = false
    public private(set) var ringOffer = RingOffer.none
    public private(set) var held: Held?
    /// The last copy of ours that was not offered, or the last paste that failed, and why (status).
    public private(set) var note: String?
    let readLimit: Int

    public init(readLimit: Int = defaultReadLimit) { self.readLimit = readLimit }

    /// Whether a paste of the member's copy `token` is still to be served.
    public func serves(token: UInt64) -> Bool { held?.token == token }

    /// Whether the copy `token` of a member is files, served as local copies at a paste.
    public func servesFiles(token: UInt64) -> Bool { held?.token == token && held?.kind == .files }

    /// The types of a copy that are offered as they are: text, HTML and images, at most the wire's item
    /// count. A list of files (`text/uri-list`, `x-special/gnome-copied-files`) is read first
    /// (`filesType`): its local files are offered as files; a `text/uri-list` that names none (links)
    /// is offered as it is, beside the copy's text.
    public static func offerable(_ types: [String]) -> [String] {
        Array(types.filter { $0 == ClipboardTypes.text || $0.lowercased() == "text/html" || $0.lowercased().hasPrefix("image/") }
            .prefix(ClipboardOffer.maxItems))
    }

    /// The list of files of a copy to read first: `text/uri-list`, else `x-special/gnome-copied-files`.
    public static func filesType(_ types: [String]) -> String? {
        ClipboardFileURIs.pasteTypes.first { types.contains($0) }
    }

    /// The advert's kind for these items: text when plain text is among them, else an image when an
    /// image is, else text (HTML alone).
    public static func kind(of items: [ClipboardItem]) -> ClipboardKind {
        if items.contains(where: { $0.mediaType == ClipboardTypes.text }) { return .text }
        return items.contains(where: { $0.mediaType.lowercased().hasPrefix("image/") }) ? .image : .text
    }

    public mutating func handle(_ event: ClipboardBridgeEvent) -> [ClipboardBridgeCommand] {
        switch event {
        case .settings(let on):
            guard on != enabled else { return [] }
            enabled = on
            guard on else {
                var commands: [ClipboardBridgeCommand] = registered ? [.unregister] : []
                commands += dropHeld() + [.log("clipboard turned off: nothing is offered or taken")]
                registered = false
                ringOffer = .none
                return commands
            }
            return register(reason: "clipboard turned on")
        case .daemonAppeared:
            daemonPresent = true
            // A new batond knows neither our offer nor the token of what we hold.
            ringOffer = .none
            let commands = dropHeld()
            registered = false
            return commands + (enabled ? register(reason: "batond is there") : [])
        case .daemonVanished:
            daemonPresent = false
            registered = false
            ringOffer = .none
            return dropHeld()
        case .registrationFailed(let why):
            registered = false
            ringOffer = .none
            return dropHeld() + [.log("the clipboard is not shared until batond restarts: \(why)")]
        case .session(let change):
            return session(change)
        case .readDone(let revision, let items, let leftOut):
            guard ringOffer == .reading(revision: revision), enabled, registered else { return [] }
            let notes = leftOut.map { ClipboardBridgeCommand.log("copy \(revision): left out \($0)") }
            guard !items.isEmpty else {
                ringOffer = .none
                return notes + [.log("copy \(revision): nothing could be read, nothing offered")]
            }
            let kind = Self.kind(of: items)
            ringOffer = .offered(revision: revision, kind: kind, items: items)
            note = nil
            return notes + [.offer(revision: revision, kind: kind)]
        case .filesRead(let revision, let copy, let files):
            guard ringOffer == .reading(revision: revision), enabled, registered, !files.isEmpty else { return [] }
            ringOffer = .offeredFiles(revision: revision, copy: copy, files: files)
            note = nil
            return [.offerFiles(revision: revision, copy: copy, files: files)]
        case .filesRefused(let revision, let why):
            guard ringOffer == .reading(revision: revision), enabled, registered else { return [] }
            ringOffer = .none
            note = "the last copy was not offered: \(why)"
            return [.log("copy \(revision) of files not offered: \(why)")]
        case .offerFailed(let revision, let why):
            switch ringOffer {
            case .offered(revision, _, _), .offeredFiles(revision, _, _): break
            default: return []
            }
            ringOffer = .none
            note = "the last copy was not offered: \(why)"
            return [.log("copy \(revision) not offered: \(why)")]
        case .fileChanged(let copy, let why):
            guard case .offeredFiles(let revision, copy, _) = ringOffer else { return [] }
            // batond took the offer back already (it asked for the file and got the refusal).
            ringOffer = .none
            note = "the last copy is no longer offered: \(why)"
            return [.log("copy \(revision) of files taken back: \(why)")]
        case .pasteFailed(let why):
            note = why
            return []
        case .offeredFiles(let token, let device, let files):
            guard enabled, registered, !files.isEmpty else { return [] }
            var commands = withdrawOwn()
            held = Held(token: token, device: device, kind: .files, items: [], files: files)
            commands.append(.take(token: token, types: ClipboardFileURIs.pasteTypes))
            return commands
        case .offered(let token, let device, let kind, let items):
            guard enabled, registered else { return [] }
            // Only the types this agent offers itself: a file list names the files of the machine
            // that copied (protocol §6.7: never handed to an app as it is), and other names (the
            // selection protocol's, a secrecy marker) are no content a member should put here.
            let types = Self.offerable(items.map(\.mediaType))
            guard !types.isEmpty else {
                return [.log("a copy from \(device) offers no type this machine takes (\(items.prefix(8).map(\.mediaType).joined(separator: ", "))): not taken")]
            }
            // The member's copy replaces ours on this session's clipboard: ours is no longer offered.
            var commands = withdrawOwn()
            held = Held(token: token, device: device, kind: kind, items: items.filter { types.contains($0.mediaType) })
            commands.append(.take(token: token, types: types))
            return commands
        case .takeFailed(let token, let why):
            guard held?.token == token else { return [] }
            held = nil
            return [.log("the copy from another machine could not be put on the clipboard: \(why)")]
        case .withdrawn(let token):
            guard held?.token == token else { return [] }
            held = nil
            return [.release]
        }
    }

    private mutating func session(_ event: ClipboardEvent) -> [ClipboardBridgeCommand] {
        switch event {
        case .offerLost:
            // Another client copied over the member's copy; its change follows.
            held = nil
            return []
        case .cleared:
            held = nil
            return withdrawOwn()
        case .changed(let change):
            held = nil
            guard enabled, registered else { return [] }
            var commands = withdrawOwn()
            guard !change.isSecret else { return commands + [.log("copy \(change.revision) is marked secret: not offered")] }
            let types = Self.offerable(change.types)
            if let filesType = Self.filesType(change.types) {
                // A uri-list that names no local file (links) is offered as it is, beside the text.
                let otherwise = Array((types + (change.types.contains(ClipboardFileURIs.uriListType) ? [ClipboardFileURIs.uriListType] : []))
                    .prefix(ClipboardOffer.maxItems))
                ringOffer = .reading(revision: change.revision)
                commands.append(.readFiles(revision: change.revision, type: filesType, otherwise: otherwise, limit: readLimit))
                return commands
            }
            guard !types.isEmpty else {
                return commands + [.log("copy \(change.revision) holds nothing offered (\(change.types.prefix(8).joined(separator: ", ")))")]
            }
            ringOffer = .reading(revision: change.revision)
            commands.append(.read(revision: change.revision, types: types, limit: readLimit))
            return commands
        }
    }

    /// Our offer (or the read for it) goes: a newer copy, or none, is on the clipboard.
    private mutating func withdrawOwn() -> [ClipboardBridgeCommand] {
        defer { ringOffer = .none }
        switch ringOffer {
        case .offered, .offeredFiles: return [.withdraw]
        case .none, .reading: return []
        }
    }

    private mutating func dropHeld() -> [ClipboardBridgeCommand] {
        guard held != nil else { return [] }
        held = nil
        return [.release]
    }

    private mutating func register(reason: String) -> [ClipboardBridgeCommand] {
        guard daemonPresent else { return [.log("\(reason); waiting for batond")] }
        registered = true
        return [.register]
    }
}
