// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import BatonTransport

/// A document pulled and checked against its digest, in the receiver's inbox.
public struct PulledDocument: Hashable, Sendable {
    public var path: String
    public var info: DocumentInfo
    /// Connections broken mid-stream and resumed from their offset.
    public var resumes: Int
    /// Bytes taken from the partial file of an earlier, interrupted pull rather than the network.
    public var resumedBytes: UInt64

    public init(path: String, info: DocumentInfo, resumes: Int, resumedBytes: UInt64) {
        self.path = path
        self.info = info
        self.resumes = resumes
        self.resumedBytes = resumedBytes
    }
}

/// Why a document could not be pulled.
public enum DocumentPullError: Error, Equatable, Sendable {
    /// The source refused (no such activity or snapshot, not permitted).
    case refused(ErrorFrame)
    /// The stream broke the protocol (order, sizes, another snapshot).
    case protocolError(String)
    /// Every connection broke before the end; what arrived is kept for the next pull.
    case interrupted(String)
    /// The bytes twice failed to hash to the announced digest.
    case digestMismatch
    /// The pull's task was cancelled (its Continue dismissed or abandoned): the connection is closed
    /// at once, and what arrived is kept for a later pull.
    case cancelled
    case store(SnapshotError)
}

/// The receiving side of FetchDocument (§6.5): asks, writes the chunks into the inbox's partial file,
/// resumes from that file's length after a broken connection, and checks the digest at the end (a
/// mismatch drops the partial and starts over once).
public struct DocumentPuller {
    /// Opens a connection (Hello done), sends the request and returns the channel with the first
    /// reply; the puller closes the channel.
    public typealias Connect = @Sendable (Frame) async throws(TransportError) -> (channel: SecureChannel, reply: Frame)

    public let inbox: DocumentInbox
    /// What is pulled: an activity's snapshot (FetchDocument) or a file of a clipboard offer
    /// (FetchClipboardFile); the answer is the same stream.
    public let address: DocumentAddress
    /// Whether a DocumentInfo describes what was asked for (a clipboard file: its listed size, media
    /// type and name); one that does not is a protocol error.
    public let accepts: @Sendable (DocumentInfo) -> Bool
    public let chunkTimeout: Duration
    /// Broken connections tolerated in one pull.
    public let maxInterruptions: Int
    public let makeRequestID: @Sendable () -> UInt32
    /// The largest snapshot accepted: a DocumentInfo announcing more is refused before a byte is kept,
    /// so a source cannot fill this machine's disk (batond: the sources' per-document cap, 4 GiB).
    public let sizeLimit: UInt64
    public static let defaultSizeLimit: UInt64 = 4 << 30

    public init(inbox: DocumentInbox, activity: ActivityReference, chunkTimeout: Duration, maxInterruptions: Int,
                sizeLimit: UInt64 = DocumentPuller.defaultSizeLimit, makeRequestID: @escaping @Sendable () -> UInt32) {
        self.init(inbox: inbox, address: .activity(activity), chunkTimeout: chunkTimeout, maxInterruptions: maxInterruptions,
                  sizeLimit: sizeLimit, makeRequestID: makeRequestID)
    }

    public init(inbox: DocumentInbox, address: DocumentAddress, accepts: @escaping @Sendable (DocumentInfo) -> Bool = { _ in true },
                chunkTimeout: Duration, maxInterruptions: Int, sizeLimit: UInt64 = DocumentPuller.defaultSizeLimit,
                makeRequestID: @escaping @Sendable () -> UInt32) {
        self.inbox = inbox
        self.address = address
        self.accepts = accepts
        self.chunkTimeout = chunkTimeout
        self.maxInterruptions = maxInterruptions
        self.sizeLimit = sizeLimit
        self.makeRequestID = makeRequestID
    }

