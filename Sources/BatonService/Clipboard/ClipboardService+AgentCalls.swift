// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import BatonSystem
import Synchronization

// ClipboardService's calls on the accounts' agents (in order, never waited on for long) and its one
// expiry timer.
extension ClipboardService {
    // MARK: Calls on agents

    /// How long the service waits for one agent's answer before it goes on (the call itself goes on,
    /// up to the bus's timeout): an agent that does not answer holds up nothing but its own calls.
    public static let agentCallWait: Duration = .seconds(2)
    /// Calls for one agent still unanswered beyond which more are dropped (logged).
    static let agentCallsPending = 16

    /// Calls `agent` after its earlier calls (Offered and Withdrawn stay in order), waiting for the
    /// answer at most `agentCallWait`. Before, every call was awaited in full: an account whose agent
    /// never answered (another local user's) held up the members' sightings, and so every other
    /// account's copies, for the bus's 25 s each time it was handed a copy.
    func call(_ agent: ClipboardAgentEndpoint, _ body: @escaping @Sendable (any ClipboardAgentCalls) async -> Void) async {
        let key = agent.busName, calls = agentCalls
        let previous = agentCallTails[key]
        guard (previous?.pending ?? 0) < Self.agentCallsPending else {
            log("batond: the clipboard agent of uid \(agent.uid) answers nothing; a call to it is dropped")
            return
        }
        let task = Task {
            await previous?.task.value
            await body(calls)
        }
        agentCallTails[key] = (task, (previous?.pending ?? 0) + 1)
        // Whichever comes first, the answer or the end of the wait, lets the service go on; the
        // timer is cancelled by the answer (none is left running).
        let waiting = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let goOn: @Sendable () -> Void = { waiting.withLock { $0.take() }?.resume() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiting.withLock { $0 = continuation }
            let timer = Task {
                try? await Task.sleep(for: Self.agentCallWait)
                goOn()
            }
            Task { [weak self] in
                await task.value
                timer.cancel()
                goOn()
                await self?.answered(key, task)
            }
        }
    }

    fileprivate func answered(_ key: String, _ task: Task<Void, Never>) {
        guard var tail = agentCallTails[key] else { return }
        tail.pending -= 1
        agentCallTails[key] = tail.pending <= 0 && tail.task == task ? nil : tail
    }

    // MARK: Expiry (one timer, only while something can expire)

    func rearmExpiry() {
        let next = ([shelf.nextDeadline] + taken.values.map { Optional($0.expiresAt) }).compactMap { $0 }.min()
        guard next != expiryDeadline else { return }
        expiryTask?.cancel()
        expiryDeadline = next
        guard let next else { expiryTask = nil; return }
        let seconds = max(0, next - clock.monotonicSeconds())
        expiryTask = Task { [weak self] in
            try? await Task.sleep(for: .seconds(seconds))
            guard !Task.isCancelled else { return }
            await self?.expire()
        }
    }

    /// Runs at the earliest deadline (the timer; tests with a fake clock call it): the shelf's copy and
    /// taken copies past theirs go.
    public func expire() async {
        expiryDeadline = nil
        let now = clock.monotonicSeconds()
        if shelf.expire(nowSeconds: now) {
            shelfContents = nil
            shelfFiles = nil
            await advert.setClipboard(nil)
        }
        for (token, entry) in taken where entry.expiresAt <= now {
            taken[token] = nil
            forgetPulledFiles(of: entry.agent.uid)
            await call(entry.agent) { calls in await calls.withdrawn(token: token, from: entry.agent) }
        }
        rearmExpiry()
    }
}
