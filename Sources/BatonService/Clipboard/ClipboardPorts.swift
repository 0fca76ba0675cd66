// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonSystem

/// The radio's part in the clipboard: the kind the ring advert carries (§4.1 bits 4–5; a change is a
/// content change, §4.2).
public protocol ClipboardAdvert: Sendable {
    func setClipboard(_ kind: ClipboardKind?) async
}

/// Why asking a member for its offer or its bytes failed.
public enum ClipboardFetchFailure: Error, Sendable, Equatable {
    /// The member's copy is no longer the one asked for (its `Error(unknownActivity)`, §6.7).
    case changed
    /// No connection reached the member.
    case unreachable
    /// The connection broke, or the member answered against §6.7 (what, for the log).
    case failed(String)
}

/// The transfer's part: the two clipboard requests to a ring member (§6.7).
public protocol ClipboardFetcher: Sendable {
    /// The member's current offer; nil when it offers nothing (or speaks no clipboard, §2.1).
    func clipboardOffer(of member: DeviceID) async throws(ClipboardFetchFailure) -> ClipboardOffer?
    /// The bytes of one offered item, written to `sink` from its start (the request's offset is 0).
    func clipboardData(of member: DeviceID, _ request: ClipboardDataRequest, item: ClipboardItem,
                       into sink: ClipboardContents) async throws(ClipboardFetchFailure)
}

/// One local account's agent (baton-agent), as the bus saw it register.
public struct ClipboardAgentEndpoint: Hashable, Sendable {
    public var uid: UInt32
    /// The account's login name: a copy is offered to the account of the same name only (§9).
    public var account: String
    public var busName: String
    public var path: String

    public init(uid: UInt32, account: String, busName: String, path: String) {
        self.uid = uid
        self.account = account
        self.busName = busName
        self.path = path
    }
}

/// A member's copy as an agent sees it: a local token to paste it by, where it comes from, what it offers.
public struct ClipboardOfferForAgent: Hashable, Sendable {
    public var token: UInt64
    public var memberName: String
    public var kind: ClipboardKind
    public var items: [ClipboardItem]
    public var expiresIn: UInt16
}

/// The calls batond makes on agents (the bus edge carries them out).
public protocol ClipboardAgentCalls: Sendable {
    func offered(_ offer: ClipboardOfferForAgent, to agent: ClipboardAgentEndpoint) async
    func withdrawn(token: UInt64, from agent: ClipboardAgentEndpoint) async
}

/// A sealed memory file (SealedMemoryFile) shared by the actors that read or fill it; closed when the
/// last of them lets it go.
public final class ClipboardContents: Sendable {
    public let file: FileDescriptor

    public init(_ file: consuming FileDescriptor) { self.file = file }
}
