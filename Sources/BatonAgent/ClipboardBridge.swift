// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonPublishers
import BatonSystem
import BatonWayland
import BatonX11
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// baton-agent's universal clipboard (docs/clipboard.md, "The agent"): between the session clipboard
/// (`SessionClipboard`) and batond (BatonClient's Clipboard1 calls). Its decisions are
/// `ClipboardBridgeMachine`'s; this actor feeds it, one input at a time, and carries its commands out.
/// Off unless publishers.conf says `clipboard = on`; the session clipboard is open only while on.
public actor ClipboardBridge {
    enum Input: Sendable {
        case event(ClipboardBridgeEvent)
        case readFinished(ReadCopy)
        /// `.readFiles` found files and looked at them: the record, and the list to offer.
        case filesFound(revision: UInt64, ClipboardFileSource.Copy, [ClipboardFile])
        case settingsChanged
        /// The session clipboard's events ended by themselves (the display went away).
        case sessionEnded
    }

    public struct Limits: Sendable {
        /// The most one copy reads, all types together.
        public var readBytes: Int
        /// How long one paste waits for batond (and the machine that copied); a file's paste waits
        /// this long and a second more per MiB of the file.
        public var pasteTimeout: Duration
        public init(readBytes: Int = ClipboardBridgeMachine.defaultReadLimit, pasteTimeout: Duration = .seconds(30)) {
            self.readBytes = readBytes
            self.pasteTimeout = pasteTimeout
        }

        func pasteTimeout(ofFile size: UInt64) -> Duration { pasteTimeout + .seconds(Int64(size >> 20)) }
    }

    let daemon: BatonConnection
    private let environment: [String: String]
    let logger: any AgentLog
    let limits: Limits
    private let open: @Sendable ([String: String]) throws(ClipboardError) -> OpenedSessionClipboard
    var machine: ClipboardBridgeMachine
    private var session: OpenedSessionClipboard?
    private var unavailable: String?
    private let inputs: AsyncStream<Input>
    let feed: AsyncStream<Input>.Continuation
    private var tasks: [Task<Void, Never>] = []
    private var sessionEvents: Task<Void, Never>?
    private var currentRead: ReadCopy?
    /// The record of our newest copy of files (its paths and what each file was), for batond's
    /// OpenFile while it is offered.
    var filesCopy: ClipboardFileSource.Copy?
    /// A member's copy of files being pulled, or pulled, for the pastes of it: the local paths.
    var filePulls: [UInt64: Task<[[UInt8]], any Error>] = [:]
    /// The copies whose pull finished (their local copies are complete).
    var filePullsDone: Set<UInt64> = []
    let fileCache: ClipboardFileCache?
    private var lastStatus: ClipboardAgentStatus?
    /// Inputs handled since `start`, and the members' copies batond handed over (status, tests).
    public private(set) var inputsHandled = 0
    public private(set) var copiesHandedOver = 0
    private var handling = false
    private var sessionLost = false
    static let lostSession = "the connection to the session clipboard was lost; restart baton-agent (systemctl --user restart baton-agent)"

    public init(daemon: BatonConnection, environment: [String: String], logger: any AgentLog, limits: Limits = Limits(),
                open: @escaping @Sendable ([String: String]) throws(ClipboardError) -> OpenedSessionClipboard = makeSessionClipboard) {
        self.daemon = daemon
        self.environment = environment
        self.logger = logger
        self.limits = limits
        self.open = open
        fileCache = ClipboardFileCache(environment: environment)
        machine = ClipboardBridgeMachine(readLimit: limits.readBytes)
        (inputs, feed) = AsyncStream.makeStream(of: Input.self)
    }

    /// The machine's state (status, tests).
    public var state: ClipboardBridgeMachine { machine }

    /// Follows publishers.conf, batond's bus name and (while on) the session clipboard until `stop`.
    public func start() async throws {
        let owners = try await daemon.daemonOwnerChanges()
        let watch = try RecentDocumentsWatch(files: [PublisherSettings.fileURL(environment: environment)].compactMap { $0 })
        let feed = self.feed
        tasks.append(Task {
            for await change in owners where change.newOwner != nil || change.oldOwner != nil {
                feed.yield(.event(change.newOwner == nil ? .daemonVanished : .daemonAppeared))
            }
        })
        tasks.append(Task {
            for await _ in watch.changes { feed.yield(.settingsChanged) }
            withExtendedLifetime(watch) {}
        })
        if (try? await daemon.dbus.nameOwner(daemon.busName)) != nil { feed.yield(.event(.daemonAppeared)) }
        feed.yield(.settingsChanged)
        let inputs = self.inputs
        // Holds the bridge until `stop` ends the inputs: the agent keeps no other reference to it.
        tasks.append(Task {
            for await input in inputs { await self.handle(input) }
        })
    }

    /// Turns the bridge off: batond forgets the agent, the session clipboard is given up and closed.
    public func stop() async {
        for task in tasks { task.cancel() }
        tasks = []
        feed.finish()
        _ = machine.handle(.settings(enabled: false))
        try? await daemon.unregisterClipboardAgent()
        await closeSession()
        dropFilePulls(keeping: nil)
        ClipboardAgentStatus.remove(environment: environment)
    }

    /// Whether `condition` holds of the machine with no input half handled (its commands all carried
    /// out): what tests wait for.
    public func settled(_ condition: @Sendable (ClipboardBridgeMachine) -> Bool) -> Bool { !handling && condition(machine) }

    private func handle(_ input: Input) async {
        handling = true
        defer { handling = false }
        switch input {
        case .settingsChanged:
            await settingsChanged()
        case .sessionEnded:
            guard session != nil else { break }
            logger.log("the connection to the \(session?.name ?? "session clipboard") was lost: the clipboard is not shared until baton-agent restarts")
            await run(.settings(enabled: false))
            await closeSession()
            sessionLost = true
            unavailable = Self.lostSession
        case .event(let event):
            if case .offered = event { copiesHandedOver += 1 }
            await run(event)
        case .readFinished(let copy):
            currentRead = copy
            await run(.readDone(revision: copy.revision, items: copy.items, leftOut: copy.leftOut))
            currentRead = nil
        case .filesFound(let revision, let copy, let files):
            filesCopy = copy
            await run(.filesRead(revision: revision, copy: copy.id, files: files))
        }
        inputsHandled += 1
        writeStatus()
    }

    private func settingsChanged() async {
        let on = PublisherSettings.load(environment: environment).isEnabled(.clipboard)
        guard on != machine.enabled || (on && session == nil) else { return }
        // A display connection that was lost is not opened again (the session is ending).
        if on, sessionLost {
            unavailable = Self.lostSession
            return
        }
        if on {
            if session == nil {
                do throws(ClipboardError) { session = try open(environment) } catch {
                    if unavailable == nil { logger.log("the clipboard is on, but \(error)") }
                    unavailable = "\(error)"
                    return
                }
                unavailable = nil
                followSession()
                // Copies of files an earlier run left go.
                fileCache?.removeAll()
            }
            await run(.settings(enabled: true))
        } else {
            unavailable = nil
            await run(.settings(enabled: false))
            await closeSession()
        }
    }

    private func followSession() {
        guard let events = session?.clipboard.events else { return }
        let feed = self.feed
        sessionEvents = Task {
            for await event in events { feed.yield(.event(.session(event))) }
            if !Task.isCancelled { feed.yield(.sessionEnded) }
        }
    }

    private func closeSession() async {
        guard let session else { return }
        self.session = nil
        sessionEvents?.cancel()
        sessionEvents = nil
        await session.clipboard.withdraw()
        session.close()
    }

    /// Feeds one event to the machine and carries out its commands, in order; an outcome that is an
    /// event itself is fed at once.
    func run(_ event: ClipboardBridgeEvent) async {
        var pending = [event]
        while !pending.isEmpty {
            let commands = machine.handle(pending.removeFirst())
            for command in commands {
                if let outcome = await perform(command) { pending.append(outcome) }
            }
        }
        // The session clipboard holds something else now (a newer copy from a member, a copy made here,
        // sharing off or batond gone): the local copies of a member's files no longer held go, and
        // their pulls stop. A copy withdrawn or expired goes too, except while a paste of it runs: that
        // paste finishes (the app that asked copies the files) and its files go at the next change.
        let keep = machine.held?.kind == .files ? machine.held?.token : nil
        if Self.replacesClipboard(event) {
            dropFilePulls(keeping: keep)
        } else if case .withdrawn = event {
            dropFilePulls(keeping: keep, unlessRunning: true)
        }
        if case .offeredFiles = machine.ringOffer {} else if case .reading = machine.ringOffer {} else { filesCopy = nil }
    }

    static func replacesClipboard(_ event: ClipboardBridgeEvent) -> Bool {
        switch event {
        case .session, .offered, .offeredFiles, .settings(enabled: false), .daemonVanished, .daemonAppeared, .registrationFailed: true
        default: false
        }
    }

    private func perform(_ command: ClipboardBridgeCommand) async -> ClipboardBridgeEvent? {
        switch command {
        case .log(let line):
            logger.log(line)
        case .register:
            let feed = self.feed
            let handlers = ClipboardAgentHandlers(
                offered: { copy in feed.yield(.event(.offered(token: copy.token, device: copy.device, kind: copy.kind, items: copy.items))) },
                withdrawn: { token in feed.yield(.event(.withdrawn(token: token))) },
                offeredFiles: { copy in feed.yield(.event(.offeredFiles(token: copy.token, device: copy.device, files: copy.files))) },
                openFile: { [weak self] copy, index throws(ClipboardOpenRefusal) in
                    guard let self else { throw .noSuchCopy }
                    return try await self.openFile(copy: copy, index: index)
                })
            do throws(BatonClientError) { try await daemon.registerClipboardAgent(handlers) } catch {
                return .registrationFailed(error.message)
            }
            logger.log("sharing the clipboard of the \(session?.name ?? "session") with the ring")
        case .unregister:
            do throws(BatonClientError) { try await daemon.unregisterClipboardAgent() } catch { logger.log(error.message) }
        case .read(let revision, let types, let limit):
            guard let clipboard = session?.clipboard else { return nil }
            let feed = self.feed
            Task { feed.yield(.readFinished(await Self.read(revision: revision, types: types, limit: limit, from: clipboard))) }
        case .readFiles(let revision, let type, let otherwise, let limit):
            guard let clipboard = session?.clipboard else { return nil }
            let feed = self.feed
            let id = UInt64.random(in: 1...UInt64.max)
            Task {
                switch await Self.readFiles(revision: revision, type: type, from: clipboard, id: id) {
                case .noFiles:
                    feed.yield(.readFinished(await Self.read(revision: revision, types: otherwise, limit: limit, from: clipboard)))
                case .refused(let why):
                    feed.yield(.event(.filesRefused(revision: revision, why)))
                case .files(let copy, let files):
                    feed.yield(.filesFound(revision: revision, copy, files))
                }
            }
        case .offerFiles(let revision, let copy, let files):
            do throws(BatonClientError) { try await daemon.offerFiles(files, copy: copy) } catch {
                return .offerFailed(revision: revision, error.message)
            }
        case .offer(let revision, let kind):
            guard let copy = currentRead, copy.revision == revision, copy.descriptor >= 0 else { return .offerFailed(revision: revision, "the copy is gone") }
            // `currentRead` keeps the file open until the call is answered.
            do throws(BatonClientError) { try await daemon.offerClipboard(kind: kind, items: copy.items, contents: copy.descriptor) } catch {
                return .offerFailed(revision: revision, error.message)
            }
        case .withdraw:
            do throws(BatonClientError) { try await daemon.withdrawClipboard() } catch { logger.log(error.message) }
        case .take(let token, let types):
            guard let clipboard = session?.clipboard else { return .takeFailed(token: token, "the session clipboard is closed") }
            do throws(ClipboardError) {
                try await clipboard.offer(types: types) { [weak self] type in
                    guard let self else { throw ClipboardError.unavailable("the agent stopped") }
                    return try await self.provide(token: token, type: type)
                }
            } catch {
                return .takeFailed(token: token, error.description)
            }
        case .release:
            await session?.clipboard.withdraw()
        }
        return nil
    }

    /// A pasting app asks for `type` of the member's copy `token`: pulled through batond now, within
    /// the paste timeout; a failure fails this one request.
    private func provide(token: UInt64, type: String) async throws -> [UInt8] {
        guard machine.serves(token: token) else { throw ClipboardError.replaced }
        if machine.servesFiles(token: token), let files = machine.held?.files, let device = machine.held?.device {
            let paths = try await pulledFiles(token: token, files: files, device: device)
            return type == ClipboardFileURIs.gnomeCopiedFilesType ? ClipboardFileURIs.gnomeCopiedFiles(paths: paths) : ClipboardFileURIs.uriList(paths: paths)
        }
        do throws(BatonClientError) {
            return try await daemon.pasteBytes(token: token, mediaType: type, limit: limits.readBytes, timeout: limits.pasteTimeout)
        } catch {
            logger.log(error.message)
            throw error
        }
    }

    /// Reads `types` of the session's copy into one sealed memory file, at most `limit` bytes in all;
    /// a type that does not fit, or cannot be read, is left out with the reason.
    static func read(revision: UInt64, types: [String], limit: Int, from clipboard: any SessionClipboard) async -> ReadCopy {
        var items: [ClipboardItem] = [], leftOut: [String] = []
        let file: FileDescriptor
        do throws(Errno) { file = try SealedMemoryFile.makeUnsealed(name: "baton-copy") } catch {
            return ReadCopy(revision: revision, items: [], leftOut: ["every type: no memory file (\(error))"], file: nil)
        }
        var used = 0
        for type in types {
            let room = min(limit - used, Int(ClipboardItem.maxSize))
            guard room > 0 else {
                leftOut.append("\(type): the copy's other types used the \(limit)-byte limit")
                continue
            }
            let bytes: [UInt8]
            do throws(ClipboardError) { bytes = try await clipboard.read(type: type, limit: room) } catch {
                leftOut.append("\(type): \(error.description)")
                continue
            }
            do {
                let item = try ClipboardItem(mediaType: type, size: UInt64(bytes.count))
                try file.writeAll(bytes)
                items.append(item)
                used += bytes.count
            } catch {
                // A failed write leaves the file's end unknown: nothing of this copy is offered.
                return ReadCopy(revision: revision, items: [], leftOut: ["every type: \(type) could not be kept (\(error))"], file: nil)
            }
        }
        do throws(Errno) { try SealedMemoryFile.seal(file) } catch {
            return ReadCopy(revision: revision, items: [], leftOut: ["every type: sealing failed (\(error))"], file: nil)
        }
        return ReadCopy(revision: revision, items: items, leftOut: leftOut, file: file)
    }

    // MARK: Status

    func writeStatus() {
        let status = ClipboardAgentStatus(
            pid: getpid(), sessionClipboard: session?.name ?? SessionClipboardChoice(environment: environment).description,
            registered: machine.registered, offer: Self.describe(machine.ringOffer), taken: machine.held.map(Self.describe),
            problem: unavailable ?? (machine.enabled && !machine.daemonPresent ? "batond is not running" : nil), note: machine.note)
        guard status != lastStatus else { return }
        lastStatus = status
        if !status.save(environment: environment) { logger.log("cannot write the clipboard status file") }
    }

    static func describe(_ offer: ClipboardBridgeMachine.RingOffer) -> String? {
        switch offer {
        case .none: nil
        case .reading: "a copy being read"
        case .offered(_, let kind, let items): "\(kind.name): \(describe(items))"
        case .offeredFiles(_, _, let files): "files: \(describe(files))"
        }
    }

    static func describe(_ held: ClipboardBridgeMachine.Held) -> String {
        held.kind == .files ? "files from \(held.device): \(describe(held.files))" : "\(held.kind.name) from \(held.device): \(describe(held.items))"
    }

    static func describe(_ files: [ClipboardFile]) -> String {
        "\(files.count) file\(files.count == 1 ? "" : "s"), \(files.reduce(UInt64(0)) { $0 + $1.size }) bytes"
    }

    static func describe(_ items: [ClipboardItem]) -> String {
        items.map { "\($0.mediaType) \($0.size) bytes" }.joined(separator: ", ")
    }
}
