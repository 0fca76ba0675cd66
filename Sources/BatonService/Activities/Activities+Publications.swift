// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// A publisher call, queued in the order the registry's events decided it.
enum PublisherOperation: Sendable {
    case publish(ActivityID, revision: UInt32, ActivityRecord)
    case withdraw(uid: UInt32)
}

/// Publication of the users' current activities: the registry's publish and withdraw events go to
/// the `ActivityPublisher` (the radio, whose `PublicationBook` says what each user published and
/// what the advert stands for) strictly in the order the registry emitted them: one queue, drained
/// one call at a time, so no task scheduling decides whether a withdrawal overtakes a publication.
extension Activities {
    func publish(_ id: ActivityID, revision: UInt32) {
        guard publisher != nil else {
            let category: FailureCategory = .radioUnavailable
            errorLog.record(ErrorCategory(category), at: clock.unixSeconds())
            emitAll(registry.publishFailed(id, revision: revision, category: category))
            return
        }
        guard let record = registry.activities[id]?.record else { return }
        publishesInFlight += 1
        enqueue(.publish(id, revision: revision, record))
    }

    /// Queues `operation`; starts the drain when none runs (the queue, not the drain, holds the order).
    func enqueue(_ operation: PublisherOperation) {
        publisherQueue.append(operation)
        guard !publisherDraining else { return }
        publisherDraining = true
        publisherDrain = Task { await drainPublisherQueue() }
    }

    /// Waits until every queued call is carried out.
    func publisherQueueDrained() async {
        while publisherDraining, let drain = publisherDrain { await drain.value }
    }

    /// Carries out the queued calls first to last; the answer of a publication is applied before
    /// the next call goes out.
    private func drainPublisherQueue() async {
        while let publisher, !publisherQueue.isEmpty {
            switch publisherQueue.removeFirst() {
            case .publish(let id, let revision, let record):
                do throws(RadioError) {
                    let advertRevision = try await publisher.publish(record, uid: id.uid)
                    await publishFinished(id, revision: revision, failure: nil, advertRevision: advertRevision)
                } catch {
                    let category: FailureCategory = switch error {
                    case .unavailable: .radioUnavailable
                    case .instanceLimit, .invalidLength, .failed: .advertRejected
                    }
                    await publishFinished(id, revision: revision, failure: category)
                }
            case .withdraw(let uid):
                await publisher.withdraw(uid: uid)
            }
        }
        publisherDraining = false
    }

    func publishFinished(_ id: ActivityID, revision: UInt32, failure: FailureCategory?, advertRevision: UInt32? = nil) async {
        publishesInFlight -= 1
        await refreshRadio()
        if let failure {
            errorLog.record(ErrorCategory(failure), at: clock.unixSeconds())
            await apply(registry.publishFailed(id, revision: revision, category: failure))
        } else {
            await apply(registry.published(id, revision: revision, advertRevision: advertRevision))
        }
    }

    /// Applies events that only change properties (no await needed).
    func emitAll(_ events: [RegistryEvent]) {
        for case .changed(let id, let fields) in events { emitChanges(id, fields) }
    }
}
