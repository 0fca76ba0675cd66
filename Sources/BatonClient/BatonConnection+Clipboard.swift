// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonCore
import BatonDBus
import BatonSystem
#if canImport(Glibc)
import Glibc
#endif

/// A copy of this account made on another ring machine, as batond hands it to the clipboard agent
/// (ClipboardAgent1.Offered): only what it offers; the bytes come with `BatonConnection.paste`.
public struct ClipboardOfferedCopy: Sendable, Hashable {
    /// Pastes it, until it is withdrawn.
    public var token: UInt64
    /// The ring member's name.
    public var device: String
    public var kind: ClipboardKind
    /// Media types and exact sizes, in the order the copying machine offered them.
    public var items: [ClipboardItem]

    public init(token: UInt64, device: String, kind: ClipboardKind, items: [ClipboardItem]) {
        self.token = token
        self.device = device
        self.kind = kind
        self.items = items
    }
}

/// A copy of files of this account made on another ring machine (ClipboardAgent1.OfferedFiles): the
/// list only; each file comes with `BatonConnection.pasteFile`.
public struct ClipboardOfferedFiles: Sendable, Hashable {
    public var token: UInt64
    public var device: String
    public var files: [ClipboardFile]

    public init(token: UInt64, device: String, files: [ClipboardFile]) {
        self.token = token
        self.device = device
        self.files = files
    }
}

/// Why an agent does not hand over a file of its copy (ClipboardAgent1.OpenFile).
public enum ClipboardOpenRefusal: Error, Sendable, Equatable {
    /// The file changed, went or cannot be read since the copy (in words, naming the file).
    case changed(String)
    /// The agent holds no copy with that id (a newer copy replaced it).
    case noSuchCopy
}

/// What a clipboard agent is told (docs/dbus-api.md, ClipboardAgent1). Called in the order batond
/// calls them; a handler that takes long holds up batond's call, not the agent.
public struct ClipboardAgentHandlers: Sendable {
    public var offered: @Sendable (ClipboardOfferedCopy) async -> Void
    public var withdrawn: @Sendable (_ token: UInt64) async -> Void
    public var offeredFiles: @Sendable (ClipboardOfferedFiles) async -> Void
    /// Opens file `index` of this agent's files copy `copy` read-only, as the account, after checking
    /// it is still the file copied; the descriptor is handed to batond and closed here afterwards.
    public var openFile: @Sendable (_ copy: UInt64, _ index: Int) async throws(ClipboardOpenRefusal) -> FileDescriptor

    /// An agent that offers and takes copies of files too.
    public init(offered: @escaping @Sendable (ClipboardOfferedCopy) async -> Void,
                withdrawn: @escaping @Sendable (_ token: UInt64) async -> Void,
                offeredFiles: @escaping @Sendable (ClipboardOfferedFiles) async -> Void,
                openFile: @escaping @Sendable (_ copy: UInt64, _ index: Int) async throws(ClipboardOpenRefusal) -> FileDescriptor) {
        self.offered = offered
        self.withdrawn = withdrawn
        self.offeredFiles = offeredFiles
        self.openFile = openFile
    }

    /// An agent of text and images only: copies of files are not taken, and it has none to open.
    public init(offered: @escaping @Sendable (ClipboardOfferedCopy) async -> Void,
                withdrawn: @escaping @Sendable (_ token: UInt64) async -> Void) {
        self.init(offered: offered, withdrawn: withdrawn, offeredFiles: { _ in }, openFile: { _, _ throws(ClipboardOpenRefusal) in throw .noSuchCopy })
    }
}

/// The universal clipboard (docs/clipboard.md): Clipboard1 on batond for the calling account.
/// Every failure is a `BatonClientError` whose `description` says what failed and what to do.
extension BatonConnection {
    /// The object path of this connection's clipboard agent.
    public static let clipboardAgentPath = BatonObjectPath.clientExportRoot + "/clipboard_agent"

    /// Exports an org.baton.ClipboardAgent1 object (answering batond only) and registers it
    /// (Clipboard1.RegisterAgent): from now on this account's copies may be offered, and copies of
    /// the account of the same login name on other ring machines come to `handlers`. Call again
    /// after batond restarts (a restarted batond knows no agent).
    public func registerClipboardAgent(_ handlers: ClipboardAgentHandlers) async throws(BatonClientError) {
        let path = Self.clipboardAgentPath
        try? dbus.unexport(path: path)
        try await translatingErrors { try await dbus.export([clipboardAgentInterface(handlers)], at: path) }
        do throws(BatonClientError) {
            try await clipboardCall(OrgBaton.Clipboard1.registerAgent, path, doing: "registering the clipboard agent")
        } catch {
            try? dbus.unexport(path: path)
            throw error
        }
    }

