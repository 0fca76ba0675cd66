// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore

/// The source side: WillSave before a record leaves the machine, WasContinued after (ActivitySource1 through `SourceCalls`).
extension Activities {
    // MARK: WillSave and the payload

    /// The activity's record after the WillSave exchange (if NeedsSave and a Source are set). A late,
    /// failing or invalid answer leaves the last saved state and records source-timeout (source-gone
    /// when the owner has left the bus).
    func recordLeavingMachine(_ id: ActivityID, uid: UInt32) async throws(ActivityFailure) -> ActivityRecord {
        let saving = try activity(id, for: uid)
        if saving.needsSave, let source = saving.sourcePath {
            if let failure = await askSourceToSave(saving, source: source) {
                errorLog.record(ErrorCategory(failure), at: clock.unixSeconds())
                await apply(registry.recordFailure(id, category: failure))
                logger.log("batond: WillSave for \(id.objectPath) failed: \(failure.rawValue)")
            }
        }
        // The activity may have been invalidated while the source was asked.
        return try activity(id, for: uid).record
    }

    /// Nil on success (changes applied), else the failure category.
    private func askSourceToSave(_ activity: Activity, source: String) async -> FailureCategory? {
        switch await sources.willSave(activity, source: source) {
        case .failed(let category): return category
        case .changes(let changes):
            do {
                let events = try registry.update(activity.id, by: activity.owner.uid, changes: changes)
                await apply(events)
                return nil
            } catch {
                return .sourceTimeout
            }
        }
    }

    /// Tells the source its activity was continued on `device` (once per transfer). Failures are
    /// recorded as source-gone and otherwise ignored.
    public func notifyWasContinued(_ id: ActivityID, device: String) async {
        guard let activity = registry.activities[id], let source = activity.sourcePath else { return }
        if await !sources.wasContinued(activity, source: source, device: device) { recordError(.sourceGone) }
    }
}
