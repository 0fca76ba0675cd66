// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonDBus
import Testing
@testable import BatonService

/// The daemon maps its refusals to org.baton.Error names in one table (ServiceFailure.errorName,
/// Bus/BusErrors.swift); the registry's refusals and the continuation categories go through it.
@Suite("BatonServiceTests: one table of org.baton.Error names")
struct ErrorTableTests {
    @Test func registryRefusalsKeepTheirNamesAndMessages() {
        let cases: [(RegistryError, BatonErrorName, String)] = [
            (.invalidArguments("Title must be a string"), .invalidArguments, "Title must be a string"),
            (.payloadTooLarge("userInfo is over 65536 bytes"), .payloadTooLarge, "userInfo is over 65536 bytes"),
            (.unknownActivity, .unknownActivity, "no such activity"),
            (.notPermitted, .notPermitted, "the activity belongs to another user"),
            (.limitExceeded("at most 64 activities per user"), .limitExceeded, "at most 64 activities per user"),
        ]
        for (error, name, message) in cases {
            let dbusError = DBusError(error)
            #expect(dbusError.batonName == name && dbusError.message == message, "\(error)")
            #expect(ServiceFailure(error).errorName == name)
        }
    }

    @Test func everyFailureHasADocumentedNameAndACutMessage() {
        let failures: [ServiceFailure] = [.invalidArguments("m"), .payloadTooLarge("m"), .notPermitted("m"), .notReady("m"), .failed("m"),
                                          .unknownObject("m"), .unknownDevice("m"), .unknownActivity("m"), .limitExceeded("m"),
                                          .editSessionBusy("m"), .documentConflict("m")]
        #expect(Set(failures.map(\.errorName)).count == failures.count, "each failure its own name")
        for failure in failures {
            #expect(DBusError(failure).batonName == failure.errorName)
        }
        let long = DBusError(ServiceFailure.failed(String(repeating: "x", count: 1000)))
        #expect(long.message.count == ServiceFailure.maxMessageCharacters)
    }

    /// The client reads a continuation category only from the names the daemon sends them with.
    @Test func continuationCategoriesTravelUnderTheirTableNames() {
        #expect(ContinuationFailure.errorNames == [.failed, .notReady, .unknownActivity])
        for category in ContinuationFailure.allCases {
            let failure = ServiceFailure.continuation(category, "detail")
            #expect(failure.errorName == category.errorName)
            let received = BatonClientError(name: DBusError(failure).name, message: DBusError(failure).message)
            #expect(received.continuationFailure == category)
        }
        #expect(BatonClientError(.notPermitted, "interrupted: no").continuationFailure == nil)
    }
}
