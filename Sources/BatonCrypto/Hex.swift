// SPDX-License-Identifier: LGPL-2.1-or-later
extension Array where Element == UInt8 {
    /// Parses hexadecimal text (either case, no separators). Nil when the text is not an even number of hex digits.
    public init?(hex: String) {
        let digits = hex.utf8
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var highNibble: UInt8?
        for digit in digits {
            guard let value = hexDigitValue(digit) else { return nil }
            if let high = highNibble {
                bytes.append(high << 4 | value)
                highNibble = nil
            } else {
                highNibble = value
            }
        }
        self = bytes
    }

    /// Lowercase hexadecimal text, two digits per byte.
    public var hexString: String {
        let alphabet = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(count * 2)
        for byte in self {
            text.append(alphabet[Int(byte >> 4)])
            text.append(alphabet[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

private func hexDigitValue(_ character: UInt8) -> UInt8? {
    switch character {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
    default: nil
    }
}
