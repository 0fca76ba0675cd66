// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonSystem

/// Descriptor numbers that travel with messages (received with SCM_RIGHTS, duplicated for an `h`
/// value, queued to be sent) are plain `Int32`s in arrays and in `DBusValue.unixFD`, which a
/// `~Copyable` `FileDescriptor` cannot be an element of. Whoever owns such a number at the end
/// gives it back here: each is closed through `FileDescriptor`, once.
enum DescriptorNumbers {
    /// Closes every descriptor in `numbers` (negative ones are no descriptor: skipped).
    static func close(_ numbers: some Sequence<Int32>) {
        for number in numbers where number >= 0 { FileDescriptor(taking: number).close() }
    }

    /// Closes `number` (a negative one is no descriptor: skipped).
    static func close(_ number: Int32) {
        guard number >= 0 else { return }
        FileDescriptor(taking: number).close()
    }
}
