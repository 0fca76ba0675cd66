import BatonDBus

/// The ring side of the daemon, wired in dependency order: the ring (already started) has no
/// dependencies; the transfer reads the ring and reaches the activities through a protocol; the
/// continuation uses all three; the D-Bus glue (RingBus) calls them. Stopped in reverse order.
public struct DaemonParts: Sendable {
    public let ring: RingService
    public let transfer: TransferService
    public let continuation: ContinuationService
    public let bus: RingBus

    public static func start(connection: DBusConnection, ring: RingService, activities: ActivityService,
                             transfer configuration: TransferService.Configuration,
                             log: @escaping @Sendable (String) -> Void) async throws -> DaemonParts {
        let transfer = try await TransferService.start(ring: ring, activities: activities, configuration: configuration, log: log)
        let bus = RingBus(connection: connection, ring: ring)
        let continuation = ContinuationService(ring: ring, transfer: transfer, activities: activities, board: bus, log: log)
        bus.attach(continuation)
        await continuation.start()
        do { try await bus.export() } catch {
            await continuation.stop()
            await transfer.stop()
            throw error
        }
        return DaemonParts(ring: ring, transfer: transfer, continuation: continuation, bus: bus)
    }

    /// Stops the continuation and the transfer (no more fetches into the activities), then the
    /// activities, the ring's radio and sessions, and withdraws the D-Bus objects.
    public func stop(activities: ActivityService?) async {
        await continuation.stop()
        await transfer.stop()
        await activities?.stop()
        await ring.stop()
        await bus.unexport()
        bus.attach(nil)
    }
}
