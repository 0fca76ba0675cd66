// SPDX-License-Identifier: GPL-2.0-or-later
// baton-agent: the per-user session agent. Everything lives in BatonAgent; this only hands over the command line.
import BatonAgent
import BatonReadiness
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Before any task: a desktop agent must not wake each second (libdispatch's worker-pool monitor).
installQuietGlobalExecutor()
exit(await AgentProgram.run(arguments: Array(CommandLine.arguments.dropFirst())))
