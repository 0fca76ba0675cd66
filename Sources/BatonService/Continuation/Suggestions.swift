import BatonCore

/// The suggestions part of the continuation: the core's SuggestionBook decides (one per member,
/// replaced on a newer revision, settled revisions not offered again); this carries its actions
/// out on the board with the member's name and proximity.
extension ContinuationService {
    /// Keeps the member's suggestion in step with its newest accepted advert (§9 step 1).
    func suggest(for sighting: Sighting, near: Bool) async {
        let member = sighting.member
        let body = sighting.body
        var resolution = SuggestionBook.TypeResolution.unavailable
        if book.needsResolution(member: member, body: body), let keys = await ring.radio.advertKeys(of: member) {
            // The type hash is keyed with the member's secret: hash what we handle and compare (§4.3 step 7).
            resolution = SuggestionBook.resolve(body.typeHash, handled: await activities.allHandledTypes(), keys: keys)
        }
        // The book checks again: another sighting may have offered this revision while we asked.
        await carry(book.offer(member: member, body: body, resolution: resolution), near: near)
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
                } catch {
                    book.exportFailed(suggestion)
                    self.shown[suggestion.number] = nil
                    log("batond: cannot offer a suggestion: \(error)")
                }
            case .unexport(let suggestion):
                guard let old = self.shown.removeValue(forKey: suggestion.number) else { continue }
                await board?.withdraw(old)
            }
        }
    }

    func ringChanged(_ snapshot: RingSnapshot) async {
        for member in Array(book.suggestions.keys) where !snapshot.isMember(member) { await carry(book.withdraw(member)) }
    }
}
