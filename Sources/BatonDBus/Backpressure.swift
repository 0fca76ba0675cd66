// SPDX-License-Identifier: LGPL-2.1-or-later
/// When the connection reads, dispatches and holds incoming calls, given how much of its outbox the
/// bus has not taken yet (pure: the connection suspends and resumes its read source and dispatches
/// as told).
///
/// A burst of calls whose replies the bus takes slower than they come (a client pipelining
/// thousands of Introspect calls: 117 MiB before) waits in the bus and the kernel, not here: over
/// the outbox's high mark no incoming call is dispatched until the bus has taken it down to the low
/// mark. Replies to our own calls keep their own budget: while one is awaited, reading goes on and
/// the calls read meanwhile are held (up to `heldLimit` bytes), so a reply from BlueZ is never stuck
/// behind callers' calls (it used to wait out its timeout and read as "bluetoothd is not running").
struct Backpressure {
    let highWater: Int
    let lowWater: Int
    /// Bytes of incoming calls held while the outbox is full, beyond which reading pauses.
    let heldLimit: Int

    /// Whether the read source is suspended.
    private(set) var readingPaused = false
    /// Received messages wait to be dispatched (later, or once the outbox drains).
    private(set) var dispatchPending = false
    /// Incoming calls read while the outbox was full, oldest at `heldHead`.
    private var held: [DBusMessage] = []
    private var heldHead = 0
    private(set) var heldBytes = 0

    init(configuration: DBusConnectionConfiguration) {
        highWater = configuration.outboxHighWater
        lowWater = configuration.outboxLowWater
        heldLimit = configuration.heldCallBytes
    }

    /// What the connection's outbox and calls look like at a decision.
    struct Load {
        /// Bytes in the outbox not yet written.
        var outboxBytes: Int
        /// Whether one of our own calls waits for its reply.
        var awaitingReplies: Bool
    }

    func isFull(_ outboxBytes: Int) -> Bool { outboxBytes >= highWater }
    func isDrained(_ outboxBytes: Int) -> Bool { outboxBytes <= lowWater }
    var hasHeld: Bool { heldHead < held.count }

    /// Over the high mark with our own calls awaiting replies and room to hold calls: reading goes on.
    func readsForReplies(_ load: Load) -> Bool { load.awaitingReplies && heldBytes < heldLimit }

    func mustPauseReading(_ load: Load) -> Bool {
        dispatchPending || (isFull(load.outboxBytes) && !readsForReplies(load))
    }

    enum ReadingChange: Equatable { case pause, resume, none }

    /// Pause while reading must pause; resume once the outbox is below the low mark (or a reply to
    /// our own call is awaited) and every received message is dispatched. (A paused source never
    /// spins: readiness is level-triggered, so it fires again at once while bytes wait.)
    mutating func updateReading(_ load: Load) -> ReadingChange {
        let mustPause = mustPauseReading(load)
        if !readingPaused, mustPause {
            readingPaused = true
            return .pause
        }
        if readingPaused, !mustPause, isDrained(load.outboxBytes) || readsForReplies(load) {
            readingPaused = false
            return .resume
        }
        return .none
    }

    /// The connection closed: a paused source must be resumed before it is cancelled.
    mutating func close() -> ReadingChange {
        held = []
        heldHead = 0
        heldBytes = 0
        dispatchPending = false
        defer { readingPaused = false }
        return readingPaused ? .resume : .none
    }

    enum Step {
        /// Dispatch this call, held while the outbox was full (they go first, in order).
        case dispatch(DBusMessage)
        /// Take the next received message; hold it if it is a call and `holdingCalls`.
        case receive(holdingCalls: Bool)
        /// Stop: dispatch resumes once the bus has taken enough of the outbox.
        case waitForOutbox
    }

    /// What dispatching does next.
    mutating func nextStep(_ load: Load) -> Step {
        let full = isFull(load.outboxBytes)
        if !full, hasHeld {
            let message = held[heldHead]
            held[heldHead] = DBusMessage(kind: .unknown)
            heldHead += 1
            heldBytes -= message.bytes.count
            if heldHead == held.count {
                held.removeAll(keepingCapacity: held.capacity <= 64)
                heldHead = 0
            }
            return .dispatch(message)
        }
        if full, !readsForReplies(load) {
            dispatchPending = true
            return .waitForOutbox
        }
        return .receive(holdingCalls: full || hasHeld)
    }

    /// Whether a received message is held rather than dispatched (calls only: replies and signals go on).
    func holds(_ message: DBusMessage, holdingCalls: Bool) -> Bool { holdingCalls && message.kind == .methodCall }

    mutating func hold(_ message: DBusMessage) {
        heldBytes += message.bytes.count
        held.append(message)
    }

    /// Dispatch starts a round (what was pending is being dispatched now).
    mutating func beginDispatch() { dispatchPending = false }

    /// A round ended with messages left (the rest is dispatched later, so other work interleaves).
    mutating func deferDispatch() { dispatchPending = true }

    enum AfterWrite: Equatable {
        case none
        /// Messages left undispatched go first (later, on the queue), then reading resumes.
        case dispatchThenUpdateReading
        case updateReading
    }

    /// What to do after the bus took some of the outbox.
    func afterWrite(outboxBytes: Int) -> AfterWrite {
        guard readingPaused || hasHeld, isDrained(outboxBytes) else { return .none }
        return dispatchPending || hasHeld ? .dispatchThenUpdateReading : .updateReading
    }
}
