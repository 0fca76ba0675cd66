// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonStore
#if canImport(Glibc)
import Glibc
#endif

@Suite("DurableRecord")
struct DurableRecordTests {
    let path = scratchPath("record")

    private func pairings(_ directory: StateDirectory, schema: UInt32 = 1) throws -> DurableRecord<[Pairing]> {
        try DurableRecord<[Pairing]>(name: "pairings", schemaVersion: schema, in: directory)
    }

    private let sample = [
        Pairing(deviceName: "laptop", keyIdentifier: "k1", trusted: true),
        Pairing(deviceName: "phone ✓", keyIdentifier: "k2", trusted: false),
    ]

    @Test func missingRecordLoadsAsNilOrDefault() throws {
        defer { removeTree(path) }
        let record = try pairings(StateDirectory(path: path))
        #expect(try record.load() == nil)
        #expect(try record.load(default: []) == [])
    }

    @Test func roundTripsAcrossInstances() throws {
        defer { removeTree(path) }
        try pairings(StateDirectory(path: path)).save(sample)
        let reopened = try pairings(StateDirectory(path: path))
        #expect(try reopened.load() == sample)
        var changed = sample
        changed[1].trusted = true
        try reopened.save(changed)
        #expect(try reopened.load() == changed)
    }

    @Test func createsDirectory0700AndFiles0600() throws {
        defer { removeTree(path) }
        let previousMask = umask(0)  // the store must not rely on the umask
        defer { umask(previousMask) }
        let directory = try StateDirectory(path: path + "/nested/state")
        #expect(permissions(of: path + "/nested/state") == 0o700)
        #expect(permissions(of: path + "/nested") == 0o700)
        let record = try pairings(directory)
        try record.save(sample)
        #expect(permissions(of: record.filePath) == 0o600)
    }

