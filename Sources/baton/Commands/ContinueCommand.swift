// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonClient
import BatonCommandLine

/// `baton continue`: continues a nearby activity (a suggestion object) on this machine.
struct ContinueCommand: Subcommand {
    static let name = "continue"
    static let summary = "continue a nearby activity here (SUGGESTION: the member's name or the object path)"
    static let synopsis = "[--browser] SUGGESTION"
    static let details = """
        SUGGESTION is the ring member the activity comes from (its name as `baton suggestions`
        and `bt-pair list` show it, e.g. laptop, or its device id), or an org.baton.Suggestion1
        object path as listed by `baton suggestions`, e.g. /org/baton/suggestion/1. Two members
        of one name are refused with each one's id and path. Prints the outcome: delivered, declined, no-handler,
        no-agent (an installed app could take it, but no baton-agent runs in your session to
        start it), launch-failed or failed (with --json: {"Continued": PATH, "Outcome": OUTCOME}).
        Exit status: 0 delivered; when the continuation failed, its category:
        10 cancelled (dismissed, or the handler declined), 11 unreachable, 12 interrupted,
        13 versionUnsupported, 14 noLongerCurrent, 15 timedOut; 1 for any other failure.
        Every category but noLongerCurrent and versionUnsupported may be retried.
        --browser takes a suggestion whose Fallback is "browser" (no local app, a webpage URL):
        the source is told and the URL is printed (outcome open-url; with --json also
        "WebpageURL") for the caller to open, e.g. with xdg-open.
        """

    var selector: SuggestionSelector
    var browser = false

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        while let option = arguments.popOption() {
            guard option.name == "--browser" else { throw UsageError("unknown option \(option.name)") }
            try arguments.flag(option)
            browser = true
        }
        guard let argument = try arguments.popPositional() else { throw UsageError("SUGGESTION is required") }
        selector = try SuggestionSelector(parsing: argument)
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let suggestion: String
        switch selector {
        case .path(let path): suggestion = path
        case .member:
            let candidates = try await connection.suggestions().map {
                SuggestionSelector.Candidate(path: $0.path, device: $0.device, deviceName: $0.deviceName, activityType: $0.activityType)
            }
            switch selector.resolve(among: candidates) {
            case .success(let path): suggestion = path
            case .failure(let refusal):
                context.output.message(refusal.message)
                return ExitStatus.failure
            }
        }
        if browser {
            let url = try await connection.continueSuggestionInBrowser(at: suggestion)
            context.output.result(json: OutputDocument.continuedInBrowser(suggestion, url: url), text: url)
            return ExitStatus.success
        }
        // A document that comes with the activity shows a bar on a terminal (never with --json).
        let bar = context.output.json || isatty(STDERR_FILENO) == 0 ? nil : try? await connection.documentProgress()
        let drawing = bar.map { updates in
            Task {
                for await update in updates { ProgressBar.draw(update) }
            }
        }
        let result: Result<String, BatonClientError>
        do throws(BatonClientError) { result = .success(try await connection.continueSuggestionOutcome(at: suggestion)) } catch { result = .failure(error) }
        drawing?.cancel()
        if drawing != nil { ProgressBar.end() }
        let outcome = try result.get()
        context.output.result(json: OutputDocument.continued(suggestion, outcome: outcome), text: outcome)
        switch outcome {
        case "delivered": return ExitStatus.success
        // The handler's WillContinue said no: the handler cancelled.
        case "declined": return Self.exitStatus(.cancelled)
        case "no-agent":
            context.output.message("no baton-agent runs in your session to start the app: start baton-agent, or the app itself")
            return ExitStatus.failure
        default: return ExitStatus.failure
        }
    }

    /// The exit status of a failed continuation, by category (documented in `details` and docs/dbus-api.md).
    static func exitStatus(_ category: BatonClientError.ContinuationCategory) -> Int32 {
        switch category {
        case .cancelled: 10
        case .unreachable: 11
        case .interrupted: 12
        case .versionUnsupported: 13
        case .noLongerCurrent: 14
        case .timedOut: 15
        }
    }
}

/// `baton continue`'s document bar on stderr: "document  42% [########......] 12.3/29.0 MB".
enum ProgressBar {
    static let width = 30

    static func line(_ update: DocumentProgressUpdate) -> String {
        let fraction = update.total == 0 ? 1 : Double(update.received) / Double(update.total)
        let filled = min(width, Int(fraction * Double(width)))
        let percent = Int(fraction * 100)
        let megabytes = { (bytes: UInt64) in String(Double(bytes / 100_000) / 10) }
        return "document \(percent)% [" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            + "] \(megabytes(update.received))/\(megabytes(update.total)) MB"
    }

    static func draw(_ update: DocumentProgressUpdate) {
        // Carriage return and erase-line redraw one line in place.
        Output.write("\r\u{1B}[2K" + line(update), to: .standardError)
    }

    /// Ends the bar's line (nothing when none was drawn: only a cleared line).
    static func end() {
        Output.write("\r\u{1B}[2K", to: .standardError)
    }
}
