// SPDX-License-Identifier: LGPL-2.1-or-later
/// Whether `url` is a web address: what may go to a browser, or leave the machine as a page.
/// http or https (the scheme in any case) followed by "://" and a host (something before any
/// path), with no space, control character or DEL anywhere. Any other scheme (file:, javascript:,
/// about:, data:, smb:, an extension's pages...) is refused: a URL from another machine must not
/// open files or launch URI handlers here, and a private page must not be published.
///
/// The one check for the browser host (what it publishes and what it asks the browser to open),
/// the agent (what it opens) and batond (what ContinueInBrowser hands out, docs/dbus-api.md).
public func isWebAddress(_ url: String) -> Bool {
    let lower = url.lowercased()
    guard let rest = ["https://", "http://"].first(where: { lower.hasPrefix($0) }).map({ lower.dropFirst($0.count) }) else { return false }
    return !rest.isEmpty && !rest.hasPrefix("/") && url.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7F }
}
