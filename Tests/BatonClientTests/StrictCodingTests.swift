// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import Testing
@testable import BatonClient

/// The client decodes userInfo with the daemon's strict rules: what the daemon refuses, the client
/// refuses too, instead of dropping it (it used to keep only the bytes of a mixed `ay`).
@Suite("BatonClient: userInfo decoding is as strict as the daemon's")
struct StrictCodingTests {
    /// A hand-built `ay` holding a string besides a byte (only in-process values can be this shape).
    static let mixedByteArray = DBusValue.array(elementSignature: "y", [.byte(1), .string("x")])

    @Test func continuedActivityRefusesANonByteInsideAnArrayOfBytes() {
        let arguments: [DBusValue] = [.string("org.example.doc"), .string("t"), .propertyDictionary(["b": Self.mixedByteArray]),
                                      .propertyDictionary(["Version": .int64(1), "Device": .string("d")])]
        #expect {
            _ = try ActivityHandlerObject.continuedActivity(from: arguments)
        } throws: { error in
            guard let error = error as? DBusError else { return false }
            return error.name == BatonErrorName.invalidArguments.rawValue && error.message.contains("userInfo.b[1]")
        }
    }

    @Test func payloadRefusesANonByteInsideAnArrayOfBytes() {
        let reply: [String: DBusValue] = ["Type": .string("org.example.doc"), "Title": .string("t"), "Version": .int64(1),
                                          "UserInfo": .propertyDictionary(["b": Self.mixedByteArray])]
        #expect {
            _ = try ActivityPayload(reply)
        } throws: { error in
            (error as? BatonClientError)?.code == .invalidArguments
        }
    }

    @Test func allBytesStillDecode() throws {
        let reply: [String: DBusValue] = ["Type": .string("org.example.doc"), "Title": .string("t"), "Version": .int64(1),
                                          "UserInfo": .propertyDictionary(["b": .bytes([1, 2])])]
        #expect(try ActivityPayload(reply).userInfo == ["b": .bytes([1, 2])])
    }
}
