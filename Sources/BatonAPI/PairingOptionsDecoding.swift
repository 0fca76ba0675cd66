// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonDBus

// The daemon's side of Pairing1's options: the same names and types the client encodes above
// (RingReplies.swift), so both ends share one coding. Refusals never repeat the caller's text.

extension AcceptOptions {
    /// Accept's `a{sv}`: Host (s) or nothing. Another key or type is `invalidArguments`. Whether
    /// Host is a numeric address is the daemon's check.
    public init(_ value: DBusValue) throws(BatonAPIError) {
        let options = try Self.dictionary(value, allowed: ["Host"], method: "Accept")
        self.init(host: try Self.string(options, "Host"))
    }
}

extension PairOptions {
    /// Pair's `a{sv}`: SessionId (s, required) and AddressType (s). Another key or type, or no
    /// SessionId, is `invalidArguments`. Whether they are well formed is the daemon's check.
    public init(_ value: DBusValue) throws(BatonAPIError) {
        let options = try AcceptOptions.dictionary(value, allowed: ["SessionId", "AddressType"], method: "Pair")
        guard let sessionID = try AcceptOptions.string(options, "SessionId") else {
            throw BatonAPIError(.invalidArguments, "SessionId must be 16 hex digits")
        }
        self.init(sessionID: sessionID, addressType: try AcceptOptions.string(options, "AddressType"))
    }
}

extension AcceptOptions {
    static func dictionary(_ value: DBusValue, allowed: Set<String>, method: String) throws(BatonAPIError) -> [String: DBusValue] {
        guard let options = value.asDictionary else { throw BatonAPIError(.invalidArguments, "\(method) options must be a{sv}") }
        guard Set(options.keys).isSubset(of: allowed) else {
            throw BatonAPIError(.invalidArguments, "unknown option (\(method) takes \(allowed.sorted().joined(separator: ", ")))")
        }
        return options
    }

    static func string(_ options: [String: DBusValue], _ key: String) throws(BatonAPIError) -> String? {
        guard let value = options[key] else { return nil }
        guard case .string(let text) = value.unwrapped else { throw BatonAPIError(.invalidArguments, "\(key) must be a string") }
        return text
    }
}
