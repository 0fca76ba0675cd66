// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// What the device currently wants to advertise (before sealing).
public struct AdvertContent: Hashable, Sendable {
    public var activityType: String?
    public var flags: AdvertFlags
    /// The kind of clipboard copy the device offers (flag bits 4–5, §4.1); nil: none.
    public var clipboard: ClipboardKind?

    public init(activityType: String?, hasWebpageURL: Bool = false, hasDocument: Bool = false, prefersBLE: Bool = false) {
        self.activityType = activityType
        var flags: AdvertFlags = activityType == nil ? [] : [.hasActivity]
        if activityType != nil && hasWebpageURL { flags.insert(.hasWebpageURL) }
        if activityType != nil && hasDocument { flags.insert(.hasDocument) }
        if prefersBLE { flags.insert(.prefersBLE) }
        self.flags = flags
    }

    public static let presence = AdvertContent(activityType: nil)
}

/// The sender's persistent counters (§4.2). Must reach disk before the advert it covers is
/// handed to the radio, so that a restart never seals a second body under a used nonce.
public struct SenderCounters: Hashable, Sendable, Codable {
    public var generation: UInt32
    /// The highest epoch ever sealed in (high-water mark): nothing is sealed below it (§4.2).
    public var epoch: UInt64
    /// The next unused sequence in `epoch`; 256 means the epoch is used up.
    public var nextSequence: Int
    public var revision: UInt32
    /// Identifies the machine that wrote the counters (the service passes a digest of
    /// /etc/machine-id). Counters read back on another machine mean a cloned state directory.
    public var machine: [UInt8]?

    public init(generation: UInt32, epoch: UInt64, nextSequence: Int, revision: UInt32, machine: [UInt8]? = nil) {
        self.generation = generation
        self.epoch = epoch
        self.nextSequence = nextSequence
        self.revision = revision
        self.machine = machine
    }
}

/// The sender's high-water mark for the current boot (§4.2 "Restarts"): the counters of its last
/// persist, with the secret they belong to. Written before every seal, like the counters, but kept
/// where a restored copy of the state directory cannot roll it back (batond: a file in systemd's
/// RuntimeDirectory, a tmpfs that lives as long as the boot), so a restart within the boot continues
/// after every seal made in it.
public struct SenderBootMark: Hashable, Sendable, Codable {
    /// Which own secret the counters belong to (`AdvertSender.secretID`).
    public var secretID: [UInt8]
    public var counters: SenderCounters

    public init(secretID: [UInt8], counters: SenderCounters) {
        self.secretID = secretID
        self.counters = counters
    }
}

/// Sender state machine (swift-nio style: inputs in, actions out). Decides when to seal,
/// rotate and re-register; the radio adapter carries the actions out in order.
public struct AdvertSender: Sendable {
    public enum Action: Hashable, Sendable {
        /// Write these counters durably, and the boot mark where a disk restore cannot reach it
        /// (§4.2 "Restarts"), before the next action.
        case persist(SenderCounters, SenderBootMark)
        /// Replace whatever is advertised with these 24 bytes (fresh registration, fresh address).
        case advertise([UInt8])
        /// Stop advertising.
        case stop
    }

    public private(set) var counters: SenderCounters
    public private(set) var content: AdvertContent
    public private(set) var currentAdvert: [UInt8]?
    /// True when a change waits for the next epoch because 256 seals were used.
    public private(set) var deferred = false
    /// The own secret must be replaced (RingKeeper.rekey, then rotateSecret) before anything is
    /// sealed again: the restored counters came from another machine, or the clock is so far
    /// behind the high-water epoch that waiting for it would silence the device.
    public private(set) var needsRekey = false
    /// How far behind the high-water epoch the clock may be before a re-key beats waiting (a day).
    public static let maxEpochsBehind: UInt64 = 96
    /// The first epoch this process may seal in under the secret it started with (§4.2 "Restarts"):
    /// one past the last epoch in which a seal this state does not record could have been made (a
    /// restored backup or snapshot forgets the seals made after it). Below it the sender waits, as
    /// for a clock behind its high-water epoch; a new own secret (nothing sealed under it) lifts it (0).
    public private(set) var startFloor: UInt64 = 0
    /// True when the counters continued from a boot mark of the same secret (a restart within the
    /// boot): no start floor, the first seal goes out at once.
    public private(set) var resumedFromBootMark = false
    private var secret: AdvertisingSecret
    private var keys: DerivedKeys
    /// Names the own secret's generation in a boot mark (fixed across the day ratchet).
    public private(set) var secretID: [UInt8]
    private var enabled = false

