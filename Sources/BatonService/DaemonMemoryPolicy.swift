// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import CBusSocket
import Dispatch

/// batond's malloc policy, process-wide and so the daemon's alone (BatonDBus changes nothing: an
/// app linking BatonClient keeps glibc's defaults). `install()` runs once at batond's start; every
/// bus connection batond opens gets `dbusConfiguration`, whose `memoryReleasable` trims the heap.
///
/// A message under a connection's limit but over its method's budget is held whole (up to 8 MiB)
/// before it is refused; once it is freed, glibc keeps the pages in its arenas for reuse, so a burst
/// of refused messages would stay in the daemon's RSS for good.
public enum DaemonMemoryPolicy {
    /// Allocations of 256 KiB and more get their own mapping, returned to the system when freed.
    /// glibc otherwise raises this threshold to the size of the largest block freed (up to 32 MiB),
    /// after which a refused 25 MB message is assembled in the heap and its pages stay resident.
    public static let mappedAllocationThreshold: Int32 = 256 << 10
    /// How long calls to `releaseSoon` must stop before the heap is trimmed.
    public static let trimDelayMilliseconds = 250

    /// Sets batond's malloc options (M_MMAP_THRESHOLD). Call once, before any connection.
    public static func install() {
        _ = mallopt(M_MMAP_THRESHOLD, mappedAllocationThreshold)
    }

    /// `.service` with the heap trimmed after refusals and bursts: what batond's connections use.
    public static var dbusConfiguration: DBusConnectionConfiguration {
        var configuration = DBusConnectionConfiguration.service
        configuration.memoryReleasable = { releaseSoon() }
        return configuration
    }

    private static let queue = DispatchQueue(label: "baton.daemon.memory-release")
    nonisolated(unsafe) private static var generation = 0  // confined to `queue`

    /// Trims the heap (`malloc_trim(0)`, every arena) once these calls have stopped for a moment
    /// (each one postpones it): after a refused message, and after a burst of calls ended (a flood
    /// of 10,000 pipelined calls left batond at 56 MB; a trim brought it back to 13 MB).
    public static func releaseSoon() {
        queue.async {
            generation += 1
            let scheduled = generation
            queue.asyncAfter(deadline: .now() + .milliseconds(trimDelayMilliseconds)) {
                guard scheduled == generation else { return }
                _ = malloc_trim(0)
            }
        }
    }
}
