// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonSystem

/// The daemon's implementations of the core's `ServiceLog` and `WallClock` are the system's
/// (BatonSystem): standard error, one line per event, and time(2).
public typealias StandardErrorLog = StandardErrorLines
public typealias SystemWallClock = SystemClock
/// Durations (the clipboard's expiries) are measured on CLOCK_BOOTTIME, never on the wall clock.
public typealias SystemMonotonicClock = SystemUptimeClock

extension StandardErrorLines: ServiceLog {}
extension SystemClock: WallClock {}
extension SystemUptimeClock: MonotonicClock {}
