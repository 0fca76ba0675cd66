// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
import BatonCore
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `baton publish`: publishes an activity and holds it until interrupted (an activity lives only
/// as long as the connection that created it).
struct PublishCommand: Subcommand {
    static let name = "publish"
    static let summary = "publish an activity and keep it until SIGINT/SIGTERM (or --for SECONDS)"
    static let synopsis = "--type TYPE --title TITLE [--user-info JSON] [--url URL] [--version N] [--needs-save] [--current] [--for SECONDS]"
    static let details = """
        Options:
          --type TYPE        reverse-DNS activity type, e.g. org.example.Reader.reading
          --title TITLE      shown on the other device
          --user-info JSON   a JSON object; {"$bytes": "<base64>"} is bytes and
                             {"$date": "2026-11-29T12:00:00Z"} a date; integers must fit in
                             64 bits; write 1.0 for a whole double
          --url URL          http(s) page to open where no app continues the activity
          --version N        the app's own version of the activity, >= 0 (default 0)
          --needs-save       ask this process for fresh state before the activity leaves
          --current          make it the current activity
          --for SECONDS      stop after SECONDS instead of waiting for a signal

        Prints the activity's object path (with --json: {"Path", "Type", "Current", "Status",
        "LastError" (when set), "OnAir"}). With --current it then says on stderr whether the
        activity is on the air ("published TYPE") or not and why ("TYPE is held but not on the
        air: the radio is unavailable (...)"). Either way the activity is held until stopped and
        the exit status is 0: a machine without a radio can still hand it over by TCP once a
        peer knows of it; scripts read OnAir.
        """

    var activityType: String
    var title: String
    var userInfo: [String: PropertyValue] = [:]
    var url: URL?
    var version: Int64 = 0
    var needsSave = false
    var current = false
    var duration: Double?

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        var type: String?
        var title: String?
        while let option = arguments.popOption() {
            switch option.name {
            case "--type": type = try arguments.value(for: option)
            case "--title": title = try arguments.value(for: option)
            case "--user-info":
                do {
                    userInfo = try UserInfoJSON.parse(try arguments.value(for: option))
                } catch let error as UserInfoJSONError {
                    throw UsageError("--user-info: \(error)")
                } catch let error as UsageError {
                    throw error
                } catch {
                    throw UsageError("--user-info: \(error)")
                }
            case "--url":
                let text = try arguments.value(for: option)
                guard let parsed = URL(string: text), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                    throw UsageError("--url: \(text) is not an http or https URL")
                }
                url = parsed
            case "--version":
                let text = try arguments.value(for: option)
                guard let number = Int64(text), number >= 0 else { throw UsageError("--version: \(text) is not an integer >= 0") }
                version = number
            case "--needs-save":
                try arguments.flag(option)
                needsSave = true
            case "--current":
                try arguments.flag(option)
                current = true
            case "--for":
                let text = try arguments.value(for: option)
                guard let seconds = Double(text), seconds.isFinite, seconds >= 0 else {
                    throw UsageError("--for: \(text) is not a number of seconds")
                }
                duration = seconds
            default:
                throw UsageError("unknown option \(option.name)")
            }
        }
        guard let type else { throw UsageError("--type is required") }
        guard let title else { throw UsageError("--title is required") }
        activityType = type
        self.title = title
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        // Signals are routed to a dispatch source before anything is published, so an early
        // SIGTERM still ends the activity cleanly.
        let stop = StopSignal(after: duration)
        let connection = try context.connect()
        let activity = connection.makeActivity(type: activityType)
        activity.title = title
        activity.userInfo = userInfo
        activity.webpageURL = url
        activity.version = version
        activity.needsSave = needsSave
        let path: String
        var report: OnAirReport?
        if current {
            try await activity.becomeCurrent()
            path = activity.objectPath ?? ""
            report = try await OnAirReport.read(connection, path: path)
        } else {
            path = try await activity.publish()
        }
        var status = report?.status ?? "idle"
        if report == nil, let info = try? await connection.activity(at: path) { status = info.status }
        context.output.result(json: OutputDocument.published(path: path, type: activityType, current: current, status: status,
                                                             lastError: report?.lastError, onAir: report?.isOnAir ?? false),
                              text: path)
        let stopping = duration.map { "stopping after \($0) s" } ?? "stop with Ctrl-C"
        if let reason = report?.reason {
            context.output.message("\(activityType) is held but not on the air: \(reason); \(stopping)")
        } else if report == nil {
            context.output.message("published \(activityType) (not current, so not advertised); \(stopping)")
        } else {
            context.output.message("published \(activityType), on the air; \(stopping)")
        }
        let reason = await stop.wait()
        await activity.invalidate()
        connection.close()
        context.output.message("stopped (\(reason)); activity invalidated")
        return ExitStatus.success
    }
}

/// Waits for SIGINT, SIGTERM or an optional deadline, whichever comes first. Used by one task only.
final class StopSignal {
    private let sources: [any DispatchSourceSignal]
    private let stream: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation

    init(after seconds: Double?) {
        (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingOldest(1))
        let continuation = continuation
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(name) }
            source.activate()
            sources.append(source)
        }
        self.sources = sources
        if let seconds {
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { continuation.yield("--for elapsed") }
        }
    }

    /// The reason for stopping.
    func wait() async -> String {
        for await reason in stream { return reason }
        return "stream ended"
    }

    deinit {
        for source in sources { source.cancel() }
    }
}
