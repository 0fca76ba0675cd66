// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Glibc

/// A stand-in for a Wayland compositor, for what headless sway cannot show: a compositor that
/// offers ext-data-control-v1 (Debian 12's sway offers only wlr), one that offers no data control
/// at all (GNOME's Mutter), and one that sends broken bytes. It listens on a socket in its own
/// directory, announces `globals` to each client's registry, answers wl_display.sync, records the
/// interfaces clients bind, and ignores every other request. Encoded by hand from the Wayland wire
/// format (header: object id, size << 16 | opcode; strings with length, NUL, padding).
/// `@unchecked Sendable`: `bound` is guarded by `lock`; the rest is set in `init`.
public final class FakeCompositor: @unchecked Sendable {
    public enum Behaviour: Sendable {
        /// Answers as a compositor does.
        case normal
        /// After answering a client's `count`th sync, sends a header whose size is below the minimum.
        case brokenAfterSyncs(Int)
    }

    public let runtimeDirectory: String
    public let display = "wayland-fake"
    private let listener: Int32
    private let globals: [(interface: String, version: UInt32)]
    private let behaviour: Behaviour
    private let lock = NSLock()
    private var boundInterfaces: [String] = []
    private var clients: [Int32] = []
    private var stopped = false

    public var environment: [String: String] { ["WAYLAND_DISPLAY": display, "XDG_RUNTIME_DIR": runtimeDirectory] }
    /// The interfaces clients bound, with their versions ("name@version"), in order.
    public var bound: [String] { lock.withLock { boundInterfaces } }

    public init(globals: [(interface: String, version: UInt32)], behaviour: Behaviour = .normal) throws {
        runtimeDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-fakewl-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: runtimeDirectory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        self.globals = globals
        self.behaviour = behaviour
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((runtimeDirectory + "/" + display).utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { room in
            for (index, byte) in path.enumerated() { room[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, 8) == 0 else { throw FakeCompositorFailed() }
        Thread { [self] in acceptClients() }.start()
    }

    /// Stops accepting, closes every client (they see the compositor gone), removes the directory.
    public func stop() {
        lock.withLock {
            stopped = true
            for client in clients { shutdown(client, Int32(SHUT_RDWR)) }
        }
        shutdown(listener, Int32(SHUT_RDWR))
        try? FileManager.default.removeItem(atPath: runtimeDirectory)
    }

    private func acceptClients() {
        while true {
            // accept4 is not in Swift's Glibc module; the test's spawns close descriptors from 3 anyway.
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                break
            }
            let accepted = lock.withLock { () -> Bool in
                guard !stopped else { return false }
                clients.append(client)
                return true
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            guard accepted else {
                close(client)
                break
            }
            Thread { [self] in serve(client) }.start()
        }
        close(listener)
    }

    private func serve(_ client: Int32) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var registry: UInt32?
        var syncs = 0
        reading: while true {
            let count = read(client, &chunk, chunk.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            buffer.append(contentsOf: chunk[0..<count])
            while buffer.count >= 8 {
                let object = word(buffer, 0), size = Int(word(buffer, 4) >> 16), opcode = word(buffer, 4) & 0xFFFF
                guard size >= 8, buffer.count >= size else { break }
                let body = Array(buffer[8..<size])
                buffer.removeFirst(size)
                switch (object, opcode) {
                case (1, 1):  // get_registry(new_id)
                    let id = word(body, 0)
                    registry = id
                    for (index, global) in globals.enumerated() {
                        send(client, object: id, opcode: 0, [.uint(UInt32(index + 1)), .string(global.interface), .uint(global.version)])
                    }
                case (1, 0):  // sync(new_id): done, then the id is free again
                    let callback = word(body, 0)
                    send(client, object: callback, opcode: 0, [.uint(0)])
                    send(client, object: 1, opcode: 1, [.uint(callback)])
                    syncs += 1
                    if case .brokenAfterSyncs(let count) = behaviour, syncs == count {
                        send(client, object: 1, opcode: 1, [], size: 4)
                    }
                case (let id, 0) where id == registry:  // bind(name, interface, version, new_id)
                    let length = Int(word(body, 4))
                    let padded = (length + 3) & ~3
                    guard length > 0, 8 + padded + 4 <= body.count else { continue }
                    let name = String(decoding: body[8..<(8 + length - 1)], as: UTF8.self)
                    let version = word(body, 8 + padded)
                    lock.withLock { boundInterfaces.append("\(name)@\(version)") }
                default:
                    continue
                }
            }
            if lock.withLock({ stopped }) { break reading }
        }
        // Out of the list before it is closed: `stop()` must never shut down a number that another
        // test's socket may have been given since.
        lock.withLock { clients.removeAll { $0 == client } }
        close(client)
    }

    private enum Argument {
        case uint(UInt32)
        case string(String)
    }

    /// One event; `size` overrides the header's size (to send a broken one).
    private func send(_ client: Int32, object: UInt32, opcode: UInt32, _ arguments: [Argument], size: Int? = nil) {
        var body: [UInt8] = []
        func append(_ value: UInt32) { withUnsafeBytes(of: value) { body.append(contentsOf: $0) } }
        for argument in arguments {
            switch argument {
            case .uint(let value): append(value)
            case .string(let text):
                append(UInt32(text.utf8.count + 1))
                body.append(contentsOf: text.utf8)
                body.append(0)
                while body.count % 4 != 0 { body.append(0) }
            }
        }
        var message: [UInt8] = []
        withUnsafeBytes(of: object) { message.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(size ?? (8 + body.count)) << 16 | opcode) { message.append(contentsOf: $0) }
        message += body
        _ = message.withUnsafeBytes { Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func word(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        guard bytes.count >= offset + 4 else { return 0 }
        return bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }

    public struct FakeCompositorFailed: Error {}
}
