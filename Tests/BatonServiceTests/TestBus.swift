import Foundation

/// Runs a program to completion and returns (exit status, stdout, stderr), off the cooperative pool.
func runTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> (Int32, String, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = errors.fileHandleForReading.readDataToEndOfFile()
    return (status, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
}
