// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import BatonSystem
import Glibc
import Synchronization

/// org.baton.Clipboard1 at /org/baton/clipboard, and the calls on agents' org.baton.ClipboardAgent1
/// (docs/dbus-api.md, "Clipboard"). Every method acts for the calling connection's account, looked up
/// for each call (GetConnectionUnixUser), its login name read with getpwuid_r.
public final class ClipboardBus: ClipboardAgentCalls, Sendable {
    let connection: DBusConnection
    private let service = Mutex<ClipboardService?>(nil)
    private let watches = Mutex<[String: DBusSubscription]>([:])

    public init(connection: DBusConnection) { self.connection = connection }

    public func attach(_ clipboard: ClipboardService?) { service.withLock { $0 = clipboard } }

    public func export() async throws {
        try await connection.export([clipboardInterface()], at: BatonObjectPath.clipboard)
    }

    public func unexport() {
        try? connection.unexport(path: BatonObjectPath.clipboard)
        for watch in watches.withLock({ Array($0.values) }) { connection.unsubscribe(watch) }
        watches.withLock { $0 = [:] }
    }

    private func clipboard() throws -> ClipboardService {
        guard let clipboard = service.withLock({ $0 }) else { throw DBusError.failed("stopping") }
        return clipboard
    }

    private func caller(_ sender: String) async throws -> UInt32 {
        guard !sender.isEmpty else { throw DBusError(name: .notPermitted, message: "no caller identity on this connection") }
        do { return try await connection.connectionUnixUser(sender) } catch {
            throw DBusError(name: .notPermitted, message: "cannot identify the caller")
        }
    }

    /// A refusal in the words of docs/dbus-api.md.
    static func error(_ refusal: ClipboardService.Refusal) -> DBusError {
        switch refusal {
        case .notEnabled:
            DBusError(name: .notPermitted, message: "the clipboard is off for this account: turn it on with `baton clipboard enable`")
        case .invalidContents(let what): DBusError(name: .invalidArguments, message: what)
        case .unknownOffer: DBusError(name: .unknownObject, message: "no such copy for this account: it expired, was replaced or withdrawn")
        case .typeNotOffered(let type): DBusError(name: .invalidArguments, message: "the copy offers no type '\(type.prefix(64))'")
        case .tooLarge(let size, let limit):
            DBusError(name: .payloadTooLarge, message: "the copy is \(size) bytes; this machine takes at most \(limit)")
        case .changed: DBusError(name: .unknownActivity, message: "the copy changed on its machine since it was offered: copy it again there")
        case .fileChanged(let name, let member):
            DBusError(name: .unknownActivity, message: "\(name) changed on \(member) since it was copied (or is gone or unreadable there); nothing was pasted: copy it again on \(member)")
        case .noSuchFile(let index): DBusError(name: .invalidArguments, message: "the copy has no file \(index)")
        case .noFileInbox: DBusError(name: .notReady, message: "this batond keeps no place for pulled files; restart it with its state directory")
        case .unreachable(let name): DBusError(name: .failed, message: "\(name) could not be reached, or the transfer broke")
        case .failed(let what): DBusError(name: .failed, message: what)
        }
    }

