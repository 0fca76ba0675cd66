// SPDX-License-Identifier: GPL-2.0-or-later
// baton-browser-host: the native messaging host of the Baton browser extension (docs/publishers.md).
import BatonBrowserHost
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

exit(await BrowserHostProgram.run(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
