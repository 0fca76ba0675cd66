// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import BatonTransport
import Synchronization

/// The client side of the transfer: connects to a member's endpoints in order, says Hello, syncs
/// rosters when needed, then asks (a fetch, a report, a document pull, RingSync).
extension TransferService {
    /// The current activity of `member` with this type hash (computed with the member's secret) and
    /// advert revision (`ActivityReference.anyRevision` for whatever is current). With `versions`
    /// (the ranges the local handlers accept) it asks FetchActivityOfVersions (§9 step 2).
    public func fetch(member: DeviceID, typeHash: TypeHash, revision: UInt32,
                      versions: [ClosedRange<UInt64>]? = nil) async throws(TransferError) -> ActivityRecord {
        let conversation = try await openFetch(member: member, activity: ActivityReference(typeHash: typeHash, revision: revision), versions: versions)
        conversation.channel.close()
        // Answered after a removal of the member or a new identity here (§7.4, §7.5): nothing taken.
        guard stillInRing(identity: conversation.identity, member: member) else { throw .notAMember }
        guard let reply = conversation.reply else { throw .protocolError("no reply") }
        guard reply.type == .activityPayload else { throw .protocolError("unexpected \(reply.type)") }
        do { return try ActivityRecord(decoding: reply.payload) } catch { throw .protocolError("payload: \(error)") }
    }

    /// Tells `member` its activity was continued here. Pass `requestID` to repeat an earlier report.
    public func sendContinued(member: DeviceID, typeHash: TypeHash, revision: UInt32, requestID: UInt32? = nil) async throws(TransferError) {
        let request = Frame(type: .activityContinued, requestID: requestID ?? requestIDs.make(),
                            payload: ActivityReference(typeHash: typeHash, revision: revision).payload)
        guard let reply = try await perform(request, member: member, forceSync: false), reply.type == .ack else {
            throw .protocolError("no Ack")
        }
    }

    /// Exchanges rosters with `member` (after pairing, after a removal).
    public func syncRing(to member: DeviceID) async throws(TransferError) {
        _ = try await perform(nil, member: member, forceSync: true)
    }

    /// A fresh request id (tests repeat one to check the exactly-once rule).
    public nonisolated func makeRequestID() -> UInt32 { requestIDs.make() }

    /// Fetches `member`'s current activity for a Continue and keeps the channel open: the caller
    /// pulls its document on it (§6.5), reports ActivityContinued on it when the activity was
    /// delivered (one TLS session per Continue), and closes it. Nothing calls back: the caller
    /// decides each step with what this returns.
    public func fetchForContinue(member: DeviceID, typeHash: TypeHash, revision: UInt32,
                                 versions: [ClosedRange<UInt64>]? = nil) async throws(TransferError) -> FetchedActivity {
        let conversation = try await openFetch(member: member, activity: ActivityReference(typeHash: typeHash, revision: revision), versions: versions)
        // The member may hold its answer until it was removed here or this machine took a new identity.
        guard stillInRing(identity: conversation.identity, member: member) else {
            conversation.channel.close()
            throw .notAMember
        }
        guard let reply = conversation.reply, reply.type == .activityPayload else {
            conversation.channel.close()
            throw .protocolError("unexpected reply to FetchActivity")
        }
        let record: ActivityRecord
        do { record = try ActivityRecord(decoding: reply.payload) } catch {
            conversation.channel.close()
            throw .protocolError("payload: \(error)")
        }
        let activity = ActivityReference(typeHash: typeHash, revision: record.revision)
        let document = DocumentOnChannel(transfer: self, member: member, exchange: conversation.exchange, activity: activity,
                                         timeout: configuration.requestTimeout, identity: conversation.identity)
        return FetchedActivity(record: record, document: document)
    }

    /// ActivityContinued for a fetched activity, on its channel; a report that fails there is
    /// repeated once on a new connection with the same request id. Nothing is reported to a member
    /// that left this machine's ring meanwhile (§7.4, §7.5).
    func reportContinued(_ fetched: FetchedActivity) async {
        let document = fetched.document, member = document.member
        guard stillInRing(identity: document.identity, member: member) else { return }
        let continued = Frame(type: .activityContinued, requestID: requestIDs.make(), payload: document.activity.payload)
        var repeatOnNewChannel = false
        do throws(TransportError) {
            let answer = try await document.exchange.request(continued, timeout: configuration.requestTimeout)
            if answer.type != .ack { log("batond: ActivityContinued to \(member.shortForm) got no Ack") }
        } catch .remote(let frame) {
            log("batond: ActivityContinued to \(member.shortForm) refused: \(frame.code)")
        } catch {
            // The channel broke after the fetch: the report is repeated with the same request id (§6.2).
            repeatOnNewChannel = true
        }
        if repeatOnNewChannel {
            do {
                try await sendContinued(member: member, typeHash: document.activity.typeHash, revision: document.activity.revision,
                                        requestID: continued.requestID)
            } catch {
                log("batond: ActivityContinued to \(member.shortForm) failed: \(error)")
            }
        }
    }

