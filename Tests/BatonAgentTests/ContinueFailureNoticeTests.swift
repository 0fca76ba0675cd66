// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonAPI
import BatonClient
import BatonDBus
import Testing

/// Issue 26: a Continue started from a notification that fails is told in words, with the fix.
@Suite("the agent tells a failed Continue")
struct ContinueFailureNoticeTests {
    @Test func deliveredAndDeclinedAreNotFailuresToTell() {
        #expect(ContinueFailureNotice.reason(outcome: "delivered") == nil)
        #expect(ContinueFailureNotice.reason(outcome: "declined") == nil)
        #expect(ContinueFailureNotice.reason(outcome: "no-handler")?.contains("install one") == true)
        #expect(ContinueFailureNotice.reason(outcome: "launch-failed")?.contains("journalctl") == true)
    }

    @Test(arguments: ContinuationFailure.allCases)
    func everyCategoryHasASentence(_ category: ContinuationFailure) {
        let error = BatonClientError(.failed, "\(category.rawValue): details for programs")
        #expect(error.continuationFailure == category)
        let reason = ContinueFailureNotice.reason(error)
        // Words for a person, not batond's message for programs.
        #expect(!reason.contains("\(category.rawValue):") && !reason.contains("details for programs") && !reason.contains("org.baton"), "\(reason)")
        #expect(reason.hasSuffix("."), "\(reason)")
    }

    @Test func aBusRefusalNamesGroupBatonNotTheBusText() {
        let error = BatonClientError(name: DBusError.accessDeniedName, message: "Rejected send message, 2 matched rules; type=\"method_call\"")
        let reason = ContinueFailureNotice.reason(error)
        #expect(reason.contains("group `baton`") && reason.contains("sudo adduser"), "\(reason)")
        #expect(!reason.contains("org.freedesktop") && !reason.contains("matched rules"), "\(reason)")
        let request = ContinueFailureNotice.request(reason: reason)
        #expect(request.summary == "Could not continue here" && request.body == reason && request.actions.isEmpty)
        #expect(request.hints["desktop-entry"] == .string("baton-agent"))
    }

    @Test func batondsRefusalIsShownWithItsFixWithoutTheErrorName() {
        let why = "only root, group baton and the active local desktop session may continue or dismiss suggestions "
            + "(polkit action org.baton.continue): run it from the desktop session you are logged in at, or join group baton"
        let reason = ContinueFailureNotice.reason(BatonClientError(.notPermitted, why))
        #expect(reason == "Not permitted: " + why)
        #expect(!reason.contains("org.baton.Error"))
    }
}
