// SPDX-License-Identifier: GPL-2.0-or-later
import BatonService
import Synchronization

/// Where suggestions would be shown, in memory: a fake of the Suggestion1 objects.
public final class FakeSuggestionBoard: SuggestionBoard {
    private let shown = Mutex<[String: ShownSuggestion]>([:])
    private let knownTitles = Mutex<[String: String]>([:])
    private let progressSent = Mutex<[(DocumentProgress, String)]>([])

    public init() {}

    /// Titles the board was told of, by suggestion path.
    public var titles: [String: String] { knownTitles.withLock { $0 } }
    public func titleKnown(_ suggestion: ShownSuggestion, title: String) async { knownTitles.withLock { $0[suggestion.path] = title } }
    public var suggestions: [ShownSuggestion] { shown.withLock { Array($0.values) } }
    public func offer(_ suggestion: ShownSuggestion) async throws { shown.withLock { $0[suggestion.path] = suggestion } }
    public func withdraw(_ suggestion: ShownSuggestion) async { shown.withLock { $0[suggestion.path] = nil } }
    /// Every DocumentProgress signal the board would have sent, with its destination.
    public var progress: [(DocumentProgress, String)] { progressSent.withLock { $0 } }
    public func documentProgress(_ progress: DocumentProgress, to caller: String) async { progressSent.withLock { $0.append((progress, caller)) } }
}
