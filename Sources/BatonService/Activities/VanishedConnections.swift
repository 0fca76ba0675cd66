// SPDX-License-Identifier: GPL-2.0-or-later
/// Unique names seen leaving the bus, bounded (the oldest are forgotten).
struct VanishedConnections: Sendable {
    static let limit = 1_024
    private var names: Set<String> = []
    private var order: [String] = []

    func contains(_ name: String) -> Bool { names.contains(name) }

    mutating func insert(_ name: String) {
        guard names.insert(name).inserted else { return }
        order.append(name)
        if order.count > Self.limit { names.remove(order.removeFirst()) }
    }
}
