// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonDBus

/// Ring1 and Pairing1 at /org/baton/ring, and the PairingSession1 objects they create.
extension BatonConnection {
    /// Ring1.DumpRadio: every advertiser the daemon heard, as a table ("text") or JSON Lines ("json").
    public func dumpRadio(format: String) async throws(BatonClientError) -> String {
        try await call(OrgBaton.Ring1.dumpRadio, at: BatonObjectPath.ring, format)
    }

    /// Ring1.GetRadioNotices: what happened to the radio lately (restarts, power, refusals).
    public func radioNotices() async throws(BatonClientError) -> [String] {
        let reply = try await invoke(OrgBaton.Ring1.getRadioNotices, at: BatonObjectPath.ring)
        return reply.first?.stringArrayValue ?? []
    }

    /// Ring1.ListMembers: the machines of this ring, this one included.
    public func ringMembers() async throws(BatonClientError) -> [RingMember] {
        try await call(OrgBaton.Ring1.listMembers, at: BatonObjectPath.ring)
    }

    /// Ring1.Continue: fetch `type` from the member `device` (name, short id or device id) and hand
    /// it to a local handler; returns the outcome ("delivered", "declined", ...).
    public func continueFromMember(_ device: String, type: String) async throws(BatonClientError) -> String {
        try await call(OrgBaton.Ring1.continue, at: BatonObjectPath.ring, (device, type))
    }

    // MARK: Pairing

    /// Pairing1.Accept: waits (in the daemon) for another machine to pair; returns the session path.
    public func acceptPairing(_ options: AcceptOptions = AcceptOptions()) async throws(BatonClientError) -> String {
        try await call(OrgBaton.Pairing1.accept, at: BatonObjectPath.ring, options)
    }

    /// Pairing1.Pair with HOST:PORT or ble:ADDRESS/PSM; returns the session path once connected.
    /// How long Pair may take: connecting (TCP, or L2CAP dials within the daemon's dial budget) comes first.
    public static let pairTimeout: Duration = .seconds(40)

    public func pair(with target: String, options: PairOptions) async throws(BatonClientError) -> String {
        try await call(OrgBaton.Pairing1.pair, at: BatonObjectPath.ring, (target, options), timeout: Self.pairTimeout)
    }

    /// Pairing1.Remove: removes a member (name, short id or device id); the others re-key. With
    /// `withIntroduced` (Pairing1.RemoveWithIntroduced) one signed mark also removes what it
    /// introduced, now and later.
    public func removeMember(_ device: String, withIntroduced: Bool = false) async throws(BatonClientError) {
        try await call(withIntroduced ? OrgBaton.Pairing1.removeWithIntroduced : OrgBaton.Pairing1.remove, at: BatonObjectPath.ring, device)
    }

    /// Pairing1.ResetIdentity: this machine leaves its ring and takes a new identity (a new device
    /// id, a ring of one); returns the new device id. Nothing tells the other members: their owner
    /// removes the old id there (`removeMember`), then pairs this machine again. Refused (notReady)
    /// while a pairing session is open, and without the pairing privilege.
    public func resetIdentity() async throws(BatonClientError) -> String {
        try await call(OrgBaton.Pairing1.resetIdentity, at: BatonObjectPath.ring)
    }

    /// Pairing1.ListIntroduced: the members removing `device` with what it introduced takes out now.
    public func introducedMembers(_ device: String) async throws(BatonClientError) -> [RingMember] {
        try await call(OrgBaton.Pairing1.listIntroduced, at: BatonObjectPath.ring, device)
    }

    /// Pairing1.Discover: machines waiting in Accept, browsed for `seconds` (1-30).
    public func discoverPairing(seconds: UInt32) async throws(BatonClientError) -> [PairingEndpoint] {
        try await call(OrgBaton.Pairing1.discover, at: BatonObjectPath.ring, seconds, timeout: .seconds(Int(seconds) + 25))
    }

    /// The properties of a PairingSession1 object.
    public func pairingSession(at path: String) async throws(BatonClientError) -> PairingSessionProperties {
        let properties = try await properties(of: path, interface: BatonInterface.pairingSession)
        return try decoding { () throws(BatonAPIError) in try PairingSessionProperties(properties) }
    }

    /// PairingSession1.Confirm: this side's answer to the code.
    public func confirmPairing(at path: String, accepted: Bool) async throws(BatonClientError) {
        try await call(OrgBaton.PairingSession1.confirm, at: path, accepted)
    }

    /// PairingSession1.ConfirmCode: the initiator's user typed the code the acceptor shows.
    public func confirmPairingCode(at path: String, code: String) async throws(BatonClientError) {
        try await call(OrgBaton.PairingSession1.confirmCode, at: path, code)
    }

    /// PairingSession1.Commit: merge the members shown while reviewing.
    public func commitPairing(at path: String) async throws(BatonClientError) {
        try await call(OrgBaton.PairingSession1.commit, at: path)
    }

    /// PairingSession1.Cancel.
    public func cancelPairing(at path: String) async throws(BatonClientError) {
        try await call(OrgBaton.PairingSession1.cancel, at: path)
    }

}
