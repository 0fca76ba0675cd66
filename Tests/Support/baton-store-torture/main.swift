// SPDX-License-Identifier: GPL-2.0-or-later
// Fault-injection helper for BatonStoreTests. Not part of the daemon.
//
//   baton-store-torture counter <dir>
//       Loads the "counter" record (0 if missing), prints "start <n>", then forever: prints
//       "begin <n+1>", saves n+1, prints "ack <n+1>". Each line is written straight to fd 1
//       (unbuffered), so everything printed survives a SIGKILL. Exits 1 with "error <reason>".
//   baton-store-torture probe <dir>
//       If run as root, first drops to the owner of <dir>. Then tries to save record "probe" and
//       load record "unreadable", printing "save <outcome>" and "load <outcome>".
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BatonStore

/// The record the test reads back. The filler makes each write span several pages, so a kill can
/// land in the middle of one, and it differs per value, so mixed old/new pages fail the checksum.
struct TortureCounter: Codable, Sendable {
    var value: UInt64
    var filler: String
}

func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var written = 0
    while written < bytes.count {
        let count = bytes.withUnsafeBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return write(STDOUT_FILENO, base + written, raw.count - written)
        }
        if count < 0 {
            if errno == EINTR { continue }
            exit(2)
        }
        written += count
    }
}

func outcome(of error: StoreError) -> String {
    switch error {
    case .invalidName: "invalidName"
    case .invalidConfiguration: "invalidConfiguration"
    case .insecureDirectory: "insecureDirectory"
    case .insecureFile: "insecureFile"
    case .permissionDenied: "permissionDenied"
    case .corrupt: "corrupt"
    case .unsupportedVersion: "unsupportedVersion"
    case .encodingFailed: "encodingFailed"
    case .io: "io"
    case .directoryInUse: "directoryInUse"
    case .digestFailed: "digestFailed"
    case .sealedWithoutKey: "sealedWithoutKey"
    case .sealedToOtherKey: "sealedToOtherKey"
    }
}

func runCounter(directoryPath: String) throws(StoreError) {
    let directory = try StateDirectory(path: directoryPath)
    let record = try DurableRecord<TortureCounter>(name: "counter", schemaVersion: 1, in: directory)
    var value = try record.load()?.value ?? 0
    emit("start \(value)")
    while true {
        value += 1
        emit("begin \(value)")
        let filler = String(repeating: String(value, radix: 16) + ";", count: 4096)
        try record.save(TortureCounter(value: value, filler: filler))
        emit("ack \(value)")
    }
}

func runProbe(directoryPath: String) throws(StoreError) {
    if geteuid() == 0 {
        var info = stat()
        guard stat(directoryPath, &info) == 0 else { emit("error cannot stat \(directoryPath)"); exit(1) }
        if info.st_uid != 0 {
            guard setgid(info.st_gid) == 0, setuid(info.st_uid) == 0 else { emit("error cannot drop privileges"); exit(1) }
        }
    }
    let directory = try StateDirectory(path: directoryPath)
    do {
        try DurableRecord<Int>(name: "probe", schemaVersion: 1, in: directory).save(1)
        emit("save ok")
    } catch {
        emit("save \(outcome(of: error))")
    }
    do {
        _ = try DurableRecord<Int>(name: "unreadable", schemaVersion: 1, in: directory).load()
        emit("load ok")
    } catch {
        emit("load \(outcome(of: error))")
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    emit("error usage: baton-store-torture counter|probe <dir>")
    exit(64)
}
do {
    switch arguments[1] {
    case "counter": try runCounter(directoryPath: arguments[2])
    case "probe": try runProbe(directoryPath: arguments[2])
    default:
        emit("error unknown mode \(arguments[1])")
        exit(64)
    }
} catch {
    emit("error \(outcome(of: error)): \(error)")
    exit(1)
}
