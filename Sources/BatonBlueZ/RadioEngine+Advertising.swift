// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus

extension RadioEngine {
    // MARK: - Advertising

    func advertise(_ request: AdvertRequest) async -> Result<Void, RadioError> {
        // A legacy AD structure holds at most 31 bytes: length, type, company ID, then the data.
        // BlueZ 5.66 refuses longer data only with a generic "Failed to parse advertisement".
        guard request.data.count <= Self.maxManufacturerDataLength else { return .failure(.invalidLength) }
        wantedAdvert = request
        guard currentState == .ready else {
            await unregisterAdvert(keepWanted: true)
            notice("advert kept until \(adapterName) is ready")
            return .success(())
        }
        // Make-before-break (issue 13): where the controller has a free instance, the next advert
        // is registered before the previous one is removed, so the air is never silent at a
        // rotation. The new instance gets its own random address either way.
        if options.makeBeforeBreak, let previous = registeredAdvertPath, let adapterPath, (await freeInstances(adapterPath) ?? 0) >= 1 {
            registeredAdvertPath = nil
            let result = await register(request)
            if case .success = result {
                await unregister(path: previous)
                return result
            }
            // Refused: back to break-before-make with the previous advert still registered.
            registeredAdvertPath = registeredAdvertPath ?? previous
        }
        await unregisterAdvert(keepWanted: true)
        let result = await register(request)
        if case .failure = result { wantedAdvert = nil }
        return result
    }

    func register(_ request: AdvertRequest) async -> Result<Void, RadioError> {
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
        let parameters = advertParameterProperties()
        properties += parameters
        let release = DBusMethod("Release") { _ in
            commands.yield(.released(path: path))
            return []
        }
        do {
            try await connection.export([DBusInterface(BlueZ.advertisementInterface, methods: [release], properties: properties)], at: path)
        } catch {
            return .failure(.failed("cannot export the advert object: \(error)"))
        }
        // Where the controller is known to refuse adverts while scanning, the scan pauses first:
        // no refused attempt, and the blind window is Stop + Register + Start, nothing more.
        var pausedScan = false
        if scanning, advertNeedsPausedScan.contains(adapterKey) {
            await stopDiscovery()
            pausedScan = true
        }
        do {
            do {
                try await registerAdvertisement(path, on: adapterPath)
            } catch let error as DBusError where error.name == BlueZ.errorPrefix + "Failed" && scanning {
                // Learnt once per adapter: legacy LE controllers (the lab's emulated ones among
                // them) cannot set an advert's random address while a scan runs.
                refusedRegistrations += 1
                advertNeedsPausedScan.insert(adapterKey)
                notice("advertising on \(Self.lastComponent(adapterPath)) needs a pause of the scan; later adverts pause it first")
                await stopDiscovery()
                pausedScan = true
                try await registerAdvertisement(path, on: adapterPath)
            }
        } catch {
            refusedRegistrations += 1
            try? connection.unexport(path: path)
            var mapped = Self.radioError(error)
            // 5.66 answers a full controller with NotPermitted, or with Failed when the kernel
            // refuses the instance; the manager's instance counters tell the two apart.
            if case .failed = mapped, await freeInstances(adapterPath) == 0 { mapped = .instanceLimit }
            notice("RegisterAdvertisement on \(Self.lastComponent(adapterPath)) failed: \(error)")
            if pausedScan { await resumeScanningAfterRegistration() }
            return .failure(mapped)
        }
        registeredAdvertPath = path
        appliedAdvertParameters = parameters.map(\.name)
        if pausedScan { await resumeScanningAfterRegistration() }
        return .success(())
    }

    func registerAdvertisement(_ path: String, on adapterPath: String) async throws {
        _ = try await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.advertisingManagerInterface,
                                      method: "RegisterAdvertisement",
                                      arguments: [.objectPath(path), .propertyDictionary([:])], timeout: options.callTimeout)
    }

    func resumeScanningAfterRegistration() async {
        guard wantsScanning, !scanning, currentState == .ready else { return }
        if case .failure(let error) = await startDiscovery() { notice("scanning could not resume after advertising: \(error)") }
    }

    /// SupportedInstances of the advertising manager (the free ones), nil when unreadable.
    func freeInstances(_ adapterPath: String) async -> Int? {
        let reply = try? await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.propertiesInterface,
                                               method: "Get", arguments: [.string(BlueZ.advertisingManagerInterface),
                                                                           .string("SupportedInstances")],
                                               timeout: options.callTimeout)
        return reply?.first?.byteValue.map(Int.init)
    }

    /// TxPower and intervals only where bluetoothd honours them; 5.66 without -E would ignore them
    /// silently.
    func advertParameterProperties() -> [DBusProperty] {
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
            if offersAdvertInterval {
                properties.append(DBusProperty("MinInterval", signature: "u") { .uint32(interval.lowerBound) })
                properties.append(DBusProperty("MaxInterval", signature: "u") { .uint32(interval.upperBound) })
            } else {
                ignored.append("interval")
            }
        }
        if !ignored.isEmpty, !warnedAboutIgnoredOptions {
            warnedAboutIgnoredOptions = true
            notice("advert \(ignored.joined(separator: " and ")) not set: bluetoothd on \(adapterName) does not offer it "
                   + "(intervals need 5.77 or later, or -E; TxPower also a controller that can set it)")
        }
        return properties
    }

    /// Unregisters the current advert (errors ignored: BlueZ may have dropped it already).
    func unregisterAdvert(keepWanted: Bool = false) async {
        guard let path = registeredAdvertPath else { return }
        registeredAdvertPath = nil
        await unregister(path: path)
        if !keepWanted { wantedAdvert = nil }
    }

    /// Unregisters and unexports one advert object (errors ignored).
    func unregister(path: String) async {
        if let adapterPath, bluezPresent {
            _ = try? await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.advertisingManagerInterface,
                                           method: "UnregisterAdvertisement", arguments: [.objectPath(path)],
                                           timeout: options.callTimeout)
        }
        try? connection.unexport(path: path)
    }

    /// BlueZ dropped an advert by itself (it calls Release after the fact).
    func released(_ path: String) async {
        guard path == registeredAdvertPath else { return }
        registeredAdvertPath = nil
        try? connection.unexport(path: path)
        notice("BlueZ released the advert on \(adapterName)")
        await reconcile(reason: "advert was released")
    }

    // MARK: - Scanning

    func startScanning() async -> Result<Void, RadioError> {
        wantsScanning = true
        guard currentState == .ready else { return .success(()) }
        guard !scanning else { return .success(()) }
        let result = await startDiscovery()
        if case .failure = result { wantsScanning = false }
        return result
    }

    func startDiscovery() async -> Result<Void, RadioError> {
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

    func stopDiscovery() async {
        guard scanning, let adapterPath else { scanning = false; return }
        scanning = false
        _ = try? await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.adapterInterface,
                                       method: "StopDiscovery", timeout: options.callTimeout)
    }
}
