// SPDX-License-Identifier: GPL-2.0-or-later
// The `baton` command line: parsing and printing only; the work is done by BatonClient.
#if canImport(Glibc)
import Glibc
#endif

exit(await CommandLineTool.program.run(arguments: Array(CommandLine.arguments.dropFirst())))
