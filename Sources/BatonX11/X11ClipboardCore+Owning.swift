// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
internal import CXCB
import BatonReadiness
import Dispatch
import Glibc

extension X11ClipboardCore {
    // MARK: - Owning

    func offer(_ list: ClipboardTypeList, provide: @escaping @Sendable (String) async throws -> [UInt8],
               completion: @escaping (Result<Void, ClipboardError>) -> Void) {
        guard !isClosed else { return completion(.failure(.unavailable("the clipboard adapter closed"))) }
        var targetTypes: [xcb_atom_t: String] = [:]
        var targetList: [xcb_atom_t] = [targets, timestampTarget]
        for type in list.types + list.markers {
            let aliases = list.markers.contains(type) ? [type] : ClipboardTypes.targets(ofMediaType: type)
            guard let atoms = connection.intern(aliases) else {
                return completion(.failure(.unavailable("the X server did not answer")))
            }
            for (atom, name) in zip(atoms, aliases) {
                names[atom] = name
                if targetTypes[atom] == nil { targetList.append(atom) }
                targetTypes[atom] = type
            }
        }
        offerGeneration &+= 1
        let generation = offerGeneration
        serverTime { [self] time in
            guard !isClosed, generation == offerGeneration else {
                return completion(.failure(isClosed ? .unavailable("the clipboard adapter closed") : .replaced))
            }
            xcb_set_selection_owner(connection.raw, window, clipboard, time)
            guard connection.selectionOwner(clipboard) == window else {
                return completion(.failure(.unavailable("another application took the clipboard at the same time")))
            }
            currentOffer = Offer(generation: generation, since: time, targetTypes: targetTypes, targetList: targetList,
                                 provide: provide)
            completion(.success(()))
        }
        drain()
    }

    func withdraw() {
        guard !isClosed else { return }
        offerGeneration &+= 1  // an offer still waiting for its server time is replaced too
        guard currentOffer != nil else { return }
        currentOffer = nil
        if connection.selectionOwner(clipboard) == window {
            xcb_set_selection_owner(connection.raw, 0, clipboard, UInt32(XCB_CURRENT_TIME))
        }
        drain()
    }

    /// A real server time (ICCCM 2.1: never CurrentTime for ownership): the time of the PropertyNotify
    /// that a zero-length append to our own window causes.
    func serverTime(_ body: @escaping (xcb_timestamp_t) -> Void) {
        timestampWaiters.append(body)
        let empty: [UInt8] = []
        empty.withUnsafeBytes {
            connection.setProperty(timestampProperty, of: window, type: stringTarget, bytes: $0, append: true)
        }
        connection.flush()
    }

    func selectionCleared(_ event: xcb_selection_clear_event_t) {
        guard event.owner == window, event.selection == clipboard, let offer = currentOffer else { return }
        guard event.time == 0 || event.time >= offer.since else { return }  // about an older ownership of ours
        currentOffer = nil
        offerGeneration &+= 1
        eventsOut.yield(.offerLost)
    }

    /// What answering a SelectionRequest needs.
    struct Request: Sendable {
        var requestor: xcb_window_t
        var selection: xcb_atom_t
        var target: xcb_atom_t
        var property: xcb_atom_t
        var time: xcb_timestamp_t
    }

    func answer(_ request: Request, property: xcb_atom_t) {
        connection.notifySelection(requestor: request.requestor, selection: request.selection, target: request.target,
                                   property: property, time: request.time)
    }

