// SPDX-License-Identifier: GPL-2.0-or-later
// The `baton` command line: parsing and printing only; the work is done by BatonClient.
// One binary for all the client tools: bt-pair, baton-agent and baton-browser-host are installed as
// links to it and chosen by the name it is started under. Each statically linked tool carried its
// own copy of the Swift runtime and FoundationEssentials; one copy keeps the package a few MB
// (docs/benchmarks.md). The separate executables of the same names stay for development and tests.
#if canImport(Glibc)
import Glibc
#endif
import BatonAgent
import BatonBrowserHost
import BatonReadiness
import BatonTool
import BtPairTool
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
switch CommandLine.arguments.first.map({ $0.split(separator: "/").last.map(String.init) ?? $0 }) {
case "bt-pair":
    exit(await BtPair.program.run(arguments: arguments))
case "baton-agent":
    // Before any task: a desktop agent must not wake each second (libdispatch's worker-pool monitor).
    installQuietGlobalExecutor()
    exit(await AgentProgram.run(arguments: arguments))
case "baton-browser-host":
    exit(await BrowserHostProgram.run(arguments: arguments, environment: ProcessInfo.processInfo.environment))
default:
    exit(await CommandLineTool.program.run(arguments: arguments))
}
