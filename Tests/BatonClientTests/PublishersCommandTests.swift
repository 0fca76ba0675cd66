import BatonTestBus
import Foundation
import Testing

@Suite("baton publishers and the publishers line of baton list", .serialized)
struct PublishersCommandTests {
    @Test("enable and disable change publishers.conf, which list reports")
    func enableDisable() async throws {
        try await withDaemon { daemon in
            let config = daemon.bus.directory.appendingPathComponent("config").path
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_CONFIG_HOME"] = config
            let baton = try Built.executable("baton")
            func run(_ arguments: [String]) async throws -> ToolResult {
                try await runTool(baton, ["--bus", daemon.bus.address, "--bus-name", daemon.busName] + arguments, environment: environment)
            }

            var result = try await run(["publishers"])
            #expect(result.status == 0)
            #expect(result.stdout == "browser off\nrecent off\n")

            result = try await run(["publishers", "enable", "browser"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout == "browser on\nrecent off\n")
            let file = try String(contentsOfFile: config + "/baton/publishers.conf", encoding: .utf8)
            #expect(file.contains("browser = on\n") && file.contains("recent = off\n"))

            result = try await run(["list"])
            #expect(result.status == 0)
            #expect(result.stderr.contains("publishers: browser on, recent off"), "\(result.stderr)")

            result = try await run(["--json", "publishers", "disable", "browser"])
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Bool])
            #expect(json == ["browser": false, "recent": false])

            for bad in [["publishers", "enable"], ["publishers", "enable", "mail"], ["publishers", "toggle", "browser"],
                        ["publishers", "enable", "browser", "extra"]] {
                #expect(try await run(bad).status == 64, "\(bad)")
            }
        }
    }
}
