// SPDX-License-Identifier: GPL-2.0-or-later

/// What `baton continue` is given: a suggestion's object path, or the ring member it comes from
/// (its name as `bt-pair list` and `baton suggestions` show it, or its device id). Pure, so the
/// choice among namesakes is tested without a daemon.
public enum SuggestionSelector: Equatable, Sendable {
    case path(String)
    case member(String)

    /// A suggestion as the selector needs to see it.
    public struct Candidate: Equatable, Sendable {
        public var path: String
        public var device: String
        public var deviceName: String
        public var activityType: String
        public init(path: String, device: String, deviceName: String, activityType: String) {
            self.path = path
            self.device = device
            self.deviceName = deviceName
            self.activityType = activityType
        }
    }

    /// A path when the argument starts with "/" (then it must be a valid object path), else a member.
    public init(parsing argument: String) throws(UsageError) {
        if argument.hasPrefix("/") {
            guard Self.isValidObjectPath(argument) else { throw UsageError("\(argument) is not a D-Bus object path") }
            self = .path(argument)
        } else {
            guard !argument.isEmpty else { throw UsageError("SUGGESTION is empty: give a member's name or a suggestion's path") }
            self = .member(argument)
        }
    }

    /// The path of the one suggestion meant, or a sentence saying why there is none.
    /// A member is matched by device id, then by exact name, then by name ignoring case; two
    /// members of one name are refused with each one's id and path.
    public func resolve(among candidates: [Candidate]) -> Result<String, Refusal> {
        switch self {
        case .path(let path): return .success(path)
        case .member(let member):
            var matches = candidates.filter { $0.device == member }
            if matches.isEmpty { matches = candidates.filter { $0.deviceName == member } }
            if matches.isEmpty { matches = candidates.filter { $0.deviceName.lowercased() == member.lowercased() } }
            if matches.count == 1 { return .success(matches[0].path) }
            if matches.isEmpty {
                let offered = Set(candidates.map(\.deviceName)).sorted()
                let known = offered.isEmpty ? "there are no suggestions now" : "suggestions now come from " + offered.joined(separator: ", ")
                return .failure(Refusal(message: "no suggestion from \(member): \(known) (`baton suggestions` lists them; bring the machines near and publish something there)"))
            }
            let list = matches.sorted { $0.path < $1.path }
                .map { "\($0.deviceName) (device \($0.device), \($0.activityType)): \($0.path)" }.joined(separator: "; ")
            return .failure(Refusal(message: "\(matches.count) suggestions from members named \(member): \(list); give the device id or the path"))
        }
    }

    public struct Refusal: Error, Equatable, Sendable {
        public var message: String
    }

    /// "/" or "/" followed by non-empty elements of [A-Za-z0-9_] separated by "/".
    public static func isValidObjectPath(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        if path == "/" { return true }
        return path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).allSatisfy { element in
            !element.isEmpty && element.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_"
            }
        }
    }
}
