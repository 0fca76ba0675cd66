// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonSystem
import Dispatch
import Synchronization

/// The installed applications kept in memory: scanned once, scanned again only after inotify
/// reports a change in a watched folder (no polling, nothing read per advert). Watches every
/// `applications/` folder and its subfolders, and each data directory so an `applications/`
/// created later is noticed. Without inotify it falls back to scanning on every call.
public final class DesktopEntryIndex: DesktopEntrySource {
    private struct State {
        var entries: [DesktopEntry] = []
        var stale = true
        var scans = 0
        var watches: Set<Int32> = []
    }

    private static let changeMask = UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO
                                           | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

    private let scanner: XDGDesktopEntryScanner
    /// A class so the inotify handler can hold it (a Mutex cannot be captured by copy).
    private final class Shared: Sendable { let state = Mutex(State()) }
    private let shared = Shared()
    private let inotify: Int32
    /// Set in init, cancelled in deinit; never touched in between (Dispatch sources are thread-safe).
    nonisolated(unsafe) private let source: (any DispatchSourceRead)?

    public init(scanner: XDGDesktopEntryScanner) {
        self.scanner = scanner
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        inotify = descriptor
        guard descriptor >= 0 else {
            source = nil
            return
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: DispatchQueue(label: "baton.desktop-entries"))
        self.source = source
        source.setEventHandler { [shared] in
            // Drain the queued events; any of them means "scan again on the next question". A wakeup
            // with nothing to read changes nothing (one made a CI run scan twice with no change).
            var buffer = [UInt8](repeating: 0, count: 4_096)
            var changed = false
            while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 { changed = true }
            if changed { shared.state.withLock { $0.stale = true } }
        }
        // The cancel handler owns the descriptor: Dispatch runs it once, after the source stopped
        // watching, and nothing reads or watches it after that (rewatch runs only while the index lives).
        source.setCancelHandler { FileDescriptor(taking: descriptor).close() }
        source.activate()
    }

    deinit { source?.cancel() }

    /// Full scans so far (tests: not one per question).
    public var scanCount: Int { shared.state.withLock { $0.scans } }

    public func entries() -> [DesktopEntry] {
        let needsScan = shared.state.withLock { current in
            guard current.stale || source == nil else { return false }
            // Cleared before scanning: a change during the scan marks the index stale again.
            current.stale = false
            return true
        }
        guard needsScan else { return shared.state.withLock { $0.entries } }
        if source != nil { rewatch() }
        let scanned = scanner.entries()
        return shared.state.withLock { current in
            current.entries = scanned
            current.scans += 1
            return scanned
        }
    }

    /// Watches the folders as they are now (folders come and go between scans).
    private func rewatch() {
        var folders = scanner.dataDirectories
        for directory in scanner.applicationDirectories {
            folders.append(directory)
            folders += scanner.subdirectories(under: directory)
        }
        var added: Set<Int32> = []
        for folder in folders {
            let watch = inotify_add_watch(inotify, folder, Self.changeMask | UInt32(IN_ONLYDIR))
            if watch >= 0 { added.insert(watch) }
        }
        let stale = shared.state.withLock { current in
            let gone = current.watches.subtracting(added)
            current.watches = added
            return gone
        }
        // inotify returns the same descriptor for a folder already watched; the others are dropped.
        for watch in stale { inotify_rm_watch(inotify, watch) }
    }
}
