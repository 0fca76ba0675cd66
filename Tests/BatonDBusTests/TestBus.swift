import Foundation

/// Runs an external program and returns (exit status, stdout) without blocking a cooperative thread.
func runTool(_ path: String, _ arguments: [String]) async throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    return (status, String(decoding: data, as: UTF8.self))
}
