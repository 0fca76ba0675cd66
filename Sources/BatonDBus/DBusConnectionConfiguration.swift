// SPDX-License-Identifier: LGPL-2.1-or-later
/// What one connection may hold and do at once, given when it is made. The library changes
/// nothing process-wide: no malloc setting, no heap trim. A process that wants memory given back
/// after a connection refused a large message or served a burst of calls passes `memoryReleasable`
/// (batond does; an app linking BatonClient gets the defaults and nothing else).
public struct DBusConnectionConfiguration: Sendable {
    /// Incoming calls and signals over this size are skipped as they stream in (never buffered): a
    /// call is answered with its method's `DBusArgumentBudget.tooLargeErrorName`. nil: the
    /// protocol's own limit (128 MiB).
    public var maxIncomingMessageBytes: Int?
    /// Replies to this connection's own calls over this size are skipped as they stream in, and the
    /// call fails at once with `DBusError.replyTooLargeName` (not a timeout). nil: the protocol's
    /// own limit. Replies are never held back by `outboxHighWater`: they are read while incoming
    /// calls wait, up to `heldCallBytes` of waiting calls.
    public var maxReplyBytes: Int?
    /// Replies not yet taken by the bus over this many bytes pause incoming calls (not replies to
    /// our own calls) until the bus has taken them down to `outboxLowWater`.
    public var outboxHighWater: Int
    public var outboxLowWater: Int
    /// Incoming calls read (so that replies behind them are reached) while calls are paused, in
    /// bytes; beyond it the socket is not read until the outbox drains.
    public var heldCallBytes: Int
    /// Handlers of one caller running at once (its further calls wait their turn, in order).
    public var runningPerSender: Int
    /// Handlers of all callers running at once.
    public var runningAtMost: Int
    /// Calls of one caller being served (running or waiting); more are refused with LimitsExceeded.
    public var maxHandlersPerSender: Int
    /// Handlers running at once that make a burst worth calling `memoryReleasable` after.
    public var burstHandlers: Int
    /// Called (on the connection queue, must return at once) after a message was refused for its
    /// size and after a burst of handlers ended: memory was freed that the process may want to give
    /// back to the system. nil: nothing is done.
    public var memoryReleasable: (@Sendable () -> Void)?

    /// The defaults: no size limit beyond the protocol's, the other limits as `service`.
    public init(maxIncomingMessageBytes: Int? = nil, maxReplyBytes: Int? = nil,
                outboxHighWater: Int = 4 << 20, outboxLowWater: Int = 1 << 20, heldCallBytes: Int = 4 << 20,
                runningPerSender: Int = 8, runningAtMost: Int = 256, maxHandlersPerSender: Int = 128,
                burstHandlers: Int = 64, memoryReleasable: (@Sendable () -> Void)? = nil) {
        self.maxIncomingMessageBytes = maxIncomingMessageBytes
        self.maxReplyBytes = maxReplyBytes
        self.outboxHighWater = max(1, outboxHighWater)
        self.outboxLowWater = min(max(0, outboxLowWater), self.outboxHighWater)
        self.heldCallBytes = max(0, heldCallBytes)
        self.runningPerSender = max(1, runningPerSender)
        self.runningAtMost = max(1, runningAtMost)
        self.maxHandlersPerSender = max(1, maxHandlersPerSender)
        self.burstHandlers = max(1, burstHandlers)
        self.memoryReleasable = memoryReleasable
    }

    /// batond's choice for every connection it opens (its own name, BlueZ, Avahi; any local user
    /// can send each of them calls and unicast signals), documented in docs/dbus-api.md:
    /// - messages in: 8 MiB (the largest legitimate one, a userInfo call at its budget of 132,096
    ///   values, marshals to about 3.2 MB); replies to its own calls: 8 MiB too (BlueZ's and Avahi's
    ///   are far smaller);
    /// - outbox 4 MiB high, 1 MiB low (a client pipelining thousands of Introspect calls made it
    ///   hold 117 MiB before); 4 MiB of calls read while they wait, so BlueZ's replies get through;
    /// - 8 handlers per caller at once, 256 in all, 128 calls of one caller served (dbus-daemon's
    ///   max_replies_per_connection, so a client that works there never meets it).
    /// batond adds its `memoryReleasable` (BatonService's DaemonMemoryPolicy).
    public static let service = DBusConnectionConfiguration(maxIncomingMessageBytes: 8 << 20, maxReplyBytes: 8 << 20)

    /// The incoming limit as the framer applies it (at most the protocol's).
    var incomingLimit: Int { min(maxIncomingMessageBytes ?? DBusWireWriter.maxMessageBytes, DBusWireWriter.maxMessageBytes) }
    var replyLimit: Int { min(maxReplyBytes ?? DBusWireWriter.maxMessageBytes, DBusWireWriter.maxMessageBytes) }
}
