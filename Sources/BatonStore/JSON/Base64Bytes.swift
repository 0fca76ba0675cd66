// SPDX-License-Identifier: GPL-2.0-or-later
/// Bytes kept in a record as one base64 string (RFC 4648 alphabet, with padding): how Foundation's
/// `JSONEncoder` wrote a `Data` property, so records that held `Data` keep their bytes on disk.
/// Decoding is as strict as Foundation's was: no white space, padding required.
public struct Base64Bytes: Hashable, Sendable, Codable {
    public var bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let bytes = Self.decode(try container.decode(String.self)) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Encountered Data is not valid Base64.")
        }
        self.bytes = bytes
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Self.encode(bytes))
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let remaining = bytes.count - index
            let first = bytes[index]
            let second = remaining > 1 ? bytes[index + 1] : 0
            let third = remaining > 2 ? bytes[index + 2] : 0
            out.append(alphabet[Int(first >> 2)])
            out.append(alphabet[Int((first & 0x03) << 4 | second >> 4)])
            out.append(remaining > 1 ? alphabet[Int((second & 0x0F) << 2 | third >> 6)] : UInt8(ascii: "="))
            out.append(remaining > 2 ? alphabet[Int(third & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil unless `text` is whole groups of four alphabet characters, "=" only as the last one or two.
    static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(characters.count / 4 * 3)
        var group = 0
        while group < characters.count {
            let isLast = group + 4 == characters.count
            var values: [UInt8] = [0, 0, 0, 0]
            var padding = 0
            for position in 0..<4 {
                let character = characters[group + position]
                if character == UInt8(ascii: "=") {
                    // Only in the last group's last two places, and nothing but "=" after it.
                    guard isLast, position >= 2 else { return nil }
                    padding += 1
                    continue
                }
                guard padding == 0, let value = sextet(character) else { return nil }
                values[position] = value
            }
            out.append(values[0] << 2 | values[1] >> 4)
            if padding < 2 { out.append(values[1] << 4 | values[2] >> 2) }
            if padding < 1 { out.append(values[2] << 6 | values[3]) }
            group += 4
        }
        return out
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
