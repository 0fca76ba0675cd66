import BatonClient
import BatonCommandLine

/// `baton list`: the activities the daemon shows this user.
struct ListCommand: Subcommand {
    static let name = "list"
    static let summary = "list the activities you can see (yours in full, others' type and status)"
    static let synopsis = ""
    static let details = """
        Prints one line per activity: PATH TYPE STATUS [current] TITLE.
        With --json: an array of {"path", "type", "status", and for your own activities "title",
        "userInfo", "webpageURL", "version", "needsSave", "current", "owner", "revision",
        "lastError"}; absent fields are not visible or not set.
        """

    init(parsing arguments: inout ArgumentList) throws(UsageError) {}

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let activities = try await connection.activities()
        let lines = activities.map { activity in
            [activity.path, activity.activityType, activity.status, activity.isCurrent == true ? "current" : nil, activity.title]
                .compactMap { $0 }.joined(separator: "\t")
        }
        if activities.isEmpty, !context.output.json { context.output.message("no activities") }
        context.output.result(json: .array(activities.map(Self.json)), text: lines.joined(separator: "\n"))
        return ExitStatus.success
    }

    static func json(_ activity: ActivityInfo) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("path", .string(activity.path)), ("type", .string(activity.activityType)), ("status", .string(activity.status)),
        ]
        if let title = activity.title { members.append(("title", .string(title))) }
        if let userInfo = activity.userInfo { members.append(("userInfo", UserInfoJSON.json(from: userInfo))) }
        if let url = activity.webpageURL { members.append(("webpageURL", .string(url))) }
        if let version = activity.version { members.append(("version", .integer(version))) }
        if let needsSave = activity.needsSave { members.append(("needsSave", .boolean(needsSave))) }
        if let current = activity.isCurrent { members.append(("current", .boolean(current))) }
        if let owner = activity.owner { members.append(("owner", .integer(Int64(owner)))) }
        if let revision = activity.revision { members.append(("revision", .integer(Int64(revision)))) }
        if let lastError = activity.lastError { members.append(("lastError", .string(lastError))) }
        return .object(members)
    }
}
