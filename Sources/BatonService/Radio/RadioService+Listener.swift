// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Dispatch

/// What the radio part keeps between events. Bounded: the advertiser table evicts the least
/// recently heard, notices keep 32 distinct texts (a repeat is counted, not repeated).
struct RadioBook: Sendable {
    var table = AdvertiserTable()
    var state: RadioState = .unavailable("not started")
    var notices = NoticeBook()
    /// The newest accepted sighting per member (what a suggestion and a fetch start from).
    var sightings: [DeviceID: Sighting] = [:]
    var proximity: [DeviceID: (statistics: RSSIStatistics, detector: ProximityDetector)] = [:]
    var rejected: [String: Int] = [:]
    /// Where each member's newest accepted ring advert came from: with LE privacy a connectable
    /// advert's address is a resolvable private one that rotates, so this, not a stored hint, is dialled (§8.3).
    var heardFrom: [DeviceID: Endpoint] = [:]
}

/// The listener: heard adverts become sightings (accepted ring adverts), the advertiser table
/// for diagnostics, proximity, and heard pairing adverts.
extension RadioService {
    /// Milliseconds on a monotonic clock, for "last seen" ages in the dump.
    static func monotonicMilliseconds() -> Int64 {
        Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
    }

    /// Starts consuming radio events and scanning; advertising once the ring has other members.
    public func start() async {
        book.table = AdvertiserTable(batonCompanyID: companyID)
        started = true
        guard let radio = port else { return }
        let events = radio.events()
        eventTask = Task { [weak self] in
            for await event in events {
                guard let self else { return }
                await self.handle(event)
            }
        }
        do { try await radio.startScanning() } catch { notice("scanning failed: \(error)") }
        await carry(planner.ringMembersChanged(hasOthers: hasMembers, nowSeconds: clock.unixSeconds()))
    }

    func handle(_ event: RadioEvent) async {
        switch event {
        case .report(let report):
            if let sighting = record(report) {
                let near = book.proximity[sighting.member]?.detector.allowsSuggestion ?? true
                for observer in sightingObservers.values { await observer(sighting, report.rssi, near) }
            }
        case .vanished(let address):
            book.table.forget(address: address)
        case .stateChanged(let state):
            book.state = state
            knownState = state
            notice("radio \(Self.describe(state))")
            log("batond: radio \(Self.describe(state))")
        case .notice(let text):
            notice(text)
            log("batond: radio: \(text)")
        }
    }

    /// Classifies the report once (one AES-GCM open for a ring advert with a member's tag) and
    /// records that one value everywhere: the diagnostics table, sightings, heard pairing adverts.
    @discardableResult
    func record(_ report: AdvertisementReport) -> Sighting? {
        let now = Self.monotonicMilliseconds()
        let heard = matcher.hear(report, batonCompanyID: companyID)
        book.table.record(report, heard: heard, nowMilliseconds: now)
        switch heard {
        case .ringMember(let sighting):
            if let dialable = Self.dialable(report.address, type: report.addressType) {
                book.heardFrom[sighting.member] = .bluetoothTransfer(address: report.address, type: dialable)
            }
            sighted(sighting, rssi: report.rssi)
            return sighting
        case .ringRefused(_, let reason):
            // Foreign adverts are the common case; a refused one with a member's tag is counted for the dump.
            book.rejected["\(reason)", default: 0] += 1
        case .pairing(let advert):
            heardPairing(advert, from: report.address, addressType: report.addressType)
        case .otherRing, .malformedPairing, .malformedBaton, .foreign:
            break
        }
        return nil
    }

    /// AES-GCM opens the matcher attempted so far (one per heard ring advert with a member's tag).
    var sealOpens: Int { matcher.sealOpens }

    func sighted(_ sighting: Sighting, rssi: Int?) {
        let member = sighting.member
        book.sightings[member] = sighting
        var entry = book.proximity[member] ?? (RSSIStatistics(), ProximityDetector())
        if let rssi { entry.statistics.record(rssi) }
        entry.detector.update(entry.statistics)
        book.proximity[member] = entry
        if sighting.outcome == .newRevision { log("batond: \(member.shortForm) advertises revision \(sighting.body.revision)") }
    }

    /// An address a connection can be made to: public, or random resolvable (top bits 0b01) or
    /// static (0b11). A non-resolvable one (0b00) is what a non-connectable advert comes from.
    static func dialable(_ address: BluetoothAddress, type: LEAddressType?) -> LEAddressType? {
        if type == .public { return .public }
        let top = (address.bytes.first ?? 0) >> 6
        return top == 0b01 || top == 0b11 ? .random : nil
    }

    /// The L2CAP transfer endpoint at the address the member's newest accepted ring advert came from.
    public func heardEndpoint(of member: DeviceID) -> Endpoint? { book.heardFrom[member] }

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
    func dumpRadio(format: String) throws(ServiceFailure) -> String {
        let now = Self.monotonicMilliseconds()
        switch format {
        case "text":
            var header = "radio: \(port == nil ? "off" : Self.describe(book.state)); advertisers: \(book.table.count)/\(book.table.capacity)"
            if !book.rejected.isEmpty {
                header += "; rejected ring adverts: " + book.rejected.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            }
            return header + "\n" + AdvertiserTableRendering.text(book.table, nowMilliseconds: now)
        case "json":
            return AdvertiserTableRendering.jsonLines(book.table, nowMilliseconds: now)
        default:
            throw .invalidArguments("format must be text or json")
        }
    }
}

extension RadioService {
    /// The last radio notices (Ring1.GetRadioNotices).
    public func notices() -> [String] { book.notices.lines }

    func notice(_ text: String) { book.notices.note(text, at: clock.unixSeconds()) }

    /// The keys the matcher holds for a member's current secret (type hashes, §3).
    public func advertKeys(of member: DeviceID) -> DerivedKeys? { matcher.keys(of: member) }
}
