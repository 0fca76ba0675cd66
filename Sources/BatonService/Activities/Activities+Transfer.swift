// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// The activities' side of the transfer (`TransferActivities`, the source of a Continue): the record
/// that leaves the machine (WillSave first when the app asked for it), WasContinued after, the
/// document attached to the current activity and the edit sessions (§6.5, §6.6). Calls to the
/// source app go through `SourceCalls` (Bus/ActivityApps).
extension Activities: TransferActivities {
    /// The user's current activity as it leaves the machine for a FetchActivity: WillSave first when
    /// the app asked for it (a late or failing source leaves the last saved state). Nil when the user
    /// has no current activity, or it ended meanwhile.
    public func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)? {
        guard let id = registry.currentActivity(of: uid), let activity = registry.activities[id], activity.owner.uid == uid else { return nil }
        // Nothing to save first: the registry's record is the one that leaves.
        guard activity.needsSave, activity.sourcePath != nil else { return (id, activity.record) }
        guard let record = try? await recordLeavingMachine(id, uid: uid) else { return nil }
        return (id, record)
    }

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

    /// The snapshot a FetchDocument may be served from: the user's current activity's, unless edited since.
    public func documentForTransfer(uid: UInt32) async -> AttachedDocument? {
        registry.documentForTransfer(uid: uid)
    }

    public func currentActivityForTransfer(uid: UInt32) async -> ActivityID? { registry.currentActivity(of: uid) }

    public func editSessionsForTransfer() async -> EditSessions? { await documents.editSessions }

    public func savedDocument(documentID: String, uid: UInt32) async -> [UInt8]? {
        // WillSave first when the app asked for it; then the snapshot must be fresh.
        guard await recordForTransfer(uid: uid) != nil, let document = registry.documentForTransfer(uid: uid),
              document.info.documentID == documentID else { return nil }
        return document.info.digest
    }
}
