// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus
import Testing

/// CheckAuthorization's arguments and replies (polkit's org.freedesktop.PolicyKit1.Authority).
@Suite("polkit CheckAuthorization coding")
struct PolkitCodingTests {
    @Test func argumentsNameTheCallersBusConnectionAndAskInteractionOnlyForPairing() throws {
        let continuing = Polkit.checkArguments(subject: ":1.42", action: .continueSuggestions, interactive: PolkitAction.continueSuggestions.allowsInteraction)
        #expect(continuing.count == 5)
        #expect(continuing[0] == .structure([.string("system-bus-name"), .propertyDictionary(["name": .string(":1.42")])]))
        #expect(continuing[1] == .string("org.baton.continue"))
        #expect(continuing[2] == .dictionary(keySignature: "s", valueSignature: "s", [:]))
        #expect(continuing[3] == .uint32(0))
        #expect(continuing[4] == .string(""))
        let pairing = Polkit.checkArguments(subject: ":1.42", action: .pair, interactive: PolkitAction.pair.allowsInteraction)
        #expect(pairing[1] == .string("org.baton.pair") && pairing[3] == .uint32(1))
        // The signature polkit declares: (sa{sv}) s a{ss} u s.
        #expect(continuing.map(\.signature).joined() == "(sa{sv})sa{ss}us")
    }

    static func reply(_ authorized: Bool, _ challenge: Bool, _ details: [String: String] = [:]) -> [DBusValue] {
        var dictionary: [DBusValue: DBusValue] = [:]
        for (key, value) in details { dictionary[.string(key)] = .string(value) }
        return [.structure([.boolean(authorized), .boolean(challenge), .dictionary(keySignature: "s", valueSignature: "s", dictionary)])]
    }

    @Test func repliesAreRead() {
        #expect(Polkit.answer(reply: Self.reply(true, false)) == .authorized)
        #expect(Polkit.answer(reply: Self.reply(false, true)) == .challenge)
        #expect(Polkit.answer(reply: Self.reply(false, false)) == .notAuthorized)
        #expect(Polkit.answer(reply: Self.reply(false, false, ["polkit.dismissed": "true"])) == .dismissed)
        // Other shapes are not guessed at.
        #expect(Polkit.answer(reply: []) == nil)
        #expect(Polkit.answer(reply: [.boolean(true)]) == nil)
        #expect(Polkit.answer(reply: [.structure([.boolean(true), .boolean(false)])]) == nil)
        #expect(Polkit.answer(reply: [.structure([.string("yes"), .boolean(false), .dictionary(keySignature: "s", valueSignature: "s", [:])])]) == nil)
    }

    @Test func errorsAreRead() {
        #expect(Polkit.answer(error: DBusError(name: DBusError.serviceUnknownName)) == .unavailable)
        #expect(Polkit.answer(error: DBusError(name: DBusError.nameHasNoOwnerName)) == .unavailable)
        #expect(Polkit.answer(error: DBusError(name: DBusError.noReplyName)) == .timedOut)
        #expect(Polkit.answer(error: DBusError(name: "org.freedesktop.PolicyKit1.Error.Failed",
                                               message: "Action org.baton.continue is not registered")) == .unknownAction)
        #expect(Polkit.answer(error: DBusError(name: "org.freedesktop.PolicyKit1.Error.Cancelled")) == .dismissed)
        #expect(Polkit.answer(error: DBusError(name: "org.freedesktop.PolicyKit1.Error.Failed", message: "other")) ==
                .failed("org.freedesktop.PolicyKit1.Error.Failed"))
    }
}
