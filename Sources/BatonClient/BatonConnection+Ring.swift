// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonDBus

/// Ring1 and Pairing1 at /org/baton/ring, and the PairingSession1 objects they create.
extension BatonConnection {
    /// Ring1.DumpRadio: every advertiser the daemon heard, as a table ("text") or JSON Lines ("json").
    public func dumpRadio(format: String) async throws(BatonClientError) -> String {
        let reply = try await callRing(BatonInterface.ring, "DumpRadio", [.string(format)])
        guard let text = reply.first?.stringValue else { throw .unexpectedReply("DumpRadio returned \(reply.map(\.signature))") }
        return text
    }

    /// Ring1.GetRadioNotices: what happened to the radio lately (restarts, power, refusals).
    public func radioNotices() async throws(BatonClientError) -> [String] {
        let reply = try await callRing(BatonInterface.ring, "GetRadioNotices")
        return reply.first?.stringArrayValue ?? []
    }

    /// Ring1.ListMembers: the machines of this ring, this one included.
    public func ringMembers() async throws(BatonClientError) -> [RingMember] {
        let reply = try await callRing(BatonInterface.ring, "ListMembers")
        return try decoding { () throws(BatonAPIError) in try RingMember.list(reply) }
    }

    /// Ring1.Continue: fetch `type` from the member `device` (name, short id or device id) and hand
    /// it to a local handler; returns the outcome ("delivered", "declined", ...).
    public func continueFromMember(_ device: String, type: String) async throws(BatonClientError) -> String {
        let reply = try await callRing(BatonInterface.ring, "Continue", [.string(device), .string(type)])
        guard let outcome = reply.first?.stringValue else { throw .unexpectedReply("Continue returned \(reply.map(\.signature))") }
        return outcome
    }

    // MARK: Pairing

    /// Pairing1.Accept: waits (in the daemon) for another machine to pair; returns the session path.
    public func acceptPairing(_ options: AcceptOptions = AcceptOptions()) async throws(BatonClientError) -> String {
        let reply = try await callRing(BatonInterface.pairing, "Accept", [options.dbusValue])
        return try sessionPath(reply, "Accept")
    }

    /// Pairing1.Pair with HOST:PORT or ble:ADDRESS/PSM; returns the session path once connected.
    /// How long Pair may take: connecting (TCP, or L2CAP dials within the daemon's dial budget) comes first.
    public static let pairTimeout: Duration = .seconds(40)

    public func pair(with target: String, options: PairOptions) async throws(BatonClientError) -> String {
        let reply = try await callRing(BatonInterface.pairing, "Pair", [.string(target), options.dbusValue], timeout: Self.pairTimeout)
        return try sessionPath(reply, "Pair")
    }

    /// Pairing1.Remove: removes a member (name, short id or device id); the others re-key. With
    /// `withIntroduced` (Pairing1.RemoveWithIntroduced) one signed mark also removes what it
    /// introduced, now and later.
    public func removeMember(_ device: String, withIntroduced: Bool = false) async throws(BatonClientError) {
        _ = try await callRing(BatonInterface.pairing, withIntroduced ? "RemoveWithIntroduced" : "Remove", [.string(device)])
    }

    /// Pairing1.ResetIdentity: this machine leaves its ring and takes a new identity (a new device
    /// id, a ring of one); returns the new device id. Nothing tells the other members: their owner
    /// removes the old id there (`removeMember`), then pairs this machine again. Refused (notReady)
    /// while a pairing session is open, and without the pairing privilege.
    public func resetIdentity() async throws(BatonClientError) -> String {
        let reply = try await callRing(BatonInterface.pairing, "ResetIdentity")
        guard let device = reply.first?.stringValue else { throw .unexpectedReply("ResetIdentity returned \(reply.map(\.signature))") }
        return device
    }

    /// Pairing1.ListIntroduced: the members removing `device` with what it introduced takes out now.
    public func introducedMembers(_ device: String) async throws(BatonClientError) -> [RingMember] {
        let reply = try await callRing(BatonInterface.pairing, "ListIntroduced", [.string(device)])
        return try decoding { () throws(BatonAPIError) in try RingMember.list(reply) }
    }

    /// Pairing1.Discover: machines waiting in Accept, browsed for `seconds` (1-30).
    public func discoverPairing(seconds: UInt32) async throws(BatonClientError) -> [PairingEndpoint] {
        let reply = try await callRing(BatonInterface.pairing, "Discover", [.uint32(seconds)], timeout: .seconds(Int(seconds) + 25))
        return try decoding { () throws(BatonAPIError) in try PairingEndpoint.list(reply) }
    }

    /// The properties of a PairingSession1 object.
    public func pairingSession(at path: String) async throws(BatonClientError) -> PairingSessionProperties {
        let properties = try await properties(of: path, interface: BatonInterface.pairingSession)
        return try decoding { () throws(BatonAPIError) in try PairingSessionProperties(properties) }
    }

    /// PairingSession1.Confirm: this side's answer to the code.
    public func confirmPairing(at path: String, accepted: Bool) async throws(BatonClientError) {
        _ = try await call(path: path, interface: BatonInterface.pairingSession, method: "Confirm", arguments: [.boolean(accepted)])
    }

    /// PairingSession1.ConfirmCode: the initiator's user typed the code the acceptor shows.
    public func confirmPairingCode(at path: String, code: String) async throws(BatonClientError) {
        _ = try await call(path: path, interface: BatonInterface.pairingSession, method: "ConfirmCode", arguments: [.string(code)])
    }

    /// PairingSession1.Commit: merge the members shown while reviewing.
    public func commitPairing(at path: String) async throws(BatonClientError) {
        _ = try await call(path: path, interface: BatonInterface.pairingSession, method: "Commit")
    }

    /// PairingSession1.Cancel.
    public func cancelPairing(at path: String) async throws(BatonClientError) {
        _ = try await call(path: path, interface: BatonInterface.pairingSession, method: "Cancel")
    }

    private func callRing(_ interface: String, _ method: String, _ arguments: [DBusValue] = [],
                          timeout: Duration? = nil) async throws(BatonClientError) -> [DBusValue] {
        try await call(path: BatonObjectPath.ring, interface: interface, method: method, arguments: arguments, timeout: timeout)
    }

    private func sessionPath(_ reply: [DBusValue], _ method: String) throws(BatonClientError) -> String {
        guard let path = reply.first?.objectPathValue else { throw .unexpectedReply("\(method) returned \(reply.map(\.signature))") }
        return path
    }
}
