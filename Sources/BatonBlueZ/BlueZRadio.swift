// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus

/// How a `BlueZRadio` is set up.
public struct BlueZRadioOptions: Sendable {
    /// Adapter name (`hci1`) or object path (`/org/bluez/hci1`); nil picks the first powered one.
    public var adapter: String?
    public var bus: DBusBusKind
    /// Bound of the per-device table the radio keeps to turn BlueZ's property changes into full
    /// reports. Throw-away addresses create many Device1 objects; the oldest are forgotten.
    public var deviceCacheLimit: Int
    /// Advert TX power in dBm; set only where the advertising manager lists `CanSetTxPower` in
    /// SupportedFeatures (bluetoothd 5.77 and later, or -E before, and a controller that can).
    public var advertTxPower: Int16?
    /// Advertising interval in milliseconds; set only where the advertising manager has
    /// SupportedCapabilities (bluetoothd 5.77 and later, or -E before). 5.66 without -E would
    /// ignore it silently, so it is left out there and the kernel's default applies.
    public var advertIntervalMilliseconds: ClosedRange<UInt32>?
    /// Events kept for a slow consumer before the oldest are dropped.
    public var eventBufferLimit: Int
    /// Timeout of each call to bluetoothd.
    public var callTimeout: Duration
    /// Register the next advert before removing the previous one when a second instance is free
    /// (issue 13). Off by default: on the lab's emulated controllers (kernel 6.1, legacy
    /// advertising) overlapping instances while scanning left the new advert unheard.
    public var makeBeforeBreak: Bool
    /// The limits of the connection to bluetoothd's bus (batond passes its own, with its memory policy).
    public var dbusConfiguration: DBusConnectionConfiguration = .service

    public init(adapter: String? = nil, bus: DBusBusKind = .system, deviceCacheLimit: Int = 512,
                advertTxPower: Int16? = nil, advertIntervalMilliseconds: ClosedRange<UInt32>? = BlueZRadioOptions.handoffAdvertInterval,
                eventBufferLimit: Int = 4096, callTimeout: Duration = .seconds(10), makeBeforeBreak: Bool = false) {
        self.makeBeforeBreak = makeBeforeBreak
        self.adapter = adapter
        self.bus = bus
        self.deviceCacheLimit = deviceCacheLimit
        self.advertTxPower = advertTxPower
        self.advertIntervalMilliseconds = advertIntervalMilliseconds
        self.eventBufferLimit = eventBufferLimit
        self.callTimeout = callTimeout
    }

    /// A peer should hear a fresh advert within a fraction of a second; the kernel's default for
    /// legacy adverts is 1.28 s.
    public static let handoffAdvertInterval: ClosedRange<UInt32> = 100...200
}

/// What the radio is doing, for diagnostics and tests.
public struct BlueZRadioStatus: Sendable, Hashable {
    public var state: RadioState
    public var adapterPath: String?
    /// Object path of the advert currently registered with BlueZ.
    public var advertPath: String?
    public var wantsAdvert: Bool
    public var scanning: Bool
    public var wantsScanning: Bool
    public var cachedDevices: Int
    public var deviceCacheLimit: Int
    /// The advertising manager offers advert intervals (SupportedCapabilities: 5.77 and later,
    /// or -E before).
    public var offersAdvertInterval: Bool
    /// The advertising manager offers advert TX power (SupportedFeatures has CanSetTxPower).
    public var offersAdvertTxPower: Bool
    /// Parameter properties (MinInterval, MaxInterval, TxPower) the last registered advert carried.
    public var appliedAdvertParameters: [String]
    /// Adapter1.Address and AddressType of the chosen adapter.
    public var adapterAddress: RadioAdapterAddress?
    /// RegisterAdvertisement calls bluetoothd refused since the radio started.
    public var refusedRegistrations: Int
    /// The chosen adapter refused an advert while scanning once; adverts there pause the scan first.
    public var pausesScanToAdvertise: Bool
}

