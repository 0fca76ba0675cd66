// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonWayland
import Foundation
import Glibc

/// Another Wayland client written against the wire directly (the module's message codec, none of
/// its clipboard logic): takes the clipboard through data control with crafted names (hundreds,
/// garbage, over-long) and answers each paste with fixed bytes, or holds the pipe open and never
/// writes. Its thread handles events until `stop`.
/// `@unchecked Sendable`: after `init`, only its thread touches the connection; `held` and
/// `stopping` are guarded by `lock`.
final class RawWaylandOwner: @unchecked Sendable {
    enum Answer: Sendable {
        case bytes([UInt8])
        /// Keeps the pipe open without writing (an owner that hangs).
        case silent
    }

    private let connection: WaylandConnection
    private let source: UInt32
    private let answers: [String: Answer]
    private let lock = NSLock()
    private var held: [Int32] = []
    private var stopping = false
    private let done = DispatchSemaphore(value: 0)

    /// Takes the clipboard offering `rawNames` (any bytes), then `names`; `answers` by name (others:
    /// no bytes, the pipe closed).
    init(environment: [String: String], names: [String], rawNames: [[UInt8]] = [], answers: [String: Answer]) throws {
        connection = try { () throws(WaylandUnavailable) in try WaylandConnection.connect(environment: environment) }()
        let globals = try WaylandGlobals.fetch(connection, timeout: .seconds(120))
        guard let (_, manager) = globals.dataControl, let seat = globals.seat else { throw RawClientFailed() }
        let seatID = connection.newID(), managerID = connection.newID(), deviceID = connection.newID()
        for (global, id, version) in [(seat, seatID, UInt32(1)), (manager, managerID, UInt32(1))] {
            var bind = WaylandRequest(object: globals.registry, opcode: WaylandInterface.Registry.bind)
            bind.uint(global.name)
            bind.string(global.interface)
            bind.uint(version)
            bind.uint(id)
            connection.send(bind)
        }
        var device = WaylandRequest(object: managerID, opcode: WaylandInterface.Manager.getDataDevice)
        device.uint(deviceID)
        device.object(seatID)
        connection.send(device)
        source = connection.newID()
        var create = WaylandRequest(object: managerID, opcode: WaylandInterface.Manager.createDataSource)
        create.uint(source)
        connection.send(create)
        for name in rawNames + names.map({ Array($0.utf8) }) {
            var offer = WaylandRequest(object: source, opcode: WaylandInterface.Source.offer)
            offer.string(bytes: name)
            connection.send(offer)
        }
        var set = WaylandRequest(object: deviceID, opcode: WaylandInterface.Device.setSelection)
        set.object(source)
        connection.send(set)
        self.answers = answers
        // Confirmed once the compositor handled it all.
        let callback = connection.newID()
        var sync = WaylandRequest(object: 1, opcode: WaylandInterface.Display.sync)
        sync.uint(callback)
        connection.send(sync)
        var synced = false
        try WaylandGlobals.roundTrip(connection, timeout: .seconds(120), until: { synced }) { [self] message in
            if message.object == callback { synced = true } else { try handle(message) }
        }
        Thread { [self] in serve() }.start()
    }

    private func serve() {
        while !lock.withLock({ stopping }) {
            guard connection.waitReadable(milliseconds: 200) else { continue }
            if case .closed = connection.receive() { break }
            do {
                while let message = try connection.nextMessage() { try handle(message) }
            } catch {
                break
            }
        }
        done.signal()
    }

    /// Our source's send: answer or hold; everything else (offers of the clipboard to our own
    /// device, delete_id) needs nothing.
    private func handle(_ message: WaylandMessage) throws {
        guard message.object == source, message.opcode == WaylandInterface.Source.send else { return }
        var arguments = WaylandArguments(message)
        let name = try arguments.requiredString()
        let descriptor = try connection.takeDescriptor()
        switch answers[name] {
        case .bytes(let bytes):
            bytes.withUnsafeBytes { _ = write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
        case .silent:
            lock.withLock { held.append(descriptor) }
        case nil:
            close(descriptor)
        }
    }

    /// Ends the client: its connection closes, so the compositor drops its copy.
    func stop() {
        lock.withLock { stopping = true }
        done.wait()
        for descriptor in lock.withLock({ held }) { close(descriptor) }
        connection.close()
    }

    struct RawClientFailed: Error {}
}
