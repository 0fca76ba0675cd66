// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus

/// D-Bus names of BlueZ 5.66 used here.
enum BlueZ {
    static let service = "org.bluez"
    static let adapterInterface = "org.bluez.Adapter1"
    static let deviceInterface = "org.bluez.Device1"
    static let advertisingManagerInterface = "org.bluez.LEAdvertisingManager1"
    static let advertisementInterface = "org.bluez.LEAdvertisement1"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let errorPrefix = "org.bluez.Error."
}

/// Owns all state of one `BlueZRadio`. Mutated only from `run`'s loop (and `synchronize` before
/// the loop starts), one command at a time.
actor RadioEngine {
    let connection: DBusConnection
    let options: BlueZRadioOptions
    let events: AsyncStream<RadioEvent>.Continuation
    let commands: AsyncStream<RadioCommand>.Continuation
    /// Unique prefix so several radios in one process never share an advert path.
    let pathPrefix: String

    var bluezPresent = false
    /// Why the last reading of bluetoothd's objects failed, when it is not simply absent.
    var synchronizeFailure: String?
    var adapterPath: String?
    var adapterPowered = false
    var adapterAddress: RadioAdapterAddress?
    var offersAdvertInterval = false
    var canSetTxPower = false
    var appliedAdvertParameters: [String] = []
    var warnedAboutIgnoredOptions = false

    var wantedAdvert: AdvertRequest?
    var registeredAdvertPath: String?
    var advertCounter = 0

    var wantsScanning = false
    var scanning = false

    /// Adapters (by address, else path) whose controller refused an advert while our scan ran
    /// (legacy LE controllers cannot set an advert's random address while scanning): later
    /// registrations there pause the scan first instead of failing again.
    var advertNeedsPausedScan: Set<String> = []
    /// RegisterAdvertisement calls bluetoothd refused, for diagnostics and tests.
    var refusedRegistrations = 0

    var devices: LRUCache<String, DeviceState>
    var lastState: RadioState?
    var closed = false

    init(connection: DBusConnection, options: BlueZRadioOptions, events: AsyncStream<RadioEvent>.Continuation,
         commands: AsyncStream<RadioCommand>.Continuation) {
        self.connection = connection
        self.options = options
        self.events = events
        self.commands = commands
        self.devices = LRUCache(capacity: options.deviceCacheLimit)
        let unique = connection.uniqueName.filter { $0.isLetter || $0.isNumber }
        self.pathPrefix = "/org/baton/radio/c" + (unique.isEmpty ? "0" : unique)
    }

    func status() -> BlueZRadioStatus {
        BlueZRadioStatus(state: currentState, adapterPath: adapterPath, advertPath: registeredAdvertPath,
                         wantsAdvert: wantedAdvert != nil, scanning: scanning, wantsScanning: wantsScanning,
                         cachedDevices: devices.count, deviceCacheLimit: devices.capacity,
                         offersAdvertInterval: offersAdvertInterval, offersAdvertTxPower: canSetTxPower,
                         appliedAdvertParameters: appliedAdvertParameters, adapterAddress: adapterAddress,
                         refusedRegistrations: refusedRegistrations, pausesScanToAdvertise: advertNeedsPausedScan.contains(adapterKey))
    }

    /// The adapter's address once it is ready (L2CAP sockets bind it).
    func readyAdapterAddress() -> RadioAdapterAddress? {
        currentState == .ready ? adapterAddress : nil
    }

    // MARK: - Loop

    /// Signals from bluetoothd go into the same ordered stream as the owner's commands.
    func subscribe() async throws {
        let commands = self.commands
        let forward: @Sendable (DBusSignal) -> Void = { commands.yield(.signal($0)) }
        _ = try await connection.subscribe(
            DBusMatchRule(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
                          path: "/org/freedesktop/DBus", stringArguments: [0: BlueZ.service]), handler: forward)
        _ = try await connection.subscribe(
            DBusMatchRule(sender: BlueZ.service, interface: BlueZ.objectManagerInterface, path: "/"), handler: forward)
        // Only Adapter1 and Device1 changes, and only below the configured adapter when there is
        // one: GATT values, media players and other adapters' devices never wake the radio.
        let namespace = options.adapter.map { $0.hasPrefix("/") ? $0 : "/org/bluez/" + $0 } ?? "/org/bluez"
        for interface in [BlueZ.adapterInterface, BlueZ.deviceInterface] {
            _ = try await connection.subscribe(
                DBusMatchRule(sender: BlueZ.service, interface: BlueZ.propertiesInterface, member: "PropertiesChanged",
                              pathNamespace: namespace, stringArguments: [0: interface]), handler: forward)
        }
    }

    func run(_ stream: AsyncStream<RadioCommand>) async {
        for await command in stream {
            if closed {
                Self.reply(command, .failure(.unavailable("the radio is closed")))
                continue
            }
            switch command {
            case .signal(let signal): await handle(signal)
            case .released(let path): await released(path)
            case .advertise(let request, let reply): reply.resume(returning: await advertise(request))
            case .stopAdvertising(let reply):
                wantedAdvert = nil
                await unregisterAdvert()
                reply.resume(returning: .success(()))
            case .startScanning(let reply): reply.resume(returning: await startScanning())
            case .stopScanning(let reply):
                wantsScanning = false
                await stopDiscovery()
                reply.resume(returning: .success(()))
            case .close(let reply):
                await shutDown()
                reply.resume(returning: .success(()))
            }
        }
        if !closed { await shutDown() }
    }

    static func reply(_ command: RadioCommand, _ result: Result<Void, RadioError>) {
        switch command {
        case .signal, .released: break
        case .advertise(_, let reply), .stopAdvertising(let reply), .startScanning(let reply),
             .stopScanning(let reply), .close(let reply):
            reply.resume(returning: result)
        }
    }

    func shutDown() async {
        wantedAdvert = nil
        wantsScanning = false
        await unregisterAdvert()
        await stopDiscovery()
        closed = true
        connection.close()
        events.finish()
    }

    // MARK: - State

    var currentState: RadioState {
        if !bluezPresent { return .unavailable(synchronizeFailure ?? "bluetoothd is not running") }
        guard adapterPath != nil else {
            return .unavailable(options.adapter.map { "adapter \($0) is not present" } ?? "no Bluetooth adapter")
        }
        return adapterPowered ? .ready : .poweredOff
    }

    func publishState() {
        let state = currentState
        guard state != lastState else { return }
        lastState = state
        events.yield(.stateChanged(state))
    }

    func notice(_ text: String) {
        events.yield(.notice(text))
    }

    var adapterName: String { adapterPath.map(Self.lastComponent) ?? "adapter" }

    /// What the radio remembers a controller by: its address survives bluetoothd restarts and
    /// renumbering; the path is the fallback while the address is unknown.
    var adapterKey: String { adapterAddress?.address.description ?? adapterPath ?? "" }

    /// Re-reads everything from bluetoothd (at start and whenever it (re)appears), then resumes
    /// advertising and scanning if the adapter is ready. `reason` goes into the notices.
    func synchronize(reason: String?) async {
        let objects: [String: [String: [String: DBusValue]]]
        do {
            let reply = try await connection.call(destination: BlueZ.service, path: "/", interface: BlueZ.objectManagerInterface,
                                                  method: "GetManagedObjects", timeout: options.callTimeout)
            objects = reply.first.map(Self.managedObjects) ?? [:]
            bluezPresent = true
            synchronizeFailure = nil
        } catch {
            bluezPresent = false
            synchronizeFailure = Self.synchronizeFailure(error, replyLimit: options.dbusConfiguration.maxReplyBytes)
            adapterPath = nil
            adapterPowered = false
            adapterAddress = nil
            publishState()
            return
        }
        let adapters = objects.filter { $0.value[BlueZ.adapterInterface] != nil }
        let chosen = chooseAdapter(adapters)
        adoptAdapter(chosen.map { ($0, adapters[$0] ?? [:]) })
        await reconcile(reason: reason)
    }

    func chooseAdapter(_ adapters: [String: [String: [String: DBusValue]]]) -> String? {
        if let wanted = options.adapter {
            let path = wanted.hasPrefix("/") ? wanted : "/org/bluez/" + wanted
            return adapters[path] != nil ? path : nil
        }
        let ordered = adapters.keys.sorted { ($0.count, $0) < ($1.count, $1) }
        return ordered.first { adapters[$0]?[BlueZ.adapterInterface]?["Powered"]?.boolValue == true } ?? ordered.first
    }

    func isWanted(adapter path: String) -> Bool {
        guard let wanted = options.adapter else { return true }
        return path == (wanted.hasPrefix("/") ? wanted : "/org/bluez/" + wanted)
    }

    func adoptAdapter(_ adapter: (path: String, interfaces: [String: [String: DBusValue]])?) {
        if adapter?.path != adapterPath { forgetDevices() }
        adapterPath = adapter?.path
        let properties = adapter?.interfaces[BlueZ.adapterInterface] ?? [:]
        adapterPowered = properties["Powered"]?.boolValue ?? false
        // AddressType is absent from older bluetoothd; the identity address is public then. A
        // malformed Address leaves the adapter without one (no L2CAP), as an absent one does.
        adapterAddress = properties["Address"]?.stringValue.flatMap { text in
            (try? BluetoothAddress(text)).map {
                RadioAdapterAddress(address: $0, addressType: LEAddressType(reported: properties["AddressType"]?.stringValue ?? "public"))
            }
        }
        let manager = adapter?.interfaces[BlueZ.advertisingManagerInterface] ?? [:]
        // Both properties exist from 5.77 on, and before that only with experimental features (-E):
        // exactly where bluetoothd honours MinInterval/MaxInterval (and TxPower, if the controller can).
        offersAdvertInterval = manager["SupportedCapabilities"] != nil || manager["SupportedFeatures"] != nil
        canSetTxPower = manager["SupportedFeatures"]?.stringArrayValue?.contains("CanSetTxPower") ?? false
    }

    /// The radio lost what it had registered (bluetoothd gone, adapter gone or powered off).
    func dropRegistrations() {
        if let path = registeredAdvertPath { try? connection.unexport(path: path) }
        registeredAdvertPath = nil
        scanning = false
    }

    /// Brings BlueZ in line with what the owner wants, when the adapter is ready.
    func reconcile(reason: String?) async {
        publishState()
        guard currentState == .ready else { return }
        // Scanning first, then the advert: the order that works on controllers that cannot
        // start a scan while advertising (register() pauses the scan when it has to).
        if wantsScanning, !scanning {
            switch await startDiscovery() {
            case .success:
                if let reason { notice("scanning resumed on \(adapterName) (\(reason))") }
            case .failure(let error):
                notice("could not resume scanning on \(adapterName): \(error)")
            }
        }
        if let request = wantedAdvert, registeredAdvertPath == nil {
            switch await register(request) {
            case .success:
                if let reason { notice("advertising resumed on \(adapterName) (\(reason))") }
            case .failure(let error):
                notice("could not resume advertising on \(adapterName): \(error)")
            }
        }
    }

    // MARK: - Helpers

    static let maxManufacturerDataLength = 31 - 2 - 2

    /// What the radio's state says when reading bluetoothd's objects failed other than by its
    /// absence (nil: it is not running).
    static func synchronizeFailure(_ error: any Error, replyLimit: Int?) -> String? {
        guard let error = error as? DBusError, error.name == DBusError.replyTooLargeName else { return nil }
        return "bluetoothd is running, but its list of adapters and devices is larger than batond reads from the bus "
            + "(\(replyLimit.map { "\($0 >> 20) MiB" } ?? "its limit")), so Bluetooth is not used; "
            + "remove devices you no longer use (bluetoothctl devices, then bluetoothctl remove ADDRESS) and restart batond"
    }

    static func radioError(_ error: any Error) -> RadioError {
        guard let error = error as? DBusError else { return .failed(String(describing: error)) }
        switch error.name {
        case BlueZ.errorPrefix + "NotPermitted": return .instanceLimit
        case BlueZ.errorPrefix + "InvalidLength": return .invalidLength
        case DBusError.serviceUnknownName, DBusError.nameHasNoOwnerName, DBusError.disconnectedName,
             DBusError.unknownObjectName:
            return .unavailable(error.description)
        default: return .failed(error.description)
        }
    }

    static func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    /// `a{oa{sa{sv}}}` → path → interface → property.
    static func managedObjects(_ value: DBusValue) -> [String: [String: [String: DBusValue]]] {
        guard let entries = value.dictionaryValue else { return [:] }
        var result: [String: [String: [String: DBusValue]]] = [:]
        for (key, interfaces) in entries {
            guard let path = key.stringValue, let map = interfaceMap(interfaces) else { continue }
            result[path] = map
        }
        return result
    }

    /// `a{sa{sv}}` → interface → property (variants unwrapped one level).
    static func interfaceMap(_ value: DBusValue) -> [String: [String: DBusValue]]? {
        guard let interfaces = value.asDictionary else { return nil }
        var result: [String: [String: DBusValue]] = [:]
        for (name, properties) in interfaces {
            result[name] = properties.asDictionary ?? [:]
        }
        return result
    }
}
