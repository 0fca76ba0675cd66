// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonClient
import BatonCore
import BatonDBus
import BatonPublishers
import BatonTestBus
import BatonXvfb
import Foundation
import Glibc
import Testing
@testable import BatonService

/// Copies of files from app to app (issue 27's file lists): two paired daemons on a test bus (fake
/// radios carry the adverts), two Xvfb displays, baton-agent's real bridge on each; `xclip -t
/// text/uri-list` copies file URIs on alpha, `xclip -o -t text/uri-list` pastes on beta, which gets
/// URIs of local copies whose bytes are the files'. No file's byte leaves alpha before the paste.
@Suite("BatonServiceTests: copied files from xclip on one display to xclip on another, pulled as documents at the paste", .serialized)
struct ClipboardFilesEndToEndTests {
    typealias Machine = ClipboardAgentEndToEndTests.Machine
    typealias Paired = ClipboardAgentEndToEndTests.Paired
    let carrier = ClipboardAgentEndToEndTests()

    /// Files on alpha's side, in a directory of the test's.
    struct Source {
        let directory: String

        init(_ bus: TestBus) throws {
            directory = bus.directory.appendingPathComponent("alpha-files").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }

        @discardableResult
        func write(_ name: String, _ bytes: [UInt8]) throws -> String {
            let path = directory + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }

        func uriList(_ paths: [String]) -> [UInt8] { ClipboardFileURIs.uriList(paths: paths.map { Array($0.utf8) }) }
    }

    func copyFiles(_ list: [UInt8], on alpha: Machine, type: String = "text/uri-list") async throws -> [UInt8]? {
        let before = alpha.radio.lastAdvert
        try await xclipCopy(list, display: alpha.display.display, type: type)
        return before
    }

    /// Waits until alpha offers a new copy as files (not the one offered before) and beta's agent holds
    /// it; returns beta's token.
    func offeredAndTaken(_ alpha: Machine, _ beta: Machine, after before: [UInt8]?) async throws -> UInt64? {
        let heldBefore = await beta.bridge.state.held?.token
        guard await eventually(timeout: .seconds(120), {
            await alpha.bridge.settled { if case .offeredFiles = $0.ringOffer { true } else { false } } && alpha.radio.lastAdvert != before
        }) else { return nil }
        #expect(await alpha.clipboard.offeredKind == .files)
        try await carrier.carryAdvert(from: alpha, to: beta, after: before)
        guard await eventually(timeout: .seconds(120), {
            await beta.bridge.settled { $0.held?.kind == .files && $0.held?.token != heldBefore }
        }) else { return nil }
        return await beta.bridge.state.held?.token
    }

    func paste(_ machine: Machine, _ type: String) async throws -> XclipResult {
        try await xclip(["-selection", "clipboard", "-o", "-t", type], display: machine.display.display)
    }

