// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import BatonSystem
import Synchronization

/// The universal clipboard (docs/clipboard.md, protocol §6.7 and §9 "Clipboard"), both sides, the one
/// owner of what this machine offers and of what it took from members:
/// - source: the copy of a local account (its bytes in a sealed memory file its agent handed over),
///   the kind the advert carries, the expiry, the answers to FetchClipboardOffer and FetchClipboardData;
/// - receiver: which member's adverts call for asking its offer, which offers were handed to which
///   account's agent, and the paste that pulls one item's bytes.
/// Agents register per account; an account without one has the clipboard off (nothing offered from
/// it, nothing handed to it).
public actor ClipboardService {
    /// The most one paste pulls and one copy offers per item (the wire's limit, §6.7).
    public static let maxItemBytes = ClipboardItem.maxSize

    public enum Refusal: Error, Sendable, Equatable {
        /// The calling account has no registered agent: its clipboard is off here.
        case notEnabled
        /// The offered contents do not match the items (what, for the caller).
        case invalidContents(String)
        /// No such copy here (never handed to this account, withdrawn, expired).
        case unknownOffer
        /// The copy offers no such type.
        case typeNotOffered(String)
        /// The item is larger than this machine takes.
        case tooLarge(size: UInt64, limit: UInt64)
        /// The member's copy changed since it was offered: nothing older is handed over.
        case changed
        /// A file of the member's copy changed (or went) there since it was copied: nothing is pasted.
        case fileChanged(name: String, memberName: String)
        /// The copy has no file with this index.
        case noSuchFile(Int)
        /// This batond keeps no place for pulled files (files cannot be pasted here).
        case noFileInbox
        /// The member could not be reached, or the transfer failed.
        case unreachable(memberName: String)
        case failed(String)
    }

    /// A copy taken from a member and handed to one local account's agent.
    struct Taken: Sendable {
        var member: DeviceID
        var memberName: String
        var offer: ClipboardOffer
        /// The list of a files offer (fetched with the offer).
        var files: ClipboardFileList?
        var agent: ClipboardAgentEndpoint
        /// When (on the monotonic clock) the agent is told it is gone.
        var expiresAt: Int64
    }

    let advert: any ClipboardAdvert
    let fetcher: any ClipboardFetcher
    let agentCalls: any ClipboardAgentCalls
    /// Expiries and the restriction window are durations: measured on a clock the date never steps.
    let clock: any MonotonicClock
    let randomToken: @Sendable () -> UInt64
    let log: @Sendable (String) -> Void

    var agents: [UInt32: ClipboardAgentEndpoint] = [:]
    var shelf = ClipboardShelf()
    /// The bytes of the copy on the shelf: item i starts at the sum of the sizes before it.
    var shelfContents: ClipboardContents?
    var watch = ClipboardWatch()
    var taken: [UInt64: Taken] = [:]
    /// Members whose offer is being asked for (one question per member at a time; an advert heard
    /// meanwhile asks again after).
    private var asking: Set<DeviceID> = []
    private var askAgain: [DeviceID: String] = [:]
    /// Restrictions apps asked for (Clipboard1.Restrict) that wait for their account's next copy.
    private var restrictions: [UInt32: (localOnly: Bool, expiresIn: UInt16, until: Int64)] = [:]
    /// How far apart a Restrict and the copy it marks may be, in seconds.
    public static let restrictWindow: Int64 = 2
    /// The files of the copy on the shelf when it is a copy of files: the agent's copy id, the list, and
    /// each file's digest once a member asked for it (with the identity it was computed at).
    var shelfFiles: ShelfFiles?
    /// Where pulled files of members' copies are kept until handed over (`<directory>/<uid>`); nil:
    /// files cannot be pasted here.
    var fileInboxDirectory: String?
    var expiryTask: Task<Void, Never>?
    var expiryDeadline: Int64?
    /// The last call of each agent (by bus name), and how many of its calls are unanswered.
    var agentCallTails: [String: (task: Task<Void, Never>, pending: Int)] = [:]

    public init(advert: any ClipboardAdvert, fetcher: any ClipboardFetcher, agentCalls: any ClipboardAgentCalls, clock: any MonotonicClock,
                randomToken: @escaping @Sendable () -> UInt64, log: @escaping @Sendable (String) -> Void) {
        self.advert = advert
        self.fetcher = fetcher
        self.agentCalls = agentCalls
        self.clock = clock
        self.randomToken = randomToken
        self.log = log
    }

    // MARK: Agents

    /// `agent` takes the clipboard for its account (the newest registration of an account wins).
    public func register(_ agent: ClipboardAgentEndpoint) {
        agents[agent.uid] = agent
    }

    /// The account's agent left or turned the clipboard off: its copy is no longer offered and what
    /// was handed to it is forgotten.
    public func unregister(uid: UInt32) async {
        guard agents.removeValue(forKey: uid) != nil else { return }
        await withdrawCopy(of: uid)
        taken = taken.filter { $0.value.agent.uid != uid }
        forgetPulledFiles(of: uid)
        rearmExpiry()
    }

    /// An agent's bus name went away.
    public func agentLeft(busName: String) async {
        for agent in agents.values where agent.busName == busName { await unregister(uid: agent.uid) }
    }

    public func agent(of uid: UInt32) -> ClipboardAgentEndpoint? { agents[uid] }

    // MARK: Source

    /// `uid` copied: `contents` holds the items' bytes one after the other, sealed. Replaces whatever
    /// this machine offered. `expiresIn` 0 is the default (120 s). A restriction the account's app asked
    /// for within the window applies (local only: nothing is offered, and the account's earlier copy
    /// is taken back).
    public func offer(uid: UInt32, kind: ClipboardKind, items: [ClipboardItem], expiresIn: UInt16,
                      contents: ClipboardContents) async throws(Refusal) {
        // A copy of files is offered through `offerFiles`, whose list batond writes itself.
        guard kind != .files else { throw .invalidContents("a copy of files is offered with OfferFiles") }
        try await place(uid: uid, kind: kind, items: items, expiresIn: expiresIn, contents: contents, files: nil)
    }

    /// Puts a copy on the shelf (below the checks of `offer` and `offerFiles`).
    func place(uid: UInt32, kind: ClipboardKind, items: [ClipboardItem], expiresIn: UInt16, contents: ClipboardContents,
               files: ShelfFiles?) async throws(Refusal) {
        guard let agent = agents[uid] else { throw .notEnabled }
        var expiresIn = expiresIn == 0 ? ClipboardShelf.defaultExpirySeconds : expiresIn
        // Checked before a restriction is used up: a refused offer must not spend the one meant for
        // the copy that follows.
        guard let size = SealedMemoryFile.immutableSize(of: contents.file) else {
            throw .invalidContents("the contents are not a sealed memory file (memfd_create with write, shrink and grow sealed)")
        }
        let total = items.reduce(UInt64(0)) { $0 + $1.size }
        guard size == total else { throw .invalidContents("the contents hold \(size) bytes, the items \(total)") }
        if let restriction = restrictions.removeValue(forKey: uid), clock.monotonicSeconds() <= restriction.until {
            if restriction.localOnly {
                await withdraw(uid: uid)
                return
            }
            if restriction.expiresIn > 0 { expiresIn = min(expiresIn, restriction.expiresIn) }
        }
        do {
            try shelf.offer(uid: uid, account: agent.account, kind: kind, items: items, expiresIn: expiresIn,
                            offerID: randomToken(), nowSeconds: clock.monotonicSeconds())
        } catch {
            throw .invalidContents("\(error)")
        }
        shelfContents = contents
        shelfFiles = files
        rearmExpiry()
        await advert.setClipboard(shelf.kind)
    }

    /// `uid` took its copy back (a secret or local-only copy, the app asked): nothing is offered.
    public func withdraw(uid: UInt32) async {
        await withdrawCopy(of: uid)
        rearmExpiry()
    }

    private func withdrawCopy(of uid: UInt32) async {
        guard shelf.withdraw(uid: uid) else { return }
        shelfContents = nil
        shelfFiles = nil
        await advert.setClipboard(nil)
    }

    /// An app of `uid` marks the copy its account makes within the window, and the one it made within
    /// the window before. batond cannot tell which of the two the app means (its agent may offer the
    /// app's copy before or after this call, and another app of the account may have copied just
    /// before), so both are marked: marking only the earlier one let the app's own copy, offered a
    /// moment later, go to the ring.
    public func restrict(uid: UInt32, localOnly: Bool, expiresIn: UInt16) async {
        let now = clock.monotonicSeconds()
        restrictions[uid] = (localOnly, expiresIn, now + Self.restrictWindow)
        guard let copy = shelf.copy, copy.uid == uid, now - copy.offeredAt <= Self.restrictWindow else { return }
        if localOnly {
            await withdraw(uid: uid)
        } else if expiresIn > 0, shelf.shorten(uid: uid, to: expiresIn, nowSeconds: now) {
            rearmExpiry()
        }
    }

    /// How many FetchClipboardOffer and FetchClipboardData requests of members this machine answered
    /// (status, tests: no byte leaves before a paste asks).
    public private(set) var offerRequestsAnswered = 0
    public private(set) var dataRequestsAnswered = 0
    /// FetchClipboardFile requests of members this machine answered (a file's bytes leave only then).
    public internal(set) var fileRequestsAnswered = 0

    /// The answer to FetchClipboardOffer of `member` (its name, for the account's status).
    public func answerOffer(member: String) -> Result<ClipboardOffer, ErrorFrame> {
        offerRequestsAnswered += 1
        let answer = shelf.answerOffer(nowSeconds: clock.monotonicSeconds())
        if case .success = answer { shelf.recordOfferAnswered(to: member) }
        return answer
    }

    /// What FetchClipboardData streams: the contents, where the item starts in them, the item; or the
    /// Error frame to answer.
    /// `member` (its name) asks; its paste is recorded for the account's status when the bytes go
    /// (not the list of a copy of files: each file's pull is recorded instead).
    public func answerData(_ request: ClipboardDataRequest, member: String)
        -> Result<(contents: ClipboardContents, start: UInt64, item: ClipboardItem), ErrorFrame> {
        dataRequestsAnswered += 1
        switch shelf.answerData(request, nowSeconds: clock.monotonicSeconds()) {
        case .failure(let error): return .failure(error)
        case .success(let (copy, item)):
            guard let contents = shelfContents else { return .failure(ErrorFrame(code: .internalError, message: "contents gone")) }
            // A copy of files: its one item is the list, fetched with the offer (no file's byte); the
            // files' pulls are the pastes (answerFile).
            if copy.kind != .files { shelf.recordPaste(of: item, to: member) }
            var start: UInt64 = 0
            for other in copy.items {
                if other.mediaType == item.mediaType { break }
                start += other.size
            }
            return .success((contents, start, item))
        }
    }

    /// What this machine offers now (status, tests).
    public var offeredKind: ClipboardKind? { shelf.kind }

    /// What `uid`'s account takes part in (Clipboard1.GetStatus): whether its agent is registered,
    /// its copy on offer here with who asked for it and where it was pasted, the copy handed to its
    /// agent, and how often members were answered its copies since batond started.
    public func status(uid: UInt32) -> ClipboardAccountStatus {
        let now = clock.monotonicSeconds()
        var status = ClipboardAccountStatus(registered: agents[uid] != nil)
        if let copy = shelf.copy, copy.uid == uid, now < copy.expiresAt {
            status.offer = ClipboardAccountStatus.Offer(kind: copy.kind, items: copy.items, expiresIn: UInt32(clamping: copy.expiresAt - now),
                                                        askedBy: copy.askedBy, pastedOn: copy.pastes, morePastes: copy.morePastes)
        }
        if let entry = taken.values.first(where: { $0.agent.uid == uid && now < $0.expiresAt }) {
            status.taken = ClipboardAccountStatus.Taken(device: entry.memberName, kind: entry.offer.kind, items: entry.offer.items,
                                                        expiresIn: UInt32(clamping: entry.expiresAt - now))
        }
        let answered = shelf.answered[uid] ?? (0, 0)
        status.offersAnswered = answered.offers
        status.pastesAnswered = answered.pastes
        return status
    }

    // MARK: Receiver

    /// A ring advert of `member` that §4.3 accepted, with its clipboard kind.
    public func heard(_ member: DeviceID, name: String, kind: ClipboardKind?, revision: UInt32) async {
        switch watch.hear(member, kind: kind, revision: revision) {
        case nil: return
        case .withdrawn(let gone): await withdrawTaken(from: gone)
        case .ask(let asked): await ask(asked, name: name)
        }
    }

    /// The member left the ring.
    public func memberLeft(_ member: DeviceID) async {
        if watch.forget(member) != nil { await withdrawTaken(from: member) }
    }

    /// The ring changed: copies of devices no longer in `members` go.
    public func keepOnly(members: Set<DeviceID>) async {
        let gone = Set(taken.values.map(\.member)).subtracting(members)
        for member in gone { await memberLeft(member) }
    }

    private func ask(_ member: DeviceID, name: String) async {
        guard asking.insert(member).inserted else {
            askAgain[member] = name
            return
        }
        defer { asking.remove(member) }
        var name = name
        while true {
            let answer: ClipboardOffer?
            do { answer = try await fetcher.clipboardOffer(of: member) } catch {
                // Asked again at a later sighting of the same revision (§9 "Clipboard").
                log("batond: could not ask \(name) for its clipboard: \(error)")
                watch.askFailed(member)
                if askAgain.removeValue(forKey: member) == nil { return }
                continue
            }
            if let offer = answer {
                if watch.answered(member, offer: offer) {
                    if offer.kind == .files {
                        await handFiles(offer, from: member, name: name)
                    } else {
                        await hand(offer, from: member, name: name)
                    }
                }
            } else if watch.answeredNothing(member) != nil {
                await withdrawTaken(from: member)
            }
            guard let again = askAgain.removeValue(forKey: member) else { return }
            name = again
        }
    }

    /// A new copy of `member`: to the agent of the account of the offer's name, and nobody else. It
    /// replaces what that account was handed before, from any member.
    func hand(_ offer: ClipboardOffer, from member: DeviceID, name: String, files: ClipboardFileList? = nil) async {
        await withdrawTaken(from: member)
        guard let agent = agents.values.first(where: { $0.account == offer.account }) else { return }
        await withdrawTaken { $0.agent.uid == agent.uid }
        let token = randomToken()
        taken[token] = Taken(member: member, memberName: name, offer: offer, files: files, agent: agent,
                             expiresAt: clock.monotonicSeconds() + Int64(offer.expiresIn))
        rearmExpiry()
        let forAgent = ClipboardOfferForAgent(token: token, memberName: name, kind: offer.kind, items: offer.items,
                                              expiresIn: offer.expiresIn, files: files?.files ?? [])
        await call(agent) { calls in await calls.offered(forAgent, to: agent) }
    }

    func withdrawTaken(from member: DeviceID) async {
        await withdrawTaken { $0.member == member }
    }

    /// The taken copies that match go, and their agents are told.
    func withdrawTaken(where matches: (Taken) -> Bool) async {
        for (token, entry) in taken where matches(entry) {
            taken[token] = nil
            forgetPulledFiles(of: entry.agent.uid)
            await call(entry.agent) { calls in await calls.withdrawn(token: token, from: entry.agent) }
        }
        rearmExpiry()
    }

    /// `uid` pastes `mediaType` of the copy it was handed as `token`: the bytes, pulled now, in a
    /// sealed memory file.
    public func paste(uid: UInt32, token: UInt64, mediaType: String, limit: UInt64 = maxItemBytes) async throws(Refusal) -> ClipboardContents {
        guard let entry = taken[token], entry.agent.uid == uid, clock.monotonicSeconds() < entry.expiresAt else { throw .unknownOffer }
        guard let item = entry.offer.item(mediaType) else { throw .typeNotOffered(mediaType) }
        guard item.size <= limit else { throw .tooLarge(size: item.size, limit: limit) }
        let request: ClipboardDataRequest
        let sink: ClipboardContents
        do {
            request = try ClipboardDataRequest(offerID: entry.offer.offerID, mediaType: mediaType, offset: 0)
            sink = ClipboardContents(try SealedMemoryFile.makeUnsealed(name: "baton-paste"))
        } catch {
            throw .failed("\(error)")
        }
        do {
            try await fetcher.clipboardData(of: entry.member, request, item: item, into: sink)
        } catch {
            switch error {
            case .changed, .fileChanged:
                // The copy there is no longer this one: nobody gets it again from here.
                if taken.removeValue(forKey: token) != nil { await call(entry.agent) { calls in await calls.withdrawn(token: token, from: entry.agent) } }
                throw .changed
            case .unreachable:
                throw .unreachable(memberName: entry.memberName)
            case .failed(let what):
                log("batond: pasting from \(entry.memberName) failed: \(what)")
                throw .unreachable(memberName: entry.memberName)
            }
        }
        do { try SealedMemoryFile.seal(sink.file) } catch { throw .failed("\(error)") }
        return sink
    }

    /// The copies handed to `uid` now (status, tests).
    public func takenTokens(of uid: UInt32) -> [UInt64] { taken.filter { $0.value.agent.uid == uid }.map(\.key) }
}
