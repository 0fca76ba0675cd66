// SPDX-License-Identifier: LGPL-2.1-or-later
// The clipboard's two interfaces (docs/clipboard.md, docs/dbus-api.md "Clipboard"): org.baton.Clipboard1,
// served by batond at /org/baton/clipboard, and org.baton.ClipboardAgent1, served by baton-agent on its
// connection to batond's bus after Clipboard1.RegisterAgent.
import BatonCore
import BatonDBus

extension Wire {
    /// The items of a copy, `a(st)`: media type and exact size, each checked as the wire checks them (§6.7).
    public static let clipboardItems = ValueCoding<[ClipboardItem]>("a(st)", encode: { items in
        .array(elementSignature: "(st)", items.map { .structure([.string($0.mediaType), .uint64($0.size)]) })
    }) { value throws(BatonAPIError) in
        guard value.signature == "a(st)", let entries = value.arrayValue else { return nil }
        guard !entries.isEmpty, entries.count <= ClipboardOffer.maxItems else {
            throw BatonAPIError(.invalidArguments, "a copy has 1 to \(ClipboardOffer.maxItems) types")
        }
        var items: [ClipboardItem] = []
        for entry in entries {
            guard case .structure(let fields) = entry, fields.count == 2, let type = fields[0].stringValue, let size = fields[1].uint64Value else { return nil }
            do { items.append(try ClipboardItem(mediaType: type, size: size)) } catch {
                throw BatonAPIError(.invalidArguments, "media type '\(type.prefix(64))' or size \(size) refused: \(error)")
            }
        }
        guard Set(items.map(\.mediaType)).count == items.count else { throw BatonAPIError(.invalidArguments, "a media type appears twice") }
        return items
    }

    /// The files of a copy, `a(sts)`: name, exact size and media type, each checked as the wire checks
    /// them (§6.7 "Files"): 1 to 256 files.
    public static let clipboardFiles = ValueCoding<[ClipboardFile]>("a(sts)", encode: { files in
        .array(elementSignature: "(sts)", files.map { .structure([.string($0.name), .uint64($0.size), .string($0.mediaType)]) })
    }) { value throws(BatonAPIError) in
        guard value.signature == "a(sts)", let entries = value.arrayValue else { return nil }
        guard !entries.isEmpty, entries.count <= ClipboardFileList.maxFiles else {
            throw BatonAPIError(.invalidArguments, "a copy has 1 to \(ClipboardFileList.maxFiles) files")
        }
        var files: [ClipboardFile] = []
        for entry in entries {
            guard case .structure(let fields) = entry, fields.count == 3, let name = fields[0].stringValue, let size = fields[1].uint64Value,
                  let type = fields[2].stringValue else { return nil }
            do { files.append(try ClipboardFile(name: name, size: size, mediaType: type)) } catch {
                throw BatonAPIError(.invalidArguments, "file '\(name.prefix(64))' refused: \(error)")
            }
        }
        return files
    }

    /// A clipboard kind by name: `text`, `image` or `files`.
    public static let clipboardKind = ValueCoding<ClipboardKind>("s", encode: { .string($0.name) }) { value throws(BatonAPIError) in
        guard let name = value.stringValue else { return nil }
        guard let kind = ClipboardKind.allCases.first(where: { $0.name == name }) else {
            throw BatonAPIError(.invalidArguments, "kind is text, image or files, not '\(name.prefix(32))'")
        }
        return kind
    }
}

extension OrgBaton {
    /// org.baton.Clipboard1 at /org/baton/clipboard.
    public enum Clipboard1: InterfaceContract {
        public static let name = BatonInterface.clipboard

