import BatonCore
import BatonStore
import BatonTransport

extension TransferActivities {
    /// Activities without documents (test fakes, older conformers) serve none.
    public func documentForTransfer(uid: UInt32) async -> AttachedDocument? { nil }
}

/// FetchDocument (§6.5), both sides: the source streams the snapshot attached to its current
/// activity; the receiver pulls it into an inbox, resuming after broken connections.
extension TransferService {
    /// Connections that may break in one pull before it gives up (what arrived is kept for a later one).
    static let documentInterruptions = 8

    /// Pulls the document attached to `member`'s activity (type hash, revision as fetched), reporting
    /// progress as bytes received of the total.
    public func pullDocument(member: DeviceID, typeHash: TypeHash, revision: UInt32, inbox: DocumentInbox,
                             progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws(DocumentPullError) -> PulledDocument {
        let puller = DocumentPuller(inbox: inbox, activity: ActivityReference(typeHash: typeHash, revision: revision),
                                    chunkTimeout: configuration.requestTimeout, maxInterruptions: Self.documentInterruptions,
                                    makeRequestID: { [requestIDs] in requestIDs.make() })
        return try await puller.pull(connect: { [weak self] request throws(TransportError) in
            guard let self else { throw .closed }
            return try await self.openForDocument(request, member: member)
        }, progress: progress)
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
