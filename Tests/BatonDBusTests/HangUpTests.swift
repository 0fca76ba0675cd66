// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import BatonTestBus
import Dispatch
import Foundation
import Testing

/// libdispatch on Linux handles an EPOLLHUP on a watched descriptor racily (its manager thread walks
/// bookkeeping that the sources' own threads free): a full test run crashed in _dispatch_event_loop_drain
/// just after a test bus was killed. So a connection's watches hand dispatch a private epoll instance.
@Suite("BatonDBus sockets hanging up")
struct DBusHangUpTests {
    @Test("A connection's socket is watched only by private epoll instances, never by libdispatch's")
    func socketStaysOutOfDispatchsEpollSet() async throws {
        try await withTestBus { bus in
            let connection = try DBusConnection(bus: .address(bus.address))
            defer { connection.close() }
            _ = try await connection.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                          interface: "org.freedesktop.DBus", method: "GetId")
            let socket = try #require(connection.core.socketDescriptor)
            let watching = epollInstances().filter { $0.watched.contains(socket) }
            #expect(!watching.isEmpty, "the read watch is registered")
            #expect(watching.allSatisfy { $0.watched == [socket] }, "\(watching)")
        }
    }

    @Test("Sixteen connections with calls in flight survive their bus being killed, ten times over")
    func busKilledUnderOpenConnections() async throws {
        for _ in 0..<10 {
            let bus = try TestBus()
            let connections = try (0..<16).map { _ in try DBusConnection(bus: .address(bus.address)) }
            await withTaskGroup(of: Void.self) { group in
                for connection in connections {
                    group.addTask {
                        // Never answered: the bus goes first. Only the process surviving matters here.
                        _ = try? await connection.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                       interface: "org.freedesktop.DBus", method: "GetId")
                        _ = try? await connection.call(destination: connection.uniqueName, path: "/nowhere",
                                                       interface: "org.example.Never", method: "Answer", timeout: .seconds(2))
                    }
                }
                try? await Task.sleep(for: .milliseconds(20))
                bus.stop()
            }
            for connection in connections { connection.close() }
        }
    }
}
