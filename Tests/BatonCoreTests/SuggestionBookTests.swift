// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore
import BatonCrypto

@Suite("Suggestion book")
struct SuggestionBookTests {
    let alice = deviceID(1)
    let bob = deviceID(2)
    let keys = DerivedKeys(secret: secret(1))

    func activity(_ revision: UInt32, type: String = "org.example.edit", webpage: Bool = false) -> AdvertBody {
        AdvertBody(typeHash: keys.typeHash(type), revision: revision, flags: webpage ? [.hasActivity, .hasWebpageURL] : [.hasActivity])
    }

    func exported(_ actions: [SuggestionBook.Action]) -> Suggestion? {
        actions.lazy.compactMap { if case .export(let s) = $0 { s } else { nil } }.first
    }

    @Test("A handled activity is offered with its type, revision and webpage flag")
    func offers() throws {
        var book = SuggestionBook()
        let actions = book.offer(member: alice, body: activity(5, webpage: true), resolution: .handled("org.example.edit"))
        let suggestion = try #require(exported(actions))
        #expect(actions == [.export(suggestion)])
        #expect(suggestion.member == alice && suggestion.activityType == "org.example.edit")
        #expect(suggestion.revision == 5 && suggestion.hasWebpageURL && suggestion.number == 1)
        #expect(book.suggestions[alice] == suggestion)
        #expect(book.suggestion(number: 1) == suggestion)
    }

    @Test("The same revision again changes nothing and needs no resolution")
    func sameRevision() {
        var book = SuggestionBook()
        _ = book.offer(member: alice, body: activity(5), resolution: .handled("org.example.edit"))
        #expect(!book.needsResolution(member: alice, body: activity(5)))
        #expect(book.offer(member: alice, body: activity(5), resolution: .handled("org.example.edit")) == [])
        #expect(book.needsResolution(member: alice, body: activity(6)))
    }

    @Test("A new revision replaces the member's suggestion; other members keep theirs")
    func replaces() throws {
        var book = SuggestionBook()
        let first = try #require(exported(book.offer(member: alice, body: activity(5), resolution: .handled("a"))))
        let bobs = try #require(exported(book.offer(member: bob, body: activity(1), resolution: .handled("b"))))
        let actions = book.offer(member: alice, body: activity(6), resolution: .handled("a"))
        let second = try #require(exported(actions))
        #expect(actions == [.unexport(first), .export(second)])
        #expect(second.number == 3 && second.revision == 6)
        #expect(book.suggestions == [alice: second, bob: bobs])
    }

    @Test("A non-activity body or an unhandled type withdraws the member's suggestion")
    func withdraws() throws {
        var book = SuggestionBook()
        let first = try #require(exported(book.offer(member: alice, body: activity(5), resolution: .handled("a"))))
        #expect(!book.needsResolution(member: alice, body: .presence(revision: 6)))
        #expect(book.offer(member: alice, body: .presence(revision: 6), resolution: .unavailable) == [.unexport(first)])
        #expect(book.suggestions.isEmpty)
        let second = try #require(exported(book.offer(member: alice, body: activity(7), resolution: .handled("a"))))
        #expect(book.offer(member: alice, body: activity(8), resolution: .unhandled) == [.unexport(second)])
        #expect(book.offer(member: alice, body: activity(9), resolution: .unhandled) == [])
    }

    @Test("Nothing to match with changes nothing")
    func unavailable() throws {
        var book = SuggestionBook()
        let first = try #require(exported(book.offer(member: alice, body: activity(5), resolution: .handled("a"))))
        #expect(book.offer(member: alice, body: activity(6), resolution: .unavailable) == [])
        #expect(book.suggestions[alice] == first)
    }

    @Test("A settled revision is not offered again; a newer one is")
    func settled() throws {
        var book = SuggestionBook()
        let first = try #require(exported(book.offer(member: alice, body: activity(5), resolution: .handled("a"))))
        #expect(book.settle(number: first.number) == [.unexport(first)])
        #expect(book.settledRevisions[alice] == 5)
        #expect(!book.needsResolution(member: alice, body: activity(5)))
        #expect(book.offer(member: alice, body: activity(5), resolution: .handled("a")) == [])
        #expect(book.settle(number: first.number) == [])
        let newer = try #require(exported(book.offer(member: alice, body: activity(6), resolution: .handled("a"))))
        #expect(newer.revision == 6)
    }

    @Test("Withdrawing a member, everything, and a failed export")
    func withdrawals() throws {
        var book = SuggestionBook()
        let a = try #require(exported(book.offer(member: alice, body: activity(5), resolution: .handled("a"))))
        let b = try #require(exported(book.offer(member: bob, body: activity(1), resolution: .handled("b"))))
        #expect(book.withdraw(alice) == [.unexport(a)])
        #expect(book.withdraw(alice) == [])
        #expect(book.withdrawAll() == [.unexport(b)])
        let c = try #require(exported(book.offer(member: alice, body: activity(5), resolution: .handled("a"))))
        book.exportFailed(c)
        #expect(book.suggestions.isEmpty)
        // A failed export is not settled: the same revision may be offered again.
        #expect(exported(book.offer(member: alice, body: activity(5), resolution: .handled("a"))) != nil)
    }

    @Test("Type resolution hashes the handled types with the member's keys; the smallest name wins")
    func resolution() {
        let hash = keys.typeHash("org.example.edit")
        #expect(SuggestionBook.resolve(hash, handled: ["org.example.view", "org.example.edit"], keys: keys) == .handled("org.example.edit"))
        #expect(SuggestionBook.resolve(hash, handled: ["org.example.view"], keys: keys) == .unhandled)
        #expect(SuggestionBook.resolve(hash, handled: [], keys: keys) == .unhandled)
        // Another member's keys hash the same name differently.
        #expect(SuggestionBook.resolve(hash, handled: ["org.example.edit"], keys: DerivedKeys(secret: secret(2))) == .unhandled)
    }
}
