// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
@testable import BatonDBus
import Foundation
import Synchronization
import Testing

private let messageLimit = 64 << 10
private let limitPath = "/org/baton/Limit"
private let limitInterfaceName = "org.baton.LimitTest"

/// "Count" (ay, budgeted), "Echo" (v, standard budget), "ReadFD" (h: reads what the pipe holds).
private func makeLimitInterface(_ runs: HandlerRuns) -> DBusInterface {
    let budget = DBusArgumentBudget(maxValues: 1 << 20, maxStringBytes: 1 << 20, tooLargeErrorName: tooLargeName)
    return DBusInterface(limitInterfaceName, methods: [
        DBusMethod("Count", in: [DBusArgument("bytes", "ay")], out: [DBusArgument("count", "u")], budget: budget) { call in
            await runs.record()
            return [.uint32(UInt32(call.arguments[0].bytesValue?.count ?? 0))]
        },
        DBusMethod("Echo", in: [DBusArgument("value", "v")], out: [DBusArgument("value", "v")]) { call in
            await runs.record()
            return [call.arguments[0]]
        },
        DBusMethod("ReadFD", in: [DBusArgument("fd", "h")], out: [DBusArgument("text", "s")]) { call in
            guard let fd = call.arguments[0].unixFDValue else { return [.string("")] }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = read(fd, &buffer, buffer.count)
            return [.string(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self))]
        },
    ])
}

/// A pipe holding `text`, its write end closed; the caller closes the returned read end.
private func pipeHolding(_ text: String) -> Int32 {
    var fds: [Int32] = [-1, -1]
    #expect(pipe(&fds) == 0)
    _ = text.utf8CString.withUnsafeBytes { write(fds[1], $0.baseAddress, text.utf8.count) }
    close(fds[1])
    return fds[0]
}

@Suite("BatonDBus: the incoming message limit")
struct IncomingMessageLimitTests {
    @Test func callsOverTheLimitAreAnsweredWithoutReachingTheHandlerAndTheConnectionStays() async throws {
        try await withTestBus { bus in
            let runs = HandlerRuns()
            let service = try DBusConnection(bus: .address(bus.address), maxIncomingMessageBytes: messageLimit)
            let client = try DBusConnection(bus: .address(bus.address))
            try await service.export([makeLimitInterface(runs)], at: limitPath)
            func call(_ method: String, _ argument: DBusValue) async throws -> [DBusValue] {
                try await client.call(destination: service.uniqueName, path: limitPath, interface: limitInterfaceName,
                                      method: method, arguments: [argument])
            }
            #expect(try await call("Count", .bytes([UInt8](repeating: 7, count: 60_000))) == [.uint32(60_000)])
            // Within both budgets, over the limit: only the limit refuses these (its text gives sizes only).
            do {
                _ = try await call("Count", .bytes([UInt8](repeating: 7, count: 200_000)))
                Issue.record("an oversized call was accepted")
            } catch let error as DBusError {
                #expect(error.name == tooLargeName)
                #expect(error.message.contains("over the limit of \(messageLimit) bytes"))
            }
            await expectDBusError(DBusError.limitsExceededName) {
                _ = try await call("Echo", .variant(.string(String(repeating: "x", count: 100_000))))
            }
            // A method nobody exports: the limit answers LimitsExceeded all the same.
            await expectDBusError(DBusError.limitsExceededName) {
                _ = try await client.call(destination: service.uniqueName, path: "/nowhere", interface: "org.baton.None",
                                          method: "Nothing", arguments: [.bytes([UInt8](repeating: 1, count: 100_000))])
            }
            #expect(await runs.count == 1)
            #expect(service.isConnected)
            #expect(try await call("Echo", .variant(.string("still here"))) == [.variant(.string("still here"))])
            #expect(await runs.count == 2)
        }
    }

