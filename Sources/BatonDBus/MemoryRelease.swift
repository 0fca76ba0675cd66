// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch
internal import CBusSocket

/// Gives memory back to the system after an oversized message was refused. A message under the
/// size limit but over its method's budget is held whole (up to 8 MiB) before it is refused; once
/// it is freed, glibc keeps the pages in its arenas for reuse, so a burst of refused messages would
/// stay in the daemon's RSS for good.
/// `malloc_trim(0)` returns free pages of every arena. 
enum MemoryRelease {
    /// Allocations of 256 KiB and more get their own mapping, returned to the system when freed.
    /// glibc otherwise raises this threshold to the size of the largest block freed (up to 32 MiB),
    /// after which a refused 25 MB message is assembled in the heap and its pages stay resident.
    private static let largeAllocationsMapped: Bool = mallopt(M_MMAP_THRESHOLD, 256 << 10) != 0

    static func mapLargeAllocationsOnce() { _ = largeAllocationsMapped }

    private static let queue = DispatchQueue(label: "baton.dbus.memory-release")
    nonisolated(unsafe) private static var generation = 0  // confined to `queue`

    /// Trims the heap once these calls have stopped for a moment (each one postpones it). Call:
    /// - after refusing a message over its budget, so every refused message has been released;
    /// - after a burst of calls ended (many handlers were running at once, none is now): their
    ///   tasks, messages and replies were freed, but glibc keeps the pages in the arenas of the
    ///   threads that ran them (a flood of 10,000 pipelined calls left batond at 56 MB; a trim
    ///   brought it back to 13 MB).
    static func releaseSoon() {
        queue.async {
            generation += 1
            let scheduled = generation
            queue.asyncAfter(deadline: .now() + .milliseconds(250)) {
                guard scheduled == generation else { return }
                _ = malloc_trim(0)
            }
        }
    }
}
