// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonSystem
import CBluetooth
import Dispatch
import Glibc

/// Reads whether an adapter uses LE privacy from the kernel's management interface: Read
/// Controller Information on an HCI_CHANNEL_CONTROL socket, current settings bit 13
/// (MgmtControllerInfo). The kernel answers this command on an untrusted socket too, so batond
/// needs no capability (its unit has an empty CapabilityBoundingSet; AF_BLUETOOTH is allowed).
/// bluetoothd sets the bit when main.conf says `Privacy = device` (or another privacy mode).
public struct KernelPrivacyReader: AdapterPrivacyReading {
    /// How long to wait for the kernel's reply (it answers at once; this bounds a stuck socket).
    public var timeoutMilliseconds: Int32

    public init(timeoutMilliseconds: Int32 = 2000) {
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    public func privacy(ofAdapter adapter: String) async -> LEPrivacySetting {
        guard let index = MgmtControllerInfo.index(ofAdapter: adapter) else {
            return .unknown("the adapter name \(adapter) is not of the form hciN")
        }
        let timeout = timeoutMilliseconds
        // poll() blocks (briefly): off the cooperative pool, on a queue of our own.
        return await withCheckedContinuation { continuation in
            Self.queue.async { continuation.resume(returning: Self.read(index: index, timeout: timeout)) }
        }
    }

    /// Not `DispatchQueue.global()`: the first job on a global concurrent queue starts libdispatch's
    /// worker-pool monitor, a 1 s timer for the life of the process, so one status read left an idle
    /// batond waking every second (QuietExecutor says more). A serial queue of our own does not start it.
    private static let queue = DispatchQueue(label: "baton.transport.kernel-privacy")

    static let btprotoHCI: Int32 = 1
    static let hciChannelControl: UInt16 = 3
    static let hciDevNone: UInt16 = 0xFFFF

    static func read(index: UInt16, timeout: Int32) -> LEPrivacySetting {
        let created = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), btprotoHCI)
        guard created >= 0 else { return .unknown(describe("no Bluetooth management socket", errno)) }
        let management = FileDescriptor(taking: created)
        // struct sockaddr_hci { sa_family_t hci_family; unsigned short hci_dev; unsigned short hci_channel; }
        var address: (UInt16, UInt16, UInt16) = (UInt16(AF_BLUETOOTH), hciDevNone, hciChannelControl)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(management.rawValue, $0, socklen_t(6)) }
        }
        guard bound == 0 else { return .unknown(describe("the Bluetooth management channel cannot be opened", errno)) }
        let request = MgmtControllerInfo.request(index: index)
        let sent = request.withUnsafeBytes { send(management.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else { return .unknown(describe("the kernel did not take the management command", errno)) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        let deadline = Int64(clock.tv_sec) * 1000 + Int64(clock.tv_nsec) / 1_000_000 + Int64(timeout)
        // Other events may come first (index added, settings changed for another controller).
        while true {
            clock_gettime(CLOCK_MONOTONIC, &clock)
            let left = deadline - (Int64(clock.tv_sec) * 1000 + Int64(clock.tv_nsec) / 1_000_000)
            guard left > 0 else { return .unknown("the kernel did not answer within \(timeout) ms") }
            var waiting = pollfd(fd: management.rawValue, events: Int16(POLLIN), revents: 0)
            // Interrupted or not ready yet: the time left is computed again.
            guard poll(&waiting, 1, Int32(left)) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { raw in retryingInterrupts { recv(management.rawValue, raw.baseAddress, raw.count, 0) } }
            if count < 0 {
                if errno == EAGAIN { continue }
                return .unknown(describe("reading the kernel's answer failed", errno))
            }
            if let reply = MgmtControllerInfo.reply(Array(buffer[0..<count]), index: index) {
                return MgmtControllerInfo.setting(of: reply)
            }
        }
    }

    static func describe(_ what: String, _ code: Int32) -> String {
        "\(what): \(String(cString: strerror(code)))"
    }
}
