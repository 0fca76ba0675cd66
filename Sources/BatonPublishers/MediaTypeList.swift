// SPDX-License-Identifier: GPL-2.0-or-later
/// Media types as the recent publisher's setting takes them: `type/subtype` tokens only (RFC 6838
/// restricted names, no parameters, no wildcards), compared in lower case as the recent list writes them.
public enum MediaTypeList {
    public struct Invalid: Error, Equatable, Sendable, CustomStringConvertible {
        /// The offending token; empty when no type was given at all.
        public var token: String
        public init(token: String) { self.token = token }
        public var description: String {
            token.isEmpty ? "no media type given" : "\(token) is not a media type (type/subtype, e.g. application/pdf)"
        }
    }

    /// Types separated by `;`, `,` or white space, across any number of arguments; duplicates once,
    /// in the order given. At least one is needed.
    public static func parse(_ arguments: [String]) throws(Invalid) -> [String] {
        var types: [String] = []
        for argument in arguments {
            for token in argument.split(whereSeparator: { $0 == ";" || $0 == "," || $0.isWhitespace }) {
                let type = token.lowercased()
                guard isMediaType(type) else { throw Invalid(token: String(token)) }
                if !types.contains(type) { types.append(type) }
            }
        }
        guard !types.isEmpty else { throw Invalid(token: "") }
        return types
    }

    /// `type/subtype`, each 1–127 characters: a letter or digit, then letters, digits and ! # $ & - ^ _ . +
    public static func isMediaType(_ text: String) -> Bool {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy(isRestrictedName)
    }

    private static func isRestrictedName(_ name: Substring) -> Bool {
        guard (1...127).contains(name.utf8.count), let first = name.unicodeScalars.first, isAlphanumeric(first) else { return false }
        return name.unicodeScalars.allSatisfy { isAlphanumeric($0) || "!#$&-^_.+".unicodeScalars.contains($0) }
    }

    private static func isAlphanumeric(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
    }
}

extension PublisherSettings {
    /// Office documents, PDF, plain text, EPUB and common images (docs/publishers.md).
    public static let defaultRecentMediaTypes: Set<String> = [
        "application/pdf", "text/plain", "text/markdown", "application/rtf",
        "application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.spreadsheet",
        "application/vnd.oasis.opendocument.presentation", "application/vnd.oasis.opendocument.graphics",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
        "image/png", "image/jpeg", "image/svg+xml", "application/epub+zip",
    ]
}
