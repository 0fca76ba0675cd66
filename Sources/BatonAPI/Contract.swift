// SPDX-License-Identifier: LGPL-2.1-or-later
// The typed contract of the org.baton interfaces: each method, signal and property is declared
// once (in Interfaces.swift), with its name, signature and value coding. The daemon, the client
// library and baton-agent take names and signatures from here; BatonAPITests checks every
// declaration against dbus/*.xml and the reverse.
import BatonCore
import BatonDBus

/// How one D-Bus value of a single complete type is written and read back.
public struct ValueCoding<Value>: Sendable {
    /// A single complete D-Bus type signature, e.g. `s` or `a{sv}`.
    public let signature: String
    let encodeValue: @Sendable (Value) -> DBusValue
    /// Nil when the value has another type; throws for a value of the right type that is refused.
    let decodeValue: @Sendable (DBusValue) throws(BatonAPIError) -> Value?

    public init(_ signature: String, encode: @escaping @Sendable (Value) -> DBusValue,
                decode: @escaping @Sendable (DBusValue) throws(BatonAPIError) -> Value?) {
        self.signature = signature
        encodeValue = encode
        decodeValue = decode
    }

    public func encode(_ value: Value) -> DBusValue { encodeValue(value) }
    public func decode(_ value: DBusValue) throws(BatonAPIError) -> Value? { try decodeValue(value) }
}

/// The value codings the org.baton interfaces use.
public enum Wire {
    public static let string = ValueCoding<String>("s", encode: { .string($0) }, decode: { $0.stringValue })
    public static let objectPath = ValueCoding<String>("o", encode: { .objectPath($0) }, decode: { $0.objectPathValue })
    public static let boolean = ValueCoding<Bool>("b", encode: { .boolean($0) }, decode: { $0.boolValue })
    public static let uint16 = ValueCoding<UInt16>("q", encode: { .uint16($0) }, decode: { $0.uint16Value })
    public static let uint32 = ValueCoding<UInt32>("u", encode: { .uint32($0) }, decode: { $0.uint32Value })
    public static let int64 = ValueCoding<Int64>("x", encode: { .int64($0) }, decode: { $0.int64Value })
    public static let uint64 = ValueCoding<UInt64>("t", encode: { .uint64($0) }, decode: { $0.uint64Value })
    /// A file descriptor; the caller keeps ownership of what it sends and owns what it receives.
    public static let unixFD = ValueCoding<Int32>("h", encode: { .unixFD($0) }, decode: { $0.unixFDValue })
    public static let stringArray = ValueCoding<[String]>("as", encode: { .stringArray($0) }, decode: { $0.stringArrayValue })
    /// An `a{sv}` dictionary of named values (options, changes, payloads), values unwrapped by the reader.
    public static let dictionary = ValueCoding<[String: DBusValue]>("a{sv}", encode: { .propertyDictionary($0) }, decode: { $0.asDictionary })
    /// A userInfo dictionary (docs/dbus-api.md, "userInfo"); a refused entry throws InvalidArguments.
    public static let userInfo = ValueCoding<[String: PropertyValue]>("a{sv}", encode: { PropertyValueCoding.encodeUserInfo($0) }) {
        value throws(BatonAPIError) in
        guard value.asDictionary != nil else { return nil }
        return try PropertyValueCoding.decodeUserInfo(value)
    }
    /// A list of `a{sv}` entries, raw.
    public static let dictionaryList = ValueCoding<[DBusValue]>("aa{sv}", encode: { .array(elementSignature: "a{sv}", $0) }) { value in
        guard let items = value.arrayValue, value.signature == "aa{sv}" else { return nil }
        return items
    }
    public static let managerStatus = ValueCoding<ManagerStatus>("a{sv}", encode: { $0.dbusValue }) { value throws(BatonAPIError) in
        guard value.asDictionary != nil else { return nil }
        return try ManagerStatus(value)
    }
    public static let ringMembers = ValueCoding<[RingMember]>("aa{sv}", encode: { .array(elementSignature: "a{sv}", $0.map(\.dbusValue)) }) {
        value throws(BatonAPIError) in try RingMember.list([value])
    }
    /// Malformed entries are skipped (as PairingEndpoint.list does).
    public static let pairingEndpoints = ValueCoding<[PairingEndpoint]>("aa{sv}", encode: { .array(elementSignature: "a{sv}", $0.map(\.dbusValue)) }) {
        value throws(BatonAPIError) in try PairingEndpoint.list([value])
    }

    public static let acceptOptions = ValueCoding<AcceptOptions>("a{sv}", encode: { $0.dbusValue }) { value throws(BatonAPIError) in
        try AcceptOptions(value)
    }
    public static let pairOptions = ValueCoding<PairOptions>("a{sv}", encode: { $0.dbusValue }) { value throws(BatonAPIError) in
        try PairOptions(value)
    }

