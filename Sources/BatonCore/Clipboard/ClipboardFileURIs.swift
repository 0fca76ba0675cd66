// SPDX-License-Identifier: LGPL-2.1-or-later
/// The two ways desktop apps put files on the clipboard, both ways: `text/uri-list` (RFC 2483) and
/// `x-special/gnome-copied-files` (GNOME Files, Nemo, Caja, Thunar and others: `copy` or `cut`, then
/// one URI a line). Paths are bytes, as Linux keeps them. Pure (docs/clipboard.md, "Files").
public enum ClipboardFileURIs {
    public static let uriListType = "text/uri-list"
    public static let gnomeCopiedFilesType = "x-special/gnome-copied-files"
    /// The types a copy of files is offered under on the receiving side, in the order of preference.
    public static let pasteTypes = [uriListType, gnomeCopiedFilesType]
    /// The most of either list read from the app that copied (256 paths of 4 KiB each).
    public static let maxListBytes = 1 << 20

    /// What a copy's list names.
    public struct Selection: Hashable, Sendable {
        /// The local paths of its `file:` URIs, in order.
        public var paths: [[UInt8]]
        /// URIs that name no local file (`http:` and the like, a `file:` URI of another host).
        public var otherURIs: [String]
        /// The app marked the copy a cut (`x-special/gnome-copied-files`); it is shared as a copy.
        public var cut: Bool
    }

    /// The URIs of a `text/uri-list`: lines ended by CRLF (LF alone is taken too), `#` lines are
    /// comments, empty lines and surrounding spaces are skipped.
    public static func uriListLines(_ bytes: [UInt8]) -> [[UInt8]] {
        bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).compactMap { line in
            let trimmed = trimmed(line)
            guard !trimmed.isEmpty, trimmed.first != UInt8(ascii: "#") else { return nil }
            return Array(trimmed)
        }
    }

    /// A `text/uri-list` read as a selection.
    public static func selection(uriList bytes: [UInt8]) -> Selection {
        selection(of: uriListLines(bytes), cut: false)
    }

    /// An `x-special/gnome-copied-files`: its first line `copy` or `cut`, then one URI a line; nil when
    /// the first line is neither.
    public static func selection(gnomeCopiedFiles bytes: [UInt8]) -> Selection? {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { Array(trimmed($0)) }
        guard let first = lines.first else { return nil }
        let cut: Bool
        switch first {
        case Array("copy".utf8): cut = false
        case Array("cut".utf8): cut = true
        default: return nil
        }
        lines.removeFirst()
        return selection(of: lines.filter { !$0.isEmpty }, cut: cut)
    }

    private static func selection(of uris: [[UInt8]], cut: Bool) -> Selection {
        var selection = Selection(paths: [], otherURIs: [], cut: cut)
        for uri in uris {
            if let path = localPath(ofFileURI: uri) {
                selection.paths.append(path)
            } else {
                selection.otherURIs.append(String(decoding: uri.prefix(512), as: UTF8.self))
            }
        }
        return selection
    }

    /// The local path a `file:` URI names (RFC 8089): `file:///path` or `file://localhost/path`,
    /// percent-decoded. nil for another scheme, another host, a relative path, a query or fragment, a
    /// broken escape or a NUL.
    public static func localPath(ofFileURI uri: [UInt8]) -> [UInt8]? {
        let scheme = Array("file:".utf8)
        guard uri.count > scheme.count, uri.prefix(scheme.count).map(lowercased) == scheme else { return nil }
        var rest = Array(uri.dropFirst(scheme.count))
        if rest.starts(with: Array("//".utf8)) {
            rest.removeFirst(2)
            let slash = rest.firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
            let host = rest[..<slash].map(lowercased)
            guard host.isEmpty || host == Array("localhost".utf8) else { return nil }
            rest = Array(rest[slash...])
        }
        guard rest.first == UInt8(ascii: "/"), !rest.contains(UInt8(ascii: "?")), !rest.contains(UInt8(ascii: "#")) else { return nil }
        return percentDecoded(rest)
    }

    /// `%XX` escapes decoded; nil for a broken escape or a decoded NUL.
    static func percentDecoded(_ bytes: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte != 0 else { return nil }
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else { return nil }
                let decoded = high << 4 | low
                guard decoded != 0 else { return nil }
                out.append(decoded)
                index += 3
            } else {
                out.append(byte)
                index += 1
            }
        }
        return out
    }

    /// The `file:` URI of an absolute local path: every byte but the unreserved ones (RFC 3986:
    /// letters, digits, `-._~`) and `/` percent-encoded.
    public static func fileURI(path: [UInt8]) -> String {
        var out = "file://"
        for byte in path {
            if isUnreserved(byte) || byte == UInt8(ascii: "/") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(hexDigits[Int(byte >> 4)]) + String(hexDigits[Int(byte & 0x0F)])
            }
        }
        return out
    }

    /// A `text/uri-list` of these paths: one URI a line, each ended by CRLF.
    public static func uriList(paths: [[UInt8]]) -> [UInt8] {
        Array(paths.map { fileURI(path: $0) + "\r\n" }.joined().utf8)
    }

    /// An `x-special/gnome-copied-files` of these paths, always `copy` (a receiver never offers a cut:
    /// a paste must not move its copies away, and the source's files are never touched).
    public static func gnomeCopiedFiles(paths: [[UInt8]]) -> [UInt8] {
        Array((["copy"] + paths.map { fileURI(path: $0) }).joined(separator: "\n").utf8)
    }

    private static let hexDigits = Array("0123456789ABCDEF")

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    private static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = line
        while let last = slice.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { slice = slice.dropLast() }
        while let first = slice.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { slice = slice.dropFirst() }
        return slice
    }
}

