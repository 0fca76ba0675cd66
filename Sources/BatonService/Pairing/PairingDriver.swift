// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonTransport
import Glibc

/// Why a pairing ended without a result. Each maps to a `bt-pair` exit code.
public enum PairingFailure: Error, Sendable, Equatable {
    /// A user refused the code, or cancelled.
    case rejected
    case timedOut
    /// The peer's messages failed a check (commitment, seal, signature): possibly a man in the middle.
    case verificationFailed(String)
    case transport(String)
    case protocolError(String)
    /// The peer is a device this ring removed (or this ring removed us): nothing was merged.
    case peerRemoved
    /// A second initiator arrived during the session (the acceptor treats it as an attack).
    case contested

    init(_ error: WireError) {
        switch error {
        case .rejected: self = .rejected
        case .peerRemoved: self = .peerRemoved
        case .timedOut: self = .timedOut
        case .commitMismatch, .authenticationFailed, .badSignature, .weakKey, .replayedSequence:
            self = .verificationFailed("\(error)")
        default: self = .protocolError("\(error)")
        }
    }
}

/// Runs one `PairingSession` over a frame channel: frames from the peer, the user's answer and
/// clock ticks go in, one at a time (an actor serialises them); the session's actions come out.
public actor PairingDriver {
    public typealias CodeHandler = @Sendable (String) async -> Void
    /// Both codes of §7.1: the first (the acceptor shows it) and the second (the initiator shows it
    /// once its user typed the first).
    public typealias CodesHandler = @Sendable (_ code: String, _ secondCode: String) async -> Void
    static let lingerTimeout: Duration = .milliseconds(500)

    private var session: PairingSession
    private let channel: any FrameChannel
    private let clock: any WallClock
    private let onCodes: CodesHandler
    private var outcome: Result<PairingResult, PairingFailure>?
    private var waiters: [CheckedContinuation<Result<PairingResult, PairingFailure>, Never>] = []
    public private(set) var code: String?

    public init(session: PairingSession, channel: any FrameChannel, clock: any WallClock, onCodes: @escaping CodesHandler) {
        self.session = session
        self.channel = channel
        self.clock = clock
        self.onCodes = onCodes
    }

    public init(session: PairingSession, channel: any FrameChannel, clock: any WallClock, onCode: @escaping CodeHandler) {
        self.init(session: session, channel: channel, clock: clock, onCodes: { code, _ in await onCode(code) })
    }

    /// Runs until the session ends; returns the result. Call `confirm(_:)` when the user answered.
    public func run() async -> Result<PairingResult, PairingFailure> {
        await perform(session.start(nowSeconds: clock.unixSeconds()))
        let receiving = Task { await self.receiveLoop() }
        let ticking = Task { await self.tickLoop() }
        let result = await waitForOutcome()
        ticking.cancel()
        receiving.cancel()
        await receiving.value
        // The side that finishes first may still have the peer's last frames unread: closing then
        // resets the connection, which can destroy our own last frame before the peer read it
        // (both users confirming at the same moment). So read until the peer hangs up or stays silent.
        let channel = self.channel
        Task {
            while (try? await channel.receive(timeout: Self.lingerTimeout)) != nil {}
            await channel.closeGracefully(timeout: .seconds(2))
        }
        return result
    }

    /// The local user's answer to the code.
    public func confirm(_ accepted: Bool) async {
        await perform(session.userConfirmed(accepted))
    }

    /// Cancels from this side (the peer is told it was refused); the session ends with `failure`.
    public func cancel(as failure: PairingFailure = .rejected) async {
        guard outcome == nil else { return }
        await perform(session.userConfirmed(false))
        finish(.failure(failure))
    }

    private func waitForOutcome() async -> Result<PairingResult, PairingFailure> {
        if let outcome { return outcome }
        return await withCheckedContinuation { waiters.append($0) }
    }

    private func finish(_ result: Result<PairingResult, PairingFailure>) {
        guard outcome == nil else { return }
        outcome = result
        for waiter in waiters { waiter.resume(returning: result) }
        waiters = []
    }

    private func receiveLoop() async {
        while outcome == nil && !Task.isCancelled {
            do {
                let frame = try await channel.receive(timeout: .seconds(PairingSession.timeoutSeconds))
                await perform(session.receive(frame, nowSeconds: clock.unixSeconds()))
            } catch {
                if outcome == nil { finish(.failure(error == .timedOut ? .timedOut : .transport("\(error)"))) }
                return
            }
        }
    }

    private func tickLoop() async {
        while outcome == nil && !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            await perform(session.tick(nowSeconds: clock.unixSeconds()))
        }
    }

    /// One `perform` at a time, in call order: a send suspends the actor, and the roster (sent
    /// when the peer's identity arrives) must not overtake the identity still being sent (§7.2).
    private var performing = false
    private var waitingToPerform: [CheckedContinuation<Void, Never>] = []

    private func perform(_ actions: [PairingSession.Action]) async {
        if performing { await withCheckedContinuation { waitingToPerform.append($0) } } else { performing = true }
        defer { if waitingToPerform.isEmpty { performing = false } else { waitingToPerform.removeFirst().resume() } }
        // A failed send (the peer already hung up) only decides the outcome when the session
        // itself did not: a timeout or refusal that was being reported to the peer wins.
        var sendFailure: TransportError?
        defer { if let sendFailure { finish(.failure(.transport("\(sendFailure)"))) } }
        for action in actions {
            switch action {
            case .send(let frame):
                guard sendFailure == nil else { continue }
                do { try await channel.send(frame) } catch { sendFailure = error }
            case .showCode(let code):
                self.code = code
                await onCodes(code, session.secondCode ?? "")
            case .completed(let result):
                finish(.success(result))
            case .failed(let error):
                finish(.failure(PairingFailure(error)))
            }
        }
    }
}

