// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
internal import CXCB
import BatonReadiness
import Dispatch
import Glibc

/// The session clipboard on X11 (docs/clipboard.md): one connection to the display, one invisible
/// window, XFixes reports of who owns CLIPBOARD (PRIMARY is never watched), conversions on request
/// and INCR both ways. The event loop waits on the connection's descriptor through BatonReadiness;
/// timers exist only while a transfer waits for its other side.
public final class X11SessionClipboard: SessionClipboard {
    public struct Configuration: Sendable {
        /// How long an owner may take to answer one request, or to send the next INCR chunk.
        public var answerTimeout: Duration
        /// How long a pasting app may take to read the next INCR chunk before its transfer is dropped.
        public var requestorTimeout: Duration
        /// The most bytes of one property written to a pasting app at once; more goes by INCR (also
        /// bounded by the server's maximum request length).
        public var chunkBytes: Int
        /// The display is XWayland in GNOME's Wayland session: refuse the read GNOME's Mutter makes
        /// of each new clipboard owner of ours to keep a copy, so that an offer stays lazy, and count
        /// the copy Mutter puts back after a secret copy's owner went as secret too (its copy lacks
        /// the secrecy marker). `MutterClipboardManager`.
        public var mutterXWayland: Bool

        public init(answerTimeout: Duration = .seconds(15), requestorTimeout: Duration = .seconds(60),
                    chunkBytes: Int = 256 << 10, mutterXWayland: Bool = false) {
            self.answerTimeout = answerTimeout
            self.requestorTimeout = requestorTimeout
            self.chunkBytes = chunkBytes
            self.mutterXWayland = mutterXWayland
        }
    }

    /// Transfers that went in chunks (INCR), both ways, since the start: a copy of the counts.
    public struct Statistics: Sendable, Equatable {
        /// Reads whose owner sent INCR.
        public var incrementalReads = 0
        /// Answers to pasting apps sent by INCR, and their chunks.
        public var incrementalSends = 0
        public var chunksSent = 0
        /// INCR answers dropped because the pasting app stopped reading (`requestorTimeout`).
        public var abandonedSends = 0
        /// Reads by GNOME's clipboard manager refused (`mutterXWayland`).
        public var refusedManagerReads = 0
        /// Changes counted as secret because they followed a secret copy as Mutter's restored copy of it.
        public var restoredSecrets = 0
    }

    public let events: AsyncStream<ClipboardEvent>
    private let core: X11ClipboardCore

    /// Connects to `display` (nil: `$DISPLAY`). `authority` names the X authority file to take the
    /// display's cookie from (the session's XAUTHORITY; `X11Authority`); nil leaves it to libxcb
    /// (the process's XAUTHORITY, else ~/.Xauthority).
    public init(display: String? = nil, authority: String? = nil, configuration: Configuration = Configuration()) throws(ClipboardError) {
        var cookie: X11Cookie?
        if let authority, let display {
            do throws(X11AuthorityError) {
                cookie = try X11Authority.cookie(file: authority, display: display)
            } catch {
                throw .unavailable("the X authority file \(authority) (XAUTHORITY) cannot be used: \(error)")
            }
        }
        let (stream, continuation) = AsyncStream<ClipboardEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        events = stream
        core = try X11ClipboardCore(display: display, cookie: cookie, configuration: configuration, events: continuation)
    }

    deinit { core.close() }

    /// Closes the connection: pending reads fail, the offer ends, `events` finishes.
    public func close() { core.close() }

    public func read(type: String, limit: Int) async throws(ClipboardError) -> [UInt8] {
        let core = core
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[UInt8], ClipboardError>, Never>) in
            core.queue.async { core.read(type: type, limit: max(0, limit)) { continuation.resume(returning: $0) } }
        }
        return try result.get()
    }

    @discardableResult
    public func offer(types: [String], provide: @escaping @Sendable (String) async throws -> [UInt8])
        async throws(ClipboardError) -> [ClipboardTypeList.Dropped] {
        let list = ClipboardTypeList(types)
        guard !list.types.isEmpty || !list.markers.isEmpty else { throw .nothingToOffer }
        let core = core
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, ClipboardError>, Never>) in
            core.queue.async { core.offer(list, provide: provide) { continuation.resume(returning: $0) } }
        }
        try result.get()
        return list.dropped
    }

    public var statistics: Statistics {
        get async {
            let core = core
            return await withCheckedContinuation { continuation in
                core.queue.async { continuation.resume(returning: core.statistics) }
            }
        }
    }

    public func withdraw() async {
        let core = core
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            core.queue.async {
                core.withdraw()
                continuation.resume()
            }
        }
    }
}
