// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
internal import CXCB
import BatonReadiness
import Dispatch
import Glibc

extension X11ClipboardCore {
    // MARK: - Another client's copy

    func ownerChanged(_ event: xcb_xfixes_selection_notify_event_t) {
        guard event.selection == clipboard else { return }
        let previous = lastOwner
        lastOwner = event.owner
        ownerGeneration &+= 1
        ownerTargets = nil
        dropStaleDescriptions()
        if event.owner == window { return }  // our own offer
        if event.owner == 0 {
            // Our own withdraw is no news; an owner that went away is.
            if previous == window, event.subtype == UInt8(XCB_XFIXES_SELECTION_EVENT_SET_SELECTION_OWNER.rawValue) { return }
            eventsOut.yield(.cleared)
            return
        }
        let generation = ownerGeneration
        let owner = event.owner
        // 16,384 atoms at most: far more than any real list, a bound on a hostile one.
        convert(target: targets, limit: 64 << 10, describing: generation) { [self] result in
            guard generation == ownerGeneration, case .success(let reply) = result else { return }
            var atoms: [xcb_atom_t] = []
            var seen = Set<xcb_atom_t>()
            if reply.format == 32 {
                reply.bytes.withUnsafeBytes { buffer in
                    for index in 0..<(buffer.count / 4) {
                        let atom = buffer.loadUnaligned(fromByteOffset: index * 4, as: xcb_atom_t.self)
                        if atom != 0, seen.insert(atom).inserted { atoms.append(atom) }
                    }
                }
            }
            let offersHint = seen.contains(hint)
            // Names of the first 256 distinct atoms only: a list of thousands is hostile, and 64 types is the bound.
            let named = Array(atoms.prefix(4 * ClipboardTypeList.maximumCount))
            let atomNames = names(of: named)
            var targetNames: [String] = []
            var targetOf: [String: xcb_atom_t] = [:]
            var garbage: [ClipboardTypeList.Dropped] = []
            for (atom, name) in zip(named, atomNames) {
                guard let name else {
                    if garbage.count < 8 { garbage.append(.init(name: "atom \(atom)", reason: .notMediaType)) }
                    continue
                }
                targetNames.append(name)
                if let type = ClipboardTypes.mediaType(ofTarget: name) {
                    if let known = targetOf[type], let knownName = self.names[known] {
                        // Text: the alias a reader prefers (UTF-8 first).
                        let order = ClipboardTypes.textTargets
                        if (order.firstIndex(of: name) ?? order.count) < (order.firstIndex(of: knownName) ?? order.count) {
                            targetOf[type] = atom
                        }
                    } else {
                        targetOf[type] = atom
                    }
                }
            }
            var list = ClipboardTypeList(targetNames)
            if atoms.count > named.count {
                list.dropped.append(.init(name: "\(atoms.count - named.count) more targets", reason: .tooMany))
            }
            list.dropped.append(contentsOf: garbage)
            ownerTargets = (owner, generation, targetOf.filter { list.types.contains($0.key) })
            let publish: ([UInt8]?) -> Void = { [self] hintValue in
                guard generation == ownerGeneration else { return }
                var offered = targetNames
                if offersHint, !offered.contains(ClipboardSecrecy.kdePasswordManagerHint) {
                    offered.append(ClipboardSecrecy.kdePasswordManagerHint)
                }
                var secret = ClipboardSecrecy.isSecret(offered: offered, hintValue: hintValue)
                if configuration.mutterXWayland {
                    let content = Set(targetNames.filter { ClipboardTypes.mediaType(ofTarget: $0) != nil })
                    if !secret, MutterClipboardManager.isRestoreOfSecret(content, after: lastSecretTargets) {
                        secret = true
                        statistics.restoredSecrets += 1
                        lastSecretTargets = nil
                    } else {
                        lastSecretTargets = secret ? content : nil
                    }
                }
                revision += 1
                eventsOut.yield(.changed(ClipboardChange(types: list.types, isSecret: secret, dropped: list.dropped,
                                                         revision: revision)))
            }
            if offersHint {
                convert(target: hint, limit: 256, describing: generation) { result in
                    if case .success(let value) = result { publish(value.bytes) } else { publish(nil) }
                }
            } else {
                publish(nil)
            }
        }
    }

    /// A new owner: what was being learnt about the previous copy no longer matters, and must not
    /// hold the queue (a silent previous owner would delay the new copy by its whole timeout).
    func dropStaleDescriptions() {
        conversions.pending.removeAll { $0.describes.map { $0 != ownerGeneration } ?? false }
        if let active = conversions.active, let describes = active.describes, describes != ownerGeneration,
           !active.incremental {
            finishConversion(.failure(.refused))
        }
    }

