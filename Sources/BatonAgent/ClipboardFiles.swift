// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import BatonPublishers
import BatonSystem
import CGio
#if canImport(Glibc)
import Glibc
#endif

/// The agent's side of copies of files (docs/clipboard.md, "Files"), the parts that touch files: on
/// the copying side, what each copied path is (looked at as the user, nothing read) and, when a member
/// pastes, the file opened again and checked against what it was; on the pasting side, the directory
/// of the user's where pulled files are put.
enum ClipboardFileSource {
    /// One copied file as it was at the copy: opened again only when a member pastes it.
    struct Copied: Sendable, Hashable {
        var path: [UInt8]
        var name: String
        var identity: FileIdentity
    }

    /// The agent's record of its files copy: its id (given to batond) and its files in list order.
    struct Copy: Sendable {
        var id: UInt64
        var files: [Copied]
    }

    /// Looks at each path of a copy (opens it read-only as the user, never reads a byte: the kernel's
    /// permission checks decide, following symbolic links as any program of the user would) and
    /// decides with `ClipboardFileCopy.list`: the copy to offer, or why it is not offered.
    static func inspect(_ selection: ClipboardFileURIs.Selection, id: UInt64) -> Result<(Copy, [ClipboardFile]), ClipboardFileCopy.Refusal> {
        guard selection.paths.count <= ClipboardFileList.maxFiles else {
            return .failure(.init("it holds \(selection.paths.count) files; at most \(ClipboardFileList.maxFiles) are shared at once"))
        }
        var facts: [(path: [UInt8], facts: ClipboardFileCopy.Facts)] = []
        var identities: [FileIdentity?] = []
        for path in selection.paths {
            do throws(Errno) {
                let file = try FileDescriptor.open(pathBytes: path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
                let identity = FileIdentity(of: file)
                switch identity?.kind {
                case .regular: facts.append((path, .regular(size: identity!.size)))
                case .directory: facts.append((path, .directory))
                default: facts.append((path, .special))
                }
                identities.append(identity)
            } catch {
                facts.append((path, error.code == EISDIR ? .directory : .unreadable(error.description)))
                identities.append(nil)
            }
        }
        switch ClipboardFileCopy.list(facts, mediaType: mediaType(ofName:)) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let list):
            var copied: [Copied] = []
            for (index, file) in list.files.enumerated() {
                guard let identity = identities[index] else { return .failure(.init("\(file.name) cannot be read")) }
                copied.append(Copied(path: selection.paths[index], name: file.name, identity: identity))
            }
            return .success((Copy(id: id, files: copied), list.files))
        }
    }

    /// Opens a copied file again for a member's paste: the same file (inode), unchanged (size, mtime,
    /// ctime) since the copy, else the refusal names it.
    static func open(_ copied: Copied) throws(ClipboardOpenRefusal) -> FileDescriptor {
        let file: FileDescriptor
        do throws(Errno) { file = try FileDescriptor.open(pathBytes: copied.path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) } catch {
            throw .changed("\(copied.name) is gone or cannot be read since it was copied (\(error))")
        }
        guard let now = FileIdentity(of: file), now.isUnchanged(from: copied.identity) else {
            throw .changed("\(copied.name) changed since it was copied")
        }
        return file
    }

    /// The media type GIO's shared-mime-info guesses from a file's name (no byte read);
    /// `application/octet-stream` when it cannot tell.
    static func mediaType(ofName name: String) -> String {
        var uncertain: gboolean = 0
        guard let guessed = g_content_type_guess(name, nil, 0, &uncertain) else { return "application/octet-stream" }
        defer { g_free(guessed) }
        guard let mime = g_content_type_get_mime_type(guessed) else { return "application/octet-stream" }
        defer { g_free(mime) }
        return String(cString: mime)
    }
}

/// Where a member's copy of files is put when an app pastes it: `$XDG_CACHE_HOME/baton/clipboard`
/// (else `~/.cache/baton/clipboard`), one 0700 directory per copy, each file 0600 in a directory of
/// its place in the list (`<copy>/<n>/<name>`: two files of one name both arrive). Removed when the
/// copy is replaced, withdrawn or expires, and emptied when the agent starts sharing.
struct ClipboardFileCache: Sendable {
    let base: String

    init?(environment: [String: String]) {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
            base = cache + "/baton/clipboard"
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = home + "/.cache/baton/clipboard"
        } else {
            return nil
        }
    }

    /// The directory of the member's copy `token`.
    func directory(of token: UInt64) -> String { base + "/" + String(token, radix: 16) }

    /// The local path file `index` of copy `token` gets.
    func path(of token: UInt64, index: Int, name: String) -> String { directory(of: token) + "/\(index)/" + name }

    /// Creates `path` and the directories above it that are missing, 0700.
    static func makeDirectories(_ path: String) throws(Errno) {
        var built = ""
        for component in path.split(separator: "/") {
            built += "/" + component
            if mkdir(built, 0o700) != 0, errno != EEXIST { throw .current }
        }
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else { throw Errno(ENOTDIR) }
    }

    /// Writes the pulled `source` (exactly `size` bytes) as file `index` of copy `token`, 0600; returns its path.
    func store(_ source: borrowing FileDescriptor, size: UInt64, token: UInt64, index: Int, name: String) throws(Errno) -> String {
        let folder = directory(of: token) + "/\(index)"
        try Self.makeDirectories(folder)
        let path = folder + "/" + name
        unlink(path)
        let out = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
        do throws(Errno) {
            try out.copyAll(from: source, count: size)
        } catch {
            unlink(path)
            throw error
        }
        return path
    }

    func remove(token: UInt64) { Self.removeTree(directory(of: token)) }

    /// Everything under the base (copies an earlier run left).
    func removeAll() {
        guard let handle = opendir(base) else { return }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        closedir(handle)
        for name in names { Self.removeTree(base + "/" + name) }
    }

    /// Removes a file, or a directory with what is below it, never following a symbolic link.
    static func removeTree(_ path: String) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            unlink(path)
            return
        }
        if let handle = opendir(path) {
            var names: [String] = []
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name != ".", name != ".." { names.append(name) }
            }
            closedir(handle)
            for name in names { removeTree(path + "/" + name) }
        }
        rmdir(path)
    }
}
