// SPDX-License-Identifier: LGPL-2.1-or-later
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The errno of a failed system call.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Int32

    public init(_ code: Int32) { self.code = code }

    /// The calling thread's errno now: read it right after the failed call.
    public static var current: Errno { Errno(errno) }

    /// The system's words for it ("No such file or directory").
    public var description: String { String(cString: strerror(code)) }
}

/// Runs `call` (a system call that returns -1 and sets errno on failure) again as long as a signal
/// interrupted it (EINTR). The one place the daemon and the tools retry an interrupted call; every
/// read and write of `FileDescriptor` goes through it.
///
/// Not for a call whose timeout must shrink between tries (`poll` with a deadline): that caller
/// recomputes what is left and calls again itself.
@inlinable
public func retryingInterrupts<Result: FixedWidthInteger>(_ call: () -> Result) -> Result {
    while true {
        let result = call()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}

/// An open file descriptor with exactly one owner, closed exactly once: when its owner goes, or by
/// `close()`. A copy cannot exist (it is `~Copyable`), so no path can close it twice or use it after
/// it was closed, and no error path has to remember to close it. In the spirit of swift-system's
/// FileDescriptor, with ownership: hand it on with `consume`, give the number away with `release()`.
///
/// Reads and writes retry EINTR (`retryingInterrupts`); `writeAll` and `readAll` loop over short
/// transfers. A nonblocking descriptor's EAGAIN is an `Errno` like any other failure.
public struct FileDescriptor: ~Copyable, Sendable {
    /// The number, lent: valid while this value lives. Do not close it.
    public let rawValue: Int32

    /// Takes ownership of `rawValue`, an open descriptor nobody else closes.
    public init(taking rawValue: Int32) {
        self.rawValue = rawValue
    }

    deinit { _ = Glibc.close(rawValue) }

    /// Closes the descriptor now. Linux closes it even when close reports EINTR: never retried.
    public consuming func close() {
        _ = Glibc.close(rawValue)
        discard self
    }

    /// Gives up ownership without closing: the caller (or the system call it passes it to) closes it.
    public consuming func release() -> Int32 {
        let rawValue = self.rawValue
        discard self
        return rawValue
    }

    /// Lends the descriptor `rawValue`, owned by someone else, to `body` as a `FileDescriptor` for
    /// its reads and writes; it stays open afterwards.
    public static func borrowing<Result, Failure: Error>(
        _ rawValue: Int32, _ body: (borrowing FileDescriptor) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let lent = FileDescriptor(taking: rawValue)
        let outcome: Swift.Result<Result, Failure>
        do throws(Failure) { outcome = .success(try body(lent)) } catch { outcome = .failure(error) }
        _ = lent.release()
        return try outcome.get()
    }

    // MARK: Opening

    /// `open(2)`; O_CLOEXEC is the caller's to give.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        let descriptor = retryingInterrupts { Glibc.open(path, flags, mode) }
        guard descriptor >= 0 else { throw .current }
        return FileDescriptor(taking: descriptor)
    }

    /// `openat(2)` relative to the directory `directory`.
    public static func open(in directory: borrowing FileDescriptor, _ name: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        let descriptor = retryingInterrupts { openat(directory.rawValue, name, flags, mode) }
        guard descriptor >= 0 else { throw .current }
        return FileDescriptor(taking: descriptor)
    }

    /// The two ends of a pipe: take each with `consume pipe.reader` (or `.writer`).
    @frozen public struct Pipe: ~Copyable, Sendable {
        public var reader: FileDescriptor
        public var writer: FileDescriptor
    }

    /// A new pipe, both ends close-on-exec.
    public static func pipe() throws(Errno) -> Pipe {
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { throw .current }
        // pipe2 is not in Swift's Glibc module.
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return Pipe(reader: FileDescriptor(taking: ends[0]), writer: FileDescriptor(taking: ends[1]))
    }

    // MARK: Reading

    /// One `read(2)` into `buffer`: the bytes read, 0 at end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        let count = retryingInterrupts { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
        guard count >= 0 else { throw .current }
        return count
    }

    /// One `pread(2)` at `offset`: the bytes read, 0 at end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(Errno) -> Int {
        let count = retryingInterrupts { pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
        guard count >= 0 else { throw .current }
        return count
    }

    /// Fills `buffer` from `offset` on, short only at end of file: the bytes read.
    public func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(Errno) -> Int {
        var done = 0
        while done < buffer.count {
            let count = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + UInt64(done))
            guard count > 0 else { break }
            done += count
        }
        return done
    }

    /// Reads to the end of the file, or until `maximum` bytes came (then stops, reading no more):
    /// to learn whether a file is over a limit, ask for one byte more than the limit.
    public func readAll(upTo maximum: Int = .max, chunkSize: Int = 65_536) throws(Errno) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: max(1, min(chunkSize, maximum)))
        while bytes.count < maximum {
            let want = min(chunk.count, maximum - bytes.count)
            let count = chunk.withUnsafeMutableBytes { raw in
                retryingInterrupts { Glibc.read(rawValue, raw.baseAddress, want) }
            }
            guard count >= 0 else { throw .current }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }

    // MARK: Writing

    /// Writes all of `bytes`, however many `write(2)` calls it takes.
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var written = 0
        while written < bytes.count {
            let count = retryingInterrupts { Glibc.write(rawValue, bytes.baseAddress! + written, bytes.count - written) }
            guard count >= 0 else { throw .current }
            // A write that takes nothing would loop forever; the system reports no such case for files.
            guard count > 0 else { throw Errno(EIO) }
            written += count
        }
    }

    /// Writes all of `bytes`.
    public func writeAll(_ bytes: [UInt8]) throws(Errno) {
        var failure: Errno?
        bytes.withUnsafeBytes { raw in
            do throws(Errno) { try writeAll(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Writes all of `bytes` at `offset` with `pwrite(2)` (the file offset stays).
    public func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(Errno) {
        var written = 0
        while written < bytes.count {
            let count = retryingInterrupts {
                pwrite(rawValue, bytes.baseAddress! + written, bytes.count - written, off_t(offset) + off_t(written))
            }
            guard count >= 0 else { throw .current }
            guard count > 0 else { throw Errno(EIO) }
            written += count
        }
    }
}
