// SPDX-License-Identifier: GPL-2.0-or-later
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
    /// replies to requests given up earlier) are skipped, within one `timeout` for the whole wait:
    /// a peer sending such frames cannot keep the request waiting longer. An Error reply throws
    /// `.remote`. To retry after a failure, call again with the same frame (same id), on this or a
    /// new channel.
    public func request(_ request: Frame, timeout: Duration? = nil) async throws(TransportError) -> Frame {
        await lock.lock()
        defer { lock.unlock() }
        try await channel.send(request)
        let deadline = channel.deadline(after: timeout)
        while true {
            let reply = try await channel.receive(until: deadline)
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
///
/// A connection opens with one frame type (Hello): a first frame of another type, or an opening the
/// handler refuses, is answered with an Error frame and ends the connection. The opening is never
/// cached, so every Hello is answered afresh.
public final class FrameDispatcher: Sendable {
    /// Returns the reply to a request; its request id is set by the dispatcher. A thrown `ErrorFrame`
    /// is sent as an Error frame; any other error as `internal`.
    public typealias Handler = @Sendable (_ request: Frame, _ peer: DeviceID) async throws -> Frame

    private struct RequestKey: Hashable {
        let peer: DeviceID
        let requestID: UInt32
    }

    /// A request being handled, with duplicates waiting for the same reply.
    private struct InFlight {
        let requestDigest: [UInt8]
        var waiters: [CheckedContinuation<Frame?, Never>] = []
    }

    private struct State {
        var cache: ReplyCache
        var inFlight: [RequestKey: InFlight] = [:]
        /// Channels (being served) that end after their next reply (`endAfterReply`).
        var ending: Set<ObjectIdentifier> = []
    }

    /// Answers a request with a stream of frames sent on `channel` (each with the request's id), for
    /// idempotent reads too large for one reply (FetchDocument, §6.5). Nothing is cached. A thrown
    /// `ErrorFrame` is sent as an Error frame; a `TransportError` ends the connection.
    public typealias Streamer = @Sendable (_ request: Frame, _ channel: SecureChannel) async throws -> Void

    /// The frame type every connection must open with.
    public let openingFrameType: FrameType
    private let handler: Handler
    private let streamedTypes: Set<FrameType>
    private let streamer: Streamer?
    private let state: Mutex<State>

    public init(capacity: Int = ReplyCache.defaultCapacity, openingFrameType: FrameType = .hello,
                streamedTypes: Set<FrameType> = [], streamer: Streamer? = nil, handler: @escaping Handler) {
        self.openingFrameType = openingFrameType
        self.handler = handler
        self.streamedTypes = streamedTypes
        self.streamer = streamer
        self.state = Mutex(State(cache: ReplyCache(capacity: capacity)))
    }

    /// Answers requests on `channel` until it fails or closes, and returns why it ended.
    /// A framing error closes the channel (the stream cannot be trusted after it), and so does a
    /// missing or refused opening frame, after its Error frame was sent (`.openingRefused`).
    public func serve(_ channel: SecureChannel, idleTimeout: Duration? = nil) async -> TransportError {
        defer { state.withLock { _ = $0.ending.remove(ObjectIdentifier(channel)) } }
        var opened = false
        while true {
            do {
                let request = try await channel.receive(timeout: idleTimeout)
                if opened, let streamer, streamedTypes.contains(request.type) {
                    try await stream(request, with: streamer, on: channel)
                    continue
                }
                let reply = opened || request.type == openingFrameType
                    ? await self.reply(to: request, from: channel.peerDeviceID)
                    : Self.malformed(request, "the first frame must be \(openingFrameType)")
                try await channel.send(reply)
                if state.withLock({ $0.ending.contains(ObjectIdentifier(channel)) }) {
                    channel.close()
                    return .closed
                }
                if !opened {
                    if reply.type == .error {
                        channel.close()
                        return .openingRefused((try? ErrorFrame(payload: reply.payload)) ?? ErrorFrame(code: .malformed, message: ""))
                    }
                    opened = true
                }
            } catch {
                channel.close()
                return error
            }
        }
    }

    private func stream(_ request: Frame, with streamer: Streamer, on channel: SecureChannel) async throws(TransportError) {
        let refusal: ErrorFrame
        do {
            try await streamer(request, channel)
            return
        } catch let error as TransportError {
            throw error
        } catch let error as ErrorFrame {
            refusal = error
        } catch {
            refusal = ErrorFrame(code: .internalError, message: "internal error")
        }
        try await channel.send(Frame(type: .error, requestID: request.requestID, payload: refusal.payload))
    }

    /// The reply for one request: from the cache, from a concurrent duplicate, or from the handler.
    /// The opening frame always goes to the handler. A cached request id whose request differs
    /// (another type or payload) is answered `malformed`: ids may not be reused for new requests.
    public func reply(to request: Frame, from peer: DeviceID) async -> Frame {
        if request.type == openingFrameType { return await run(request, from: peer) }
        let key = RequestKey(peer: peer, requestID: request.requestID)
        let digest = Self.digest(of: request)
        let earlier: Frame? = await withCheckedContinuation { continuation in
            let answer: Frame?? = state.withLock { state in
                if let cached = state.cache.entry(peer: peer, requestID: request.requestID) {
                    return .some(cached.requestDigest == digest ? cached.reply : Self.reusedID(request))
                }
                if let running = state.inFlight[key] {
                    guard running.requestDigest == digest else { return .some(Self.reusedID(request)) }
                    state.inFlight[key]?.waiters.append(continuation)
                    return nil
                }
                state.inFlight[key] = InFlight(requestDigest: digest)
                return .some(nil)
            }
            if let answer { continuation.resume(returning: answer) }
        }
        if let earlier { return earlier }

        let finished = await run(request, from: peer)
        let waiters = state.withLock { state in
            state.cache.store(peer: peer, requestID: request.requestID, requestDigest: digest, reply: finished)
            return state.inFlight.removeValue(forKey: key)?.waiters ?? []
        }
        for waiter in waiters { waiter.resume(returning: finished) }
        return finished
    }

    /// Runs the handler and turns what it throws into an Error frame carrying the request's id.
    private func run(_ request: Frame, from peer: DeviceID) async -> Frame {
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
        return reply
    }

    /// SHA-256 of the request's type and payload, kept with its cached reply.
    private static func digest(of request: Frame) -> [UInt8] {
        SHA256.hash([request.type.rawValue] + request.payload)
    }

    private static func reusedID(_ request: Frame) -> Frame {
        malformed(request, "request id reused for another request")
    }

    private static func malformed(_ request: Frame, _ message: String) -> Frame {
        Frame(type: .error, requestID: request.requestID, payload: ErrorFrame(code: .malformed, message: message).payload)
    }

    /// Drops the cached replies of a peer (for example, when it leaves the ring).
    public func forget(peer: DeviceID) {
        state.withLock { $0.cache.forget(peer: peer) }
    }

    /// These channels, served by `serve`, are closed right after their next reply is sent (that reply
    /// still goes out): the channels of a peer that left while one of its requests was being
    /// answered, whose answer must still reach it (§6.2: a RingSync that removed this device).
    public func endAfterReply(_ channels: [SecureChannel]) {
        state.withLock { state in for channel in channels { state.ending.insert(ObjectIdentifier(channel)) } }
    }
}
