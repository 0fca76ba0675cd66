// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient

/// Whether a current activity reached the air and, if not, why: the activity's own Status and
/// LastError and the daemon's radio, so `baton publish` never says "published" for an activity
/// that nobody nearby can see.
struct OnAirReport {
    var status: String
    var lastError: String?
    var radio: String
    var radioDetail: String?

    /// The activity is published and the radio is sending adverts.
    var isOnAir: Bool { status == "published" && (radio == "advertising" || radio == "both") }

    /// Why the activity is not on the air, in words; nil when it is.
    var reason: String? {
        if isOnAir { return nil }
        let cause: String = switch radio {
        case "off": "batond runs without a radio (--no-radio)"
        case "unavailable": "the radio is unavailable" + (radioDetail.map { " (\($0))" } ?? "")
        default:
            switch lastError {
            case "advert-rejected": "the Bluetooth stack refused the advert"
            case .some(let category): "publishing failed (\(category))"
            case nil: status == "preparing" ? "it is still being prepared" : "its status is \(status)"
            }
        }
        return cause + "; Status: \(status)" + (lastError.map { ", LastError: \($0)" } ?? "")
    }

    /// Waits (up to `timeout`) for the daemon to finish publishing, then reads both statuses.
    static func read(_ connection: BatonConnection, path: String, timeout: Duration = .seconds(5)) async throws(BatonClientError) -> OnAirReport {
        let deadline = ContinuousClock.now + timeout
        var activity = try await connection.activity(at: path)
        while activity.status == "preparing" || activity.status == "idle", ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
            activity = try await connection.activity(at: path)
        }
        let daemon = try await connection.status()
        return OnAirReport(status: activity.status, lastError: activity.lastError.flatMap { $0.isEmpty ? nil : $0 },
                           radio: daemon.radio, radioDetail: daemon.radioDetail)
    }
}
