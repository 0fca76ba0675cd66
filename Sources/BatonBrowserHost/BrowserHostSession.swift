// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Keeps one activity in step with what the extension reports; the host's only state.
public actor BrowserHostSession {
    public typealias Log = @Sendable (String) -> Void
    private let connection: BatonConnection
    private let log: Log
    /// Asked before every page: the user may turn the publisher off while the browser runs.
    private let isEnabled: @Sendable () -> Bool
    private var activity: UserActivity?
    /// Held here: an activity keeps its delegate weakly.
    private let continuations: ContinuationLog

    public init(connection: BatonConnection, isEnabled: @escaping @Sendable () -> Bool, log: @escaping Log) {
        self.connection = connection
        self.isEnabled = isEnabled
        self.log = log
        continuations = ContinuationLog(log: log)
    }

    public func handle(_ bytes: [UInt8]) async {
        let message: BrowserMessage
        do { message = try BrowserMessage.decode(bytes) } catch {
            log("ignored a message from the extension: \(error)")
            return
        }
        await handle(message)
    }

    public func handle(_ message: BrowserMessage) async {
        do {
            switch message {
            case .current(let page):
                guard isEnabled() else {
                    // Turned off: whatever was published goes, and nothing new is.
                    await activity?.invalidate()
                    activity = nil
                    return
                }
                let activity = self.activity ?? connection.makeActivity(type: webBrowsingActivityType)
                activity.delegate = continuations
                self.activity = activity
                activity.title = page.title
                activity.webpageURL = page.url
                var userInfo: [String: PropertyValue] = [:]
                if let x = page.scrollX { userInfo["scrollX"] = .double(x) }
                if let y = page.scrollY { userInfo["scrollY"] = .double(y) }
                activity.userInfo = userInfo
                try await activity.becomeCurrent()
            case .resign:
                try await activity?.resignCurrent()
            }
        } catch {
            log("daemon refused the page: \(error)")
        }
    }

    /// The browser closed (stdin EOF): the activity ends with it.
    public func browserClosed() async {
        await activity?.invalidate()
        activity = nil
    }

    /// What to ask the extension to open for an activity continued from another device.
    public static func openRequest(for continued: ContinuedActivity) -> BrowserOpenRequest? {
        guard let url = continued.webpageURL?.absoluteString, isWebAddress(url) else { return nil }
        func scroll(_ key: String) -> Double? {
            switch continued.userInfo[key] {
            case .double(let value)?: return BrowserMessage.validScroll(value)
            case .integer(let value)?: return BrowserMessage.validScroll(Double(value))
            default: return nil
            }
        }
        return BrowserOpenRequest(url: url, scrollX: scroll("scrollX"), scrollY: scroll("scrollY"))
    }
}

/// Says in the browser's log when the page was continued on another device (the daemon's
/// WasContinued): the page stays open here, as on Apple's devices.
final class ContinuationLog: UserActivityDelegate {
    private let log: BrowserHostSession.Log

    init(log: @escaping BrowserHostSession.Log) { self.log = log }

    func userActivityWasContinued(_ activity: UserActivity, on device: String) async {
        log("the page was continued on \(device)")
    }
}