    /// SHA-256("baton/v1 boot mark" || u32be(generation) || commitment), or the key bytes for a
    /// secret without a day chain: one value per generation, whichever day the key is at.
    public static func secretID(of secret: AdvertisingSecret) -> [UInt8] {
        var input = Array("baton/v1 boot mark".utf8)
        input += withUnsafeBytes(of: secret.generation.bigEndian) { Array($0) }
        input += secret.chain?.commitment ?? secret.bytes
        return SHA256.hash(input)
    }

    /// The boot mark of the current counters (what `.persist` carries).
    public var bootMark: SenderBootMark { SenderBootMark(secretID: secretID, counters: counters) }

    /// `restored` are the counters read back from disk, if any; `machine` identifies this machine
    /// (nil: no check). Counters written on another machine set `needsRekey`. `bootMark` is the
    /// high-water mark kept for this boot (§4.2 "Restarts"): one naming this secret records every
    /// seal made under it in this boot, so the counters continue from the later of the two and the
    /// first seal goes out at once. Otherwise `forgottenSealsUntil` bounds when a seal the restored
    /// counters may not record could have been made under this secret (batond: the machine's boot
    /// time at the first start of a boot, since a rolled-back disk means a reboot; the start time
    /// when the mark is unreadable or names another secret; nil: the caller vouches that the
    /// counters record every seal); it sets `startFloor`. `countersExpected`: the secret was not
    /// created just now, so missing counters, or counters of a later generation (a `ring` record
    /// restored alone from before a re-key), mean they do not record this secret's seals, and the
    /// secret is replaced before anything is sealed (§4.2).
    public init(secret: AdvertisingSecret, restored: SenderCounters?, machine: [UInt8]? = nil, forgottenSealsUntil: Int64? = nil,
                bootMark: SenderBootMark? = nil, countersExpected: Bool = false) {
        self.secret = secret
        self.keys = DerivedKeys(secret: secret)
        self.secretID = Self.secretID(of: secret)
        self.content = .presence
        if let restored, restored.generation == secret.generation {
            counters = restored
        } else {
            counters = SenderCounters(generation: secret.generation, epoch: restored?.epoch ?? 0,
                                      nextSequence: 0, revision: restored?.revision ?? 0)
        }
        if let machine {
            // Counters without a machine value predate the check: adopt them.
            needsRekey = restored?.machine.map { $0 != machine } ?? false
            counters.machine = machine
        }
        // Counters of a later generation than the stored secret were written after it was replaced:
        // the `ring` record was restored alone from a copy taken before a re-key. They record none
        // of this secret's seals, as if they were missing (§4.2). (Counters of an earlier generation
        // are those of a re-key at start or one cut short before its counters were written: the
        // start floor covers them as any restored counters.)
        if countersExpected && (restored.map { $0.generation > secret.generation } ?? true) { needsRekey = true }
        if let bootMark, bootMark.secretID == secretID, bootMark.counters.generation == secret.generation {
            // Nothing was sealed under this secret in this boot after the mark was written: continue
            // from whichever of the two is later (a restored disk is behind the mark).
            let mark = bootMark.counters
            if (mark.epoch, mark.nextSequence) > (counters.epoch, counters.nextSequence) {
                counters.epoch = mark.epoch
                counters.nextSequence = mark.nextSequence
                counters.revision = mark.revision
            }
            resumedFromBootMark = true
        } else if let forgottenSealsUntil {
            startFloor = Protocol.epoch(unixSeconds: forgottenSealsUntil) + 1
        }
    }

    public var typeHash: TypeHash { content.activityType.map(keys.typeHash) ?? .none }

    /// Starts advertising the current content (e.g. once the radio is ready).
    public mutating func start(nowSeconds: Int64) -> [Action] {
        enabled = true
        return seal(nowSeconds: nowSeconds)
    }

