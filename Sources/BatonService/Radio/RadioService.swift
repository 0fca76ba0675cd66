// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore
import BatonTransport

/// The radio: what is on the air (broadcaster: the ring advert with the current activity or
/// presence, a waiting pairing session's advert) and what is heard (listener: accepted ring adverts
/// become sightings, the advertiser table for diagnostics, proximity, heard pairing adverts).
/// It knows the ring only through what the ring pushes: member secrets and the own secret.
public actor RadioService {
    public typealias SightingObserver = @Sendable (Sighting, _ rssi: Int?, _ near: Bool) async -> Void

    let port: (any RadioPort)?
    /// The advert counters (the state directory's `advert-counters`, RingStore) and the boot mark
    /// (the runtime directory, BootMarkStore; nil: none, §4.2 "Restarts"): the two records one
    /// persist action writes, the mark first, before the advert they cover.
    let counterRecord: DurableRecord<SenderCounters>
    let bootMarkRecord: DurableRecord<SenderBootMark>?
    let clock: any WallClock
    let companyID: UInt16
    let log: @Sendable (String) -> Void
    /// What is on the air: the ring advert (AdvertSender inside), a waiting pairing session's
    /// advert, connectability, the ring-of-one silence (§4.2); and, in its `PublicationBook`, what
    /// each user published and what the advert stands for (the core's one owner of it).
    var planner: OnAirPlanner
    var ownSecret: AdvertisingSecret
    var matcher: AdvertMatcher
    /// Whether the ring has other members; handed to the planner once the radio started.
    var hasMembers = false
    var started = false
    var book = RadioBook()
    /// The adapter's state as last learnt (BlueZ asked by `radioSummary`, or a later event), and
    /// the LE privacy fact last read: a publication's receipt says them without asking again.
    var knownState: RadioState?
    var knownPrivacy: LEPrivacyFact?
    var eventTask: Task<Void, Never>?
    var sightingObservers: [String: SightingObserver] = [:]
    /// Pairing adverts heard on the radio (the most recent sessions).
    var pairingAdverts = PairingAdvertBook()
    /// Reads whether the adapter uses LE privacy, for the status (nil: not said).
    var privacyReader: (any AdapterPrivacyReading)?

    /// `store` keeps the advert counters and `bootMarks` the boot mark (both written before the
    /// advert they cover goes on the air). `countersExpected`: the ring was loaded from disk, not
    /// created now; `bootMark`: the mark found for this boot; `forgottenSealsUntil`: when seals its
    /// counters may not record could last have been made, if the mark does not name the secret
    /// (AdvertSender, §4.2 "Restarts"). A secret created now has sealed nothing.
    init(port: (any RadioPort)?, store: RingStore, clock: any WallClock, companyID: UInt16, ownSecret: AdvertisingSecret,
         machine: [UInt8]? = nil, countersExpected: Bool = false, forgottenSealsUntil: Int64? = nil,
         bootMark: SenderBootMark? = nil, bootMarks: BootMarkStore? = nil,
         log: @escaping @Sendable (String) -> Void) throws {
        self.port = port
        counterRecord = store.advertCounters
        bootMarkRecord = bootMarks?.durable
        self.clock = clock
        self.companyID = companyID
        self.log = log
        self.ownSecret = ownSecret
        let restored = try store.loadCounters()
        let sender = AdvertSender(secret: ownSecret, restored: restored, machine: machine,
                                  forgottenSealsUntil: countersExpected ? forgottenSealsUntil : nil,
                                  bootMark: countersExpected ? bootMark : nil, countersExpected: countersExpected)
        if countersExpected, bootMark != nil, !sender.resumedFromBootMark, !sender.needsRekey {
            log("batond: the advert boot mark names another own secret than the state directory (restored from an older copy after a re-key in this boot): the ring advert waits for the next 15-minute epoch, so no advert nonce is used twice")
        }
        planner = OnAirPlanner(sender: sender, hasRadio: port != nil, ringHasOtherMembers: false)
        matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: clock.unixSeconds()))
        // A ring created now gets its counters at once, even if it never seals (no radio, a ring of
        // one): later, a ring without counters means they were lost or not copied (§4.2), not this.
        if restored == nil, !countersExpected {
            try counterRecord.save(planner.sender.counters)
            try? bootMarkRecord?.save(planner.sender.bootMark)
        }
    }

    /// The ring must re-key before the advert is sealed again (AdvertSender.needsRekey).
    var needsRekey: Bool { planner.sender.needsRekey }

    public func stop() async {
        eventTask?.cancel()
        await carry(planner.stop())
    }

    /// Accepted ring adverts go to every observer (the ring's last-seen times, the continuation's suggestions).
    public func onSighting(_ key: String, _ observer: SightingObserver?) { sightingObservers[key] = observer }

    // MARK: From the ring

    /// The other members' advertising secrets (the matcher's table). A ring of one is silent: the
    /// ring advert starts with the first other member and stops with the last (§4.2).
    func setMembers(_ members: [DeviceID: AdvertisingSecret]) async {
        for id in matcher.memberIDs where members[id] == nil { matcher.removeMember(id) }
        // What was heard of members that left (a removal, a new identity here) is dropped with them:
        // their last sighting, proximity and the address their adverts came from.
        for id in Array(book.sightings.keys) where members[id] == nil { book.sightings[id] = nil }
        for id in Array(book.proximity.keys) where members[id] == nil { book.proximity[id] = nil }
        for id in Array(book.heardFrom.keys) where members[id] == nil { book.heardFrom[id] = nil }
        book.table.forgetRingMembers(except: Set(members.keys))
        for (id, secret) in members { matcher.setMember(id, secret: secret) }
        hasMembers = !members.isEmpty
        guard started else { return }
        await carry(planner.ringMembersChanged(hasOthers: hasMembers, nowSeconds: clock.unixSeconds()))
    }

    /// This device's key moved to a new day of its generation (§3.1): nothing is resealed.
    func ratchetSecret(_ secret: AdvertisingSecret) {
        ownSecret = secret
        planner.ratchetSecret(secret)
    }

    /// This device's secret changed (a removal): the advert is sealed with the new one (§4.2).
    func rotateSecret(_ secret: AdvertisingSecret) async {
        ownSecret = secret
        await carry(planner.rotateSecret(secret, nowSeconds: clock.unixSeconds()))
    }

    // MARK: The adapter

    /// The adapter's own address and type, nil without a ready adapter.
    public func bluetoothAdapter() async -> (BluetoothAddress, LEAddressType)? {
        guard let port, let own = await port.adapterAddress() else { return nil }
        return (own.address, own.addressType)
    }

    /// BlueZ's discovery competes with the kernel's scan for the peer of an outgoing L2CAP connect.
    public func pauseScanningForConnect() async {
        await port?.stopScanning()
    }

    public func resumeScanningAfterConnect() async {
        guard let port else { return }
        do { try await port.startScanning() } catch { notice("scanning could not resume after an L2CAP connect: \(error)") }
    }

    var isPresent: Bool { port != nil }
}
