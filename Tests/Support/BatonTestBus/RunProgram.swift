// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation

/// The result of running a program to completion.
public struct ToolResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs a program to completion, with stdout and stderr captured (separately, or together in
/// `stdout` with `mergeStandardError`), stdin empty, without blocking a cooperative thread.
/// The one way every test suite runs a program.
public func runProgram(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                       mergeStandardError: Bool = false) async throws -> ToolResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    process.standardInput = FileHandle.nullDevice
    let output = ChildPipe()
    let errors = mergeStandardError ? output : ChildPipe()
    process.standardOutput = output
    process.standardError = errors
    // Drain both pipes while the program runs, so a full pipe never blocks it. The blocking reads
    // run on private queues: on the cooperative pool (2 threads here) they could starve every task,
    // including the one that would end the program.
    let stdoutTask = Task { await readToEnd(output.fileHandleForReading) }
    let stderrTask = mergeStandardError ? nil : Task { await readToEnd(errors.fileHandleForReading) }
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
        do {
            try launch(process)
        } catch {
            process.terminationHandler = nil
            // Nothing will write: end the readers.
            try? output.fileHandleForWriting.close()
            try? errors.fileHandleForWriting.close()
            continuation.resume(throwing: error)
        }
    }
    let err = await stderrTask?.value ?? Data()
    return ToolResult(status: status, stdout: String(decoding: await stdoutTask.value, as: UTF8.self),
                      stderr: String(decoding: err, as: UTF8.self))
}

/// Reads a pipe to its end on a private serial queue (its own thread), not on the cooperative pool.
public func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
        DispatchQueue(label: "tests.pipe-reader").async { continuation.resume(returning: handle.readDataToEndOfFile()) }
    }
}

/// Runs blocking work (waiting for child processes, sleeping between kills) on a thread of its
/// own. On the cooperative pool (2 threads here) such work holds a thread for seconds, and every
/// other suite's tasks queue behind it: in CI runs, unrelated tests waited 15–18 s and a TLS
/// handshake timed out. Expectations stay with the caller, in the test's own task.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// Waits for `process` to end, polling without holding a pool thread; false when it did not end
/// within `timeout`.
public func waitForExit(_ process: Process, timeout: Duration) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while process.isRunning {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}