    func clipboardInterface() -> DBusInterface {
        DBusInterface(BatonInterface.clipboard, methods: [
            DBusMethod(OrgBaton.Clipboard1.registerAgent) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let path = try OrgBaton.Clipboard1.registerAgent.decodeArguments(call.arguments)
                guard path != "/" else { throw DBusError.invalidArguments("RegisterAgent takes (o agent), a path other than /") }
                guard let account = PrivilegePolicy.account(uid)?.name else {
                    throw DBusError(name: .notPermitted, message: "this account has no user record")
                }
                let clipboard = try self.clipboard()
                try await self.watch(call.sender)
                await clipboard.register(ClipboardAgentEndpoint(uid: uid, account: account, busName: call.sender, path: path))
                return []
            },
            DBusMethod(OrgBaton.Clipboard1.unregisterAgent) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let clipboard = try self.clipboard()
                await clipboard.unregister(uid: uid)
                return []
            },
            DBusMethod(OrgBaton.Clipboard1.offer) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let (kind, items, expiresIn, descriptor) = try OrgBaton.Clipboard1.offer.decodeArguments(call.arguments)
                // The message's descriptor stays the message's: batond keeps a duplicate of its own.
                let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
                guard duplicate >= 0 else { throw DBusError(name: .invalidArguments, message: "contents is no open descriptor") }
                let contents = ClipboardContents(FileDescriptor(taking: duplicate))
                let clipboard = try self.clipboard()
                do throws(ClipboardService.Refusal) {
                    try await clipboard.offer(uid: uid, kind: kind, items: items, expiresIn: UInt16(min(expiresIn, 3_600)), contents: contents)
                } catch {
                    throw Self.error(error)
                }
                return []
            },
            DBusMethod(OrgBaton.Clipboard1.withdraw) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let clipboard = try self.clipboard()
                await clipboard.withdraw(uid: uid)
                return []
            },
            DBusMethod(OrgBaton.Clipboard1.restrict) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let (localOnly, expiresIn) = try OrgBaton.Clipboard1.restrict.decodeArguments(call.arguments)
                let clipboard = try self.clipboard()
                await clipboard.restrict(uid: uid, localOnly: localOnly, expiresIn: UInt16(min(expiresIn, 3_600)))
                return []
            },
            DBusMethod(OrgBaton.Clipboard1.paste) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let (token, mediaType) = try OrgBaton.Clipboard1.paste.decodeArguments(call.arguments)
                let clipboard = try self.clipboard()
                let contents: ClipboardContents
                do throws(ClipboardService.Refusal) {
                    contents = try await clipboard.paste(uid: uid, token: token, mediaType: mediaType)
                } catch {
                    throw Self.error(error)
                }
                // The reply carries a duplicate; the memfd here lives until the reply is written.
                DBusCallContext.keepUntilReplied(contents)
                return [.unixFD(contents.file.rawValue)]
            },
            DBusMethod(OrgBaton.Clipboard1.offerFiles) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let (files, expiresIn, copy) = try OrgBaton.Clipboard1.offerFiles.decodeArguments(call.arguments)
                let clipboard = try self.clipboard()
                do throws(ClipboardService.Refusal) {
                    try await clipboard.offerFiles(uid: uid, files: files, expiresIn: UInt16(min(expiresIn, 3_600)), copy: copy)
                } catch {
                    throw Self.error(error)
                }
                return []
            },
            DBusMethod(OrgBaton.Clipboard1.pasteFile) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let (token, index) = try OrgBaton.Clipboard1.pasteFile.decodeArguments(call.arguments)
                let clipboard = try self.clipboard()
                let file: ClipboardContents
                do throws(ClipboardService.Refusal) {
                    file = try await clipboard.pasteFile(uid: uid, token: token, index: Int(index))
                } catch {
                    throw Self.error(error)
                }
                DBusCallContext.keepUntilReplied(file)
                return [.unixFD(file.file.rawValue)]
            },
            DBusMethod(OrgBaton.Clipboard1.getStatus) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.caller(call.sender)
                let clipboard = try self.clipboard()
                return OrgBaton.Clipboard1.getStatus.encodeReply(await clipboard.status(uid: uid))
            },
        ])
    }

    /// The agent's connection going away unregisters it (and takes its copy back).
    private func watch(_ name: String) async throws {
        guard watches.withLock({ $0[name] == nil }) else { return }
        let subscription = try await connection.watchNameOwner(name) { [weak self] in
            guard let self else { return }
            let clipboard = self.service.withLock { $0 }
            self.watches.withLock { $0[name] = nil }
            Task { await clipboard?.agentLeft(busName: name) }
        }
        watches.withLock { $0[name] = subscription }
    }

    // MARK: ClipboardAgentCalls

    public func offered(_ offer: ClipboardOfferForAgent, to agent: ClipboardAgentEndpoint) async {
        if offer.kind == .files {
            let contract = OrgBaton.ClipboardAgent1.offeredFiles
            _ = try? await connection.call(destination: agent.busName, path: agent.path, interface: contract.interface, method: contract.name,
                                           arguments: contract.encodeArguments((offer.token, offer.memberName, offer.files)))
            return
        }
        let contract = OrgBaton.ClipboardAgent1.offered
        _ = try? await connection.call(destination: agent.busName, path: agent.path, interface: contract.interface, method: contract.name,
                                       arguments: contract.encodeArguments((offer.token, offer.memberName, offer.kind, offer.items)))
    }

    /// How long the copying account's agent has to open a file a member pastes.
    static let openFileTimeout: Duration = .seconds(10)

    public func openFile(copy: UInt64, index: Int, from agent: ClipboardAgentEndpoint) async throws(ClipboardOpenFailure) -> ClipboardContents {
        let contract = OrgBaton.ClipboardAgent1.openFile
        let reply: [DBusValue]
        do {
            reply = try await connection.call(destination: agent.busName, path: agent.path, interface: contract.interface, method: contract.name,
                                              arguments: contract.encodeArguments((copy, UInt32(index))), timeout: Self.openFileTimeout)
        } catch let error as DBusError {
            switch error.batonName {
            case .unknownActivity: throw .changed(error.message)
            case .unknownObject: throw .noSuchCopy
            default: throw .failed(error.message.isEmpty ? error.name : error.message)
            }
        } catch {
            throw .failed("\(error)")
        }
        // The reply's descriptor is a duplicate made for this reader: it is ours to close.
        guard reply.count == 1, case .unixFD(let descriptor) = reply[0], descriptor >= 0 else {
            for value in reply { if case .unixFD(let descriptor) = value, descriptor >= 0 { FileDescriptor(taking: descriptor).close() } }
            throw .failed("the agent's answer holds no descriptor")
        }
        return ClipboardContents(FileDescriptor(taking: descriptor))
    }

    public func withdrawn(token: UInt64, from agent: ClipboardAgentEndpoint) async {
        let contract = OrgBaton.ClipboardAgent1.withdrawn
        _ = try? await connection.call(destination: agent.busName, path: agent.path, interface: contract.interface, method: contract.name,
                                       arguments: contract.encodeArguments(token))
    }
}
