// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonDBus
import BatonSystem

/// The ring side of the daemon, wired in dependency order: the ring (already started, with its
/// radio) depends on nothing else; discovery and pairing use the ring (pairing also discovery);
/// the transfer reads the ring and reaches the activities through a protocol; the continuation
/// uses ring, transfer and activities; the D-Bus glue (RingBus) calls them all. Stopped in reverse order.
public struct DaemonParts: Sendable {
    public let ring: RingService
    public let discovery: DiscoveryService
    public let pairing: PairingService
    public let transfer: TransferService
    public let continuation: ContinuationService
    public let bus: RingBus
    /// The universal clipboard (docs/clipboard.md) and its D-Bus object.
    public let clipboard: ClipboardService
    public let clipboardBus: ClipboardBus
    /// Carries members' sightings to the clipboard, in order (ended at stop).
    let clipboardSightings: Task<Void, Never>

    public static func start(connection: DBusConnection, ring: RingService, activities: ActivityService,
                             transfer configuration: TransferService.Configuration, clock: any WallClock = SystemWallClock(),
                             continuation continuationConfiguration: ContinuationService.Configuration = .init(),
                             clipboardFiles: String? = nil,
                             clipboardClock: any MonotonicClock = SystemMonotonicClock(),
                             log: @escaping @Sendable (String) -> Void) async throws -> DaemonParts {
        await activities.activities.useRingRefusals { [weak ring] uid in await ring?.refusedChange(for: uid) }
        let discovery = DiscoveryService(ring: ring, avahiBus: ring.configuration.avahiBus, clock: clock, log: log)
        await discovery.start()
        let pairing = PairingService(ring: ring, discovery: discovery, clock: clock, log: log)
        let transfer: TransferService
        do { transfer = try await TransferService.start(ring: ring, activities: activities.activities, configuration: configuration, log: log) } catch {
            await discovery.stop()
            throw error
        }
        let bus = RingBus(connection: connection, ring: ring, pairing: pairing, discovery: discovery,
                          authorizer: PolkitAuthorizer(connection: connection))
        let continuation = ContinuationService(ring: ring, transfer: transfer, activities: activities.handlers, board: bus,
                                                   configuration: continuationConfiguration, log: log)
        bus.attach(continuation)
        await continuation.start()
        let clipboardBus = ClipboardBus(connection: connection)
        let clipboard = ClipboardService(advert: ring.radio, fetcher: transfer, agentCalls: clipboardBus, clock: clipboardClock,
                                         randomToken: { SystemRandom().bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }, log: log)
        // Files pulled for a paste stay there only until they are handed over (docs/clipboard.md, "Files").
        if let clipboardFiles { await clipboard.useFileInbox(directory: clipboardFiles) }
        clipboardBus.attach(clipboard)
        transfer.clipboardSource.use(clipboard)
        // Sightings reach the clipboard in the order heard, through a queue: asking a member for its
        // offer is a TLS round trip that must not hold up the radio's listener.
        let (sightings, heard) = AsyncStream<Sighting>.makeStream(bufferingPolicy: .bufferingNewest(64))
        await ring.radio.onSighting("clipboard") { sighting, _, _ in heard.yield(sighting) }
        let view = ring.view
        let clipboardSightings = Task { [weak clipboard] in
            for await sighting in sightings {
                guard let clipboard else { return }
                await clipboard.heard(sighting.member, name: view.current.memberName(sighting.member), kind: sighting.body.clipboard,
                                      revision: sighting.body.revision)
            }
        }
        await ring.observe("clipboard") { [weak clipboard] change in
            await clipboard?.keepOnly(members: Set(change.snapshot.memberKeys.keys))
        }
        do {
            try await bus.export()
            try await clipboardBus.export()
        } catch {
            clipboardSightings.cancel()
            await bus.unexport()
            await continuation.stop()
            await transfer.stop()
            await discovery.stop()
            throw error
        }
        return DaemonParts(ring: ring, discovery: discovery, pairing: pairing, transfer: transfer, continuation: continuation, bus: bus,
                           clipboard: clipboard, clipboardBus: clipboardBus, clipboardSightings: clipboardSightings)
    }

    /// The daemon's clock: epoch rotation of the advert and the matcher window, DNS-SD instance names.
    public func tick() async {
        await ring.tick()
        await discovery.tick()
    }

    /// Stops the continuation and the transfer (no more fetches into the activities), then the
    /// activities, the ring's radio and sessions, and withdraws the D-Bus objects.
    public func stop(activities: ActivityService?) async {
        await continuation.stop()
        await transfer.stop()
        await activities?.stop()
        await pairing.stop()
        await discovery.stop()
        await ring.stop()
        await bus.unexport()
        bus.attach(nil)
        clipboardBus.unexport()
        clipboardBus.attach(nil)
        clipboardSightings.cancel()
    }
}
