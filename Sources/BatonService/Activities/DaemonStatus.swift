/// The daemon lifecycle state, as Manager1.GetStatus and the status file say it.
public enum DaemonState: String, Sendable, Codable, Hashable {
    case starting, running, degraded, stopping
}

/// The status JSON file: lifecycle and per-activity state only, never titles, userInfo or URLs.
public struct DaemonStatus: Sendable, Codable, Hashable {
    public struct ActivityEntry: Sendable, Codable, Hashable {
        public var objectPath: String
        public var type: String
        public var status: String
        public var current: Bool
        /// A FailureCategory raw value, or nil.
        public var lastError: String?
    }

    public var state: DaemonState
    public var busName: String
    public var adapter: String
    public var radio: String
    public var activities: [ActivityEntry]
    public var errors: [ErrorRecord]
    /// Unix seconds of this snapshot.
    public var updated: Int64
}
