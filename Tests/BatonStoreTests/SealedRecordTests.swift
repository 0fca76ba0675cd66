// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonStore
#if canImport(Glibc)
import Glibc
#endif

/// Secret records sealed under the state key (docs/security.md "Key storage at rest").
@Suite("SealedRecord")
struct SealedRecordTests {
    let path = scratchPath("sealed")
    static let keyBytes = [UInt8](repeating: 0x42, count: 32)
    static let otherBytes = [UInt8](repeating: 0x43, count: 32)
    let key = try! StateSealingKey(bytes: keyBytes, protection: .host)
    let other = try! StateSealingKey(bytes: otherBytes, protection: .hostAndTPM2)

    private let sample = [Pairing(deviceName: "laptop", keyIdentifier: "k1", trusted: true)]

    private func record(_ directory: StateDirectory, _ sealing: StateSealingKey?, name: String = "ring") throws -> DurableRecord<[Pairing]> {
        try DurableRecord<[Pairing]>(name: name, schemaVersion: 1, in: directory, sealing: sealing)
    }

    @Test func roundTripsSealedAnd0600WithNothingInClear() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        let sealed = try record(directory, key)
        try sealed.save(sample)
        #expect(try sealed.load() == sample)
        #expect(try sealed.isStoredSealed() == true)
        #expect(permissions(of: sealed.filePath) == 0o600)
        let bytes = try #require(contents(of: sealed.filePath))
        #expect(Array(bytes.prefix(8)) == Array("BATONSEA".utf8))
        #expect(!String(decoding: bytes, as: UTF8.self).contains("laptop"))
        #expect(!String(decoding: bytes, as: UTF8.self).contains("BATONREC"))
        // A second write of the same value takes a fresh nonce: the files differ.
        try sealed.save(sample)
        #expect(contents(of: sealed.filePath) != bytes)
        #expect(try record(StateDirectory(path: path), key).load() == sample)
    }

    @Test func sealedWithoutAKeyIsATypedErrorAndIsNeverOverwritten() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        try record(directory, key).save(sample)
        let before = contents(of: directory.filePath("ring"))
        let plain = try record(directory, nil)
        #expect(throws: StoreError.sealedWithoutKey(file: plain.filePath)) { try plain.load() }
        #expect(throws: StoreError.sealedWithoutKey(file: plain.filePath)) { try plain.save([]) }
        #expect(contents(of: directory.filePath("ring")) == before)
        #expect("\(StoreError.sealedWithoutKey(file: plain.filePath))".contains("fix:"))
    }

    @Test func anotherKeyIsTypedWithBothIdentifiersAndIsNeverOverwritten() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        try record(directory, key).save(sample)
        let before = contents(of: directory.filePath("ring"))
        let wrong = try record(directory, other)
        let expected = StoreError.sealedToOtherKey(file: wrong.filePath, sealedWith: key.identifier.hexString, given: other.identifier.hexString)
        #expect(throws: expected) { try wrong.load() }
        #expect(throws: expected) { try wrong.save([]) }
        #expect(try wrong.sealIfPlain() == false)  // sealed already: left as it is, whatever the key
        #expect(contents(of: directory.filePath("ring")) == before)
        #expect(key.identifier.count == 8 && key.identifier != other.identifier)
    }

    @Test func truncatedAndTamperedFilesAreCorrupt() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        let sealed = try record(directory, key)
        try sealed.save(sample)
        let good = try #require(contents(of: sealed.filePath))
        func expectCorrupt(_ bytes: [UInt8], _ note: Comment) throws {
            try overwrite(sealed.filePath, with: bytes)
            #expect(throws: StoreError.self, note) { try sealed.load() }
            do { _ = try sealed.load() } catch {
                guard case .corrupt = error else { Issue.record("\(note): \(error), not corrupt"); return }
            }
        }
        try expectCorrupt(Array(good.prefix(20)), "header cut short")
        try expectCorrupt(Array(good.dropLast(1)), "tag cut short")
        try expectCorrupt(Array(good.prefix(SealedFormat.headerSize + SealedFormat.tagSize)), "no ciphertext")
        for offset in [11, 20, 31, 40, good.count - 1] {
            var flipped = good
            flipped[offset] ^= 0x01
            try expectCorrupt(flipped, "bit flipped at \(offset)")
        }
        var newer = good
        newer[9] = 2
        try overwrite(sealed.filePath, with: newer)
        #expect(throws: StoreError.unsupportedVersion(file: sealed.filePath, kind: .format, found: 2, supported: 1)) { try sealed.load() }
        try overwrite(sealed.filePath, with: good)
        #expect(try sealed.load() == sample)
    }

    @Test func aSealedFileRenamedOverAnotherRecordDoesNotOpen() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        try record(directory, key, name: "ring").save(sample)
        let peers = try record(directory, key, name: "peers")
        try overwrite(peers.filePath, with: try #require(contents(of: directory.filePath("ring"))))
        do { _ = try peers.load(); Issue.record("opened under another name") } catch {
            guard case .corrupt = error else { Issue.record("\(error)"); return }
        }
    }

    @Test func aPlainStateIsReadThenSealedByteForByteAndNeverLost() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        try record(directory, nil).save(sample)
        let plainBytes = try #require(contents(of: directory.filePath("ring")))
        let sealed = try record(directory, key)
        #expect(try sealed.isStoredSealed() == false)
        #expect(try sealed.load() == sample)
        #expect(try sealed.sealIfPlain() == true)
        #expect(try sealed.isStoredSealed() == true)
        #expect(try sealed.sealIfPlain() == false)
        #expect(try sealed.load() == sample)
        #expect(permissions(of: sealed.filePath) == 0o600)
        // The record inside is the plain file exactly.
        let opened = try SealedFormat.open(try #require(contents(of: sealed.filePath)), name: "ring", file: sealed.filePath, key: key)
        #expect(opened == plainBytes)
        // Without a key nothing is sealed; with no file, nothing either.
        #expect(try record(directory, nil, name: "other").sealIfPlain() == false)
        #expect(try record(directory, key, name: "missing").sealIfPlain() == false)
    }

    @Test func aCorruptPlainFileIsReportedNotSealed() throws {
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        try record(directory, nil).save(sample)
        var bytes = try #require(contents(of: directory.filePath("ring")))
        bytes[bytes.count - 2] ^= 0xFF
        try overwrite(directory.filePath("ring"), with: bytes)
        #expect(throws: StoreError.self) { try record(directory, key).sealIfPlain() }
        #expect(contents(of: directory.filePath("ring")) == bytes)
    }

    @Test func credentialTextParsesStrictly() throws {
        let bytes = (0..<32).map { UInt8($0) }
        let expected = try StateSealingKey(bytes: bytes, protection: .host).identifier
        for protection in StateSealingKey.Protection.allCases {
            let text = StateSealingKey.credentialText(bytes: bytes, protection: protection)
            let parsed = try #require(try StateSealingKey(credential: Array(text.utf8)))
            #expect(parsed.protection == protection)
            #expect(parsed.identifier == expected)
        }
        #expect(try StateSealingKey(credential: []) == nil)
        #expect(try StateSealingKey(credential: Array("missing".utf8)) == nil)
        #expect(try StateSealingKey(credential: Array("missing\n".utf8)) == nil)
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        for bad in ["baton-state-key 1 host \(hex.dropLast(2))", "baton-state-key 2 host \(hex)", "baton-state-key 1 usb \(hex)",
                    "baton-state-key 1 host \(hex) extra", "other 1 host \(hex)", "baton-state-key 1 host \(hex.dropLast(1))z",
                    "\u{FF}"] {
            #expect(throws: StoreError.self, "\(bad)") { try StateSealingKey(credential: Array(bad.utf8)) }
        }
        #expect(throws: StoreError.self) { try StateSealingKey(credential: [0xFF, 0xFE]) }
        #expect(throws: StoreError.self) { try StateSealingKey(bytes: [1, 2, 3], protection: .host) }
    }
}
