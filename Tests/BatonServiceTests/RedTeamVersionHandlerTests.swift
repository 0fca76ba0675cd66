// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Red-team pass on handler version declarations over D-Bus and in .desktop files (docs/dbus-api.md
/// RegisterHandlerWithOptions, "Installed applications"), with batond's ActivityService on a private bus.
@Suite("BatonServiceTests: red team, handler version declarations", .serialized)
struct RedTeamVersionHandlerTests {
    static let type = "org.example.Reader.reading"

    func versions(_ pairs: [(Int64, Int64)]) -> DBusValue {
        .propertyDictionary(["Versions": .array(elementSignature: "(xx)", pairs.map { .structure([.int64($0.0), .int64($0.1)]) })])
    }

    /// Attack: the handler that accepted WillContinue declares version 1; later registrations of the
    /// same user (version 7, then every version) make those the newest. Held (after the fix in
    /// ContinuationService): the accepting handler's ticket still answers with its own declaration,
    /// so the fetch names 1 and a payload of 7 is refused; the newest decides only for the next
    /// WillContinue.
    @Test func theAcceptingHandlersDeclarationIsItsOwnWhateverRegistersLater() async throws {
        try await withService { fixture in
            let app = try fixture.connect()
            defer { app.close() }
            _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/v1"), .stringArray([Self.type]), versions([(1, 1)])])
            let ticket = HandlerTicket(uid: getuid(), type: Self.type, handler: HandlerKey(connection: app.uniqueName, path: "/v1"))
            _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/v7"), .stringArray([Self.type]), versions([(7, 7)])])
            #expect(await fixture.handlers.acceptsVersion(7, type: Self.type, uid: getuid()), "the newest decides for the next WillContinue")
            #expect(await fixture.handlers.versionDeclarations(of: ticket) == [try ActivityVersions(pairs: [(1, 1)])])
            #expect(await ContinuationService.accepts(7, ticket, fixture.handlers) == false)
            #expect(await ContinuationService.accepts(1, ticket, fixture.handlers))
            _ = try await app.manager("RegisterHandler", [.objectPath("/all"), .stringArray([Self.type])])
            #expect(await fixture.handlers.versionDeclarations(type: Self.type, uid: getuid()) == nil)
            #expect(await fixture.handlers.versionDeclarations(of: ticket) == [try ActivityVersions(pairs: [(1, 1)])])
            let all = HandlerTicket(uid: getuid(), type: Self.type, handler: HandlerKey(connection: app.uniqueName, path: "/all"))
            #expect(await fixture.handlers.versionDeclarations(of: all) == nil, "a plain registration accepts every version")
        }
    }

    /// Attack: one local user's declarations deciding for another. Held: a user's handler decides for
    /// that user only (another uid with no handler accepts every version); only a prefetch, which has
    /// no user yet, takes every user's declarations together.
    @Test func oneUsersDeclarationDecidesNothingForAnother() async throws {
        try await withService { fixture in
            let app = try fixture.connect()
            defer { app.close() }
            _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/v1"), .stringArray([Self.type]), versions([(1, 1)])])
            let other = getuid() &+ 1
            #expect(await fixture.handlers.acceptsVersion(7, type: Self.type, uid: other))
            #expect(await fixture.handlers.versionDeclarations(type: Self.type, uid: other) == nil)
            #expect(await fixture.handlers.acceptsVersion(7, type: Self.type, uid: getuid()) == false)
            #expect(await fixture.handlers.versionDeclarations(type: Self.type, uid: nil) == [try ActivityVersions(pairs: [(1, 1)])])
        }
    }

    /// Attack: huge and malformed version lists in RegisterHandlerWithOptions: 100,000 ranges (over
    /// the bus budget: LimitsExceeded), 10,000 and 33 ranges, a reversed range at the end of a valid list, a(ii) and a(xxx) instead of a(xx), Versions
    /// twice in spirit (an unknown option beside it), an empty type list. Held: InvalidArguments,
    /// nothing registered (GetHandledTypes stays empty), and the daemon keeps answering.
    @Test func hugeAndMalformedVersionListsAreRefusedWholesale() async throws {
        try await withService { fixture in
            let app = try fixture.connect()
            defer { app.close() }
            // Beyond the standard argument budget (262,144 values): refused while it is read.
            await expectError("org.freedesktop.DBus.Error.LimitsExceeded") {
                _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/huge"), .stringArray([Self.type]),
                                                                         versions(Array(repeating: (0, Int64.max), count: 100_000))])
            }
            let bad: [DBusValue] = [
                versions(Array(repeating: (0, Int64.max), count: 10_000)),
                versions((0..<33).map { (Int64($0), Int64($0)) }),
                versions([(1, 1), (5, 9), (Int64.max, Int64.min)]),
                .propertyDictionary(["Versions": .array(elementSignature: "(ii)", [.structure([.int32(1), .int32(1)])])]),
                .propertyDictionary(["Versions": .array(elementSignature: "(xxx)", [.structure([.int64(1), .int64(1), .int64(1)])])]),
                .propertyDictionary(["Versions": versions([(1, 1)]).asDictionary!["Versions"]!, "versions": .string("all")]),
            ]
            for (index, options) in bad.enumerated() {
                await expectError(ErrorName.invalidArguments) {
                    _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/h\(index)"), .stringArray([Self.type]), options])
                }
            }
            await expectError(ErrorName.invalidArguments) {
                _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/empty"), .stringArray([]), versions([(1, 1)])])
            }
            #expect(try await app.manager("GetHandledTypes") == [.stringArray([])])
            #expect(await fixture.handlers.versionDeclarations(type: Self.type, uid: nil) == nil)
            // Negative versions are accepted as declared but never sent: an activity's version is ≥ 0.
            _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/neg"), .stringArray([Self.type]), versions([(Int64.min, 3)])])
            let declared = try #require(await fixture.handlers.versionDeclarations(type: Self.type, uid: getuid()))
            #expect(FetchActivityOfVersions.ranges(covering: declared) == [0...3])
        }
    }

    /// Attack: .desktop files with garbage version values. Held: every value that cannot be read
    /// (empty, signs, hex, exponents, non-ASCII digits, spaces inside a range, 33 ranges) drops the
    /// entry instead of accepting every version; the first of two keys counts.
    @Test func desktopVersionValuesThatCannotBeReadDropTheEntry() throws {
        let garbage = ["", " ", ";", "+1", "0x10", "1e3", "\u{0661}", "1\u{301}", "1 - 2", "1--2", "-", "3-", "2-1", "9223372036854775808",
                       (0..<33).map(String.init).joined(separator: ";"), "1;x;2", "1,2"]
        for value in garbage {
            let text = "[Desktop Entry]\nX-Baton-ActivityTypes=\(Self.type);\nX-Baton-ActivityVersions=\(value)\n"
            #expect(XDGDesktopEntryScanner.parse(text, id: "g") == nil, "\(value.debugDescription)")
        }
        let twice = "[Desktop Entry]\nX-Baton-ActivityTypes=\(Self.type);\nX-Baton-ActivityVersions=x\nX-Baton-ActivityVersions=1\n"
        #expect(XDGDesktopEntryScanner.parse(twice, id: "t") == nil, "the first of two keys counts, as for every key")
        let localized = "[Desktop Entry]\nX-Baton-ActivityTypes=\(Self.type);\nX-Baton-ActivityVersions[de]=x\nX-Baton-ActivityVersions= 2 ; 4-6 \n"
        #expect(XDGDesktopEntryScanner.parse(localized, id: "l")?.versions == (try ActivityVersions(pairs: [(2, 2), (4, 6)])))
    }
}
