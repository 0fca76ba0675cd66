// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonService
import BatonServiceFakes
import BatonSystem
import Foundation
import Glibc
import Synchronization
import Testing

/// ClipboardService's copies of files on two machines joined by a fake transfer (no network, no bus):
/// the list is the offer's one item, a file's bytes are asked of the copying account's agent only when
/// a member pastes it, checked and hashed; a changed file fails its paste and takes the offer back
/// (docs/clipboard.md "Files", protocol §6.7 "Files").
@Suite struct ClipboardFilesServiceTests {
    let alphaID = try! DeviceID(bytes: Array(repeating: 0xA1, count: 16))

    struct Machine {
        let service: ClipboardService
        let advert: FakeClipboardAdvert
        let agents: FakeClipboardAgentCalls
        let fetcher: FakeClipboardFetcher
        let clock: FakeMonotonicClock
    }

    func machine(clock: FakeMonotonicClock = FakeMonotonicClock()) -> Machine {
        let advert = FakeClipboardAdvert(), agents = FakeClipboardAgentCalls(), fetcher = FakeClipboardFetcher()
        let counter = Mutex<UInt64>(0xF11E)
        let service = ClipboardService(advert: advert, fetcher: fetcher, agentCalls: agents, clock: clock,
                                       randomToken: { counter.withLock { $0 = $0 &* 6364136223846793005 &+ 1442695040888963407; return $0 } },
                                       log: { _ in })
        return Machine(service: service, advert: advert, agents: agents, fetcher: fetcher, clock: clock)
    }

    func agent(_ uid: UInt32, _ account: String) -> ClipboardAgentEndpoint {
        ClipboardAgentEndpoint(uid: uid, account: account, busName: ":1.\(uid)", path: "/org/baton/ClipboardAgent")
    }

    /// A directory of the test's, removed at the end.
    final class Scratch: Sendable {
        let path: String
        init() {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("baton-clipfiles-\(UUID().uuidString)").path
            try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        func write(_ name: String, _ bytes: [UInt8]) throws -> String {
            let file = path + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            return file
        }
    }

    /// alpha's agent (ada, 1000) copied two files, which it opens from `scratch` when asked; beta has
    /// agents for ada (2000) and bob (2001) and an inbox for pulled files.
    func filesCopied(_ scratch: Scratch, clock: FakeMonotonicClock = FakeMonotonicClock()) async throws -> (alpha: Machine, beta: Machine, files: [String]) {
        let alpha = machine(clock: clock), beta = machine(clock: clock)
        beta.fetcher.connect(alphaID, to: alpha.service)
        await alpha.service.register(agent(1000, "ada"))
        await beta.service.register(agent(2000, "ada"))
        await beta.service.register(agent(2001, "bob"))
        await beta.service.useFileInbox(directory: scratch.path + "/inbox")
        let paths = [try scratch.write("a.txt", Array("abc".utf8)), try scratch.write("b.png", [0x89, 0x50])]
        alpha.agents.answerOpenFile { copy, index throws(ClipboardOpenFailure) in
            guard copy == 77, index < paths.count else { throw .noSuchCopy }
            do { return ClipboardContents(try FileDescriptor.open(paths[index], O_RDONLY | O_CLOEXEC)) } catch { throw .changed("gone") }
        }
        try await alpha.service.offerFiles(uid: 1000, files: [ClipboardFile(name: "a.txt", size: 3, mediaType: "text/plain"),
                                                              ClipboardFile(name: "b.png", size: 2, mediaType: "image/png")],
                                           expiresIn: 120, copy: 77)
        return (alpha, beta, paths)
    }

