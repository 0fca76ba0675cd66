// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import Glibc
import BatonTestBus
import Synchronization
import Testing

/// A connection may have at most 128 calls being served by a service at once; more are answered
/// LimitsExceeded at once, without running: a flood of pipelined calls from one client cannot make
/// the service hold thousands of handlers (a helper's attack: 10,000 calls in flight, 56–61 MiB).
@Suite("BatonDBus: calls in flight per caller")
struct CallsInFlightLimitTests {
    @Test func callsBeyondTheLimitAreRefusedAtOnceAndOthersAreServed() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection(bus: .address(bus.address))
            let flooder = try DBusConnection(bus: .address(bus.address))
            let neighbour = try DBusConnection(bus: .address(bus.address))
            let started = Mutex(0)
            let running = Mutex((now: 0, most: 0))
            try await service.export([DBusInterface("org.baton.Slow", methods: [
                DBusMethod("Wait", out: [DBusArgument("value", "s")]) { _ in
                    started.withLock { $0 += 1 }
                    running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                    try await Task.sleep(for: .milliseconds(150))
                    running.withLock { $0.now -= 1 }
                    return [.string("served")]
                },
                DBusMethod("Quick", out: [DBusArgument("value", "s")]) { _ in [.string("quick")] },
            ])], at: "/slow")
            let clock = ContinuousClock()
            let began = clock.now
            let outcomes = await withTaskGroup(of: (String, Duration).self) { group in
                for _ in 0..<136 {
                    group.addTask {
                        do {
                            let reply = try await flooder.call(destination: service.uniqueName, path: "/slow", interface: "org.baton.Slow", method: "Wait",
                                                             timeout: .seconds(120))  // served 8 at a time: a loaded machine needs more than 25 s
                            return (reply == [.string("served")] ? "served" : "wrong reply", clock.now - began)
                        } catch let error as DBusError {
                            return (error.name, clock.now - began)
                        } catch {
                            return ("\(error)", clock.now - began)
                        }
                    }
                }
                // Another connection is not held up by the flooder's limit.
                group.addTask {
                    try? await Task.sleep(for: .milliseconds(500))
                    let reply = try? await neighbour.call(destination: service.uniqueName, path: "/slow", interface: "org.baton.Slow", method: "Quick")
                    return (reply == [.string("quick")] ? "neighbour served" : "neighbour refused", clock.now - began)
                }
                var all: [(String, Duration)] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
            let served = outcomes.filter { $0.0 == "served" }
            let refused = outcomes.filter { $0.0 == DBusError.limitsExceededName }
            #expect(served.count == 128)
            #expect(refused.count == 8)
            // Served calls end 8 at a time, 150 ms apart (2.4 s at least); refusals come before the
            // first half of them, not after all.
            let servedTimes = served.map(\.1).sorted()
            #expect(!servedTimes.isEmpty && refused.allSatisfy { $0.1 < servedTimes[servedTimes.count / 2] }, "refused at once, not after the served ones")
            #expect(started.withLock { $0 } == 128, "refused calls never ran")
            // The 128 accepted ran 8 at a time, in turn (their replies are built 8 at a time).
            #expect(running.withLock { $0.most } == 8)
            #expect(outcomes.contains { $0.0 == "neighbour served" && $0.1 < (servedTimes.last ?? .zero) },
                    "the neighbour is served before the flooder's calls are all answered")
            // Once its calls are answered, the flooder is served again.
            #expect(try await flooder.call(destination: service.uniqueName, path: "/slow", interface: "org.baton.Slow", method: "Quick") == [.string("quick")])
        }
    }

    /// A call refused for the limit is refused before its arguments are read: the descriptors it
    /// brings are closed at once (an attack left one open per refused AttachDocument: 17 → 1928).
    @Test func refusedCallsLeaveNoDescriptorOpen() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection.service(bus: .address(bus.address))
            let flooder = try DBusConnection(bus: .address(bus.address))
            // The served calls are held until the test lets them go, so all 128 are in flight
            // when the 8 more arrive however slow the machine is.
            let gate = Mutex(false)
            let started = Mutex(0)
            try await service.export([DBusInterface("org.baton.Slow", methods: [
                DBusMethod("Hold", in: [DBusArgument("fd", "h")]) { _ in
                    started.withLock { $0 += 1 }
                    while !gate.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) }
                    return []
                },
            ])], at: "/slow")
            func pipeEnds() -> (read: Int32, write: Int32) {
                var fds: [Int32] = [-1, -1]
                _ = pipe(&fds)
                return (fds[0], fds[1])
            }
            func hangsUp(_ read: Int32, within milliseconds: Int32) -> Bool {
                var poll = pollfd(fd: read, events: Int16(POLLIN), revents: 0)
                return Glibc.poll(&poll, 1, milliseconds) == 1 && poll.revents & Int16(POLLHUP) != 0
            }
            func call(_ copy: Int32) async -> String {
                defer { close(copy) }
                do {
                    _ = try await flooder.call(destination: service.uniqueName, path: "/slow", interface: "org.baton.Slow",
                                               method: "Hold", arguments: [.unixFD(copy)], timeout: .seconds(120))
                    return "served"
                } catch let error as DBusError { return error.name } catch { return "\(error)" }
            }
            let served = pipeEnds(), refused = pipeEnds()
            // Each call lends its own copy, closed when the call returns: no descriptor number is
            // closed here while a call may still be sending it.
            let servedCopies = (0..<128).map { _ in dup(served.write) }
            let refusedCopies = (0..<8).map { _ in dup(refused.write) }
            close(served.write)
            close(refused.write)
            let servedCalls = Task {
                await withTaskGroup(of: String.self) { group in
                    for copy in servedCopies { group.addTask { await call(copy) } }
                    return await group.reduce(into: [String]()) { $0.append($1) }
                }
            }
            // The served ones reach the service first: 8 of them run, and the rest are sent.
            let began = ContinuousClock.now
            while started.withLock({ $0 }) < 8, ContinuousClock.now - began < .seconds(60) {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(500))
            let refusals = await withTaskGroup(of: String.self) { group in
                for copy in refusedCopies { group.addTask { await call(copy) } }
                return await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(refusals == Array(repeating: DBusError.limitsExceededName, count: 8))
            #expect(hangsUp(refused.read, within: 30_000), "a refused call's descriptor stayed open")
            #expect(!hangsUp(served.read, within: 100), "the served calls' descriptors are lent to their handlers while they run")
            gate.withLock { $0 = true }
            #expect(await servedCalls.value == Array(repeating: "served", count: 128))
            #expect(hangsUp(served.read, within: 30_000), "closed when the handlers returned")
            close(refused.read)
            close(served.read)
        }
    }

    /// Calls waiting for their caller's earlier ones when the service's connection closes never run;
    /// the descriptors lent to them are closed all the same.
    @Test func callsThatNeverStartCloseTheirDescriptors() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection.service(bus: .address(bus.address))
            let caller = try DBusConnection(bus: .address(bus.address))
            let ran = Mutex(0)
            try await service.export([DBusInterface("org.baton.Slow", methods: [
                DBusMethod("Hold", in: [DBusArgument("fd", "h")]) { _ in
                    ran.withLock { $0 += 1 }
                    try await Task.sleep(for: .milliseconds(500))
                    return []
                },
            ])], at: "/slow")
            var fds: [Int32] = [-1, -1]
            #expect(pipe(&fds) == 0)
            let (readEnd, writeEnd) = (fds[0], fds[1])
            // Each call lends its own copy, closed once the call has returned, so no descriptor
            // number is closed here while a call may still be sending it.
            let copies = (0..<20).map { _ in dup(writeEnd) }
            let calls = Task {
                await withTaskGroup(of: Void.self) { group in
                    for copy in copies {
                        group.addTask {
                            _ = try? await caller.call(destination: service.uniqueName, path: "/slow", interface: "org.baton.Slow",
                                                       method: "Hold", arguments: [.unixFD(copy)], timeout: .seconds(5))
                            close(copy)
                        }
                    }
                }
            }
            close(writeEnd)
            // The first 8 start; the other 12 wait behind them (however slow the machine).
            let started = ContinuousClock.now
            while ran.withLock({ $0 }) < 8, ContinuousClock.now - started < .seconds(60) {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(100))
            service.close()
            await calls.value
            // Every copy the caller held is closed now; the write end stays open only while the
            // service still holds a descriptor of a call that never started.
            var poll = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            #expect(Glibc.poll(&poll, 1, 120_000) == 1 && poll.revents & Int16(POLLHUP) != 0, "a waiting call's descriptor stayed open")
            #expect(ran.withLock { $0 } == 8, "only the first 8 started")
            close(readEnd)
        }
    }
}