    /// Clipboard1.UnregisterAgent: this account's copy is no longer offered and what it was handed
    /// is forgotten.
    public func unregisterClipboardAgent() async throws(BatonClientError) {
        defer { try? dbus.unexport(path: Self.clipboardAgentPath) }
        try await clipboardCall(OrgBaton.Clipboard1.unregisterAgent, (), doing: "turning the clipboard agent off")
    }

    /// Clipboard1.Offer: this account copied. `contents` (the descriptor of a memfd sealed against
    /// write, shrink and grow, `SealedMemoryFile`) holds the items' bytes one after the other; it
    /// stays the caller's to close. `expiresIn` 0: batond's default (120 s).
    public func offerClipboard(kind: ClipboardKind, items: [ClipboardItem], expiresIn: UInt32 = 0,
                               contents: Int32) async throws(BatonClientError) {
        try await clipboardCall(OrgBaton.Clipboard1.offer, (kind, items, expiresIn, contents), doing: "offering the copy to the ring")
    }

    /// Clipboard1.OfferFiles: this account copied `files` (their list: no path, no byte); `copy` is the
    /// caller's id for the copy, which batond gives back in ClipboardAgent1.OpenFile when a member pastes.
    public func offerFiles(_ files: [ClipboardFile], expiresIn: UInt32 = 0, copy: UInt64) async throws(BatonClientError) {
        try await clipboardCall(OrgBaton.Clipboard1.offerFiles, (files, expiresIn, copy), doing: "offering the copied files to the ring")
    }

    /// Clipboard1.PasteFile: file `index` of the copy of files handed over as `token`, pulled from its
    /// machine now and checked against its digest: a read-only descriptor (the caller's to close).
    public func pasteFile(token: UInt64, index: Int, name: String, timeout: Duration? = nil) async throws(BatonClientError) -> FileDescriptor {
        let descriptor = try await clipboardCall(OrgBaton.Clipboard1.pasteFile, (token, UInt32(clamping: index)), timeout: timeout,
                                                 doing: "pasting \(name)")
        return FileDescriptor(taking: descriptor)
    }

    /// Clipboard1.Withdraw: this account's copy is no longer offered.
    public func withdrawClipboard() async throws(BatonClientError) {
        try await clipboardCall(OrgBaton.Clipboard1.withdraw, (), doing: "taking the copy back")
    }

    /// Clipboard1.Restrict, for apps: the copy this account makes within 2 s (or made within 2 s
    /// before) stays on this machine (`localOnly`), or lives at most `expiresIn` seconds (0: unchanged).
    public func restrictClipboard(localOnly: Bool, expiresIn: UInt32 = 0) async throws(BatonClientError) {
        try await clipboardCall(OrgBaton.Clipboard1.restrict, (localOnly, expiresIn), doing: "marking the copy")
    }

    /// Clipboard1.Paste: the bytes of `mediaType` of the copy handed over as `token`, pulled from
    /// its machine now, as a sealed memfd of exactly the offered size (the caller's to close).
    public func paste(token: UInt64, mediaType: String, timeout: Duration? = nil) async throws(BatonClientError) -> FileDescriptor {
        let descriptor = try await clipboardCall(OrgBaton.Clipboard1.paste, (token, mediaType), timeout: timeout, doing: "pasting \(mediaType)")
        return FileDescriptor(taking: descriptor)
    }

    /// Clipboard1.GetStatus: what this account's clipboard does on batond's machine (its copy on
    /// offer, who asked for its types and where its bytes were pasted, the copy handed to its agent).
    public func clipboardStatus(timeout: Duration? = nil) async throws(BatonClientError) -> ClipboardAccountStatus {
        try await clipboardCall(OrgBaton.Clipboard1.getStatus, (), timeout: timeout, doing: "asking batond about the clipboard")
    }

    /// `paste`, read into memory: at most `limit` bytes (a larger copy fails before it is read).
    public func pasteBytes(token: UInt64, mediaType: String, limit: Int, timeout: Duration? = nil) async throws(BatonClientError) -> [UInt8] {
        let file = try await paste(token: token, mediaType: mediaType, timeout: timeout)
        guard let size = SealedMemoryFile.immutableSize(of: file) else {
            throw BatonClientError(.failed, "pasting \(mediaType) failed: batond handed over no sealed memory file; restart batond, and report it if it happens again")
        }
        guard size <= UInt64(limit) else {
            throw BatonClientError(.payloadTooLarge, "pasting \(mediaType) failed: the copy is \(size) bytes, more than the \(limit) this paste takes")
        }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let read: Int
        do { read = try bytes.withUnsafeMutableBytes { (buffer) throws(Errno) in try file.readFully(into: buffer, at: 0) } } catch {
            throw BatonClientError(.failed, "pasting \(mediaType) failed: reading the pasted bytes: \(error)")
        }
        guard read == bytes.count else { throw BatonClientError(.failed, "pasting \(mediaType) failed: the pasted copy was shorter than it said") }
        return bytes
    }

