// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonCore
import BatonPublishers
import Testing

private let text = ClipboardTypes.text

private func item(_ type: String, _ size: UInt64) -> ClipboardItem { try! ClipboardItem(mediaType: type, size: size) }

private func change(_ revision: UInt64, _ types: [String] = [text], secret: Bool = false) -> ClipboardBridgeEvent {
    .session(.changed(ClipboardChange(types: types, isSecret: secret, revision: revision)))
}

/// A machine turned on with batond present (registered).
private func running() -> ClipboardBridgeMachine {
    var machine = ClipboardBridgeMachine()
    #expect(machine.handle(.daemonAppeared) == [])
    #expect(machine.handle(.settings(enabled: true)) == [.register])
    return machine
}

private func withoutLogs(_ commands: [ClipboardBridgeCommand]) -> [ClipboardBridgeCommand] {
    commands.filter { if case .log = $0 { false } else { true } }
}

@Suite("BatonAgentTests: the clipboard bridge's state machine")
struct ClipboardBridgeMachineTests {
    @Test func aCopyIsReadThenOfferedAndANewerCopyReplacesIt() {
        var machine = running()
        #expect(machine.handle(change(1, [text, "image/png", "application/x-thing"]))
                == [.read(revision: 1, types: [text, "image/png"], limit: ClipboardBridgeMachine.defaultReadLimit)])
        let items = [item(text, 5), item("image/png", 9)]
        #expect(withoutLogs(machine.handle(.readDone(revision: 1, items: items, leftOut: []))) == [.offer(revision: 1, kind: .text)])
        #expect(machine.ringOffer == .offered(revision: 1, kind: .text, items: items))
        // A newer copy: the older offer goes at once (never stale bytes), the newer is read.
        #expect(machine.handle(change(2, ["image/png"])) == [.withdraw, .read(revision: 2, types: ["image/png"], limit: ClipboardBridgeMachine.defaultReadLimit)])
        // A late read of the older copy is dropped.
        #expect(machine.handle(.readDone(revision: 1, items: items, leftOut: [])) == [])
        #expect(withoutLogs(machine.handle(.readDone(revision: 2, items: [item("image/png", 9)], leftOut: ["image/bmp: too large"])))
                == [.offer(revision: 2, kind: .image)])
    }

    @Test func aSecretCopyIsNeverReadAndTakesTheEarlierOfferBack() {
        var machine = running()
        _ = machine.handle(change(1))
        _ = machine.handle(.readDone(revision: 1, items: [item(text, 3)], leftOut: []))
        let commands = machine.handle(change(2, [text], secret: true))
        #expect(withoutLogs(commands) == [.withdraw])
        #expect(commands.contains(.log("copy 2 is marked secret: not offered")))
        #expect(machine.ringOffer == .none)
        // A secret copy while a read is under way: that read's result is dropped.
        _ = machine.handle(change(3))
        #expect(withoutLogs(machine.handle(change(4, [text], secret: true))) == [])
        #expect(machine.handle(.readDone(revision: 3, items: [item(text, 3)], leftOut: [])) == [])
    }

    @Test func offNothingIsReadOfferedOrTakenAndTurningOffUnregisters() {
        var machine = ClipboardBridgeMachine()
        _ = machine.handle(.daemonAppeared)
        #expect(machine.handle(change(1)) == [])
        #expect(machine.handle(.offered(token: 7, device: "alpha", kind: .text, items: [item(text, 2)])) == [])
        var on = running()
        _ = on.handle(.offered(token: 7, device: "alpha", kind: .text, items: [item(text, 2)]))
        #expect(withoutLogs(on.handle(.settings(enabled: false))) == [.unregister, .release])
        #expect(!on.registered && on.held == nil && on.ringOffer == .none)
    }

    @Test func aMembersCopyIsTakenWithItsTypesServedUntilWithdrawnAndNeverOfferedBack() {
        var machine = running()
        _ = machine.handle(change(1))
        _ = machine.handle(.readDone(revision: 1, items: [item(text, 3)], leftOut: []))
        let items = [item(text, 4), item("image/png", 10)]
        #expect(machine.handle(.offered(token: 9, device: "alpha", kind: .text, items: items))
                == [.withdraw, .take(token: 9, types: [text, "image/png"])])
        #expect(machine.serves(token: 9) && !machine.serves(token: 8))
        #expect(machine.ringOffer == .none)
        #expect(machine.handle(.withdrawn(token: 8)) == [])
        #expect(machine.handle(.withdrawn(token: 9)) == [.release])
        #expect(!machine.serves(token: 9))
        // Another client copying over a taken copy: it is lost, the new copy is offered.
        _ = machine.handle(.offered(token: 10, device: "alpha", kind: .text, items: items))
        #expect(machine.handle(.session(.offerLost)) == [])
        #expect(!machine.serves(token: 10))
        #expect(machine.handle(change(2)) == [.read(revision: 2, types: [text], limit: ClipboardBridgeMachine.defaultReadLimit)])
    }

    /// Attack (a rogue ring member, or a newer Baton): a copy offering a file list of `file:` URIs
    /// (the copying machine's paths), the selection protocol's own names and a secrecy marker beside
    /// text. Protocol §6.7: a receiver never hands such a list to an app as it is. Found: the agent
    /// took the session clipboard with every offered type, so a paste in a file manager got the
    /// list. Fixed: only the types the agent offers itself are taken (text, HTML, images); a copy
    /// with none of them is not taken at all, and the agent's own offer stays.
    @Test func aMembersCopyIsTakenOnlyWithTypesThisAgentOffersItself() {
        var machine = running()
        _ = machine.handle(change(1))
        _ = machine.handle(.readDone(revision: 1, items: [item(text, 3)], leftOut: []))
        let hostile = ["text/uri-list", "x-special/gnome-copied-files", "TARGETS", "MULTIPLE", "INCR", "x-kde-passwordManagerHint",
                       "application/x-nspasteboard-concealed-type", "application/octet-stream"].map { item($0, 40) }
        #expect(withoutLogs(machine.handle(.offered(token: 5, device: "rogue", kind: .files, items: hostile))) == [])
        #expect(machine.held == nil && !machine.serves(token: 5))
        #expect(machine.ringOffer == .offered(revision: 1, kind: .text, items: [item(text, 3)]), "the agent's own offer was dropped")
        #expect(machine.handle(.offered(token: 6, device: "rogue", kind: .text, items: hostile + [item(text, 4), item("IMAGE/PNG", 9)]))
                == [.withdraw, .take(token: 6, types: [text, "IMAGE/PNG"])])
        #expect(machine.held?.items == [item(text, 4), item("IMAGE/PNG", 9)])
    }

    @Test func aRestartedDaemonIsRegisteredAgainAndForgetsOfferAndTakenCopy() {
        var machine = running()
        _ = machine.handle(.offered(token: 9, device: "alpha", kind: .text, items: [item(text, 1)]))
        #expect(machine.handle(.daemonVanished) == [.release])
        #expect(machine.handle(change(1)) == [])
        #expect(machine.handle(.daemonAppeared) == [.register])
        #expect(withoutLogs(machine.handle(.registrationFailed("no"))) == [])
        #expect(machine.handle(change(2)) == [])
    }

    /// Every state reachable with a bounded alphabet (two revisions, two tokens), every event in each:
    /// the rules hold on every transition.
    @Test func everyReachableTransitionKeepsTheRules() {
        let items1 = [item(text, 3)], items2 = [item("image/png", 8)]
        let files = [try! ClipboardFile(name: "a.txt", size: 3, mediaType: "text/plain")]
        let alphabet: [ClipboardBridgeEvent] = [
            change(3, ["text/uri-list", text]), .filesRead(revision: 3, copy: 30, files: files), .filesRefused(revision: 3, "too many"),
            .filesRead(revision: 1, copy: 31, files: files), .fileChanged(copy: 30, "changed"), .fileChanged(copy: 31, "changed"),
            .offerFailed(revision: 3, "x"), .offeredFiles(token: 12, device: "c", files: files), .withdrawn(token: 12),
            .takeFailed(token: 12, "x"), .pasteFailed("x"),
            .settings(enabled: true), .settings(enabled: false), .daemonAppeared, .daemonVanished, .registrationFailed("x"),
            change(1), change(2, ["image/png"]), change(1, [text], secret: true), change(2, [text], secret: true), change(2, ["text/uri-list"]),
            .session(.cleared), .session(.offerLost),
            .readDone(revision: 1, items: items1, leftOut: []), .readDone(revision: 2, items: items2, leftOut: []),
            .readDone(revision: 1, items: [], leftOut: ["all"]),
            .offerFailed(revision: 1, "x"), .offerFailed(revision: 2, "x"),
            .offered(token: 10, device: "a", kind: .text, items: items1), .offered(token: 11, device: "b", kind: .image, items: items2),
            .takeFailed(token: 10, "x"), .withdrawn(token: 10), .withdrawn(token: 11),
        ]
        var seen: Set<ClipboardBridgeMachine> = [ClipboardBridgeMachine()]
        var frontier = [ClipboardBridgeMachine()]
        var transitions = 0, offers = 0, takes = 0, secretWithdrawals = 0, fileOffers = 0, changedFiles = 0
        while let state = frontier.popLast() {
            for event in alphabet {
                var next = state
                let commands = withoutLogs(next.handle(event))
                transitions += 1
                let context = "\(state) + \(event) -> \(commands)"
                // Off: nothing registered, offered or held.
                if !next.enabled { #expect(!next.registered && next.ringOffer == .none && next.held == nil, "\(context)") }
                if next.ringOffer != .none || next.held != nil { #expect(next.enabled && next.registered && next.daemonPresent, "\(context)") }
                for command in commands {
                    switch command {
                    case .offer(let revision, _):
                        offers += 1
                        // Only the read of the copy still current, while on and registered.
                        guard case .readDone(revision, let items, _) = event else { Issue.record("offer without its read: \(context)"); continue }
                        #expect(!items.isEmpty && state.ringOffer == .reading(revision: revision) && state.enabled && state.registered, "\(context)")
                    case .offerFiles(let revision, let copy, let offered):
                        offers += 1
                        fileOffers += 1
                        guard case .filesRead(revision, copy, offered) = event else { Issue.record("files offered without their read: \(context)"); continue }
                        #expect(!offered.isEmpty && state.ringOffer == .reading(revision: revision) && state.enabled && state.registered, "\(context)")
                        #expect(next.ringOffer == .offeredFiles(revision: revision, copy: copy, files: offered), "\(context)")
                    case .readFiles(let revision, let type, let otherwise, _):
                        guard case .session(.changed(let change)) = event else { Issue.record("read without a change: \(context)"); continue }
                        #expect(change.revision == revision && !change.isSecret && state.enabled && state.registered, "\(context)")
                        #expect(type == ClipboardBridgeMachine.filesType(change.types) && otherwise.allSatisfy(change.types.contains), "\(context)")
                    case .read(let revision, let types, _):
                        guard case .session(.changed(let change)) = event else { Issue.record("read without a change: \(context)"); continue }
                        #expect(change.revision == revision && !change.isSecret && state.enabled && state.registered, "\(context)")
                        #expect(types == ClipboardBridgeMachine.offerable(change.types) && !types.isEmpty, "\(context)")
                    case .withdraw:
                        // Only an offer batond has is taken back.
                        switch state.ringOffer {
                        case .offered, .offeredFiles: break
                        default: Issue.record("withdraw of nothing: \(context)")
                        }
                    case .take(let token, let types):
                        takes += 1
                        switch event {
                        case .offered(token, _, _, let items): #expect(types == ClipboardBridgeMachine.offerable(items.map(\.mediaType)) && !types.isEmpty, "\(context)")
                        case .offeredFiles(token, _, let offered):
                            // Files are taken as a uri-list and GNOME's list, never by their own types.
                            #expect(types == ClipboardFileURIs.pasteTypes && next.servesFiles(token: token) && next.held?.files == offered, "\(context)")
                        default: Issue.record("take without an offer: \(context)")
                        }
                        #expect(next.serves(token: token) && next.ringOffer == .none, "\(context)")
                    case .release:
                        #expect(state.held != nil && next.held == nil, "\(context)")
                    case .register:
                        #expect(next.enabled && next.daemonPresent && next.registered, "\(context)")
                    case .unregister:
                        #expect(state.registered && !next.enabled, "\(context)")
                    case .log:
                        break
                    }
                }
                // A secret copy: nothing read or offered, and an earlier offer taken back.
                if case .session(.changed(let change)) = event, change.isSecret {
                    #expect(!commands.contains { if case .read = $0 { true } else { false } } && next.ringOffer == .none, "\(context)")
                    if case .offered = state.ringOffer {
                        #expect(commands.contains(.withdraw), "\(context)")
                        secretWithdrawals += 1
                    }
                }
                // A taken copy is never read back for the ring: holding it, nothing is being read.
                if next.held != nil { #expect(next.ringOffer == .none, "\(context)") }
                // A file of our offered copy that changed ends that offer (batond took it back) and no other.
                if case .fileChanged(let copy, _) = event {
                    if case .offeredFiles(_, copy, _) = state.ringOffer {
                        #expect(next.ringOffer == .none && commands.isEmpty && next.note != nil, "\(context)")
                        changedFiles += 1
                    } else {
                        #expect(next == state, "\(context)")
                    }
                }
                if seen.insert(next).inserted { frontier.append(next) }
            }
        }
        // The walk reached every state there is (off or on, with and without batond, registration
        // refused, reading or offering either copy or the files, holding either member's copy or its
        // files, each with the note the last refusal or failure left): the rules above were checked on
        // all of them.
        #expect(seen.count == 63 && offers > 0 && takes > 0 && secretWithdrawals > 0 && fileOffers > 0 && changedFiles > 0,
                "\(seen.count) states, \(transitions) transitions")
    }

    @Test func aCopyOfFilesIsReadAsFilesOfferedAsFilesAndAChangedFileTakesItBack() {
        var machine = running()
        let files = [try! ClipboardFile(name: "report.pdf", size: 1_000, mediaType: "application/pdf")]
        // A file manager's copy: the list is read first; text beside it is read only if it names no file.
        #expect(machine.handle(change(1, ["x-special/gnome-copied-files", "text/uri-list", text]))
                == [.readFiles(revision: 1, type: "text/uri-list", otherwise: [text, "text/uri-list"], limit: ClipboardBridgeMachine.defaultReadLimit)])
        #expect(machine.handle(.filesRead(revision: 1, copy: 77, files: files)) == [.offerFiles(revision: 1, copy: 77, files: files)])
        #expect(machine.ringOffer == .offeredFiles(revision: 1, copy: 77, files: files))
        // A change of another copy's file says nothing of this one.
        #expect(machine.handle(.fileChanged(copy: 78, "x")) == [])
        // batond asked for the file, it had changed: the offer is gone (batond took it back), and why is noted.
        let commands = machine.handle(.fileChanged(copy: 77, "report.pdf changed since it was copied"))
        #expect(withoutLogs(commands) == [] && machine.ringOffer == .none)
        #expect(machine.note == "the last copy is no longer offered: report.pdf changed since it was copied")
        // Only GNOME's list: read it; a refusal (too many files, a folder) is noted and nothing offered.
        #expect(machine.handle(change(2, ["x-special/gnome-copied-files"]))
                == [.readFiles(revision: 2, type: "x-special/gnome-copied-files", otherwise: [], limit: ClipboardBridgeMachine.defaultReadLimit)])
        #expect(withoutLogs(machine.handle(.filesRefused(revision: 2, "docs is a folder"))) == [] && machine.ringOffer == .none)
        #expect(machine.note == "the last copy was not offered: docs is a folder")
        // A list that named no local file comes back as an ordinary read, and clears the note.
        _ = machine.handle(change(3, ["text/uri-list"]))
        #expect(withoutLogs(machine.handle(.readDone(revision: 3, items: [item("text/uri-list", 20)], leftOut: []))) == [.offer(revision: 3, kind: .text)])
        #expect(machine.note == nil)
        // A copy of files marked secret is neither read nor offered (the links offered before are taken back).
        #expect(withoutLogs(machine.handle(change(6, ["text/uri-list", "x-special/gnome-copied-files"], secret: true))) == [.withdraw])
        #expect(machine.ringOffer == .none)
        // A newer copy takes an offered copy of files back at once.
        _ = machine.handle(change(4, ["text/uri-list"]))
        _ = machine.handle(.filesRead(revision: 4, copy: 79, files: files))
        #expect(machine.handle(change(5)) == [.withdraw, .read(revision: 5, types: [text], limit: ClipboardBridgeMachine.defaultReadLimit)])
    }

    @Test func aMembersCopyOfFilesIsTakenAsAListOfFilesAndAFailedPasteIsNoted() {
        var machine = running()
        let files = [try! ClipboardFile(name: "a.png", size: 5, mediaType: "image/png"), try! ClipboardFile(name: "a.png", size: 6, mediaType: "image/png")]
        #expect(machine.handle(.offeredFiles(token: 5, device: "alpha", files: files)) == [.take(token: 5, types: ["text/uri-list", "x-special/gnome-copied-files"])])
        #expect(machine.servesFiles(token: 5) && machine.held?.files == files && machine.held?.kind == .files)
        #expect(machine.handle(.pasteFailed("the last paste of files from alpha failed")) == [] && machine.note == "the last paste of files from alpha failed")
        #expect(machine.servesFiles(token: 5))
        // An empty list is no copy; off, nothing is taken.
        #expect(machine.handle(.offeredFiles(token: 6, device: "alpha", files: [])) == [] && machine.servesFiles(token: 5))
        #expect(machine.handle(.withdrawn(token: 5)) == [.release] && !machine.servesFiles(token: 5))
        _ = machine.handle(.settings(enabled: false))
        #expect(machine.handle(.offeredFiles(token: 7, device: "alpha", files: files)) == [] && machine.held == nil)
    }

    @Test func offerableTypesAndKind() {
        #expect(ClipboardBridgeMachine.offerable([text, "text/html", "IMAGE/PNG", "text/uri-list", "application/pdf"]) == [text, "text/html", "IMAGE/PNG"])
        #expect(ClipboardBridgeMachine.offerable((0..<40).map { "image/x-\($0)" }).count == ClipboardOffer.maxItems)
        #expect(ClipboardBridgeMachine.kind(of: [item("image/png", 1), item(text, 1)]) == .text)
        #expect(ClipboardBridgeMachine.kind(of: [item("text/html", 1), item("image/png", 1)]) == .image)
        #expect(ClipboardBridgeMachine.kind(of: [item("text/html", 1)]) == .text)
    }
}
