// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
import BatonDBus
import Testing

/// Issue 26: the bus's own errors reach a person as a sentence with the fix, never as D-Bus text
/// ("org.freedesktop.DBus.Error.AccessDenied: Rejected send message, 2 matched rules; ...").
@Suite("bus errors in words")
struct ErrorSentenceTests {
    let options = GlobalOptions()

    func sentence(_ name: String, _ message: String, _ command: String) -> String {
        DaemonReachability.sentence(for: BatonClientError(name: name, message: message), options: options, command: command)
    }

    @Test func accessDeniedNamesGroupBatonAndTheFix() {
        let text = sentence(DBusError.accessDeniedName, "Rejected send message, 2 matched rules; type=\"method_call\"", "continue")
        #expect(text.contains("group `baton`") && text.contains("continue a suggestion") && text.contains("sudo adduser $USER baton"), "\(text)")
        #expect(!text.contains("org.freedesktop") && !text.contains("matched rules"), "\(text)")
        // The shipped policy leaves it to batond and polkit: a refusal by the bus is an older policy.
        #expect(text.contains("older org.baton.conf") && text.contains("reinstall baton"), "\(text)")
    }

    @Test func batondsRefusalKeepsItsFixAndItsShortName() {
        let text = sentence("org.baton.Error.NotPermitted", "pairing and removal need root, group baton or an administrator's password", "accept")
        #expect(text == "pairing and removal need root, group baton or an administrator's password (NotPermitted)")
    }

    @Test func unknownObjectSaysWhatListsTheRest() {
        let text = sentence(DBusError.unknownObjectName, "No such object path '/org/baton/suggestion/9'", "continue")
        #expect(text.hasPrefix("batond has no such suggestion") && text.contains("`baton suggestions`"), "\(text)")
        #expect(!text.contains("org.freedesktop") && !text.contains("No such object path"), "\(text)")
    }

    @Test func notRunningSaysHowToStartIt() {
        let text = sentence(DBusError.serviceUnknownName, "The name org.baton was not provided by any .service files", "status")
        #expect(text.contains("batond is not running on the system bus") && text.contains("systemctl start batond"), "\(text)")
        #expect(!text.contains("org.freedesktop") && !text.contains(".service files"), "\(text)")
    }

    @Test func aRefusedConnectionIsNoRawErrno() {
        let refused = BatonClientError(name: "org.freedesktop.DBus.Error.NoServer",
                                       message: "Failed to connect to socket /run/dbus/system_bus_socket: Connection refused")
        let failure = DaemonReachability.connectionFailure(refused, options: options)
        let text = DaemonReachability.sentence(for: failure, options: options, command: "status")
        #expect(text.contains("the system bus is not running") && text.contains("sudo systemctl start dbus"), "\(text)")
        #expect(!text.contains("org.freedesktop") && !text.contains("Failed to connect"), "\(text)")
    }

    /// Issue 26: batond's message, then the short name in brackets for scripts; no "org.baton.Error." to a person.
    @Test func batondsOwnErrorsKeepTheirShortNameForScripts() {
        let text = sentence("org.baton.Error.InvalidArguments", "the type needs two dots", "publish")
        #expect(text == "the type needs two dots (InvalidArguments)")
    }

    @Test func noOtherBusErrorIsShownRaw() {
        let text = sentence("org.freedesktop.DBus.Error.MatchRuleInvalid", "raw text from the bus", "status")
        #expect(!text.contains("org.freedesktop") && !text.contains("raw text from the bus"), "\(text)")
    }
}
