// SPDX-License-Identifier: GPL-2.0-or-later
/// Why bytes are not a JSON document the caller accepts. `offset` counts bytes from the start;
/// `components` name the value being read (`$` is the document, `$.a[2]` the third item of member
/// `a`), kept as a stack while parsing and turned into text only here.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// More bytes than the caller allows.
        case tooLarge(bytes: Int, limit: Int)
        /// Arrays and objects nested deeper than the caller allows.
        case tooDeep(limit: Int)
        /// The document ends inside a value (or is empty).
        case unexpectedEnd
        /// The document ends inside a string.
        case unterminatedString
        /// The document ends inside a `\u` escape.
        case truncatedEscape
        /// A byte that cannot start or continue a value here; `expected` says what could.
        case unexpectedByte(UInt8, expected: Expectation)
        /// Something other than white space after the document.
        case trailingData
        /// A string whose bytes (raw or from escapes) are not valid UTF-8.
        case invalidUTF8
        /// A control character written raw in a string.
        case controlCharacter
        /// A backslash escape JSON does not define.
        case unknownEscape
        /// A `\u` escape with a byte that is not a hex digit.
        case badHexDigit
        /// A `\u` escape of a UTF-16 surrogate that is not half of a high-low pair.
        case loneSurrogate
        /// An object names the same key twice (canonically equivalent strings count as the same key).
        case duplicateKey(String)
        /// A number not following JSON's grammar; `start` is the number's first byte.
        case invalidNumber(NumberProblem, start: Int)
        /// An integer (no fraction or exponent) outside Int64, with typed numbers.
        case integerTooLarge(String)
    }

    public enum Expectation: Sendable, Hashable {
        case value, memberName, colon, commaOrBrace, commaOrBracket
    }

    public enum NumberProblem: Sendable, Hashable {
        case leadingZero, digits, fractionDigits, exponentDigits
    }

    public var kind: Kind
    public var offset: Int
    public var components: [JSONPath.Component]

    public init(_ kind: Kind, offset: Int, components: [JSONPath.Component] = []) {
        self.kind = kind
        self.offset = offset
        self.components = components
    }

    /// The path of the value being read, e.g. `$.pages[2]`.
    public var path: String { JSONPath.text(components) }

    /// What is wrong, in the words the command-line tools print.
    public var problem: String {
        switch kind {
        case .tooLarge(let bytes, let limit): "JSON of \(bytes) bytes, more than the \(limit)-byte limit"
        case .tooDeep(let limit): "nested deeper than \(limit)"
        case .unexpectedEnd: "unexpected end of text"
        case .unterminatedString: "unterminated string"
        case .truncatedEscape: "truncated \\u escape"
        case .unexpectedByte(_, let expected):
            switch expected {
            case .value: "unexpected character"
            case .memberName: "expected a member name"
            case .colon: "expected ':'"
            case .commaOrBrace: "expected ',' or '}'"
            case .commaOrBracket: "expected ',' or ']'"
            }
        case .trailingData: "unexpected text after the value"
        case .invalidUTF8: "string is not valid UTF-8"
        case .controlCharacter: "control character in string"
        case .unknownEscape: "unknown escape"
        case .badHexDigit: "bad hex digit in \\u escape"
        case .loneSurrogate: "unpaired surrogate"
        case .duplicateKey(let key): "duplicate key \(JSONPath.quoted(key))"
        case .invalidNumber(let problem, _):
            switch problem {
            case .leadingZero: "leading zero"
            case .digits: "expected digits"
            case .fractionDigits: "expected digits after '.'"
            case .exponentDigits: "expected exponent digits"
            }
        case .integerTooLarge(let text): "integer \(text) does not fit in 64 bits (write it with a fraction to make it a double)"
        }
    }

    public var description: String { "invalid JSON at \(path) (byte \(offset)): \(problem)" }
}

/// What a caller accepts. The defaults are the command-line tools': typed numbers, nesting up to
/// `JSONValue.maxParseDepth`, no size limit, repeated keys kept (the reader decides).
public struct JSONParseOptions: Sendable {
    public enum Numbers: Sendable {
        /// `integer` (refused when outside Int64) or `double`.
        case typed
        /// `number` with the text, converted later by the reader.
        case exact
    }

    public var depthLimit: Int
    public var sizeLimit: Int
    public var numbers: Numbers
    public var refusesDuplicateKeys: Bool
    /// A leading UTF-8 byte-order mark is skipped (as Foundation's decoder did).
    public var skipsByteOrderMark: Bool

    public init(depthLimit: Int = JSONValue.maxParseDepth, sizeLimit: Int = .max, numbers: Numbers = .typed,
                refusesDuplicateKeys: Bool = false, skipsByteOrderMark: Bool = false) {
        self.depthLimit = depthLimit
        self.sizeLimit = sizeLimit
        self.numbers = numbers
        self.refusesDuplicateKeys = refusesDuplicateKeys
        self.skipsByteOrderMark = skipsByteOrderMark
    }
}
