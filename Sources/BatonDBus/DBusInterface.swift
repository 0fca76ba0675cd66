// SPDX-License-Identifier: LGPL-2.1-or-later
import Synchronization
// Swift descriptions of exported D-Bus interfaces: methods, properties and signals.

/// A named, typed argument (used for method and signal introspection and signature checks).
public struct DBusArgument: Sendable, Hashable {
    public var name: String
    /// A single complete type signature.
    public var signature: String

    public init(_ name: String, _ signature: String) {
        self.name = name
        self.signature = signature
    }
}

/// An incoming method call, as seen by an exported method handler.
public struct DBusMethodCall: Sendable {
    /// Unique bus name (`:1.42`) of the caller; empty on a peer-to-peer connection.
    public var sender: String
    public var path: String
    /// The interface the caller named; nil when the caller left it out.
    public var interface: String?
    public var member: String
    public var arguments: [DBusValue]

    public init(sender: String, path: String, interface: String?, member: String, arguments: [DBusValue]) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
    }
}

/// The caller being served. Set while a method handler or a property getter/setter runs for a
/// remote call (`Get`, `GetAll`, `Set`, `GetManagedObjects`); nil when properties are read for a
/// broadcast signal such as `InterfacesAdded`, so getters can refuse to put private values there.
public enum DBusCallContext {
    @TaskLocal public static var sender: String?
    @TaskLocal static var replyResources: ReplyResources?

    /// Keeps `owner` alive until the reply to the call being handled has been written into its
    /// message, descriptors duplicated: for a handler that returns the descriptor of something it
    /// owns (a `.unixFD` value stays the caller's, and the reply is written after the handler
    /// returned). Outside a method handler it does nothing.
    public static func keepUntilReplied(_ owner: any AnyObject & Sendable) {
        replyResources?.keep(owner)
    }
}

/// What a handler asked to outlive its reply (`DBusCallContext.keepUntilReplied`), released with this box.
final class ReplyResources: Sendable {
    private let kept = Mutex<[any AnyObject & Sendable]>([])

    func keep(_ owner: any AnyObject & Sendable) {
        kept.withLock { $0.append(owner) }
    }
}

/// An exported method. The handler returns the reply values (matching `outArguments`) or throws a
/// `DBusError`, which is sent as the error reply. It may suspend; the reply is sent when it returns.
/// A call whose arguments exceed `budget` (or that the unmarshaller refuses, e.g. for a duplicate
/// dictionary key) is answered with the budget's error names and never reaches the handler.
public struct DBusMethod: Sendable {
    public typealias Handler = @Sendable (DBusMethodCall) async throws -> [DBusValue]

    public var name: String
    public var inArguments: [DBusArgument]
    public var outArguments: [DBusArgument]
    public var budget: DBusArgumentBudget
    public var handler: Handler

    public init(_ name: String, in inArguments: [DBusArgument] = [], out outArguments: [DBusArgument] = [],
                budget: DBusArgumentBudget = .standard, handler: @escaping Handler) {
        self.name = name
        self.inArguments = inArguments
        self.outArguments = outArguments
        self.budget = budget
        self.handler = handler
    }

    var inSignature: String { inArguments.map(\.signature).joined() }
    var outSignature: String { outArguments.map(\.signature).joined() }
}

public enum DBusPropertyAccess: String, Sendable, Hashable {
    case read
    case readwrite
}

/// An exported property.
public struct DBusProperty: Sendable {
    public typealias Getter = @Sendable () async throws -> DBusValue
    public typealias Setter = @Sendable (DBusValue) async throws -> Void

    public var name: String
    public var signature: String
    public var access: DBusPropertyAccess
    public var get: Getter
    /// Required for `.readwrite`; throw `DBusError` to refuse a value.
    public var set: Setter?
    /// When true, a successful remote `Set` emits `PropertiesChanged` with the new value.
    public var emitsChangedOnSet: Bool

    public init(_ name: String, signature: String, access: DBusPropertyAccess = .read, emitsChangedOnSet: Bool = true,
                get: @escaping Getter, set: Setter? = nil) {
        self.name = name
        self.signature = signature
        self.access = access
        self.emitsChangedOnSet = emitsChangedOnSet
        self.get = get
        self.set = set
    }
}

/// A signal an interface may emit (described for introspection; emit with `DBusConnection.emitSignal`).
public struct DBusSignalDescription: Sendable, Hashable {
    public var name: String
    public var arguments: [DBusArgument]

    public init(_ name: String, arguments: [DBusArgument] = []) {
        self.name = name
        self.arguments = arguments
    }
}

/// An interface implemented by an exported object.
public struct DBusInterface: Sendable {
    public var name: String
    public var methods: [DBusMethod]
    public var properties: [DBusProperty]
    public var signals: [DBusSignalDescription]

