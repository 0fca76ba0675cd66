// SPDX-License-Identifier: GPL-2.0-or-later
// Test support: a private Xvfb and xclip as the other X client, for the suites that use a real
// X display (BatonX11Tests, and the clipboard's end-to-end test in BatonServiceTests).
import BatonSpawn
import Foundation

/// A private Xvfb: it picks a free display itself (`-displayfd`) and listens on no TCP port.
/// `@unchecked Sendable`: `stopped` is guarded by `lock`.
public final class XvfbServer: @unchecked Sendable {
    public let display: String
    private let child: Spawned
    private let lock = NSLock()
    private var stopped = false

    private init(display: String, child: Spawned) {
        self.display = display
        self.child = child
    }

    public static func start() async throws -> XvfbServer {
        try requireProgram("/usr/bin/Xvfb", package: "xvfb")
        return try await onThread {
            let child = try Spawned.spawn("/usr/bin/Xvfb", ["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "640x480x24"],
                                          environment: ["PATH=/usr/bin:/bin"], captureOutput: true)
            // The display number and a newline once it accepts clients; end of file if it failed.
            let number = child.readLine()
            if let output = child.output { close(output) }
            guard !number.isEmpty, Int(number) != nil else {
                kill(child.pid, SIGKILL)
                child.wait()
                throw XvfbFailed()
            }
            return XvfbServer(display: ":\(number)", child: child)
        }
    }

    /// Ends the server, once (its pid is not signalled after it was reaped).
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        kill(child.pid, SIGTERM)
        child.wait()
    }

    public struct XvfbFailed: Error { public init() {} }
}

public struct XclipResult: Sendable {
    public var status: Int32
    public var output: Data
}

/// Runs xclip on `display`; its input from `input` (a file), its output collected when pasting.
public func xclip(_ arguments: [String], display: String, input: URL? = nil) async throws -> XclipResult {
    try requireProgram("/usr/bin/xclip", package: "xclip")
    return try await onThread {
        let pasting = arguments.contains("-o")
        let child = try Spawned.spawn("/usr/bin/xclip", arguments, environment: ["PATH=/usr/bin:/bin", "DISPLAY=\(display)"], input: input?.path,
                                      captureOutput: pasting)
        let data = Data(child.readOutput())
        return XclipResult(status: child.wait(), output: data)
    }
}

/// Copies `bytes` to the clipboard with xclip (which then serves it from the background).
public func xclipCopy(_ bytes: [UInt8], display: String, selection: String = "clipboard", type: String? = nil) async throws {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("baton-x11-\(UUID().uuidString)")
    try Data(bytes).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    var arguments = ["-i", "-selection", selection]
    if let type { arguments += ["-t", type] }
    let result = try await xclip(arguments, display: display, input: file)
    guard result.status == 0 else { throw XclipFailed(status: result.status) }
}

/// xclip exited with a failure.
public struct XclipFailed: Error { public var status: Int32 }
