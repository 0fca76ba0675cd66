// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif

/// This machine's addresses, for the endpoints announced at pairing (protocol §7.2).
enum LocalAddresses {
    static let maxAnnounced = 4

    static func isWildcard(_ host: String) -> Bool { host == "0.0.0.0" || host == "::" || host == "[::]" }

    /// "host:port" for a listener on `listenHost`: that address itself, or, for a wildcard, the
    /// machine's non-loopback addresses of that family (IPv6 link-local ones need a zone, so not those).
    static func endpoints(listenHost: String, port: UInt16) -> [String] {
        guard isWildcard(listenHost) else { return [RingService.formatEndpoint(host: listenHost, port: port)] }
        let family = listenHost == "0.0.0.0" ? AF_INET : AF_INET6
        return interfaceAddresses(family: family).prefix(maxAnnounced).map { RingService.formatEndpoint(host: $0, port: port) }
    }

    static func interfaceAddresses(family: Int32) -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var out: [String] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr, Int32(address.pointee.sa_family) == family,
                  entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0, entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let text = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.lowercased().hasPrefix("fe80") || text.contains("%") { continue }
            if !out.contains(text) { out.append(text) }
        }
        return out
    }
}
