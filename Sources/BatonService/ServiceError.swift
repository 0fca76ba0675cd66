import BatonDBus

/// The org.baton.Error.* names of docs/dbus-api.md.
public enum BatonErrorName {
    public static let invalidArguments = "org.baton.Error.InvalidArguments"
    public static let payloadTooLarge = "org.baton.Error.PayloadTooLarge"
    public static let unknownActivity = "org.baton.Error.UnknownActivity"
    public static let notPermitted = "org.baton.Error.NotPermitted"
    public static let limitExceeded = "org.baton.Error.LimitExceeded"
    public static let alreadyExists = "org.baton.Error.AlreadyExists"
    public static let notReady = "org.baton.Error.NotReady"
    public static let failed = "org.baton.Error.Failed"
}

extension DBusError {
    static func baton(_ name: String, _ message: String) -> DBusError { DBusError(name: name, message: message) }
    static func invalidArguments(_ message: String) -> DBusError { .baton(BatonErrorName.invalidArguments, message) }
    static func payloadTooLarge(_ message: String) -> DBusError { .baton(BatonErrorName.payloadTooLarge, message) }
    static func notPermitted(_ message: String) -> DBusError { .baton(BatonErrorName.notPermitted, message) }

    init(_ error: RegistryError) {
        switch error {
        case .invalidArguments(let message): self = .invalidArguments(message)
        case .payloadTooLarge(let message): self = .payloadTooLarge(message)
        case .unknownActivity: self = .baton(BatonErrorName.unknownActivity, "no such activity")
        case .notPermitted: self = .notPermitted("the activity belongs to another user")
        case .limitExceeded(let message): self = .baton(BatonErrorName.limitExceeded, message)
        }
    }
}
