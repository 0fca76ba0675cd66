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

/// Follows a pairing session to its end: the acceptor shows the code and asks, the initiator's user
/// types the code the acceptor shows; then the members the other ring brings are shown before they
/// are merged. Ctrl-C cancels the session (nothing is stored) and exits 2.
struct PairingFollower {
    let connection: BatonConnection
    let context: CommandContext
    let path: String
    /// --yes: the acceptor confirms and both sides commit without asking (the initiator still needs the code).
    let confirmWithoutAsking: Bool
    /// --code: the code the acceptor shows, for an initiator run from a script.
    var typedCode: String? = nil
    /// How the prompt names the acceptor ("Type the code shown on <peer>:").
    var peerLabel = "the other machine"

    func follow() async throws(BatonClientError) -> Int32 {
        let interrupt = cancelOnInterrupt()
        defer { interrupt.cancel() }
        var asked = false, reviewed = false
        var typed = ""
        while true {
            let session = try await connection.pairingSession(at: path)
            switch session.knownState {
            case .confirming where !asked:
                asked = true
                if session.role == "initiator" { typed = try await typeCode() } else { try await confirm(code: session.code) }
            case .reviewing where !reviewed:
                reviewed = true
                try await review(session.peerMembers)
            case .paired:
                let id = session.peerID
                let short = id.count >= 8 ? String(id.prefix(4)) + "-" + String(id.dropFirst(4).prefix(4)) : id
                context.output.result(json: OutputDocument.paired(name: session.peerName, deviceID: id,
                                                                           code: session.code.isEmpty ? typed : session.code),
                                      text: "Paired with \(session.peerName) (\(short)).", compact: true)
                return PairExit.ok
            case .failed:
                if context.output.json { context.output.jsonLine(OutputDocument.pairingFailed(error: session.error)) }
                return switch session.error {
                case "rejected": context.fail("pairing was refused or cancelled; nothing was stored", PairExit.rejected)
                case "timed-out": context.fail("timed out; nothing was stored", PairExit.timedOut)
                case "verification-failed":
                    context.fail("the code did not match or the other side failed verification (a man in the middle?); nothing was stored",
                                 PairExit.failure)
                case "peer-removed":
                    context.fail("peer-removed: that machine was removed from the ring (or removed this one); nothing of the ring was sent",
                                 PairExit.rejected)
                case "contested":
                    context.fail("contested: a second machine tried to pair during the session (an attack?); nothing was stored",
                                 PairExit.failure)
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

    private func confirm(code: String) async throws(BatonClientError) {
        context.output.message("Code: \(code)")
        var accepted = confirmWithoutAsking
        if confirmWithoutAsking {
            context.output.message("Confirmed automatically (--yes).")
        } else {
            Output.write("Does the other machine show \(code)? [y/N] ", to: .standardError)
            let answer = (await Self.readAnswer() ?? "").whitespaceTrimmed.lowercased()
            accepted = answer == "y" || answer == "yes"
        }
        do {
            try await connection.confirmPairing(at: path, accepted: accepted)
        } catch where error.code == .notReady {
            // The session ended meanwhile (the other side refused or timed out): the next poll
            // reports how, with its exit status.
        }
        if !accepted { context.output.message("Refused.") }
    }

    /// The initiator: the person types the code the acceptor shows (never shown here, so a reflex cannot pass it).
    private func typeCode() async throws(BatonClientError) -> String {
        var code = typedCode
        if code == nil {
            Output.write("Type the code shown on \(peerLabel): ", to: .standardError)
            code = await Self.readAnswer()
        }
        let typed = (code ?? "").whitespaceTrimmed
        do {
            try await connection.confirmPairingCode(at: path, code: typed)
        } catch where error.code == .notReady {
            // The session ended meanwhile: the next poll reports how.
        }
        return typed
    }

    /// Keys and rosters are exchanged: the members the other ring brings are shown, merged only on a yes.
    private func review(_ members: [String]) async throws(BatonClientError) {
        context.output.message("The other ring brings \(members.count) member(s):")
        for member in members { context.output.message("  \(member)") }
        var accepted = confirmWithoutAsking
        if confirmWithoutAsking {
            context.output.message("Committed automatically (--yes).")
        } else {
            Output.write("Add them to this ring? [y/N] ", to: .standardError)
            let answer = (await Self.readAnswer() ?? "").whitespaceTrimmed.lowercased()
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

    /// Reads one line from standard input without blocking the caller's executor.
    static func readAnswer() async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue(label: "bt-pair.stdin").async { continuation.resume(returning: readLine()) }
        }
    }
}