/// The source's decision on a copy of files (docs/clipboard.md, "Files"): which of its paths are
/// shared, and why a copy is not. Pure: the agent looks at each path (as the user) and hands the facts in.
public enum ClipboardFileCopy {
    /// What the agent found at one path, opened as the user who copied it.
    public enum Facts: Hashable, Sendable {
        /// A regular file (after following symbolic links) of this size.
        case regular(size: UInt64)
        case directory
        /// A device, pipe or socket.
        case special
        /// It could not be opened (the reason, from the system).
        case unreadable(String)
    }

    /// The list to offer, or why nothing is offered, in words a person can act on. `mediaType` gives
    /// each file's media type from its name.
    public static func list(_ paths: [(path: [UInt8], facts: Facts)], mediaType: (String) -> String,
                            totalLimit: UInt64 = ClipboardFileList.totalLimit) -> Result<ClipboardFileList, Refusal> {
        guard !paths.isEmpty else { return .failure(Refusal("it names no file")) }
        guard paths.count <= ClipboardFileList.maxFiles else {
            return .failure(Refusal("it holds \(paths.count) files; at most \(ClipboardFileList.maxFiles) are shared at once"))
        }
        var files: [ClipboardFile] = []
        for (path, facts) in paths {
            let shown = String(decoding: path.suffix(200), as: UTF8.self)
            guard let name = ClipboardFile.name(ofPath: path) else {
                return .failure(Refusal("the name of \(shown) is not UTF-8 or holds control characters; rename it to share it"))
            }
            let size: UInt64
            switch facts {
            case .regular(let bytes): size = bytes
            case .directory: return .failure(Refusal("\(name) is a folder; folders are not shared, copy the files in it"))
            case .special: return .failure(Refusal("\(name) is not a regular file (a device, pipe or socket)"))
            case .unreadable(let why): return .failure(Refusal("\(name) cannot be read: \(why)"))
            }
            let type = mediaType(name)
            let checked = (try? ClipboardText.checkMediaType(type)) != nil ? type : "application/octet-stream"
            guard let file = try? ClipboardFile(name: name, size: size, mediaType: checked) else {
                return .failure(Refusal("the name \(name) cannot be shared"))
            }
            files.append(file)
        }
        let list: ClipboardFileList
        do { list = try ClipboardFileList(files: files) } catch { return .failure(Refusal("the files are too large to add up")) }
        if let why = list.refusal(totalLimit: totalLimit) { return .failure(Refusal(why)) }
        return .success(list)
    }

    /// Why a copy of files is not offered.
    public struct Refusal: Error, Hashable, Sendable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }
}
