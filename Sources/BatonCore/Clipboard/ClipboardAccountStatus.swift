// SPDX-License-Identifier: LGPL-2.1-or-later
/// What one account's universal clipboard is doing on this machine, as batond sees it
/// (Clipboard1.GetStatus, `baton clipboard status`): so that a person can check that the bytes of a
/// copy left only when a paste on another machine asked for them, and where.
public struct ClipboardAccountStatus: Hashable, Sendable {
    /// The account's copy on offer here.
    public struct Offer: Hashable, Sendable {
        public var kind: ClipboardKind
        public var items: [ClipboardItem]
        /// Seconds until it expires.
        public var expiresIn: UInt32
        /// Members that asked for its types (only that: no byte of it), by name.
        public var askedBy: [String]
        /// Each paste on a member: the bytes of one type left for it.
        public var pastedOn: [ClipboardPaste]
        /// Pastes beyond those listed.
        public var morePastes: UInt64

        public init(kind: ClipboardKind, items: [ClipboardItem], expiresIn: UInt32, askedBy: [String] = [], pastedOn: [ClipboardPaste] = [],
                    morePastes: UInt64 = 0) {
            self.kind = kind
            self.items = items
            self.expiresIn = expiresIn
            self.askedBy = askedBy
            self.pastedOn = pastedOn
            self.morePastes = morePastes
        }
    }

    /// A copy of the account from a member, handed to its agent here (nothing of it fetched until a paste).
    public struct Taken: Hashable, Sendable {
        public var device: String
        public var kind: ClipboardKind
        public var items: [ClipboardItem]
        public var expiresIn: UInt32

        public init(device: String, kind: ClipboardKind, items: [ClipboardItem], expiresIn: UInt32) {
            self.device = device
            self.kind = kind
            self.items = items
            self.expiresIn = expiresIn
        }
    }

    /// An agent of the account is registered: its clipboard takes part.
    public var registered: Bool
    public var offer: Offer?
    public var taken: Taken?
    /// Since batond started: members answered the types of the account's copies, and pastes that
    /// took their bytes.
    public var offersAnswered: UInt64
    public var pastesAnswered: UInt64

    public init(registered: Bool, offer: Offer? = nil, taken: Taken? = nil, offersAnswered: UInt64 = 0, pastesAnswered: UInt64 = 0) {
        self.registered = registered
        self.offer = offer
        self.taken = taken
        self.offersAnswered = offersAnswered
        self.pastesAnswered = pastesAnswered
    }
}
