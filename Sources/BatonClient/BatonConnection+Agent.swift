// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonDBus

// What baton-agent needs of batond beyond an app's calls: its own Agent1 object on this
// connection, the daemon's comings and goings, and documents for the activities it offers.

extension BatonConnection {
    /// Exports `agent` (an org.baton.Agent1 interface) at /org/baton/Agent on this connection,
    /// replacing an earlier export, and registers it (Manager1.RegisterAgent). Call again after
    /// batond restarts: a restarted batond is a new caller to admit, and knows no agent.
    public func serveAgent(_ agent: DBusInterface) async throws(BatonClientError) {
        let path = BatonObjectPath.agent
        try? dbus.unexport(path: path)
        try await translatingErrors { try await dbus.export([agent], at: path) }
        try await registerAgent(at: path)
    }

    /// Changes of the owner of batond's bus name: nil `newOwner` when batond went away, a new one
    /// when it (re)started.
    public func daemonOwnerChanges() async throws(BatonClientError) -> AsyncStream<DBusNameOwnerChange> {
        try await translatingErrors { try await dbus.nameOwnerChanges(for: busName) }
    }
}

extension UserActivity {
    /// Activity1.AttachDocument: publishes the activity if needed, then gives the daemon a snapshot
    /// of a document (read from `descriptor`, which stays the caller's to close) of `mediaType`,
    /// identified by `documentID` across versions.
    public func attachDocument(descriptor: Int32, mediaType: String, documentID: String) async throws(BatonClientError) {
        let path = try await publish()
        try await connection.call(OrgBaton.Activity1.attachDocument, at: path, (descriptor, mediaType, documentID))
    }
}