    /// Any value whose signature is `signature`, unchanged (structures without a Swift type here).
    public static func raw(_ signature: String) -> ValueCoding<DBusValue> {
        ValueCoding<DBusValue>(signature, encode: { $0 }, decode: { $0.signature == signature ? $0 : nil })
    }

    // MARK: Argument lists

    public static var none: ArgumentsCoding<Void> {
        ArgumentsCoding([], encode: { _ in [] }, decode: { _ in () })
    }

    public static func one<A>(_ name: String, _ a: ValueCoding<A>) -> ArgumentsCoding<A> {
        ArgumentsCoding([DBusArgument(name, a.signature)], encode: { [a.encode($0)] }) { values throws(BatonAPIError) in
            try a.decode(values[0])
        }
    }

    public static func two<A, B>(_ nameA: String, _ a: ValueCoding<A>, _ nameB: String, _ b: ValueCoding<B>) -> ArgumentsCoding<(A, B)> {
        ArgumentsCoding([DBusArgument(nameA, a.signature), DBusArgument(nameB, b.signature)],
                     encode: { [a.encode($0.0), b.encode($0.1)] }) { values throws(BatonAPIError) in
            guard let first = try a.decode(values[0]), let second = try b.decode(values[1]) else { return nil }
            return (first, second)
        }
    }

    public static func three<A, B, C>(_ nameA: String, _ a: ValueCoding<A>, _ nameB: String, _ b: ValueCoding<B>,
                                      _ nameC: String, _ c: ValueCoding<C>) -> ArgumentsCoding<(A, B, C)> {
        ArgumentsCoding([DBusArgument(nameA, a.signature), DBusArgument(nameB, b.signature), DBusArgument(nameC, c.signature)],
                     encode: { [a.encode($0.0), b.encode($0.1), c.encode($0.2)] }) { values throws(BatonAPIError) in
            guard let first = try a.decode(values[0]), let second = try b.decode(values[1]),
                  let third = try c.decode(values[2]) else { return nil }
            return (first, second, third)
        }
    }

    public static func four<A, B, C, D>(_ nameA: String, _ a: ValueCoding<A>, _ nameB: String, _ b: ValueCoding<B>,
                                        _ nameC: String, _ c: ValueCoding<C>, _ nameD: String, _ d: ValueCoding<D>) -> ArgumentsCoding<(A, B, C, D)> {
        ArgumentsCoding([DBusArgument(nameA, a.signature), DBusArgument(nameB, b.signature), DBusArgument(nameC, c.signature),
                      DBusArgument(nameD, d.signature)],
                     encode: { [a.encode($0.0), b.encode($0.1), c.encode($0.2), d.encode($0.3)] }) { values throws(BatonAPIError) in
            guard let first = try a.decode(values[0]), let second = try b.decode(values[1]),
                  let third = try c.decode(values[2]), let fourth = try d.decode(values[3]) else { return nil }
            return (first, second, third, fourth)
        }
    }
}

/// The named arguments of a method's input or output, or of a signal, and how they map to a Swift value.
public struct ArgumentsCoding<Value>: Sendable {
    public let arguments: [DBusArgument]
    let encodeValues: @Sendable (Value) -> [DBusValue]
    /// Called with exactly `arguments.count` values; nil when one has another type.
    let decodeValues: @Sendable ([DBusValue]) throws(BatonAPIError) -> Value?

    init(_ arguments: [DBusArgument], encode: @escaping @Sendable (Value) -> [DBusValue],
         decode: @escaping @Sendable ([DBusValue]) throws(BatonAPIError) -> Value?) {
        self.arguments = arguments
        encodeValues = encode
        decodeValues = decode
    }

    /// The concatenated signature, e.g. `ssa{sv}a{sv}`.
    public var signature: String { arguments.map(\.signature).joined() }

    public func encode(_ value: Value) -> [DBusValue] { encodeValues(value) }

    /// Nil when the count or a type differs; throws when a value of the right type is refused.
    public func decode(_ values: [DBusValue]) throws(BatonAPIError) -> Value? {
        guard values.count == arguments.count else { return nil }
        return try decodeValues(values)
    }
}

/// One method of an org.baton interface: `Arguments` is what the caller sends, `Reply` what it gets back.
public struct MethodContract<Arguments, Reply>: Sendable, CustomStringConvertible {
    public let interface: String
    public let name: String
    public let input: ArgumentsCoding<Arguments>
    public let output: ArgumentsCoding<Reply>

    public init(_ interface: String, _ name: String, in input: ArgumentsCoding<Arguments>, out output: ArgumentsCoding<Reply>) {
        self.interface = interface
        self.name = name
        self.input = input
        self.output = output
    }