    /// Pulls the snapshot. `first`, when given, sends the first request on a channel that is already
    /// open (Continue's, after its FetchActivity): the puller leaves that channel open when the stream
    /// completes on it; every later request (after a break) goes through `connect`.
    public func pull(first: Connect? = nil, connect: Connect,
                     progress: @Sendable (_ received: UInt64, _ total: UInt64) -> Void) async throws(DocumentPullError) -> PulledDocument {
        var borrowed = first
        var known: DocumentInfo?
        var interruptions = 0
        var mismatches = 0
        var resumedBytes: UInt64 = 0
        var contended = 0
        while true {
            if Task.isCancelled { throw .cancelled }
            if let known {
                // Another pull of this snapshot here (a journalled claim replayed at a sighting, another
                // Continue) writes it: its result is taken, or its partial file resumed when it stopped.
                let waited = try await waitForOtherPull(of: known.digest)
                if let path = inbox.received(digest: known.digest) {
                    return PulledDocument(path: path, info: known, resumes: interruptions, resumedBytes: known.totalSize)
                }
                // What the other pull left is not this pull's network traffic.
                if waited { resumedBytes = inbox.resumeOffset(digest: known.digest) }
            }
            let digest = known?.digest ?? DocumentRequest.anySnapshot
            let offset = known == nil ? 0 : inbox.resumeOffset(digest: digest)
            let frame: Frame
            do { frame = try address.request(digest: digest, offset: offset, requestID: makeRequestID()) } catch { throw .protocolError("\(error)") }
            let channel: SecureChannel
            let first: Frame
            let lent = borrowed
            let ownsChannel = lent == nil
            borrowed = nil
            do throws(TransportError) {
                if let lent { (channel, first) = try await lent(frame) } else { (channel, first) = try await connect(frame) }
            } catch .remote(let refusal) {
                throw .refused(refusal)
            } catch {
                interruptions += 1
                guard interruptions <= maxInterruptions else { throw .interrupted("\(error)") }
                continue
            }
            var completed = false
            // A borrowed channel stays open for the caller unless the stream broke on it.
            defer { if ownsChannel || !completed { channel.close() } }
            var check = DocumentStreamCheck(digest: digest, offset: offset)
            let info: DocumentInfo
            do throws(WireError) {
                guard first.type == .documentInfo else { throw .unexpectedMessage("\(first.type)") }
                info = try DocumentInfo(payload: first.payload)
                try check.accept(info)
                guard accepts(info) else { throw .malformed("another file") }
            } catch {
                throw .protocolError("\(error)")
            }
            guard info.totalSize <= sizeLimit else { throw .store(.payloadTooLarge(limit: sizeLimit, actual: info.totalSize)) }
            if known == nil {
                known = info
                if let path = inbox.received(digest: info.digest) {
                    // Already here. The source is streaming it all again on this channel, so a borrowed
                    // one is closed (its caller goes on over a new connection) unless nothing follows.
                    completed = info.totalSize == check.next
                    return PulledDocument(path: path, info: info, resumes: 0, resumedBytes: info.totalSize)
                }
                if inbox.pullRunning(digest: info.digest) {
                    contended += 1
                    guard contended <= Self.maxContended else { throw .store(.pullInProgress) }
                    continue
                }
                // An earlier pull of this snapshot stopped part way: ask again from where it stopped.
                let held = inbox.resumeOffset(digest: info.digest)
                if held > 0 && held <= info.totalSize {
                    resumedBytes = held
                    continue
                }
            }
            // Room for the whole snapshot is made and reserved before a byte is written (the inbox's cap).
            let reservation: InboxReservation
            let partial: PartialDocument
            do throws(SnapshotError) {
                reservation = try inbox.reserve(digest: info.digest, size: info.totalSize)
                partial = try inbox.open(digest: info.digest, offset: check.next)
            } catch .pullInProgress {
                // Another pull took the partial file since the check above: wait for it (loop start).
                contended += 1
                guard contended <= Self.maxContended else { throw .store(.pullInProgress) }
                continue
            } catch { throw .store(error) }
            defer { reservation.release() }
            progress(check.next, info.totalSize)
            // A cancel closes the channel: a receive waiting on a drip ends at once, not at the chunk timeout.
            let received: Result<String?, DocumentPullError> = await withTaskCancellationHandler {
                do throws(DocumentPullError) {
                    return .success(try await receiveRest(on: channel, requestID: frame.requestID, check: &check, into: partial, progress: progress))
                } catch { return .failure(error) }
            } onCancel: {
                channel.close()
            }
            let broken: String?
            switch received {
            case .success(let outcome): broken = outcome
            case .failure(let error):
                if case .protocolError = error { partial.discard() } else { partial.suspend() }
                throw Task.isCancelled ? .cancelled : error
            }
            if let broken {
                partial.suspend()
                if Task.isCancelled { throw .cancelled }
                interruptions += 1
                guard interruptions <= maxInterruptions else { throw .interrupted(broken) }
                continue
            }
            completed = true
            do throws(SnapshotError) {
                let path = try partial.finish()
                return PulledDocument(path: path, info: info, resumes: interruptions, resumedBytes: resumedBytes)
            } catch .digestMismatch {
                mismatches += 1
                guard mismatches < 2 else { throw .digestMismatch }
                continue
            } catch {
                throw .store(error)
            }
        }
    }

