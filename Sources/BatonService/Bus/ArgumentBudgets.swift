// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

extension DBusArgumentBudget {
    /// CreateActivity and Activity1.Update: room for any userInfo of at most 65,536 bytes encoded
    /// (each encoded byte yields at most two D-Bus values, e.g. a boolean inside `av`, and at most
    /// one byte of string) plus type, title, URL and options. Anything larger is refused with
    /// PayloadTooLarge while it is being unmarshalled, before the handler runs.
    static let userInfoCall = DBusArgumentBudget(
        maxValues: 2 * PropertyValue.maxUserInfoBytes + 1_024,
        maxStringBytes: PropertyValue.maxUserInfoBytes + 16_384,
        maxDepth: 64,
        tooLargeErrorName: BatonErrorName.payloadTooLarge.rawValue,
        invalidErrorName: BatonErrorName.invalidArguments.rawValue)
}
