import BatonCore

extension ActivityService: TransferActivities {
    /// The user's current activity as it leaves the machine for a FetchActivity: WillSave first when
    /// the app asked for it (a late or failing source leaves the last saved state). Nil when the user
    /// has no current activity, or it ended meanwhile.
    public func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)? {
        guard let id = registry.currentActivity(of: uid) else { return nil }
        guard let record = try? await recordLeavingMachine(id, uid: uid) else { return nil }
        return (id, record)
    }
}

extension ActivityService: ContinuationActivities {
    /// Every activity type some local user can continue: registered handlers and installed apps.
    public func allHandledTypes() -> Set<String> {
        var types = Set(handlers.values.flatMap(\.types))
        for entry in desktopEntries.entries() { types.formUnion(entry.activityTypes) }
        return types
    }
}