    public init(_ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [], signals: [DBusSignalDescription] = []) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }

    func method(named name: String) -> DBusMethod? { methods.first { $0.name == name } }
    func property(named name: String) -> DBusProperty? { properties.first { $0.name == name } }

    func validate() throws(DBusError) {
        try DBusValidate.interface(name)
        for method in methods {
            try DBusValidate.member(method.name)
            for argument in method.inArguments + method.outArguments { try DBusValidate.singleType(argument.signature) }
        }
        for property in properties {
            try DBusValidate.member(property.name)
            try DBusValidate.singleType(property.signature)
            if property.access == .readwrite && property.set == nil {
                throw .invalidArgs("property \(property.name) is readwrite but has no setter")
            }
        }
        for signal in signals {
            try DBusValidate.member(signal.name)
            for argument in signal.arguments { try DBusValidate.singleType(argument.signature) }
        }
    }
}

/// A received signal.
public struct DBusSignal: Sendable {
    /// Unique name of the sender (or `org.freedesktop.DBus` for the bus itself).
    public var sender: String
    public var path: String
    public var interface: String
    public var member: String
    public var destination: String?
    public var arguments: [DBusValue]

    public init(sender: String, path: String, interface: String, member: String, destination: String? = nil, arguments: [DBusValue]) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.destination = destination
        self.arguments = arguments
    }
}

/// Which signals a subscription wants. Nil fields match anything.
public struct DBusMatchRule: Sendable, Hashable {
    /// Unique or well-known name; well-known names are resolved to their current owner.
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: String?
    /// Matches `path` itself and every path below it.
    public var pathNamespace: String?
    /// Arguments N (0...63) that must be strings equal to the given value.
    public var stringArguments: [Int: String]

    public init(sender: String? = nil, interface: String? = nil, member: String? = nil, path: String? = nil,
                pathNamespace: String? = nil, stringArguments: [Int: String] = [:]) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.stringArguments = stringArguments
    }

    func validate() throws(DBusError) {
        if let sender { try DBusValidate.busName(sender) }
        if let interface { try DBusValidate.interface(interface) }
        if let member { try DBusValidate.member(member) }
        if let path { try DBusValidate.path(path) }
        if let pathNamespace { try DBusValidate.path(pathNamespace) }
        if path != nil && pathNamespace != nil { throw .invalidArgs("match rule cannot have both path and pathNamespace") }
        for (index, value) in stringArguments {
            guard (0...63).contains(index) else { throw .invalidArgs("match argument index \(index) out of range") }
            guard DBusValidate.isValidUTF8String(value) else { throw .invalidArgs("match argument contains NUL") }
        }
    }

    /// The rule text for `AddMatch` / `RemoveMatch`.
    var ruleString: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            // Inside quotes only the apostrophe is special; it is written as '\''.
            let escaped = value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''")
            parts.append("\(key)='\(escaped)'")
        }
        add("sender", sender)
        add("interface", interface)
        add("member", member)
        add("path", path)
        add("path_namespace", pathNamespace)
        for index in stringArguments.keys.sorted() { add("arg\(index)", stringArguments[index]) }
        return parts.joined(separator: ",")
    }

    /// Local check of everything except the sender (which needs name-owner knowledge); the
    /// argument conditions only when `checkingArguments` (a signal is read only if its header matches).
    func matchesIgnoringSender(_ signal: DBusSignal, checkingArguments: Bool = true) -> Bool {
        if let interface, interface != signal.interface { return false }
        if let member, member != signal.member { return false }
        if let path, path != signal.path { return false }
        if let pathNamespace {
            let isInside = pathNamespace == "/" || signal.path == pathNamespace || signal.path.hasPrefix(pathNamespace + "/")
            if !isInside { return false }
        }
        guard checkingArguments else { return true }
        for (index, expected) in stringArguments {
            guard index < signal.arguments.count, case .string(let actual) = signal.arguments[index], actual == expected else {
                return false
            }
        }
        return true
    }
}

/// A handle for `DBusConnection.unsubscribe`.
public struct DBusSubscription: Sendable, Hashable {
    let id: UInt64
}

/// A change of a bus name's owner. Nil owners mean "none".
public struct DBusNameOwnerChange: Sendable, Hashable {
    public var name: String
    public var oldOwner: String?
    public var newOwner: String?

    public init(name: String, oldOwner: String?, newOwner: String?) {
        self.name = name
        self.oldOwner = oldOwner
        self.newOwner = newOwner
    }
}

public enum DBusBusKind: Sendable, Hashable {
    case session
    case system
    /// An explicit bus address such as `unix:path=/run/user/1000/bus`.
    case address(String)
}

public struct DBusRequestNameFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let allowReplacement = DBusRequestNameFlags(rawValue: 1)
    public static let replaceExisting = DBusRequestNameFlags(rawValue: 2)
    public static let doNotQueue = DBusRequestNameFlags(rawValue: 4)
}

public enum DBusRequestNameReply: UInt32, Sendable, Hashable {
    case primaryOwner = 1
    case inQueue = 2
    case exists = 3
    case alreadyOwner = 4
}

public enum DBusReleaseNameReply: UInt32, Sendable, Hashable {
    case released = 1
    case nonExistent = 2
    case notOwner = 3
}
