// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation

/// (exit status, stdout and stderr together) of a program run to completion.
func runTool(_ path: String, _ arguments: [String]) async throws -> (Int32, String) {
    let result = try await runProgram(path, arguments, mergeStandardError: true)
    return (result.status, result.stdout)
}
