// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonService
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
    private let counts = Mutex<(offers: Int, data: Int, bytes: UInt64)>((0, 0, 0))

    public init() {}

    public func connect(_ member: DeviceID, to service: ClipboardService) { sources.withLock { $0[member] = service } }
    public func disconnect(_ member: DeviceID) { sources.withLock { $0[member] = nil } }

    public var offerRequests: Int { counts.withLock { $0.offers } }
    public var dataRequests: Int { counts.withLock { $0.data } }
    /// Item bytes that crossed.
    public var bytesMoved: UInt64 { counts.withLock { $0.bytes } }

    public func clipboardOffer(of member: DeviceID) async throws(ClipboardFetchFailure) -> ClipboardOffer? {
        counts.withLock { $0.offers += 1 }
        guard let source = sources.withLock({ $0[member] }) else { throw .unreachable }
        switch await source.answerOffer() {
        case .success(let offer): return offer
        case .failure(let error) where error.code == .unknownActivity: return nil
        case .failure(let error): throw .failed(error.message)
        }
    }

    public func clipboardData(of member: DeviceID, _ request: ClipboardDataRequest, item: ClipboardItem,
                              into sink: ClipboardContents) async throws(ClipboardFetchFailure) {
        counts.withLock { $0.data += 1 }
        guard let source = sources.withLock({ $0[member] }) else { throw .unreachable }
        switch await source.answerData(request) {
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
