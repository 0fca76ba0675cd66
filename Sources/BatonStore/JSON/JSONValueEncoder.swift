// SPDX-License-Identifier: GPL-2.0-or-later
/// The standard library's `Encoder` over a tree of `JSONEncodingNode`s, written out by `JSONText`.
/// Replaces Foundation's `JSONEncoder` (whose module cost batond over 1 MiB of resident memory)
/// for the state files, with its default strategies: numbers as Swift prints them (a Double's
/// trailing ".0" dropped, non-finite values refused), a key's `stringValue`, a repeated key
/// replacing the earlier value.
struct JSONValueEncoder {
    var pretty = false

    func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let root = JSONEncodingNode()
        try value.encode(to: NodeEncoder(node: root, codingPath: []))
        do {
            return try JSONText.write(root, pretty: pretty)
        } catch {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "nested deeper than \(JSONText.depthLimit) levels"))
        }
    }
}

/// One value being encoded. A class: containers hand out references into the tree while the
/// value's `encode(to:)` is still filling it.
final class JSONEncodingNode {
    struct TooDeep: Error {}

    enum Content {
        /// Nothing encoded (yet); written as an empty object, as Foundation did.
        case empty
        /// Number, `true`, `false` or `null`: written as is.
        case literal(String)
        case string(String)
        case array
        case object
    }

    var content: Content = .empty
    var elements: [JSONEncodingNode] = []
    var members: [String: JSONEncodingNode] = [:]

    init() {}
    init(_ content: Content) { self.content = content }

    /// A value that asks for another kind of container than it used before starts over: a
    /// programming error Foundation trapped on; here the last request wins.
    func become(_ kind: Content) {
        switch (content, kind) {
        case (.array, .array), (.object, .object): return
        default:
            content = kind
            elements = []
            members = [:]
        }
    }

    static func number<Number: BinaryFloatingPoint & LosslessStringConvertible>(_ value: Number, codingPath: [any CodingKey]) throws -> JSONEncodingNode {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "Unable to encode \(Number.self).\(value) directly in JSON."))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return JSONEncodingNode(.literal(text))
    }

    static func integer(_ value: some FixedWidthInteger) -> JSONEncodingNode { JSONEncodingNode(.literal(String(value))) }
    static func bool(_ value: Bool) -> JSONEncodingNode { JSONEncodingNode(.literal(value ? "true" : "false")) }
    static let nullText = "null"
}

struct NodeEncoder: Encoder {
    let node: JSONEncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.become(.object)
        return KeyedEncodingContainer(KeyedNodeEncodingContainer<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.become(.array)
        return UnkeyedNodeEncodingContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleValueNodeEncodingContainer(node: node, codingPath: codingPath) }
}

/// A key for array positions and `super` in coding paths.
struct JSONCodingKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) { self.stringValue = stringValue; intValue = nil }
    init(intValue: Int) { stringValue = "Index \(intValue)"; self.intValue = intValue }
    static let superKey = JSONCodingKey(stringValue: "super")
}

struct KeyedNodeEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: JSONEncodingNode
    let codingPath: [any CodingKey]

    private func put(_ child: JSONEncodingNode, _ key: Key) { node.members[key.stringValue] = child }

    mutating func encodeNil(forKey key: Key) throws { put(JSONEncodingNode(.literal(JSONEncodingNode.nullText)), key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(JSONEncodingNode(.string(value)), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(try .number(value, codingPath: codingPath + [key]), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(try .number(value, codingPath: codingPath + [key]), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(.integer(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(.integer(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        let child = JSONEncodingNode()
        try value.encode(to: NodeEncoder(node: child, codingPath: codingPath + [key]))
        put(child, key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = JSONEncodingNode(.object)
        put(child, key)
        return KeyedEncodingContainer(KeyedNodeEncodingContainer<NestedKey>(node: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = JSONEncodingNode(.array)
        put(child, key)
        return UnkeyedNodeEncodingContainer(node: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: JSONCodingKey.superKey) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

    private func superEncoder(named key: any CodingKey) -> any Encoder {
        let child = JSONEncodingNode()
        node.members[key.stringValue] = child
        return NodeEncoder(node: child, codingPath: codingPath + [key])
    }
}

struct UnkeyedNodeEncodingContainer: UnkeyedEncodingContainer {
    let node: JSONEncodingNode
    let codingPath: [any CodingKey]
    var count: Int { node.elements.count }

    private var nextPath: [any CodingKey] { codingPath + [JSONCodingKey(intValue: count)] }

    mutating func encodeNil() throws { node.elements.append(JSONEncodingNode(.literal(JSONEncodingNode.nullText))) }
    mutating func encode(_ value: Bool) throws { node.elements.append(.bool(value)) }
    mutating func encode(_ value: String) throws { node.elements.append(JSONEncodingNode(.string(value))) }
    mutating func encode(_ value: Double) throws { node.elements.append(try .number(value, codingPath: nextPath)) }
    mutating func encode(_ value: Float) throws { node.elements.append(try .number(value, codingPath: nextPath)) }
    mutating func encode(_ value: Int) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: Int8) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: Int16) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: Int32) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: Int64) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: UInt) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: UInt8) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: UInt16) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: UInt32) throws { node.elements.append(.integer(value)) }
    mutating func encode(_ value: UInt64) throws { node.elements.append(.integer(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let child = JSONEncodingNode()
        try value.encode(to: NodeEncoder(node: child, codingPath: nextPath))
        node.elements.append(child)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let child = JSONEncodingNode(.object)
        node.elements.append(child)
        return KeyedEncodingContainer(KeyedNodeEncodingContainer<NestedKey>(node: child, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let child = JSONEncodingNode(.array)
        node.elements.append(child)
        return UnkeyedNodeEncodingContainer(node: child, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath
        let child = JSONEncodingNode()
        node.elements.append(child)
        return NodeEncoder(node: child, codingPath: path)
    }
}

struct SingleValueNodeEncodingContainer: SingleValueEncodingContainer {
    let node: JSONEncodingNode
    let codingPath: [any CodingKey]

    private func set(_ value: JSONEncodingNode) { node.become(value.content) }

    mutating func encodeNil() throws { set(JSONEncodingNode(.literal(JSONEncodingNode.nullText))) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(JSONEncodingNode(.string(value))) }
    mutating func encode(_ value: Double) throws { set(try .number(value, codingPath: codingPath)) }
    mutating func encode(_ value: Float) throws { set(try .number(value, codingPath: codingPath)) }
    mutating func encode(_ value: Int) throws { set(.integer(value)) }
    mutating func encode(_ value: Int8) throws { set(.integer(value)) }
    mutating func encode(_ value: Int16) throws { set(.integer(value)) }
    mutating func encode(_ value: Int32) throws { set(.integer(value)) }
    mutating func encode(_ value: Int64) throws { set(.integer(value)) }
    mutating func encode(_ value: UInt) throws { set(.integer(value)) }
    mutating func encode(_ value: UInt8) throws { set(.integer(value)) }
    mutating func encode(_ value: UInt16) throws { set(.integer(value)) }
    mutating func encode(_ value: UInt32) throws { set(.integer(value)) }
    mutating func encode(_ value: UInt64) throws { set(.integer(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try value.encode(to: NodeEncoder(node: node, codingPath: codingPath))
    }
}
