// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The receiving side of the recent-documents publisher: the agent is the handler for
/// `org.baton.recent-document`, saves the fetched snapshot under the sender's display name and
/// opens it with this machine's default application for it (docs/publishers.md).
public struct RecentDocumentReceiver: Sendable {
    public enum Failure: Error, Equatable {
        case noDocument
        case cannotSave(errno: Int32)
    }

    /// $XDG_DATA_HOME/baton/received (a place that survives reboots, unlike a cache).
    public let directory: URL
    let opener: any URLOpener

    public init(directory: URL, opener: any URLOpener) {
        self.directory = directory
        self.opener = opener
    }

    public static func defaultDirectory(environment: [String: String]) -> URL? {
        RecentDocumentsList.fileURL(environment: environment)?.deletingLastPathComponent().appendingPathComponent("baton/received")
    }

    /// Saves the snapshot (closing its descriptor) and opens it; returns where it was saved.
    @discardableResult
    public func receive(_ activity: ContinuedActivity) async throws -> URL {
        guard let document = activity.document else { throw Failure.noDocument }
        let target = try save(document, named: activity.title)
        try await opener.open(target.absoluteString)
        return target
    }

    /// Saves a received document (closing its descriptor) in `directory` under `safeName(name)`,
    /// never replacing a file (`name (2)`...), 0600; returns where. The media receiver saves a
    /// local media file this way too (docs/media.md).
    public func save(_ document: ContinuedDocument, named name: String) throws -> URL {
        let input = FileDescriptor(taking: document.descriptor)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let target = freeName(for: Self.safeName(name))
        let output = try Self.create(target.path)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let read = buffer.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try input.read(into: raw) } }
            let count: Int
            switch read {
            case .success(let value): count = value
            case .failure(let error): throw Failure.cannotSave(errno: error.code)
            }
            if count == 0 { break }
            let written = buffer.withUnsafeBytes { raw in Result { () throws(Errno) in try output.writeAll(UnsafeRawBufferPointer(rebasing: raw[..<count])) } }
            if case .failure(let error) = written { throw Failure.cannotSave(errno: error.code) }
        }
        output.close()
        input.close()
        return target
    }

    private static func create(_ path: String) throws(Failure) -> FileDescriptor {
        do throws(Errno) { return try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: 0o600) } catch {
            throw .cannotSave(errno: error.code)
        }
    }

    /// The peer's title as a file name: one path component, not hidden, not empty, at most
    /// `maxNameBytes` bytes (so " (2)" and beyond still fit NAME_MAX, 255), cut at a character and
    /// keeping a short extension (".wav") when cut.
    public static func safeName(_ title: String) -> String {
        let cleaned = String(title.map { $0 == "/" || $0 == "\0" || $0.isNewline ? "_" : $0 }.drop { $0 == "." || $0.isWhitespace })
        guard cleaned.utf8.count > maxNameBytes else { return cleaned.isEmpty ? "document" : cleaned }
        var base = Substring(cleaned), ext = ""
        if let dot = cleaned.lastIndex(of: "."), cleaned[dot...].utf8.count <= 16 {
            base = cleaned[..<dot]
            ext = String(cleaned[dot...])
        }
        var kept = "", used = ext.utf8.count
        for character in base {
            used += character.utf8.count
            guard used <= maxNameBytes else { break }
            kept.append(character)
        }
        return (kept.isEmpty ? "document" : kept) + ext
    }

    /// The longest name `safeName` gives, in bytes.
    public static let maxNameBytes = 200

    /// `name`, or `name (2)`... when taken: a received document never replaces a file.
    private func freeName(for name: String) -> URL {
        let first = directory.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: first.path) else { return first }
        // "a.pdf" gives "a" and "pdf"; ".hidden" and "a." have no extension.
        var base = name, ext = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex, name.index(after: dot) != name.endIndex {
            base = String(name[..<dot])
            ext = String(name[name.index(after: dot)...])
        }
        for number in 2... {
            let candidate = directory.appendingPathComponent("\(base) (\(number))" + (ext.isEmpty ? "" : "." + ext))
            if !FileManager.default.fileExists(atPath: candidate.path) { return candidate }
        }
        return first
    }
}