    func selectionRequested(_ event: xcb_selection_request_event_t) {
        // Obsolete requestors name no property: the target stands for it (ICCCM 2.2).
        let request = Request(requestor: event.requestor, selection: event.selection, target: event.target,
                              property: event.property != 0 ? event.property : event.target, time: event.time)
        guard event.selection == clipboard, event.owner == window, let offer = currentOffer,
              event.time == 0 || event.time >= offer.since else { return answer(request, property: 0) }
        if event.target == targets {
            if offer.manager == .awaitingTargets { currentOffer?.manager = .awaitingRead(client: event.requestor & ~resourceIDMask) }
            connection.setProperty(request.property, of: event.requestor, type: xcb_atom_t(XCB_ATOM_ATOM.rawValue),
                                   words: offer.targetList)
            return answer(request, property: request.property)
        }
        if event.target == timestampTarget {
            connection.setProperty(request.property, of: event.requestor, type: xcb_atom_t(XCB_ATOM_INTEGER.rawValue),
                                   words: [offer.since])
            return answer(request, property: request.property)
        }
        guard let type = offer.targetTypes[event.target] else { return answer(request, property: 0) }
        // Only a request of the X client that asked TARGETS (Mutter) can be its manager's read: an X11
        // app's paste in between is answered and leaves the stage as it is.
        if configuration.mutterXWayland, case .awaitingRead(let client) = offer.manager,
           event.requestor & ~resourceIDMask == client {
            currentOffer?.manager = .done
            if MutterClipboardManager.keeps(type) {
                statistics.refusedManagerReads += 1
                return answer(request, property: 0)
            }
        }
        // Each request waits for its own bytes; the loop goes on meanwhile. A failed provide fails
        // this request only.
        let provide = offer.provide
        Task { [self] in
            let bytes = try? await provide(type)
            queue.async { [self] in
                guard !isClosed else { return }
                if let bytes {
                    send(bytes, of: type, for: request)
                } else {
                    answer(request, property: 0)
                }
                drain()
            }
        }
    }

    func send(_ content: [UInt8], of type: String, for request: Request) {
        var bytes = content
        var replyType = request.target
        if type == ClipboardTypes.text {
            if request.target == stringTarget {
                bytes = ClipboardTypes.latin1(fromUTF8: content)
            } else if request.target == textTarget {
                replyType = utf8String
            }
        }
        guard bytes.count > chunkBytes else {
            bytes.withUnsafeBytes { connection.setProperty(request.property, of: request.requestor, type: replyType, bytes: $0) }
            return answer(request, property: request.property)
        }
        // INCR (ICCCM 2.7.2): the size, then a chunk each time the requestor deletes the property.
        let key = OutgoingKey(requestor: request.requestor, property: request.property)
        // Each holds its bytes until read: a bound on what pasting apps that stop reading can pin.
        guard outgoing[key] != nil || outgoing.count < Self.maximumTransfers else { return answer(request, property: 0) }
        outgoing[key]?.timer?.cancel()
        outgoing[key] = Outgoing(bytes: bytes, type: replyType)
        statistics.incrementalSends += 1
        if request.requestor != window {  // our own window already reports its properties
            connection.watch(request.requestor,
                             mask: UInt32(XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue | XCB_EVENT_MASK_STRUCTURE_NOTIFY.rawValue))
        }
        connection.setProperty(request.property, of: request.requestor, type: incr, words: [UInt32(clamping: bytes.count)])
        answer(request, property: request.property)
        armOutgoingTimer(key)
    }

    func armOutgoingTimer(_ key: OutgoingKey) {
        outgoing[key]?.timer?.cancel()
        let sent = outgoing[key]?.sent
        outgoing[key]?.timer = makeTimer(after: configuration.requestorTimeout) { [self] in
            // Dropped only when no chunk went since (each chunk re-arms the timer).
            guard let transfer = outgoing[key], transfer.sent == sent else { return }
            statistics.abandonedSends += 1
            endTransfer(key)
        }
    }

    func sendNextChunk(_ key: OutgoingKey) {
        guard var transfer = outgoing[key] else { return }
        let end = min(transfer.bytes.count, transfer.sent + chunkBytes)
        transfer.bytes.withUnsafeBytes { all in
            connection.setProperty(key.property, of: key.requestor, type: transfer.type,
                                   bytes: UnsafeRawBufferPointer(rebasing: all[transfer.sent..<end]))
        }
        // After the last chunk, a zero-length one (written above when nothing was left) ends it.
        if transfer.sent == end { return endTransfer(key) }
        statistics.chunksSent += 1
        transfer.sent = end
        outgoing[key] = transfer
        connection.flush()
        armOutgoingTimer(key)
    }

    func endTransfer(_ key: OutgoingKey) {
        outgoing.removeValue(forKey: key)?.timer?.cancel()
        if key.requestor != window, !outgoing.keys.contains(where: { $0.requestor == key.requestor }) {
            connection.watch(key.requestor, mask: 0)
        }
        connection.flush()
    }

    func requestorDestroyed(_ requestor: xcb_window_t) {
        for key in outgoing.keys where key.requestor == requestor {
            outgoing.removeValue(forKey: key)?.timer?.cancel()
        }
    }
}

