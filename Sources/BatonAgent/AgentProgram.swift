// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonClient
import BatonCommandLine
import BatonDBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes log lines to standard error (the journal, under systemd).
public struct StandardErrorLog: AgentLog {
    public init() {}
    public func log(_ line: String) {
        var text = "baton-agent: " + line + "\n"
        text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
    }
}

/// `baton-agent`'s command line and lifetime; the executable only calls `run`.
public enum AgentProgram {
    public static let usage = """
        usage: baton-agent [--bus session|system|ADDRESS] [--bus-name NAME] [--version] [--help]
        Shows batond's suggestions as desktop notifications and launches handler apps in this session;
        offers the documents you open and shares the clipboard when turned on (baton publishers, baton clipboard).
          --bus session|system|ADDRESS  the bus batond is on (default: system)
          --bus-name NAME               batond's bus name (default: org.baton)
          --version                     print the version and exit
          -h, --help                    print this help and exit
        The notification server and org.baton.Agent1 are on the session bus (DBUS_SESSION_BUS_ADDRESS).
        Exit status: 0 stopped or another agent runs in this session, 1 cannot start, 64 usage error.
        """

    /// Runs until killed; returns an exit status only when it cannot start.
    public static func run(arguments: [String]) async -> Int32 {
        let logger = StandardErrorLog()
        let options: GlobalOptions
        do throws(UsageError) {
            let (parsed, rest) = try GlobalOptions.extract(from: arguments)
            options = parsed
            if options.help {
                print(usage)
                return 0
            }
            if rest == ["--version"] {
                print("baton-agent \(BatonRelease.version)")
                return 0
            }
            if let first = rest.first {
                throw UsageError(first.hasPrefix("-") ? "unknown option \(first)" : "unexpected argument \(first)")
            }
        } catch {
            let text = CommandLineProgram.usageFailureText(program: "baton-agent", error.message)
            text.withCString { _ = write(2, $0, strlen($0)) }
            return ExitStatus.usage
        }
        do {
            let session = try DBusConnection(bus: .session)
            guard try await AgentService.export(on: session, logger: logger) else {
                logger.log("another baton-agent already runs in this session")
                return 0
            }
            let daemon = try BatonConnection(bus: options.bus, busName: options.busName)
            let agent = SuggestionAgent(daemon: daemon, session: session, urlOpener: DesktopURLOpener(), launchesApps: true, logger: logger)
            try await agent.start()
            // Offers the document just opened when the user turned it on (docs/publishers.md).
            let recentDocuments = RecentDocumentsPublisher(daemon: daemon, environment: ProcessInfo.processInfo.environment, logger: logger)
            do { try await recentDocuments.start() } catch { logger.log("not following the recently-used list: \(error)") }
            // Shares the session clipboard with the ring while publishers.conf says `clipboard = on`.
            let clipboard = ClipboardBridge(daemon: daemon, environment: ProcessInfo.processInfo.environment, logger: logger)
            do { try await clipboard.start() } catch { logger.log("not sharing the clipboard: \(error)") }
            if let directory = RecentDocumentReceiver.defaultDirectory(environment: ProcessInfo.processInfo.environment) {
                let receiver = RecentDocumentReceiver(directory: directory, opener: DesktopURLOpener())
                // Registered again whenever batond restarts (a new owner of its bus name).
                let handler = ClosureActivityHandler { activity in
                    do { try await receiver.receive(activity) } catch { logger.log("opening a received document failed: \(error)") }
                }
                do {
                    _ = try await daemon.registerHandlerAcrossRestarts(
                        handler, for: [RecentDocumentsPublisher.activityType],
                        registered: { logger.log("registered as handler for \(RecentDocumentsPublisher.activityType)") },
                        registrationFailed: { error in logger.log("not receiving recent documents until batond restarts: \(error)") })
                } catch {
                    logger.log("not receiving recent documents: \(error)")
                }
            }
            // What the session's players play, and media continued from elsewhere (docs/media.md).
            let media = await MediaAgentParts.start(daemon: daemon, session: session, environment: ProcessInfo.processInfo.environment, logger: logger)
            logger.log("watching \(options.busName) for suggestions")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
            withExtendedLifetime(media) {}
            return 0
        } catch {
            logger.log("cannot start: \(error)")
            return 1
        }
    }
}
