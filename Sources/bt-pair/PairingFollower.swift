// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonClient
import BatonCommandLine
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Follows a pairing session to its end. Each person types the code the other screen shows (§7.1
/// "What the users do"): the acceptor shows its code; the initiator's person types it there; the
/// initiator then shows a second code, which the acceptor's person types. Then the members the
/// other ring brings are shown before they are merged. Ctrl-C cancels the session (nothing is
/// stored) and exits 2; standard input ending before a code was typed cancels it too, saying so.
struct PairingFollower {
    let connection: BatonConnection
    let context: CommandContext
    let path: String
    /// --test-auto-confirm (test harnesses only): the final "add these members?" is answered yes.
    /// The codes are still typed (standard input, or --code on the initiator).
    let commitWithoutAsking: Bool
    /// --code: the code the acceptor shows, for an initiator run from a script.
    var typedCode: String? = nil
    /// How the prompts name the other machine ("Type the code shown on <peer>:").
    var peerLabel = "the other machine"

    /// Why a code was not typed: standard input ended (no terminal, /dev/null, a closed pipe).
    private struct NoInput: Error {}

    func follow() async throws(BatonClientError) -> Int32 {
        let interrupt = cancelOnInterrupt()
        defer { interrupt.cancel() }
        var asked = false, reviewed = false, secondShown = false
        var typed = ""
        while true {
            let session = try await connection.pairingSession(at: path)
            switch session.knownState {
            case .confirming where !asked:
                asked = true
                let answer = session.role == "initiator" ? try await typeCode(given: typedCode, prompt: "Type the code shown on \(peerLabel): ")
                                                          : try await acceptorTypes(shown: session.code)
                guard let answer else { return try await noInput() }
                typed = answer
            case .confirming where session.role == "initiator" && !secondShown && !session.code.isEmpty:
                // Our person typed the acceptor's code correctly: the second code is for the acceptor's person.
                secondShown = true
                context.output.message("Second code: \(session.code)")
                context.output.message("Type it on \(peerLabel), which asks for it now. Waiting for it...")
            case .reviewing where !reviewed:
                reviewed = true
                try await review(session)
            case .paired:
                let id = session.peerID
                let short = id.count >= 8 ? String(id.prefix(4)) + "-" + String(id.dropFirst(4).prefix(4)) : id
                // "Code" is the acceptor's code on both sides: shown there, typed here.
                context.output.result(json: OutputDocument.paired(name: session.peerName, deviceID: id,
                                                                  code: session.role == "initiator" ? typed : session.code),
                                      text: "Paired with \(session.peerName) (\(short)).", compact: true)
                return PairExit.ok
            case .failed:
                if context.output.json { context.output.jsonLine(OutputDocument.pairingFailed(error: session.error)) }
                return switch session.error {
                case "rejected": context.fail("pairing was refused or cancelled on one of the machines; nothing was stored", PairExit.rejected)
                case "timed-out": context.fail("timed out (each side waits 120 s for its person); nothing was stored", PairExit.timedOut)
                case "verification-failed":
                    context.fail("""
                        the typed code did not match the code shown on the other machine: a typo, another machine \
                        answering, or someone in between. Nothing was stored; start again on both machines
                        """, PairExit.failure)
                case "peer-removed":
                    context.fail("peer-removed: that machine was removed from the ring (or removed this one); nothing of the ring was sent",
                                 PairExit.rejected)
                case "contested":
                    context.fail("""
                        contested: a second machine tried to pair with the accepting machine before its person typed the \
                        code (an attack, or two machines running bt-pair with); nothing was stored. Start again, with only \
                        the one machine pairing
                        """, PairExit.failure)
                case "not-saved":
                    context.fail("""
                        not-saved: this machine could not save the ring with the new member (a full disk, or a state \
                        directory batond cannot write); nothing joined here; the other machine may list this one: \
                        remove it there. Free space or fix the state directory (baton status says why), then pair again
                        """, PairExit.failure)
                case "ring-changed":
                    context.fail("""
                        ring-changed: this ring changed while you reviewed (a member's update arrived), so committing would \
                        no longer make exactly the changes shown; nothing joined here; the other machine may list this one: \
                        remove it there, then pair again to review the changes as they are now
                        """, PairExit.failure)
                default: context.fail("pairing failed (\(session.error)); nothing was stored", PairExit.failure)
                }
            default:
                break
            }
            do {
                try await Task.sleep(for: .milliseconds(100))
            } catch {
                throw BatonClientError(.failed, "cancelled")
            }
        }
    }

    /// The acceptor: shows its code, then its person types the second code the initiator shows once
    /// the initiator's person typed this one. Nil when standard input ended first.
    private func acceptorTypes(shown code: String) async throws(BatonClientError) -> String? {
        context.output.message("Code: \(code)")
        context.output.message("Type this code on the other machine. It then shows a second code.")
        return try await typeCode(given: nil, prompt: "Type the second code shown on the other machine: ")
    }

    /// Asks for a code (or takes the given one) and hands it to the daemon, which compares it in
    /// constant time; nil when standard input ended before a line was typed.
    private func typeCode(given: String?, prompt: String) async throws(BatonClientError) -> String? {
        var code = given
        if code == nil {
            switch await ask(prompt) {
            case .line(let line): code = line
            case .endOfInput: return nil
            // The session ended while the person was typing (the other side refused, timed out,
            // or a second machine contested): the next poll reports how.
            case .sessionEnded: return ""
            }
        }
        guard let code else { return nil }
        let typed = code.whitespaceTrimmed
        do {
            try await connection.confirmPairingCode(at: path, code: typed)
        } catch where error.code == .notReady {
            // The session ended meanwhile (the other side refused, timed out or contested): the
            // next poll reports how, with its exit status.
        }
        return typed
    }

    /// Standard input ended before a code was typed: the session is cancelled, saying why.
    private func noInput() async throws(BatonClientError) -> Int32 {
        try? await connection.cancelPairing(at: path)
        if context.output.json { context.output.jsonLine(OutputDocument.pairingFailed(error: "rejected")) }
        return context.fail("""
            no code was typed: standard input ended (not a terminal?). bt-pair asks the person at this \
            machine to type the code the other machine shows; run it in a terminal. Pairing cancelled; nothing was stored
            """, PairExit.rejected)
    }

    /// Keys and rosters are exchanged: what the merge would change here (members joining, members the
    /// other ring's marks remove, members re-keyed) is shown, merged only on a yes.
    private func review(_ session: PairingSessionProperties) async throws(BatonClientError) {
        for line in PairingReviewText.lines(session) { context.output.message(line) }
        var accepted = commitWithoutAsking
        if commitWithoutAsking {
            context.output.message("Committed automatically (--test-auto-confirm, for tests only).")
        } else {
            let line: String
            switch await ask(PairingReviewText.question(session)) {
            case .line(let text): line = text
            case .sessionEnded: return
            case .endOfInput:
                context.output.message("No answer (standard input ended): nothing is added.")
                try? await connection.cancelPairing(at: path)
                return
            }
            let answer = line.whitespaceTrimmed.lowercased()
            accepted = answer == "y" || answer == "yes"
        }
        do {
            if accepted { try await connection.commitPairing(at: path) } else { try await connection.cancelPairing(at: path) }
        } catch where error.code == .notReady {
            // The session ended meanwhile: the next poll reports how.
        }
    }

    /// Ctrl-C: cancel the session in the daemon, then exit 2.
    private func cancelOnInterrupt() -> any DispatchSourceSignal {
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: DispatchQueue(label: "bt-pair.signals"))
        signal(SIGINT, SIG_IGN)
        let connection = connection, path = path, context = context
        source.setEventHandler {
            Task {
                try? await connection.cancelPairing(at: path)
                exit(context.fail("cancelled", PairExit.rejected))
            }
        }
        source.activate()
        return source
    }

    enum Answer: Sendable { case line(String), endOfInput, sessionEnded }

    /// Shows `prompt` and waits for a line of standard input, or for the session to end meanwhile
    /// (then the person need not answer a question that no longer matters). A read left waiting
    /// is abandoned: bt-pair exits soon after.
    private func ask(_ prompt: String) async -> Answer {
        Output.write(prompt, to: .standardError)
        let once = AnswerOnce(), connection = connection, path = path
        return await withCheckedContinuation { continuation in
            once.wait(continuation)
            DispatchQueue(label: "bt-pair.stdin").async { once.answer(readLine().map { .line($0) } ?? .endOfInput) }
            Task {
                while !once.answered {
                    try? await Task.sleep(for: .milliseconds(200))
                    if let state = try? await connection.pairingSession(at: path).knownState, state == .paired || state == .failed {
                        once.answer(.sessionEnded)
                    }
                }
            }
        }
    }

    /// Reads one line from standard input without blocking the caller's executor.
    static func readAnswer() async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue(label: "bt-pair.stdin").async { continuation.resume(returning: readLine()) }
        }
    }
}

/// The first answer wins; later ones are dropped.
final class AnswerOnce: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<PairingFollower.Answer, Never>?, done: Bool)>((nil, false))

    var answered: Bool { state.withLock { $0.done } }

    func wait(_ continuation: CheckedContinuation<PairingFollower.Answer, Never>) {
        state.withLock { $0.continuation = continuation }
    }

    func answer(_ answer: PairingFollower.Answer) {
        let continuation: CheckedContinuation<PairingFollower.Answer, Never>? = state.withLock { state in
            guard !state.done else { return nil }
            state.done = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: answer)
    }
}