        /// The caller's account takes part in the clipboard: copies it offers go to the ring, copies of
        /// the account of the same name elsewhere come to `agent` (ClipboardAgent1).
        public static let registerAgent = MethodContract(name, "RegisterAgent", in: Wire.one("agent", Wire.objectPath), out: Wire.none)
        public static let unregisterAgent = MethodContract(name, "UnregisterAgent", in: Wire.none, out: Wire.none)
        /// The caller's account copied: `contents` is a sealed memfd holding the items' bytes in order.
        public static let offer = MethodContract(name, "Offer", in: Wire.four("kind", Wire.clipboardKind, "items", Wire.clipboardItems,
                                                                             "expires_in", Wire.uint32, "contents", Wire.unixFD), out: Wire.none)
        /// The caller's account takes its copy back (a secret or local-only copy replaced it).
        public static let withdraw = MethodContract(name, "Withdraw", in: Wire.none, out: Wire.none)
        /// An app marks the copy its account makes within 2 s of the call (or made within 2 s before it).
        public static let restrict = MethodContract(name, "Restrict", in: Wire.two("local_only", Wire.boolean, "expires_in", Wire.uint32),
                                                    out: Wire.none)
        /// The bytes of one type of a copy handed to the caller's agent, pulled now: a sealed memfd.
        public static let paste = MethodContract(name, "Paste", in: Wire.two("token", Wire.uint64, "media_type", Wire.string),
                                                 out: Wire.one("contents", Wire.unixFD))

        /// The caller's account copied files: their list (no path); `copy` is the agent's id for this
        /// copy, given back in ClipboardAgent1.OpenFile when a member pastes.
        public static let offerFiles = MethodContract(name, "OfferFiles", in: Wire.three("files", Wire.clipboardFiles, "expires_in", Wire.uint32,
                                                                                        "copy", Wire.uint64), out: Wire.none)
        /// File `index` of a files copy handed to the caller's agent, pulled now: a read-only descriptor.
        public static let pasteFile = MethodContract(name, "PasteFile", in: Wire.two("token", Wire.uint64, "index", Wire.uint32),
                                                     out: Wire.one("file", Wire.unixFD))

        /// What the caller's account takes part in: its copy on offer (who asked, where it was pasted),
        /// the copy handed to its agent, and the counts since batond started.
        public static let getStatus = MethodContract(name, "GetStatus", in: Wire.none, out: Wire.one("status", Wire.clipboardStatus))

        public static var members: [MemberContract] {
            [registerAgent.member, unregisterAgent.member, offer.member, withdraw.member, restrict.member, paste.member,
             offerFiles.member, pasteFile.member, getStatus.member]
        }
    }

    /// org.baton.ClipboardAgent1, served by baton-agent at the path it registered.
    public enum ClipboardAgent1: InterfaceContract {
        public static let name = BatonInterface.clipboardAgent

        /// A member's copy for this account: take the clipboard with these types, fetch nothing yet.
        public static let offered = MethodContract(name, "Offered", in: Wire.four("token", Wire.uint64, "device", Wire.string,
                                                                                 "kind", Wire.clipboardKind, "items", Wire.clipboardItems),
                                                   out: Wire.none)
        /// That copy is gone (expired, changed, taken back, its machine left the ring).
        public static let withdrawn = MethodContract(name, "Withdrawn", in: Wire.one("token", Wire.uint64), out: Wire.none)

        /// A member's copy of files for this account: take the clipboard as files, fetch nothing yet.
        public static let offeredFiles = MethodContract(name, "OfferedFiles", in: Wire.three("token", Wire.uint64, "device", Wire.string,
                                                                                             "files", Wire.clipboardFiles), out: Wire.none)
        /// A member pastes file `index` of this account's files copy `copy`: the agent opens it (as the
        /// account) and hands the descriptor over, or refuses when it changed since the copy.
        public static let openFile = MethodContract(name, "OpenFile", in: Wire.two("copy", Wire.uint64, "index", Wire.uint32),
                                                    out: Wire.one("file", Wire.unixFD))

        public static var members: [MemberContract] { [offered.member, withdrawn.member, offeredFiles.member, openFile.member] }
    }
}
