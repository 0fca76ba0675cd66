// SPDX-License-Identifier: GPL-2.0-or-later
// batond: the Baton daemon. Everything lives in BatonService; this only hands over the command line.
// No Foundation here or below: the daemon stays small (docs/benchmarks.md, idle memory).
#if canImport(Glibc)
import Glibc
#endif
import BatonReadiness
import BatonService

/// The process environment, read from `environ` (the first definition of a name wins, as getenv).
func processEnvironment() -> [String: String] {
    var result: [String: String] = [:]
    var index = 0
    while let entry = environ[index] {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "="), result[String(text[..<equals])] == nil {
            result[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        index += 1
    }
    return result
}

// batond's malloc policy (the D-Bus library sets none: apps linking BatonClient keep glibc's defaults).
DaemonMemoryPolicy.install()
// Before any task: idle worker threads must not wake each second (docs/benchmarks.md, idle).
installQuietGlobalExecutor()
// batond never uses select(), so it takes the whole hard limit on descriptors (systemd gives services
// 1,024 soft and 524,288 hard): callers' documents, TLS connections and bus sockets all need them, and
// a flood of AttachDocument calls held 1,024 at once in an attack.
var descriptorLimit = rlimit()
if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &descriptorLimit) == 0, descriptorLimit.rlim_cur < descriptorLimit.rlim_max {
    descriptorLimit.rlim_cur = descriptorLimit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &descriptorLimit)
}
exit(await Daemon.main(arguments: Array(CommandLine.arguments.dropFirst()), environment: processEnvironment()))
