// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport
import Synchronization

/// What the transfer needs from the activities: the record a FetchActivity returns and the
/// WasContinued notice, documents and edit sessions. `Activities` conforms; the transfer knows
/// no more of it. No requirement has a default (fakes: Tests/Support/BatonServiceFakes).
public protocol TransferActivities: Sendable {
    /// The user's current activity as it leaves the machine (WillSave first when asked for);
    /// nil when there is none. The id comes back in `notifyWasContinued`.
    func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)?
    func notifyWasContinued(_ id: ActivityID, device: String) async
    /// The snapshot attached to the user's published activity, if any (§6.5).
    func documentForTransfer(uid: UInt32) async -> AttachedDocument?
    /// Edit sessions (§6.6), when documents are enabled.
    func editSessionsForTransfer() async -> EditSessions?
    /// Asks the app of `uid`'s current activity to save (WillSave) and returns the digest of its
    /// document `documentID` as committed, or nil when it is not saved (edited since, not attached).
    func savedDocument(documentID: String, uid: UInt32) async -> [UInt8]?
}

/// The identity keys of the current ring members (not this device, not removed), read by the TLS
/// listener and connector at every handshake (protocol §8.1).
final class PinBox: Sendable {
    private let pins = Mutex(PinSet.empty)
    var current: PinSet { pins.withLock { $0 } }
    func set(_ keys: [[UInt8]]) { pins.withLock { $0 = PinSet(keys) } }
}

/// Why a request to another ring member failed.
public enum TransferError: Error, Sendable, Equatable {
    /// The device is not (or no longer) a ring member.
    case notAMember
    /// No endpoint is known for the member.
    case noEndpoints
    /// No endpoint answered as that member; the last cause.
    case unreachable(String)
    /// The member answered Hello but the connection broke before its reply (every attempt).
    case interrupted(String)
    /// The member answered Hello but not the request within the request timeout.
    case timedOut(String)
    /// The member answered with an Error frame.
    case remote(ErrorFrame)
    /// The member's answer broke the protocol.
    case protocolError(String)
}

/// Counts the L2CAP transfer channels open at once, bounded by `limit`.
final class ChannelBudget: Sendable {
    private let inUse = Mutex(0)
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Takes one slot; false when all are in use.
    func take() -> Bool {
        inUse.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func give() { inUse.withLock { $0 = max(0, $0 - 1) } }
}