    // MARK: Plumbing

    /// A descriptor kept open until a reply that carries it is written.
    private final class HeldDescriptor: Sendable {
        private let file: FileDescriptor
        var rawValue: Int32 { file.rawValue }
        init(_ file: consuming FileDescriptor) { self.file = file }
    }

    private func clipboardAgentInterface(_ handlers: ClipboardAgentHandlers) -> DBusInterface {
        DBusInterface(OrgBaton.ClipboardAgent1.name, methods: [
            DBusMethod(OrgBaton.ClipboardAgent1.offered) { [weak self] call in
                guard let self else { throw DBusError.disconnected() }
                try await self.requireDaemon(call)
                let (token, device, kind, items) = try decodedArguments(OrgBaton.ClipboardAgent1.offered, call)
                await handlers.offered(ClipboardOfferedCopy(token: token, device: device, kind: kind, items: items))
                return []
            },
            DBusMethod(OrgBaton.ClipboardAgent1.withdrawn) { [weak self] call in
                guard let self else { throw DBusError.disconnected() }
                try await self.requireDaemon(call)
                let token = try decodedArguments(OrgBaton.ClipboardAgent1.withdrawn, call)
                await handlers.withdrawn(token)
                return []
            },
            DBusMethod(OrgBaton.ClipboardAgent1.offeredFiles) { [weak self] call in
                guard let self else { throw DBusError.disconnected() }
                try await self.requireDaemon(call)
                let (token, device, files) = try decodedArguments(OrgBaton.ClipboardAgent1.offeredFiles, call)
                await handlers.offeredFiles(ClipboardOfferedFiles(token: token, device: device, files: files))
                return []
            },
            DBusMethod(OrgBaton.ClipboardAgent1.openFile) { [weak self] call in
                guard let self else { throw DBusError.disconnected() }
                try await self.requireDaemon(call)
                let (copy, index) = try decodedArguments(OrgBaton.ClipboardAgent1.openFile, call)
                let file: FileDescriptor
                do throws(ClipboardOpenRefusal) { file = try await handlers.openFile(copy, Int(index)) } catch {
                    switch error {
                    case .changed(let why): throw DBusError(name: .unknownActivity, message: why)
                    case .noSuchCopy: throw DBusError(name: .unknownObject, message: "no such copy: a newer one replaced it")
                    }
                }
                // The reply carries a duplicate; this one is closed once the reply is written.
                let held = HeldDescriptor(file)
                DBusCallContext.keepUntilReplied(held)
                return [.unixFD(held.rawValue)]
            },
        ])
    }

    /// Calls a Clipboard1 method; a failure says what was being done, why, and what to do.
    @discardableResult
    private func clipboardCall<Arguments, Reply>(_ method: MethodContract<Arguments, Reply>, _ arguments: Arguments, timeout: Duration? = nil,
                                                 doing what: String) async throws(BatonClientError) -> Reply {
        do {
            return try await call(method, at: BatonObjectPath.clipboard, arguments, timeout: timeout)
        } catch {
            throw Self.clipboardError(error, doing: what, busName: busName)
        }
    }

    /// The daemon's clipboard refusals already name the fix (docs/dbus-api.md, "Clipboard"); the
    /// bus's own errors do not, and are put in words here.
    static func clipboardError(_ error: BatonClientError, doing what: String, busName: String) -> BatonClientError {
        let message: String
        switch error.name {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            message = "\(what) failed: batond (\(busName)) is not running; start it (systemctl start batond)"
        case "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.DBus.Error.UnknownInterface":
            message = "\(what) failed: this batond has no clipboard; update Baton"
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.TimedOut":
            message = "\(what) failed: batond did not answer in time; try again"
        case "org.freedesktop.DBus.Error.AccessDenied":
            message = "\(what) failed: the bus refused the call (its policy); install Baton's bus policy (dbus/org.baton.conf)"
        default:
            guard error.code != nil else {
                message = "\(what) failed: the bus connection failed (\(error.message.isEmpty ? error.name : error.message)); is batond running?"
                break
            }
            message = "\(what) failed: \(error.message)"
        }
        return BatonClientError(name: error.name, message: message)
    }
}
