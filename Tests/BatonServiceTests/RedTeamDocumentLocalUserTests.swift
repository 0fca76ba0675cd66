// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonAPI
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import Foundation
import Glibc
import Synchronization
import Testing
@testable import BatonService

/// Run as `nobody`: attacks root's activity's document, then passes hostile descriptors to
/// AttachDocument on an activity of its own. Prints `step=result` (the D-Bus error name, or "ok").
/// argv: bus address, root's activity path, a file only root may read.
let foreignDocumentScript = #"""
import os, socket, sys, tempfile
import dbus

address, foreign, secret = sys.argv[1], sys.argv[2], sys.argv[3]
bus = dbus.bus.BusConnection(address)

def step(name, call):
    try:
        call()
        print("%s=ok" % name, flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (name, error.get_dbus_name()), flush=True)

def attach(path, fd, document_id="nobody-doc"):
    return bus.call_blocking("org.baton", path, "org.baton.Activity1", "AttachDocument", "hss",
                             [dbus.types.UnixFd(fd), "text/plain", document_id])

def prop(path, name):
    return bus.call_blocking("org.baton", path, "org.freedesktop.DBus.Properties", "Get", "ss", ["org.baton.Activity1", name])

public = os.open("/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd", os.O_RDONLY)
step("foreign-attach", lambda: attach(foreign, public, "hijack"))
step("foreign-edited", lambda: bus.call_blocking("org.baton", foreign, "org.baton.Activity1", "DocumentEdited", "", []))
step("foreign-document", lambda: prop(foreign, "Document"))
step("foreign-edit-session", lambda: prop(foreign, "EditSession"))

