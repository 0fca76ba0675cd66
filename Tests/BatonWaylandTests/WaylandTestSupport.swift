// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonWayland
import BatonSway
import Foundation
import Testing

func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Collects a clipboard's events so that a test can wait for the next one with a generous guard;
/// knows when the stream finished.
actor EventRecorder {
    private var buffered: [ClipboardEvent] = []
    private var finished = false
    private var waiter: (id: Int, continuation: CheckedContinuation<ClipboardEvent?, Never>)?
    private var nextWaiter = 0

    init(_ events: AsyncStream<ClipboardEvent>) {
        Task { [weak self] in
            for await event in events { await self?.record(event) }
            await self?.finish()
        }
    }

    private func record(_ event: ClipboardEvent) {
        if let waiter {
            self.waiter = nil
            waiter.continuation.resume(returning: event)
        } else {
            buffered.append(event)
        }
    }

    private func finish() {
        finished = true
        waiter?.continuation.resume(returning: nil)
        waiter = nil
    }

    var isFinished: Bool { finished }
    var pending: [ClipboardEvent] { buffered }

    /// The next event; nil when the stream finished or after `timeout` (a guard only).
    func next(timeout: Duration = .seconds(120)) async -> ClipboardEvent? {
        if !buffered.isEmpty { return buffered.removeFirst() }
        if finished { return nil }
        nextWaiter += 1
        let id = nextWaiter
        return await withCheckedContinuation { continuation in
            waiter = (id, continuation)
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                await self?.expire(id)
            }
        }
    }

    private func expire(_ id: Int) {
        guard let waiter, waiter.id == id else { return }
        self.waiter = nil
        waiter.continuation.resume(returning: nil)
    }

    func nextChange(timeout: Duration = .seconds(120)) async -> ClipboardChange? {
        while let event = await next(timeout: timeout) {
            if case .changed(let change) = event { return change }
        }
        return nil
    }
}

extension WaylandSessionClipboard.Configuration {
    /// For tests that do not time the adapter's waits: guards of 120 s (a loaded machine).
    static let patient = WaylandSessionClipboard.Configuration(answerTimeout: .seconds(120), requestorTimeout: .seconds(120),
                                                               connectTimeout: .seconds(120))
}

/// Deterministic bytes that are no text (a stand-in for an image).
func binaryBytes(count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 56)
    }
}

/// Counts calls of `provide` per type.
actor ProvideLog {
    private(set) var calls: [String: Int] = [:]
    func called(_ type: String) { calls[type, default: 0] += 1 }
    func count(_ type: String) -> Int { calls[type, default: 0] }
    var total: Int { calls.values.reduce(0, +) }
}

/// A PNG's signature and header chunk, then filler: enough for wl-paste to see an image.
let pngBytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]
    + binaryBytes(count: 4096, seed: 7)
