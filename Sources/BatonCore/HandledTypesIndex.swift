/// The activity types installed apps declare (X-Baton-ActivityTypes in .desktop files), kept in
/// memory. The files are read again only when the applications folders changed: the caller
/// passes a fingerprint of the folders (e.g. their modification times and inodes, a few stat
/// calls) or invalidates the index from a folder watch. Never re-read per heard advert.
public struct HandledTypesIndex<Fingerprint: Hashable & Sendable>: Sendable {
    public private(set) var desktopTypes: Set<String> = []
    /// How often the folders were read, for diagnostics and tests.
    public private(set) var loads = 0
    private var loadedFingerprint: Fingerprint?

    public init() {}

    /// Reads the folders through `load` when nothing is loaded yet, after `invalidate`, or when
    /// `fingerprint` differs from the one of the last load. Returns whether it read them.
    @discardableResult
    public mutating func refresh(fingerprint: Fingerprint, load: () -> [String]) -> Bool {
        guard loadedFingerprint != fingerprint else { return false }
        desktopTypes = Set(load())
        loadedFingerprint = fingerprint
        loads += 1
        return true
    }

    /// The next `refresh` reads the folders whatever the fingerprint (a watch saw a change).
    public mutating func invalidate() {
        loadedFingerprint = nil
    }

    /// Whether a running handler (`registered`) or an installed app handles `type`.
    public func handles(_ type: String, registered: Set<String> = []) -> Bool {
        registered.contains(type) || desktopTypes.contains(type)
    }

    /// Everything handled, registered handlers' types included (Manager1.GetHandledTypes).
    public func allTypes(registered: Set<String> = []) -> Set<String> {
        desktopTypes.union(registered)
    }
}
