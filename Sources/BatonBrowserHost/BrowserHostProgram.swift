// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonClient
import BatonCommandLine
import BatonDBus
import BatonPublishers
import BatonSystem
import Synchronization

/// `baton-browser-host`: started by the browser for the Baton extension, one per browser profile.
/// The browser passes its own arguments (the extension's origin), so the bus comes from the
/// environment: BATON_BUS (session|system|ADDRESS, default system) and BATON_BUS_NAME. Publishes
/// only while publishers.conf says `browser = on`.
public enum BrowserHostProgram {
    public static let usage = """
        usage: baton-browser-host [ORIGIN...] | --version | --help
        The native messaging host of the Baton browser extension: the browser starts it, one per
        profile, and talks to it on stdin and stdout (docs/publishers.md). It is not run by hand.
        The browser's own arguments (the extension's origin) are ignored.
          BATON_BUS        the bus batond is on: session, system (default) or a D-Bus address
          BATON_BUS_NAME   batond's bus name (default: org.baton)
          --version        print the version and exit
          -h, --help       print this help and exit
        Exit status: 0 the browser closed the stream, 1 batond's bus cannot be reached, 64 usage error.
        """

    /// What the command line asks for: the browser's own arguments never start with "-".
    public enum Invocation: Equatable, Sendable {
        case serve, showVersion, showHelp
        case usageError(String)
    }

    public static func invocation(_ arguments: [String]) -> Invocation {
        guard let first = arguments.first, first.hasPrefix("-") else { return .serve }
        switch first {
        case "--version" where arguments.count == 1: return .showVersion
        case "--help" where arguments.count == 1, "-h" where arguments.count == 1: return .showHelp
        case "--version", "--help", "-h": return .usageError("\(first) takes no arguments")
        default: return .usageError("unknown option \(first)")
        }
    }

    public static func run(arguments: [String] = [], environment: [String: String]) async -> Int32 {
        switch invocation(arguments) {
        case .serve: break
        case .showVersion:
            print("baton-browser-host \(BatonRelease.version)")
            return 0
        case .showHelp:
            print(usage)
            return 0
        case .usageError(let message):
            let text = CommandLineProgram.usageFailureText(program: "baton-browser-host", message)
            text.withCString { _ = write(2, $0, strlen($0)) }
            return ExitStatus.usage
        }
        let log: @Sendable (String) -> Void = { line in
            var text = "baton-browser-host: " + line + "\n"
            text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
        }
        let connection: BatonConnection
        do {
            let bus = try GlobalOptions.parseBus(environment["BATON_BUS"] ?? "system")
            connection = try BatonConnection(bus: bus, busName: environment["BATON_BUS_NAME"] ?? BatonConnection.defaultBusName)
        } catch {
            log("cannot reach batond: \(error)")
            return 1
        }
        let output = StandardOutputWriter()
        // Continued elsewhere: the page's media pauses here, unless publishers.conf says
        // `media-pause-source = off` (docs/media.md); the tab stays open either way.
        let pauseMedia: @Sendable () -> Void = {
            guard PublisherSettings.load(environment: environment).mediaPausesSource else {
                log("not pausing the page's media (media-pause-source = off)")
                return
            }
            do { try output.send(BrowserPauseRequest().encoded()) } catch { log("cannot ask the browser to pause the page's media: \(error)") }
        }
        let session = BrowserHostSession(connection: connection,
                                         isEnabled: { PublisherSettings.load(environment: environment).isEnabled(.browser) }, log: log,
                                         pauseMedia: pauseMedia)
        // Pages continued from another device open in this browser, scroll position, media time and
        // all; registered again whenever batond restarts (a new owner of its bus name). WillContinue,
        // asked before the fetch, starts this machine's measure of the handoff.
        let clock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
        let askedAt = Mutex<Double?>(nil)
        let opener = ClosureActivityHandler(willContinue: { _, _ in
            askedAt.withLock { $0 = clock() }
            return true
        }, continue: { continued in
            let now = clock()
            let asked = askedAt.withLock { asked in
                defer { asked = nil }
                return asked ?? now
            }
            guard let request = BrowserHostSession.openRequest(for: continued, now: now, askedAt: asked, log: log) else { return }
            do { try output.send(request.encoded()) } catch { log("cannot ask the browser to open a page: \(error)") }
        })
        do {
            _ = try await connection.registerHandlerAcrossRestarts(
                opener, for: [webBrowsingActivityType],
                registered: { log("registered as handler for \(webBrowsingActivityType)") },
                registrationFailed: { error in log("not registered as handler for \(webBrowsingActivityType) until batond restarts: \(error)") })
        } catch {
            log("not registered as handler for \(webBrowsingActivityType): \(error)")
        }
        let decoder = Mutex(NativeMessageDecoder())
        for await chunk in standardInputChunks() {
            let messages: [[UInt8]]
            do { messages = try decoder.withLock { decoder throws(NativeMessageFramingError) in try decoder.feed(chunk) } } catch {
                log("the browser's stream is out of step (\(error)); stopping")
                break
            }
            for message in messages { await session.handle(message) }
        }
        await session.browserClosed()
        connection.close()
        return 0
    }

    /// Reads stdin on its own thread (a blocking read would hold a cooperative-pool thread); the
    /// stream finishes at end of file, which is how the browser says it has closed.
    static func standardInputChunks() -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .unbounded)
        DetachedThread.start {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            FileDescriptor.borrowing(0) { input in
                while true {
                    // A failed read ends the stream like the end of file.
                    let count = buffer.withUnsafeMutableBytes { raw in (try? input.read(into: raw)) ?? 0 }
                    guard count > 0 else { break }
                    continuation.yield(Array(buffer[..<count]))
                }
            }
            continuation.finish()
        }
        return stream
    }
}

/// Whole frames to stdout, one writer at a time (handler calls arrive on any thread).
final class StandardOutputWriter: Sendable {
    private let lock = Mutex(())

    func send(_ message: [UInt8]) throws(NativeMessageFramingError) {
        let frame = try NativeMessageFraming.frame(message)
        lock.withLock { _ in
            // The browser went away when stdout fails; stdin's end of file says so too.
            FileDescriptor.borrowing(1) { output in _ = try? output.writeAll(frame) }
        }
    }
}
