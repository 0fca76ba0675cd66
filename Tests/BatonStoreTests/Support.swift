// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
@testable import BatonStore
#if canImport(Glibc)
import Glibc
#endif

/// A fresh, uniquely named directory path under the system temporary directory (not yet created).
func scratchPath(_ label: String) -> String {
    let base = FileManager.default.temporaryDirectory.path
    return base + "/baton-store-tests-\(label)-\(UUID().uuidString)"
}

/// A created scratch directory, for tests that start from an existing directory.
func makeScratchDirectory(_ label: String, mode: mode_t = 0o700) throws -> String {
    let path = scratchPath(label)
    guard mkdir(path, mode) == 0, chmod(path, mode) == 0 else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    return path
}

func permissions(of path: String) -> UInt32? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return UInt32(info.st_mode) & 0o7777
}

func contents(of path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map(Array.init)
}

func overwrite(_ path: String, with bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    chmod(path, 0o600)
}

func directoryEntries(_ path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}

func removeTree(_ path: String) {
    // Restore permissions a test may have removed so cleanup can proceed.
    _ = chmod(path, 0o700)
    try? FileManager.default.removeItem(atPath: path)
}

struct Pairing: Codable, Sendable, Equatable {
    var deviceName: String
    var keyIdentifier: String
    var trusted: Bool
}

struct RequestEntry: Codable, Sendable, Equatable, Identifiable {
    var id: String
    var payload: String
}

/// The test's view of baton-store-torture's record: only the counter; JSON ignores the filler.
struct TortureCounterView: Codable, Sendable {
    var value: UInt64
}

/// Locates the baton-store-torture executable built next to the test bundle.
func tortureExecutablePath() -> String? {
    var candidates: [String] = []
    if let explicit = ProcessInfo.processInfo.environment["BATON_STORE_TORTURE"] { candidates.append(explicit) }
    if let running = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        candidates.append((running as NSString).deletingLastPathComponent + "/baton-store-torture")
    }
    candidates.append(Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("baton-store-torture").path)
    candidates.append(FileManager.default.currentDirectoryPath + "/.build/debug/baton-store-torture")
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// Runs baton-store-torture to completion and returns its stdout lines.
func runTorture(_ arguments: [String]) throws -> [String] {
    guard let executable = tortureExecutablePath() else { throw TortureMissing() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = ChildPipe()
    process.standardOutput = output
    try launch(process)
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

struct TortureMissing: Error, CustomStringConvertible {
    var description: String {
        "baton-store-torture not found next to the test bundle; run `swift build --build-tests` first"
    }
}