    /// Opens a conversation whose first request is the fetch: FetchActivityOfVersions when `versions`
    /// is given (1 to 16 ranges), FetchActivity otherwise. A v1 source from before 0x0C existed closes
    /// the connection on its header without a reply (§2.1), which looks like `interrupted`; a source
    /// that answers `malformed` did not take it either. Both get FetchActivity instead (new request
    /// id), and the receiver's own check on the payload decides (§9 step 3). When that second try
    /// reaches nobody, the first failure is the one reported (the source was reached and broke).
    func openFetch(member: DeviceID, activity: ActivityReference, versions: [ClosedRange<UInt64>]?) async throws(TransferError) -> Conversation {
        let plain = { Frame(type: .fetchActivity, requestID: self.requestIDs.make(), payload: activity.payload) }
        guard let versions else { return try await open(plain(), member: member, forceSync: false) }
        let asked: FetchActivityOfVersions
        do { asked = try FetchActivityOfVersions(activity: activity, versions: versions) } catch { throw .protocolError("versions: \(error)") }
        let first: TransferError
        do {
            return try await open(Frame(type: .fetchActivityOfVersions, requestID: requestIDs.make(), payload: asked.payload),
                                  member: member, forceSync: false)
        } catch .interrupted(let why) {
            first = .interrupted(why)
        } catch .remote(let frame) where frame.code == .malformed {
            first = .remote(frame)
        }
        log("batond: \(member.shortForm) did not take FetchActivityOfVersions (\(first)); asking FetchActivity")
        do {
            return try await open(plain(), member: member, forceSync: false)
        } catch .unreachable, .noEndpoints {
            throw first
        }
    }

    /// A conversation with a member: the channel (open, the caller closes it), and the reply to the first request.
    struct Conversation {
        var channel: SecureChannel
        var exchange: FrameExchange
        var reply: Frame?
        /// The identity this machine proved on the channel.
        var identity: DeviceID
    }

    /// Whether `member` is still in the ring and this machine still `identity` (no removal of the
    /// member, no new identity here, §7.4, §7.5, since a conversation began): read on the ring's
    /// view, which the ring sets as it changes (no actor hop).
    nonisolated func stillInRing(identity: DeviceID, member: DeviceID) -> Bool {
        ring.view.isMember(member, asIdentity: identity)
    }

    private func perform(_ request: Frame?, member: DeviceID, forceSync: Bool) async throws(TransferError) -> Frame? {
        let conversation = try await open(request, member: member, forceSync: forceSync)
        conversation.channel.close()
        return conversation.reply
    }

    /// Connects to the member's endpoints in order (newest first), says Hello, syncs rosters when the
    /// versions differ (or `forceSync`), then sends `request`. A connection that breaks after it was
    /// established is retried on a new one with the same request id (§6.2).
    func open(_ request: Frame?, member: DeviceID, forceSync: Bool) async throws(TransferError) -> Conversation {
        guard snapshot.isMember(member) else { throw .notAMember }
        // The identity the connector proves now: a conversation never outlives it (below).
        let identity = snapshot.deviceID
        var lastError = TransferError.noEndpoints
        // A member that was reached once explains the failure better than a later refused connect.
        var reachedError: TransferError?
        for _ in 0..<configuration.maxAttempts {
            let endpoints = await ring.dialEndpoints(of: member)
            guard !endpoints.isEmpty else { throw .noEndpoints }
            var broken = false
            // A broken connection moves on to the next endpoint with the same request; another round
            // follows only when one broke (the member was there, so trying again may succeed).
            for endpoint in endpoints {
                let channel: SecureChannel
                do {
                    switch endpoint {
                    case .bluetooth(let address, let type, let psm):
                        guard configuration.bluetooth else { continue }
                        channel = try await connectOverBluetooth(address: address, type: type, psm: psm)
                    case .ip(let host, let port):
                        channel = try await connector.connect(host: host, port: port, timeout: configuration.connectTimeout)
                    }
                } catch {
                    lastError = .unreachable(Self.describe(error))
                    continue
                }
                guard channel.peerDeviceID == member else {
                    channel.close()
                    lastError = .unreachable("another ring member answers at that endpoint")
                    continue
                }
                let exchange = FrameExchange(channel: channel)
                do {
                    let reply = try await converse(exchange, member: member, identity: identity, request: request, forceSync: forceSync)
                    await ring.endpointWorked(member, endpoint)
                    return Conversation(channel: channel, exchange: exchange, reply: reply, identity: identity)
                } catch .remote(let error) {
                    channel.close()
                    throw .remote(error)
                } catch .invalidFrame(let error) {
                    channel.close()
                    throw .protocolError("\(error)")
                } catch .peerNotRecognised {
                    // Removed here, or this machine took a new identity, while the channel was open.
                    channel.close()
                    throw .notAMember
                } catch {
                    channel.close()
                    reachedError = error == .timedOut ? .timedOut(Self.describe(error)) : .interrupted(Self.describe(error))
                    broken = true
                }
            }
            if !broken { break }
        }
        throw reachedError ?? lastError
    }

