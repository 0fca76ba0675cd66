/// Names of the ring part of the D-Bus API (docs/dbus-api.md, "Ring hierarchy").
public enum RingInterface {
    public static let ring = "org.baton.Ring1"
    public static let pairing = "org.baton.Pairing1"
    public static let session = "org.baton.PairingSession1"
    public static let path = "/org/baton/ring"
    static let sessionPrefix = "/org/baton/ring/pairing"
}

public enum SuggestionInterface {
    public static let name = "org.baton.Suggestion1"
    static let prefix = "/org/baton/suggestion"
}

/// org.baton.Error.* names used by the ring part.
public enum ServiceErrorName {
    public static let invalidArguments = "org.baton.Error.InvalidArguments"
    public static let notPermitted = "org.baton.Error.NotPermitted"
    public static let notReady = "org.baton.Error.NotReady"
    public static let failed = "org.baton.Error.Failed"
    public static let unknownObject = "org.baton.Error.UnknownObject"
    public static let unknownDevice = "org.baton.Error.UnknownDevice"
}
