// SPDX-License-Identifier: GPL-2.0-or-later
// Fault-injection helper for EditSessionTortureTests. Not part of the daemon. Each run is one step
// of §6.6 on one machine's state directory; the test carries the frames between the two machines
// (dropping some: lost requests and answers) and SIGKILLs runs at random moments.
//
//   baton-docsync-torture claim  <dir> <owner byte> <document> <request id>  → "claim <frame hex>"
//   baton-docsync-torture answer <dir> <claimer byte> <frame hex>            → "reply fresh|again <frame hex>"
//   baton-docsync-torture settle <dir> <owner byte> <frame hex>              → "settled imported|updated|alreadyApplied" or "refused <why>"
//   baton-docsync-torture edit   <dir> <document> <n>                        → "edit <revision>" or "edit refused <why>"
//   baton-docsync-torture show   <dir> <document>                            → "state <revision> <owner> <pending claims>"
//
// A machine's device id is 16 copies of its byte. The app's save in `answer` commits a snapshot
// whose digest depends on the request, so every fresh save is a new revision: a second save for
// one claim would show as a skipped revision.
#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import BatonCrypto
import BatonService
import BatonStore

func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var written = 0
    while written < bytes.count {
        let count = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress! + written, $0.count - written) }
        if count < 0 { if errno == EINTR { continue }; exit(2) }
        written += count
    }
}

func fail(_ why: String) -> Never {
    emit("error \(why)")
    exit(1)
}

func device(_ text: String) -> DeviceID {
    guard let byte = UInt8(text, radix: 16), let id = try? DeviceID(bytes: [UInt8](repeating: byte, count: 16)) else { fail("bad device byte") }
    return id
}

func frame(_ text: String) -> Frame {
    guard let bytes = [UInt8](hex: text), let decoded = try? Frame.decode(bytes) else { fail("bad frame") }
    return decoded
}

func hex(_ frame: Frame) -> String {
    guard let bytes = try? frame.encoded() else { fail("cannot encode") }
    return bytes.hexString
}

let arguments = CommandLine.arguments
guard arguments.count >= 4 else { fail("usage") }
let directory: StateDirectory
do { directory = try StateDirectory(path: arguments[2]) } catch { fail("state directory: \(error)") }
/// The one local user whose documents the torture drives.
let user = getuid()
let sessions: EditSessions
do { sessions = try EditSessions(directory: directory) } catch { fail("state: \(error)") }

switch arguments[1] {
case "claim" where arguments.count == 6:
    guard let requestID = UInt32(arguments[5]) else { fail("bad request id") }
    do {
        let pending = try await sessions.startClaim(arguments[4], from: device(arguments[3]), requestID: requestID, uid: user)
        emit("claim \(hex(pending.frame))")
    } catch { emit("claim refused \(error)") }
case "answer" where arguments.count == 5:
    let request = frame(arguments[4])
    let (reply, fresh) = await sessions.answerClaim(request, from: device(arguments[3]), uid: user) { claim in
        SHA256.hash(Array("saved \(claim.documentID) \(request.requestID)".utf8))
    }
    emit("reply \(fresh ? "fresh" : "again") \(hex(reply))")
case "settle" where arguments.count == 5:
    let reply = frame(arguments[4])
    let owner = device(arguments[3])
    guard let pending = await sessions.replays(for: owner).first(where: { $0.requestID == reply.requestID }) else { emit("refused notPending"); exit(0) }
    do { emit("settled \(try await sessions.settle(pending, reply: reply))") } catch { emit("refused \(error)") }
case "edit" where arguments.count == 5:
    do { emit("edit \(try await sessions.commitLocal(arguments[3], digest: SHA256.hash(Array("edit \(arguments[4])".utf8)), uid: user).revision)") } catch {
        emit("edit refused \(error)")
    }
case "show":
    let ledger = await sessions.ledger(arguments[3], uid: user)
    let owner: String
    switch ledger?.owner {
    case .thisMachine: owner = "this"
    case .peer(let id): owner = (id.bytes[0] < 16 ? "0" : "") + String(id.bytes[0], radix: 16)
    case nil: owner = "none"
    }
    emit("state \(ledger?.current.revision ?? 0) \(owner) \(await sessions.pendingClaims.count)")
default:
    fail("usage")
}
