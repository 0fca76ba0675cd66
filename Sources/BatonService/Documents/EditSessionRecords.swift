// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// What `EditSessions` keeps on disk, per local user (the namespace of §6.6 on this machine: a
/// document id means one document of one user; another user's same id is another document).

/// One user's edit sessions: the owner's book and grants, and the user's documents in the order
/// they were last used (oldest first), which is the order records are evicted in.
public struct UserEditSessions: Hashable, Sendable, Codable {
    public var keeper: EditSessionKeeper
    public var lastUsed: [String]

    public init(documentLimit: Int) {
        keeper = EditSessionKeeper(book: EditSessionBook(documentLimit: documentLimit))
        lastUsed = []
    }

    mutating func touch(_ documentID: String) {
        lastUsed.removeAll { $0 == documentID }
        lastUsed.append(documentID)
    }
}

/// The `document-sessions` record, schema 2: each user's sessions by uid (decimal string keys).
/// Schema 1 held one machine-wide `EditSessionKeeper`; it decodes into `droppedLegacy`, which is
/// never written back (its owner cannot be told: see `EditSessions.init`).
public struct EditSessionRecord: Hashable, Sendable, Codable {
    public static let schemaVersion: UInt32 = 2

    public var users: [String: UserEditSessions]
    /// The machine-wide keeper of a schema-1 record, read once to be logged and dropped.
    public private(set) var droppedLegacy: EditSessionKeeper?

    public init(users: [String: UserEditSessions] = [:]) {
        self.users = users
        droppedLegacy = nil
    }

    public func keeper(uid: UInt32) -> EditSessionKeeper? { users[String(uid)]?.keeper }

    private enum CodingKeys: String, CodingKey { case users }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if container.contains(.users) {
            users = try container.decode([String: UserEditSessions].self, forKey: .users)
            droppedLegacy = nil
        } else {
            users = [:]
            droppedLegacy = try EditSessionKeeper(from: decoder)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(users, forKey: .users)
    }
}

/// A claim-journal entry: a `PendingClaim` (same JSON, so older journals read as they are) keyed
/// by its user and document. An entry without a user (journalled before claims were per user)
/// waits for the first user who continues that document from the same member, and becomes theirs.
struct JournalledClaim: Hashable, Sendable, Codable, Identifiable {
    var pending: PendingClaim

    var id: String { (pending.uid.map(String.init) ?? "-") + ":" + pending.claim.documentID }

    init(_ pending: PendingClaim) { self.pending = pending }
    init(from decoder: any Decoder) throws { pending = try PendingClaim(from: decoder) }
    func encode(to encoder: any Encoder) throws { try pending.encode(to: encoder) }
}
