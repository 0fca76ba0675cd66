// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonStore
#if canImport(Glibc)
import Glibc
#endif

@Suite("Journal")
struct JournalTests {
    let path = scratchPath("journal")

    private func journal(capacity: Int = 4) throws -> Journal<RequestEntry> {
        try Journal<RequestEntry>(name: "requests", capacity: capacity, in: StateDirectory(path: path))
    }

    private func entry(_ id: String) -> RequestEntry { RequestEntry(id: id, payload: "payload-\(id)") }

    @Test func recordsAreDurableAndOrdered() throws {
        defer { removeTree(path) }
        let first = try journal()
        #expect(try first.entries().isEmpty)
        for id in ["a", "b", "c"] { try first.record(entry(id)) }
        #expect(try journal().entries().map(\.id) == ["a", "b", "c"])
        #expect(permissions(of: first.filePath) == 0o600)
    }

    @Test func removeDeletesOnlyThatEntry() throws {
        defer { removeTree(path) }
        let requests = try journal()
        for id in ["a", "b", "c"] { try requests.record(entry(id)) }
        #expect(try requests.remove(id: "b") == entry("b"))
        #expect(try requests.remove(id: "b") == nil)
        #expect(try journal().entries().map(\.id) == ["a", "c"])
    }

    @Test func prunesOldestBeyondCapacity() throws {
        defer { removeTree(path) }
        let requests = try journal(capacity: 3)
        for id in ["a", "b", "c"] { #expect(try requests.record(entry(id)).isEmpty) }
        #expect(try requests.record(entry("d")) == [entry("a")])
        #expect(try requests.record(entry("e")) == [entry("b")])
        #expect(try journal(capacity: 3).entries().map(\.id) == ["c", "d", "e"])
    }

    @Test func rerecordingAnIdReplacesItWithoutDuplicating() throws {
        defer { removeTree(path) }
        let requests = try journal()
        for id in ["a", "b"] { try requests.record(entry(id)) }
        try requests.record(RequestEntry(id: "a", payload: "retry"))
        #expect(try requests.entries() == [entry("b"), RequestEntry(id: "a", payload: "retry")])
    }

    @Test func rejectsCapacityBelowOne() throws {
        defer { removeTree(path) }
        #expect(throws: StoreError.invalidConfiguration("journal capacity must be at least 1, got 0")) {
            try journal(capacity: 0)
        }
    }

    @Test func corruptJournalRefusesWritesUntilQuarantined() throws {
        defer { removeTree(path) }
        let requests = try journal()
        try requests.record(entry("a"))
        var bytes = try #require(contents(of: requests.filePath))
        bytes[bytes.count - 2] ^= 0xff
        try overwrite(requests.filePath, with: bytes)
        func isCorrupt(_ error: any Error) -> Bool {
            guard case .corrupt = error as? StoreError else { return false }
            return true
        }
        #expect(performing: { try requests.entries() }, throws: isCorrupt)
        #expect(performing: { try requests.record(entry("b")) }, throws: isCorrupt)
        #expect(performing: { try requests.remove(id: "a") }, throws: isCorrupt)
        #expect(contents(of: requests.filePath) == bytes)
        #expect(try requests.quarantine() != nil)
        try requests.record(entry("b"))
        #expect(try requests.entries() == [entry("b")])
    }

    @Test func concurrentRecordsAreAllKept() async throws {
        defer { removeTree(path) }
        let requests = try journal(capacity: 100)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<30 {
                group.addTask { try requests.record(entry("r\(index)")) }
            }
            try await group.waitForAll()
        }
        #expect(Set(try requests.entries().map(\.id)) == Set((0..<30).map { "r\($0)" }))
    }
}

@Suite("StatusFile")
struct StatusFileTests {
    struct Lifecycle: Codable, Sendable, Equatable {
        var state: String
        var pid: Int32
    }

    let path = scratchPath("status")

    @Test func writesPlainJsonAtomicallyWithMode0600() throws {
        defer { removeTree(path) }
        let status = try StatusFile<Lifecycle>(name: "status.json", in: StateDirectory(path: path))
        #expect(try status.read() == nil)
        try status.write(Lifecycle(state: "starting", pid: 42))
        try status.write(Lifecycle(state: "running", pid: 42))
        #expect(try status.read() == Lifecycle(state: "running", pid: 42))
        #expect(permissions(of: status.filePath) == 0o600)
        #expect(directoryEntries(path) == ["status.json"])
        let text = String(decoding: try #require(contents(of: status.filePath)), as: UTF8.self)
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        #expect(parsed?["state"] as? String == "running")
        try status.remove()
        try status.remove()
        #expect(try status.read() == nil)
    }

    @Test func damagedStatusReadsAsCorruptAndIsReplacedByNextWrite() throws {
        defer { removeTree(path) }
        let status = try StatusFile<Lifecycle>(name: "status.json", in: StateDirectory(path: path))
        try overwrite(status.filePath, with: Array("{\"state\":".utf8))
        #expect {
            try status.read()
        } throws: { error in
            guard case .corrupt = error as? StoreError else { return false }
            return true
        }
        try status.write(Lifecycle(state: "stopping", pid: 1))
        #expect(try status.read() == Lifecycle(state: "stopping", pid: 1))
    }
}

@Suite("BatonStoreTests: state directory lock")
struct StateDirectoryLockTests {
    func secondLockError(_ path: String) -> StoreError? {
        do {
            _ = try StateDirectoryLock(directory: StateDirectory(path: path))
            return nil
        } catch {
            return error
        }
    }

    @Test func aSecondLockOnTheSameDirectoryIsRefusedAndFreedWithTheFirst() throws {
        let path = scratchPath("lock")
        let directory = try StateDirectory(path: path)
        try withExtendedLifetime(try StateDirectoryLock(directory: directory)) {
            let error = try #require(secondLockError(path), "a second lock was granted")
            #expect(error == .directoryInUse(path: path, holder: getpid()))
            #expect(error.description.contains("in use by another batond (pid \(getpid()))"))
        }
        // Released with its holder: the next instance gets it.
        #expect(secondLockError(path) == nil)
        var info = stat()
        #expect(stat(path + "/lock", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }
}
