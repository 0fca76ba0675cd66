// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import Foundation
import Testing
@testable import BatonService

/// Red-team attacks on pairing sessions and the state directory, formed from the docs alone
/// (security.md "pairing-time man in the middle", "another local Unix user", "Key storage at rest")
/// and run against real PairingService/RingService nodes over loopback TCP.
@Suite("BatonServiceTests: red team, pairing and local users", .serialized)
struct RedTeamPairingTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-\(UUID().uuidString)")
    let uid = getuid()
    let otherUID: UInt32 = 65_534

    func finished(_ pairing: PairingService, _ path: String) async -> PairingPhase? {
        _ = await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.isFinished == true }
        return await pairing.session(path)?.phase
    }

    /// Attack: an initiator arrives while the acceptor's user is reviewing the members of a session
    /// whose codes both users typed. The acceptor stopped listening when its user typed the second
    /// code (protocol §7.2 "What the users do"), so the late one reaches nothing and joins nothing;
    /// the session both users confirmed completes.
    @Test func aSecondInitiatorDuringReviewCannotJoinAndMergesNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let m = try await BusLessNode.start(in: directory, name: "mallory")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        let target = "127.0.0.1:\(waiting.port)"
        let pathB = try await b.pairing.pair(uid: uid, target: target, sessionID: waiting.sessionID, addressType: nil)
        #expect(await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.stateName == "confirming" })
        let code = try #require(await a.pairing.session(pathA)?.shownCode)
        try await b.pairing.confirmCode(pathB, uid: uid, code: code)
        #expect(await eventually(timeout: .seconds(10)) { await b.pairing.session(pathB)?.visibleCode.count == 6 })
        try await a.pairing.confirmCode(pathA, uid: uid, code: try #require(await b.pairing.session(pathB)?.visibleCode))
        #expect(await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.stateName == "reviewing" })
        // Past its user's typing the acceptor no longer listens: mallory's dial is refused or
        // fails. Should it still reach a listener, the session fails as contested; either way
        // nothing of mallory (or, if contested, of beta) merges.
        // mallory connects with the session id (the pairing advert shows it in clear).
        let pathM = try? await m.pairing.pair(uid: uid, target: target, sessionID: waiting.sessionID, addressType: nil)
        if let pathM { #expect(await finished(m.pairing, pathM)?.stateName == "failed") }
        #expect(await a.pairing.session(pathA)?.phase != .failed(.contested))
        #expect(await m.ring.snapshot().roster.members.count == 1)
        try await a.pairing.commit(pathA, uid: uid, accepted: true)
        #expect(await finished(a.pairing, pathA)?.stateName == "paired")
        let members = await a.ring.snapshot().roster.members.values.map(\.name)
        #expect(Set(members) == ["alpha", "beta"])
        await a.stop()
        await b.stop()
        await m.stop()
    }

    /// Attack: another local account (uid 65534) answers a session it did not start: types the code,
    /// confirms, commits the review or cancels. dbus-api.md: "Only the Unix user that started the
    /// session (or root) may call its methods" (the daemon checks, a bus without the policy too).
    @Test func anotherUserCannotAnswerCommitOrCancelSomeoneElsesSession() async throws {
        try #require(uid == 0, "runs as root (CI does): root may answer any session, so the owner must be root")
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        let pathB = try await b.pairing.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        // Each side reaches a phase on its own (under load beta can lag alpha); the waits end as soon as it does.
        #expect(await eventually(timeout: .seconds(30)) { await a.pairing.session(pathA)?.phase.stateName == "confirming" })
        #expect(await eventually(timeout: .seconds(30)) { await b.pairing.session(pathB)?.phase.stateName == "confirming" })
        let code = try #require(await a.pairing.session(pathA)?.shownCode)
        await #expect(throws: ServiceFailure.self) { try await a.pairing.confirm(pathA, uid: otherUID, accepted: false) }
        await #expect(throws: ServiceFailure.self) { try await b.pairing.confirmCode(pathB, uid: otherUID, code: code) }
        await #expect(throws: ServiceFailure.self) { try await a.pairing.cancel(pathA, uid: otherUID) }
        #expect(await a.pairing.session(pathA)?.phase.stateName == "confirming")
        try await b.pairing.confirmCode(pathB, uid: uid, code: code)
        #expect(await eventually(timeout: .seconds(30)) { await b.pairing.session(pathB)?.visibleCode.count == 6 })
        let second = try #require(await b.pairing.session(pathB)?.visibleCode)
        await #expect(throws: ServiceFailure.self) { try await a.pairing.confirmCode(pathA, uid: otherUID, code: second) }
        try await a.pairing.confirmCode(pathA, uid: uid, code: second)
        #expect(await eventually(timeout: .seconds(30)) { await a.pairing.session(pathA)?.phase.stateName == "reviewing" })
        #expect(await eventually(timeout: .seconds(30)) { await b.pairing.session(pathB)?.phase.stateName == "reviewing" })
        await #expect(throws: ServiceFailure.self) { try await a.pairing.commit(pathA, uid: otherUID, accepted: true) }
        await #expect(throws: ServiceFailure.self) { try await a.pairing.cancel(pathA, uid: otherUID) }
        #expect(await a.ring.snapshot().roster.members.count == 1)
        try await a.pairing.commit(pathA, uid: uid, accepted: true)
        try await b.pairing.commit(pathB, uid: uid, accepted: true)
        #expect(await finished(a.pairing, pathA)?.stateName == "paired")
        #expect(await a.ring.snapshot().roster.members.count == 2)
        await a.stop()
        await b.stop()
    }

    /// Attack: a LAN stranger writes a pairing frame header announcing a huge payload, then junk,
    /// to a waiting acceptor's port. The acceptor must not buffer it (the limit is checked first,
    /// protocol §6.1), must stay up, and must pair normally afterwards.
    @Test func junkAndAHugeLengthOnThePairingPortNeitherBufferNorBreakTheAcceptor() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        // PairCommit (0x20) claiming 2³¹ bytes, then a little of it.
        let header: [UInt8] = [1, 0x20, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0] + [UInt8](repeating: 0x41, count: 4096)
        let sent = try await RawTCPFake.sendOffThePool(header, toPort: Int(waiting.port), readTimeoutSeconds: 30)
        // The acceptor closed the connection (it read no payload) rather than wait for 2 GiB.
        #expect(sent.closedByPeer)
        _ = await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.isWaiting == false }
        _ = try? await a.pairing.cancel(pathA, uid: uid)
        // A fresh session pairs as usual.
        let (pathA2, _) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await finished(a.pairing, pathA2)?.stateName == "paired")
        await a.stop()
        await b.stop()
    }

    /// Attack (stranger on the radio or LAN): link two `bt-pair accept` runs of one machine by the
    /// pairing session id (in clear in the advert and the `_baton-pair._tcp` TXT) or the port.
    @Test func everyAcceptHasAFreshSessionID() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        var seen: Set<[UInt8]> = []
        for _ in 0..<3 {
            let path = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
            let waiting = try #require(await a.pairing.session(path))
            #expect(waiting.sessionID.count == 8)
            #expect(seen.insert(waiting.sessionID).inserted)
            try await a.pairing.cancel(path, uid: uid)
        }
        await a.stop()
    }

    /// Attack: another local user reads the state directory (identity seed, every member's key of
    /// today). security.md: "The state directory (0700, files 0600, owned by the daemon's user)".
    @Test func nothingInTheStateDirectoryIsReadableByOtherUsersAfterPairing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, _) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await finished(a.pairing, pathA)?.stateName == "paired")
        await a.stop()
        await b.stop()
        for name in ["alpha", "beta"] {
            let root = directory.appendingPathComponent(name).path
            var paths = [root]
            if let enumerator = FileManager.default.enumerator(atPath: root) {
                for case let relative as String in enumerator { paths.append(root + "/" + relative) }
            }
            #expect(paths.count > 1, "the state directory holds files")
            for path in paths {
                var info = stat()
                #expect(lstat(path, &info) == 0)
                #expect(info.st_mode & 0o077 == 0, "\(path) is mode \(String(info.st_mode & 0o777, radix: 8))")
                #expect(info.st_uid == getuid())
            }
        }
    }
}

/// A bare TCP client standing in for a LAN stranger: a fake peer, not a Baton implementation.
enum RawTCPFake {
    struct Outcome: Sendable { var closedByPeer: Bool; var received: [UInt8] }

    /// `send` on a thread of its own: its blocking reads must not hold one of the few threads of
    /// Swift's cooperative pool, which the daemon's actors (and other suites) run on.
    static func sendOffThePool(_ bytes: [UInt8], toPort port: Int, readTimeoutSeconds: Int) async throws -> Outcome {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try send(bytes, toPort: port, readTimeoutSeconds: readTimeoutSeconds) })
            }
        }
    }

    static func send(_ bytes: [UInt8], toPort port: Int, readTimeoutSeconds: Int) throws -> Outcome {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: readTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += buffer[0..<count]; continue }
            // 0: orderly close; -1 with ECONNRESET: closed with data unread; a timeout: still open.
            return Outcome(closedByPeer: count == 0 || errno == ECONNRESET, received: received)
        }
    }
}