    /// Waits while another pull of `digest` holds its partial file, for as long as that file grows:
    /// one whose file stays the same size for a chunk timeout is given up on (`interrupted`).
    /// True when there was one to wait for.
    private func waitForOtherPull(of digest: [UInt8]) async throws(DocumentPullError) -> Bool {
        let clock = ContinuousClock()
        var waited = false
        var size = inbox.resumeOffset(digest: digest)
        var progressed = clock.now
        while inbox.pullRunning(digest: digest) {
            waited = true
            do { try await Task.sleep(for: Self.otherPullPoll) } catch { throw .cancelled }
            let now = inbox.resumeOffset(digest: digest)
            if now != size {
                size = now
                progressed = clock.now
            } else if clock.now - progressed > chunkTimeout {
                throw .interrupted("another pull of this snapshot here made no progress for \(chunkTimeout)")
            }
        }
        return waited
    }

    /// How often a pull waiting for another one of the same snapshot looks again (only while both run).
    static let otherPullPoll: Duration = .milliseconds(50)
    /// Times one pull may find its snapshot taken by another pull and wait for it.
    static let maxContended = 16

    /// Receives chunks until the stream is complete; returns why the connection broke, nil when complete.
    /// Each chunk is hashed by one task and written by another while the next one is received and
    /// decrypted (one of each in flight, so the digest takes the bytes in order and the partial file
    /// has one writer). Memory: the chunk being received and the one being hashed and written.
    private func receiveRest(on channel: SecureChannel, requestID: UInt32, check: inout DocumentStreamCheck, into partial: PartialDocument,
                             progress: @Sendable (UInt64, UInt64) -> Void) async throws(DocumentPullError) -> String? {
        let total = check.info?.totalSize ?? 0
        var writing: Task<SnapshotError?, Never>?
        var hashing: Task<Void, Never>?
        func finishWriting() async throws(DocumentPullError) {
            await hashing?.value
            hashing = nil
            if let failure = await writing?.value { throw .store(failure) }
            writing = nil
        }
        while !check.isComplete {
            let reply: Frame
            do throws(TransportError) {
                reply = try await channel.receive(timeout: chunkTimeout)
            } catch .invalidFrame(let error) {
                try await finishWriting()
                throw .protocolError("\(error)")
            } catch {
                // What arrived before the break is kept for the resume.
                try await finishWriting()
                return "\(error)"
            }
            // The source sends nothing else before the stream ends (§6.5): a frame of another request
            // is a violation, not something to skip (a stream of them would keep the pull waiting forever).
            guard reply.requestID == requestID else {
                try await finishWriting()
                throw .protocolError("a frame of another request in the stream")
            }
            let chunk: (offset: UInt64, count: Int)
            do throws(DocumentPullError) {
                if reply.type == .error {
                    throw .refused((try? ErrorFrame(payload: reply.payload)) ?? ErrorFrame(code: .malformed, message: ""))
                }
                do throws(WireError) {
                    guard reply.type == .documentChunk else { throw .unexpectedMessage("\(reply.type)") }
                    // The data is written from the frame's payload as it is, not copied out first.
                    chunk = try DocumentChunk.header(ofPayload: reply.payload)
                    try check.accept(chunkAt: chunk.offset, count: chunk.count)
                } catch {
                    throw .protocolError("\(error)")
                }
            } catch {
                try await finishWriting()
                throw error
            }
            try await finishWriting()
            let payload = reply.payload
            hashing = Task.detached {
                payload.withUnsafeBytes { partial.updateDigest(with: UnsafeRawBufferPointer(rebasing: $0[DocumentChunk.headerByteCount...])) }
            }
            writing = Task.detached {
                payload.withUnsafeBytes { raw in
                    do throws(SnapshotError) {
                        try partial.write(UnsafeRawBufferPointer(rebasing: raw[DocumentChunk.headerByteCount...]), at: chunk.offset)
                    } catch { return error }
                    return nil
                }
            }
            progress(check.next, total)
        }
        try await finishWriting()
        return nil
    }
}