    @Test func refusesGroupOrWorldWritableDirectory() throws {
        for mode: mode_t in [0o770, 0o707, 0o777] {
            let existing = try makeScratchDirectory("loose", mode: mode)
            defer { removeTree(existing) }
            #expect {
                try StateDirectory(path: existing)
            } throws: { error in
                guard case .insecureDirectory = error as? StoreError else { return false }
                return true
            }
        }
    }

    @Test func refusesDirectoryOwnedBySomeoneElse() throws {
        let foreign: String
        var created: String?
        if geteuid() == 0 {
            let existing = try makeScratchDirectory("foreign")
            created = existing
            try #require(chown(existing, 65534, 65534) == 0)
            foreign = existing
        } else {
            foreign = "/usr"  // owned by root, never by an unprivileged test user
        }
        defer { if let created { removeTree(created) } }
        #expect {
            try StateDirectory(path: foreign)
        } throws: { error in
            guard case .insecureDirectory(_, let reason) = error as? StoreError else { return false }
            return reason.contains("owned by")
        }
    }

    @Test func refusesAPathThatIsAFile() throws {
        let file = scratchPath("file")
        try #require(FileManager.default.createFile(atPath: file, contents: Data([1])))
        defer { removeTree(file) }
        #expect(throws: StoreError.self) { try StateDirectory(path: file) }
    }

    @Test func rejectsUnsafeNames() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        for name in ["", "../escape", "a/b", ".hidden", ".tmp-x", "sp ace", String(repeating: "n", count: 129)] {
            #expect(throws: StoreError.invalidName(name)) {
                try DurableRecord<Int>(name: name, schemaVersion: 1, in: directory)
            }
        }
    }

    @Test func removesStaleTemporaryFilesAtOpen() throws {
        defer { removeTree(path) }
        let record = try pairings(StateDirectory(path: path))
        try record.save(sample)
        let stale = [".tmp-pairings-dead", ".tmp-journal-1234"]
        for name in stale {
            try #require(FileManager.default.createFile(atPath: path + "/" + name, contents: Data([0, 1, 2])))
        }
        let reopened = try StateDirectory(path: path)
        #expect(reopened.removedStaleFiles == stale.sorted())
        #expect(directoryEntries(path) == ["pairings"])
        #expect(try pairings(reopened).load() == sample)
    }

    @Test func successfulSavesLeaveNoTemporaryFiles() throws {
        defer { removeTree(path) }
        let record = try pairings(StateDirectory(path: path))
        for _ in 0..<5 { try record.save(sample) }
        #expect(directoryEntries(path) == ["pairings"])
    }

    @Test func reportsLooseFileModeAndSaveRepairsIt() throws {
        defer { removeTree(path) }
        let record = try pairings(StateDirectory(path: path))
        try record.save(sample)
        try #require(chmod(record.filePath, 0o644) == 0)
        #expect {
            try record.load()
        } throws: { error in
            guard case .insecureFile(_, let reason) = error as? StoreError else { return false }
            return reason.contains("0644")
        }
        try record.save(sample)
        #expect(permissions(of: record.filePath) == 0o600)
        #expect(try record.load() == sample)
    }

    @Test func refusesSymbolicLinkAsRecord() throws {
        defer { removeTree(path) }
        let record = try pairings(StateDirectory(path: path))
        try #require(symlink("/etc/hostname", record.filePath) == 0)
        #expect {
            try record.load()
        } throws: { error in
            guard case .insecureFile = error as? StoreError else { return false }
            return true
        }
    }

    // MARK: Corruption

    /// Each corruption must surface as `.corrupt`, leave the file byte-for-byte untouched, block
    /// `save` until `quarantine()`, and then allow a fresh save.
    private func expectCorruptionHandled(_ bytes: [UInt8], label: String) throws {
        let directory = try StateDirectory(path: path)
        let record = try pairings(directory)
        try overwrite(record.filePath, with: bytes)
        func isCorrupt(_ error: any Error) -> Bool {
            guard case .corrupt = error as? StoreError else { return false }
            return true
        }
        #expect("\(label): load", performing: { try record.load() }, throws: isCorrupt)
        #expect("\(label): save", performing: { try record.save(sample) }, throws: isCorrupt)
        #expect(contents(of: record.filePath) == bytes, "\(label): file untouched")
        let aside = try #require(try record.quarantine())
        #expect(aside.hasPrefix("pairings.corrupt-"))
        #expect(contents(of: path + "/" + aside) == bytes, "\(label): quarantined copy intact")
        #expect(try record.load() == nil)
        try record.save(sample)
        #expect(try record.load() == sample)
        try FileManager.default.removeItem(atPath: path + "/" + aside)
    }

    private func validFile() throws -> [UInt8] {
        let record = try pairings(StateDirectory(path: path))
        try record.save(sample)
        return try #require(contents(of: record.filePath))
    }

    @Test func truncatedFileIsCorrupt() throws {
        defer { removeTree(path) }
        let valid = try validFile()
        for length in [0, 4, 30, RecordFormat.headerSize, valid.count - 1] {
            try expectCorruptionHandled(Array(valid.prefix(length)), label: "truncated to \(length)")
        }
    }

    @Test func trailingBytesAreCorrupt() throws {
        defer { removeTree(path) }
        try expectCorruptionHandled(try validFile() + [0x0a], label: "trailing byte")
    }

    @Test func everyFlippedByteIsDetected() throws {
        defer { removeTree(path) }
        let valid = try validFile()
        let record = try pairings(StateDirectory(path: path))
        for index in valid.indices {
            var damaged = valid
            damaged[index] ^= 0x01
            try overwrite(record.filePath, with: damaged)
            #expect {
                try record.load()
            } throws: { error in
                switch error as? StoreError {
                case .corrupt: return true
                // Bumping the format version field reads as a file from a newer build.
                case .unsupportedVersion(_, .format, _, _): return index == 8 || index == 9
                default: return false
                }
            }
            #expect(contents(of: record.filePath) == damaged)
        }
        try expectCorruptionHandled(valid.enumerated().map { $0.offset == valid.count - 3 ? $0.element ^ 0x80 : $0.element }, label: "flipped body byte")
    }

    @Test func wrongMagicIsCorrupt() throws {
        defer { removeTree(path) }
        var bytes = try validFile()
        bytes.replaceSubrange(0..<8, with: Array("NOTBATON".utf8))
        try expectCorruptionHandled(bytes, label: "wrong magic")
    }

    @Test func garbageIsCorrupt() throws {
        defer { removeTree(path) }
        var generator = SystemRandomNumberGenerator()
        let garbage = (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try expectCorruptionHandled(garbage, label: "garbage")
        try expectCorruptionHandled(Array("{\"deviceName\":\"plain json\"}".utf8), label: "plain JSON")
    }

    @Test func validContainerWithUndecodableBodyIsCorrupt() throws {
        defer { removeTree(path) }
        let bytes = try RecordFormat.encode(body: Array("{\"not\":\"an array\"}".utf8), schemaVersion: 1)
        try expectCorruptionHandled(bytes, label: "wrong body type")
    }

    @Test func quarantineOfMissingFileReturnsNil() throws {
        defer { removeTree(path) }
        #expect(try pairings(StateDirectory(path: path)).quarantine() == nil)
    }

    @Test func repeatedQuarantinesNeverOverwriteEachOther() throws {
        defer { removeTree(path) }
        let record = try pairings(StateDirectory(path: path))
        var names: Set<String> = []
        for round in 0..<3 {
            try overwrite(record.filePath, with: [UInt8(round)])
            names.insert(try #require(try record.quarantine()))
        }
        #expect(names.count == 3)
        for name in names { #expect(contents(of: path + "/" + name)?.count == 1) }
    }

    // MARK: Versions

    @Test func newerSchemaVersionIsRejectedAndNeverOverwritten() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        try pairings(directory, schema: 3).save(sample)
        let written = try #require(contents(of: path + "/pairings"))
        let older = try pairings(directory, schema: 2)
        let expected = StoreError.unsupportedVersion(file: older.filePath, kind: .schema, found: 3, supported: 2)
        #expect(throws: expected) { try older.load() }
        #expect(throws: expected) { try older.save(sample) }
        #expect(contents(of: older.filePath) == written)
        #expect(try pairings(directory, schema: 4).load() == sample)  // older schemas decode directly
    }

    @Test func newerFormatVersionIsRejected() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        let record = try pairings(directory)
        var bytes = try validFile()
        bytes[8] = 0
        bytes[9] = 2
        try overwrite(record.filePath, with: bytes)
        #expect(throws: StoreError.unsupportedVersion(file: record.filePath, kind: .format, found: 2, supported: 1)) {
            try record.load()
        }
        #expect(throws: StoreError.self) { try record.save(sample) }
        #expect(contents(of: record.filePath) == bytes)
    }

    // MARK: Permissions

    @Test func unwritableDirectoryAndUnreadableFileAreTypedErrors() throws {
        let directoryPath = try makeScratchDirectory("unwritable")
        defer { removeTree(directoryPath) }
        let unreadable = try DurableRecord<Int>(name: "unreadable", schemaVersion: 1, in: StateDirectory(path: directoryPath))
        try unreadable.save(7)
        try #require(chmod(unreadable.filePath, 0o000) == 0)
        try #require(chmod(directoryPath, 0o500) == 0)
        if geteuid() == 0 {
            // Root ignores permission bits; the helper drops to the directory's owner instead.
            try #require(chown(unreadable.filePath, 65534, 65534) == 0)
            try #require(chown(directoryPath, 65534, 65534) == 0)
        }
        let lines = try runTorture(["probe", directoryPath])
        #expect(lines == ["save permissionDenied", "load permissionDenied"])
        #expect(directoryEntries(directoryPath) == ["unreadable"])
    }

    // MARK: Concurrency

    @Test func concurrentUpdatesAreSerialised() async throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        // Two instances on the same file share the directory's lock.
        let first = try DurableRecord<Int>(name: "count", schemaVersion: 1, in: directory)
        let second = try DurableRecord<Int>(name: "count", schemaVersion: 1, in: directory)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                let record = index.isMultiple(of: 2) ? first : second
                group.addTask { try record.update { ($0 ?? 0) + 1 } }
            }
            try await group.waitForAll()
        }
        #expect(try first.load() == 40)
        #expect(directoryEntries(path) == ["count"])
    }

    @Test func concurrentSavesLeaveOneCompleteValue() async throws {
        defer { removeTree(path) }
        let record = try DurableRecord<[Int]>(name: "list", schemaVersion: 1, in: StateDirectory(path: path))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<32 {
                group.addTask { try record.save(Array(repeating: index, count: 2000)) }
                group.addTask { _ = try record.load() }
            }
            try await group.waitForAll()
        }
        let stored = try #require(try record.load())
        #expect(stored.count == 2000 && Set(stored).count == 1)
        #expect(directoryEntries(path) == ["list"])
    }
}
