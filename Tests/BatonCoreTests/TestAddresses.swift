// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

extension BluetoothAddress {
    /// A distinct, well-formed static random address per index ("C0:00:…"), for test data.
    init(testIndex index: Int) {
        let value = UInt32(truncatingIfNeeded: index)
        try! self.init(bytes: [0xC0, 0, UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                               UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)])
    }

    /// Test data written out ("AA:00:00:00:00:01"); a typo stops the test run.
    init(testing text: String) { try! self.init(text) }
}