    @Test func messagesWithinTheLimitPassUnchangedSignalsAndPropertiesIncluded() async throws {
        try await withTestBus { bus in
            let runs = HandlerRuns()
            let service = try DBusConnection(bus: .address(bus.address), maxIncomingMessageBytes: messageLimit)
            let client = try DBusConnection(bus: .address(bus.address))
            try await service.export([makeLimitInterface(runs)], at: limitPath)
            // Sizes around the 64 KiB reads and below the limit, several in flight at once.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for size in [0, 1, 15, 16, 17, 4_095, 20_000, 65_000] {
                    group.addTask {
                        let value = DBusValue.bytes((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
                        let reply = try await client.call(destination: service.uniqueName, path: limitPath,
                                                          interface: limitInterfaceName, method: "Echo", arguments: [.variant(value)])
                        #expect(reply == [.variant(value)])
                    }
                }
                try await group.waitForAll()
            }
            // Signals reach the limited connection as well.
            let ticks = try await service.signals(matching: DBusMatchRule(interface: limitInterfaceName, member: "Tick"))
            try client.emitSignal(path: limitPath, interface: limitInterfaceName, name: "Tick", arguments: [.uint32(3)])
            #expect(try await first(of: ticks).arguments == [.uint32(3)])
        }
    }

    @Test func descriptorsOfARefusedMessageAreClosedAndLaterOnesStayInOrder() async throws {
        try await withTestBus { bus in
            let runs = HandlerRuns()
            let service = try DBusConnection(bus: .address(bus.address), maxIncomingMessageBytes: messageLimit)
            let client = try DBusConnection(bus: .address(bus.address))
            try await service.export([makeLimitInterface(runs)], at: limitPath)
            let refusedPipe = pipeHolding("refused")
            let acceptedPipe = pipeHolding("accepted")
            defer { close(refusedPipe); close(acceptedPipe) }
            await expectDBusError(DBusError.limitsExceededName) {
                _ = try await client.call(destination: service.uniqueName, path: limitPath, interface: limitInterfaceName, method: "Echo",
                                          arguments: [.variant(.structure([.unixFD(refusedPipe), .bytes([UInt8](repeating: 0, count: 100_000))]))])
            }
            // Had the refused message's descriptor been queued, this call would be handed it.
            let reply = try await client.call(destination: service.uniqueName, path: limitPath, interface: limitInterfaceName,
                                              method: "ReadFD", arguments: [.unixFD(acceptedPipe)])
            #expect(reply == [.string("accepted")])
        }
    }

    @Test func closingTheConnectionLetsTheBusSeeItGo() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection(bus: .address(bus.address), maxIncomingMessageBytes: messageLimit)
            let client = try DBusConnection(bus: .address(bus.address))
            let name = service.uniqueName
            #expect(try await client.nameHasOwner(name))
            service.close()
            var gone = false
            for _ in 0..<200 where !gone {
                gone = try await !client.nameHasOwner(name)
                if !gone { try await Task.sleep(for: .milliseconds(25)) }
            }
            #expect(gone)
        }
    }
}

@Suite("BatonDBus: framing the bus's stream")
struct IncomingMessageFramerTests {
    /// A little-endian message: fixed header, the given header fields, then `bodyBytes` zero bytes.
    static func message(type: UInt8 = 1, serial: UInt32, fields: [(UInt8, Character, String)], bodyBytes: Int) -> [UInt8] {
        func u32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        var fieldBytes: [UInt8] = []
        for (code, type, text) in fields {
            while (16 + fieldBytes.count) % 8 != 0 { fieldBytes.append(0) }
            fieldBytes += [code, 1, UInt8(ascii: type.unicodeScalars.first!), 0]
            fieldBytes += u32(text.utf8.count) + Array(text.utf8) + [0]
        }
        var bytes = [UInt8(ascii: "l"), type, 0, 1] + u32(bodyBytes) + u32(Int(serial)) + u32(fieldBytes.count) + fieldBytes
        while bytes.count % 8 != 0 { bytes.append(0) }
        return bytes + [UInt8](repeating: 0xAB, count: bodyBytes)
    }

    static let callFields: [(UInt8, Character, String)] = [(1, "o", "/org/baton/Manager1"), (2, "s", "org.baton.Manager1"),
                                                            (3, "s", "CreateActivity"), (7, "s", ":1.42")]

