// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import COpenSSL
import Testing

/// Red-team pass on the protocol version of a ring connection (protocol §2.1 "Ring connections",
/// §8.1 ALPN): a client that claims only versions this daemon does not speak. Held: the server
/// aborts the handshake (`no_application_protocol`), so no frame is ever read under a version it
/// cannot parse; a client that offers `baton/1` beside them gets `baton/1` (the only common one).
@Suite("Red team: protocol versions in ALPN")
struct RedTeamVersionALPNTests {
    @Test("A client offering only versions other than baton/1 is refused in the handshake",
          arguments: [["baton/2"], ["baton/2", "baton/0"], ["baton/10", "baton/"], ["BATON/1"]])
    func otherVersionsOnlyAreRefused(offered: [String]) async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let client = try TLSContext(identity: pair.clientIdentity, role: .client)
            let wire = offered.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
            #expect(SSL_CTX_set_alpn_protos(client.pointer, wire, UInt32(wire.count)) == 0)
            let outcome = await runRawClient(port: pair.listener.port, context: RawContext(pointer: client.pointer), verification: HandshakeVerification())
            #expect(outcome == .handshakeRefused)
            #expect(await pair.failures.waitForCount(1) == [.alpnMismatch])
        }
    }
}