    /// The local paths of a pasted uri-list.
    func paths(of pasted: XclipResult) -> [String] {
        ClipboardFileURIs.uriListLines(Array(pasted.output)).compactMap { ClipboardFileURIs.localPath(ofFileURI: $0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    func cacheBase(_ machine: Machine) -> String { machine.environment["HOME"]! + "/.cache/baton/clipboard" }

    func mode(_ path: String) -> mode_t {
        var status = stat()
        return lstat(path, &status) == 0 ? status.st_mode & 0o7777 : 0
    }

    @Test func filesCrossAtThePasteAChangedFileFailsClearlyAndLimitsAreRefused() async throws {
        let paired = try await Paired.start()
        defer { paired.close() }
        let (bus, alpha, beta) = (paired.bus, paired.alpha, paired.beta)
        let source = try Source(bus)

        // Three files, one with a space and a non-ASCII letter in its name, one empty.
        let report = (0..<300_001).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 11) }
        let notes = Array("notes for beta\n".utf8)
        let files = [try source.write("report.pdf", report), try source.write("Notes ü.txt", notes), try source.write("empty", [])]
        var before = try await copyFiles(source.uriList(files), on: alpha)
        let token = try #require(try await offeredAndTaken(alpha, beta, after: before), "\(alpha.log.lines.withLock { $0 }) \(beta.log.lines.withLock { $0 })")
        // Only the list crossed (with the offer): no file's byte, nothing in beta's cache.
        #expect(await alpha.clipboard.fileRequestsAnswered == 0)
        #expect(await alpha.clipboard.dataRequestsAnswered == 1)
        #expect(!FileManager.default.fileExists(atPath: cacheBase(beta) + "/" + String(token, radix: 16)))
        let total = report.count + notes.count
        #expect(ClipboardAgentStatus.read(environment: alpha.environment)?.offer == "files: 3 files, \(total) bytes")
        #expect(ClipboardAgentStatus.read(environment: beta.environment)?.taken == "files from alpha: 3 files, \(total) bytes")

        // The paste: a uri-list of local copies, each with the file's name and bytes, 0600 in 0700 folders.
        let pasted = try await paste(beta, "text/uri-list")
        #expect(pasted.status == 0, "\(beta.log.lines.withLock { $0 })")
        let local = paths(of: pasted)
        try #require(local.count == 3, "\(beta.log.lines.withLock { $0 }) \(alpha.log.lines.withLock { $0 })")
        #expect(local.map { ($0 as NSString).lastPathComponent } == ["report.pdf", "Notes ü.txt", "empty"])
        #expect(local.allSatisfy { $0.hasPrefix(cacheBase(beta) + "/" + String(token, radix: 16) + "/") })
        #expect(local.count == 3 && FileManager.default.contents(atPath: local[0]) == Data(report))
        #expect(local.count == 3 && FileManager.default.contents(atPath: local[1]) == Data(notes))
        #expect(local.count == 3 && FileManager.default.contents(atPath: local[2]) == Data())
        #expect(local.allSatisfy { mode($0) == 0o600 } && mode(cacheBase(beta) + "/" + String(token, radix: 16)) == 0o700)
        #expect(String(decoding: pasted.output, as: UTF8.self).contains("Notes%20%C3%BC.txt\r\n"))
        #expect(await alpha.clipboard.fileRequestsAnswered == 3)
        // GNOME's list names the same copies (always "copy"); nothing is pulled again.
        let gnome = try await paste(beta, "x-special/gnome-copied-files")
        #expect(gnome.status == 0 && gnome.output == Data(ClipboardFileURIs.gnomeCopiedFiles(paths: local.map { Array($0.utf8) })))
        #expect(await alpha.clipboard.fileRequestsAnswered == 3)
        // Beta's copy of files is never offered back.
        #expect(await beta.clipboard.offeredKind == nil)

        // A cut (GNOME's list) is shared as a copy: the source's file stays where it is.
        before = try await copyFiles(Array(("cut\n" + ClipboardFileURIs.fileURI(path: Array(files[1].utf8))).utf8), on: alpha,
                                     type: "x-special/gnome-copied-files")
        let cutToken = try #require(try await offeredAndTaken(alpha, beta, after: before))
        // The copy replaced: the local copies of the one before went.
        #expect(await eventually(timeout: .seconds(120)) { !FileManager.default.fileExists(atPath: local[0]) })
        let cutPaste = try await paste(beta, "x-special/gnome-copied-files")
        #expect(cutPaste.status == 0 && String(decoding: cutPaste.output, as: UTF8.self).hasPrefix("copy\nfile://"))
        #expect(FileManager.default.contents(atPath: files[1]) == Data(notes))
        #expect(cutToken != token)

        // A file changed after the copy: the paste fails, saying which file and what to do; never old bytes.
        let draft = try source.write("draft.txt", Array("first words".utf8))
        before = try await copyFiles(source.uriList([draft]), on: alpha)
        let draftToken = try #require(try await offeredAndTaken(alpha, beta, after: before))
        let answered = await alpha.clipboard.fileRequestsAnswered
        try source.write("draft.txt", Array("second, longer words".utf8))
        let failed = try await paste(beta, "text/uri-list")
        #expect(failed.status != 0 || failed.output.isEmpty)
        #expect(await alpha.clipboard.fileRequestsAnswered == answered + 1)
        let said = beta.log.lines.withLock { $0 }.first { $0.contains("draft.txt changed on alpha since it was copied") }
        #expect(said?.contains("copy it again on alpha") == true, "\(beta.log.lines.withLock { $0 })")
        #expect(ClipboardAgentStatus.read(environment: beta.environment)?.note?.contains("draft.txt changed on alpha") == true)
        #expect(!FileManager.default.fileExists(atPath: cacheBase(beta) + "/" + String(draftToken, radix: 16) + "/0/draft.txt"))
        // Alpha took the copy back (its advert loses the kind) and says why.
        #expect(await eventually(timeout: .seconds(120)) { await alpha.clipboard.offeredKind == nil })
        #expect(await eventually(timeout: .seconds(120)) { ClipboardAgentStatus.read(environment: alpha.environment)?.note?.contains("draft.txt changed") == true })

        // Limits: a folder, more than 256 files, more than 1 GiB in all. None is offered, each says why.
        let folder = source.directory + "/a folder"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let many = try (0...ClipboardFileList.maxFiles).map { try source.write("many-\($0)", []) }
        let huge = try source.write("huge.iso", [])
        #expect(truncate(huge, off_t(ClipboardFileList.totalLimit) + 1) == 0)
        let refusals: [([String], String)] = [
            ([files[0], folder], "a folder is a folder; folders are not shared"),
            (many, "holds 257 files; at most 256 are shared at once"),
            ([files[1], huge], "more than the 1073741824 shared at once"),
        ]
        for (paths, reason) in refusals {
            try await xclipCopy(source.uriList(paths), display: alpha.display.display, type: "text/uri-list")
            #expect(await eventually(timeout: .seconds(120)) {
                ClipboardAgentStatus.read(environment: alpha.environment)?.note?.contains(reason) == true
            }, "\(reason): \(alpha.log.lines.withLock { $0 })")
            #expect(await alpha.clipboard.offeredKind == nil)
        }
        #expect(await alpha.clipboard.fileRequestsAnswered == answered + 1)

