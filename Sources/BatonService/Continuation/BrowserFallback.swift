// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// The browser fallback (issue 13): a suggestion no local handler can take but whose activity has
/// a webpage URL. batond is a system service and opens nothing itself: ContinueInBrowser fetches
/// the suggested revision, tells the source (WasContinued, as for an app) and hands the URL to the
/// caller only (the reply), whose session agent or CLI opens it with the user's browser.
extension ContinuationService {
    public func continueInBrowser(_ path: String, uid: UInt32) async throws(ServiceFailure) -> String {
        guard let number = ShownSuggestion.number(inPath: path), let suggestion = book.suggestion(number: number) else {
            throw .unknownObject("the suggestion is gone")
        }
        guard suggestion.hasWebpageURL else { throw .invalidArguments("the activity has no webpage URL") }
        guard let member = await ring.snapshot().roster.members[suggestion.member] else {
            await carry(book.withdraw(suggestion.member))
            throw .unknownDevice("the member left the ring")
        }
        let url: String?
        do {
            let fetched = try await transfer.fetchForContinue(member: member.deviceID, typeHash: suggestion.typeHash, revision: suggestion.revision)
            defer { fetched.close() }
            // Only a web address goes to a browser: a URL from another machine must not open files or apps here.
            url = fetched.record.webpageURL.flatMap { Self.isWebAddress($0) ? $0 : nil }
            if url != nil { await fetched.reportContinued() }
        } catch .remote(let frame) where frame.code == .unknownActivity {
            await carry(book.settle(number: number))
            throw .continuation(.noLongerCurrent)
        } catch {
            throw Self.failure(error)
        }
        guard let url else { throw .failed("the activity has no http or https webpage URL") }
        await carry(book.settle(number: number))
        return url
    }

    /// http or https with a host: what xdg-open hands to the default browser.
    static func isWebAddress(_ url: String) -> Bool { BatonCore.isWebAddress(url) }
}
