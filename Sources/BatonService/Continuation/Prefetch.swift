// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

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
        let typeHash = DerivedKeys(secret: member.secret).typeHash(suggestion.activityType)
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
        let typeHash = DerivedKeys(secret: member.secret).typeHash(suggestion.activityType)
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