    /// Names of atoms, cached (a bounded cache: a hostile owner could name endless atoms).
    func names(of atoms: [xcb_atom_t]) -> [String?] {
        let unknown = atoms.filter { names[$0] == nil }
        if !unknown.isEmpty {
            if names.count > 4096 { names.removeAll(keepingCapacity: true) }
            for (atom, name) in zip(unknown, connection.names(of: unknown)) {
                if let name { names[atom] = name }
            }
        }
        return atoms.map { names[$0] }
    }

    func atom(named name: String) -> xcb_atom_t? {
        if let known = names.first(where: { $0.value == name })?.key { return known }
        guard let atom = connection.intern([name])?.first else { return nil }
        if names.count > 4096 { names.removeAll(keepingCapacity: true) }
        names[atom] = name
        return atom
    }

    // MARK: - Reading

    func read(type: String, limit: Int, completion: @escaping (Result<[UInt8], ClipboardError>) -> Void) {
        guard !isClosed else { return completion(.failure(.unavailable("the clipboard adapter closed"))) }
        guard let owner = connection.selectionOwner(clipboard) else {
            return completion(.failure(.unavailable("the X server did not answer")))
        }
        guard owner != 0 else { return completion(.failure(.noOwner)) }
        let target: xcb_atom_t
        if let known = ownerTargets, known.owner == owner, known.generation == ownerGeneration {
            guard let offered = known.targets[type] else { return completion(.failure(.typeNotOffered(type))) }
            target = offered
        } else if type == ClipboardTypes.text {
            target = utf8String
        } else if ClipboardTypes.isMediaType(type), type.utf8.count <= ClipboardTypeList.maximumNameBytes,
                  let interned = atom(named: type) {
            target = interned
        } else {
            return completion(.failure(.typeNotOffered(type)))
        }
        convert(target: target, limit: limit) { [self] result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply) where reply.type == stringTarget && type == ClipboardTypes.text:
                let text = ClipboardTypes.utf8(fromLatin1: reply.bytes)
                completion(text.count <= limit ? .success(text) : .failure(.overLimit(limit: limit)))
            case .success(let reply):
                completion(.success(reply.bytes))
            }
        }
        drain()
    }

    /// ConvertSelection of CLIPBOARD to `target`, one at a time in arrival order.
    /// `describing`: the owner generation whose copy the conversion looks at (TARGETS, the hint);
    /// such a conversion is dropped as soon as the owner changes again.
    func convert(target: xcb_atom_t, limit: Int, describing: UInt64? = nil,
                         completion: @escaping (Result<ConversionQueue.Reply, ClipboardError>) -> Void) {
        conversions.pending.append(ConversionQueue.Conversion(target: target, limit: limit, describes: describing,
                                                              completion: completion))
        startNextConversion()
    }

    func startNextConversion() {
        guard !isClosed, conversions.active == nil, !conversions.pending.isEmpty else { return }
        var conversion = conversions.pending.removeFirst()
        conversions.serial &+= 1
        conversion.serial = conversions.serial
        conversion.property = transferProperties[Int(conversions.serial % UInt64(transferProperties.count))]
        connection.deleteProperty(conversion.property, of: window)
        xcb_convert_selection(connection.raw, window, clipboard, conversion.target, conversion.property, UInt32(XCB_CURRENT_TIME))
        connection.flush()
        conversions.active = conversion
        armConversionTimer()
    }

    func armConversionTimer() {
        guard let serial = conversions.active?.serial else { return }
        conversions.timer?.cancel()
        conversions.timer = makeTimer(after: configuration.answerTimeout) { [self] in
            guard conversions.active?.serial == serial else { return }
            finishConversion(.failure(.timedOut))
        }
    }

    /// Fails the active INCR conversion's caller now, but keeps the conversion until the owner sent
    /// its last chunk, each deleted unread: an owner such as xclip answers no other request before
    /// its transfer ends, so the next conversion waits for it (or for the answer timeout).
    func discardRest(failing error: ClipboardError) {
        guard let active = conversions.active else { return }
        conversions.active?.completion = { _ in }
        conversions.active?.incremental = true
        conversions.active?.discarding = true
        conversions.active?.buffer = []
        active.completion(.failure(error))
        connection.flush()
        armConversionTimer()
    }

    func finishConversion(_ result: Result<ConversionQueue.Reply, ClipboardError>) {
        conversions.timer?.cancel()
        conversions.timer = nil
        guard let conversion = conversions.active else { return }
        conversions.active = nil
        conversion.completion(result)
        startNextConversion()
    }

    func selectionNotified(_ event: xcb_selection_notify_event_t) {
        guard event.requestor == window, event.selection == clipboard, let active = conversions.active,
              !active.incremental, event.target == active.target else { return }
        guard event.property != 0 else { return finishConversion(.failure(.refused)) }
        guard event.property == active.property else { return }
        // The size first: nothing over the limit is ever fetched.
        guard let head = connection.property(active.property, of: window, delete: false, maximumBytes: 0) else {
            return finishConversion(.failure(.refused))
        }
        if head.type == incr {
            // The owner sends chunks, each after we delete the last; its lower bound on the size comes first.
            let announced = connection.property(active.property, of: window, delete: true, maximumBytes: 4)
            if let announced, announced.bytes.count == 4 {
                let size = announced.bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
                if Int(size) > active.limit { return discardRest(failing: .overLimit(limit: active.limit)) }
            }
            conversions.active?.incremental = true
            statistics.incrementalReads += 1
            connection.flush()
            armConversionTimer()
            return
        }
        guard head.bytesAfter <= active.limit else {
            connection.deleteProperty(active.property, of: window)
            return finishConversion(.failure(.overLimit(limit: active.limit)))
        }
        guard let whole = connection.property(active.property, of: window, delete: true, maximumBytes: head.bytesAfter) else {
            return finishConversion(.failure(.refused))
        }
        finishConversion(.success(.init(type: whole.type, format: whole.format, bytes: whole.bytes)))
    }

    func propertyChanged(_ event: xcb_property_notify_event_t) {
        if event.state == UInt8(XCB_PROPERTY_DELETE.rawValue) {
            // A pasting app took a chunk of our INCR answer (that app may be this adapter itself).
            return sendNextChunk(OutgoingKey(requestor: event.window, property: event.atom))
        }
        if event.window == window {
            let newValue = event.state == UInt8(XCB_PROPERTY_NEW_VALUE.rawValue)
            if event.atom == timestampProperty, newValue, !timestampWaiters.isEmpty {
                timestampWaiters.removeFirst()(event.time)
                return
            }
            guard let active = conversions.active, active.incremental, event.atom == active.property,
                  event.state == UInt8(XCB_PROPERTY_NEW_VALUE.rawValue) else { return }
            guard let head = connection.property(active.property, of: window, delete: false, maximumBytes: 0),
                  head.type != 0 else { return }
            if active.discarding {
                // Deleted unread: the owner sends the next chunk, up to its zero-length end.
                connection.deleteProperty(active.property, of: window)
                connection.flush()
                return head.bytesAfter == 0 ? finishConversion(.failure(.refused)) : armConversionTimer()
            }
            if head.bytesAfter == 0 {
                // The zero-length chunk: done.
                connection.deleteProperty(active.property, of: window)
                return finishConversion(.success(.init(type: head.type, format: active.format ?? head.format, bytes: active.buffer)))
            }
            guard active.buffer.count + head.bytesAfter <= active.limit else {
                connection.deleteProperty(active.property, of: window)
                return discardRest(failing: .overLimit(limit: active.limit))
            }
            guard let chunk = connection.property(active.property, of: window, delete: true, maximumBytes: head.bytesAfter) else {
                return finishConversion(.failure(.refused))
            }
            conversions.active?.buffer.append(contentsOf: chunk.bytes)
            if conversions.active?.format == nil { conversions.active?.format = chunk.format }
            connection.flush()
            armConversionTimer()
        }
    }

}

/// Conversions of the selection this client asked for: one on the wire at a time, the rest waiting.
struct ConversionQueue {
    struct Reply {
        var type: xcb_atom_t
        var format: UInt8
        var bytes: [UInt8]
    }

    struct Conversion {
        var target: xcb_atom_t
        var limit: Int
        /// The owner generation it describes (TARGETS, the hint), nil for a read.
        var describes: UInt64?
        var completion: (Result<Reply, ClipboardError>) -> Void
        var serial: UInt64 = 0
        var property: xcb_atom_t = 0
        var incremental = false
        /// Given up (over the limit): the rest of an INCR transfer is deleted unread.
        var discarding = false
        var buffer: [UInt8] = []
        var format: UInt8?
    }

    var pending: [Conversion] = []
    var active: Conversion?
    var serial: UInt64 = 0
    var timer: (any DispatchSourceTimer)?

    mutating func failAll(_ error: ClipboardError) {
        timer?.cancel()
        timer = nil
        let all = (active.map { [$0] } ?? []) + pending
        active = nil
        pending.removeAll()
        for conversion in all { conversion.completion(.failure(error)) }
    }
}
