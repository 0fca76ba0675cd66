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
    private let connection: DBusConnection
    private let options: BlueZRadioOptions
    private let events: AsyncStream<RadioEvent>.Continuation
    private let commands: AsyncStream<RadioCommand>.Continuation
    /// Unique prefix so several radios in one process never share an advert path.
    private let pathPrefix: String

    private var bluezPresent = false
    private var adapterPath: String?
    private var adapterPowered = false
    private var adapterAddress: RadioAdapterAddress?
    private var experimentalAdvertising = false
    private var canSetTxPower = false
    private var warnedAboutIgnoredOptions = false

    private var wantedAdvert: AdvertRequest?
    private var registeredAdvertPath: String?
    private var advertCounter = 0

    private var wantsScanning = false
    private var scanning = false

    private var devices: LRUCache<String, DeviceState>
    private var lastState: RadioState?
    private var closed = false

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
                         experimentalAdvertising: experimentalAdvertising, adapterAddress: adapterAddress)
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
        _ = try await connection.subscribe(
            DBusMatchRule(sender: BlueZ.service, interface: BlueZ.propertiesInterface, member: "PropertiesChanged",
                          pathNamespace: "/org/bluez"), handler: forward)
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

    private static func reply(_ command: RadioCommand, _ result: Result<Void, RadioError>) {
        switch command {
        case .signal, .released: break
        case .advertise(_, let reply), .stopAdvertising(let reply), .startScanning(let reply),
             .stopScanning(let reply), .close(let reply):
            reply.resume(returning: result)
        }
    }

    private func shutDown() async {
        wantedAdvert = nil
        wantsScanning = false
        await unregisterAdvert()
        await stopDiscovery()
        closed = true
        connection.close()
        events.finish()
    }

    // MARK: - State

    private var currentState: RadioState {
        if !bluezPresent { return .unavailable("bluetoothd is not running") }
        guard adapterPath != nil else {
            return .unavailable(options.adapter.map { "adapter \($0) is not present" } ?? "no Bluetooth adapter")
        }
        return adapterPowered ? .ready : .poweredOff
    }

    private func publishState() {
        let state = currentState
        guard state != lastState else { return }
        lastState = state
        events.yield(.stateChanged(state))
    }

    private func notice(_ text: String) {
        events.yield(.notice(text))
    }

    private var adapterName: String { adapterPath.map(Self.lastComponent) ?? "adapter" }

    /// Re-reads everything from bluetoothd (at start and whenever it (re)appears), then resumes
    /// advertising and scanning if the adapter is ready. `reason` goes into the notices.
    func synchronize(reason: String?) async {
        let objects: [String: [String: [String: DBusValue]]]
        do {
            let reply = try await connection.call(destination: BlueZ.service, path: "/", interface: BlueZ.objectManagerInterface,
                                                  method: "GetManagedObjects", timeout: options.callTimeout)
            objects = reply.first.map(Self.managedObjects) ?? [:]
            bluezPresent = true
        } catch {
            bluezPresent = false
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

    private func chooseAdapter(_ adapters: [String: [String: [String: DBusValue]]]) -> String? {
        if let wanted = options.adapter {
            let path = wanted.hasPrefix("/") ? wanted : "/org/bluez/" + wanted
            return adapters[path] != nil ? path : nil
        }
        let ordered = adapters.keys.sorted { ($0.count, $0) < ($1.count, $1) }
        return ordered.first { adapters[$0]?[BlueZ.adapterInterface]?["Powered"]?.boolValue == true } ?? ordered.first
    }

    private func isWanted(adapter path: String) -> Bool {
        guard let wanted = options.adapter else { return true }
        return path == (wanted.hasPrefix("/") ? wanted : "/org/bluez/" + wanted)
    }

    private func adoptAdapter(_ adapter: (path: String, interfaces: [String: [String: DBusValue]])?) {
        if adapter?.path != adapterPath { forgetDevices() }
        adapterPath = adapter?.path
        let properties = adapter?.interfaces[BlueZ.adapterInterface] ?? [:]
        adapterPowered = properties["Powered"]?.boolValue ?? false
        // AddressType is absent from older bluetoothd; the identity address is public then.
        adapterAddress = properties["Address"]?.stringValue.flatMap { address in
            address.utf8.count == 17 ? RadioAdapterAddress(address: address, addressType: properties["AddressType"]?.stringValue ?? "public") : nil
        }
        let manager = adapter?.interfaces[BlueZ.advertisingManagerInterface] ?? [:]
        // Both properties exist only when bluetoothd runs with experimental features (-E).
        experimentalAdvertising = manager["SupportedCapabilities"] != nil || manager["SupportedFeatures"] != nil
        canSetTxPower = manager["SupportedFeatures"]?.stringArrayValue?.contains("CanSetTxPower") ?? false
    }

    /// The radio lost what it had registered (bluetoothd gone, adapter gone or powered off).
    private func dropRegistrations() {
        if let path = registeredAdvertPath { try? connection.unexport(path: path) }
        registeredAdvertPath = nil
        scanning = false
    }

    /// Brings BlueZ in line with what the owner wants, when the adapter is ready.
    private func reconcile(reason: String?) async {
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

    // MARK: - Signals

    private func handle(_ signal: DBusSignal) async {
        switch (signal.interface, signal.member) {
        case ("org.freedesktop.DBus", "NameOwnerChanged"):
            guard signal.arguments.count == 3, signal.arguments[0].stringValue == BlueZ.service else { return }
            let newOwner = signal.arguments[2].stringValue ?? ""
            dropRegistrations()
            forgetDevices()
            if newOwner.isEmpty {
                bluezPresent = false
                adapterPath = nil
                adapterPowered = false
                notice("bluetoothd left the bus")
                publishState()
            } else {
                notice("bluetoothd (re)started")
                await synchronize(reason: "bluetoothd restarted")
            }
        case (BlueZ.objectManagerInterface, "InterfacesAdded"):
            await interfacesAdded(signal.arguments)
        case (BlueZ.objectManagerInterface, "InterfacesRemoved"):
            interfacesRemoved(signal.arguments)
        case (BlueZ.propertiesInterface, "PropertiesChanged"):
            await propertiesChanged(path: signal.path, signal.arguments)
        default:
            break
        }
    }

    private func interfacesAdded(_ arguments: [DBusValue]) async {
        guard arguments.count == 2, let path = arguments[0].objectPathValue,
            let interfaces = Self.interfaceMap(arguments[1])
        else { return }
        if interfaces[BlueZ.adapterInterface] != nil {
            bluezPresent = true
            guard adapterPath == nil, isWanted(adapter: path) else { return }
            adoptAdapter((path, interfaces))
            notice("adapter \(adapterName) appeared")
            await reconcile(reason: "adapter \(adapterName) appeared")
            return
        }
        if let properties = interfaces[BlueZ.deviceInterface], isOnAdapter(path) {
            var device = DeviceState(path: path)
            device.apply(properties)
            devices.set(path, device)
            if wantsScanning, device.carriesAdvert { events.yield(.report(device.report)) }
        }
    }

    private func interfacesRemoved(_ arguments: [DBusValue]) {
        guard arguments.count == 2, let path = arguments[0].objectPathValue,
            let interfaces = arguments[1].stringArrayValue
        else { return }
        if path == adapterPath, interfaces.contains(BlueZ.adapterInterface) {
            let name = adapterName
            dropRegistrations()
            forgetDevices()
            adapterPath = nil
            adapterPowered = false
            notice("adapter \(name) was removed")
            publishState()
            return
        }
        if interfaces.contains(BlueZ.deviceInterface), isOnAdapter(path) {
            let address = devices.removeValue(forKey: path)?.address ?? DeviceState.address(fromPath: path)
            if wantsScanning, let address { events.yield(.vanished(address: address)) }
        }
    }

    private func propertiesChanged(path: String, _ arguments: [DBusValue]) async {
        guard arguments.count >= 2, let interface = arguments[0].stringValue, let changed = arguments[1].asDictionary else { return }
        let invalidated = arguments.count > 2 ? (arguments[2].stringArrayValue ?? []) : []
        if interface == BlueZ.adapterInterface, path == adapterPath {
            if let powered = changed["Powered"]?.boolValue, powered != adapterPowered {
                adapterPowered = powered
                if powered {
                    notice("adapter \(adapterName) powered on")
                    // BlueZ may or may not have kept the old registration: start clean.
                    await unregisterAdvert(keepWanted: true)
                    scanning = false
                    await reconcile(reason: "adapter powered on")
                } else {
                    dropRegistrations()
                    notice("adapter \(adapterName) powered off")
                    publishState()
                }
            } else if changed["Discovering"]?.boolValue == false, scanning, adapterPowered {
                // Our session ended without our StopDiscovery (another client cannot stop ours).
                scanning = false
                await reconcile(reason: "discovery stopped by the adapter")
            }
            return
        }
        guard interface == BlueZ.deviceInterface, isOnAdapter(path) else { return }
        var device = devices.get(path) ?? DeviceState(path: path)
        device.apply(changed)
        device.invalidate(invalidated)
        devices.set(path, device)
        let advertProperties: Set<String> = ["ManufacturerData", "RSSI", "TxPower", "UUIDs", "Name"]
        if wantsScanning, !advertProperties.isDisjoint(with: changed.keys) { events.yield(.report(device.report)) }
    }

    private func isOnAdapter(_ path: String) -> Bool {
        guard let adapterPath else { return false }
        return path.hasPrefix(adapterPath + "/")
    }

    private func forgetDevices() {
        devices.removeAll()
    }

    // MARK: - Advertising

    private func advertise(_ request: AdvertRequest) async -> Result<Void, RadioError> {
        // A legacy AD structure holds at most 31 bytes: length, type, company ID, then the data.
        // BlueZ 5.66 refuses longer data only with a generic "Failed to parse advertisement".
        guard request.data.count <= Self.maxManufacturerDataLength else { return .failure(.invalidLength) }
        wantedAdvert = request
        await unregisterAdvert(keepWanted: true)
        guard currentState == .ready else {
            notice("advert kept until \(adapterName) is ready")
            return .success(())
        }
        let result = await register(request)
        if case .failure = result { wantedAdvert = nil }
        return result
    }

    private func register(_ request: AdvertRequest) async -> Result<Void, RadioError> {
        guard let adapterPath else { return .failure(.unavailable("no adapter")) }
        advertCounter += 1
        let path = "\(pathPrefix)/advert\(advertCounter)"
        let commands = self.commands
        var properties: [DBusProperty] = [
            DBusProperty("Type", signature: "s") { .string(request.connectable ? "peripheral" : "broadcast") },
            DBusProperty("ManufacturerData", signature: "a{qv}") {
                .dictionary(keySignature: "q", valueSignature: "v", [.uint16(request.companyID): .variant(.bytes(request.data))])
            },
            DBusProperty("Includes", signature: "as") { .stringArray([]) },
        ]
        properties += experimentalProperties()
        let release = DBusMethod("Release") { _ in
            commands.yield(.released(path: path))
            return []
        }
        do {
            try await connection.export([DBusInterface(BlueZ.advertisementInterface, methods: [release], properties: properties)], at: path)
        } catch {
            return .failure(.failed("cannot export the advert object: \(error)"))
        }
        do {
            do {
                try await registerAdvertisement(path, on: adapterPath)
            } catch let error as DBusError where error.name == BlueZ.errorPrefix + "Failed" && scanning {
                // Some controllers (the lab's emulated ones among them) cannot start advertising
                // while a scan runs: pause the scan, register, resume the scan.
                await stopDiscovery()
                defer { Task { await self.resumeScanningAfterRegistration() } }
                try await registerAdvertisement(path, on: adapterPath)
                notice("advertising on \(Self.lastComponent(adapterPath)) needed a pause of the scan")
            }
        } catch {
            try? connection.unexport(path: path)
            var mapped = Self.radioError(error)
            // 5.66 answers a full controller with NotPermitted, or with Failed when the kernel
            // refuses the instance; the manager's instance counters tell the two apart.
            if case .failed = mapped, await freeInstances(adapterPath) == 0 { mapped = .instanceLimit }
            notice("RegisterAdvertisement on \(Self.lastComponent(adapterPath)) failed: \(error)")
            return .failure(mapped)
        }
        registeredAdvertPath = path
        return .success(())
    }

    private func registerAdvertisement(_ path: String, on adapterPath: String) async throws {
        _ = try await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.advertisingManagerInterface,
                                      method: "RegisterAdvertisement",
                                      arguments: [.objectPath(path), .propertyDictionary([:])], timeout: options.callTimeout)
    }

    private func resumeScanningAfterRegistration() async {
        guard wantsScanning, !scanning, currentState == .ready else { return }
        if case .failure(let error) = await startDiscovery() { notice("scanning could not resume after advertising: \(error)") }
    }

    /// SupportedInstances of the advertising manager (the free ones), nil when unreadable.
    private func freeInstances(_ adapterPath: String) async -> Int? {
        let reply = try? await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.propertiesInterface,
                                               method: "Get", arguments: [.string(BlueZ.advertisingManagerInterface),
                                                                           .string("SupportedInstances")],
                                               timeout: options.callTimeout)
        return reply?.first?.byteValue.map(Int.init)
    }

    /// TxPower and intervals only where bluetoothd honours them; 5.66 ignores them silently otherwise.
    private func experimentalProperties() -> [DBusProperty] {
        var properties: [DBusProperty] = []
        var ignored: [String] = []
        if let power = options.advertTxPower {
            if canSetTxPower {
                properties.append(DBusProperty("TxPower", signature: "n") { .int16(power) })
            } else {
                ignored.append("TxPower")
            }
        }
        if let interval = options.advertIntervalMilliseconds {
            if experimentalAdvertising {
                properties.append(DBusProperty("MinInterval", signature: "u") { .uint32(interval.lowerBound) })
                properties.append(DBusProperty("MaxInterval", signature: "u") { .uint32(interval.upperBound) })
            } else {
                ignored.append("interval")
            }
        }
        if !ignored.isEmpty, !warnedAboutIgnoredOptions {
            warnedAboutIgnoredOptions = true
            notice("advert \(ignored.joined(separator: " and ")) not set: bluetoothd offers no experimental advertising features (-E)")
        }
        return properties
    }

    /// Unregisters the current advert (errors ignored: BlueZ may have dropped it already).
    private func unregisterAdvert(keepWanted: Bool = false) async {
        guard let path = registeredAdvertPath else { return }
        registeredAdvertPath = nil
        if let adapterPath, bluezPresent {
            _ = try? await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.advertisingManagerInterface,
                                           method: "UnregisterAdvertisement", arguments: [.objectPath(path)],
                                           timeout: options.callTimeout)
        }
        try? connection.unexport(path: path)
        if !keepWanted { wantedAdvert = nil }
    }

    /// BlueZ dropped an advert by itself (it calls Release after the fact).
    private func released(_ path: String) async {
        guard path == registeredAdvertPath else { return }
        registeredAdvertPath = nil
        try? connection.unexport(path: path)
        notice("BlueZ released the advert on \(adapterName)")
        await reconcile(reason: "advert was released")
    }

    // MARK: - Scanning

    private func startScanning() async -> Result<Void, RadioError> {
        wantsScanning = true
        guard currentState == .ready else { return .success(()) }
        guard !scanning else { return .success(()) }
        let result = await startDiscovery()
        if case .failure = result { wantsScanning = false }
        return result
    }

    private func startDiscovery() async -> Result<Void, RadioError> {
        guard let adapterPath else { return .failure(.unavailable("no adapter")) }
        let filter = DBusValue.propertyDictionary(["Transport": .string("le"), "DuplicateData": .boolean(true)])
        do {
            _ = try await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.adapterInterface,
                                          method: "SetDiscoveryFilter", arguments: [filter], timeout: options.callTimeout)
        } catch {
            return .failure(Self.radioError(error))
        }
        do {
            _ = try await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.adapterInterface,
                                          method: "StartDiscovery", timeout: options.callTimeout)
        } catch let error as DBusError where error.name == BlueZ.errorPrefix + "InProgress" {
            // Our session is already running.
        } catch {
            return .failure(Self.radioError(error))
        }
        scanning = true
        return .success(())
    }

    private func stopDiscovery() async {
        guard scanning, let adapterPath else { scanning = false; return }
        scanning = false
        _ = try? await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.adapterInterface,
                                       method: "StopDiscovery", timeout: options.callTimeout)
    }

    // MARK: - Helpers

    static let maxManufacturerDataLength = 31 - 2 - 2

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
