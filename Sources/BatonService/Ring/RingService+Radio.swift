import BatonAPI
import BatonCore
import BatonDBus
import Dispatch

/// What the radio part keeps between events. Bounded: the advertiser table evicts the least
/// recently heard, notices keep the last 32.
struct RadioBook: Sendable {
    var table = AdvertiserTable()
    var state: RadioState = .unavailable("not started")
    var notices: [String] = []
    /// The newest accepted sighting per member (what a suggestion and a fetch start from).
    var sightings: [DeviceID: Sighting] = [:]
    var proximity: [DeviceID: (statistics: RSSIStatistics, detector: ProximityDetector)] = [:]
    var rejected: [String: Int] = [:]

    mutating func notice(_ text: String) {
        notices.append(text)
        if notices.count > 32 { notices.removeFirst(notices.count - 32) }
    }
}

extension RingService {
    /// Milliseconds on a monotonic clock, for "last seen" ages in the dump.
    static func monotonicMilliseconds() -> Int64 {
        Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
    }

    /// Starts consuming radio events and scanning; advertising presence once there is a ring.
    func startRadio() async {
        guard let radio else { return }
        let events = radio.events()
        radioTask = Task { [weak self] in
            for await event in events {
                guard let self else { return }
                await self.handle(event)
            }
        }
        do { try await radio.startScanning() } catch { book.notice("scanning failed: \(error)") }
        await advertisePresenceIfRinged()
    }

    /// A ring of one has nobody to tell; with members, the device advertises at least presence.
    func advertisePresenceIfRinged() async {
        guard radio != nil, !keeper.peers.isEmpty, currentRecord() == nil else { return }
        do { try await advertiseContent(.presence) } catch { book.notice("advertising failed: \(error)") }
    }

    func handle(_ event: RadioEvent) async {
        switch event {
        case .report(let report):
            if let sighting = record(report) { await suggest(for: sighting) }
        case .vanished(let address):
            book.table.forget(address: address)
        case .stateChanged(let state):
            book.state = state
            book.notice("radio \(Self.describe(state))")
            log("batond: radio \(Self.describe(state))")
        case .notice(let text):
            book.notice(text)
            log("batond: radio: \(text)")
        }
    }

    @discardableResult
    func record(_ report: AdvertisementReport) -> Sighting? {
        let now = Self.monotonicMilliseconds()
        let matcher = self.matcher
        book.table.record(report, nowMilliseconds: now, ringLookup: { data in matcher.recognise(data)?.member })
        guard let data = report.manufacturerData[configuration.companyID], let kind = try? AdvertKind.classify(data) else { return nil }
        if kind == .pairing { heardPairing(data, from: report.address, addressType: report.addressType) }
        guard kind == .ring else { return nil }
        do throws(WireError) {
            let sighting = try self.matcher.receive(data)
            sighted(sighting, rssi: report.rssi)
            return sighting
        } catch {
            // Foreign adverts are the common case; count the rest for the dump.
            if error != .notRingMember { book.rejected["\(error)", default: 0] += 1 }
            return nil
        }
    }

    func sighted(_ sighting: Sighting, rssi: Int?) {
        let member = sighting.member
        book.sightings[member] = sighting
        var entry = book.proximity[member] ?? (RSSIStatistics(), ProximityDetector())
        if let rssi { entry.statistics.record(rssi) }
        entry.detector.update(entry.statistics)
        book.proximity[member] = entry
        guard var info = peers[member] else { return }
        let now = clock.unixSeconds()
        let knownRSSI = rssi.flatMap { RSSIStatistics.isKnown($0) ? $0 : nil }
        // Written at most once a minute per member: sightings repeat every ~100 ms.
        let due = info.lastSeen.map { now - $0 >= 60 } ?? true
        info.lastSeen = now
        if let knownRSSI { info.lastRSSI = knownRSSI }
        peers[member] = info
        if due { try? store.savePeers(peers) }
        if sighting.outcome == .newRevision { log("batond: \(member.shortForm) advertises revision \(sighting.body.revision)") }
    }

    /// The newest accepted sighting of a member.
    public func lastSighting(of member: DeviceID) -> Sighting? { book.sightings[member] }

    static func describe(_ state: RadioState) -> String {
        switch state {
        case .ready: "ready"
        case .poweredOff: "powered off"
        case .unavailable(let why): "unavailable (\(why))"
        }
    }

    /// Ring1.DumpRadio: the advertiser table as text or JSON Lines. No key material: ring members
    /// appear by short id only.
    func dumpRadio(format: String) throws -> String {
        let now = Self.monotonicMilliseconds()
        switch format {
        case "text":
            var header = "radio: \(radio == nil ? "off" : Self.describe(book.state)); advertisers: \(book.table.count)/\(book.table.capacity)"
            if !book.rejected.isEmpty {
                header += "; rejected ring adverts: " + book.rejected.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            }
            return header + "\n" + book.table.renderText(nowMilliseconds: now)
        case "json":
            return book.table.renderJSONLines(nowMilliseconds: now)
        default:
            throw DBusError(name: BatonErrorName.invalidArguments, message: "format must be text or json")
        }
    }

    func radioInterfaceMethods() -> [DBusMethod] {
        [
            DBusMethod("DumpRadio", in: [DBusArgument("format", "s")], out: [DBusArgument("dump", "s")]) { [weak self] call in
                guard let self else { return [] }
                return [.string(try await self.dumpRadio(format: call.arguments.first?.stringValue ?? ""))]
            },
            DBusMethod("GetRadioNotices", out: [DBusArgument("notices", "as")]) { [weak self] _ in
                [.stringArray(await self?.book.notices ?? [])]
            },
        ]
    }
}
