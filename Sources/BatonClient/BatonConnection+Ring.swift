import BatonDBus

extension BatonConnection {
    static let ringPath = "/org/baton/ring"
    static let ringInterface = "org.baton.Ring1"

    /// Ring1.DumpRadio: every advertiser the daemon heard, as a table ("text") or JSON Lines ("json").
    public func dumpRadio(format: String) async throws(BatonClientError) -> String {
        let reply = try await call(path: Self.ringPath, interface: Self.ringInterface, method: "DumpRadio", arguments: [.string(format)])
        guard let text = reply.first?.stringValue else { throw .unexpectedReply("DumpRadio returned \(reply.map(\.signature))") }
        return text
    }

    /// Ring1.GetRadioNotices: what happened to the radio lately (restarts, power, refusals).
    public func radioNotices() async throws(BatonClientError) -> [String] {
        let reply = try await call(path: Self.ringPath, interface: Self.ringInterface, method: "GetRadioNotices")
        return reply.first?.stringArrayValue ?? []
    }
}