    private func converse(_ exchange: FrameExchange, member: DeviceID, identity: DeviceID, request: Frame?,
                          forceSync: Bool) async throws(TransportError) -> Frame? {
        // A channel opened before a removal of `member` or a new identity here (§7.4, §7.5) carries
        // nothing of the ring as it is now: not the new id in a Hello, not the roster with the new
        // secrets (the member may hold its TLS handshake or its Hello until then; ResetIdentityAttackTests).
        func stillOurs() -> RingSnapshot? {
            let current = ring.view.current
            return current.deviceID == identity && current.isMember(member) ? current : nil
        }
        guard stillOurs() != nil, snapshot.deviceID == identity else { throw .peerNotRecognised }
        let ours = ownHello()
        // Hello carries request id 0 (§6.2): it is never cached, so it needs no id of its own.
        let reply = try await exchange.request(Frame(type: .hello, requestID: 0, payload: ours.payload),
                                               timeout: configuration.requestTimeout)
        guard reply.type == .hello, let theirs = try? HelloMessage(payload: reply.payload), theirs.deviceID == member else {
            throw .invalidFrame(.unexpectedMessage("Hello"))
        }
        // A RingSync still owed to this member (a re-key it missed) goes out now that it answers.
        let owed = ring.view.current.pendingSyncs[member] != nil
        if forceSync || owed || theirs.rosterDigest != ours.rosterDigest {
            // A second round when merging their answer changed ours again (a removal new to us made us
            // rotate our secret): they must learn the new secret too.
            for _ in 0..<2 {
                guard let current = stillOurs() else { throw .peerNotRecognised }
                let sent = current.roster
                let roster: [UInt8]
                do { roster = try sent.encoded() } catch { throw .unencodableFrame(error) }
                let answer = try await exchange.request(Frame(type: .ringSync, requestID: requestIDs.make(), payload: roster),
                                                        timeout: configuration.requestTimeout)
                guard answer.type == .ringSync, let merged = try? Roster(decoding: answer.payload) else {
                    throw .invalidFrame(.unexpectedMessage("RingSync"))
                }
                // Answered: the member holds this version now, so the durable pending sync ends (§7.4).
                await ring.syncDelivered(to: member, version: sent.version)
                let ours: Roster
                do { ours = try await ring.receivedRoster(merged, from: member) } catch { throw .invalidFrame(error) }
                if ours.digest == merged.digest { break }
            }
        }
        guard let request else { return nil }
        return try await exchange.request(request, timeout: configuration.requestTimeout)
    }
}


/// FetchDocument (§6.5), the receiving side: the document is pulled into an inbox, resuming after
/// broken connections (the source's side is `streamDocument`, TransferService.swift).
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

    func openForDocument(_ request: Frame, member: DeviceID) async throws(TransportError) -> (channel: SecureChannel, reply: Frame) {
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
    public func stillInRing() -> Bool { transfer.stillInRing(identity: identity, member: member) }

    /// Pulls the snapshot into `inbox`; nil when the source has none for this activity.
    public func pull(into inbox: DocumentInbox,
                     progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws(DocumentPullError) -> PulledDocument? {
        let exchange = self.exchange, timeout = self.timeout
        return try await transfer.pullDocumentIfAny(member: member, activity: activity, inbox: inbox, first: { request throws(TransportError) in
            (exchange.channel, try await exchange.request(request, timeout: timeout))
        }, progress: progress)
    }
}

/// Why a request to another ring member failed.
public enum TransferError: Error, Sendable, Equatable {
    /// The device is not (or no longer) a ring member.
    case notAMember
    /// No endpoint is known for the member.
    case noEndpoints
    /// No endpoint answered as that member; the last cause.
    case unreachable(String)
    /// The member answered Hello but the connection broke before its reply (every attempt).
    case interrupted(String)
    /// The member answered Hello but not the request within the request timeout.
    case timedOut(String)
    /// The member answered with an Error frame.
    case remote(ErrorFrame)
    /// The member's answer broke the protocol.
    case protocolError(String)
}
