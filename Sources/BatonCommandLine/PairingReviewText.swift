// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI

/// What `bt-pair` says while a pairing session is reviewing (§7.2 "What the users do"), before it
/// asks to commit: the members joining, then, in plain words, the members of this ring the other
/// ring's removal marks would remove and the members it would re-key.
public enum PairingReviewText {
    public static func lines(_ session: PairingSessionProperties) -> [String] {
        var lines = ["The other ring brings \(session.peerMembers.count) member(s):"]
        lines += session.peerMembers.map { "  \(shown($0))" }
        for removal in session.peerRemovals {
            let name = shown(removal.name), id = shown(removal.id)
            let who = removal.isThisMachine ? "THIS MACHINE, \(name) (\(id))" : "\(name) (\(id))"
            let by: String
            if removal.removedByID.isEmpty {
                by = "taken out with the removed member that introduced it"
            } else if removal.removedByName.isEmpty {
                by = "removed by \(shown(removal.removedByID))"
            } else {
                by = "removed by \(shown(removal.removedByName)) (\(shown(removal.removedByID)))"
            }
            lines.append("Joining will also remove from this ring: \(who), \(by).")
        }
        if session.peerRemovals.contains(where: \.isThisMachine) {
            lines.append("This machine would leave its own ring and start over alone: answer no unless that is what you want.")
        }
        for generation in session.peerGenerations {
            let who = generation.isThisMachine ? "this machine" : "\(shown(generation.name)) (\(shown(generation.id)))"
            lines.append("Joining will also re-key: \(who) (generation \(generation.from) → \(generation.to)).")
        }
        return lines
    }

    /// A name as the prompt prints it: a member's name is chosen freely by whoever introduced its
    /// identity (the peer, for the members it brings), so control and format characters (a terminal
    /// escape that hides or rewrites the lines after it, a newline forging a line) are shown as "?".
    /// `bt-pair list` prints names through it too.
    public static func shown(_ text: String) -> String {
        String(text.map { character -> Character in
            character.unicodeScalars.allSatisfy { scalar in
                switch scalar.properties.generalCategory {
                case .control, .format, .lineSeparator, .paragraphSeparator: false
                default: true
                }
            } ? character : "?"
        })
    }

    /// The question asked after `lines`.
    public static func question(_ session: PairingSessionProperties) -> String {
        session.peerRemovals.isEmpty ? "Add them to this ring? [y/N] " : "Add them and remove those listed from this ring? [y/N] "
    }
}