    @Test func passesMessagesWithinTheLimitAndSkipsLargerOnesHoweverTheStreamIsCut() {
        let small = Self.message(serial: 1, fields: Self.callFields, bodyBytes: 100)
        let large = Self.message(serial: 2, fields: Self.callFields, bodyBytes: 5_000)
        let last = Self.message(type: 4, serial: 3, fields: [(1, "o", "/a")], bodyBytes: 900)
        let stream = small + large + last + small
        for cut in [1, 3, 7, 16, 17, 64, 1_000, stream.count] {
            var framer = IncomingMessageFramer(limit: 1_024)
            var forwarded: [UInt8] = []
            var refused: [OversizedMessage] = []
            var start = 0
            while start < stream.count {
                let end = min(start + cut, stream.count)
                let output = stream[start..<end].withUnsafeBytes { framer.consume($0, descriptors: []) }
                forwarded += output.forward
                refused += output.refused
                start = end
            }
            #expect(forwarded == small + last + small, "cut \(cut)")
            #expect(refused == [OversizedMessage(type: 1, flags: 0, serial: 2, totalBytes: large.count, path: "/org/baton/Manager1",
                                                 interface: "org.baton.Manager1", member: "CreateActivity", sender: ":1.42")], "cut \(cut)")
        }
    }

    @Test func descriptorsGoWithTheMessageTheyArrivedWith() {
        let small = Self.message(serial: 1, fields: Self.callFields, bodyBytes: 8)
        let large = Self.message(serial: 2, fields: Self.callFields, bodyBytes: 4_000)
        var framer = IncomingMessageFramer(limit: 1_024)
        // The large message's first bytes carry descriptor 10; its header is undecided until the next read.
        var output = small.withUnsafeBytes { framer.consume($0, descriptors: [9]) }
        #expect(output.forwardDescriptors.map(\.message) == [0] && output.forwardDescriptors.map(\.descriptors) == [[9]])
        output = large[0..<10].withUnsafeBytes { framer.consume($0, descriptors: [10]) }
        #expect(output.forwardDescriptors.isEmpty && output.closeDescriptors.isEmpty)
        output = large[10...].withUnsafeBytes { framer.consume($0, descriptors: []) }
        #expect(output.closeDescriptors == [10])
        output = small.withUnsafeBytes { framer.consume($0, descriptors: [11]) }
        // Numbered among the messages passed on (the skipped one is not counted).
        #expect(output.forwardDescriptors.map(\.message) == [1] && output.forwardDescriptors.map(\.descriptors) == [[11]])
        #expect(output.forward == small)
    }

    @Test func aStreamThatIsNoDBusPassesUntouchedForTheParserToRefuse() {
        var framer = IncomingMessageFramer(limit: 16)
        let garbage = [UInt8](repeating: 0x58, count: 100)
        let output = garbage.withUnsafeBytes { framer.consume($0, descriptors: []) }
        #expect(output.forward == garbage)
        #expect(IncomingMessageFramer.parseHeader(Self.message(serial: 5, fields: [(1, "x", "bad")], bodyBytes: 0), totalBytes: 0) == nil)
    }
}

/// On a service connection (batond's), descriptors a call brings where its method declares none
/// (inside a variant, in a Properties call, in a signal) are closed at once: any local user can attach up to 253 to a call, and each read of
/// an `h` makes a duplicate (the attack that found this leaked 800 descriptors in 50 calls).
@Suite("BatonDBus: descriptors nobody declared are closed")
struct UndeclaredDescriptorTests {
    /// A pipe whose write end goes into a message: once every copy of it is closed, the read end
    /// hangs up.
    struct ProbePipe {
        let read: Int32
        let write: Int32
        init() {
            var fds: [Int32] = [-1, -1]
            #expect(pipe(&fds) == 0)
            (read, write) = (fds[0], fds[1])
        }

        /// Closes ours and waits up to `milliseconds` for the last copy elsewhere to close.
        func hangsUp(within milliseconds: Int32 = 5_000) -> Bool {
            close(write)
            defer { close(read) }
            var poll = pollfd(fd: read, events: Int16(POLLIN), revents: 0)
            return Glibc.poll(&poll, 1, milliseconds) == 1 && poll.revents & Int16(POLLHUP) != 0
        }
    }

