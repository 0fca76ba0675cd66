// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import BatonTestBus
import CBusSocket
import Dispatch
import Foundation
import Synchronization
import Testing

// Issue 24: what an unprivileged local user can send BatonDBus through the bus (dbus-daemon strips
// header fields it does not know; dbus-broker forwards them as sent), and what a bus could send that
// breaks the rules of descriptor passing (played by a fake bus on a socket of the test's own).

/// Header fields the specification does not define, as raw bytes (each starts 8-aligned).
enum UnknownHeaderField {
    /// Field 0x42 holding an `h` (index 5, no descriptor passed).
    static let descriptor: [UInt8] = [0x42, 1, UInt8(ascii: "h"), 0, 5, 0, 0, 0]

    /// Field 0x43 holding an `a{ss}` whose two entries have the same key.
    static let repeatedKey: [UInt8] = {
        var bytes: [UInt8] = [0x43, 5] + Array("a{ss}".utf8) + [0]  // 8 bytes
        bytes += [30, 0, 0, 0]  // array length (from the first entry, which starts 8-aligned at 16)
        bytes += [0, 0, 0, 0]  // padding to 8
        let entry: [UInt8] = [1, 0, 0, 0, UInt8(ascii: "k"), 0, 0, 0, 1, 0, 0, 0, UInt8(ascii: "v"), 0]  // 14 bytes
        bytes += entry + [0, 0] + entry  // second entry 8-aligned at 32, ends at 46
        return bytes
    }()

    /// `message` (little-endian, as BatonDBus writes it) with `extra` appended to its header fields.
    static func adding(_ extra: [UInt8], to message: [UInt8]) -> [UInt8] {
        let fieldsLength = Int(message[12]) | Int(message[13]) << 8 | Int(message[14]) << 16 | Int(message[15]) << 24
        let bodyStart = (16 + fieldsLength + 7) & ~7
        var fields = Array(message[16..<16 + fieldsLength])
        while (16 + fields.count) % 8 != 0 { fields.append(0) }
        fields += extra
        var bytes = Array(message[0..<12]) + (0..<4).map { UInt8(truncatingIfNeeded: fields.count >> (8 * $0)) } + fields
        while bytes.count % 8 != 0 { bytes.append(0) }
        return bytes + message[bodyStart...]
    }
}

/// Counts what a handler saw, from any thread.
final class Tally: Sendable {
    private let state = Mutex<[String]>([])
    func add(_ entry: String) { state.withLock { $0.append(entry) } }
    var entries: [String] { state.withLock { $0 } }
}

@Suite("BatonDBus: hostile input through the bus (dbus-daemon and dbus-broker)")
struct HostileInputThroughTheBusTests {
    private static func echoInterface(_ tally: Tally) -> DBusInterface {
        DBusInterface("org.baton.Hostile", methods: [
            DBusMethod("Echo", in: [DBusArgument("text", "s")], out: [DBusArgument("text", "s")]) { call in
                tally.add(call.arguments.first?.stringValue ?? "")
                return call.arguments
            },
        ])
    }

    /// A call and a unicast signal with a header field D-Bus does not define (an `h` without a
    /// descriptor; a dictionary with a repeated key) are taken like any other: before, either closed
    /// batond's bus connection on dbus-broker.
    @Test(arguments: TestBus.Daemon.installed, [UnknownHeaderField.descriptor, UnknownHeaderField.repeatedKey])
    func unknownHeaderFieldsAreSkipped(daemon: TestBus.Daemon, field: [UInt8]) async throws {
        try await withTestBus(daemon) { bus in
            let service = try DBusConnection(bus: .address(bus.address))
            let client = try DBusConnection(bus: .address(bus.address))
            defer { service.close(); client.close() }
            let tally = Tally()
            try await service.export([Self.echoInterface(tally)], at: "/hostile")
            let ticks = try await service.signals(matching: DBusMatchRule(interface: "org.baton.Hostile", member: "Tick"))

            var call = DBusMessage.methodCall(destination: service.uniqueName, path: "/hostile", interface: "org.baton.Hostile",
                                              member: "Echo", flags: DBusMessage.noReplyExpectedFlag)
            call.serial = 0x7000_0001
            let callBytes = UnknownHeaderField.adding(field, to: try call.encoded(body: [.string("through")]).bytes)
            var signal = DBusMessage.signal(path: "/hostile", interface: "org.baton.Hostile", member: "Tick", destination: service.uniqueName)
            signal.serial = 0x7000_0002
            let signalBytes = UnknownHeaderField.adding(field, to: try signal.encoded(body: [.uint32(7)]).bytes)
            client.core.onQueue {
                client.core.enqueue(callBytes, descriptors: [])
                client.core.enqueue(signalBytes, descriptors: [])
            }
            #expect(await eventually(timeout: .seconds(10)) { tally.entries == ["through"] }, "on \(daemon)")
            let tick = try await first(of: ticks, timeout: .seconds(10))
            #expect(tick.arguments == [.uint32(7)])
            // The service's connection lives on and answers.
            let echoed = try await client.call(destination: service.uniqueName, path: "/hostile", interface: "org.baton.Hostile",
                                               method: "Echo", arguments: [.string("after")], timeout: .seconds(10))
            #expect(echoed == [.string("after")])
            #expect(service.core.socketDescriptor != nil)
        }
    }

    /// A value nested deeper through variants than D-Bus allows is refused before it is written
    /// (the bus would drop the connection that sent it), on either bus the connection goes on.
    @Test(arguments: TestBus.Daemon.installed)
    func valuesNestedTooDeepThroughVariantsAreNotWritten(daemon: TestBus.Daemon) async throws {
        try await withTestBus(daemon) { bus in
            let client = try DBusConnection(bus: .address(bus.address))
            defer { client.close() }
            var deep = DBusValue.uint32(1)
            for _ in 0..<70 { deep = .variant(deep) }
            await #expect(throws: DBusError.self) {
                try await client.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                      method: "GetId", arguments: [deep], timeout: .seconds(10))
            }
            #expect(try await client.nameHasOwner(client.uniqueName))
        }
    }
}

@Suite("BatonDBus: nesting limits when writing")
struct WriteNestingTests {
    @Test func variantsCountTowardTheTotalNesting() throws {
        func nested(_ depth: Int) -> DBusValue {
            var value = DBusValue.uint32(1)
            for _ in 0..<depth { value = .variant(value) }
            return value
        }
        try DBusValidate.arguments([nested(63)])
        #expect(throws: DBusError.self) { try DBusValidate.arguments([nested(65)]) }
        // 32 arrays, each in a variant: 64 containers in all, allowed; one more variant is not.
        var value = DBusValue.uint32(1)
        for _ in 0..<32 { value = .variant(.array(elementSignature: value.signature, [value])) }
        try DBusValidate.arguments([value])
        #expect(throws: DBusError.self) { try DBusValidate.arguments([.variant(value)]) }
    }
}
