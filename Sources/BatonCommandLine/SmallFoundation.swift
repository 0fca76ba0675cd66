// SPDX-License-Identifier: GPL-2.0-or-later
// The few things the tools took from full Foundation, on Glibc instead: full Foundation brings ICU
// with it, about 45 MB in each statically linked executable (docs/benchmarks.md). The tools import
// FoundationEssentials only.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import BatonSystem

extension StringProtocol {
    /// The text without leading and trailing white space (spaces, tabs, line ends).
    public var whitespaceTrimmed: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}

extension String {
    /// The text cut or padded with spaces to `length` characters: a table column.
    public func padded(to length: Int) -> String {
        count >= length ? String(prefix(length)) : self + String(repeating: " ", count: length - count)
    }
}

/// Why a file operation failed, in the system's words ("No such file or directory").
public func fileErrorReason(_ error: any Error) -> String {
    if let error = error as? CocoaError, let underlying = error.underlying as? POSIXError {
        return String(cString: strerror(underlying.code.rawValue))
    }
    if let error = error as? POSIXError { return String(cString: strerror(error.code.rawValue)) }
    return "\(error)"
}

/// A thread of its own for blocking work (a blocking read would hold a cooperative-pool thread).
public enum DetachedThread {
    private final class Work {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Runs `body` on a new detached thread. A process that cannot start a thread cannot go on.
    public static func start(_ body: @escaping @Sendable () -> Void) {
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            Unmanaged<Work>.fromOpaque(argument).takeRetainedValue().body()
            return nil
        }, work)
        guard result == 0 else {
            Unmanaged<Work>.fromOpaque(work).release()
            fatalError("cannot start a thread (error \(result))")
        }
        pthread_detach(thread)
    }
}

/// Runs a program with standard input and error on /dev/null and returns what it wrote to standard
/// output, or nil when it could not be started.
public func standardOutput(ofProgram executable: String, arguments: [String]) -> [UInt8]? {
    guard let pipe = try? FileDescriptor.pipe() else { return nil }
    let reader = pipe.reader, writer = pipe.writer
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, writer.rawValue, 1)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addclose(&actions, reader.rawValue)
    posix_spawn_file_actions_addclose(&actions, writer.rawValue)
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    var child = pid_t()
    let spawned = posix_spawn(&child, executable, &actions, nil, argv, environ)
    // Only the child writes: its end of file is this end of file.
    writer.close()
    guard spawned == 0 else { return nil }
    // A failed read (a pipe gives none) counts as no output.
    let output = (try? reader.readAll(chunkSize: 4096)) ?? []
    var status: Int32 = 0
    _ = retryingInterrupts { waitpid(child, &status, 0) }
    return output
}
