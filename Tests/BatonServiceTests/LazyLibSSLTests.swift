// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonTestBus
import BatonDBus
import Foundation
import Testing

/// batond maps libssl only once a TLS connection needs it (COpenSSL's shim, BatonTransport's
/// LibSSL): an idle daemon that no peer reached has no libssl in memory (docs/benchmarks.md).
@Suite("batond: libssl is loaded at the first TLS connection")
struct LazyLibSSLTests {
    /// /proc files report no size, so they are read until the end rather than by their length.
    static func maps(_ pid: Int32) -> String {
        guard let file = fopen("/proc/\(pid)/maps", "r") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func mapsLibSSL(_ pid: Int32) -> Bool { maps(pid).contains("/libssl.so") }

    @Test func anIdleDaemonHasNoLibSSLUntilAPeerConnects() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let daemon = KillableBatond(bus, name: "lazy", port: freeTCPPort())
        do {
            try await check(daemon, client)
        } catch {
            await daemon.kill9()
            throw error
        }
        await daemon.terminate()
    }

    private func check(_ daemon: KillableBatond, _ client: DBusConnection) async throws {
        try await daemon.start(client)
        let pid = try #require(daemon.processIdentifier)
        #expect(!Self.mapsLibSSL(pid), "libssl mapped at start:\n\(daemon.log)")
        #expect(Self.maps(pid).contains("/libcrypto.so"), "the maps were not read")

        // A stranger's TCP connection to the transfer port: the listener makes its TLS context now.
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(socket >= 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = daemon.port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        _ = send(socket, "not a ClientHello", 17, Int32(MSG_NOSIGNAL))
        let loaded = try await eventually(timeout: .seconds(10)) { Self.mapsLibSSL(pid) }
        #expect(loaded, "libssl not mapped after a connection:\n\(daemon.log)")
        // And the daemon goes on answering.
        _ = try await client.call(destination: daemon.busName, path: "/", interface: "org.freedesktop.DBus.Peer", method: "Ping")
    }
}
