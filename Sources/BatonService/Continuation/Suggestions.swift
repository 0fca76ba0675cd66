// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// The suggestions part of the continuation: the core's SuggestionBook decides (one per member,
/// replaced on a newer revision, settled revisions not offered again); this carries its actions
/// out on the board with the member's name and proximity.
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
        if let known = derivedAdvertKeys[member], known.secret == secret { return known.keys }
        let keys = DerivedKeys(secret: secret)
        derivedAdvertKeys[member] = (secret, keys)
        return keys
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
