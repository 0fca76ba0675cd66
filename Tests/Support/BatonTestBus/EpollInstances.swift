// SPDX-License-Identifier: GPL-2.0-or-later
import Glibc

/// Every epoll instance of this process with the descriptors it watches, from /proc/self/fdinfo.
/// libdispatch's own instance is among them (it watches its eventfd, timers and our sources).
public func epollInstances() -> [(instance: Int32, watched: [Int32])] {
    guard let directory = opendir("/proc/self/fd") else { return [] }
    defer { closedir(directory) }
    var instances: [(Int32, [Int32])] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard let fd = Int32(name) else { continue }
        var target = [CChar](repeating: 0, count: 256)
        let length = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
        guard length > 0, String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == "anon_inode:[eventpoll]"
        else { continue }
        guard let file = fopen("/proc/self/fdinfo/\(fd)", "r") else { continue }
        defer { fclose(file) }
        var watched: [Int32] = []
        var line = [CChar](repeating: 0, count: 512)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("tfd:") else { continue }
            let fields = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.count > 1, let watchedFD = Int32(fields[1]) { watched.append(watchedFD) }
        }
        instances.append((fd, watched))
    }
    return instances
}
