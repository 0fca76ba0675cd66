// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport

/// FetchDocument on the source side (§6.5), and the answered fetches it may name.
extension TransferService {
    /// FetchDocument, the source side (§6.5): only for a member, only the snapshot of the activity on the air with that
    /// type hash and revision.
    nonisolated func streamDocument(_ request: Frame, on channel: SecureChannel) async throws {
        guard await snapshot.isMember(channel.peerDeviceID), await isMemberNow(channel.peerDeviceID) else {
            throw ErrorFrame(code: .notPermitted, message: "not a ring member")
        }
        let asked: DocumentRequest
        do { asked = try DocumentRequest(payload: request.payload) } catch { throw ErrorFrame(error) }
        let reference = asked.activity
        guard let publication = await radio.currentPublication(), publication.typeHash == reference.typeHash else {
            throw ErrorFrame(code: .unknownActivity, message: "no document for that activity")
        }
        // The advert's revision, or the one of the payload this peer was just sent for the activity
        // still current: its app's WillSave may have changed it and so moved the advert's revision.
        // That payload names the snapshot attached when it was sent, not a later one of the activity.
        guard let document = await activities.documentForTransfer(uid: publication.uid) else {
            throw ErrorFrame(code: .unknownActivity, message: "no document for that activity")
        }
        if reference.revision != ActivityReference.anyRevision && reference.revision != publication.revision {
            let current = await activities.currentActivityForTransfer(uid: publication.uid)
            guard await servedPayload(reference, to: channel.peerDeviceID, activity: current, snapshot: document.info.digest) else {
                throw ErrorFrame(code: .unknownActivity, message: "no document for that activity")
            }
        }
        let peer = channel.peerDeviceID
        try await DocumentSender.stream(document, for: asked, requestID: request.requestID, on: channel,
                                        stillMember: { [weak self] in await self?.mayStreamBatch(to: peer) ?? false })
    }

    /// Whether this source answered `peer`'s FetchActivity with `reference` (not yet followed by
    /// ActivityContinued) for `activity`, with `snapshot` attached then.
    func servedPayload(_ reference: ActivityReference, to peer: DeviceID, activity: ActivityID?, snapshot: [UInt8]) -> Bool {
        guard let activity else { return false }
        return served.contains { $0.peer == peer && $0.reference == reference && $0.activity == activity && $0.snapshot == snapshot }
    }

    /// Records an answered fetch. Past `servedLimit` the oldest entry of the member holding the
    /// most goes: a member that fetches again and again forgets its own, never another's (§9 step 4).
    func remember(_ entry: Served) {
        served.append(entry)
        guard served.count > Self.servedLimit else { return }
        var counts: [DeviceID: Int] = [:]
        for each in served { counts[each.peer, default: 0] += 1 }
        let most = counts.values.max() ?? 0
        if let index = served.firstIndex(where: { counts[$0.peer] == most }) { served.remove(at: index) }
    }
}
