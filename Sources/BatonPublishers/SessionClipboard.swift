// SPDX-License-Identifier: GPL-2.0-or-later
/// The session's clipboard (the CLIPBOARD selection, never PRIMARY) as the agent sees it: copies by
/// other clients arrive as events with the types they offer; bytes are read only on request; the
/// agent can take the clipboard with a list of types and produce each type's bytes only when a
/// pasting app asks for it (issue 27, docs/clipboard.md). Adapters: BatonX11 (X11 selections),
/// BatonWayland (Wayland data control).
public protocol SessionClipboard: Sendable {
    /// What happened to the clipboard, in order: copies by other clients (never this adapter's own
    /// offers), the clipboard left without owner, and this adapter's offer lost to another client.
    /// One consumer; the stream finishes when the adapter closes or its connection is lost.
    var events: AsyncStream<ClipboardEvent> { get }

    /// The current owner's bytes of `type` (a media type as in `ClipboardChange.types`), at most
    /// `limit` bytes: more fails with `.overLimit` before more than `limit` bytes are buffered.
    func read(type: String, limit: Int) async throws(ClipboardError) -> [UInt8]

    /// Takes the clipboard with exactly `types` (media types, or a secrecy marker such as
    /// `x-kde-passwordManagerHint`). Nothing is produced up front: `provide(type)` runs once for each
    /// request of a pasting app, concurrently with other requests; its error fails that one
    /// request (the app gets nothing), never the offer. Types over the list's bounds are dropped
    /// (`ClipboardTypeList`) and returned; a later offer replaces this one.
    @discardableResult
    func offer(types: [String], provide: @escaping @Sendable (String) async throws -> [UInt8])
        async throws(ClipboardError) -> [ClipboardTypeList.Dropped]

    /// Gives the clipboard up if this adapter's offer still holds it (no `.offerLost` for this).
    func withdraw() async
}

/// One event of `SessionClipboard.events`.
public enum ClipboardEvent: Sendable, Equatable {
    /// Another client copied: what it offers.
    case changed(ClipboardChange)
    /// The owner went away (its window or connection closed) and nobody owns the clipboard.
    case cleared
    /// Another client took the clipboard from this adapter's offer: `provide` is not called any more.
    case offerLost
}

/// A copy by another client.
public struct ClipboardChange: Sendable, Equatable {
    /// The content types offered, as media types (every X11 text alias is `ClipboardTypes.text`),
    /// without the protocol's own targets and secrecy markers; at most `ClipboardTypeList.maximumCount`.
    public var types: [String]
    /// The copy is marked secret by the app (`ClipboardSecrecy`): nothing of it may leave the session.
    public var isSecret: Bool
    /// What the owner offered that is not in `types`, with the reason (not content ones are not listed).
    public var dropped: [ClipboardTypeList.Dropped]
    /// Counts the changes this adapter saw, from 1: a later change has a larger number.
    public var revision: UInt64

    public init(types: [String], isSecret: Bool, dropped: [ClipboardTypeList.Dropped] = [], revision: UInt64) {
        self.types = types
        self.isSecret = isSecret
        self.dropped = dropped
        self.revision = revision
    }
}

/// Why a clipboard operation failed; `description` is meant for a person.
public enum ClipboardError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nobody owns the clipboard.
    case noOwner
    /// The owner does not offer this type.
    case typeNotOffered(String)
    /// The owner's data is larger than the limit the reader gave.
    case overLimit(limit: Int)
    /// The owner answered the request with nothing (it refused or gave up).
    case refused
    /// The owner did not answer (or stopped sending) within the adapter's time.
    case timedOut
    /// No types left to offer after the list's bounds (`ClipboardTypeList`).
    case nothingToOffer
    /// A later offer (or a withdraw) came before this one held the clipboard.
    case replaced
    /// The display connection is gone or could not be made.
    case unavailable(String)

    public var description: String {
        switch self {
        case .noOwner: "the clipboard is empty"
        case .typeNotOffered(let type): "the clipboard holds no \(type)"
        case .overLimit(let limit): "the clipboard's content is larger than \(limit) bytes"
        case .refused: "the application that copied did not hand the content over"
        case .timedOut: "the application that copied did not answer in time"
        case .nothingToOffer: "nothing that could be put on the clipboard"
        case .replaced: "a newer copy replaced this one before it reached the clipboard"
        case .unavailable(let reason): "the clipboard cannot be used: \(reason)"
        }
    }
}

