// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI

/// What `bt-pair` says while a pairing session is reviewing (§7.2 "What the users do"), before it
/// asks to commit: the members joining, then, in plain words, the members of this ring the other
/// ring's removal marks would remove and the members it would re-key.
public enum PairingReviewText {
    public static func lines(_ session: PairingSessionProperties) -> [String] {
        var lines = ["The other ring brings \(session.peerMembers.count) member(s):"]
        lines += session.peerMembers.map { "  \($0)" }
        for removal in session.peerRemovals {
            let who = removal.isThisMachine ? "THIS MACHINE, \(removal.name) (\(removal.id))" : "\(removal.name) (\(removal.id))"
            let by: String
            if removal.removedByID.isEmpty {
                by = "taken out with the removed member that introduced it"
            } else if removal.removedByName.isEmpty {
                by = "removed by \(removal.removedByID)"
            } else {
                by = "removed by \(removal.removedByName) (\(removal.removedByID))"
            }
            lines.append("Joining will also remove from this ring: \(who), \(by).")
        }
        if session.peerRemovals.contains(where: \.isThisMachine) {
            lines.append("This machine would leave its own ring and start over alone: answer no unless that is what you want.")
        }
        for generation in session.peerGenerations {
            let who = generation.isThisMachine ? "this machine" : "\(generation.name) (\(generation.id))"
            lines.append("Joining will also re-key: \(who) (generation \(generation.from) → \(generation.to)).")
        }
        return lines
    }

    /// The question asked after `lines`.
    public static func question(_ session: PairingSessionProperties) -> String {
        session.peerRemovals.isEmpty ? "Add them to this ring? [y/N] " : "Add them and remove those listed from this ring? [y/N] "
    }
}