/// `RadioPort` over BlueZ's D-Bus API (system bus): LE advertising through
/// LEAdvertisingManager1 and discovery through Adapter1, surviving bluetoothd restarts,
/// adapter removal and power cycles on its own. Call `close()` when done (or drop it).
///
/// All work runs in one serial loop (signals from bluetoothd and calls from the owner, in
/// arrival order), so a resume after a restart never races an `advertise` call.
public final class BlueZRadio: RadioPort {
    private let engine: RadioEngine
    private let eventStream: AsyncStream<RadioEvent>
    private let commands: AsyncStream<RadioCommand>.Continuation

    /// Connects to the bus and finds the adapter. bluetoothd or the adapter being absent is not
    /// an error: the radio reports `.stateChanged(.unavailable)` and starts once they appear.
    public init(options: BlueZRadioOptions = BlueZRadioOptions()) async throws(RadioError) {
        let connection: DBusConnection
        do {
            connection = try DBusConnection.service(bus: options.bus, configuration: options.dbusConfiguration)
        } catch {
            throw .unavailable("cannot connect to the bus: \(error)")
        }
        let (events, eventContinuation) = AsyncStream.makeStream(
            of: RadioEvent.self, bufferingPolicy: .bufferingNewest(max(16, options.eventBufferLimit)))
        // Unbounded: commands carry continuations that must never be dropped; the loop drains quickly.
        let (commandStream, commandContinuation) = AsyncStream.makeStream(of: RadioCommand.self)
        let engine = RadioEngine(connection: connection, options: options, events: eventContinuation,
                                 commands: commandContinuation)
        do {
            try await engine.subscribe()
        } catch {
            connection.close()
            eventContinuation.finish()
            throw .unavailable("cannot subscribe to BlueZ signals: \(error)")
        }
        await engine.synchronize(reason: nil)
        self.engine = engine
        self.eventStream = events
        self.commands = commandContinuation
        Task { await engine.run(commandStream) }
    }

    public convenience init(adapter: String?) async throws(RadioError) {
        try await self.init(options: BlueZRadioOptions(adapter: adapter))
    }

    deinit { commands.finish() }

    public func events() -> AsyncStream<RadioEvent> { eventStream }

    /// Registers the advert as a new advertisement instance (its own random address). With
    /// `makeBeforeBreak` and a free instance the previous advert is removed only after the new one
    /// is registered, else before. When the adapter is not ready, the advert is
    /// kept and registered as soon as it is; that is not an error.
    public func advertise(companyID: UInt16, data: [UInt8], connectable: Bool) async throws(RadioError) {
        let request = AdvertRequest(companyID: companyID, data: data, connectable: connectable)
        try await send { .advertise(request, $0) }
    }

    public func stopAdvertising() async {
        try? await send { .stopAdvertising($0) }
    }

    /// Starts LE discovery with duplicate reports. When the adapter is not ready, scanning starts
    /// as soon as it is.
    public func startScanning() async throws(RadioError) {
        try await send { .startScanning($0) }
    }

    public func stopScanning() async {
        try? await send { .stopScanning($0) }
    }

    /// Unregisters the advert, stops discovery, closes the connection and ends the event stream.
    public func close() async {
        try? await send { .close($0) }
        commands.finish()
    }

    public func status() async -> BlueZRadioStatus { await engine.status() }

    /// The adapter's own address and type, while it is ready (L2CAP listeners and connectors bind it).
    public func adapterAddress() async -> RadioAdapterAddress? { await engine.readyAdapterAddress() }

    private func send(_ make: (CheckedContinuation<Result<Void, RadioError>, Never>) -> RadioCommand) async throws(RadioError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, RadioError>, Never>) in
            if case .terminated = commands.yield(make(continuation)) {
                continuation.resume(returning: .failure(.unavailable("the radio is closed")))
            }
        }
        try result.get()
    }
}

struct AdvertRequest: Sendable, Hashable {
    var companyID: UInt16
    var data: [UInt8]
    var connectable: Bool
}

typealias CommandReply = CheckedContinuation<Result<Void, RadioError>, Never>

enum RadioCommand: Sendable {
    case signal(DBusSignal)
    case released(path: String)
    case advertise(AdvertRequest, CommandReply)
    case stopAdvertising(CommandReply)
    case startScanning(CommandReply)
    case stopScanning(CommandReply)
    case close(CommandReply)
}