        // A uri-list of links names no local file: alpha offers it as it is, as text; beta's agent
        // takes only text, HTML and image types of a copy that is not one of files (a uri-list could
        // name alpha's own files: the red team's rule), so a list of links alone is not taken there.
        let links = Array("https://example.org/a\r\nhttps://example.org/b\r\n".utf8)
        before = alpha.radio.lastAdvert
        try await xclipCopy(links, display: alpha.display.display, type: "text/uri-list")
        #expect(await carrier.offered(alpha, .text), "\(alpha.log.lines.withLock { $0 })")
        try await carrier.carryAdvert(from: alpha, to: beta, after: before)
        // The copy of files beta held went with it, and its folder; nothing was taken instead.
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held == nil } })
        #expect(await eventually(timeout: .seconds(120)) { !FileManager.default.fileExists(atPath: cacheBase(beta) + "/" + String(cutToken, radix: 16)) })
        let linked = try await paste(beta, "text/uri-list")
        #expect(linked.status != 0 || linked.output.isEmpty)

        // A copy withdrawn at its machine (alpha turns the clipboard off): beta's local copies go with it.
        before = try await copyFiles(source.uriList([files[1]]), on: alpha)
        let lastToken = try #require(try await offeredAndTaken(alpha, beta, after: before))
        let lastPaste = try await paste(beta, "text/uri-list")
        #expect(lastPaste.status == 0 && paths(of: lastPaste).count == 1)
        let lastFolder = cacheBase(beta) + "/" + String(lastToken, radix: 16)
        #expect(FileManager.default.fileExists(atPath: lastFolder))
        before = alpha.radio.lastAdvert
        try alpha.setClipboard(false)
        #expect(await eventually(timeout: .seconds(120)) { await alpha.clipboard.offeredKind == nil })
        try await carrier.carryAdvert(from: alpha, to: beta, after: before)
        #expect(await eventually(timeout: .seconds(120)) { await beta.bridge.settled { $0.held == nil } })
        #expect(await eventually(timeout: .seconds(120)) { !FileManager.default.fileExists(atPath: lastFolder) })

        await alpha.stop()
        await beta.stop()
        // The agent's stop leaves no pasted copy behind.
        #expect((try? FileManager.default.contentsOfDirectory(atPath: cacheBase(beta)))?.isEmpty ?? true)
    }

    /// An X11 session on alpha, a Wayland one (headless sway) on beta: files copied with xclip are
    /// pasted with `wl-paste -t text/uri-list`, and files copied with `wl-copy -t text/uri-list` are
    /// pasted with `xclip -o`; each file's bytes cross only at the paste.
    @Test func filesCrossBetweenAnX11AndAWaylandSession() async throws {
        let paired = try await Paired.start(betaWayland: true)
        defer { paired.close() }
        let (bus, alpha, beta) = (paired.bus, paired.alpha, paired.beta)
        let sway = try #require(beta.sway)
        let source = try Source(bus)
        let photo = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 40_503) }
        let path = try source.write("photo.png", photo)
        let before = try await copyFiles(source.uriList([path]), on: alpha)
        _ = try #require(try await offeredAndTaken(alpha, beta, after: before), "\(beta.log.lines.withLock { $0 })")
        #expect(await alpha.clipboard.fileRequestsAnswered == 0)
        let pasted = try await sway.wlPaste(["-t", "text/uri-list"])
        let local = ClipboardFileURIs.uriListLines(pasted.output).compactMap { ClipboardFileURIs.localPath(ofFileURI: $0) }.map { String(decoding: $0, as: UTF8.self) }
        #expect(pasted.status == 0 && local.count == 1, "\(beta.log.lines.withLock { $0 })")
        #expect(local.first.map { FileManager.default.contents(atPath: $0) } == Data(photo))
        #expect(await alpha.clipboard.fileRequestsAnswered == 1)

        // Back: wl-copy in beta's session, xclip -o on alpha.
        let notes = Array("from the Wayland side\n".utf8)
        let back = try source.write("back notes.txt", notes)
        let advertBefore = beta.radio.lastAdvert
        try await sway.wlCopy(source.uriList([back]), arguments: ["-t", "text/uri-list"])
        #expect(await eventually(timeout: .seconds(120)) {
            await beta.bridge.settled { if case .offeredFiles = $0.ringOffer { true } else { false } } && beta.radio.lastAdvert != advertBefore
        }, "\(beta.log.lines.withLock { $0 })")
        try await carrier.carryAdvert(from: beta, to: alpha, after: advertBefore)
        #expect(await eventually(timeout: .seconds(120)) { await alpha.bridge.settled { $0.held?.kind == .files } })
        #expect(await beta.clipboard.fileRequestsAnswered == 0)
        let result = try await paste(alpha, "text/uri-list")
        let arrived = paths(of: result)
        #expect(result.status == 0 && arrived.map { ($0 as NSString).lastPathComponent } == ["back notes.txt"])
        #expect(arrived.first.map { FileManager.default.contents(atPath: $0) } == Data(notes))
        #expect(await beta.clipboard.fileRequestsAnswered == 1)

        await alpha.stop()
        await beta.stop()
    }
}
