// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

extension DBusError {
    static func baton(_ name: BatonErrorName, _ message: String) -> DBusError { DBusError(name: name, message: message) }
    static func invalidArguments(_ message: String) -> DBusError { .baton(BatonErrorName.invalidArguments, message) }
    static func payloadTooLarge(_ message: String) -> DBusError { .baton(BatonErrorName.payloadTooLarge, message) }
    static func notPermitted(_ message: String) -> DBusError { .baton(BatonErrorName.notPermitted, message) }
}

extension PropertyValueCoding {
    /// A userInfo argument as the registry takes it: a refusal is an InvalidArguments registry error.
    static func registryUserInfo(_ value: DBusValue) throws(RegistryError) -> [String: PropertyValue] {
        do {
            return try decodeUserInfo(value)
        } catch {
            throw .invalidArguments(error.message)
        }
    }
}
