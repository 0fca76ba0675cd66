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
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { return nil }
    defer { if ends[0] >= 0 { close(ends[0]) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addclose(&actions, ends[0])
    posix_spawn_file_actions_addclose(&actions, ends[1])
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    var child = pid_t()
    let spawned = posix_spawn(&child, executable, &actions, nil, argv, environ)
    close(ends[1])
    guard spawned == 0 else { return nil }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        output += buffer[..<count]
    }
    var status: Int32 = 0
    while waitpid(child, &status, 0) < 0, errno == EINTR {}
    return output
}
