// SPDX-License-Identifier: LGPL-2.1-or-later
let introspectableInterface = "org.freedesktop.DBus.Introspectable"
let propertiesInterface = "org.freedesktop.DBus.Properties"
let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
let peerInterface = "org.freedesktop.DBus.Peer"
let standardInterfaces: Set<String> = [introspectableInterface, propertiesInterface, objectManagerInterface, peerInterface]

/// The objects this connection exports and the roots of its object managers (pure: the connection
/// emits the InterfacesAdded and InterfacesRemoved signals it is told to, and routes calls here).
struct ObjectRegistry {
    private(set) var objects: [String: ExportedObject] = [:]
    private(set) var managerRoots: Set<String> = []

    static func isDescendant(_ path: String, of root: String) -> Bool {
        guard path != root else { return false }
        return root == "/" ? path.hasPrefix("/") : path.hasPrefix(root + "/")
    }

    /// Checks what may be exported at all (before the connection's queue is involved).
    static func validate(_ interfaces: [DBusInterface], at path: String) throws(DBusError) {
        try DBusValidate.path(path)
        var names: Set<String> = []
        for interface in interfaces {
            try interface.validate()
            guard !standardInterfaces.contains(interface.name) else {
                throw .invalidArgs("\(interface.name) is provided automatically")
            }
            guard names.insert(interface.name).inserted else { throw .invalidArgs("duplicate interface \(interface.name)") }
        }
    }

    /// Exports an object at `path`; returns the object managers above it (to announce it, sorted).
    mutating func export(_ interfaces: [DBusInterface], at path: String) throws(DBusError) -> [String] {
        guard objects[path] == nil else { throw .invalidArgs("an object is already exported at \(path)") }
        objects[path] = ExportedObject(interfaces: interfaces)
        return managerRoots.filter { ObjectRegistry.isDescendant(path, of: $0) }.sorted()
    }

    /// Removes the object at `path`; returns its interfaces and the object managers above it (sorted).
    mutating func unexport(_ path: String) throws(DBusError) -> (removed: ExportedObject, roots: [String]) {
        guard let removed = objects.removeValue(forKey: path) else { throw .unknownObject("nothing exported at \(path)") }
        return (removed, managerRoots.filter { ObjectRegistry.isDescendant(path, of: $0) }.sorted())
    }

    mutating func addManager(at root: String) { managerRoots.insert(root) }

    func isManagerRoot(_ path: String) -> Bool { managerRoots.contains(path) }

    /// The object a call to `path` reaches: the exported one, an empty one at a manager root, or
    /// nil (an intermediate node, or nothing).
    func object(at path: String) -> ExportedObject? {
        objects[path] ?? (managerRoots.contains(path) ? ExportedObject(interfaces: []) : nil)
    }

    /// The objects a manager at `root` reports.
    func managed(under root: String) -> [String: ExportedObject] {
        objects.filter { ObjectRegistry.isDescendant($0.key, of: root) }
    }

    mutating func removeAll() {
        objects.removeAll()
        managerRoots.removeAll()
    }

    /// The error a call too large to read is refused with: what its method's budget names, else
    /// LimitsExceeded.
    func tooLargeErrorName(path: String?, interface: String?, member: String?) -> String {
        guard let path, let member, let object = objects[path] else { return DBusError.limitsExceededName }
        let named = interface.flatMap { object.interface(named: $0) } ?? object.interfaces.first { $0.method(named: member) != nil }
        guard let name = named?.method(named: member)?.budget.tooLargeErrorName, DBusValidate.isValidErrorName(name) else {
            return DBusError.limitsExceededName
        }
        return name
    }

    /// Names of the direct children of `path` that lead to exported objects.
    func childNodes(of path: String) -> [String] {
        var children: Set<String> = []
        let prefix = path == "/" ? "/" : path + "/"
        for candidate in Set(objects.keys).union(managerRoots) where candidate != path && candidate.hasPrefix(prefix) {
            if let segment = candidate.dropFirst(prefix.count).split(separator: "/").first { children.insert(String(segment)) }
        }
        return children.sorted()
    }

    /// The interface `interfaceName` names at `path`, or the standard or exported one whose method
    /// `member` is when a call names none.
    func interfaceName(for member: String, named interfaceName: String?, object: ExportedObject, at path: String) -> String? {
        if let interfaceName { return interfaceName }
        switch member {
        case "Introspect": return introspectableInterface
        case "Get", "GetAll", "Set": return propertiesInterface
        case "GetManagedObjects" where managerRoots.contains(path): return objectManagerInterface
        default: return object.interfaces.first { $0.method(named: member) != nil }?.name
        }
    }
}

struct ExportedObject {
    var interfaces: [DBusInterface]
    func interface(named name: String) -> DBusInterface? { interfaces.first { $0.name == name } }
}

/// Reading exported properties (their getters are the application's, so this is async).
enum PropertyReader {
    /// `a{sa{sv}}` for the given interfaces; properties whose getter fails are left out.
    static func interfacesAndProperties(_ interfaces: [DBusInterface]) async -> DBusValue {
        var entries: [DBusValue: DBusValue] = [:]
        for interface in interfaces {
            let properties = (try? await properties(of: interface, skippingFailures: true)) ?? [:]
            entries[.string(interface.name)] = .propertyDictionary(properties)
        }
        return .dictionary(keySignature: "s", valueSignature: "a{sv}", entries)
    }

    static func properties(of interface: DBusInterface, skippingFailures: Bool) async throws -> [String: DBusValue] {
        var values: [String: DBusValue] = [:]
        for property in interface.properties {
            do {
                values[property.name] = try await read(property)
            } catch {
                if !skippingFailures { throw error }
            }
        }
        return values
    }

    static func read(_ property: DBusProperty) async throws -> DBusValue {
        let value = try await property.get()
        guard value.signature == property.signature else {
            throw DBusError.failed("property \(property.name) getter returned '\(value.signature)', declared '\(property.signature)'")
        }
        return value
    }
}
