// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

extension Activities: TransferActivities {
    /// The user's current activity as it leaves the machine for a FetchActivity: WillSave first when
    /// the app asked for it (a late or failing source leaves the last saved state). Nil when the user
    /// has no current activity, or it ended meanwhile.
    public func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)? {
        guard let id = registry.currentActivity(of: uid) else { return nil }
        guard let record = try? await recordLeavingMachine(id, uid: uid) else { return nil }
        return (id, record)
    }
}
