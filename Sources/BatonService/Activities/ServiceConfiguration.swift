// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI

/// The activities' settings (batond: from its options).
public struct ServiceConfiguration: Sendable {
    public static let defaultSaveTimeout: Duration = .seconds(2)
    public static let defaultHandlerWait: Duration = .seconds(10)

    public var busName: String
    public var version: String
    public var adapter: String
    /// False with `--no-radio`: the radio is off on purpose, not unavailable.
    public var radioEnabled: Bool
    public var saveTimeout: Duration
    /// How long a launched application has to register a handler.
    public var handlerWait: Duration
    /// Timeout for each call into an application's handler.
    public var handlerCallTimeout: Duration
    /// GetStatus "SecretsAtRest" (RingStore.secretsAtRest); nil: not said (tests without a ring).
    public var secretsAtRest: String?

    public init(busName: String = BatonBusName.daemon, version: String = batonVersion, adapter: String = "hci0", radioEnabled: Bool = true,
                saveTimeout: Duration = defaultSaveTimeout, handlerWait: Duration = defaultHandlerWait,
                handlerCallTimeout: Duration = .seconds(10)) {
        self.busName = busName
        self.version = version
        self.adapter = adapter
        self.radioEnabled = radioEnabled
        self.saveTimeout = saveTimeout
        self.handlerWait = handlerWait
        self.handlerCallTimeout = handlerCallTimeout
    }
}

public let batonVersion = BatonRelease.version
