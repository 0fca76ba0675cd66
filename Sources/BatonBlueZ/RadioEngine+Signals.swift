// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus

extension RadioEngine {
    // MARK: - Signals

    func handle(_ signal: DBusSignal) async {
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

    func interfacesAdded(_ arguments: [DBusValue]) async {
        guard arguments.count == 2, let path = arguments[0].objectPathValue else { return }
        // The common case, a device heard for the first time: only its Device1 properties are
        // unpacked, and nothing at all for a device of another adapter.
        if let device = arguments[1].dictionaryValue?[.string(BlueZ.deviceInterface)] {
            guard isOnAdapter(path), let properties = device.asDictionary else { return }
            var state = DeviceState(path: path)
            state.apply(properties)
            devices.set(path, state)
            if wantsScanning, state.carriesAdvert, let report = state.report { events.yield(.report(report)) }
            return
        }
        guard let interfaces = Self.interfaceMap(arguments[1]) else { return }
        if interfaces[BlueZ.adapterInterface] != nil {
            bluezPresent = true
            guard adapterPath == nil, isWanted(adapter: path) else { return }
            adoptAdapter((path, interfaces))
            notice("adapter \(adapterName) appeared")
            await reconcile(reason: "adapter \(adapterName) appeared")
            return
        }
    }

    func interfacesRemoved(_ arguments: [DBusValue]) {
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

    func propertiesChanged(path: String, _ arguments: [DBusValue]) async {
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
            } else if changed["Discovering"]?.boolValue == false, scanning, adapterPowered, await !adapterIsDiscovering() {
                // Our session ended without our StopDiscovery (another client cannot stop ours).
                // A false that our own pause for an advert left behind is stale by now: the
                // adapter discovers again and nothing needs restarting.
                scanning = false
                await reconcile(reason: "discovery stopped by the adapter")
            }
            return
        }
        guard interface == BlueZ.deviceInterface, isOnAdapter(path) else { return }
        var device: DeviceState
        if let known = devices.get(path) {
            device = known
        } else {
            // A device first seen through a change (BlueZ made it before this engine listened, or it
            // left the cache): its address and address type are read once, as an L2CAP connect to a
            // private address must dial it as random. Its advert data is not: bluetoothd's cache may
            // still hold an advert no longer on the air (a pairing advert of an ended session), and
            // with DuplicateData every advert heard is signalled again anyway.
            let all = await deviceProperties(path)
            device = devices.get(path) ?? DeviceState(path: path)
            if let all { device.applyIdentity(all) }
        }
        device.apply(changed)
        device.invalidate(invalidated)
        devices.set(path, device)
        if wantsScanning, changed.keys.contains(where: DeviceState.isAdvertProperty), let report = device.report {
            events.yield(.report(report))
        }
    }

    /// Device1's properties as bluetoothd has them now; nil when unreadable.
    func deviceProperties(_ path: String) async -> [String: DBusValue]? {
        let reply = try? await connection.call(destination: BlueZ.service, path: path, interface: BlueZ.propertiesInterface,
                                               method: "GetAll", arguments: [.string(BlueZ.deviceInterface)],
                                               timeout: options.callTimeout)
        return reply?.first?.asDictionary
    }

    /// Device paths are `<adapter path>/dev_…`; compared without building a prefix string per signal.
    func isOnAdapter(_ path: String) -> Bool {
        guard let adapterPath else { return false }
        let device = path.utf8, adapter = adapterPath.utf8
        guard device.count > adapter.count + 1, device.starts(with: adapter) else { return false }
        return device[device.index(device.startIndex, offsetBy: adapter.count)] == UInt8(ascii: "/")
    }

    /// Adapter1.Discovering as bluetoothd has it now; true when unreadable (nothing to restart then).
    func adapterIsDiscovering() async -> Bool {
        guard let adapterPath else { return true }
        let reply = try? await connection.call(destination: BlueZ.service, path: adapterPath, interface: BlueZ.propertiesInterface,
                                               method: "Get", arguments: [.string(BlueZ.adapterInterface), .string("Discovering")],
                                               timeout: options.callTimeout)
        return reply?.first?.boolValue ?? true
    }

    func forgetDevices() {
        devices.removeAll()
    }
}
