// SPDX-License-Identifier: GPL-2.0-or-later
/// A FIFO mutual-exclusion gate for async work inside one actor: actor methods may interleave at
/// every `await`, and multi-call D-Bus sequences (Reset, AddService, Commit) must not.
/// Not Sendable: it lives in and is used only from its owning actor.
struct SerialGate {
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// True if the caller now holds the gate; false if it must wait (and call `enqueue`).
    mutating func tryEnter() -> Bool {
        if held { return false }
        held = true
        return true
    }

    mutating func enqueue(_ waiter: CheckedContinuation<Void, Never>) { waiters.append(waiter) }

    /// Hands the gate to the next waiter, or opens it.
    mutating func leave() {
        if waiters.isEmpty { held = false } else { waiters.removeFirst().resume() }
    }
}
