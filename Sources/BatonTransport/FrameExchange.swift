import BatonCore
import BatonCrypto
import Synchronization

/// Request ids for one requester (§6.2). The counter outlives connections, so a retry on a new
/// connection, which reuses its id, cannot collide with a fresh request. Never 0 (pairing's id).
public final class RequestIDSource: Sendable {
    private let next: Mutex<UInt32>

    /// Starts at a random point so ids of a restarted daemon do not repeat recent ones from before.
    public init(using random: some RandomSource = SystemRandom()) {
        next = Mutex(random.bytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
    }

    public init(startingAt first: UInt32) {
        next = Mutex(first)
    }

    public func make() -> UInt32 {
        next.withLock { next in
            if next == 0 { next = 1 }
            defer { next &+= 1 }
            return next
        }
    }
}

/// The requesting side: one request at a time on a channel, each answered by the frame with its id.
public final class FrameExchange: Sendable {
    public let channel: SecureChannel
    private let lock = AsyncLock()

    public init(channel: SecureChannel) {
        self.channel = channel
    }

    /// Sends `request` and returns the reply carrying its request id. Frames with other ids (late
    /// replies to requests given up earlier) are skipped. An Error reply throws `.remote`.
    /// To retry after a failure, call again with the same frame (same id), on this or a new channel.
    public func request(_ request: Frame, timeout: Duration? = nil) async throws(TransportError) -> Frame {
        await lock.lock()
        defer { lock.unlock() }
        try await channel.send(request)
        while true {
            let reply = try await channel.receive(timeout: timeout)
            guard reply.requestID == request.requestID else { continue }
            if reply.type == .error {
                let remote: ErrorFrame
                do { remote = try ErrorFrame(payload: reply.payload) } catch { throw .invalidFrame(error) }
                throw .remote(remote)
            }
            return reply
        }
    }
}

/// The responding side: runs a handler for each request and remembers replies per peer, so a retried
/// request id is answered from the cache without running the handler again (§6.2). One dispatcher
/// serves all channels, since a retry may come on a new connection.
public final class FrameDispatcher: Sendable {
    /// Returns the reply to a request; its request id is set by the dispatcher. A thrown `ErrorFrame`
    /// is sent as an Error frame; any other error as `internal`.
    public typealias Handler = @Sendable (_ request: Frame, _ peer: DeviceID) async throws -> Frame

    private struct RequestKey: Hashable {
        let peer: DeviceID
        let requestID: UInt32
    }

    private struct State {
        var cache: ReplyCache
        /// Requests being handled, with duplicates waiting for the same reply.
        var inFlight: [RequestKey: [CheckedContinuation<Frame?, Never>]] = [:]
    }

    private let handler: Handler
    private let state: Mutex<State>

    public init(capacity: Int = ReplyCache.defaultCapacity, handler: @escaping Handler) {
        self.handler = handler
        self.state = Mutex(State(cache: ReplyCache(capacity: capacity)))
    }

    /// Answers requests on `channel` until it fails or closes, and returns why it ended.
    /// A framing error closes the channel (the stream cannot be trusted after it).
    public func serve(_ channel: SecureChannel, idleTimeout: Duration? = nil) async -> TransportError {
        while true {
            do {
                let request = try await channel.receive(timeout: idleTimeout)
                let reply = await reply(to: request, from: channel.peerDeviceID)
                try await channel.send(reply)
            } catch {
                channel.close()
                return error
            }
        }
    }

    /// The reply for one request: from the cache, from a concurrent duplicate, or from the handler.
    public func reply(to request: Frame, from peer: DeviceID) async -> Frame {
        let key = RequestKey(peer: peer, requestID: request.requestID)
        let earlier: Frame? = await withCheckedContinuation { continuation in
            let answer: Frame?? = state.withLock { state in
                if let cached = state.cache.reply(peer: peer, requestID: request.requestID) { return .some(cached) }
                if state.inFlight[key] != nil {
                    state.inFlight[key]?.append(continuation)
                    return nil
                }
                state.inFlight[key] = []
                return .some(nil)
            }
            if let answer { continuation.resume(returning: answer) }
        }
        if let earlier { return earlier }

        var reply: Frame
        do {
            reply = try await handler(request, peer)
        } catch let error as ErrorFrame {
            reply = Frame(type: .error, requestID: request.requestID, payload: error.payload)
        } catch {
            reply = Frame(type: .error, requestID: request.requestID,
                          payload: ErrorFrame(code: .internalError, message: "internal error").payload)
        }
        reply.requestID = request.requestID
        let finished = reply
        let waiters = state.withLock { state in
            state.cache.store(peer: peer, requestID: request.requestID, reply: finished)
            return state.inFlight.removeValue(forKey: key) ?? []
        }
        for waiter in waiters { waiter.resume(returning: finished) }
        return finished
    }

    /// Drops the cached replies of a peer (for example, when it leaves the ring).
    public func forget(peer: DeviceID) {
        state.withLock { $0.cache.forget(peer: peer) }
    }
}
