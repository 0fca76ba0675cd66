// SPDX-License-Identifier: GPL-2.0-or-later
// Thread is only in full Foundation.
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import BatonClient
import BatonCommandLine
import BatonDBus
import BatonPublishers
import Synchronization

/// `baton-browser-host`: started by the browser for the Baton extension, one per browser profile.
/// The browser passes its own arguments (the extension's origin), so the bus comes from the
/// environment: BATON_BUS (session|system|ADDRESS, default system) and BATON_BUS_NAME. Publishes
/// only while publishers.conf says `browser = on`.
public enum BrowserHostProgram {
    public static func run(environment: [String: String]) async -> Int32 {
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
        let session = BrowserHostSession(connection: connection,
                                         isEnabled: { PublisherSettings.load(environment: environment).isEnabled(.browser) }, log: log)
        do {
            // Pages continued from another device open in this browser, scroll position and all.
            _ = try await connection.registerHandler(for: [webBrowsingActivityType]) { continued in
                guard let request = BrowserHostSession.openRequest(for: continued) else { return }
                do { try output.send(request.encoded()) } catch { log("cannot ask the browser to open a page: \(error)") }
            }
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
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                continuation.yield(Array(buffer[..<count]))
            }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}

/// Whole frames to stdout, one writer at a time (handler calls arrive on any thread).
final class StandardOutputWriter: Sendable {
    private let lock = Mutex(())

    func send(_ message: [UInt8]) throws(NativeMessageFramingError) {
        let frame = try NativeMessageFraming.frame(message)
        lock.withLock { _ in
            var offset = 0
            while offset < frame.count {
                let written = frame.withUnsafeBytes { write(1, $0.baseAddress! + offset, frame.count - offset) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}
