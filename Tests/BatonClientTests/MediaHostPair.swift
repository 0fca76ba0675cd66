// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Testing

/// The setting of the media host tests (docs/media.md, "Tests"): two `batond --no-radio` on a test
/// bus paired over TCP, and a session bus each for the players and the agents. Each side's home
/// has its own config, data and XDG_DATA_DIRS (so no desktop entry of this machine is seen).
final class MediaHostPair {
    let bus: TestBus, sessionA: TestBus, sessionB: TestBus
    let work: URL
    let alpha: NamedBatond, beta: NamedBatond
    let client: DBusConnection
    let daemonA: BatonConnection
    /// [alpha's, beta's]
    let environments: [[String: String]]

    init() async throws {
        bus = try TestBus()
        sessionA = try TestBus()
        sessionB = try TestBus()
        work = bus.directory
        alpha = try NamedBatond(bus: bus, name: "alpha", directory: work)
        beta = try NamedBatond(bus: bus, name: "beta", directory: work)
        client = try DBusConnection(bus: .address(bus.address))
        daemonA = try BatonConnection(bus: .address(bus.address), busName: alpha.busName)
        var environments: [[String: String]] = []
        for side in ["a", "b"] {
            let home = work.appendingPathComponent("home-\(side)")
            try FileManager.default.createDirectory(at: home.appendingPathComponent("config/baton"), withIntermediateDirectories: true)
            // alpha, the source, sees the system's shared MIME database (the media type of a file it
            // sends); beta sees none of this machine's desktop entries or defaults.
            let shared = home.appendingPathComponent("share").path + (side == "a" ? ":/usr/share" : "")
            environments.append(["HOME": home.path, "XDG_DATA_HOME": home.appendingPathComponent("data").path,
                                 "XDG_CONFIG_HOME": home.appendingPathComponent("config").path, "XDG_DATA_DIRS": shared])
        }
        self.environments = environments
        for daemon in [alpha, beta] {
            try await eventually(timeout: .seconds(120), "\(daemon.busName) did not start") { [client] in try await client.nameHasOwner(daemon.busName) }
        }
        try await pairOverTCP(acceptor: alpha.busName, initiator: beta.busName, client: client)
    }

    func stop() {
        daemonA.close()
        client.close()
        alpha.stop()
        beta.stop()
        bus.stop()
        sessionA.stop()
        sessionB.stop()
    }

    /// Writes the side's publishers.conf (0: alpha, 1: beta).
    func settings(_ side: Int, _ text: String) throws {
        try text.write(to: URL(fileURLWithPath: environments[side]["XDG_CONFIG_HOME"]!).appendingPathComponent("baton/publishers.conf"),
                       atomically: true, encoding: .utf8)
    }

    /// Starts the side's agent and waits until it follows suggestions and handles media.
    func agent(_ side: Int, log name: String) async throws -> AgentProcess {
        let agent = try AgentProcess(daemonBus: bus, daemonBusName: side == 0 ? alpha.busName : beta.busName, sessionBus: side == 0 ? sessionA : sessionB,
                                     environment: environments[side], log: work.appendingPathComponent(name))
        try await eventually(timeout: .seconds(120), "agent did not start: \(agent.logText)") {
            agent.logText.contains("for suggestions") && agent.logText.contains("handler for org.baton.media")
        }
        return agent
    }

    /// alpha's current activity, if any.
    func offered() async throws -> ActivityInfo? {
        guard let path = try await daemonA.currentActivityPath() else { return nil }
        return try? await daemonA.activity(at: path)
    }

    /// Ring1.Continue of alpha's media on beta; its outcome.
    func continueOnBeta() async throws -> String? {
        try await client.call(destination: beta.busName, path: BatonObjectPath.ring, interface: BatonInterface.ring, method: "Continue",
                              arguments: [.string("alpha"), .string("org.baton.media")]).first?.stringValue
    }
}

/// A WAV file of `seconds` of near-silence whose samples differ (so two copies are compared byte
/// by byte, not as runs of zeros): 8 kHz, mono, 16-bit.
func patternedWAV(seconds: Int) -> Data {
    var data = silentWAV(seconds: seconds)
    for index in stride(from: 44, to: data.count, by: 2) { data[index] = UInt8(truncatingIfNeeded: index / 2 % 7) }
    return data
}
