// SPDX-License-Identifier: LGPL-2.1-or-later
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Log lines to standard error, one write per line (journald adds time and unit). A line the
/// descriptor does not take is dropped: there is nowhere else to say it.
public struct StandardErrorLines: Sendable {
    public init() {}

    public func log(_ line: String) {
        var text = line
        text.append("\n")
        let bytes = Array(text.utf8)
        try? FileDescriptor.borrowing(2) { (standardError: borrowing FileDescriptor) throws(Errno) in
            try standardError.writeAll(bytes)
        }
    }
}

/// The system's wall clock, in Unix seconds.
public struct SystemClock: Sendable {
    public init() {}

    public func unixSeconds() -> Int64 { Int64(time(nil)) }
}

/// Seconds since boot on CLOCK_BOOTTIME: a clock nobody steps (setting the date, NTP, a wrong RTC
/// corrected) that counts the time the machine was suspended, for how long something lasts (an
/// offer's two minutes are over after two minutes, whatever the date does meanwhile).
public struct SystemUptimeClock: Sendable {
    public init() {}

    public func monotonicSeconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        return Int64(now.tv_sec)
    }
}
