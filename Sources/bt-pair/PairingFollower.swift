#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonClient
import BatonCommandLine
import Dispatch
import Foundation

/// Follows a pairing session to its end: shows the code, asks, reports. Ctrl-C cancels the
/// session (nothing is stored) and exits 2.
struct PairingFollower {
    let connection: BatonConnection
    let context: CommandContext
    let path: String
    let confirmWithoutAsking: Bool

    func follow() async throws(BatonClientError) -> Int32 {
        let interrupt = cancelOnInterrupt()
        defer { interrupt.cancel() }
        var asked = false
        while true {
            let session = try await connection.pairingSession(at: path)
            switch session.knownState {
            case .confirming where !asked:
                asked = true
                try await confirm(code: session.code)
            case .paired:
                let id = session.peerID
                let short = id.count >= 8 ? String(id.prefix(4)) + "-" + String(id.dropFirst(4).prefix(4)) : id
                context.output.result(json: OutputDocument.paired(name: session.peerName, deviceID: id, code: session.code),
                                      text: "Paired with \(session.peerName) (\(short)).", compact: true)
                return PairExit.ok
            case .failed:
                if context.output.json { context.output.jsonLine(OutputDocument.pairingFailed(error: session.error)) }
                return switch session.error {
                case "rejected": context.fail("pairing was refused or cancelled; nothing was stored", PairExit.rejected)
                case "timed-out": context.fail("timed out; nothing was stored", PairExit.timedOut)
                case "verification-failed":
                    context.fail("the other side failed verification (a man in the middle?); nothing was stored", PairExit.failure)
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
            let answer = (await Self.readAnswer() ?? "").trimmingCharacters(in: .whitespaces).lowercased()
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
