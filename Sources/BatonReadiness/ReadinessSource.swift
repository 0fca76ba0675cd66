// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonSystem
import CEpoll
import Dispatch
import Glibc

/// What a readiness source fires for.
public enum Readiness: Sendable {
    case readable, writable
}

/// A dispatch source that fires while `descriptor` is readable (or writable), without putting
/// `descriptor` itself into libdispatch's epoll set.
///
/// Why: libdispatch on Linux answers an EPOLLHUP (a socket whose peer went, or one shut down in both
/// directions while watched) by unregistering the watchers from their own queues' threads while its
/// manager thread is still walking the shared bookkeeping; the manager then reads freed memory and the
/// process crashes in `_dispatch_event_loop_drain`. So the source watches a private epoll instance
/// instead, holding `descriptor` (level-triggered): it becomes readable whenever the descriptor is
/// ready or hung up, and an epoll descriptor itself never reports a hang-up. Being private, its number
/// is also never shared with another watcher, so reusing `descriptor`'s number cannot meet a stale
/// registration either.
///
/// Once dispatch stopped watching, the private descriptor is closed; then `onCancel` runs. Do not
/// replace the cancel handler. The caller keeps `descriptor` open until `onCancel` ran. Nil when no
/// descriptor could be made (descriptor limit).
public func makeReadinessSource(
    watching descriptor: Int32, for readiness: Readiness, queue: DispatchQueue,
    onCancel: @escaping @Sendable () -> Void = {}
) -> (any DispatchSourceRead)? {
    let created = epoll_create1(Int32(EPOLL_CLOEXEC))
    guard created >= 0 else { return nil }
    let relay = FileDescriptor(taking: created)
    var event = epoll_event()
    event.events = readiness == .readable ? EPOLLIN.rawValue : EPOLLOUT.rawValue
    event.data.fd = descriptor
    guard epoll_ctl(relay.rawValue, EPOLL_CTL_ADD, descriptor, &event) == 0 else { return nil }
    // Dispatch watches it until the cancel handler, which owns it from here on.
    let relayNumber = relay.release()
    let source = DispatchSource.makeReadSource(fileDescriptor: relayNumber, queue: queue)
    source.setCancelHandler {
        // The relay goes first: whoever onCancel wakes finds nothing of this source left open.
        FileDescriptor(taking: relayNumber).close()
        onCancel()
    }
    return source
}
