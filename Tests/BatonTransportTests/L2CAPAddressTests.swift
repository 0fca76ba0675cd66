// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport
import CBluetooth
import Glibc
import Testing

/// True when this kernel refuses Bluetooth sockets (build machines, CI containers).
private let kernelLacksBluetooth: Bool = {
    let descriptor = socket(AF_BLUETOOTH, Int32(SOCK_SEQPACKET.rawValue), BTPROTO_L2CAP)
    if descriptor >= 0 { close(descriptor); return false }
    return errno == EAFNOSUPPORT
}()

@Suite("L2CAP addresses")
struct L2CAPAddressTests {
    // Parsing and printing of BluetoothAddress itself: BatonCoreTests/EndpointTests.

    @Test("sockaddr_l2 is laid out as <bluetooth/l2cap.h> declares it, address reversed as str2ba stores it")
    func socketAddressLayout() throws {
        let address = L2CAPSocketAddress(address: try BluetoothAddress("00:AA:01:02:03:04"), addressType: .public, psm: 0x0181)
        let bytes = address.bytes
        #expect(bytes == [UInt8(AF_BLUETOOTH), 0, 0x81, 0x01, 0x04, 0x03, 0x02, 0x01, 0xAA, 0x00, 0, 0, 1, 0])
        #expect(bytes.count == MemoryLayout<sockaddr_l2>.size)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_psm) == 2)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_bdaddr) == 4)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_cid) == 10)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_bdaddr_type) == 12)
        #expect(bytes[12] == UInt8(BDADDR_LE_PUBLIC))
        var libraryAddress = bdaddr_t()
        #expect(str2ba("00:AA:01:02:03:04", &libraryAddress) == 0)
        #expect(withUnsafeBytes(of: libraryAddress) { Array($0) } == Array(bytes[4..<10]))
        let random = L2CAPSocketAddress(address: address.address, addressType: .random, psm: 0x80)
        #expect(random.bytes[12] == UInt8(BDADDR_LE_RANDOM))
    }

    @Test("A kernel sockaddr_l2 reads back; BR/EDR, foreign families and short buffers are refused")
    func parsesKernelAddress() throws {
        let address = L2CAPSocketAddress(address: try BluetoothAddress("C0:FF:EE:00:12:34"), addressType: .random, psm: 0xC3)
        #expect(try L2CAPSocketAddress(bytes: address.bytes) == address)
        var brEDR = address.bytes
        brEDR[12] = UInt8(BDADDR_BREDR)
        #expect(throws: TransportError.self) { try L2CAPSocketAddress(bytes: brEDR) }
        var inet = address.bytes
        inet[0] = UInt8(AF_INET)
        #expect(throws: TransportError.self) { try L2CAPSocketAddress(bytes: inet) }
        #expect(throws: TransportError.self) { try L2CAPSocketAddress(bytes: address.bytes.prefix(13)) }
    }

    @Test("PSMs outside the dynamic range 0x80–0xFF are refused before any socket exists", arguments: [UInt16(0), 0x25, 0x7F, 0x100, 0x1001])
    func refusesFixedPSMs(psm: UInt16) async throws {
        let address = try BluetoothAddress("00:AA:01:00:00:01")
        #expect(throws: TransportError.addressUnavailable("PSM 0x\(String(psm, radix: 16)) outside 0x80–0xFF")) {
            try L2CAPListener(adapterAddress: address, psm: psm)
        }
        await #expect(throws: TransportError.addressUnavailable("PSM 0x\(String(psm, radix: 16)) outside 0x80–0xFF")) {
            try await L2CAPConnector.connect(adapterAddress: address, peerAddress: address, peerAddressType: .public, psm: psm)
        }
    }

    @Test("Without kernel Bluetooth, listening and connecting fail with bluetoothUnavailable",
          .enabled(if: kernelLacksBluetooth, "this kernel has Bluetooth sockets"))
    func typedErrorWithoutBluetooth() async throws {
        let address = try BluetoothAddress("00:AA:01:00:00:01")
        #expect(throws: TransportError.bluetoothUnavailable(errno: EAFNOSUPPORT)) {
            try L2CAPListener(adapterAddress: address, psm: 0x81)
        }
        await #expect(throws: TransportError.bluetoothUnavailable(errno: EAFNOSUPPORT)) {
            try await L2CAPConnector.connect(adapterAddress: address, peerAddress: address, peerAddressType: .random, psm: 0x81,
                                             timeout: .seconds(1))
        }
    }

    @Test("A receive MTU outside 23–65535 is refused", arguments: [0, 22, 65_536])
    func refusesReceiveMTU(mtu: Int) throws {
        let address = try BluetoothAddress("00:AA:01:00:00:01")
        #expect(throws: TransportError.invalidSDU("receive MTU \(mtu) outside 23...65535")) {
            try L2CAPListener(adapterAddress: address, psm: 0x81, options: L2CAPOptions(receiveMTU: mtu))
        }
    }
}
