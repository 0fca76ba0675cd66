// SPDX-License-Identifier: LGPL-2.1-or-later
/// How much of a message the unmarshaller reads before it refuses the message, and which errors
/// answer a refused method call. The counts are kept while the reader walks the message,
/// so an oversized message costs at most the budget in Swift values, never its whole size.
public struct DBusArgumentBudget: Sendable, Hashable {
    /// Values of any type, containers included; each element of an `ay` counts as one value.
    public var maxValues: Int
    /// UTF-8 bytes of all strings, object paths and signatures together.
    public var maxStringBytes: Int
    /// Containers (arrays, dictionaries, structs, variants) nested inside one another.
    public var maxDepth: Int
    /// The error that answers a call over budget.
    public var tooLargeErrorName: String
    /// The error that answers a call the unmarshaller refuses for its content (a dictionary with
    /// two keys that compare equal, an empty struct, ...).
    public var invalidErrorName: String

    public init(maxValues: Int, maxStringBytes: Int, maxDepth: Int = 64,
                tooLargeErrorName: String = DBusError.limitsExceededName,
                invalidErrorName: String = DBusError.invalidArgsName) {
        self.maxValues = maxValues
        self.maxStringBytes = maxStringBytes
        self.maxDepth = maxDepth
        self.tooLargeErrorName = tooLargeErrorName
        self.invalidErrorName = invalidErrorName
    }

    /// For every method without its own budget, and for replies and signals: generous (a large
    /// BlueZ `GetManagedObjects` fits many times over) yet bounded, about 20 MB of Swift values
    /// plus 16 MiB of strings at worst.
    public static let standard = DBusArgumentBudget(maxValues: 262_144, maxStringBytes: 16 << 20, maxDepth: 64)

    func tooLarge(_ message: String) -> DBusError { DBusError(name: tooLargeErrorName, message: message) }
    func invalid(_ message: String) -> DBusError { DBusError(name: invalidErrorName, message: message) }
}
