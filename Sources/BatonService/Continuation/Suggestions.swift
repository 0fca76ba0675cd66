// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore

/// The suggestions part of the continuation: the core's SuggestionBook decides (one per member,
/// replaced on a newer revision, settled revisions not offered again); this carries its actions
/// out on the board with the member's name and proximity. Below: what is fetched ahead for a
/// suggestion (Prefetch), and the board that shows them (`SuggestionBoard`, `ShownSuggestion`).
extension ContinuationService {
    /// Seconds on the service's monotonic clock (the presence tracker's time).
    var now: Double {
        let elapsed = (ContinuousClock.now - origin).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    /// Keeps the member's suggestion in step with its newest accepted advert (§9 step 1), shown
    /// only while the member is near (issue 13: RSSI threshold with hysteresis, unknown RSSI near).
    func suggest(for sighting: Sighting, rssi: Int?) async {
        let member = sighting.member
        let body = sighting.body
        replayClaimsOnSighting(of: member)
        let near = presence.heard(member, rssi: rssi, at: now)
        startSweeping()
        guard near else {
            await carry(book.withdraw(member))
            return
        }
        var resolution = SuggestionBook.TypeResolution.unavailable
        if book.needsResolution(member: member, body: body), let keys = await advertKeys(of: member) {
            // The type hash is keyed with the member's secret: hash what we handle and compare (§4.3 step 7).
            resolution = SuggestionBook.resolve(body.typeHash, handled: await activities.allHandledTypes(), keys: keys)
        }
        // The book checks again: another sighting may have offered this revision while we asked.
        await carry(book.offer(member: member, body: body, resolution: resolution), near: near)
    }

    /// The member's advert keys, derived from its secret in the ring's roster (as the radio's
    /// matcher derives them) once per secret: the radio is awaiting this sighting's observer, so it
    /// is not asked again.
    func advertKeys(of member: DeviceID) async -> DerivedKeys? {
        guard let secret = await ring.snapshot().roster.members[member]?.secret else {
            derivedAdvertKeys[member] = nil
            return nil
        }
        return keys(of: member, secret: secret)
    }

    /// The keys of `member`'s `secret`, derived once per secret (HKDF through libcrypto: about 50 µs
    /// a derivation, which every Continue and prefetch used to pay; docs/benchmarks.md, issue 25).
    func keys(of member: DeviceID, secret: AdvertisingSecret) -> DerivedKeys {
        if let known = derivedAdvertKeys[member], known.secret == secret { return known.keys }
        let keys = DerivedKeys(secret: secret)
        derivedAdvertKeys[member] = (secret, keys)
        return keys
    }

    /// The type hash of `type` under the member's secret (§3), from its keys derived once; the
    /// hashes of a secret are kept too (an HMAC is about 10 µs), at most `typeHashLimit` per member.
    func typeHash(_ type: String, of member: RosterMember) -> TypeHash {
        let keys = keys(of: member.deviceID, secret: member.secret)
        // Kept only for ASCII types (every valid one, §6.4): String equality is canonical equivalence,
        // so two spellings of one non-ASCII text would share an entry but not a hash (§3 hashes bytes).
        guard type.utf8.allSatisfy({ $0 < 0x80 }) else { return keys.typeHash(type) }
        var hashes = typeHashes[member.deviceID].flatMap { $0.secret == member.secret ? $0.hashes : nil } ?? [:]
        if let known = hashes[type] { return known }
        let hash = keys.typeHash(type)
        if hashes.count >= Self.typeHashLimit { hashes = [:] }
        hashes[type] = hash
        typeHashes[member.deviceID] = (member.secret, hashes)
        return hash
    }

    /// Members not heard for the silence timeout are far: their suggestions go.
    func sweep() async {
        for member in presence.silenced(at: now) { await carry(book.withdraw(member)) }
    }

    private func startSweeping() {
        guard sweeper == nil else { return }
        let interval = configuration.sweepInterval
        sweeper = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self, await self.sweepAndContinue() else { return }
            }
        }
    }

    /// One sweep; false (and the sweeper ends) when nothing is tracked any more.
    private func sweepAndContinue() async -> Bool {
        await sweep()
        guard presence.isEmpty else { return true }
        sweeper = nil
        return false
    }

    func carry(_ actions: [SuggestionBook.Action], near: Bool = true) async {
        for action in actions {
            switch action {
            case .export(let suggestion):
                let shown = ShownSuggestion(suggestion: suggestion, memberName: await ring.memberName(suggestion.member), near: near)
                self.shown[suggestion.number] = shown
                do {
                    try await board?.offer(shown)
                    log("batond: suggestion \(shown.path): continue \(suggestion.activityType) from \(shown.memberName)")
                    schedulePrefetch(suggestion)
                } catch {
                    book.exportFailed(suggestion)
                    self.shown[suggestion.number] = nil
                    log("batond: cannot offer a suggestion: \(error)")
                }
            case .unexport(let suggestion):
                dropPrefetch(suggestion.number)
                guard let old = self.shown.removeValue(forKey: suggestion.number) else { continue }
                await board?.withdraw(old)
            }
        }
    }

    func ringChanged(_ snapshot: RingSnapshot) async {
        for member in Array(book.suggestions.keys) where !snapshot.isMember(member) {
            presence.forget(member)
            await carry(book.withdraw(member))
        }
        // Members that left (a removal, or a new identity here) are not tracked or replayed towards any more.
        for member in presence.trackedMembers where !snapshot.isMember(member) { presence.forget(member) }
        for member in Array(lastClaimReplay.keys) where !snapshot.isMember(member) { lastClaimReplay[member] = nil }
        for member in Array(derivedAdvertKeys.keys) where !snapshot.isMember(member) { derivedAdvertKeys[member] = nil }
        for member in Array(typeHashes.keys) where !snapshot.isMember(member) { typeHashes[member] = nil }
        await abandonClaimsOfDepartedMembers(snapshot)
    }

    /// The one place membership changes reach the documents' side (a removal here, a RingSync that
    /// removes, a new identity, and at start the ring as loaded): journalled claims towards a
    /// machine that is no member any more are settled as lost (§6.6), their users told.
    func abandonClaimsOfDepartedMembers(_ snapshot: RingSnapshot) async {
        for (id, member) in snapshot.roster.members where id != snapshot.deviceID { knownMemberNames[id] = member.name }
        guard let sessions = await activities.editSessionsForContinue() else { return }
        let members = Set(snapshot.roster.members.keys.filter(snapshot.isMember))
        let (abandoned, failure) = await sessions.abandonClaims(keepingMembers: members)
        if let failure {
            log("batond: journalled edit-session claims towards machines that left the ring could not all be dropped yet "
                + "(\(failure)); they are tried again at the next ring change")
        }
        guard !abandoned.isEmpty else { return }
        let lost = abandoned.map {
            LostEditSession(uid: $0.uid, documentID: $0.claim.documentID, member: $0.peer,
                            memberName: knownMemberNames[$0.peer] ?? $0.peer.shortForm)
        }
        for id in Set(abandoned.map(\.peer)) { knownMemberNames[id] = nil }
        await activities.editSessionsLost(lost)
    }
}

