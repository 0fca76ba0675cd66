// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

/// The one web-address check. It replaced three copies: batond's (ContinueInBrowser, the strictest
/// and the one docs/dbus-api.md describes: "an http or https URL with a host"), and the agent's and
/// the browser host's, which looked at the scheme only. Each case where they differed is here.
@Suite struct WebAddressTests {
    @Test(arguments: ["https://example.org/", "http://example.org/a?b=c", "HTTPS://Example.org", "HtTp://host",
                      "https://例え.jp/パス", "http://[::1]:8080/", "https://user@host/"])
    func webAddressesPass(_ url: String) {
        #expect(isWebAddress(url))
    }

    /// Refused by all three copies before: other schemes, and http without "//".
    @Test(arguments: ["file:///etc/passwd", "javascript:alert(1)", "smb://host/share", "x-scheme://h", "about:blank",
                      "data:text/html,hi", "chrome://settings", "http:example.org", "https:/example.org", "", "ftp://host/"])
    func otherSchemesAreRefused(_ url: String) {
        #expect(!isWebAddress(url))
    }

    /// The agent and the browser host took these (scheme only); batond did not. No host: nothing to open.
    @Test(arguments: ["https://", "http://", "https:///path", "http:////host"])
    func anAddressWithoutAHostIsRefused(_ url: String) {
        #expect(!isWebAddress(url))
    }

    /// The agent and the browser host took these too; batond did not: a space, a control character or
    /// DEL anywhere (a browser shows them percent-encoded, so no real page has one).
    @Test(arguments: ["https://a b", "https://host/a b", "https://host/\t", "https://host/\n", "https://host\u{7F}/", "https://host/\u{0}"])
    func spacesAndControlCharactersAreRefused(_ url: String) {
        #expect(!isWebAddress(url))
    }
}
