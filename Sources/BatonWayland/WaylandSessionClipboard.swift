// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import Dispatch
import Glibc

/// The session clipboard on Wayland (docs/clipboard.md, "Clipboard on Wayland"): one connection to
/// the compositor, spoken in the Wayland wire protocol directly, with a data-control device on the
/// first seat (ext-data-control-v1 when offered, else wlr-data-control-unstable-v1). It follows the
/// CLIPBOARD selection only: offers of the primary selection are destroyed unread, and it never
/// sets one. The event loop waits on the socket through BatonReadiness; timers exist only while a
/// transfer waits for its other side.
public final class WaylandSessionClipboard: SessionClipboard {
    public struct Configuration: Sendable {
        /// How long the client that copied may take to write the next bytes of an answer.
        public var answerTimeout: Duration
        /// How long a pasting client may take to read the next bytes of our answer.
        public var requestorTimeout: Duration
        /// How long the compositor may take to answer at the start.
        public var connectTimeout: Duration

        public init(answerTimeout: Duration = .seconds(15), requestorTimeout: Duration = .seconds(60),
                    connectTimeout: Duration = .seconds(15)) {
            self.answerTimeout = answerTimeout
            self.requestorTimeout = requestorTimeout
            self.connectTimeout = connectTimeout
        }
    }

    public let events: AsyncStream<ClipboardEvent>
    /// The data-control protocol in use.
    public let dataControlProtocol: WaylandDataControlProtocol
    private let core: WaylandClipboardCore

    /// Connects to the compositor `environment` names (WAYLAND_DISPLAY, XDG_RUNTIME_DIR). Fails
    /// with `.unavailable` when there is none or it offers no data control (GNOME's Mutter).
    public init(environment: [String: String], configuration: Configuration = Configuration()) throws(ClipboardError) {
        let (stream, continuation) = AsyncStream<ClipboardEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        events = stream
        do {
            core = try WaylandClipboardCore(environment: environment, configuration: configuration, events: continuation)
        } catch {
            continuation.finish()
            throw .unavailable(error.availability.description)
        }
        dataControlProtocol = core.kind
    }

    deinit { core.close(reason: "the clipboard adapter closed") }

    /// Closes the connection: pending reads fail, the offer ends, `events` finishes.
    public func close() { core.close(reason: "the clipboard adapter closed") }

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

/// The names a media type is offered under on Wayland, and the one read for it: text under all of
/// its common names (UTF-8 ones first), other types under their own.
enum WaylandTypeNames {
    /// Text's names in the order a reader prefers them.
    static let textNames = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain", "STRING", "TEXT"]

    /// The name to receive `type` through, of those the copying client offers.
    static func name(for type: String, offered names: [String]) -> String? {
        guard type == ClipboardTypes.text else { return names.contains(type) ? type : nil }
        for preferred in textNames {
            if let match = names.first(where: { $0 == preferred || $0.lowercased() == preferred.lowercased() }) { return match }
        }
        return nil
    }
}
