// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonStore
#if canImport(Glibc)
import Glibc
#endif

/// Red-team attack by another local user on the state directory, formed from security.md
/// ("State on disk: 0700 directory, 0600 files"; "The state directory (0700, files 0600, ...)").
@Suite("RedTeamStateDirectory")
struct RedTeamStateDirectoryTests {
    /// Attack: the state directory already exists, readable by everyone (mode 0755: `mkdir` under
    /// the usual umask, an image or package that pre-creates it; the shipped unit's
    /// StateDirectoryMode=0700 avoids it). Another user then lists the file names (which records
    /// exist, the per-user document directories named by uid). Writable modes are refused; a
    /// readable one was used as it was. Fixed: it is tightened to 0700 (or refused).
    @Test func aPreExistingWorldReadableStateDirectoryIsTightenedOrRefused() throws {
        let existing = try makeScratchDirectory("readable", mode: 0o755)
        defer { removeTree(existing) }
        let opened = try? StateDirectory(path: existing)
        let record = try opened.map { try DurableRecord<[String]>(name: "ring", schemaVersion: 1, in: $0) }
        try record?.save(["secret"])
        // Every file stays private whatever the directory's mode.
        if let record { #expect(permissions(of: record.filePath) == 0o600) }
        #expect(opened == nil || permissions(of: existing) == 0o700)
    }

    /// Every mode that lets others read or enter (but not write) is made 0700 on opening, and the
    /// directory is then used.
    @Test func everyReadableButNotWritableModeIsTightenedTo0700() throws {
        for mode: mode_t in [0o755, 0o750, 0o705, 0o711, 0o701] {
            let existing = try makeScratchDirectory("readable", mode: mode)
            defer { removeTree(existing) }
            _ = try StateDirectory(path: existing)
            #expect(permissions(of: existing) == 0o700, "mode \(String(mode, radix: 8))")
        }
    }
}
