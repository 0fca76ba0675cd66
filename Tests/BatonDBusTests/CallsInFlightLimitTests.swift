import BatonDBus
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
            try await service.export([DBusInterface("org.baton.Slow", methods: [
                DBusMethod("Wait", out: [DBusArgument("value", "s")]) { _ in
                    started.withLock { $0 += 1 }
                    try await Task.sleep(for: .seconds(2))
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
                            let reply = try await flooder.call(destination: service.uniqueName, path: "/slow", interface: "org.baton.Slow", method: "Wait")
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
            #expect(refused.allSatisfy { $0.1 < .seconds(1) }, "refused at once, not after the served ones")
            #expect(started.withLock { $0 } == 128, "refused calls never ran")
            #expect(outcomes.contains { $0.0 == "neighbour served" && $0.1 < .seconds(1) })
            // Once its calls are answered, the flooder is served again.
            #expect(try await flooder.call(destination: service.uniqueName, path: "/slow", interface: "org.baton.Slow", method: "Quick") == [.string("quick")])
        }
    }
}
