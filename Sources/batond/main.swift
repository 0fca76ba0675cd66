// batond: the Baton daemon. Everything lives in BatonService; this only hands over the command line.
import BatonService
import Foundation

exit(await Daemon.main(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
