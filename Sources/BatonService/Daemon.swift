// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonBlueZ
import BatonCore
import BatonDBus
import BatonStore
import BatonTransport
import Dispatch

/// Wires batond together: bus connection, state directory, the actors (DaemonParts), bus name, signals.
public enum Daemon {
    public static let exitUsage: Int32 = 64
    public static let exitFailure: Int32 = 1

    /// Parses the command line and runs until SIGTERM/SIGINT. Returns the exit status.
    public static func main(arguments: [String], environment: [String: String]) async -> Int32 {
        let logger = StandardErrorLog()
        let command: DaemonOptions.Command
        do {
            command = try DaemonOptions.parse(arguments, environment: environment)
        } catch {
            // One line and where help is: the whole usage would bury what was wrong.
            logger.log("batond: \(error.message)\nTry 'batond --help'.")
            return exitUsage
        }
        switch command {
        case .showHelp:
            print(DaemonOptions.usage)
            return 0
        case .showVersion:
            print("batond \(batonVersion)")
            return 0
        case .run(let options):
            return await run(options, environment: environment, logger: logger)
        }
    }

    /// Where the advert boot mark lives (§4.2 "Restarts"): systemd's RuntimeDirectory (the system
    /// service), else `$XDG_RUNTIME_DIR/baton` for a daemon on a session bus; nil: none.
    static func bootRuntimeDirectory(_ options: DaemonOptions, environment: [String: String]) -> String? {
        if let first = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first { return String(first) }
        if options.bus != .system, let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return runtime + "/baton" }
        return nil
    }

    static func run(_ options: DaemonOptions, environment: [String: String], logger: any ServiceLog) async -> Int32 {
        // Handled below through Dispatch; ignored first so the default action cannot kill us meanwhile.
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        let stopRequests = AsyncStream<Int32>.makeStream()
        let sources = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stopRequests.continuation.yield(number) }
            source.activate()
            return source
        }
        defer { for source in sources { source.cancel() } }

        let busKind: DBusBusKind
        switch options.bus {
        case .session: busKind = .session
        case .system: busKind = .system
        case .address(let address): busKind = .address(address)
        }
        let connection: DBusConnection
        do {
            connection = try DBusConnection.service(bus: busKind, configuration: DaemonMemoryPolicy.dbusConfiguration)
        } catch {
            logger.log("batond: cannot connect to the bus: \(error)")
            return exitFailure
        }
        defer { connection.close() }

        let statusFile: StatusFile<DaemonStatus>
        let stateLock: StateDirectoryLock
        do {
            // First, before anything is read: one daemon per state directory (nonces, records).
            stateLock = try StateDirectoryLock(directory: StateDirectory(path: options.stateDirectory))
            statusFile = try StatusFile(name: "status.json", in: StateDirectory(path: options.stateDirectory))
        } catch {
            logger.log("batond: cannot open the state directory: \(error)")
            return exitFailure
        }
        // Held until the daemon returns: the kernel releases it when the process ends.
        defer { withExtendedLifetime(stateLock) {} }
        var configuration = ServiceConfiguration(busName: options.busName, adapter: options.adapter, radioEnabled: options.radioEnabled,
                                                 saveTimeout: options.saveTimeout)
        var radio: BlueZRadio?
        if options.radioEnabled {
            // BlueZ lives on the system bus whatever bus we serve on. A missing bluetoothd or adapter
            // is not fatal: the radio reports "unavailable" and starts when they appear.
            do {
                var radioOptions = BlueZRadioOptions(adapter: options.adapter == "auto" ? nil : options.adapter)
                radioOptions.dbusConfiguration = DaemonMemoryPolicy.dbusConfiguration
                radio = try await BlueZRadio(options: radioOptions)
            } catch {
                logger.log("batond: Bluetooth unavailable: \(error)")
            }
        }
        let clock = ShiftableWallClock()
        let sealing: StateSealingKey?
        do {
            switch try StateKeyCredential.load(environment: environment) {
            case .key(let key):
                sealing = key
                logger.log("batond: secrets at rest: sealed with the systemd credential \(StateSealingKey.credentialName) (\(key.protection.rawValue))")
            case .none(let reason):
                sealing = nil
                logger.log("batond: secrets at rest: plain 0600 files (\(reason))")
            }
        } catch {
            logger.log("batond: cannot read the state key: \(error); fix: recreate it (remove /etc/credstore.encrypted/\(StateSealingKey.credentialName) only if no state is sealed with it yet, see docs/security.md)")
            return exitFailure
        }
        let ring: RingService
        do {
            ring = try RingService(
                store: RingStore(directory: StateDirectory(path: options.stateDirectory), sealing: sealing), radio: radio, clock: clock,
                configuration: .init(deviceName: options.deviceName ?? hostName(), listenHost: options.listenHost,
                                     companyID: options.companyID, avahiBus: options.avahiBus.map(dbusBusKind),
                                     runtimeDirectory: bootRuntimeDirectory(options, environment: environment),
                                     rekeyDays: options.rekeyDays),
                log: { logger.log($0) })
        } catch {
            logger.log("batond: cannot open the ring store: \(error)")
            return exitFailure
        }
        configuration.secretsAtRest = sealing.map { "sealed-" + $0.protection.rawValue } ?? "plain"
        if radio != nil { await ring.radio.usePrivacyReader(KernelPrivacyReader()) }
        await ring.start()
        let service = ActivityService(
            connection: connection, configuration: configuration, publisher: ring.radio, statusFile: statusFile,
            desktopEntries: DesktopEntryIndex(scanner: XDGDesktopEntryScanner(environment: environment)),
            logger: logger)
        do {
            await service.useDocuments(try SnapshotStore(directory: options.stateDirectory + "/documents", perDocumentLimit: ActivityService.defaultDocumentLimit,
                                                          perUserLimit: ActivityService.defaultUserDocumentLimit))
        } catch {
            logger.log("batond: documents disabled, no snapshot store: \(error)")
        }
        do {
            await service.useEditSessions(try EditSessions(directory: StateDirectory(path: options.stateDirectory + "/sessions"), log: { logger.log($0) }))
        } catch {
            logger.log("batond: edit sessions disabled, their state cannot be opened: \(error)")
        }
        let parts: DaemonParts
        do {
            parts = try await DaemonParts.start(connection: connection, ring: ring, activities: service,
                                                transfer: .init(listenHost: options.listenHost, port: options.transferPort),
                                                clock: clock,
                                                continuation: .init(proximity: .init(enterNear: options.nearRSSI, silenceTimeout: options.awayAfter),
                                                                    prefetchAfter: options.prefetchAfter),
                                                clipboardFiles: options.stateDirectory + "/clipboard-files",
                                                log: { logger.log($0) })
        } catch {
            logger.log("batond: cannot start the ring part: \(error)")
            await ring.stop()
            return exitFailure
        }
        do {
            try await service.start()
            let reply = try await connection.requestName(options.busName, flags: [.doNotQueue])
            guard reply == .primaryOwner || reply == .alreadyOwner else {
                logger.log("batond: the bus name \(options.busName) is already owned")
                await parts.stop(activities: service)
                return exitFailure
            }
        } catch {
            logger.log("batond: cannot start: \(error)")
            await parts.stop(activities: service)
            return exitFailure
        }
        let transfer = parts.transfer
        logger.log("batond: owns \(options.busName), transfers on port \(transfer.port)")
        // Epoch rotation of the advert and of the matcher window (§4.2, §4.3): one sleep until the
        // next boundary, nothing in between (a laptop daemon must not wake periodically).
        for _ in 0..<options.simulatedEpochs {
            clock.advance(Protocol.epochSeconds)
            await parts.tick()
        }
        if options.simulatedEpochs > 0 { logger.log("batond: simulated \(options.simulatedEpochs) epochs") }
        let discovery = parts.discovery
        let ticker = Task {
            await EpochAlarm.run(clock: clock, retryAt: { await discovery.retryAt }, fire: { await parts.tick() })
        }
        defer { ticker.cancel() }

        // Ends on a signal, or when the bus goes away: every subscription stream finishes when the
        // connection closes, so waiting on one (NameLost, which also means the name is gone) is the event.
        let busWatch: Task<Void, Never>
        do {
            let nameLost = try await connection.signals(matching: DBusMatchRule(
                sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameLost",
                stringArguments: [0: options.busName]))
            busWatch = Task {
                for await _ in nameLost { break }
                stopRequests.continuation.yield(0)
            }
        } catch {
            logger.log("batond: cannot watch the bus connection: \(error)")
            await parts.stop(activities: service)
            return exitFailure
        }
        var iterator = stopRequests.stream.makeAsyncIterator()
        let reason = await iterator.next() ?? 0
        busWatch.cancel()
        logger.log(reason == 0 ? (connection.isConnected ? "batond: bus name lost" : "batond: bus connection lost") : "batond: signal \(reason), shutting down")
        await parts.stop(activities: service)
        await radio?.close()
        // Bounded: a stop must not wait out a bus that does not answer (the unit's restart depends on it).
        if connection.isConnected { _ = try? await connection.releaseName(options.busName, timeout: .seconds(2)) }
        return reason == 0 ? exitFailure : 0
    }
}

func dbusBusKind(_ bus: DaemonOptions.Bus) -> DBusBusKind {
    switch bus {
    case .session: .session
    case .system: .system
    case .address(let address): .address(address)
    }
}

/// The machine's host name, the default device name in the ring.
func hostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count) == 0 else { return "linux" }
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return name.isEmpty ? "linux" : String(name.prefix(64))
}
