// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// Red team, the source's side of media handoff (docs/media.md, "The source pauses"): the agent
/// pauses the player on WasContinued, so a WasContinued it did not earn would stop what the user
/// plays. The media publisher's activity is a BatonClient UserActivity; what it is told comes
/// through its ActivitySource1 object.
@Suite("BatonClientTests: red team, WasContinued that was not earned")
struct MediaSourceAttackTests {
    final class Told: UserActivityDelegate {
        let continued = Mutex<[String]>([])
        func userActivityWillSave(_ activity: UserActivity) async {}
        func userActivityWasContinued(_ activity: UserActivity, on device: String) async { continued.withLock { $0.append(device) } }
    }

    /// Attack: another program on the daemon's bus (an app of any account) calls WasContinued on the
    /// media activity's source object, for its own path, for another path, and with no arguments.
    /// Held: NotPermitted for every caller but batond (InvalidArgs for the call without arguments); the delegate (which would pause the player) is
    /// never told.
    @Test func onlyBatondCanSayTheMediaWasContinued() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let activity = connection.makeActivity(type: MediaActivity.activityType)
            let told = Told()
            activity.delegate = told
            activity.userInfo = ["url": .string("https://radio.example/live.ogg")]
            let path = try await activity.publish()
            let intruder = try daemon.rawConnection()
            defer { intruder.close() }
            for arguments: [DBusValue] in [[.objectPath(path), .string("evil")], [.objectPath("/org/baton/activity/u0_99"), .string("evil")], []] {
                do {
                    _ = try await intruder.call(destination: connection.dbus.uniqueName, path: "/org/baton/client/source1",
                                                interface: "org.baton.ActivitySource1", method: "WasContinued", arguments: arguments)
                    Issue.record("WasContinued answered a peer other than the daemon: \(arguments)")
                } catch let error as DBusError {
                    // Without arguments the bus library refuses the signature before the object is asked.
                    let refusal = arguments.isEmpty ? "org.freedesktop.DBus.Error.InvalidArgs" : BatonClientError.Code.notPermitted.rawValue
                    #expect(error.name == refusal)
                }
            }
            #expect(told.continued.withLock { $0 }.isEmpty)
        }
    }
}
