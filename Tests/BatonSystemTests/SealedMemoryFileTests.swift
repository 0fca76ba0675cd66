// SPDX-License-Identifier: GPL-2.0-or-later
import BatonSystem
import Glibc
import Testing

@Suite struct SealedMemoryFileTests {
    @Test func aSealedFileKeepsItsBytesAndSaysSo() throws {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let file = try SealedMemoryFile.make(name: "test", bytes: bytes)
        #expect(SealedMemoryFile.immutableSize(of: file) == UInt64(bytes.count))
        #expect(try file.readAll() == bytes)
        // Nobody can change it any more, not even its maker.
        #expect(throws: Errno.self) { try [UInt8(1)].withUnsafeBytes { try file.writeAll($0, at: 0) } }
        #expect(ftruncate(file.rawValue, 10) != 0)
        var back = [UInt8](repeating: 0, count: 5)
        let read = try back.withUnsafeMutableBytes { try file.readFully(into: $0, at: 99_995) }
        #expect(read == 5 && back == Array(bytes[99_995...]))
    }

    @Test func descriptorsThatCouldChangeHaveNoImmutableSize() throws {
        let open = try SealedMemoryFile.makeUnsealed(name: "open")
        try open.writeAll([1, 2, 3])
        #expect(SealedMemoryFile.immutableSize(of: open) == nil)
        let pipe = try FileDescriptor.pipe()
        #expect(SealedMemoryFile.immutableSize(of: pipe.reader) == nil)
        let empty = try SealedMemoryFile.make(name: "empty", bytes: [])
        #expect(SealedMemoryFile.immutableSize(of: empty) == 0)
    }
}
