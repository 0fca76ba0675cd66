// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import BatonSystem
import BatonTransport
import Synchronization

/// What the transfer's server asks for the clipboard's two requests (§6.7): ClipboardService.
public protocol ClipboardSource: Sendable {
    /// `member`: the asking member's name (recorded for the copying account's status).
    func answerOffer(member: String) async -> Result<ClipboardOffer, ErrorFrame>
    func answerData(_ request: ClipboardDataRequest, member: String) async
        -> Result<(contents: ClipboardContents, start: UInt64, item: ClipboardItem), ErrorFrame>
    func answerFile(_ request: ClipboardFileRequest, member: String) async -> Result<ServedClipboardFile, ErrorFrame>
    func servedFileChanged(offerID: UInt64) async
}

extension ClipboardService: ClipboardSource {}

/// The clipboard the server answers for, set once the daemon has made it (until then every request
/// is answered as by a machine that offers nothing).
public final class ClipboardSourceSlot: Sendable {
    private let source = Mutex<(any ClipboardSource)?>(nil)
    public init() {}
    public func use(_ clipboard: any ClipboardSource) { source.withLock { $0 = clipboard } }
    var current: (any ClipboardSource)? { source.withLock { $0 } }
}

/// The clipboard's requests, both sides (§6.7). Both are streamed past the reply cache: they change
/// nothing at the source, and an answer from the cache could be an older copy (§6.2).
extension TransferService: ClipboardFetcher {
    /// The server: only for a member; nothing offered when no clipboard is wired in.
    nonisolated func streamClipboard(_ request: Frame, on channel: SecureChannel) async throws {
        // A removal is on the ring's view as soon as it is saved (the transfer's own copy follows later).
        let peer = channel.peerDeviceID
        guard await snapshot.isMember(peer), await isMemberNow(peer) else { throw ErrorFrame(code: .notPermitted, message: "not a ring member") }
        guard let source = clipboardSource.current else { throw ErrorFrame(code: .unknownActivity, message: "no clipboard offer") }
        let name = await snapshot.memberName(peer)
        switch request.type {
        case .fetchClipboardOffer:
            switch await source.answerOffer(member: name) {
            case .failure(let refusal): throw refusal
            case .success(let offer): try await channel.send(Frame(type: .clipboardOffer, requestID: request.requestID, payload: offer.payload))
            }
        case .fetchClipboardData:
            let asked: ClipboardDataRequest
            do { asked = try ClipboardDataRequest(payload: request.payload) } catch { throw ErrorFrame(error) }
            switch await source.answerData(asked, member: name) {
            case .failure(let refusal): throw refusal
            case .success(let (contents, start, item)):
                try await Self.stream(item, from: contents, at: start, offset: asked.offset, requestID: request.requestID, on: channel,
                                      stillMember: { [weak self] in await self?.mayStreamBatch(to: peer) ?? false })
            }
        case .fetchClipboardFile:
            let asked: ClipboardFileRequest
            do { asked = try ClipboardFileRequest(payload: request.payload) } catch { throw ErrorFrame(error) }
            switch await source.answerFile(asked, member: name) {
            case .failure(let refusal): throw refusal
            case .success(let served):
                guard await isMemberNow(peer) else { throw ErrorFrame(code: .notPermitted, message: "not a ring member") }
                try await DocumentSender.stream(served.contents.file, info: served.info, from: asked.offset, requestID: request.requestID, on: channel,
                                                stillMember: { [weak self] in await self?.mayStreamBatch(to: peer) ?? false })
                // A file that changed while it was read has been sent as it was then: the receiver's
                // digest check refuses it; the offer is taken back and the connection closed.
                if FileIdentity(of: served.contents.file).map({ $0.isUnchanged(from: served.identity) }) != true {
                    channel.close()
                    await source.servedFileChanged(offerID: asked.offerID)
                }
            }
        default:
            throw ErrorFrame(code: .malformed, message: "not a request")
        }
    }

    /// ClipboardData frames from `offset` to the item's end, each read from the sealed contents as it
    /// goes (64 KiB at a time: nothing else is buffered); one empty frame at the end of the item.
    /// A peer removed meanwhile gets no further frame: the connection closes (§6.7: whole, or closed).
    private static func stream(_ item: ClipboardItem, from contents: ClipboardContents, at start: UInt64, offset: UInt64,
                               requestID: UInt32, on channel: SecureChannel, stillMember: () async -> Bool) async throws {
        var offset = offset
        repeat {
            guard await stillMember() else {
                channel.close()
                return
            }
            let count = Int(min(UInt64(ClipboardData.maxDataBytes), item.size - offset))
            var bytes = [UInt8](repeating: 0, count: count)
            if count > 0 {
                let read = try bytes.withUnsafeMutableBytes { try contents.file.readFully(into: $0, at: start + offset) }
                guard read == count else { throw ErrorFrame(code: .internalError, message: "contents shorter than offered") }
            }
            let frame = try ClipboardData(offset: offset, total: item.size, data: bytes)
            try await channel.send(Frame(type: .clipboardData, requestID: requestID, payload: frame.payload))
            offset += UInt64(count)
        } while offset < item.size
    }

