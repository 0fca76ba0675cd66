// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// Maps `_baton._tcp` instance names to the ring members that published them (protocol §3, §8.2).
///
/// A member's name for epoch e is `mdnsInstanceName(epoch: e)` of its keys. Clocks differ a little,
/// so names of the previous, current and next epoch are all accepted. Names of strangers (or of
/// members at other epochs) map to nil. Build one per epoch; lookups are then a dictionary hit.
public struct InstanceNameDirectory: Sendable {
    private let owners: [String: DeviceID]
    public let epoch: UInt64

    public init(members: [DeviceID: DerivedKeys], epoch: UInt64) {
        self.epoch = epoch
        var owners: [String: DeviceID] = [:]
        for (id, keys) in members {
            for candidate in Self.acceptedEpochs(around: epoch) {
                owners[keys.mdnsInstanceName(epoch: candidate)] = id
            }
        }
        self.owners = owners
    }

    /// The member that published `instanceName`, or nil for a stranger.
    public func member(forInstanceName instanceName: String) -> DeviceID? {
        // Names are 16 hex digits; DNS compares names case-insensitively, so fold ASCII case.
        guard instanceName.utf8.count == 16 else { return nil }
        return owners[instanceName.lowercased()]
    }

    /// One-shot form of the lookup, for callers that do not keep a directory.
    public static func member(forInstanceName instanceName: String, members: [DeviceID: DerivedKeys],
                              epoch: UInt64) -> DeviceID? {
        InstanceNameDirectory(members: members, epoch: epoch).member(forInstanceName: instanceName)
    }

    /// epoch-1, epoch, epoch+1, without wrapping at either end of UInt64.
    static func acceptedEpochs(around epoch: UInt64) -> [UInt64] {
        var epochs = [epoch]
        if epoch > 0 { epochs.append(epoch - 1) }
        if epoch < UInt64.max { epochs.append(epoch + 1) }
        return epochs
    }
}
