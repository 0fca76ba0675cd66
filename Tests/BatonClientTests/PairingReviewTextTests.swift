// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCommandLine
import Testing

/// What bt-pair says while reviewing a pairing (issue 23 finding 8a): members joining, then the
/// members of this ring the other ring would remove and re-key, in plain words, before the question.
@Suite struct PairingReviewTextTests {
    @Test func removalsAndReKeysAreSaidBeforeTheQuestion() {
        let session = PairingSessionProperties(
            state: "reviewing", peerMembers: ["desk (ab12-cd34)"],
            peerRemovals: [.init(name: "laptop", id: "3f2a-0001", removedByName: "desk", removedByID: "ab12-cd34"),
                           .init(name: "phone", id: "77aa-0002"),
                           .init(name: "tower", id: "5b5b-0003", removedByName: "", removedByID: "9c9c-0004", isThisMachine: true)],
            peerGenerations: [.init(name: "desk", id: "ab12-cd34", from: 4, to: 5),
                              .init(name: "tower", id: "5b5b-0003", from: 2, to: 3, isThisMachine: true)])
        #expect(PairingReviewText.lines(session) == [
            "The other ring brings 1 member(s):",
            "  desk (ab12-cd34)",
            "Joining will also remove from this ring: laptop (3f2a-0001), removed by desk (ab12-cd34).",
            "Joining will also remove from this ring: phone (77aa-0002), taken out with the removed member that introduced it.",
            "Joining will also remove from this ring: THIS MACHINE, tower (5b5b-0003), removed by 9c9c-0004.",
            "This machine would leave its own ring and start over alone: answer no unless that is what you want.",
            "Joining will also re-key: desk (ab12-cd34) (generation 4 → 5).",
            "Joining will also re-key: this machine (generation 2 → 3).",
        ])
        #expect(PairingReviewText.question(session) == "Add them and remove those listed from this ring? [y/N] ")
    }

    @Test func aPeerBringingOnlyMembersIsAskedAsBefore() {
        let session = PairingSessionProperties(state: "reviewing", peerMembers: ["desk (ab12-cd34)"])
        #expect(PairingReviewText.lines(session) == ["The other ring brings 1 member(s):", "  desk (ab12-cd34)"])
        #expect(PairingReviewText.question(session) == "Add them to this ring? [y/N] ")
    }
}

/// Red team (ReviewAttackTests): a peer names the members it brings (and itself, the remover of
/// its marks) freely; a terminal escape in such a name must not hide or rewrite the review lines
/// after it, nor a newline forge one.
@Suite struct ReviewAttackTextTests {
    @Test func namesCannotCarryTerminalEscapesOrForgeLines() {
        let session = PairingSessionProperties(
            state: "reviewing", peerMembers: ["desk\u{1B}[8m (ab12-cd34)", "laptop\nJoining will also re-key: nothing (ab12-0000)"],
            peerRemovals: [.init(name: "laptop", id: "3f2a-0001", removedByName: "\r\u{1B}[2Kdesk", removedByID: "ab12-cd34")],
            peerGenerations: [.init(name: "x\u{202E}y", id: "ab12-cd34", from: 4, to: 5)])
        let lines = PairingReviewText.lines(session)
        for line in lines {
            #expect(!line.unicodeScalars.contains { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }, "\(line)")
        }
        #expect(lines.contains("  desk?[8m (ab12-cd34)"))
        #expect(lines.contains("Joining will also remove from this ring: laptop (3f2a-0001), removed by ??[2Kdesk (ab12-cd34)."))
        #expect(lines.count == 5)
    }
}
