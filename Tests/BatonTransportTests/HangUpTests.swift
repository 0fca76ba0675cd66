// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonReadiness
import BatonTestBus
import Dispatch
import Glibc
import Testing

private func socketPair() -> (OwnedSocket, OwnedSocket) {
    var fds: [Int32] = [0, 0]
    let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    precondition(socketpair(AF_UNIX, flags, 0, &fds) == 0, "socketpair: errno \(errno)")
    return (OwnedSocket(taking: fds[0]), OwnedSocket(taking: fds[1]))
}

/// libdispatch on Linux handles an EPOLLHUP on a watched descriptor racily: its manager thread goes on
/// walking bookkeeping that the sources' own threads are freeing (a crash in _dispatch_event_loop_drain
/// seen in a full test run). Waits therefore hand dispatch a private epoll instance, never the socket.
@Suite("Hang-ups of watched sockets")
struct HangUpTests {
    @Test("A pending wait's socket is watched only by its own private epoll instance, never by libdispatch's")
    func pendingWaitKeepsTheSocketOutOfDispatchsEpollSet() async throws {
        try await withTimeLimit {
            let (waiting, peer) = socketPair()
            defer { waiting.close(); peer.close() }
            let descriptor = try #require(waiting.withDescriptor { $0 })
            let wait = Task { () async -> TransportError? in
                do throws(TransportError) {
                    try await waiting.wait(.readable, until: .now() + .seconds(10))
                    return nil
                } catch { return error }
            }
            // Until dispatch registered the relay: the instance that watches the relay is libdispatch's.
            var dispatchInstances: [(instance: Int32, watched: [Int32])] = []
            var relays: [Int32] = []
            for _ in 0..<250 {
                relays = epollInstances().filter { $0.watched == [descriptor] }.map(\.instance)
                dispatchInstances = epollInstances().filter { instance in relays.contains { instance.watched.contains($0) } }
                if !dispatchInstances.isEmpty { break }
                try await Task.sleep(for: .milliseconds(4))
            }
            #expect(relays.count == 1, "one private instance watches the socket, alone")
            #expect(!dispatchInstances.isEmpty, "libdispatch watches the private instance")
            // The socket itself is in no instance that watches anything else (libdispatch's included).
            #expect(epollInstances().allSatisfy { !$0.watched.contains(descriptor) || $0.watched == [descriptor] })
            peer.close()  // a hang-up: the wait ends as ready, the next recv sees the end
            #expect(await wait.value == nil)
            await #expect(throws: TransportError.closed) { _ = try await waiting.receiveSome(upTo: 16, until: .now() + .seconds(1)) }
        }
    }

    @Test("A readiness source fires for a hung-up descriptor and has closed its private descriptor when onCancel runs")
    func readinessSourceReportsHangUpAndClosesItsRelay() async throws {
        try await withTimeLimit {
            var fds: [Int32] = [0, 0]
            #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
            let (watched, peer) = (fds[0], fds[1])
            defer { close(watched) }
            let relaysBefore = epollInstances().filter { $0.watched == [watched] }.count
            let cancelled = AsyncStream.makeStream(of: Void.self)
            let made = makeReadinessSource(
                watching: watched, for: .readable, queue: DispatchQueue(label: "tests.hang-up"),
                onCancel: { cancelled.continuation.finish() })
            let source = try #require(made)
            #expect(epollInstances().filter { $0.watched == [watched] }.count == relaysBefore + 1)
            let fired = AsyncStream.makeStream(of: Void.self)
            source.setEventHandler {
                fired.continuation.finish()
                source.cancel()
            }
            source.activate()
            close(peer)
            for await _ in fired.stream {}
            for await _ in cancelled.stream {}
            #expect(epollInstances().filter { $0.watched == [watched] }.count == relaysBefore)
        }
    }

    @Test("A socket that is ready when the deadline passes is ready, not timed out, whichever event comes first")
    func theDeadlineAsksTheSocket() async throws {
        try await withTimeLimit {
            let (waiting, peer) = socketPair()
            defer { waiting.close(); peer.close() }
            #expect(peer.withDescriptor { send($0, "x", 1, 0) } == 1)
            // A deadline already past: the timer and the readiness source race on one queue.
            var outcomes: [String: Int] = [:]
            for _ in 0..<200 {
                do throws(TransportError) {
                    try await waiting.wait(.readable, until: .now() - .seconds(1))
                    outcomes["ready", default: 0] += 1
                } catch {
                    outcomes["\(error)", default: 0] += 1
                }
            }
            #expect(outcomes == ["ready": 200])
            // Not ready at the deadline: a timeout, as before.
            let (idle, idlePeer) = socketPair()
            defer { idle.close(); idlePeer.close() }
            await #expect(throws: TransportError.self) { try await idle.wait(.readable, until: .now() + .milliseconds(50)) }
        }
    }

    @Test("Sixty-four waits whose peers all hang up at once end as ready, twenty times over")
    func manyHangUpsAtOnce() async throws {
        try await withTimeLimit(180) {
            for _ in 0..<20 {
                let pairs = (0..<64).map { _ in socketPair() }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (waiting, _) in pairs {
                        group.addTask { try await waiting.wait(.readable, until: .now() + .seconds(10)) }
                    }
                    try await Task.sleep(for: .milliseconds(5))
                    for (_, peer) in pairs { peer.close() }
                    try await group.waitForAll()
                }
                for (waiting, _) in pairs { waiting.close() }
            }
        }
    }
}
