// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonCore
import BatonDBus

extension BatonConnection {
    /// Registers a handler, like `registerHandler`, and registers it again each time batond's bus
    /// name gets a new owner: a restarted batond (an upgrade, `Restart=on-failure`, `systemctl
    /// restart`) knows no handlers, and without this the app would no longer be asked to continue
    /// anything until it restarts itself. Also registers it when batond is not running yet and
    /// starts later. The watch ends when the connection closes.
    ///
    /// Throws only when the handler object cannot be exported or the bus not watched; a failed
    /// registration (now or after a restart) is passed to `registrationFailed` and retried at the
    /// next change of owner.
    public func registerHandlerAcrossRestarts(
        _ handler: some ActivityHandler, for types: [String], versions: ActivityVersions? = nil,
        registered: @escaping @Sendable () -> Void = {},
        registrationFailed: @escaping @Sendable (BatonClientError) -> Void
    ) async throws(BatonClientError) -> HandlerRegistration {
        let path = makeObjectPath("handler")
        let interface = ActivityHandlerObject(handler: handler, connection: self).interface
        try await translatingErrors { try await dbus.export([interface], at: path) }
        // The watch first: an owner that arrives between the first attempt and the watch is not missed.
        let owners: AsyncStream<DBusNameOwnerChange>
        do throws(BatonClientError) {
            owners = try await translatingErrors { try await dbus.nameOwnerChanges(for: busName) }
        } catch {
            try? dbus.unexport(path: path)
            throw error
        }
        let registration = HandlerRegistration(path: path, types: types, versions: versions)
        let register: @Sendable () async -> Void = { [weak self] in
            guard let self else { return }
            do throws(BatonClientError) {
                try await self.announceHandler(at: path, for: types, versions: versions)
                registered()
            } catch {
                registrationFailed(error)
            }
        }
        await register()
        Task {
            for await change in owners where change.name == busName && change.newOwner != nil {
                await register()
            }
        }
        return registration
    }

    /// Registers the handler already exported at `path` for `types`, as batond's Manager1 expects it.
    func announceHandler(at path: String, for types: [String], versions: ActivityVersions?) async throws(BatonClientError) {
        if let versions {
            let ranges = versions.ranges.map { DBusValue.structure([.int64($0.lowerBound), .int64($0.upperBound)]) }
            try await call(OrgBaton.Manager1.registerHandlerWithOptions, at: Self.managerPath,
                           (path, types, ["Versions": .array(elementSignature: "(xx)", ranges)]))
        } else {
            try await call(OrgBaton.Manager1.registerHandler, at: Self.managerPath, (path, types))
        }
    }
}
