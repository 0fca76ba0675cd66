// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif

/// Who may pair and remove: root, the daemon's own user (session-bus daemons) and members of
/// group `baton`. Listing needs no privilege.
public struct PrivilegePolicy: Sendable {
    public var group: String
    public init(group: String = "baton") { self.group = group }

    public func allows(uid: UInt32) -> Bool {
        if uid == 0 || uid == geteuid() { return true }
        guard let entry = getpwuid(uid), let groupEntry = getgrnam(group) else { return false }
        let wanted = groupEntry.pointee.gr_gid
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        guard getgrouplist(entry.pointee.pw_name, entry.pointee.pw_gid, &groups, &count) >= 0 else { return false }
        return groups.prefix(Int(count)).contains(wanted)
    }
}
