// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore

/// The one owner of what each user published and what the advert stands for, checked against a
/// plain model over every sequence of up to five operations of three users and two records each.
@Suite("Publication book")
struct PublicationBookTests {
    enum Operation: Hashable, CustomStringConvertible {
        case publish(UInt32, Int)
        case withdraw(UInt32)

        var description: String {
            switch self {
            case .publish(let uid, let record): "publish(\(uid), r\(record))"
            case .withdraw(let uid): "withdraw(\(uid))"
            }
        }
    }

    static let users: [UInt32] = [1000, 1001, 1002]

    static func record(_ uid: UInt32, _ index: Int) throws -> ActivityRecord {
        try ActivityRecord(activityType: "org.example.App\(uid).t\(index)", title: "r\(index)", userInfo: [:],
                           webpageURL: index == 1 ? "https://example.org/\(uid)" : nil, version: Int64(index), revision: UInt32(index))
    }

    /// Two records per user, made once.
    static let table: [UInt32: [ActivityRecord]] = Dictionary(uniqueKeysWithValues: users.map { uid in
        (uid, [0, 1].map { try! record(uid, $0) })
    })

    static var operations: [Operation] {
        users.flatMap { uid in [Operation.publish(uid, 0), .publish(uid, 1), .withdraw(uid)] }
    }

    @Test("A new book advertises nothing and holds no record")
    func empty() {
        let book = PublicationBook()
        #expect(book.current == nil && book.advertised == nil && book.records.isEmpty)
        #expect(book.record(of: 1000) == nil)
    }

    @Test("Publishing puts the record on the air with its type and webpage flag")
    func publishAdvertises() throws {
        var book = PublicationBook()
        let record = try Self.record(1000, 1)
        #expect(book.publish(record, uid: 1000) == .activity(AdvertContent(activityType: record.activityType, hasWebpageURL: true)))
        #expect(book.current?.uid == 1000 && book.current?.record == record)
        let plain = try Self.record(1000, 0)
        #expect(book.publish(plain, uid: 1000) == .activity(AdvertContent(activityType: plain.activityType)), "a change is a new advert")
        #expect(book.record(of: 1000) == plain)
    }

    @Test("Another user's withdrawal leaves the advert; the advertised user's takes it back to presence, once")
    func withdrawals() throws {
        var book = PublicationBook()
        _ = book.publish(try Self.record(1000, 0), uid: 1000)
        _ = book.publish(try Self.record(1001, 0), uid: 1001)
        #expect(book.withdraw(uid: 1000) == .unchanged)
        #expect(book.record(of: 1000) == nil && book.current?.uid == 1001)
        #expect(book.withdraw(uid: 1001) == .presence)
        #expect(book.current == nil)
        #expect(book.withdraw(uid: 1001) == .unchanged, "withdrawing twice changes nothing on the air")
        #expect(book.withdraw(uid: 1002) == .unchanged, "nor does a user who never published")
    }

    @Test("Every sequence of up to five operations agrees with the model, step by step")
    func exhaustive() throws {
        var sequences: [[Operation]] = [[]]
        var checked = 0
        for _ in 1...5 {
            sequences = sequences.flatMap { prefix in Self.operations.map { prefix + [$0] } }
            for sequence in sequences {
                try check(sequence)
                checked += 1
            }
        }
        #expect(checked == 9 + 81 + 729 + 6_561 + 59_049)
    }

    /// The model: the newest publication stands for the advert until its own user withdraws;
    /// each user's record is their newest publication not withdrawn since.
    func check(_ sequence: [Operation]) throws {
        var book = PublicationBook()
        var records: [UInt32: ActivityRecord] = [:]
        var advertised: UInt32?
        for (step, operation) in sequence.enumerated() {
            let air: PublicationBook.Air
            let expected: PublicationBook.Air
            switch operation {
            case .publish(let uid, let index):
                let record = try #require(Self.table[uid])[index]
                air = book.publish(record, uid: uid)
                records[uid] = record
                advertised = uid
                expected = .activity(AdvertContent(activityType: record.activityType, hasWebpageURL: record.webpageURL != nil))
            case .withdraw(let uid):
                air = book.withdraw(uid: uid)
                records[uid] = nil
                if advertised == uid {
                    advertised = nil
                    expected = .presence
                } else {
                    expected = .unchanged
                }
            }
            guard air == expected, book.records == records, book.advertised == advertised,
                  book.current?.uid == advertised, book.current?.record == advertised.flatMap({ records[$0] }) else {
                Issue.record("\(sequence) at step \(step): air \(air), expected \(expected)")
                return
            }
            for uid in Self.users where book.record(of: uid) != records[uid] {
                Issue.record("\(sequence) at step \(step): record of \(uid)")
                return
            }
        }
    }
}
