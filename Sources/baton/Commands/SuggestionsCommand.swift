// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine

/// `baton suggestions`: what nearby ring members are doing that an app here can continue.
struct SuggestionsCommand: Subcommand {
    static let name = "suggestions"
    static let summary = "list activities of nearby ring members that can be continued here"
    static let synopsis = "[--wait SECONDS]"
    static let details = """
          --wait SECONDS   wait up to this long (0-600) for at least one suggestion
        With --json: [{"Path", "ActivityType", "Device", "DeviceName", "HasWebpageURL", "Near", "Revision"}].
        Continue one with: baton continue PATH
        """

    var wait = 0.0

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        while let option = arguments.popOption() {
            guard option.name == "--wait" else { throw UsageError("unknown option \(option.name)") }
            guard let seconds = Double(try arguments.value(for: option)), seconds >= 0, seconds <= 600 else {
                throw UsageError("--wait takes 0 to 600 seconds")
            }
            wait = seconds
        }
        try arguments.expectEnd()
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
        var found = try await connection.suggestions()
        while found.isEmpty && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(250))
            found = try await connection.suggestions()
        }
        let json = JSONValue.array(found.map(OutputDocument.suggestion))
        let text = found.isEmpty ? "no suggestions" : found.map { "\($0.path)  \($0.activityType) from \($0.deviceName) (\($0.device))" }.joined(separator: "\n")
        context.output.result(json: json, text: text)
        return ExitStatus.success
    }
}
