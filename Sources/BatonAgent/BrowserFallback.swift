// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus

/// "Open in browser": the daemon fetches the activity and hands back its webpage URL
/// (Suggestion1.ContinueInBrowser, proposed in docs/agent.md; the source then hears WasContinued),
/// and the agent opens it in the user's session, where the default browser is known.
enum BrowserFallback {
    static let method = OrgBaton.Suggestion1.continueInBrowser.name

    static func open(path: String, daemon: BatonConnection, opener: (any URLOpener)?, logger: any AgentLog) async {
        do {
            let url = try await daemon.continueSuggestionInBrowser(at: path, timeout: .seconds(30))
            guard isWebAddress(url) else {
                logger.log("\(method) on \(path) gave no http(s) URL")
                return
            }
            guard let opener else {
                logger.log("no browser opener to open \(url)")
                return
            }
            try await opener.open(url)
        } catch {
            logger.log("open \(path) in the browser failed: \(error)")
        }
    }
}
