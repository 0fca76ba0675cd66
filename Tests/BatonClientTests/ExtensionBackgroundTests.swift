// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing

/// The extension's background script against a fake WebExtension API under node
/// (browser/tests/background-harness.js): the orderings a real browser produces only sometimes.
@Suite("The browser extension's background script, with a fake browser API")
struct ExtensionBackgroundTests {
    @Test("a content script that arrives after the tab's complete event still gets its scroll position reported; a background tab's does not; media goes with the page, a continued page gets its media time, and a page continued elsewhere is asked to pause")
    func lateContentScript() async throws {
        let harness = Built.packageRoot.appendingPathComponent("browser/tests/background-harness.js")
        let result = try await runTool("/usr/bin/node", [harness.path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.components(separatedBy: "\n").filter { $0.hasPrefix("ok ") }.count == 5, "\(result.stdout)")
    }
}
