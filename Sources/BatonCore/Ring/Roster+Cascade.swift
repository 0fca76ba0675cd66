// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

extension Roster {
    /// §7.3 "Cascade": the entries and tombstoned devices a cascading mark takes out, a function
    /// of the held entries and marks alone. With C the devices whose mark is cascading and T all
    /// tombstoned devices, S(X) is the largest set of entries and keyed tombstones, none in C or X,
    /// each reached from C through introductions by devices of C or S(X), every introducer of each
    /// being in S(X) or T. S0 = S(∅); a remover of a cascading mark in S0 reached (through S0) only
    /// from devices it removed itself is spared: X = those removers, the result S(X).
    static func cascade(entries: [DeviceID: RosterMember], marks: [DeviceID: RemovalMark]) -> Set<DeviceID> {
        var roots: [DeviceID: DeviceID] = [:]
        for (id, mark) in marks where mark.cascading { roots[id] = mark.remover }
        guard !roots.isEmpty else { return [] }
        var introducers: [DeviceID: [DeviceID]] = [:]
        for (id, entry) in entries { introducers[id] = entry.introductions.map(\.introducer) }
        for (id, mark) in marks where mark.removedKey != nil && roots[id] == nil { introducers[id] = mark.introductions.map(\.introducer) }
        var children: [DeviceID: [DeviceID]] = [:]
        for (id, list) in introducers { for introducer in list { children[introducer, default: []].append(id) } }

        // The nodes by index, so each round below is a pass over arrays. A crafted roster can make
        // the rounds of the definition drop one entry each (a chain of entries each introduced by a
        // root and by the one before): dropping what lost an introducer at once, transitively, keeps
        // the reachability passes to the few a merge needs (§7.3 step 5a; docs/benchmarks.md).
        let nodes = Array(introducers.keys)
        var index: [DeviceID: Int] = [:]
        for (i, id) in nodes.enumerated() { index[id] = i }
        let removed = nodes.map { marks[$0] != nil }
        // A node with an introducer that is neither removed nor a node can never be in the set.
        let hopeless = nodes.map { id in introducers[id]!.contains { marks[$0] == nil && index[$0] == nil } }
        let strict = nodes.map { id in introducers[id]!.compactMap { marks[$0] == nil ? index[$0] : nil } }
        let below = nodes.map { id in (children[id] ?? []).compactMap { index[$0] } }
        let fromRoots = Array(Set(roots.keys.flatMap { (children[$0] ?? []).compactMap { index[$0] } }))

        /// S(X) of §7.3 step 5a: the greatest set of nodes outside X each reached from a root
        /// through the set and with every introducer in the set or removed. Only nodes that cannot
        /// be in it leave: one with an introducer that is neither in the set nor removed, and one
        /// not reached through the set; when neither is left, the set is S(X).
        func subtree(sparing spared: Set<DeviceID>) -> Set<DeviceID> {
            var inSet = [Bool](repeating: true, count: nodes.count)
            for id in spared { if let i = index[id] { inSet[i] = false } }
            var leaving = nodes.indices.filter { inSet[$0] && (hopeless[$0] || strict[$0].contains { !inSet[$0] }) }
            leaving += spared.compactMap { index[$0] }.flatMap { removed[$0] ? [] : below[$0] }
            while true {
                // An introducer left that is not removed: leave too, and so in turn what it introduced.
                while let i = leaving.popLast() {
                    guard inSet[i] else { continue }
                    inSet[i] = false
                    if !removed[i] { leaving += below[i].filter { inSet[$0] } }
                }
                // Not reached from a root through the set: leave.
                var reached = [Bool](repeating: false, count: nodes.count)
                var frontier = fromRoots.filter { inSet[$0] }
                for i in frontier { reached[i] = true }
                while let i = frontier.popLast() {
                    for c in below[i] where inSet[c] && !reached[c] {
                        reached[c] = true
                        frontier.append(c)
                    }
                }
                for i in nodes.indices where inSet[i] && !reached[i] {
                    inSet[i] = false
                    if !removed[i] { leaving += below[i].filter { inSet[$0] } }
                }
                if leaving.isEmpty { return Set(nodes.indices.lazy.filter { inSet[$0] }.map { nodes[$0] }) }
            }
        }
        let first = subtree(sparing: [])
        // Spared: the largest set Y of removers in S0 such that every walk from a root through S0
        // meets Y first at that root's own remover (§7.3 step 5a). A walk stops at a member of Y:
        // what lies behind a spared remover is no other remover's concern (two owners who each
        // cascade a rogue reach each other through the pairing that joined them). Which removers
        // reach each device is kept to at most two, enough to tell "only itself" (the count does
        // not depend on the order of the walk). Removers that fail leave Y, and the walk is redone.
        var spared = Set(roots.values).filter { first.contains($0) }
        while !spared.isEmpty {
            var signers: [DeviceID: [DeviceID]] = [:]
            var work = roots.map { (node: $0.key, signer: $0.value) }
            while let (node, signer) = work.popLast() {
                for id in children[node] ?? [] where first.contains(id) {
                    var held = signers[id] ?? []
                    guard !held.contains(signer), held.count < 2 else { continue }
                    held.append(signer)
                    signers[id] = held
                    if !spared.contains(id) { work.append((id, signer)) }
                }
            }
            let kept = spared.filter { signers[$0] == [$0] }
            if kept == spared { break }
            spared = kept
        }
        return spared.isEmpty ? first : subtree(sparing: spared)
    }
}