/// An activity fetched ahead for a suggestion (issue 13; docs/protocol.md §9 "Prefetch").
struct Prefetched: Sendable {
    var record: ActivityRecord
    var fetchedAt: ContinuousClock.Instant
}

/// Prefetch: a suggestion shown (so near) for `prefetchAfter` is fetched ahead with the same
/// exact-revision FetchActivity (or FetchActivityOfVersions) an accept sends, and kept in memory
/// only. Accept delivers it when it is still the suggestion's revision and younger than
/// `prefetchMaxAge`, then reports
/// ActivityContinued on a new connection; otherwise accept fetches as usual. The entry goes with
/// the suggestion (newer revision, withdrawn, far, taken, dismissed).
extension ContinuationService {
    func schedulePrefetch(_ suggestion: BatonCore.Suggestion) {
        // A browser suggestion is fetched when taken: its fetch tells the source at once.
        guard let delay = configuration.prefetchAfter, !suggestion.opensInBrowser, prefetching[suggestion.number] == nil else { return }
        prefetching[suggestion.number] = Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard !Task.isCancelled else { return }
            await self?.prefetch(suggestion)
        }
    }

    func dropPrefetch(_ number: Int) {
        prefetching.removeValue(forKey: number)?.cancel()
        prefetched[number] = nil
    }

    private func prefetch(_ suggestion: BatonCore.Suggestion) async {
        guard book.suggestion(number: suggestion.number) == suggestion, presence.isNear(suggestion.member),
              let member = await ring.snapshot().roster.members[suggestion.member] else { return }
        // The versions any local handler of the type accepts (nobody has accepted yet): a source
        // whose activity has another version refuses without its app saving (§9 "Prefetch").
        let versions = await activities.versionDeclarations(type: suggestion.activityType, uid: nil).map(FetchActivityOfVersions.ranges(covering:))
        guard versions?.isEmpty != true else { return }
        let typeHash = self.typeHash(suggestion.activityType, of: member)
        do {
            let record = try await transfer.fetch(member: member.deviceID, typeHash: typeHash, revision: suggestion.revision, versions: versions)
            // Still the same suggestion after the fetch (a newer advert or a withdrawal drops it).
            guard prefetching[suggestion.number] != nil, book.suggestion(number: suggestion.number) == suggestion,
                  record.activityType == suggestion.activityType else { return }
            prefetched[suggestion.number] = Prefetched(record: record, fetchedAt: .now)
            if let shown = shown[suggestion.number] { await board?.titleKnown(shown, title: record.title) }
        } catch {
            // Best effort: accept fetches as usual (and reports the failure's category then).
            log("batond: prefetch of \(ShownSuggestion.path(of: suggestion.number)) failed: \(error)")
        }
    }

    /// Suggestion1.Title: the title of the activity held for the suggestion; "" when none is held.
    public func title(ofSuggestionAt path: String) -> String {
        ShownSuggestion.number(inPath: path).flatMap { prefetched[$0]?.record.title } ?? ""
    }

    /// Whether an activity is held for this suggestion (tests, benchmarks).
    public func isPrefetched(_ path: String) -> Bool {
        ShownSuggestion.number(inPath: path).map { prefetched[$0] != nil } ?? false
    }

    /// Delivers the prefetched activity of `suggestion` if it is still fresh; nil: fetch as usual.
    /// Its document (not prefetched: documents are pulled only on accept) comes on a new connection
    /// first; a document that cannot be pulled falls back to the usual path, which reports why.
    /// The handler that accepts WillContinue (perhaps one the session agent launched for it) must
    /// declare the held version too, else versionUnsupported: its declaration may differ from the
    /// .desktop file's checked before.
    func deliverPrefetched(_ suggestion: BatonCore.Suggestion, from member: RosterMember, uid: UInt32,
                           caller: String?) async throws(ServiceFailure) -> DeliveryOutcome? {
        guard let held = prefetched.removeValue(forKey: suggestion.number) else { return nil }
        guard ContinuousClock.now - held.fetchedAt <= configuration.prefetchMaxAge,
              held.record.revision == suggestion.revision else { return nil }
        // Unaccepted version: the usual path fetches and refuses it with versionUnsupported.
        guard await activities.acceptsVersion(held.record.version, type: suggestion.activityType, uid: uid) else { return nil }
        let typeHash = self.typeHash(suggestion.activityType, of: member)
        var document: PulledDocument?
        if let inbox = await activities.documentInbox(uid: uid) {
            let relay = progressRelay(to: caller)
            defer { relay.finish() }
            do throws(DocumentPullError) {
                document = try await transfer.pullDocumentIfAny(member: member.deviceID, activity: ActivityReference(typeHash: typeHash, revision: held.record.revision),
                                                                inbox: inbox, progress: relay.report(activityType: suggestion.activityType))
            } catch {
                return nil
            }
        }
        // A document whose edit session must move here goes the usual path: it claims before delivery.
        if document != nil, await activities.editSessionsForContinue() != nil { return nil }
        let end = await runContinue(from: member, type: suggestion.activityType,
                                    source: .held(held.record, document: document, number: suggestion.number, typeHash: typeHash),
                                    uid: uid, caller: caller)
        return try Self.outcome(of: end)
    }
}

