// SPDX-License-Identifier: LGPL-2.1-or-later
/// Which incoming calls are served, and when their handlers start (pure: the connection starts the
/// handlers it is handed and replies to what is refused).
///
/// - A caller with `maxServedPerSender` calls being served (running or waiting) is refused more at
///   once, with LimitsExceeded, before their arguments are read or a task is made: one
///   connection's flood of pipelined calls cannot make the service hold thousands of them.
/// - A caller has at most `runningPerSender` handlers running; its further calls wait, in order,
///   for one of them to finish (128 pipelined GetManagedObjects of 4 MB each held 555 MiB when all
///   ran at once).
/// - At most `runningAtMost` handlers run in all, and none starts while the outbox is over its high
///   mark (replies of calls started regardless made the outbox hold 1 GiB in an attack).
/// - A freed slot goes to the waiting callers in turn (round-robin, in the order they began to
///   wait): a caller that keeps its queue full cannot take every slot from the others (an order by
///   name would: ":1.10" sorts before ":1.9").
/// - After a burst (`burstHandlers` running at once) ends, memory may be given back.
struct CallAdmission<Handler> {
    let runningPerSender: Int
    let runningAtMost: Int
    let maxServedPerSender: Int
    let burstHandlers: Int

    /// Handlers running, and the most at once since the last burst ended.
    private(set) var running = 0
    private var mostRunning = 0
    /// Handlers running, and calls waiting for a turn, by the caller's unique name (the calls it has
    /// being served are the two together).
    private var runningBySender: [String: Int] = [:]
    private var waitingBySender: [String: [Handler]] = [:]
    /// The callers with waiting calls, each once, in the order their turn comes: the one served last
    /// goes to the back.
    private var turns: [String] = []

    init(configuration: DBusConnectionConfiguration) {
        runningPerSender = configuration.runningPerSender
        runningAtMost = configuration.runningAtMost
        maxServedPerSender = configuration.maxHandlersPerSender
        burstHandlers = configuration.burstHandlers
    }

    /// The calls of `sender` being served when it may have no more (refuse with LimitsExceeded);
    /// nil when its call is admitted.
    func refusal(for sender: String) -> Int? {
        let serving = served(by: sender)
        return serving < maxServedPerSender ? nil : serving
    }

    func served(by sender: String) -> Int { runningBySender[sender, default: 0] + (waitingBySender[sender]?.count ?? 0) }
    var hasWaiting: Bool { !waitingBySender.isEmpty }

    /// Whether a handler may start now (the bus keeps up with the replies, and fewer than
    /// `runningAtMost` run: with handlers slower than the stream, every call read would otherwise
    /// start before the first reply counted against the outbox).
    func mayStart(outboxFull: Bool) -> Bool { !outboxFull && running < runningAtMost }

    /// An admitted call of `sender` has a handler: returned if it starts now, else it waits its turn.
    mutating func enqueue(_ handler: Handler, from sender: String, outboxFull: Bool) -> Handler? {
        guard runningBySender[sender, default: 0] < runningPerSender, mayStart(outboxFull: outboxFull) else {
            if waitingBySender[sender] == nil { turns.append(sender) }
            waitingBySender[sender, default: []].append(handler)
            return nil
        }
        runningBySender[sender, default: 0] += 1
        started()
        return handler
    }

    /// What follows a handler's end (its reply queued).
    struct Finished {
        /// Handlers to start now, with their callers.
        var start: [(handler: Handler, sender: String)] = []
        /// A burst ended: memory may be given back.
        var releaseMemory = false
    }

    /// A handler of `sender` ended: its slot goes to the waiting calls (this caller's next, or
    /// another's that waited for a slot), through `startWaiting`, while they may start.
    mutating func finished(for sender: String, outboxFull: Bool) -> Finished {
        running -= 1
        if let count = runningBySender[sender], count > 1 { runningBySender[sender] = count - 1 } else { runningBySender[sender] = nil }
        var result = Finished()
        result.start = startWaiting(outboxFull: outboxFull)
        if running == 0, mostRunning >= burstHandlers {
            mostRunning = 0
            result.releaseMemory = true
        }
        return result
    }

    /// Waiting handlers of callers with a free slot, one per caller in turn, to start now (after the
    /// outbox drained, or a handler ended).
    mutating func startWaiting(outboxFull: Bool) -> [(handler: Handler, sender: String)] {
        var starting: [(handler: Handler, sender: String)] = []
        while mayStart(outboxFull: outboxFull),
              let turn = turns.firstIndex(where: { runningBySender[$0, default: 0] < runningPerSender }) {
            let sender = turns.remove(at: turn)
            guard let next = takeWaiting(of: sender) else { continue }
            if waitingBySender[sender] != nil { turns.append(sender) }
            runningBySender[sender, default: 0] += 1
            started()
            starting.append((next, sender))
        }
        return starting
    }

    /// The connection closed: the handlers that never started (to discard).
    mutating func close() -> [Handler] {
        let neverStarted = turns.flatMap { waitingBySender[$0] ?? [] }
        waitingBySender.removeAll()
        turns.removeAll()
        return neverStarted
    }

    private mutating func takeWaiting(of sender: String) -> Handler? {
        guard var waiting = waitingBySender[sender], !waiting.isEmpty else { return nil }
        let next = waiting.removeFirst()
        waitingBySender[sender] = waiting.isEmpty ? nil : waiting
        return next
    }

    private mutating func started() {
        running += 1
        mostRunning = max(mostRunning, running)
    }
}
