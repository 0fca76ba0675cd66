// baton-agent: the per-user session agent. Everything lives in BatonAgent; this only hands over the command line.
import BatonAgent
import Foundation

exit(await AgentProgram.run(arguments: Array(CommandLine.arguments.dropFirst())))
