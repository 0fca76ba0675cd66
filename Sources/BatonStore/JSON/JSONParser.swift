// SPDX-License-Identifier: GPL-2.0-or-later
import BatonJSON

/// The state directory's use of BatonJSON's parser, which is hostile ground: every way a document
/// can be wrong is a `JSONFormatError`, never a trap, and work is bounded by the input's size and
/// the nesting limit.
///
/// Rules beyond the grammar, chosen so one file has exactly one meaning:
/// - UTF-8 only (a leading byte-order mark is skipped, as Foundation's decoder did); invalid UTF-8
///   in a string, raw or produced by escapes, is refused, and so is a `\u` surrogate that is not
///   half of a high-low pair.
/// - An object that repeats a key is refused (Foundation kept the first silently): the files this
///   store writes never repeat one, so a repeat means tampering or damage.
/// - Nothing but white space may follow the document.
/// - Numbers are kept as their text (`JSONValue.number`), converted once by `JSONValueDecoder`.
enum JSONParser {
    /// Deep enough for every record the daemon keeps (about a dozen levels), shallow enough that the
    /// recursion stays far from any thread's stack limit.
    static let defaultDepthLimit = 128
    /// The state directory's file limit (`StateDirectory.maximumFileSize`; a test keeps them equal).
    static let defaultSizeLimit = 16 * 1024 * 1024

    /// Parses one whole document.
    static func parse(_ bytes: [UInt8], depthLimit: Int = defaultDepthLimit,
                      sizeLimit: Int = defaultSizeLimit) throws(JSONFormatError) -> JSONValue {
        let options = JSONParseOptions(depthLimit: depthLimit, sizeLimit: sizeLimit, numbers: .exact,
                                       refusesDuplicateKeys: true, skipsByteOrderMark: true)
        do {
            return try JSONValue.parse(bytes, options: options)
        } catch {
            throw JSONFormatError(error)
        }
    }
}
