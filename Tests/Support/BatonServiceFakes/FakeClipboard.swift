// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonService
import BatonStore
import BatonSystem
import Glibc
import Synchronization

/// The advert's clipboard kind as the service set it, for host tests. A fake: the real one is the
/// radio's, tested in the lab.
public final class FakeClipboardAdvert: ClipboardAdvert {
    private let kinds = Mutex<[ClipboardKind?]>([])
    public init() {}
    public func setClipboard(_ kind: ClipboardKind?) async { kinds.withLock { $0.append(kind) } }
    /// Every kind set, oldest first.
    public var history: [ClipboardKind?] { kinds.withLock { $0 } }
    public var current: ClipboardKind? { kinds.withLock { $0.last ?? nil } }
}

/// A transfer that asks another machine's ClipboardService directly, with no network, counting what
/// it asked. A fake for host tests; the real requests are TransferService's.
public final class FakeClipboardFetcher: ClipboardFetcher {
    private let sources = Mutex<[DeviceID: ClipboardService]>([:])
    private let counts = Mutex<(offers: Int, data: Int, bytes: UInt64, files: Int)>((0, 0, 0, 0))

    /// The name the source records for the asking machine (the real transfer names the member).
    private let asker: String

    public init(asker: String = "asker") { self.asker = asker }

    public func connect(_ member: DeviceID, to service: ClipboardService) { sources.withLock { $0[member] = service } }
    public func disconnect(_ member: DeviceID) { sources.withLock { $0[member] = nil } }

    public var offerRequests: Int { counts.withLock { $0.offers } }
    public var dataRequests: Int { counts.withLock { $0.data } }
    public var fileRequests: Int { counts.withLock { $0.files } }
    /// Item bytes that crossed.
    public var bytesMoved: UInt64 { counts.withLock { $0.bytes } }

    public func clipboardOffer(of member: DeviceID) async throws(ClipboardFetchFailure) -> ClipboardOffer? {
        counts.withLock { $0.offers += 1 }
        guard let source = sources.withLock({ $0[member] }) else { throw .unreachable }
        switch await source.answerOffer(member: asker) {
        case .success(let offer): return offer
        case .failure(let error) where error.code == .unknownActivity: return nil
        case .failure(let error): throw .failed(error.message)
        }
    }

    public func clipboardData(of member: DeviceID, _ request: ClipboardDataRequest, item: ClipboardItem,
                              into sink: ClipboardContents) async throws(ClipboardFetchFailure) {
        counts.withLock { $0.data += 1 }
        guard let source = sources.withLock({ $0[member] }) else { throw .unreachable }
        switch await source.answerData(request, member: asker) {
        case .failure(let error) where error.code == .unknownActivity: throw .changed
        case .failure(let error): throw .failed(error.message)
        case .success(let (contents, start, served)):
            guard served == item else { throw .failed("another item") }
            var buffer = [UInt8](repeating: 0, count: Int(item.size))
            let read = buffer.withUnsafeMutableBytes { try? contents.file.readFully(into: $0, at: start) }
            guard read == Int(item.size) else { throw .failed("short read") }
            do { try sink.file.writeAll(buffer) } catch { throw .failed("\(error)") }
            counts.withLock { $0.bytes += item.size }
        }
    }

    /// The source's answer read whole and written into the inbox as a received document.
    public func clipboardFile(of member: DeviceID, offerID: UInt64, index: Int, file: ClipboardFile,
                              into inbox: DocumentInbox) async throws(ClipboardFetchFailure) -> PulledDocument {
        counts.withLock { $0.files += 1 }
        guard let source = sources.withLock({ $0[member] }) else { throw .unreachable }
        let request: ClipboardFileRequest
        do { request = try ClipboardFileRequest(offerID: offerID, index: UInt16(index)) } catch { throw .failed("\(error)") }
        switch await source.answerFile(request, member: asker) {
        case .failure(let error) where error.code == .unknownActivity: throw .changed
        case .failure(let error) where error.code == .fileChanged: throw .fileChanged
        case .failure(let error): throw .failed(error.message)
        case .success(let served):
            guard served.info.totalSize == file.size, served.info.documentID == file.name else { throw .failed("another file") }
            var buffer = [UInt8](repeating: 0, count: Int(file.size))
            let read = buffer.withUnsafeMutableBytes { try? served.contents.file.readFully(into: $0, at: 0) }
            guard read == Int(file.size), SHA256.hash(buffer) == served.info.digest else { throw .failed("short read or another digest") }
            let path = inbox.documentPath(digest: served.info.digest)
            do {
                let out = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o600)
                try out.writeAll(buffer)
            } catch { throw .failed("\(error)") }
            counts.withLock { $0.bytes += file.size }
            return PulledDocument(path: path, info: served.info, resumes: 0, resumedBytes: 0)
        }
    }
}