    public var inArguments: [DBusArgument] { input.arguments }
    public var outArguments: [DBusArgument] { output.arguments }
    public var inSignature: String { input.signature }
    public var outSignature: String { output.signature }
    public var description: String { "\(interface).\(name)(\(inSignature)) -> (\(outSignature))" }
    public var member: MemberContract { MemberContract(kind: .method, name: name, in: inArguments, out: outArguments) }

    /// The call's arguments (caller side).
    public func encodeArguments(_ arguments: Arguments) -> [DBusValue] { input.encode(arguments) }

    /// The call's arguments (callee side); a wrong shape is InvalidArguments.
    public func decodeArguments(_ values: [DBusValue]) throws(BatonAPIError) -> Arguments {
        guard let arguments = try input.decode(values) else {
            throw BatonAPIError(.invalidArguments, "\(name) expects (\(inSignature))")
        }
        return arguments
    }

    /// The reply's values (callee side).
    public func encodeReply(_ reply: Reply) -> [DBusValue] { output.encode(reply) }

    /// The reply (caller side); a wrong shape is Failed, "unexpected reply from the daemon: …".
    public func decodeReply(_ values: [DBusValue]) throws(BatonAPIError) -> Reply {
        guard let reply = try output.decode(values) else {
            throw .unexpectedReply("\(name) returned \(values.map(\.signature))")
        }
        return reply
    }
}

/// A signal of an org.baton interface.
public struct SignalContract<Arguments>: Sendable {
    public let interface: String
    public let name: String
    public let input: ArgumentsCoding<Arguments>

    public init(_ interface: String, _ name: String, _ input: ArgumentsCoding<Arguments>) {
        self.interface = interface
        self.name = name
        self.input = input
    }

    public var arguments: [DBusArgument] { input.arguments }
    public var description: DBusSignalDescription { DBusSignalDescription(name, arguments: arguments) }
    public var member: MemberContract { MemberContract(kind: .signal, name: name, in: arguments) }
    public func encode(_ arguments: Arguments) -> [DBusValue] { input.encode(arguments) }
    /// Nil for a signal of another shape.
    public func decode(_ signal: DBusSignal) -> Arguments? {
        guard signal.interface == interface, signal.member == name else { return nil }
        return try? input.decode(signal.arguments)
    }
}

/// A property of an org.baton interface (all are read-only).
public struct PropertyContract<Value>: Sendable {
    public let interface: String
    public let name: String
    public let coding: ValueCoding<Value>
    public let access: DBusPropertyAccess

    public init(_ interface: String, _ name: String, _ coding: ValueCoding<Value>, access: DBusPropertyAccess = .read) {
        self.interface = interface
        self.name = name
        self.coding = coding
        self.access = access
    }

    public var signature: String { coding.signature }
    public var member: MemberContract { MemberContract(kind: .property, name: name, in: [DBusArgument(name, signature)], access: access.rawValue) }
    /// The property's value in a `GetAll` or `PropertiesChanged` dictionary; nil when absent or of another type.
    public func value(in properties: [String: DBusValue]) -> Value? {
        guard let value = properties[name] else { return nil }
        return try? coding.decode(value.unwrapped)
    }
}

/// One member as the XML describes it: what the contract test compares.
public struct MemberContract: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable { case method, signal, property }
    public var kind: Kind
    public var name: String
    /// Methods: the in arguments; signals: the arguments; properties: one, named like the property, of its type.
    public var inArguments: [DBusArgument]
    /// Methods: the out arguments; otherwise empty.
    public var outArguments: [DBusArgument]
    /// Properties: "read" or "readwrite"; otherwise nil.
    public var access: String?

    public init(kind: Kind, name: String, in inArguments: [DBusArgument], out outArguments: [DBusArgument] = [], access: String? = nil) {
        self.kind = kind
        self.name = name
        self.inArguments = inArguments
        self.outArguments = outArguments
        self.access = access
    }

    public var inSignature: String { inArguments.map(\.signature).joined() }
    public var outSignature: String { outArguments.map(\.signature).joined() }

    public var description: String {
        func list(_ arguments: [DBusArgument]) -> String { arguments.map { "\($0.signature) \($0.name)" }.joined(separator: ", ") }
        return switch kind {
        case .method: "method \(name)(\(list(inArguments))) -> (\(list(outArguments)))"
        case .signal: "signal \(name)(\(list(inArguments)))"
        case .property: "property \(name) \(inSignature) \(access ?? "")"
        }
    }
}

/// An org.baton interface: its name and every member, for the contract test and introspection.
public protocol InterfaceContract {
    static var name: String { get }
    static var members: [MemberContract] { get }
}
