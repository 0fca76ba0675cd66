// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing

/// batond must not link full Foundation (libFoundation and its ICU data cost megabytes of idle RSS,
/// docs/benchmarks.md): with the static release runtime, one `import Foundation` anywhere in the
/// daemon's module graph makes the release link fail or pull it back in. This walks the graph that
/// Package.swift declares for batond and reads every source file of it. FoundationEssentials is
/// refused too (BatonStore's own JSON coder replaced it, issue 10).
@Suite("Daemon imports")
struct DaemonImportTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Target name -> its dependencies, from the one-line `.target(...)` declarations of Package.swift.
    static func targetGraph() throws -> [String: [String]] {
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        var graph: [String: [String]] = [:]
        for line in manifest.split(separator: "\n") where line.contains("name: \"") {
            guard let nameRange = line.range(of: #"name: "([^"]+)""#, options: .regularExpression) else { continue }
            let name = line[nameRange].dropFirst("name: \"".count).dropLast()
            var dependencies: [String] = []
            if let listRange = line.range(of: #"dependencies: \[[^\]]*\]"#, options: .regularExpression) {
                dependencies = line[listRange].split(separator: "\"").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            }
            graph[String(name)] = dependencies
        }
        return graph
    }

    static func daemonModules() throws -> Set<String> {
        let graph = try targetGraph()
        var seen: Set<String> = []
        var pending = ["batond"]
        while let module = pending.popLast() {
            guard seen.insert(module).inserted else { continue }
            pending += graph[module] ?? []
        }
        return seen
    }

    /// `import Foundation` that is not the fallback branch of `#if canImport(FoundationEssentials)`.
    static func foundationImports(in text: String) -> [Int] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        return lines.indices.filter { index in
            let words = lines[index].split(separator: " ")
            guard words.last == "Foundation", words.dropLast().last == "import" else { return false }
            return !(index > 0 && lines[index - 1] == "#else")
        }
    }

    /// Any import of FoundationEssentials (plain, `internal`, `@preconcurrency`...): batond's state
    /// files use BatonStore's own JSON coder, and FoundationEssentials' code and data cost the daemon
    /// over 1 MiB of resident memory (docs/benchmarks.md). Refusing it also refuses the
    /// `#if canImport(FoundationEssentials)` fallback pattern as a whole.
    static func foundationEssentialsImports(in text: String) -> [Int] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        return lines.indices.filter { index in
            let words = lines[index].split(separator: " ")
            return words.dropLast().contains("import") && (words.last?.hasPrefix("FoundationEssentials") ?? false)
        }
    }

    @Test func theGraphIsReadFromThePackage() throws {
        let modules = try Self.daemonModules()
        #expect(modules.isSuperset(of: ["batond", "BatonService", "BatonStore", "BatonDBus", "BatonCore", "BatonCrypto"]))
        #expect(!modules.contains("BatonClient") && !modules.contains("BatonCommandLine"))
    }

    @Test func theCheckSeesAPlainImportAndAllowsTheFallback() {
        #expect(Self.foundationImports(in: "import Glibc\nimport Foundation\n") == [1])
        #expect(Self.foundationImports(in: "internal import Foundation") == [0])
        #expect(Self.foundationImports(in: "#if canImport(FoundationEssentials)\nimport FoundationEssentials\n#else\nimport Foundation\n#endif").isEmpty)
    }

    @Test func theCheckSeesFoundationEssentialsInEveryForm() {
        #expect(Self.foundationEssentialsImports(in: "import Glibc\nimport FoundationEssentials\n") == [1])
        #expect(Self.foundationEssentialsImports(in: "internal import FoundationEssentials") == [0])
        #expect(Self.foundationEssentialsImports(in: "@preconcurrency import FoundationEssentials") == [0])
        #expect(Self.foundationEssentialsImports(in: "#if canImport(FoundationEssentials)\nimport FoundationEssentials\n#else\nimport Foundation\n#endif") == [1])
        #expect(Self.foundationEssentialsImports(in: "// import FoundationEssentials is gone\nimport BatonCore").isEmpty)
    }

    @Test func noModuleOfTheDaemonImportsFoundationEssentials() throws {
        let offenders = try Self.daemonSourceLines(matching: Self.foundationEssentialsImports(in:))
        #expect(offenders.isEmpty, "batond's module graph imports FoundationEssentials: \(offenders)")
    }

    @Test func noModuleOfTheDaemonImportsFoundation() throws {
        let offenders = try Self.daemonSourceLines(matching: Self.foundationImports(in:))
        #expect(offenders.isEmpty, "batond's module graph imports Foundation: \(offenders)")
    }

    /// "Sources/Module/File.swift:line" for each line `finder` reports (0-based) in batond's modules.
    static func daemonSourceLines(matching finder: (String) -> [Int]) throws -> [String] {
        var lines: [String] = []
        for module in try daemonModules().sorted() {
            let directory = root.appendingPathComponent("Sources/\(module)")
            guard let files = FileManager.default.enumerator(atPath: directory.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                lines += finder(text).map { "Sources/\(module)/\(file):\($0 + 1)" }
            }
        }
        return lines
    }
}
