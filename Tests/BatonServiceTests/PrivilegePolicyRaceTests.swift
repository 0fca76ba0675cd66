// SPDX-License-Identifier: GPL-2.0-or-later
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Red team (security.md "another local Unix user"; BusAttackTests' polkit flood on dbus-broker
/// once answered one of nobody's 400 Pairing1.Remove calls with UnknownDevice): batond judges
/// many callers at once, and `getpwuid`/`getgrnam` keep one static record per process, so a
/// group member's lookup could overwrite nobody's name between nobody's two lookups. Judged from
/// many threads at once, nobody is never a member and the member always is.
@Suite("BatonServiceTests: PrivilegePolicy from many threads at once")
struct PrivilegePolicyRaceTests {
    @Test func nobodyIsNeverJudgedAsTheGroupMemberLookedUpAtTheSameTime() throws {
        let member = try #require(getpwnam("baton-test")?.pointee.pw_uid, "scripts/test-accounts makes the account baton-test")
        let nobody = try #require(getpwnam("nobody")?.pointee.pw_uid)
        let policy = PrivilegePolicy(group: "baton")
        try #require(policy.allows(uid: member), "baton-test is in group baton (scripts/test-accounts)")
        try #require(!policy.allows(uid: nobody))
        let wrong = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { lane in
            for round in 0..<4_000 {
                let asksForMember = (lane + round) % 2 == 0
                if policy.allows(uid: asksForMember ? member : nobody) != asksForMember {
                    wrong.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(wrong.load(ordering: .relaxed) == 0, "wrong judgements out of 32,000")
    }
}
