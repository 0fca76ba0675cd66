// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing

/// Counts how often a handler ran.
actor HandlerRuns {
    private(set) var count = 0
    func record() { count += 1 }
}

let budgetTestPath = "/org/baton/Budget"
let budgetInterfaceName = "org.baton.BudgetTest"
let tooLargeName = "org.baton.Test.Error.TooLarge"
let invalidName = "org.baton.Test.Error.Invalid"

/// "Take" (a{sv}) and "TakeBytes" (ay) within 1,000 values and 4,096 bytes of strings.
func makeBudgetInterface(_ runs: HandlerRuns) -> DBusInterface {
    let budget = DBusArgumentBudget(maxValues: 1_000, maxStringBytes: 4_096, maxDepth: 8,
                                    tooLargeErrorName: tooLargeName, invalidErrorName: invalidName)
    return DBusInterface(budgetInterfaceName, methods: [
        DBusMethod("Take", in: [DBusArgument("values", "a{sv}")], out: [DBusArgument("count", "u")], budget: budget) { call in
            await runs.record()
            return [.uint32(UInt32(call.arguments[0].dictionaryValue?.count ?? 0))]
        },
        DBusMethod("TakeBytes", in: [DBusArgument("bytes", "ay")], out: [DBusArgument("count", "u")], budget: budget) { call in
            await runs.record()
            return [.uint32(UInt32(call.arguments[0].bytesValue?.count ?? 0))]
        },
        DBusMethod("Unbudgeted", in: [DBusArgument("values", "a{sv}")], out: [DBusArgument("count", "u")]) { call in
            await runs.record()
            return [.uint32(UInt32(call.arguments[0].dictionaryValue?.count ?? 0))]
        },
    ])
}

func entries(_ count: Int, _ value: (Int) -> DBusValue = { .int32(Int32($0)) }) -> DBusValue {
    .propertyDictionary(Dictionary(uniqueKeysWithValues: (0..<count).map { ("k\($0)", value($0)) }))
}

/// dbus-python appends a dictionary by iterating its keys and indexing it with each, so `Pairs`
/// can send the duplicate keys that no Swift (or Python) dictionary holds.
let duplicateKeyScript = #"""
import sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
destination, path, interface = sys.argv[2], sys.argv[3], sys.argv[4]

\#(pythonDuplicateKeyPairs)

def step(name, method, pairs):
    try:
        value = bus.call_blocking(destination, path, interface, method, "a{sv}", [Pairs(pairs)])
        print("%s=%s" % (name, value), flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (name, error.get_dbus_name()), flush=True)

step("same", "Take", [("k", "first"), ("k", "second")])
step("canonical", "Take", [("\u00e9", 1), ("e\u0301", 2)])
step("distinct", "Take", [("\u00e9", 1), ("e", 2)])
step("unbudgeted", "Unbudgeted", [("k", "first"), ("k", "second")])
"""#

@Suite("BatonDBus: argument budgets and duplicate keys")
struct ArgumentBudgetTests {
    @Test func callsOverTheMethodsBudgetGetItsErrorAndNeverReachTheHandler() async throws {
        try await withTestBus { bus in
            let runs = HandlerRuns()
            let service = try DBusConnection(bus: .address(bus.address))
            let client = try DBusConnection(bus: .address(bus.address))
            try await service.export([makeBudgetInterface(runs)], at: budgetTestPath)
            func call(_ method: String, _ argument: DBusValue) async throws -> [DBusValue] {
                try await client.call(destination: service.uniqueName, path: budgetTestPath, interface: budgetInterfaceName,
                                      method: method, arguments: [argument])
            }
            // Within budget: 300 entries are 900 values (key, variant, value).
            #expect(try await call("Take", entries(300)) == [.uint32(300)])
            #expect(await runs.count == 1)
            // 5,000 entries, a 10,000-byte string, 5,000 bytes, nesting deeper than 8.
            await expectDBusError(tooLargeName) { _ = try await call("Take", entries(5_000)) }
            await expectDBusError(tooLargeName) { _ = try await call("Take", entries(1) { _ in .string(String(repeating: "x", count: 10_000)) }) }
            await expectDBusError(tooLargeName) { _ = try await call("TakeBytes", .bytes([UInt8](repeating: 7, count: 5_000))) }
            var deep = DBusValue.int32(1)
            for _ in 0..<10 { deep = .variant(deep) }
            await expectDBusError(tooLargeName) { _ = try await call("Take", .propertyDictionary(["deep": deep])) }
            #expect(await runs.count == 1)
            #expect(try await call("TakeBytes", .bytes([UInt8](repeating: 7, count: 999))) == [.uint32(999)])
            // The standard budget takes what a narrow one refuses.
            #expect(try await call("Unbudgeted", entries(5_000)) == [.uint32(5_000)])
            #expect(await runs.count == 3)
            service.close()
            client.close()
        }
    }

    @Test func duplicateKeysAreRefusedAsInvalidNotMerged() async throws {
        try await withTestBus { bus in
            let runs = HandlerRuns()
            let service = try DBusConnection(bus: .address(bus.address))
            try await service.export([makeBudgetInterface(runs)], at: budgetTestPath)
            let scriptURL = bus.directory.appendingPathComponent("duplicates.py")
            try duplicateKeyScript.write(to: scriptURL, atomically: true, encoding: .utf8)
            let (status, output) = try await runTool("/usr/bin/python3", [scriptURL.path, bus.address, service.uniqueName, budgetTestPath, budgetInterfaceName])
            #expect(status == 0, "\(output)")
            var results: [String: String] = [:]
            for line in output.split(separator: "\n") {
                let parts = line.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { results[String(parts[0])] = String(parts[1]) }
            }
            #expect(results["same"] == invalidName, "\(output)")
            #expect(results["canonical"] == invalidName, "\(output)")
            #expect(results["distinct"] == "2", "\(output)")
            #expect(results["unbudgeted"] == DBusError.invalidArgsName, "\(output)")
            // Only the call with distinct keys ran.
            #expect(await runs.count == 1)
            service.close()
        }
    }
}
