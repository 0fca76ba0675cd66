// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// An app's package can depend on the BatonClient product by version only while no target in its
/// graph carries an unsafe flag (SwiftPM refuses it). The release build of this tree's scripts gives
/// the modules batond shares with BatonClient function sections (BATON_DAEMON_LAYOUT=1, Package.swift);
/// without that variable, as in an app's build, none of them may carry one.
@Suite("BatonClient product flags")
struct ClientProductFlagsTests {
    /// Targets with unsafe flags, and the BatonClient product's target graph, as SwiftPM reads the manifest.
    static func manifest(daemonLayout: Bool) async throws -> (unsafe: Set<String>, clientGraph: Set<String>) {
        var environment = ProcessInfo.processInfo.environment
        environment["BATON_DAEMON_LAYOUT"] = daemonLayout ? "1" : nil
        environment["PATH"] = (environment["PATH"] ?? "/usr/bin:/bin") + ":/opt/swift/usr/bin"
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("baton-dump-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let result = try await runProgram("/usr/bin/env", ["swift", "package", "--package-path", DaemonImportTests.root.path,
                                                           "--scratch-path", scratch.path, "dump-package"], environment: environment)
        try #require(result.status == 0, "\(result.stderr)")
        let package = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let targets = package["targets"] as? [[String: Any]] ?? []
        var unsafe: Set<String> = []
        var dependencies: [String: [String]] = [:]
        for target in targets {
            let name = target["name"] as? String ?? ""
            let settings = target["settings"] as? [[String: Any]] ?? []
            if settings.contains(where: { (($0["kind"] as? [String: Any])?["unsafeFlags"]) != nil }) { unsafe.insert(name) }
            dependencies[name] = (target["dependencies"] as? [[String: Any]] ?? []).compactMap {
                (($0["byName"] ?? $0["target"]) as? [Any])?.first as? String
            }
        }
        let products = package["products"] as? [[String: Any]] ?? []
        var pending = (products.first { $0["name"] as? String == "BatonClient" }?["targets"] as? [String]) ?? []
        var graph: Set<String> = []
        while let name = pending.popLast() {
            guard graph.insert(name).inserted else { continue }
            pending += dependencies[name] ?? []
        }
        return (unsafe, graph)
    }

    @Test("Without BATON_DAEMON_LAYOUT no target of BatonClient's graph has an unsafe flag; with it the shared ones have function sections")
    func clientGraphIsSafeByDefault() async throws {
        let plain = try await Self.manifest(daemonLayout: false)
        #expect(plain.clientGraph.isSuperset(of: ["BatonClient", "BatonAPI", "BatonCore", "BatonCrypto", "BatonDBus", "BatonReadiness"]))
        #expect(plain.unsafe.isDisjoint(with: plain.clientGraph), "\(plain.unsafe.intersection(plain.clientGraph))")
        #expect(plain.unsafe.contains("batond"))
        let layout = try await Self.manifest(daemonLayout: true)
        #expect(layout.unsafe.isSuperset(of: ["BatonAPI", "BatonCore", "BatonCrypto", "BatonDBus", "BatonReadiness"]))
        #expect(!layout.unsafe.contains("BatonClient"))
    }
}
