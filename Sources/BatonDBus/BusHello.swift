// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch
import Glibc

/// The one blocking step of a connection: after authentication (BusSocket), `Hello` and its reply.
enum BusHello {
    /// Sends `Hello` and waits for its reply (the one blocking step), keeping whatever else arrives.
    static func sayHello(on socket: Int32, stream: inout IncomingMessageStream) throws(DBusError) -> (String, [DBusMessage]) {
        var hello = DBusMessage.busCall("Hello")
        hello.serial = 1
        let (bytes, _) = try hello.encoded(body: [])
        var offset = 0
        while offset < bytes.count {
            guard let written = BusSocket.send(socket, bytes, from: offset, descriptors: []), written > 0 else {
                throw .disconnected("the bus closed the connection before Hello")
            }
            offset += written
        }
        var early: [DBusMessage] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var room = [Int32](repeating: -1, count: 256)
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(BusSocket.handshakeTimeoutSeconds) * 1_000_000_000
        while true {
            while let message = try stream.next() {
                // Nobody knows our name before Hello's reply: no call to answer, nothing of ours to end.
                _ = stream.takeMalformed()
                guard message.replySerial == 1 else {
                    early.append(message)
                    continue
                }
                let result = message.callResult
                guard case .success(let values) = result, let name = values.first?.stringValue, DBusNames.isValidBusName(name.utf8) else {
                    if case .failure(let error as DBusError) = result { throw error }
                    throw .failed("unexpected reply to Hello")
                }
                return (name, early)
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { throw DBusError(name: DBusError.noReplyName, message: "no reply to Hello from the bus") }
            var poll = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            _ = Glibc.poll(&poll, 1, Int32((deadline - now) / 1_000_000) + 1)
            guard let (count, descriptors) = BusSocket.receive(socket, into: &buffer, descriptors: &room) else {
                throw .disconnected("the bus closed the connection before answering Hello")
            }
            guard count > 0 else { continue }
            _ = buffer.withUnsafeBytes { stream.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count]), descriptors: descriptors) }
        }
    }
}
