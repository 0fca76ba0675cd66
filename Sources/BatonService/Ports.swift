// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonCore

/// How the service gets an activity onto the air. The BlueZ-backed implementation lives elsewhere;
/// without one, BecomeCurrent ends in failed(radio-unavailable).
public protocol ActivityPublisher: Sendable {
    /// Advertises `record` as `uid`'s current activity; returns the device-wide advert revision
    /// (§4.2) it is served under, which FetchActivity takes and Activity1.Revision shows.
    func publish(_ record: ActivityRecord, uid: UInt32) async throws(RadioError) -> UInt32
    /// `uid` has no current activity any more.
    func withdraw(uid: UInt32) async
}

/// Writes log lines (stderr in the daemon; journald adds time and unit). One line per event, no payloads.
public protocol ServiceLog: Sendable {
    func log(_ line: String)
}

public struct StandardErrorLog: ServiceLog {
    public init() {}
    public func log(_ line: String) {
        var text = line
        text.append("\n")
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return -1 }
                return write(2, base + offset, buffer.count - offset)
            }
            guard written > 0 else { return }
            offset += written
        }
    }
}

public struct SystemWallClock: WallClock {
    public init() {}
    public func unixSeconds() -> Int64 { Int64(time(nil)) }
}

