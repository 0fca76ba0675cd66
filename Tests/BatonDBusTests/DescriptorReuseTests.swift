@testable import BatonDBus
import BatonTestBus
import Dispatch
import Foundation
import Testing

/// Regression test for the lost-wakeup stall: a closed connection's socket descriptor number is handed
/// to a new connection while the old connection's dispatch sources are still being torn down.
@Suite("BatonDBus descriptor reuse")
struct DescriptorReuseTests {
    /// libdispatch on Linux keys its epoll registrations by descriptor number, and a cancelled source that
    /// has an event queued on its (busy) target queue is only unregistered after that queue reaches it.
    /// If libdbus has closed the socket meanwhile and a new connection got the same number, the new read
    /// source joined the stale registration and never fired: replies sat unread until libdbus's timeout.
    @Test func newConnectionReusingAClosedConnectionsDescriptorGetsReplies() async throws {
        try await withTestBus { bus in
            let sender = try DBusConnection(bus: .address(bus.address))
            defer { sender.close() }
            var reuses = 0
            for _ in 0..<60 where reuses < 3 {
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
                defer { release.signal() }
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
                                                 arguments: [.string(fresh.uniqueName)], timeout: .seconds(3))
                #expect(owner == [.string(fresh.uniqueName)])
            }
            // Otherwise other tests took every freed descriptor first and nothing was checked.
            #expect(reuses > 0)
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
