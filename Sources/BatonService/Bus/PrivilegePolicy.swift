// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif

/// Who may pair and remove: root, the daemon's own user (session-bus daemons) and members of
/// group `baton`. Listing needs no privilege.
public struct PrivilegePolicy: Sendable {
    public var group: String
    public init(group: String = "baton") { self.group = group }

    /// Whether `uid` may: root, this process's user, or a member of `group` (primary or
    /// supplementary, as the user database lists it). Called for many callers at once (every
    /// guarded D-Bus call, on any executor thread), so it reads the user and group databases only
    /// through the reentrant `getpwuid_r`/`getgrnam_r` into buffers of its own: `getpwuid` and
    /// `getgrnam` return one static record per process, and a second caller's lookup overwrote the
    /// first caller's name between its two lookups (nobody's call was then judged as a group
    /// member's: BusAttackTests' flood got one UnknownDevice in 400 answers on dbus-broker).
    public func allows(uid: UInt32) -> Bool {
        if uid == 0 || uid == geteuid() { return true }
        guard let account = Self.account(uid), let wanted = Self.groupID(group) else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(account.name, account.gid, &groups, &count) < 0 {
            // More groups than the first guess: count now says how many.
            guard count > 0, count <= 65_536 else { return false }
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(account.name, account.gid, &groups, &count) >= 0 else { return false }
        }
        return groups.prefix(Int(count)).contains(wanted)
    }

    /// The user's name and primary group, read with `getpwuid_r` into a buffer of this call's own.
    static func account(_ uid: uid_t) -> (name: String, gid: gid_t)? {
        var size = 4_096
        while size <= 1 << 20 {
            var record = passwd()
            var result: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: size)
            let found: (String, gid_t)?? = buffer.withUnsafeMutableBufferPointer { bytes in
                guard let base = bytes.baseAddress else { return .some(nil) }
                let status = getpwuid_r(uid, &record, base, bytes.count, &result)
                if status == ERANGE { return .none }
                guard status == 0, result != nil, let name = record.pw_name else { return .some(nil) }
                return .some((String(cString: name), record.pw_gid))
            }
            if let found { return found }
            size *= 4
        }
        return nil
    }

    /// The group's id, read with `getgrnam_r` into a buffer of this call's own.
    static func groupID(_ name: String) -> gid_t? {
        var size = 4_096
        while size <= 1 << 22 {
            var record = Glibc.group()
            var result: UnsafeMutablePointer<Glibc.group>?
            var buffer = [CChar](repeating: 0, count: size)
            let found: gid_t?? = buffer.withUnsafeMutableBufferPointer { bytes in
                guard let base = bytes.baseAddress else { return .some(nil) }
                let status = getgrnam_r(name, &record, base, bytes.count, &result)
                if status == ERANGE { return .none }
                guard status == 0, result != nil else { return .some(nil) }
                return .some(record.gr_gid)
            }
            if let found { return found }
            size *= 4
        }
        return nil
    }
}
