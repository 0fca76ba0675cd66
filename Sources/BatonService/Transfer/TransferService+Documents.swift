// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import BatonTransport
import Synchronization

/// FetchDocument (§6.5), both sides: the source streams the snapshot attached to its current
/// activity; the receiver pulls it into an inbox, resuming after broken connections.
extension TransferService {
    /// Connections that may break in one pull before it gives up (what arrived is kept for a later one).
    static let documentInterruptions = 8

    /// Pulls the document attached to `member`'s activity (type hash, revision as fetched), reporting
    /// progress as bytes received of the total.
    /// `first`, when given, sends the first request on an open channel (Continue's).
    public func pullDocument(member: DeviceID, typeHash: TypeHash, revision: UInt32, inbox: DocumentInbox,
                             first: DocumentPuller.Connect? = nil,
                             connectVia wrap: (@escaping DocumentPuller.Connect) -> DocumentPuller.Connect = { $0 },
                             progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws(DocumentPullError) -> PulledDocument {
        let puller = DocumentPuller(inbox: inbox, activity: ActivityReference(typeHash: typeHash, revision: revision),
                                    chunkTimeout: configuration.requestTimeout, maxInterruptions: Self.documentInterruptions,
                                    makeRequestID: { [requestIDs] in requestIDs.make() })
        return try await puller.pull(first: first, connect: wrap({ [weak self] request throws(TransportError) in
            guard let self else { throw .closed }
            return try await self.openForDocument(request, member: member)
        }), progress: progress)
    }

    /// Pulls the document of `activity` (type hash, revision as fetched) if the source has one: nil
    /// when the source refuses the first FetchDocument with unknownActivity before any DocumentInfo
    /// (no document, or one edited since its snapshot, which also withdraws the activity). A refusal
    /// after a DocumentInfo (the snapshot changed during a resume) is an error.
    public func pullDocumentIfAny(member: DeviceID, activity: ActivityReference, inbox: DocumentInbox, first: DocumentPuller.Connect? = nil,
                                  progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws(DocumentPullError) -> PulledDocument? {
        let described = Mutex(false)
        let marking: (@escaping DocumentPuller.Connect) -> DocumentPuller.Connect = { connect in
            { request throws(TransportError) in
                let answer = try await connect(request)
                described.withLock { $0 = true }
                return answer
            }
        }
        do {
            return try await pullDocument(member: member, typeHash: activity.typeHash, revision: activity.revision, inbox: inbox,
                                          first: first.map(marking), connectVia: marking, progress: progress)
        } catch .refused(let refusal) where refusal.code == .unknownActivity && !described.withLock({ $0 }) {
            return nil
        }
    }

    private func openForDocument(_ request: Frame, member: DeviceID) async throws(TransportError) -> (channel: SecureChannel, reply: Frame) {
        let conversation: Conversation
        do { conversation = try await open(request, member: member, forceSync: false) } catch {
            if case .remote(let refusal) = error { throw .remote(refusal) }
            throw .connectionFailed("\(error)")
        }
        guard let reply = conversation.reply else {
            conversation.channel.close()
            throw .closed
        }
        return (conversation.channel, reply)
    }

    /// The source side: only for a member, only the snapshot of the activity on the air with that
    /// type hash and revision.
    nonisolated func streamDocument(_ request: Frame, on channel: SecureChannel) async throws {
        guard await snapshot.isMember(channel.peerDeviceID) else { throw ErrorFrame(code: .notPermitted, message: "not a ring member") }
        let asked: DocumentRequest
        do { asked = try DocumentRequest(payload: request.payload) } catch { throw ErrorFrame(error) }
        let reference = asked.activity
        guard let publication = await radio.currentPublication(), publication.typeHash == reference.typeHash,
              reference.revision == ActivityReference.anyRevision || reference.revision == publication.revision,
              let document = await activities.documentForTransfer(uid: publication.uid) else {
            throw ErrorFrame(code: .unknownActivity, message: "no document for that activity")
        }
        try await DocumentSender.stream(document, for: asked, requestID: request.requestID, on: channel)
    }
}

/// An activity fetched for a Continue, its channel still open (`TransferService.fetchForContinue`):
/// the record, its document on that channel, the report, and the close. The caller closes it.
public struct FetchedActivity: Sendable {
    public let record: ActivityRecord
    /// The record's document, pulled on the same channel.
    public let document: DocumentOnChannel

    /// ActivityContinued on the same channel (repeated once on a new one when it broke).
    public func reportContinued() async { await document.transfer.reportContinued(self) }

    /// Closes the channel (idempotent).
    public func close() { document.exchange.channel.close() }
}

/// The document of an activity just fetched, pulled on the channel that carried the FetchActivity
/// (one TLS session per Continue, §9): after a break the puller goes on over new connections and
/// resumes from its partial file; a later Continue of the same snapshot resumes from it too.
public struct DocumentOnChannel: Sendable {
    let transfer: TransferService
    let member: DeviceID
    let exchange: FrameExchange
    /// The activity as fetched: its type hash and the payload's revision, so the document is that
    /// activity's and not a newer one's.
    let activity: ActivityReference
    let timeout: Duration
    /// The identity this machine proved on the channel.
    let identity: DeviceID

    /// Whether the member is still in this machine's ring, under the identity the channel proved:
    /// after a removal of the member or a new identity here (§7.4, §7.5) nothing it sent is delivered.
    public func stillInRing() async -> Bool { await transfer.stillInRing(identity: identity, member: member) }

    /// Pulls the snapshot into `inbox`; nil when the source has none for this activity.
    public func pull(into inbox: DocumentInbox,
                     progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws(DocumentPullError) -> PulledDocument? {
        let exchange = self.exchange, timeout = self.timeout
        return try await transfer.pullDocumentIfAny(member: member, activity: activity, inbox: inbox, first: { request throws(TransportError) in
            (exchange.channel, try await exchange.request(request, timeout: timeout))
        }, progress: progress)
    }
}
