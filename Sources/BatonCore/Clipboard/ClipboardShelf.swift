// SPDX-License-Identifier: LGPL-2.1-or-later
/// The source's side of the clipboard (§9.5): the one copy this device offers, the kind its advert
/// carries, when it expires, and the answers to the two clipboard requests. Pure: the time (seconds on a
/// monotonic clock, never the date: a wall clock stepped back would keep an offer for days) and the
/// random offer id come in; the bytes stay with the agent of the account that copied them.
public struct ClipboardShelf: Sendable {
    /// The offer expires this long after the copy unless the app asked for less (Apple's default).
    public static let defaultExpirySeconds: UInt16 = 120

    /// The copy on the shelf.
    public struct Copy: Hashable, Sendable {
        public var offerID: UInt64
        public var kind: ClipboardKind
        /// The local account that copied it (its uid, for asking its agent for the bytes).
        public var uid: UInt32
        public var account: String
        public var items: [ClipboardItem]
        /// When (monotonic seconds) nothing more is answered for it and the advert loses its kind.
        public var expiresAt: Int64
        /// When it was offered.
        public var offeredAt: Int64
        /// The members that asked for its types (FetchClipboardOffer answered), by name, each once,
        /// at most `maxRecorded`.
        public var askedBy: [String] = []
        /// Its bytes that left for members (FetchClipboardData answered), oldest first, at most
        /// `maxRecorded`; `morePastes` counts the ones beyond.
        public var pastes: [ClipboardPaste] = []
        public var morePastes: UInt64 = 0
    }

    /// How many askers and pastes of one copy are kept by name (a copy lives at most an hour).
    public static let maxRecorded = 32

    public private(set) var copy: Copy?

    /// Per account (uid), since this shelf was made: how many times members were answered the types
    /// of its copies, and how many times its bytes left at a paste. What `baton clipboard status`
    /// shows, so a person can see that nothing left before a paste.
    public private(set) var answered: [UInt32: (offers: UInt64, pastes: UInt64)] = [:]

    public init() {}

    /// What the advert carries now (bits 4–5).
    public var kind: ClipboardKind? { copy?.kind }

    /// When the shelf next changes by itself (the expiry), for an event-bound timer; nil: never.
    public var nextDeadline: Int64? { copy?.expiresAt }

    /// `account` (uid) copied `items`: the new copy replaces whatever was offered (a content change:
    /// the advert's revision moves, §4.2). `expiresIn` is clamped to 1 ... 3,600 s. The offer id
    /// must be new and unpredictable (batond: 8 random bytes).
    public mutating func offer(uid: UInt32, account: String, kind: ClipboardKind, items: [ClipboardItem],
                               expiresIn: UInt16 = defaultExpirySeconds, offerID: UInt64, nowSeconds: Int64) throws(WireError) {
        let seconds = min(max(expiresIn, 1), ClipboardOffer.maxExpirySeconds)
        // Checked as the frame will be, so nothing is put on the air that cannot be answered.
        _ = try ClipboardOffer(offerID: offerID, kind: kind, expiresIn: seconds, account: account, items: items)
        copy = Copy(offerID: offerID, kind: kind, uid: uid, account: account, items: items, expiresAt: nowSeconds + Int64(seconds),
                    offeredAt: nowSeconds)
    }

    /// Takes the copy back when it is `uid`'s (a secret or local-only copy replaced it, the account
    /// turned the clipboard off, its agent left). True when the advert must lose its kind.
    public mutating func withdraw(uid: UInt32) -> Bool {
        guard copy?.uid == uid else { return false }
        copy = nil
        return true
    }

    /// Shortens the life of `uid`'s copy to `seconds` from now (never lengthens it). False when the copy
    /// is not `uid`'s.
    public mutating func shorten(uid: UInt32, to seconds: UInt16, nowSeconds: Int64) -> Bool {
        guard var current = copy, current.uid == uid else { return false }
        current.expiresAt = min(current.expiresAt, nowSeconds + Int64(max(seconds, 1)))
        copy = current
        return true
    }

    /// Drops an expired copy. True when the advert must lose its kind.
    public mutating func expire(nowSeconds: Int64) -> Bool {
        guard let copy, nowSeconds >= copy.expiresAt else { return false }
        self.copy = nil
        return true
    }

    /// The answer to FetchClipboardOffer: the offer with the whole seconds it has left, or
    /// `Error(unknownActivity)` when nothing is offered.
    public func answerOffer(nowSeconds: Int64) -> Result<ClipboardOffer, ErrorFrame> {
        guard let copy, nowSeconds < copy.expiresAt else { return .failure(ErrorFrame(code: .unknownActivity, message: "no clipboard offer")) }
        let left = UInt16(clamping: copy.expiresAt - nowSeconds)
        do {
            return .success(try ClipboardOffer(offerID: copy.offerID, kind: copy.kind, expiresIn: max(left, 1), account: copy.account, items: copy.items))
        } catch {
            return .failure(ErrorFrame(code: .internalError, message: "offer not encodable"))
        }
    }

    /// FetchClipboardOffer of `member` was answered with the copy on the shelf (`answerOffer` succeeded).
    public mutating func recordOfferAnswered(to member: String) {
        guard var current = copy else { return }
        answered[current.uid, default: (0, 0)].offers += 1
        if !current.askedBy.contains(member), current.askedBy.count < Self.maxRecorded { current.askedBy.append(member) }
        copy = current
    }

    /// The bytes of `item` of the copy on the shelf left for `member` (`answerData` succeeded).
    public mutating func recordPaste(of item: ClipboardItem, to member: String) {
        recordPaste(mediaType: item.mediaType, size: item.size, to: member)
    }

    /// `size` bytes of the copy on the shelf (one of its files, of type `mediaType`) left for `member`
    /// (`answerFile` succeeded).
    public mutating func recordPaste(mediaType: String, size: UInt64, to member: String) {
        guard var current = copy else { return }
        answered[current.uid, default: (0, 0)].pastes += 1
        if current.pastes.count < Self.maxRecorded {
            current.pastes.append(ClipboardPaste(device: member, mediaType: mediaType, size: size))
        } else {
            current.morePastes += 1
        }
        copy = current
    }

    /// Checks FetchClipboardData against the copy on the shelf: the copy and item to stream, or the
    /// Error frame to answer (`unknownActivity` when the copy changed, expired or has no such type;
    /// `malformed` for an offset beyond the item).
    public func answerData(_ request: ClipboardDataRequest, nowSeconds: Int64) -> Result<(copy: Copy, item: ClipboardItem), ErrorFrame> {
        guard let copy, nowSeconds < copy.expiresAt, copy.offerID == request.offerID else {
            return .failure(ErrorFrame(code: .unknownActivity, message: "clipboard changed"))
        }
        guard let item = copy.items.first(where: { $0.mediaType == request.mediaType }) else {
            return .failure(ErrorFrame(code: .unknownActivity, message: "type not offered"))
        }
        guard request.offset <= item.size else { return .failure(ErrorFrame(code: .malformed, message: "offset beyond the item")) }
        return .success((copy, item))
    }
}

/// One paste on a member of this machine's copy: which member, which type, how many bytes left.
public struct ClipboardPaste: Hashable, Sendable {
    public var device: String
    public var mediaType: String
    public var size: UInt64

    public init(device: String, mediaType: String, size: UInt64) {
        self.device = device
        self.mediaType = mediaType
        self.size = size
    }
}
