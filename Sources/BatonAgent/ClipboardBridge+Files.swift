// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import BatonPublishers
import BatonSystem
#if canImport(Glibc)
import Glibc
#endif

/// The bridge's copies of files (docs/clipboard.md, "Files"): our copy's files opened again when batond
/// asks (a member pastes), a member's files pulled once per copy into the user's cache for the pastes
/// of it, and those local copies removed when the clipboard holds something else.
extension ClipboardBridge {
    /// Cancels the pulls of copies of files other than `token` and removes their local copies;
    /// `unlessRunning`: a pull still under way is left to finish (its copies go at a later drop).
    func dropFilePulls(keeping token: UInt64?, unlessRunning: Bool = false) {
        for (other, pull) in filePulls where other != token {
            if unlessRunning, !filePullsDone.contains(other) { continue }
            pull.cancel()
            filePulls[other] = nil
            filePullsDone.remove(other)
            fileCache?.remove(token: other)
        }
    }

    /// The local copies of a member's copy of files: pulled once (each file through Clipboard1.PasteFile
    /// into the user's cache directory), for every paste of it; a failed pull is tried again by the next paste.
    func pulledFiles(token: UInt64, files: [ClipboardFile], device: String) async throws -> [[UInt8]] {
        let pull: Task<[[UInt8]], any Error>
        if let running = filePulls[token] {
            pull = running
        } else {
            guard let cache = fileCache else {
                throw ClipboardError.unavailable("neither XDG_CACHE_HOME nor HOME is set: there is no place for pasted files")
            }
            let daemon = self.daemon, limits = self.limits
            pull = Task {
                var paths: [[UInt8]] = []
                for (index, file) in files.enumerated() {
                    try Task.checkCancellation()
                    let pulled = try await daemon.pasteFile(token: token, index: index, name: file.name, timeout: limits.pasteTimeout(ofFile: file.size))
                    guard let size = FileIdentity(of: pulled)?.size, size == file.size else {
                        throw ClipboardError.unavailable("batond handed over \(file.name) with another size than offered")
                    }
                    do throws(Errno) {
                        paths.append(Array(try cache.store(pulled, size: size, token: token, index: index, name: file.name).utf8))
                    } catch {
                        throw ClipboardError.unavailable("\(file.name) could not be written to \(cache.base): \(error)")
                    }
                }
                return paths
            }
            filePulls[token] = pull
        }
        do {
            let paths = try await pull.value
            if filePulls[token] == pull { filePullsDone.insert(token) }
            return paths
        } catch {
            if filePulls[token] == pull {
                filePulls[token] = nil
                fileCache?.remove(token: token)
            }
            let why = (error as? BatonClientError)?.message ?? "\(error)"
            logger.log("pasting the files from \(device) failed: \(why)")
            await run(.pasteFailed("the last paste of files from \(device) failed: \(why)"))
            writeStatus()
            throw error
        }
    }

    /// batond asks for file `index` of our files copy `copy` (a member pastes it): opened again and
    /// checked against what it was at the copy. A changed file takes the copy back.
    func openFile(copy: UInt64, index: Int) async throws(ClipboardOpenRefusal) -> FileDescriptor {
        guard case .offeredFiles(_, copy, _) = machine.ringOffer, let record = filesCopy, record.id == copy,
              index >= 0, index < record.files.count else { throw .noSuchCopy }
        do throws(ClipboardOpenRefusal) {
            return try ClipboardFileSource.open(record.files[index])
        } catch {
            if case .changed(let why) = error {
                logger.log(why)
                feed.yield(.event(.fileChanged(copy: copy, why)))
            }
            throw error
        }
    }

    enum FilesOutcome: Sendable {
        case noFiles
        case refused(String)
        case files(ClipboardFileSource.Copy, [ClipboardFile])
    }

    /// Reads the list of files `type` of the session's copy and looks at each local file it names (as
    /// the user; no byte of them is read).
    static func readFiles(revision: UInt64, type: String, from clipboard: any SessionClipboard, id: UInt64) async -> FilesOutcome {
        let bytes: [UInt8]
        do throws(ClipboardError) { bytes = try await clipboard.read(type: type, limit: ClipboardFileURIs.maxListBytes) } catch {
            if case .overLimit = error { return .refused("its list of files is larger than \(ClipboardFileURIs.maxListBytes) bytes") }
            return .noFiles
        }
        let selection = type == ClipboardFileURIs.gnomeCopiedFilesType
            ? ClipboardFileURIs.selection(gnomeCopiedFiles: bytes) : ClipboardFileURIs.selection(uriList: bytes)
        guard let selection, !selection.paths.isEmpty else { return .noFiles }
        switch ClipboardFileSource.inspect(selection, id: id) {
        case .failure(let refusal): return .refused(refusal.description)
        case .success(let (copy, files)): return .files(copy, files)
        }
    }

}