    // MARK: The receiving side (ClipboardFetcher)

    public func clipboardOffer(of member: DeviceID) async throws(ClipboardFetchFailure) -> ClipboardOffer? {
        let request = Frame(type: .fetchClipboardOffer, requestID: requestIDs.make(), payload: [])
        let conversation: Conversation
        do { conversation = try await open(request, member: member, forceSync: false) } catch {
            switch error {
            // Nothing offered, or a machine from before the clipboard (§2.1): no offer.
            case .remote(let refusal) where refusal.code == .unknownActivity || refusal.code == .malformed: return nil
            case .notAMember, .noEndpoints, .unreachable: throw .unreachable
            default: throw .failed("\(error)")
            }
        }
        defer { conversation.channel.close() }
        guard let reply = conversation.reply, reply.type == .clipboardOffer else { throw .failed("no ClipboardOffer in answer") }
        do { return try ClipboardOffer(payload: reply.payload) } catch { throw .failed("\(error)") }
    }

    /// One file of a files offer, pulled as a document (FetchClipboardFile answered by DocumentInfo and
    /// DocumentChunk frames, §6.7 "Files"): resumed after broken connections, its digest checked, its
    /// DocumentInfo checked against the list (size, media type, name).
    public func clipboardFile(of member: DeviceID, offerID: UInt64, index: Int, file: ClipboardFile,
                              into inbox: DocumentInbox) async throws(ClipboardFetchFailure) -> PulledDocument {
        guard let index = UInt16(exactly: index) else { throw .failed("no such file") }
        let puller = DocumentPuller(inbox: inbox, address: .clipboardFile(offerID: offerID, index: index),
                                    accepts: { $0.totalSize == file.size && $0.mediaType == file.mediaType && $0.documentID == file.name },
                                    chunkTimeout: configuration.requestTimeout, maxInterruptions: Self.documentInterruptions,
                                    sizeLimit: file.size, makeRequestID: { [requestIDs] in requestIDs.make() })
        do {
            return try await puller.pull(connect: { [weak self] request throws(TransportError) in
                guard let self else { throw .closed }
                return try await self.openForDocument(request, member: member)
            }, progress: { _, _ in })
        } catch {
            switch error {
            case .refused(let refusal) where refusal.code == .unknownActivity: throw .changed
            case .refused(let refusal) where refusal.code == .fileChanged: throw .fileChanged
            case .refused(let refusal): throw .failed("refused: \(refusal.code) \(refusal.message)")
            case .interrupted(let why): throw .failed("interrupted: \(why)")
            case .digestMismatch: throw .failed("the bytes did not match their digest")
            default: throw .failed("\(error)")
            }
        }
    }

    public func clipboardData(of member: DeviceID, _ request: ClipboardDataRequest, item: ClipboardItem,
                              into sink: ClipboardContents) async throws(ClipboardFetchFailure) {
        let frame = Frame(type: .fetchClipboardData, requestID: requestIDs.make(), payload: request.payload)
        let conversation: Conversation
        do { conversation = try await open(frame, member: member, forceSync: false) } catch {
            switch error {
            case .remote(let refusal) where refusal.code == .unknownActivity: throw .changed
            case .notAMember, .noEndpoints, .unreachable: throw .unreachable
            default: throw .failed("\(error)")
            }
        }
        defer { conversation.channel.close() }
        var check = ClipboardDataCheck(request: request, offered: item)
        var next = conversation.reply
        while !check.isComplete {
            let answer: Frame
            if let reply = next {
                answer = reply
                next = nil
            } else {
                do { answer = try await conversation.channel.receive(timeout: configuration.requestTimeout) } catch { throw .failed("\(error)") }
            }
            guard answer.requestID == frame.requestID else { throw .failed("a frame of another request in the answer") }
            guard answer.type == .clipboardData else {
                if answer.type == .error, let refusal = try? ErrorFrame(payload: answer.payload), refusal.code == .unknownActivity { throw .changed }
                throw .failed("\(answer.type) in the answer")
            }
            do {
                let data = try ClipboardData(payload: answer.payload)
                try check.accept(data)
                if !data.data.isEmpty { try data.data.withUnsafeBytes { try sink.file.writeAll($0, at: data.offset) } }
            } catch {
                throw .failed("\(error)")
            }
        }
    }
}
