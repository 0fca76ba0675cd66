// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
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
    /// A file of the member's copy changed there since it was copied (its `Error(fileChanged)`).
    case fileChanged
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
    /// One file of a files offer (FetchClipboardFile, §6.7 "Files"), pulled as a document into
    /// `inbox` and checked against its digest.
    func clipboardFile(of member: DeviceID, offerID: UInt64, index: Int, file: ClipboardFile,
                       into inbox: DocumentInbox) async throws(ClipboardFetchFailure) -> PulledDocument
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
    /// The files of a copy of kind files (ClipboardAgent1.OfferedFiles); empty otherwise.
    public var files: [ClipboardFile] = []
}

/// Why the copying account's agent did not hand a file of its copy over (ClipboardAgent1.OpenFile).
public enum ClipboardOpenFailure: Error, Sendable, Equatable {
    /// The file changed, was removed or can no longer be read since the copy (what, in words).
    case changed(String)
    /// The agent holds no such copy any more (a newer one replaced it).
    case noSuchCopy
    /// The agent did not answer, or failed (what, for the log).
    case failed(String)
}

/// The calls batond makes on agents (the bus edge carries them out).
public protocol ClipboardAgentCalls: Sendable {
    func offered(_ offer: ClipboardOfferForAgent, to agent: ClipboardAgentEndpoint) async
    func withdrawn(token: UInt64, from agent: ClipboardAgentEndpoint) async
    /// File `index` of the agent's files copy `copy`, opened read-only by the agent (as its account)
    /// and unchanged since the copy.
    func openFile(copy: UInt64, index: Int, from agent: ClipboardAgentEndpoint) async throws(ClipboardOpenFailure) -> ClipboardContents
}

/// A sealed memory file (SealedMemoryFile), or a file of a copy of files, shared by the actors that
/// read or fill it; closed when the last of them lets it go.
public final class ClipboardContents: Sendable {
    public let file: FileDescriptor

    public init(_ file: consuming FileDescriptor) { self.file = file }
}
