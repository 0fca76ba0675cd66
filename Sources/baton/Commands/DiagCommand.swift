// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `baton diag rssi`: every advertiser the daemon hears, for people (a table), scripts
/// (--json: JSON Lines) and bug reports (--output FILE). Never prints key material.
struct DiagCommand: Subcommand {
    static let name = "diag"
    static let summary = "diagnostics: `diag rssi` dumps every advertiser heard with its RSSI"
    static let synopsis = "rssi [--watch] [--interval SECONDS] [--output FILE]"
    static let details = """
        Columns: address and type, RSSI last/min/max/smoothed (127 from the controller means
        unknown and is never shown as a value), TX power, company ID, what it is (a ring member
        by short id, another Baton ring, Apple Continuity, Microsoft CDP, Google Fast Pair...),
        time since last heard, reports.
          --watch             a new dump every interval, redrawn in place on a terminal only
          --interval SECONDS  for --watch, 0.2-60 (default 1)
          --output FILE       write one dump plus the daemon's status and radio notices to
                              FILE, for bug reports (with --json one JSON document: Version,
                              State, Radio, Adapter, RadioNotices, Advertisers)
        """

    var watch = false
    var interval = 1.0
    var output: String?

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        var topic: String?
        while !arguments.isEmpty {
            guard let option = arguments.popOption() else {
                guard topic == nil, let word = try arguments.popPositional() else { try arguments.expectEnd(); break }
                topic = word
                continue
            }
            switch option.name {
            case "--watch":
                try arguments.flag(option)
                watch = true
            case "--interval":
                let text = try arguments.value(for: option)
                guard let seconds = Double(text), seconds >= 0.2, seconds <= 60 else { throw UsageError("--interval takes 0.2 to 60 seconds") }
                interval = seconds
            case "--output":
                output = try arguments.value(for: option)
            default:
                throw UsageError("unknown option \(option.name)")
            }
        }
        guard let topic else { throw UsageError("diag needs a topic: rssi") }
        guard topic == "rssi" else { throw UsageError("unknown diagnostics topic \(topic) (known: rssi)") }
        if watch && output != nil { throw UsageError("--watch and --output do not go together") }
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let format = context.output.json ? "json" : "text"
        if let output {
            var report = try await connection.dumpRadio(format: format)
            let status = try await connection.status()
            let notices = try await connection.radioNotices()
            if format == "text" {
                report = "baton \(status.version), daemon \(status.state), radio \(status.radio), adapter \(status.adapter)\n"
                    + report + (notices.isEmpty ? "" : "\nradio notices:\n" + notices.map { "  " + $0 }.joined(separator: "\n") + "\n")
            } else {
                // One JSON document for a bug report: the daemon's state and every advertiser heard
                // (before, only the advertisers' JSON Lines: an empty file when none was heard).
                var advertisers: [JSONValue] = []
                for line in report.split(separator: "\n") where !line.isEmpty {
                    guard let value = try? JSONValue.parse(String(line)) else {
                        throw BatonClientError(.failed, "batond's radio dump is not JSON Lines")
                    }
                    advertisers.append(value)
                }
                report = JSONValue.object([
                    (key: "Version", value: .string(status.version)), (key: "State", value: .string(status.state)),
                    (key: "Radio", value: .string(status.radio)), (key: "Adapter", value: .string(status.adapter)),
                    (key: "RadioNotices", value: .array(notices.map { .string($0) })),
                    (key: "Advertisers", value: .array(advertisers)),
                ]).rendered(pretty: true) + "\n"
            }
            do {
                try report.write(toFile: output, atomically: true, encoding: .utf8)
            } catch {
                context.output.message("baton diag: cannot write \(output): \(fileErrorReason(error))")
                return ExitStatus.failure
            }
            context.output.message("wrote \(output)")
            return ExitStatus.success
        }
        repeat {
            let dump = try await connection.dumpRadio(format: format)
            // Redrawn in place only on a terminal: a pipe or file gets the dumps one after another.
            if watch && format == "text" && isatty(1) == 1 { Output.write("\u{1B}[H\u{1B}[2J", to: .standardOutput) }
            Output.write(dump, to: .standardOutput)
            if watch { try? await Task.sleep(for: .milliseconds(Int(interval * 1000))) }
        } while watch
        return ExitStatus.success
    }
}
