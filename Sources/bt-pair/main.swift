// SPDX-License-Identifier: GPL-2.0-or-later
// bt-pair: pair this machine with another one, list the ring, remove a member.
// Thin: parses arguments, calls batond through BatonClient, prints.
#if canImport(Glibc)
import Glibc
#endif
import BatonCommandLine
import BtPairTool

exit(await BtPair.program.run(arguments: Array(CommandLine.arguments.dropFirst())))