    @Test func theListCrossesWithTheOfferAndEachFileOnlyAtItsPaste() async throws {
        let scratch = Scratch()
        let (alpha, beta, _) = try await filesCopied(scratch)
        #expect(alpha.advert.current == .files)
        let offer = try #require(try? await alpha.service.answerOffer(member: "beta").get())
        #expect(offer.kind == .files && offer.items.map(\.mediaType) == [ClipboardFileList.mediaType])
        await beta.service.heard(alphaID, name: "alpha", kind: .files, revision: 3)
        let handed = try #require(beta.agents.offers(to: 2000).first)
        #expect(handed.kind == .files && handed.files.map(\.name) == ["a.txt", "b.png"] && handed.files.map(\.size) == [3, 2])
        #expect(beta.agents.offers(to: 2001).isEmpty, "bob was handed ada's files")
        #expect(beta.fetcher.dataRequests == 1 && beta.fetcher.fileRequests == 0, "a file crossed before the paste")
        #expect(await alpha.service.fileRequestsAnswered == 0)
        // The account's status: the list fetched with the offer is no paste.
        var status = await alpha.service.status(uid: 1000)
        #expect(status.offer?.askedBy.contains("asker") == true && status.offer?.pastedOn == [] && status.pastesAnswered == 0, "\(status)")

        let pasted = try await beta.service.pasteFile(uid: 2000, token: handed.token, index: 0)
        #expect(try pasted.file.readAll() == Array("abc".utf8))
        // Handed over, it is no longer in batond's inbox.
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/inbox/2000").isEmpty)
        let second = try await beta.service.pasteFile(uid: 2000, token: handed.token, index: 1)
        #expect(try second.file.readAll() == [0x89, 0x50])
        #expect(await alpha.service.fileRequestsAnswered == 2)
        // Each file's pull is a paste in the status: the asking member, the file's type and bytes.
        status = await alpha.service.status(uid: 1000)
        #expect(status.offer?.pastedOn == [ClipboardPaste(device: "asker", mediaType: "text/plain", size: 3),
                                           ClipboardPaste(device: "asker", mediaType: "image/png", size: 2)] && status.pastesAnswered == 2, "\(status)")
        // Not bob's; no third file; not a copy of text.
        await #expect(throws: ClipboardService.Refusal.unknownOffer) { _ = try await beta.service.pasteFile(uid: 2001, token: handed.token, index: 0) }
        await #expect(throws: ClipboardService.Refusal.noSuchFile(2)) { _ = try await beta.service.pasteFile(uid: 2000, token: handed.token, index: 2) }
        await #expect(throws: ClipboardService.Refusal.typeNotOffered("image/png")) {
            _ = try await beta.service.paste(uid: 2000, token: handed.token, mediaType: "image/png")
        }
    }

    @Test func theSourceAnswersOnlyForItsCopyAndDescribesTheFileItHashes() async throws {
        let scratch = Scratch()
        let (alpha, _, _) = try await filesCopied(scratch)
        let offerID = try await alpha.service.answerOffer(member: "beta").get().offerID
        let served = try await alpha.service.answerFile(ClipboardFileRequest(offerID: offerID, index: 0), member: "beta").get()
        #expect(served.info == (try DocumentInfo(totalSize: 3, digest: SHA256.hash(Array("abc".utf8)), mediaType: "text/plain", documentID: "a.txt")))
        // A resume names the digest it was given: served from the same file.
        let resumed = try await alpha.service.answerFile(ClipboardFileRequest(offerID: offerID, index: 0, digest: served.info.digest, offset: 3), member: "beta").get()
        #expect(resumed.info == served.info)
        func refusal(_ request: ClipboardFileRequest) async -> ErrorFrame? {
            if case .failure(let error) = await alpha.service.answerFile(request, member: "beta") { return error }
            return nil
        }
        #expect(await refusal(try ClipboardFileRequest(offerID: offerID &+ 1, index: 0)) == ErrorFrame(code: .unknownActivity, message: "clipboard changed"))
        #expect(await refusal(try ClipboardFileRequest(offerID: offerID, index: 2)) == ErrorFrame(code: .unknownActivity, message: "no such file"))
        #expect(await refusal(try ClipboardFileRequest(offerID: offerID, index: 0, digest: served.info.digest, offset: 4))?.code == .malformed)
        #expect(alpha.advert.current == .files)
        // A digest the file does not have: it is not the file announced before; the copy is taken back.
        #expect(await refusal(try ClipboardFileRequest(offerID: offerID, index: 1, digest: served.info.digest, offset: 1))?.code == .fileChanged)
        #expect(alpha.advert.current == nil)
        #expect(await refusal(try ClipboardFileRequest(offerID: offerID, index: 0)) == ErrorFrame(code: .unknownActivity, message: "clipboard changed"))
    }

    @Test func aFileThatChangedFailsThePasteNamingItAndTakesTheCopyBack() async throws {
        let scratch = Scratch()
        let (alpha, beta, paths) = try await filesCopied(scratch)
        await beta.service.heard(alphaID, name: "alpha", kind: .files, revision: 3)
        let handed = try #require(beta.agents.offers(to: 2000).first)
        // The file grew after the copy: its size is no longer the listed one.
        try Data("abcd".utf8).write(to: URL(fileURLWithPath: paths[0]))
        await #expect(throws: ClipboardService.Refusal.fileChanged(name: "a.txt", memberName: "alpha")) {
            _ = try await beta.service.pasteFile(uid: 2000, token: handed.token, index: 0)
        }
        #expect(alpha.advert.current == nil && beta.agents.withdrawals(of: 2000) == [handed.token])
        // The agent found the change itself (another file, same size): the same answer.
        let other = Scratch()
        let again = try await filesCopied(other)
        again.alpha.agents.answerOpenFile { _, _ throws(ClipboardOpenFailure) in throw .changed("a.txt changed since it was copied") }
        await again.beta.service.heard(alphaID, name: "alpha", kind: .files, revision: 3)
        let token = try #require(again.beta.agents.offers(to: 2000).first?.token)
        await #expect(throws: ClipboardService.Refusal.fileChanged(name: "b.png", memberName: "alpha")) {
            _ = try await again.beta.service.pasteFile(uid: 2000, token: token, index: 1)
        }
        #expect(again.alpha.advert.current == nil)
    }

    @Test func offersOfFilesAreCheckedAndTextOffersCannotClaimTheKind() async throws {
        let alpha = machine()
        await alpha.service.register(agent(1000, "ada"))
        await #expect(throws: ClipboardService.Refusal.invalidContents("the files add up to 1073741825 bytes, more than the 1073741824 shared at once")) {
            try await alpha.service.offerFiles(uid: 1000, files: [ClipboardFile(name: "big", size: ClipboardFileList.totalLimit, mediaType: "a/b"),
                                                                  ClipboardFile(name: "one", size: 1, mediaType: "a/b")], expiresIn: 0, copy: 1)
        }
        await #expect(throws: ClipboardService.Refusal.invalidContents("a copy of files is offered with OfferFiles")) {
            try await alpha.service.offer(uid: 1000, kind: .files, items: [ClipboardItem(mediaType: "text/uri-list", size: 0)], expiresIn: 0,
                                          contents: ClipboardContents(try SealedMemoryFile.make(name: "t", bytes: [])))
        }
        await #expect(throws: ClipboardService.Refusal.notEnabled) {
            try await alpha.service.offerFiles(uid: 1001, files: [ClipboardFile(name: "a", size: 1, mediaType: "a/b")], expiresIn: 0, copy: 1)
        }
        #expect(alpha.advert.history.isEmpty)
    }

    @Test func anExpiredCopyOfFilesIsNotPastedAndLeavesNothingInTheInbox() async throws {
        let scratch = Scratch(), clock = FakeMonotonicClock()
        let (alpha, beta, _) = try await filesCopied(scratch, clock: clock)
        await beta.service.heard(alphaID, name: "alpha", kind: .files, revision: 3)
        let handed = try #require(beta.agents.offers(to: 2000).first)
        // A partial file an interrupted pull left.
        try FileManager.default.createDirectory(atPath: scratch.path + "/inbox/2000", withIntermediateDirectories: true)
        _ = try scratch.write("inbox/2000/" + String(repeating: "ab", count: 32) + ".partial", [1, 2])
        clock.advance(121)
        await alpha.service.expire()
        await beta.service.expire()
        #expect(alpha.advert.current == nil && beta.agents.withdrawals(of: 2000) == [handed.token])
        await #expect(throws: ClipboardService.Refusal.unknownOffer) { _ = try await beta.service.pasteFile(uid: 2000, token: handed.token, index: 0) }
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/inbox/2000"))
    }
}