/// What the service told agents, for host tests. A fake: the real calls go over the bus.
public final class FakeClipboardAgentCalls: ClipboardAgentCalls {
    public enum Call: Hashable, Sendable {
        case offered(ClipboardOfferForAgent, uid: UInt32)
        case withdrawn(token: UInt64, uid: UInt32)
    }
    private let calls = Mutex<[Call]>([])
    /// Agents (uids) that do not answer: their calls are recorded as they arrive and return only at `releaseAll`.
    private let holding = Mutex<(uids: Set<UInt32>, waiting: [CheckedContinuation<Void, Never>])>(([], []))
    public init() {}
    public func offered(_ offer: ClipboardOfferForAgent, to agent: ClipboardAgentEndpoint) async {
        calls.withLock { $0.append(.offered(offer, uid: agent.uid)) }
        await answer(agent.uid)
    }
    public func withdrawn(token: UInt64, from agent: ClipboardAgentEndpoint) async {
        calls.withLock { $0.append(.withdrawn(token: token, uid: agent.uid)) }
        await answer(agent.uid)
    }
    /// `uid`'s agent stops answering (another account's hung or hostile agent).
    public func hold(uid: UInt32) { holding.withLock { _ = $0.uids.insert(uid) } }
    /// Every agent answers again, the calls waiting first.
    public func releaseAll() {
        let waiting = holding.withLock { state in
            state.uids = []
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
    /// Calls that arrived and have not been answered.
    public var unanswered: Int { holding.withLock { $0.waiting.count } }
    private func answer(_ uid: UInt32) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let held = holding.withLock { state in
                guard state.uids.contains(uid) else { return false }
                state.waiting.append(continuation)
                return true
            }
            if !held { continuation.resume() }
        }
    }
    /// What OpenFile answers (nil: the agent holds no such copy).
    private let opener = Mutex<(@Sendable (UInt64, Int) throws(ClipboardOpenFailure) -> ClipboardContents)?>(nil)
    public func answerOpenFile(_ handler: @escaping @Sendable (UInt64, Int) throws(ClipboardOpenFailure) -> ClipboardContents) {
        opener.withLock { $0 = handler }
    }
    public func openFile(copy: UInt64, index: Int, from agent: ClipboardAgentEndpoint) async throws(ClipboardOpenFailure) -> ClipboardContents {
        guard let handler = opener.withLock({ $0 }) else { throw .noSuchCopy }
        return try handler(copy, index)
    }
    public var all: [Call] { calls.withLock { $0 } }
    public func offers(to uid: UInt32) -> [ClipboardOfferForAgent] {
        all.compactMap { if case .offered(let offer, let to) = $0, to == uid { offer } else { nil } }
    }
    public func withdrawals(of uid: UInt32) -> [UInt64] {
        all.compactMap { if case .withdrawn(let token, let to) = $0, to == uid { token } else { nil } }
    }
}

/// A monotonic clock the test moves by hand (the clipboard's expiries). A fake: the real one is
/// CLOCK_BOOTTIME (SystemMonotonicClock).
public final class FakeMonotonicClock: MonotonicClock {
    private let now = Mutex<Int64>(10_000)
    public init() {}
    public func monotonicSeconds() -> Int64 { now.withLock { $0 } }
    public func advance(_ seconds: Int64) { now.withLock { $0 += seconds } }
}

/// The system's wall clock stepped by hand (a date set wrong, NTP correcting it): time(2) plus an
/// offset the test moves. A fake: the real one is SystemWallClock.
public final class FakeSteppedWallClock: WallClock {
    private let offset = Mutex<Int64>(0)
    public init() {}
    public func unixSeconds() -> Int64 { Int64(time(nil)) + offset.withLock { $0 } }
    public func step(_ seconds: Int64) { offset.withLock { $0 += seconds } }
}