    public mutating func stop() -> [Action] {
        enabled = false
        currentAdvert = nil
        return [.stop]
    }

    /// New content: bumps the revision (§4.2) and reseals. `changed` forces a new revision when
    /// the activity changed (a new version, title or userInfo) while type and flags stayed.
    public mutating func update(_ newContent: AdvertContent, nowSeconds: Int64, changed: Bool = false) -> [Action] {
        guard newContent != content || changed else { return [] }
        content = newContent
        counters.revision = Revision.next(counters.revision)
        return enabled ? seal(nowSeconds: nowSeconds) : [.persist(counters, bootMark)]
    }

    /// Clock tick: rotates at an epoch boundary, and releases a deferred change.
    public mutating func tick(nowSeconds: Int64) -> [Action] {
        guard enabled else { return [] }
        let epoch = Protocol.epoch(unixSeconds: nowSeconds)
        guard epoch > counters.epoch || deferred else { return [] }
        return seal(nowSeconds: nowSeconds)
    }

    /// The radio lost our advert (bluetoothd restarted, adapter power cycle): the same bytes
    /// again, which uses no new nonce.
    public func radioReset() -> [Action] {
        guard enabled, let currentAdvert else { return [] }
        return [.advertise(currentAdvert)]
    }

    /// The own key moved to a later day of the same generation (§3.1): the counters stay (each
    /// epoch's seal key comes from its day's key either way); the earlier key is dropped.
    public mutating func ratchet(_ later: AdvertisingSecret) {
        guard later.generation == secret.generation, later.day >= secret.day else { return }
        secret = later
        keys = DerivedKeys(secret: later)
    }

    /// A new own secret (after a removal, §7.4): sequence space starts again.
    public mutating func rotateSecret(_ newSecret: AdvertisingSecret, nowSeconds: Int64) -> [Action] {
        secret = newSecret
        keys = DerivedKeys(secret: newSecret)
        secretID = Self.secretID(of: newSecret)
        counters.generation = newSecret.generation
        counters.nextSequence = 0
        // The high-water mark protects one key's nonces; a new key starts from the clock.
        counters.epoch = 0
        needsRekey = false
        startFloor = 0
        counters.revision = Revision.next(counters.revision)
        return enabled ? seal(nowSeconds: nowSeconds, forceNewEpochState: true) : [.persist(counters, bootMark)]
    }

    private mutating func seal(nowSeconds: Int64, forceNewEpochState: Bool = false) -> [Action] {
        let epoch = Protocol.epoch(unixSeconds: nowSeconds)
        // A clock that stepped back below the high-water epoch (NTP step, local-time RTC,
        // restored snapshot) would reuse (K_seal, e, seq) with another body: keep the current
        // bytes on the air, or stay silent, until the clock passes it again (§4.2).
        guard !needsRekey, epoch >= counters.epoch else {
            deferred = true
            if epoch + Self.maxEpochsBehind < counters.epoch { needsRekey = true }
            return needsRekey ? [] : [.persist(counters, bootMark)]
        }
        // The state this process started from may be a restored copy whose later seals it cannot
        // know (§4.2 "Restarts"): under the secret it started with, nothing is sealed below the
        // floor; the change waits for it (at most one epoch: the floor is at most the clock's next).
        guard epoch >= startFloor else {
            deferred = true
            return [.persist(counters, bootMark)]
        }
        // No key for this epoch's day: an erased earlier day (the clock is behind the ratchet) or
        // past the chain's end (the keeper renews long before). Stay as we are.
        guard keys.covers(epoch: epoch) else {
            deferred = true
            return []
        }
        if epoch > counters.epoch {
            counters.epoch = epoch
            counters.nextSequence = 0
        }
        guard counters.nextSequence < Protocol.maxSequencePerEpoch else {
            deferred = true
            return []
        }
        deferred = false
        let sequence = UInt8(counters.nextSequence)
        counters.nextSequence += 1
        let body = AdvertBody(typeHash: typeHash, revision: counters.revision, flags: content.flags, clipboard: content.clipboard)
        let advert = RingAdvert.seal(body: body, keys: keys, epoch: keys.epochMaterial(epoch), sequence: sequence)
        currentAdvert = advert
        return [.persist(counters, bootMark), .advertise(advert)]
    }
}
