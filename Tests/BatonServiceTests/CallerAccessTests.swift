// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import Testing
@testable import BatonService

/// The pure decision of who may continue and pair (docs/security.md, "Who may continue and pair").
@Suite("BatonServiceTests: caller access (group baton, else polkit)")
struct CallerAccessTests {
    static let answers: [PolkitAnswer?] = [nil, .authorized, .challenge, .notAuthorized, .dismissed, .unavailable, .timedOut,
                                           .unknownAction, .failed("org.freedesktop.PolicyKit1.Error.Failed")]

    @Test(arguments: PolkitAction.allCases)
    func rootAndGroupBatonAreAllowedWithoutPolkit(_ action: PolkitAction) {
        #expect(!CallerAccess.needsPolkit(privileged: true))
        #expect(CallerAccess.needsPolkit(privileged: false))
        for answer in Self.answers {
            #expect(CallerAccess.decide(action, privileged: true, polkit: answer) == .allowed(.privilege))
        }
    }

    @Test(arguments: PolkitAction.allCases)
    func onlyPolkitsYesAllowsAnyoneElse(_ action: PolkitAction) {
        for answer in Self.answers {
            let decision = CallerAccess.decide(action, privileged: false, polkit: answer)
            if answer == .authorized {
                #expect(decision == .allowed(.polkit))
                continue
            }
            guard case .refused(let why) = decision else {
                Issue.record("\(action) \(String(describing: answer)): \(decision)")
                continue
            }
            // Every refusal says the fix that always works, fits a D-Bus error message, and never
            // repeats polkit's own error text.
            #expect(why.contains("sudo adduser $USER baton"), "\(why)")
            #expect(why.count <= ServiceFailure.maxMessageCharacters, "\(why.count): \(why)")
            #expect(!why.contains("org.freedesktop"), "\(why)")
        }
    }

    @Test func eachRefusalSaysWhatWouldAllowIt() {
        func why(_ action: PolkitAction, _ answer: PolkitAnswer?) -> String {
            if case .refused(let text) = CallerAccess.decide(action, privileged: false, polkit: answer, group: "baton") { return text }
            return ""
        }
        #expect(why(.continueSuggestions, .notAuthorized).contains("active local desktop session"))
        #expect(why(.continueSuggestions, .challenge).contains("active local desktop session"))
        #expect(why(.pair, .notAuthorized).contains("administrator's password"))
        #expect(why(.pair, .challenge).contains("polkit agent"))
        #expect(why(.pair, .dismissed).contains("dismissed"))
        #expect(why(.continueSuggestions, .unavailable).contains("polkit is not running") && why(.pair, nil).contains("polkit is not running"))
        #expect(why(.pair, .unavailable).contains("only root and group baton may pair or remove machines"))
        #expect(why(.continueSuggestions, .timedOut).contains("did not answer in time"))
        #expect(why(.continueSuggestions, .unknownAction).contains("org.baton.policy is not installed"))
        #expect(why(.pair, .failed("x")).contains("journalctl -u polkit"))
        // Another privilege group is named as configured.
        if case .refused(let text) = CallerAccess.decide(.pair, privileged: false, polkit: .notAuthorized, group: "ring") {
            #expect(text.contains("group ring") && text.contains("sudo adduser $USER ring"))
        } else {
            Issue.record("not refused")
        }
    }
}
