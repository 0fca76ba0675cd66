import BatonClient
import BatonCommandLine
import BatonPublishers
import Foundation

/// `baton publishers`: turns the app-independent publishers (browser tab, recent document) on or
/// off in publishers.conf, the one place they all read.
struct PublishersCommand: Subcommand {
    static let name = "publishers"
    static let summary = "show or change which publishers that need no app changes are on (browser, recent)"
    static let synopsis = "[enable|disable browser|recent]"
    static let details = """
        browser: the page in the focused browser window (Baton extension and baton-browser-host).
        recent: the local document you last opened (session agent, recently-used.xbel).
        All are off until enabled. The setting is $XDG_CONFIG_HOME/baton/publishers.conf
        (default ~/.config), read before each publication; the daemon is not needed.
        Prints "NAME on|off" per publisher (with --json: an object of booleans).
        """

    enum Change: Sendable { case enable(Publisher), disable(Publisher) }
    let change: Change?

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        guard let verb = try arguments.popPositional() else {
            change = nil
            return
        }
        guard let name = try arguments.popPositional() else { throw UsageError("\(verb): which publisher? (browser or recent)") }
        guard let publisher = Publisher(rawValue: name) else { throw UsageError("\(name) is not a publisher (browser or recent)") }
        switch verb {
        case "enable": change = .enable(publisher)
        case "disable": change = .disable(publisher)
        default: throw UsageError("\(verb): expected enable or disable")
        }
        try arguments.expectEnd()
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        var settings = PublisherSettings.load(environment: environment)
        if let change {
            switch change {
            case .enable(let publisher): settings.enabled.insert(publisher)
            case .disable(let publisher): settings.enabled.remove(publisher)
            }
            do { try settings.save(environment: environment) } catch {
                context.output.message("baton: cannot write \(PublisherSettings.fileURL(environment: environment)?.path ?? "publishers.conf"): \(error)")
                return ExitStatus.failure
            }
        }
        context.output.result(json: .object(Publisher.allCases.map { (key: $0.rawValue, value: .boolean(settings.isEnabled($0))) }),
                              text: Self.summaryLines(settings).joined(separator: "\n"))
        return ExitStatus.success
    }

    static func summaryLines(_ settings: PublisherSettings) -> [String] {
        Publisher.allCases.map { "\($0.rawValue) \(settings.isEnabled($0) ? "on" : "off")" }
    }
}
