// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation

/// Foundation's Process on Linux emulates close-on-exec by listing the open descriptors just before
/// posix_spawn, and its pipes and termination socket are inheritable. A pipe another thread makes
/// in that window leaks into the child, so a program's output (or its exit) is seen only when the
/// unrelated child ends: a lab run's `bt-pair discover` waited 120 s for a concurrent
/// `bt-pair accept`. Tests therefore start programs with `launch` and give them `ChildPipe`s: both
/// hold one lock, and the pipes are close-on-exec before any other spawn can see them.
public let spawnLock = NSLock()

/// Starts `process` while no other test thread is making a pipe or starting a program.
public func launch(_ process: Process) throws {
    spawnLock.lock()
    defer { spawnLock.unlock() }
    try process.run()
}

/// A pipe whose ends are close-on-exec from the moment another spawn could see them; Process still
/// connects it to its child (dup2 clears the flag on the child's copy) and closes the parent's
/// copy of the child's end.
public final class ChildPipe: Pipe, @unchecked Sendable {
    public override init() {
        spawnLock.lock()
        defer { spawnLock.unlock() }
        super.init()
        for fd in [fileHandleForReading.fileDescriptor, fileHandleForWriting.fileDescriptor] {
            _ = fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC)
        }
    }
}