/// Names of clipboard types: media types, the X11 targets that stand for them, and which X11
/// targets are no content at all (ICCCM section 2.6.2 and the conventions toolkits follow).
public enum ClipboardTypes {
    /// The one media type text is offered and read as.
    public static let text = "text/plain;charset=utf-8"

    /// The X11 targets that all mean text, in the order a reader prefers them (UTF-8 first; STRING
    /// is ISO Latin-1 by ICCCM; TEXT lets the owner choose the encoding).
    public static let textTargets = ["UTF8_STRING", "text/plain;charset=utf-8", "text/plain", "STRING", "TEXT"]

    /// Targets of the selection protocol itself (ICCCM 2.6.2 and common extensions): never content.
    public static let protocolTargets: Set<String> = [
        "TARGETS", "TIMESTAMP", "MULTIPLE", "SAVE_TARGETS", "DELETE", "INSERT_SELECTION", "INSERT_PROPERTY",
        "LENGTH", "INCR", "ATOM_PAIR", "ATOM", "INTEGER", "HOST_NAME", "USER", "CLIENT_WINDOW", "PROCESS",
        "TASK", "CLASS", "NAME", "OWNER_OS", "LIST_LENGTH", "SPAN", "CHARACTER_POSITION", "LINE_NUMBER",
        "COLUMN_NUMBER", "FILE_NAME", "DRAWABLE", "PIXMAP", "BITMAP", "COLORMAP", "FOREGROUND", "BACKGROUND",
        "ODIF", "POSTSCRIPT", "ENCAPSULATED_POSTSCRIPT", "C_STRING", "COMPOUND_TEXT",
    ]

    /// The media type an X11 target stands for; nil for the protocol's own targets, secrecy markers
    /// and names that are no media type (`type/subtype`, parameters allowed).
    public static func mediaType(ofTarget name: String) -> String? {
        if textTargets.contains(name) || name.lowercased() == "text/plain;charset=utf-8" { return text }
        if protocolTargets.contains(name) || ClipboardSecrecy.markers.contains(name) { return nil }
        return isMediaType(name) ? name : nil
    }

    /// The X11 targets under which a media type is offered (text: every alias).
    public static func targets(ofMediaType type: String) -> [String] {
        type == text ? textTargets : [type]
    }

    /// `type/subtype` with optional `;parameter` parts, printable ASCII without spaces.
    public static func isMediaType(_ name: String) -> Bool {
        guard name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return false }
        let essence = name.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let parts = essence.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty }
    }

    /// ISO Latin-1 (the STRING target) as UTF-8.
    public static func utf8(fromLatin1 bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        for byte in bytes {
            if byte < 0x80 {
                result.append(byte)
            } else {
                result.append(0xC0 | (byte >> 6))
                result.append(0x80 | (byte & 0x3F))
            }
        }
        return result
    }

    /// UTF-8 as ISO Latin-1 (the STRING target): characters Latin-1 lacks become `?`.
    public static func latin1(fromUTF8 bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        for scalar in String(decoding: bytes, as: UTF8.self).unicodeScalars {
            result.append(scalar.value < 0x100 ? UInt8(scalar.value) : UInt8(ascii: "?"))
        }
        return result
    }
}

/// Whether the app that copied marked the copy secret (password managers do, so that clipboard
/// managers and sync tools leave it alone). docs/clipboard.md lists the sources.
public enum ClipboardSecrecy {
    /// KDE's hint (Klipper): its value `secret` marks a secret copy, `public` an ordinary one.
    /// KeePassXC sets it to `secret` on Linux; `wl-copy --sensitive` offers it with `secret`.
    public static let kdePasswordManagerHint = "x-kde-passwordManagerHint"
    /// The nspasteboard.org concealed type as Qt names it: its presence marks a secret copy
    /// (KeePassXC sets it on macOS; an X11 or XWayland app may offer it through Qt).
    public static let concealedType = "application/x-nspasteboard-concealed-type"
    /// The markers: never content, never offered as a type of a change.
    public static let markers: Set<String> = [kdePasswordManagerHint, concealedType]