mine = bus.call_blocking("org.baton", "/org/baton", "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                         ["org.example.Nobody.app", "draft", {}, {}])
reader, writer = os.pipe()
left, right = socket.socketpair()
directory = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
handle, name = tempfile.mkstemp(prefix="baton-redteam-")
os.write(handle, b"nobody's words")
os.close(handle)
sparse_handle, sparse_name = tempfile.mkstemp(prefix="baton-redteam-sparse-")
os.ftruncate(sparse_handle, 1 << 40)
os.close(sparse_handle)
try:
    step("fifo", lambda: attach(mine, reader))
    step("socket", lambda: attach(mine, left.fileno()))
    step("directory", lambda: attach(mine, directory))
    step("dev-zero", lambda: attach(mine, os.open("/dev/zero", os.O_RDONLY)))
    step("dev-urandom", lambda: attach(mine, os.open("/dev/urandom", os.O_RDONLY)))
    step("write-only", lambda: attach(mine, os.open(name, os.O_WRONLY)))
    step("path-only-secret", lambda: attach(mine, os.open(secret, os.O_PATH)))
    step("sparse-terabyte", lambda: attach(mine, os.open(sparse_name, os.O_RDONLY)))
    step("own-file", lambda: attach(mine, os.open(name, os.O_RDONLY)))
    print("digest=%s" % str(prop(mine, "Document")["Digest"]), flush=True)
finally:
    os.unlink(name)
    os.unlink(sparse_name)
"""#

/// Red-team attacks on documents by another local Unix user over D-Bus (security.md: it "can call
/// the D-Bus API", not "see or change another user's activities"), and by hostile descriptors.
@Suite("BatonServiceTests: red team, documents and other local users", .serialized)
struct RedTeamDocumentLocalUserTests {
    /// Attack, as `nobody`: AttachDocument and DocumentEdited on root's activity, Document and
    /// EditSession of it read through Properties.Get; then AttachDocument on its own activity with a
    /// pipe, a socket, a directory, /dev/zero, /dev/urandom, a write-only descriptor, an O_PATH
    /// descriptor of a file only root may read, and a sparse 1 TiB file. Held: NotPermitted on root's
    /// activity; InvalidArguments for what is not a regular file; PayloadTooLarge for the sparse file,
    /// refused from its size before copying. Found: a write-only or O_PATH descriptor passed the checks
    /// and failed in the copy as Failed ("read failed (errno 9)"); fixed: refused as InvalidArguments
    /// ("a descriptor opened for reading") before anything is created. Nothing of the refusals is kept.
    @Test func nobodyCannotTouchRootsDocumentAndHostileDescriptorsAreRefused() async throws {
        try #require(getuid() == 0, "runs as root (CI does) so that nobody is another user")
        try await withService { fixture in
            let documents = fixture.stateDirectory + "/documents"
            await fixture.service.useDocuments(try SnapshotStore(directory: documents, perDocumentLimit: 1 << 20, perUserLimit: 1 << 20))
            let client = fixture.client
            let path = try await client.createActivity(title: "root's plan")
            let content = Array("root's secret plan".utf8)
            let rootFile = fixture.bus.directory.appendingPathComponent("plan.txt").path
            try Data(content).write(to: URL(fileURLWithPath: rootFile))
            chmod(rootFile, 0o600)
            let descriptor = open(rootFile, O_RDONLY)
            defer { close(descriptor) }
            _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("text/plain"), .string("plan-1")])
            let before = try await client.property(path, "Document")

            let seen = try await runAsNobody(script: foreignDocumentScript, in: fixture.bus.directory, arguments: [fixture.bus.address, path, rootFile])
            for step in ["foreign-attach", "foreign-edited", "foreign-document", "foreign-edit-session"] {
                #expect(seen[step] == ErrorName.notPermitted, "\(step): \(seen[step] ?? "missing")")
            }
            for step in ["fifo", "socket", "directory", "dev-zero", "dev-urandom", "write-only", "path-only-secret"] {
                #expect(seen[step] == ErrorName.invalidArguments, "\(step): \(seen[step] ?? "missing")")
            }
            #expect(seen["sparse-terabyte"] == "org.baton.Error.PayloadTooLarge")
            #expect(seen["own-file"] == "ok")
            #expect(seen["digest"] == SHA256.hash(Array("nobody's words".utf8)).hexString)

            // Root's document is as it was; nobody's store holds its one snapshot and no leftovers.
            #expect(try await client.property(path, "Document") == before)
            #expect(before.asDictionary?["Digest"] == .string(SHA256.hash(content).hexString))
            let nobodyFiles = (try? FileManager.default.contentsOfDirectory(atPath: documents + "/\(nobodyUID)")) ?? []
            #expect(nobodyFiles.count <= 1 && nobodyFiles.allSatisfy { !$0.hasPrefix(".") }, "\(nobodyFiles)")
            var status = stat()
            #expect(stat(documents + "/\(nobodyUID)", &status) == 0 && status.st_mode & 0o777 == 0o700 && status.st_uid == 0,
                    "the store's directories are the daemon's, 0700")
        }
    }

    /// Attack: one user commits snapshots on many activities at once, each under the per-user cap, so
    /// that every commit passes the check before any has landed. Found: the cap counted only the
    /// snapshots on disk, so concurrent commits together passed it (five 4 MiB commits against a
    /// 10 MiB cap all succeeded). Fixed: bytes being copied are reserved per user and counted with the
    /// disk; what lands never exceeds the cap.
    @Test func concurrentCommitsOfOneUserStayWithinItsCap() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-cap-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let cap: UInt64 = 10 << 20
        let store = try SnapshotStore(directory: directory.appendingPathComponent("store").path, perDocumentLimit: cap, perUserLimit: cap)
        let size = 4 << 20
        var descriptors: [Int32] = []
        for index in 0..<5 {
            let path = directory.appendingPathComponent("source-\(index)").path
            try Data([UInt8](repeating: UInt8(index), count: size)).write(to: URL(fileURLWithPath: path))
            descriptors.append(open(path, O_RDONLY))
        }
        defer { descriptors.forEach { close($0) } }
        // One thread per commit, released together (the async pool may be as narrow as two threads).
        let results = Mutex([Bool](repeating: false, count: descriptors.count))
        let start = DispatchSemaphore(value: 0), done = DispatchGroup()
        for (index, descriptor) in descriptors.enumerated() {
            done.enter()
            Thread.detachNewThread {
                start.wait()
                let landed = (try? store.commit(from: descriptor, uid: 4242, name: "a\(index)-1")) != nil
                results.withLock { $0[index] = landed }
                done.leave()
            }
        }
        for _ in descriptors { start.signal() }
        await withCheckedContinuation { continuation in done.notify(queue: .global()) { continuation.resume() } }
        let outcomes = results.withLock { $0 }
        let landed = try FileManager.default.contentsOfDirectory(atPath: store.directory + "/4242").filter { !$0.hasPrefix(".") }
        #expect(outcomes.filter { $0 }.count == landed.count)
        #expect(UInt64(landed.count * size) <= cap, "\(landed.count) snapshots of \(size) bytes landed under a cap of \(cap)")
        #expect(landed.count == 2, "as many as fit")
        // Refusals released their reservation: once the others are gone, a commit fits again.
        for name in landed { store.remove(uid: 4242, name: name) }
        #expect((try? store.commit(from: descriptors[0], uid: 4242, name: "a9-1")) != nil)
    }
}
