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
    let output = Pipe()
    let errors = mergeStandardError ? output : Pipe()
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
            try process.run()
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