    @Test func undeclaredDescriptorsInCallsAndSignalsAreClosed() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection.service(bus: .address(bus.address))
            let client = try DBusConnection(bus: .address(bus.address))
            let kept = Mutex<[Int32]>([])
            try await service.export([DBusInterface("org.baton.FDTest", methods: [
                DBusMethod("Ignore", in: [DBusArgument("value", "v")]) { _ in [] },
                DBusMethod("Take", in: [DBusArgument("fd", "h"), DBusArgument("extra", "v")]) { call in
                    // Lent for the handler's run: open now.
                    if let fd = call.arguments[0].unixFDValue, fcntl(fd, F_GETFD) >= 0 { kept.withLock { $0.append(fd) } }
                    return []
                },
                DBusMethod("Refuse", in: [DBusArgument("fd", "h")]) { _ in throw DBusError.failed("no") },
            ], properties: [DBusProperty("Name", signature: "s") { .string("x") }])], at: "/fd")
            let signals = try await service.signals(matching: DBusMatchRule(interface: "org.baton.FDTest", member: "Tick"))
            func call(_ interface: String, _ method: String, _ arguments: [DBusValue]) async {
                _ = try? await client.call(destination: service.uniqueName, path: "/fd", interface: interface, method: method, arguments: arguments)
            }
            let inVariant = ProbePipe(), inGet = ProbePipe(), inGetAll = ProbePipe(), inSet = ProbePipe(), extra = ProbePipe(),
                declared = ProbePipe(), inSignal = ProbePipe(), thrown = ProbePipe()
            await call("org.baton.FDTest", "Ignore", [.variant(.structure([.string("a"), .unixFD(inVariant.write)]))])
            await call("org.freedesktop.DBus.Properties", "Get", [.unixFD(inGet.write), .unixFD(inGet.write)])
            await call("org.freedesktop.DBus.Properties", "GetAll", [.array(elementSignature: "h", [.unixFD(inGetAll.write)])])
            await call("org.freedesktop.DBus.Properties", "Set", [.string("org.baton.FDTest"), .string("Name"), .variant(.unixFD(inSet.write))])
            await call("org.baton.FDTest", "Take", [.unixFD(declared.write), .variant(.unixFD(extra.write))])
            await call("org.baton.FDTest", "Refuse", [.unixFD(thrown.write)])
            try client.emitSignal(path: "/fd", interface: "org.baton.FDTest", name: "Tick", arguments: [.unixFD(inSignal.write)],
                                  destination: service.uniqueName)
            var iterator = signals.makeAsyncIterator()
            _ = await iterator.next()
            // The declared ones were the handlers' while they ran, and closed when they returned or threw
            // (an attack left one open per AttachDocument whose caller left before its uid was known).
            #expect(kept.withLock { $0.count } == 1)
            for (name, probe) in [("variant", inVariant), ("Get", inGet), ("GetAll", inGetAll), ("Set", inSet), ("extra", extra),
                                  ("signal", inSignal), ("declared", declared), ("declared, handler threw", thrown)] {
                #expect(probe.hangsUp(), "the descriptor in \(name) stayed open")
            }
        }
    }
}

/// An error text quotes caller input only cut short: a 100 KB interface or property name, or a
/// long object path, comes back as at most 255 bytes of it (an attack with 8 MiB names took
/// batond's peak memory to 10 times the message while the text was built and sent).
@Suite("BatonDBus: error texts never echo unbounded caller input")
struct BoundedErrorTextTests {
    @Test func longNamesAndPathsAreCutInErrors() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection.service(bus: .address(bus.address))
            let client = try DBusConnection(bus: .address(bus.address))
            try await service.export([DBusInterface("org.baton.Named", properties: [DBusProperty("Name", signature: "s") { .string("x") }])],
                                     at: "/named")
            let long = String(repeating: "é", count: 50_000)
            let longPath = "/" + Array(repeating: "segment", count: 10_000).joined(separator: "/")
            let probes: [(String, String, String, [DBusValue])] = [
                ("/named", "Get", "interface", [.string(long), .string("Name")]),
                ("/named", "Get", "property", [.string("org.baton.Named"), .string(long)]),
                ("/named", "GetAll", "interface", [.string(long)]),
                ("/named", "Set", "property", [.string("org.baton.Named"), .string(long), .variant(.string("y"))]),
                (longPath, "GetAll", "path", [.string("org.baton.Named")]),
            ]
            for (path, method, what, arguments) in probes {
                do {
                    _ = try await client.call(destination: service.uniqueName, path: path, interface: "org.freedesktop.DBus.Properties",
                                              method: method, arguments: arguments)
                    Issue.record("\(method) with a long \(what) succeeded")
                } catch let error as DBusError {
                    #expect(error.message.utf8.count <= 1_100, "\(method) with a long \(what): \(error.message.utf8.count) bytes")
                    #expect(error.message.contains("…"), "\(method) with a long \(what): \(error.message.prefix(80))")
                }
            }
        }
    }
}
