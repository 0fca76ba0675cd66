// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import Dispatch
import Glibc

/// Owning the clipboard: a data source with our types, set as the selection, answering each paste
/// by calling `provide` and writing to the pasting client's pipe. Confined to the core's queue.
extension WaylandClipboardCore {
    // MARK: - Owning

    func offer(_ list: ClipboardTypeList, provide: @escaping @Sendable (String) async throws -> [UInt8],
               completion: @escaping (Result<Void, ClipboardError>) -> Void) {
        guard !isClosed else { return completion(.failure(.unavailable(closeReason))) }
        let source = connection.newID()
        objects[source] = .source
        var create = WaylandRequest(object: manager, opcode: WaylandInterface.Manager.createDataSource)
        create.uint(source)
        request(create)
        var typeOfName: [String: String] = [:]
        for type in list.types + list.markers {
            let names = list.markers.contains(type) ? [type] : (type == ClipboardTypes.text ? WaylandTypeNames.textNames : [type])
            for name in names where typeOfName[name] == nil {
                typeOfName[name] = type
                var offer = WaylandRequest(object: source, opcode: WaylandInterface.Source.offer)
                offer.string(name)
                request(offer)
            }
        }
        var set = WaylandRequest(object: device, opcode: WaylandInterface.Device.setSelection)
        set.object(source)
        request(set)
        // A previous offer of ours is cancelled by the compositor, and destroyed then.
        offerGeneration &+= 1
        let generation = offerGeneration
        // A clearing still due from a withdrawal arrives before this selection, while `own` is set.
        withdrawnSource = nil
        own = OwnOffer(source: source, generation: generation, typeOfName: typeOfName, provide: provide)
        sync { [self] in
            if own?.generation == generation {
                own?.confirmed = true
                completion(.success(()))
            } else if isClosed {
                completion(.failure(.unavailable(closeReason)))
            } else {
                completion(.failure(offerGeneration == generation
                    ? .unavailable("another application took the clipboard at the same time") : .replaced))
            }
        }
    }

    func withdraw() {
        guard !isClosed else { return }
        offerGeneration &+= 1  // an offer still waiting for its confirmation is replaced too
        guard let offer = own else { return }
        own = nil
        // Destroying the source clears the selection if it still holds it (and only then).
        destroySource(offer.source)
        withdrawnSource = offer.source
    }

    func destroySource(_ source: UInt32) {
        guard objects[source] == .source, !destroyed.contains(source) else { return }
        destroyed.insert(source)
        request(WaylandRequest(object: source, opcode: WaylandInterface.Source.destroy))
    }

    func sourceCancelled(_ source: UInt32, alreadyDestroyed: Bool) {
        if withdrawnSource == source { withdrawnSource = nil }  // another client's copy replaced it first
        if !alreadyDestroyed { destroySource(source) }
        guard let offer = own, offer.source == source else { return }  // an older offer of ours
        own = nil
        if offer.confirmed { eventsOut.yield(.offerLost) }
    }

    /// A pasting client asked for `type`: `provide` runs in its own task, the loop goes on; its
    /// bytes go to the client's pipe as it reads them. A failed `provide` closes the pipe unanswered.
    func serve(type: String, name: String, to descriptor: Int32, provide: @escaping @Sendable (String) async throws -> [UInt8]) {
        guard writers.count < Self.maximumWriters else {
            closeDescriptor(descriptor)
            return
        }
        let box = DescriptorBox(descriptor)
        Task { [self] in
            let bytes = try? await provide(type)
            queue.async { [self] in
                guard !isClosed, let bytes, writers.count < Self.maximumWriters else {
                    closeDescriptor(box.descriptor)
                    return
                }
                let content = name == "STRING" ? ClipboardTypes.latin1(fromUTF8: bytes) : bytes
                var key: ObjectIdentifier?
                let writer = PipeWriter(descriptor: box.descriptor, bytes: content, timeout: configuration.requestorTimeout,
                                        queue: queue) { [weak self] _ in
                    if let key { self?.writers[key] = nil }
                }
                key = ObjectIdentifier(writer)
                writers[ObjectIdentifier(writer)] = writer
            }
        }
    }
}

/// A descriptor handed to a task (an Int32 is Sendable; the box names what it is).
private struct DescriptorBox: Sendable {
    let descriptor: Int32
    init(_ descriptor: Int32) { self.descriptor = descriptor }
}
