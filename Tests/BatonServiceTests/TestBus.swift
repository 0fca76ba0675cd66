// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation

/// (exit status, stdout, stderr) of a program run to completion.
func runTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> (Int32, String, String) {
    let result = try await runProgram(path, arguments, environment: environment)
    return (result.status, result.stdout, result.stderr)
}
