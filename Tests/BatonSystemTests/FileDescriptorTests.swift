// SPDX-License-Identifier: GPL-2.0-or-later
import BatonSystem
import Glibc
import Testing

@Suite struct FileDescriptorTests {
    /// A scratch file in a directory of its own, removed afterwards.
    private func withScratchFile<R>(_ body: (String) throws -> R) throws -> R {
        var template = Array("/tmp/baton-fd-XXXXXX".utf8CString)
        let directory = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) })
        defer { unlink(directory + "/file"); rmdir(directory) }
        return try body(directory + "/file")
    }

    @Test func writeAllThenReadAllRoundTrips() throws {
        try withScratchFile { path in
            let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let output = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o600)
            try output.writeAll(bytes)
            output.close()
            let input = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
            #expect(try input.readAll() == bytes)
            // At end of file a read gives 0 bytes.
            var one: UInt8 = 0
            #expect(try withUnsafeMutableBytes(of: &one) { try input.read(into: $0) } == 0)
        }
    }

    @Test func readAllStopsAtTheMaximum() throws {
        try withScratchFile { path in
            let output = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_CLOEXEC, mode: 0o600)
            try output.writeAll(Array(repeating: 7, count: 5000))
            let input = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
            // Small chunks: the limit holds across many reads, and what is past it stays unread.
            #expect(try input.readAll(upTo: 4097, chunkSize: 512).count == 4097)
            #expect(try input.readAll().count == 5000 - 4097)
        }
    }

    @Test func positionalReadsAndWritesLeaveTheOffset() throws {
        try withScratchFile { path in
            let file = try FileDescriptor.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600)
            try file.writeAll(Array("hello world".utf8))
            try Array("WORLD".utf8).withUnsafeBytes { try file.writeAll($0, at: 6) }
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = try buffer.withUnsafeMutableBytes { try file.readFully(into: $0, at: 0) }
            #expect(String(decoding: buffer[..<count], as: UTF8.self) == "hello WORLD")
            // The file offset is where the sequential write left it: at the end.
            #expect(lseek(file.rawValue, 0, SEEK_CUR) == 11)
        }
    }

    @Test func openReportsTheErrno() {
        #expect(throws: Errno(ENOENT)) { try FileDescriptor.open("/nonexistent-baton-dir/x", O_RDONLY | O_CLOEXEC) }
        #expect(Errno(ENOENT).description == String(cString: strerror(ENOENT)))
    }

    /// The write end of a pipe is closed when its owner goes: the reader sees end of file.
    @Test func droppingTheOwnerClosesTheDescriptor() throws {
        let pipe = try FileDescriptor.pipe()
        let reader = pipe.reader, writer = pipe.writer
        do {
            let owner = consume writer
            try owner.writeAll(Array("x".utf8))
        }
        #expect(try reader.readAll() == Array("x".utf8))
    }

    /// A released number stays open; the new owner closes it.
    @Test func releaseHandsTheNumberOn() throws {
        let pipe = try FileDescriptor.pipe()
        let reader = pipe.reader, writer = pipe.writer
        let number = writer.release()
        FileDescriptor.borrowing(number) { lent in _ = try? lent.writeAll(Array("ab".utf8)) }
        // Still open after the borrow: a second write goes through.
        let again = FileDescriptor(taking: number)
        try again.writeAll(Array("c".utf8))
        again.close()
        #expect(try reader.readAll() == Array("abc".utf8))
    }

    @Test func interruptedCallsAreRetried() {
        var calls = 0
        let result = retryingInterrupts { () -> Int in
            calls += 1
            if calls < 3 { errno = EINTR; return -1 }
            return 42
        }
        #expect(result == 42 && calls == 3)
        calls = 0
        let failed = retryingInterrupts { () -> Int32 in calls += 1; errno = EBADF; return -1 }
        #expect(failed == -1 && calls == 1)
    }
}
