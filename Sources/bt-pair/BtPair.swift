// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine

/// bt-pair's exit statuses (its usage text lists them; scripts rely on them).
enum PairExit {
    static let ok: Int32 = 0
    static let failure: Int32 = 1
    static let rejected: Int32 = 2
    static let timedOut: Int32 = 3
    static let notFound: Int32 = 4
    static let usage: Int32 = ExitStatus.usage
}

public enum BtPair {
    static let usage = """
        usage: bt-pair [--bus session|system|ADDRESS] [--bus-name NAME] [--json] [COMMAND]

        commands:
          list                      the machines in this ring (the default)
          accept [--host ADDR]      wait up to 120 s for another machine to pair with this one
          with HOST:PORT --session ID [--code CODE]
                                    pair with the machine running `bt-pair accept` (it prints both)
          with ble:ADDRESS/PSM --session ID [--code CODE]
                                    the same over Bluetooth (L2CAP), to the address and PSM `discover` lists
          with NAME-OR-SESSION [--seconds N] [--code CODE]
                                    the same, finding that machine as `discover` does (over TCP when
                                    DNS-SD lists it, else over Bluetooth when its pairing advert offers L2CAP)
          discover [--seconds N]    machines waiting in `bt-pair accept`: on the local network (DNS-SD)
                                    and, heard by Bluetooth, nearby (their clear pairing advert)
                                    (browses _baton-pair._tcp for N seconds, default 5, at most 30)
          remove DEVICE             remove a member (its name, short id or device id); the others re-key
          reset-identity            this machine leaves its ring and takes a new device id (asks first,
                                    in a terminal); then remove the old id on another member and pair again

        Each person types the code the other machine shows: `accept` shows a 6-digit code, typed on
        the machine running `with` (or given with --code); that machine then shows a second code,
        typed on the accepting machine. Until then, a second machine connecting to the accepting one
        ends the session (contested). Then each side lists the members the other ring brings and asks
        before adding them.
        Pairing, removal and reset-identity need root, group `baton` or an administrator's password (polkit asks
        for it in a desktop session); listing does not.

        exit status: 0 done, 1 failure, 2 rejected or cancelled, 3 timed out, 4 not found, 64 usage

        """

    public static let program = CommandLineProgram(
        name: "bt-pair",
        subcommands: [ListMembersCommand.self, AcceptCommand.self, PairWithCommand.self, DiscoverCommand.self, RemoveCommand.self, ResetIdentityCommand.self],
        defaultSubcommand: ListMembersCommand.self,
        usage: usage,
        failureStatus: { error in error.code == .unknownDevice ? PairExit.notFound : PairExit.failure })
}

extension CommandContext {
    /// A failure the command reports itself: "bt-pair: message" on stderr, then `status`.
    func fail(_ message: String, _ status: Int32) -> Int32 {
        output.message("\(program): \(message)")
        return status
    }
}

/// `--seconds N` (1-30), shared by discover and with.
func parseSeconds(_ text: String) throws(UsageError) -> UInt32 {
    guard let seconds = UInt32(text), (1...30).contains(seconds) else { throw UsageError("--seconds takes 1-30") }
    return seconds
}
