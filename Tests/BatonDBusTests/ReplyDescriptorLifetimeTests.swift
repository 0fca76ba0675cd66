// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import BatonTestBus
import Glibc
import Testing

/// A handler that returns the descriptor of something it owns (the clipboard's Paste returns its
/// sealed memfd): the reply is written after the handler returned, so the owner must live until
/// then (DBusCallContext.keepUntilReplied), or the reply duplicates a closed descriptor.
@Suite struct ReplyDescriptorLifetimeTests {
    /// A pipe holding `text`, both ends closed when it goes.
    final class OwnedPipe: Sendable {
        let reader: Int32
        init(_ text: String) {
            var ends: [Int32] = [-1, -1]
            precondition(pipe(&ends) == 0)
            let bytes = Array(text.utf8)
            precondition(write(ends[1], bytes, bytes.count) == bytes.count)
            close(ends[1])
            reader = ends[0]
        }
        deinit { close(reader) }
    }

    @Test func aReturnedDescriptorKeptUntilRepliedReachesTheCallerWhole() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection(bus: .address(bus.address))
            let client = try DBusConnection(bus: .address(bus.address))
            defer { service.close(); client.close() }
            try await service.export([DBusInterface("org.baton.Test.Owned", methods: [
                DBusMethod("Give", in: [], out: [DBusArgument("contents", "h")]) { _ in
                    let owned = OwnedPipe("given")
                    DBusCallContext.keepUntilReplied(owned)
                    return [.unixFD(owned.reader)]
                },
            ])], at: "/owned")
            for round in 0..<50 {
                let reply = try await client.call(destination: service.uniqueName, path: "/owned", interface: "org.baton.Test.Owned",
                                                  method: "Give", arguments: [])
                let descriptor = try #require(reply.first?.unixFDValue, "round \(round): \(reply)")
                defer { close(descriptor) }
                var buffer = [UInt8](repeating: 0, count: 16)
                let count = read(descriptor, &buffer, buffer.count)
                #expect(count == 5 && Array(buffer.prefix(5)) == Array("given".utf8), "round \(round)")
            }
        }
    }
}
