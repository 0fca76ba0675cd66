// SPDX-License-Identifier: GPL-2.0-or-later
// baton-browser-host: the native messaging host of the Baton browser extension (docs/publishers.md).
import BatonBrowserHost
import Foundation

exit(await BrowserHostProgram.run(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
