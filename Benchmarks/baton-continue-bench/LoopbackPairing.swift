// SPDX-License-Identifier: GPL-2.0-or-later
import BatonService

/// Pairs two rings of one process over loopback TCP, both sides accepting the code: the
/// benchmark runs two daemons' ring sides in one process. Uses PairingService's package-level
/// acceptPairing and pair (what Manager1.AcceptPairing and Pair call); not in the library.
enum LoopbackPairing {
    struct Failed: Error, Sendable, CustomStringConvertible {
        var description: String
    }

    static func pair(_ a: PairingService, _ b: PairingService, uid: UInt32, timeout: Duration = .seconds(10)) async throws {
        let pathA = try await a.acceptPairing(uid: uid, host: "127.0.0.1")
        guard let waiting = await a.session(pathA), waiting.port > 0 else { throw Failed(description: "no waiting session") }
        let pathB = try await b.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        for (service, path) in [(a, pathA), (b, pathB)] {
            try await wait(timeout) { await service.session(path)?.phase.stateName == "confirming" }
        }
        // Both codes typed, as the two users would: the initiator types the acceptor's code, then
        // the acceptor types the second code the initiator shows.
        guard let code = await a.session(pathA)?.shownCode, !code.isEmpty else { throw Failed(description: "the acceptor shows no code") }
        try await b.confirmCode(pathB, uid: uid, code: code)
        try await wait(timeout) { await b.session(pathB)?.visibleCode.count == 6 }
        guard let second = await b.session(pathB)?.visibleCode else { throw Failed(description: "the initiator shows no second code") }
        try await a.confirmCode(pathA, uid: uid, code: second)
        for (service, path) in [(a, pathA), (b, pathB)] {
            try await wait(timeout) { await service.session(path)?.phase.stateName == "reviewing" }
            try await service.commit(path, uid: uid, accepted: true)
        }
        for (service, path) in [(a, pathA), (b, pathB)] {
            try await wait(timeout) { await service.session(path)?.phase.stateName == "paired" }
        }
    }

    private static func wait(_ timeout: Duration, _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(await condition()) {
            guard ContinuousClock.now < deadline else { throw Failed(description: "pairing did not finish in time") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
