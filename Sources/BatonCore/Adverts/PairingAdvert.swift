// SPDX-License-Identifier: LGPL-2.1-or-later
/// The clear advert of a device waiting in `bt-pair accept` (§5).
public struct PairingAdvert: Hashable, Sendable {
    public static let nameBytes = 12
    public var sessionID: [UInt8]
    public var tcpPublished: Bool
    public var psm: UInt16?
    public var name: String

    public init(sessionID: [UInt8], tcpPublished: Bool, psm: UInt16?, name: String) throws(WireError) {
        guard sessionID.count == 8 else { throw .malformed("session id length") }
        if let psm { guard (0x80...0xFF).contains(psm) else { throw .malformed("psm") } }
        self.sessionID = sessionID
        self.tcpPublished = tcpPublished
        self.psm = psm
        self.name = Self.truncated(name)
    }

    /// Cuts a name to 12 UTF-8 bytes at a character boundary.
    static func truncated(_ name: String) -> String {
        var out = ""
        for character in name {
            if out.utf8.count + String(character).utf8.count > nameBytes { break }
            out.append(character)
        }
        return out
    }

    public var encoded: [UInt8] {
        var out: [UInt8] = [AdvertKind.pairing.headerByte]
        out.append(contentsOf: sessionID)
        out.append((tcpPublished ? 1 : 0) | (psm != nil ? 2 : 0))
        out.appendBigEndian(psm ?? 0)
        var nameField = Array(name.utf8)
        nameField += [UInt8](repeating: 0, count: Self.nameBytes - nameField.count)
        out.append(contentsOf: nameField)
        return out
    }

    public init(decoding advert: [UInt8]) throws(WireError) {
        guard try AdvertKind.classify(advert) == .pairing else { throw .unknownKind(advert[0] & 0x0F) }
        var reader = ByteReader(advert, from: 1)
        let session = try reader.readBytes(8)
        let flags = try reader.readByte()
        let psm = try reader.readUInt16()
        var nameField = try reader.readBytes(Self.nameBytes)
        while nameField.last == 0 { nameField.removeLast() }
        guard let name = String(validating: nameField, as: UTF8.self), !nameField.contains(0) else { throw .malformed("name") }
        let hasPSM = flags & 2 != 0
        if hasPSM != (psm != 0) { throw .malformed("psm") }
        try self.init(sessionID: session, tcpPublished: flags & 1 != 0, psm: hasPSM ? psm : nil, name: name)
    }
}