/// Where suggestions are shown (Suggestion1 objects on D-Bus; a fake in tests). No defaults.
public protocol SuggestionBoard: Sendable {
    func offer(_ shown: ShownSuggestion) async throws
    func withdraw(_ shown: ShownSuggestion) async
    /// The activity of a shown suggestion was fetched ahead: its title is known now.
    func titleKnown(_ shown: ShownSuggestion, title: String) async
    /// How far a continuation's document pull is, for the caller of Continue only (rate-limited by
    /// the continuation).
    func documentProgress(_ progress: DocumentProgress, to caller: String) async
}

/// Bytes of a continuation's document received so far (Manager1.DocumentProgress).
public struct DocumentProgress: Sendable, Equatable {
    public var activityType: String
    public var received: UInt64
    public var total: UInt64
}

/// A suggestion of the book (`BatonCore.Suggestion`) as the board shows it: an
/// org.baton.Suggestion1 object under /org/baton (so InterfacesAdded announces it), listed by
/// `baton suggestions`, taken with Suggestion1.Continue or `baton continue PATH`.
public struct ShownSuggestion: Sendable, Equatable {
    public var suggestion: BatonCore.Suggestion
    public var memberName: String
    /// Proximity allowed it when it was offered (RSSI, §4.4).
    public var near: Bool

    public var path: String { Self.path(of: suggestion.number) }
    public var member: DeviceID { suggestion.member }
    public var activityType: String { suggestion.activityType }
    public var revision: UInt32 { suggestion.revision }
    public var hasWebpageURL: Bool { suggestion.hasWebpageURL }
    /// "browser" when no local handler has the type and only the webpage URL can serve; "" otherwise.
    public var fallback: String { suggestion.opensInBrowser ? "browser" : "" }

    static func path(of number: Int) -> String { "\(BatonObjectPath.suggestionPrefix)/\(number)" }

    /// The suggestion number a path names; nil for any other path.
    static func number(inPath path: String) -> Int? {
        let prefix = BatonObjectPath.suggestionPrefix + "/"
        guard path.hasPrefix(prefix), let number = Int(path.dropFirst(prefix.count)), path == Self.path(of: number) else { return nil }
        return number
    }
}
