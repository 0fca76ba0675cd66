// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
@testable import BatonX11
import Foundation
import Glibc
import Testing

/// An X authority file's bytes (libXau's format), written here from the documented layout.
func authorityFile(_ entries: [(family: UInt16, address: [UInt8], number: String, name: String, data: [UInt8])]) -> [UInt8] {
    func u16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    func field(_ bytes: [UInt8]) -> [UInt8] { u16(bytes.count) + bytes }
    return entries.flatMap { entry in
        u16(Int(entry.family)) + field(entry.address) + field(Array(entry.number.utf8)) + field(Array(entry.name.utf8)) + field(entry.data)
    }
}

@Suite("BatonX11Tests: the X authority file the session's XAUTHORITY names (GNOME's XWayland)")
struct X11AuthorityTests {
    let host = Array("alpha".utf8)
    let cookie = [UInt8](0..<16)
    let other = [UInt8](repeating: 7, count: 16)

    @Test("the cookie is the first MIT-MAGIC-COOKIE-1 entry for this host (or any) and this display number (or any)")
    func choosesTheCookie() throws {
        let bytes = authorityFile([
            (256, Array("beta".utf8), "0", "MIT-MAGIC-COOKIE-1", other),   // another host
            (256, host, "1", "MIT-MAGIC-COOKIE-1", other),                 // another display
            (256, host, "0", "XDM-AUTHORIZATION-1", other),                // another scheme
            (256, host, "0", "MIT-MAGIC-COOKIE-1", cookie),
            (0xFFFF, [], "", "MIT-MAGIC-COOKIE-1", other),
        ])
        let entries = try X11Authority.entries(bytes)
        #expect(entries.count == 5)
        #expect(X11Authority.cookie(in: entries, displayNumber: "0", hostname: host) == X11Cookie(name: "MIT-MAGIC-COOKIE-1", data: cookie))
        // Display 2 has no entry of its own: the wild one (any host, any display) serves.
        #expect(X11Authority.cookie(in: entries, displayNumber: "2", hostname: host)?.data == other)
        // Mutter's file: a local entry and a wild one, both with the display's number.
        let mutter = try X11Authority.entries(authorityFile([(256, host, "", "MIT-MAGIC-COOKIE-1", cookie)]))
        #expect(X11Authority.cookie(in: mutter, displayNumber: "9", hostname: host)?.data == cookie)
        #expect(X11Authority.cookie(in: mutter, displayNumber: "9", hostname: Array("gamma".utf8)) == nil)
        #expect(try X11Authority.entries([]).isEmpty)
    }

    @Test("every length is checked: a cut-off entry fails with its offset, a file over 1 MiB fails before it is buffered")
    func boundsChecked() throws {
        let whole = authorityFile([(256, host, "0", "MIT-MAGIC-COOKIE-1", cookie)])
        for cut in [1, 3, 10, whole.count - 1] {
            #expect(throws: X11AuthorityError.self) { try X11Authority.entries(Array(whole.prefix(cut))) }
        }
        #expect(throws: X11AuthorityError.truncated(at: 4)) { try X11Authority.entries([0x01, 0x00, 0xFF, 0xFF, 0x41]) }
        #expect(throws: X11AuthorityError.tooLarge) { try X11Authority.entries([UInt8](repeating: 0, count: X11Authority.maximumFileSize + 1)) }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-xauth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let large = directory.appendingPathComponent("large")
        try Data(count: X11Authority.maximumFileSize + 5).write(to: large)
        #expect(throws: X11AuthorityError.tooLarge) { try X11Authority.cookie(file: large.path, display: ":0") }
        let broken = directory.appendingPathComponent("broken")
        try Data(whole.prefix(7)).write(to: broken)
        #expect(throws: X11AuthorityError.self) { try X11Authority.cookie(file: broken.path, display: ":0") }
        // The adapter says which file, and why, in words.
        #expect(throws: ClipboardError.unavailable("the X authority file \(broken.path) (XAUTHORITY) cannot be used: an entry is cut off at byte 4")) {
            try X11SessionClipboard(display: ":0", authority: broken.path)
        }
        // A file that does not exist holds no cookie (libxcb then connects without one, as it would).
        #expect(try X11Authority.cookie(file: directory.appendingPathComponent("none").path, display: ":0") == nil)
        #expect(throws: X11AuthorityError.unreadable(EISDIR)) { try X11Authority.cookie(file: directory.path, display: ":0") }
    }

    @Test("only a local display's number is looked up", arguments: [
        (":0", "0"), (":12.1", "12"), ("unix:3", "3"), ("otherhost:0", nil), ("localhost:10.0", nil), (":", nil), (":x", nil), ("", nil),
    ] as [(String, String?)])
    func displayNumbers(display: String, number: String?) {
        #expect(X11Authority.localDisplayNumber(display) == number)
    }
}
