// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonSystem

/// The daemon's implementations of the core's `ServiceLog` and `WallClock` are the system's
/// (BatonSystem): standard error, one line per event, and time(2).
public typealias StandardErrorLog = StandardErrorLines
public typealias SystemWallClock = SystemClock

extension StandardErrorLines: ServiceLog {}
extension SystemClock: WallClock {}
