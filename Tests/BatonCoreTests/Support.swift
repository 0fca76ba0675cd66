// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Glibc

/// Deterministic randomness for tests (SplitMix64). A fake: never use outside tests.
final class SeededRandomFake: RandomSource, @unchecked Sendable {
    // Tests use one instance per task; the lock-free state is not shared across threads.
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: next()) }
    }

    func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
}

func secret(_ byte: UInt8, generation: UInt32 = 1) -> AdvertisingSecret {
    try! AdvertisingSecret(bytes: [UInt8](repeating: byte, count: 32), generation: generation)
}

func deviceID(_ byte: UInt8) -> DeviceID {
    DeviceID(identityKey: [UInt8](repeating: byte, count: 32))
}

let epochStart: Int64 = 1_800_000_000 / 900 * 900

func seconds(epoch: UInt64) -> Int64 { Int64(epoch) * Protocol.epochSeconds }

/// The UTC day of `epochStart` (epoch 2,000,000): keys issued in tests belong to it (§3.1).
let testDay: UInt64 = AdvertisingSecret.day(ofEpoch: Protocol.epoch(unixSeconds: epochStart))

/// A generation issued on `testDay` from a root of `byte`s: what roster entries carry (§3.1, §7.3).
func chainedSecret(_ byte: UInt8, generation: UInt32 = 1) -> AdvertisingSecret {
    try! AdvertisingSecret.issue(root: [UInt8](repeating: byte, count: 32), generation: generation, day: testDay)
}

/// Runs CPU-heavy test work (tens of seconds in a debug build) on a thread of its own. A synchronous
/// test holds one of Swift's cooperative threads (two on a two-core machine) for as long as it runs:
/// two such tests at once left every other suite of the process without a thread for a minute, and
/// their timeouts fired. What the work observed is returned and asserted on the test's own task.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setstacksize(&attributes, 16 << 20)
        let box = Unmanaged.passRetained(OffPoolWork { continuation.resume(with: Result { try work() }) })
        var thread = pthread_t()
        let started = pthread_create(&thread, &attributes, { raw in
            let work = Unmanaged<OffPoolWork>.fromOpaque(raw!).takeRetainedValue()
            work.run()
            return nil
        }, box.toOpaque())
        pthread_attr_destroy(&attributes)
        if started == 0 {
            pthread_detach(thread)
        } else {
            box.takeRetainedValue().run()
        }
    }
}

private final class OffPoolWork: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