    /// The rule: secret when the concealed type is offered, or KDE's hint is offered and its value
    /// is `secret` (surrounding white space and NULs ignored; Klipper's rule). `hintValue` is the
    /// hint's bytes, nil when they could not be read: then a copy that offers the hint counts as
    /// secret (fail closed), and so does an empty value (GNOME's Mutter relays an app's failed
    /// answer to an X11 reader as an empty one; on Wayland no bytes already read as a refusal).
    public static func isSecret(offered names: some Sequence<String>, hintValue: [UInt8]?) -> Bool {
        var offersHint = false
        for name in names {
            if name == concealedType { return true }
            if name == kdePasswordManagerHint { offersHint = true }
        }
        guard offersHint else { return false }
        guard let hintValue else { return true }
        let value = String(decoding: hintValue, as: UTF8.self).trimmingWhitespace()
        return value.isEmpty || value == "secret"
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, scalars[start].properties.isWhitespace || scalars[start] == "\0" { start = scalars.index(after: start) }
        while end > start, scalars[scalars.index(before: end)].properties.isWhitespace || scalars[scalars.index(before: end)] == "\0" {
            end = scalars.index(before: end)
        }
        return String(scalars[start..<end])
    }
}

/// The bounds of a type list, both ways (what another client offers, what this adapter offers):
/// at most `maximumCount` types, each name at most `maximumNameBytes` bytes. Duplicates once (the
/// text aliases are one type), in the order given.
public struct ClipboardTypeList: Sendable, Equatable {
    public static let maximumCount = 64
    public static let maximumNameBytes = 255

    /// A name left out, and why.
    public struct Dropped: Sendable, Equatable, CustomStringConvertible {
        public enum Reason: Sendable, Equatable {
            /// Longer than `maximumNameBytes` (the name is cut to that length here).
            case nameTooLong
            /// After `maximumCount` types.
            case tooMany
            /// Not a media type, nor a known X11 text target or secrecy marker.
            case notMediaType
        }
        public var name: String
        public var reason: Reason
        public init(name: String, reason: Reason) {
            self.name = name
            self.reason = reason
        }
        public var description: String {
            switch reason {
            case .nameTooLong: "a type name longer than \(ClipboardTypeList.maximumNameBytes) bytes"
            case .tooMany: "\(name): more than \(ClipboardTypeList.maximumCount) types"
            case .notMediaType: "\(name) is not a media type"
            }
        }
    }

    /// The content types, as media types.
    public var types: [String]
    /// Secrecy markers offered (`ClipboardSecrecy.markers`).
    public var markers: [String]
    /// What was left out, the first `maximumCount` of them (a hostile list could be endless).
    public var dropped: [Dropped]

    /// Names of types (X11 targets another client offers, or types to offer) → content types as
    /// media types (the X11 text aliases are text) and secrecy markers. The protocol's own targets
    /// are left out silently; other names that are no media type are dropped with the reason.
    public init(_ names: some Sequence<String>) {
        types = []
        markers = []
        dropped = []
        func drop(_ name: String, _ reason: Dropped.Reason) {
            if dropped.count < Self.maximumCount { dropped.append(Dropped(name: name, reason: reason)) }
        }
        for name in names {
            guard name.utf8.count <= Self.maximumNameBytes else {
                drop(String(decoding: name.utf8.prefix(Self.maximumNameBytes), as: UTF8.self), .nameTooLong)
                continue
            }
            if ClipboardSecrecy.markers.contains(name) {
                if !markers.contains(name) { markers.append(name) }
                continue
            }
            if ClipboardTypes.protocolTargets.contains(name) { continue }
            guard let type = ClipboardTypes.mediaType(ofTarget: name) else {
                drop(name, .notMediaType)
                continue
            }
            guard !types.contains(type) else { continue }
            guard types.count < Self.maximumCount else {
                drop(type, .tooMany)
                continue
            }
            types.append(type)
        }
    }
}
