// SPDX-License-Identifier: LGPL-2.1-or-later
/// The edit-session frames (§6.6): a receiver claims a document's edit session from the machine
/// that owns it, naming the revision of its own copy; the owner saves, releases and answers with
/// the revision the claimer takes the session at.

/// A document revision (§6.6): the owner's counter of saved snapshots of one document, and the
/// digest of that snapshot. Revision 0 means "no copy".
public struct DocumentRevision: Hashable, Sendable, Codable {
    public var revision: UInt64
    public var digest: [UInt8]

    public init(revision: UInt64, digest: [UInt8]) throws(WireError) {
        guard digest.count == 32 else { throw .malformed("digest length") }
        guard revision > 0 else { throw .malformed("revision 0") }
        self.revision = revision
        self.digest = digest
    }
}

/// ClaimEditSession (0x0A, §6.6): document id and the revision of the claimer's copy (0: none).
public struct EditSessionClaim: Hashable, Sendable, Codable {
    public static let maxByteCount = 1 + DocumentInfo.maxTextBytes + 8

    public var documentID: String
    public var baseRevision: UInt64

    public init(documentID: String, baseRevision: UInt64) throws(WireError) {
        try DocumentInfo.checkText(documentID, "document id")
        self.documentID = documentID
        self.baseRevision = baseRevision
    }

    public var payload: [UInt8] {
        var out: [UInt8] = [UInt8(documentID.utf8.count)]
        out.append(contentsOf: documentID.utf8)
        out.appendBigEndian(baseRevision)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let length = Int(try reader.readByte())
        guard let text = String(validating: try reader.readBytes(length), as: UTF8.self) else { throw .malformed("text not UTF-8") }
        let base = try reader.readUInt64()
        try reader.expectEnd()
        try self.init(documentID: text, baseRevision: base)
    }
}

/// EditSessionGrant (0x0B, §6.6): the revision and digest of the snapshot the owner saved before it
/// released the session. The claimer owns the session from this revision once it holds that snapshot.
public struct EditSessionGrant: Hashable, Sendable, Codable {
    public static let byteCount = 8 + 32

    public var granted: DocumentRevision

    public init(granted: DocumentRevision) { self.granted = granted }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(granted.revision)
        out.append(contentsOf: granted.digest)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let revision = try reader.readUInt64()
        let digest = try reader.readBytes(32)
        try reader.expectEnd()
        granted = try DocumentRevision(revision: revision, digest: digest)
    }
}
