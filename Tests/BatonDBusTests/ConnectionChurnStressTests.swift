// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing

/// An operation that did not finish within the stress test's per-call deadline.
struct StressDeadlineExceeded: Error, CustomStringConvertible {
    let operation: String
    var description: String { "\(operation) did not finish in time" }
}

/// Runs `body`, throwing `StressDeadlineExceeded` (and cancelling `body`) if it takes longer than `limit`.
func withDeadline<T: Sendable>(_ limit: Duration, _ operation: String,
                               _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw StressDeadlineExceeded(operation: operation) }
        return value
    }
}

/// What one churning worker did.
struct ChurnTally: Sendable {
    var connections = 0
    var calls = 0
    var stalls: [String] = []
    var otherFailures: [String] = []
}

/// Seconds the churn test runs (short by default: it loads both cores while other suites run);
/// `BATON_DBUS_STRESS_SECONDS` lengthens it for soak runs.
let churnSeconds: Int = ProcessInfo.processInfo.environment["BATON_DBUS_STRESS_SECONDS"].flatMap(Int.init) ?? 5

@Suite("BatonDBus connection churn")
struct ConnectionChurnStressTests {
    /// Many connections opened, used and closed in parallel in one process, as the daemon and lab suites
    /// do. Every reply must arrive well inside the 25 s default timeout; a stall is a lost wakeup.
    @Test func parallelConnectionChurnNeverStalls() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection(bus: .address(bus.address))
            defer { service.close() }
            try await service.export([makeTestInterface(state: FakeServiceState())], at: testPath)
            let serviceName = "org.baton.StressService"
            #expect(try await service.requestName(serviceName) == .primaryOwner)

            let address = bus.address
            let deadline = ContinuousClock.now + .seconds(churnSeconds)
            let perCall = Duration.seconds(20)  // a lost wakeup never ends; a loaded machine may take seconds
            let workers = 50
            let tallies = await withTaskGroup(of: ChurnTally.self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        var tally = ChurnTally()
                        var round = 0
                        // At least two rounds each, however loaded the machine: the test is about
                        // stalls, not throughput.
                        while round < 2 || ContinuousClock.now < deadline {
                            round += 1
                            do {
                                try await churnOnce(address: address, serviceName: serviceName, worker: worker,
                                                    round: round, perCall: perCall, tally: &tally)
                            } catch let stall as StressDeadlineExceeded {
                                tally.stalls.append("worker \(worker) round \(round): \(stall)")
                            } catch {
                                tally.otherFailures.append("worker \(worker) round \(round): \(error)")
                            }
                        }
                        return tally
                    }
                }
                var all: [ChurnTally] = []
                for await tally in group { all.append(tally) }
                return all
            }
            let connections = tallies.reduce(0) { $0 + $1.connections }
            let calls = tallies.reduce(0) { $0 + $1.calls }
            let stalls = tallies.flatMap(\.stalls)
            let otherFailures = tallies.flatMap(\.otherFailures)
            print("connection churn: \(connections) connections, \(calls) calls, \(stalls.count) stalls, \(otherFailures.count) other failures in \(churnSeconds) s")
            #expect(connections > workers, "the churn must actually open connections")
            #expect(stalls.isEmpty, "stalled calls: \(stalls.prefix(10))")
            #expect(otherFailures.isEmpty, "failed calls: \(otherFailures.prefix(10))")
        }
    }
}

/// One worker round: connect, own a name, subscribe (AddMatch, plus owner tracking of a well-known
/// sender), look an owner up, call the service a few times, close.
private func churnOnce(address: String, serviceName: String, worker: Int, round: Int, perCall: Duration,
                       tally: inout ChurnTally) async throws {
    let connection = try DBusConnection(bus: .address(address))
    tally.connections += 1
    defer { connection.close() }
    let ownName = "org.baton.Stress.W\(worker)"
    let requested = try await withDeadline(perCall, "RequestName") { try await connection.requestName(ownName) }
    #expect(requested == .primaryOwner)
    tally.calls += 1
    let changes = try await withDeadline(perCall, "AddMatch for NameOwnerChanged") {
        try await connection.nameOwnerChanges(for: ownName)
    }
    _ = changes
    tally.calls += 1
    let ticks = try await withDeadline(perCall, "AddMatch with owner tracking") {
        try await connection.signals(matching: DBusMatchRule(sender: serviceName, interface: testInterfaceName, member: "Tick"))
    }
    _ = ticks
    tally.calls += 2
    let owner = try await withDeadline(perCall, "GetNameOwner") { try await connection.nameOwner(ownName) }
    #expect(owner == connection.uniqueName)
    tally.calls += 1
    for call in 0..<3 {
        let text = "w\(worker)r\(round)c\(call)"
        let reply = try await withDeadline(perCall, "Upper call \(call)") {
            try await connection.call(destination: serviceName, path: testPath, interface: testInterfaceName,
                                      method: "Upper", arguments: [.string(text)], timeout: perCall + .seconds(1))
        }
        #expect(reply == [.string(text.uppercased())])
        tally.calls += 1
    }
}
