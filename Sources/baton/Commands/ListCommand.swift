// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
import BatonPublishers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `baton list`: the activities the daemon shows this user.
struct ListCommand: Subcommand {
    static let name = "list"
    static let summary = "list the activities you can see (yours in full, others' type and status)"
    static let synopsis = ""
    static let details = """
        Prints one line per activity: PATH TYPE STATUS [current] TITLE [document ID MEDIATYPE SIZE]
        [edit session: OWNER], the last when a document is attached: "this machine" or the owning
        member's device id.
        With --json: an array of {"Path", "Type", "Status", and for your own activities "Title",
        "UserInfo", "WebpageURL", "Version", "NeedsSave", "Current", "Owner", "Revision",
        "LastError", "Document" {"Id", "MediaType", "Size", "Digest"}, "EditSession"}; absent fields
        are not visible or not set.
        Without --json, a last line on standard error says which publishers that need no app
        changes are on ("publishers: browser on, recent off, clipboard off"; see baton publishers).
        """

    init(parsing arguments: inout ArgumentList) throws(UsageError) {}

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let activities = try await connection.activities()
        let lines = activities.map { activity in
            [activity.path, activity.activityType, activity.status, activity.isCurrent == true ? "current" : nil, activity.title,
             activity.document.map { "document \($0.id) \($0.mediaType) \($0.size) bytes" },
             activity.editSession.flatMap { $0.isEmpty ? nil : "edit session: " + ($0 == "this" ? "this machine" : $0) }]
                .compactMap { $0 }.joined(separator: "\t")
        }
        if activities.isEmpty, !context.output.json { context.output.message("no activities") }
        context.output.result(json: .array(activities.map(OutputDocument.activity)), text: lines.joined(separator: "\n"))
        if !context.output.json {
            let settings = PublisherSettings.load(environment: ProcessInfo.processInfo.environment)
            context.output.message("publishers: " + PublishersCommand.summaryLines(settings).joined(separator: ", "))
        }
        return ExitStatus.success
    }
}
