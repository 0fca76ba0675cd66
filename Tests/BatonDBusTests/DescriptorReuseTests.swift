// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import BatonTestBus
import Dispatch
import Foundation
import Testing

/// Regression test for the lost-wakeup stall: a closed connection's socket descriptor number was handed
/// to a new connection while the old connection's dispatch sources were still being torn down.
@Suite("BatonDBus descriptor reuse")
struct DescriptorReuseTests {
    /// libdispatch on Linux keys its epoll registrations by descriptor number, and a cancelled source that
    /// has an event queued on its (busy) target queue is only unregistered after that queue reaches it.
    /// When libdbus closed the socket meanwhile and a new connection got the same number, the new read
    /// source joined the stale registration and never fired: replies sat unread until the call timed out.
    /// Now the socket closes only once every readiness source watching it was cancelled (on the old
    /// connection's queue), so its number cannot be handed out while the old queue is held; and a fresh
    /// connection made meanwhile gets its replies.
    @Test func aClosedConnectionsDescriptorIsNotReusedBeforeItsSourcesAreGone() async throws {
        try await withTestBus { bus in
            let sender = try DBusConnection(bus: .address(bus.address))
            defer { sender.close() }
            var reuses = 0
            var released = 0
            for _ in 0..<20 {
                let old = try DBusConnection(bus: .address(bus.address))
                let oldDescriptor = try #require(old.core.socketDescriptor)
                let start = DispatchSemaphore(value: 0)
                let closed = DispatchSemaphore(value: 0)
                let release = DispatchSemaphore(value: 0)
                // Hold the old connection's queue, so the read event for the signal below queues up behind
                // this block; close while it is queued; keep holding while the fresh connection works.
                old.core.queue.async {
                    start.wait()
                    old.core.closeOnQueue()
                    closed.signal()
                    release.wait()
                }
                var releasedThisRound = false
                defer { if !releasedThisRound { release.signal() } }
                try sender.emitSignal(path: testPath, interface: testInterfaceName, name: "Tick", arguments: [.uint32(1)],
                                      destination: old.uniqueName)
                // Time for the daemon to forward it and for dispatch to queue the read event.
                try await Task.sleep(for: .milliseconds(100))
                start.signal()
                await waitOffTheCooperativePool(closed)

                let fresh = try DBusConnection(bus: .address(bus.address))
                defer { fresh.close() }
                if fresh.core.socketDescriptor == oldDescriptor { reuses += 1 }
                let owner = try await fresh.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                 interface: "org.freedesktop.DBus", method: "GetNameOwner",
                                                 arguments: [.string(fresh.uniqueName)], timeout: .seconds(25))
                #expect(owner == [.string(fresh.uniqueName)])
                // Once the old queue goes on, the source is cancelled and the socket closed.
                releasedThisRound = true
                release.signal()
                for _ in 0..<200 where fcntl(oldDescriptor, F_GETFD) >= 0 && !isSocketGone(oldDescriptor) {
                    try await Task.sleep(for: .milliseconds(10))
                }
                if fcntl(oldDescriptor, F_GETFD) < 0 || isSocketGone(oldDescriptor) { released += 1 }
            }
            #expect(reuses == 0)
            // Another suite may take the freed number at once (then it is a live descriptor again).
            #expect(released > 0)
        }
    }
}

/// Waits for `semaphore` on a dispatch thread so no cooperative-pool thread blocks.
func waitOffTheCooperativePool(_ semaphore: DispatchSemaphore) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            semaphore.wait()
            continuation.resume()
        }
    }
}

/// True when `descriptor` is open but no longer a connected socket of ours (another test reused it).
private func isSocketGone(_ descriptor: Int32) -> Bool {
    var type: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != Int32(SOCK_STREAM.rawValue)
}
