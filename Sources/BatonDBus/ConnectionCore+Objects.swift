// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch

// Exporting objects: `ObjectRegistry` holds them; the connection announces them to object managers.

extension ConnectionCore {
    func unexport(path: String) throws {
        try onQueue { () throws(DBusError) in
            guard !isClosed else { throw .disconnected() }
            let (removed, roots) = try registry.unexport(path)
            guard !removed.interfaces.isEmpty else { return }
            for root in roots {
                try emitSignalOnQueue(path: root, interface: objectManagerInterface, name: "InterfacesRemoved",
                                      arguments: [.objectPath(path), .stringArray(removed.interfaces.map(\.name))],
                                      destination: nil)
            }
        }
    }

    func addObjectManager(at root: String) throws {
        try DBusValidate.path(root)
        try onQueue { () throws(DBusError) in
            guard !isClosed else { throw .disconnected() }
            registry.addManager(at: root)
        }
    }

    /// Must run on the queue.
    func emitPropertiesChangedOnQueue(path: String, interface: String, changed: [String: DBusValue], invalidated: [String],
                                      destination: String? = nil) throws(DBusError) {
        try DBusValidate.interface(interface)
        try emitSignalOnQueue(path: path, interface: propertiesInterface, name: "PropertiesChanged",
                              arguments: [.string(interface), .propertyDictionary(changed), .stringArray(invalidated)],
                              destination: destination)
    }
}
