import BatonAPI
import BatonDBus

/// Why a ring, pairing or continuation request was refused. The actors throw these; the D-Bus
/// glue maps them to org.baton.Error.* names here, in one place.
public enum ServiceFailure: Error, Sendable, Equatable {
    case invalidArguments(String)
    case notPermitted(String)
    case notReady(String)
    case failed(String)
    case unknownObject(String)
    case unknownDevice(String)
    case unknownActivity(String)
}

extension DBusError {
    init(_ failure: ServiceFailure) {
        switch failure {
        case .invalidArguments(let message): self.init(name: BatonErrorName.invalidArguments, message: message)
        case .notPermitted(let message): self.init(name: BatonErrorName.notPermitted, message: message)
        case .notReady(let message): self.init(name: BatonErrorName.notReady, message: message)
        case .failed(let message): self.init(name: BatonErrorName.failed, message: message)
        case .unknownObject(let message): self.init(name: BatonErrorName.unknownObject, message: message)
        case .unknownDevice(let message): self.init(name: BatonErrorName.unknownDevice, message: message)
        case .unknownActivity(let message): self.init(name: BatonErrorName.unknownActivity, message: message)
        }
    }
}

/// Runs a typed actor call for a D-Bus method, turning its `ServiceFailure` into the D-Bus error.
func mappingFailures<T>(_ body: () async throws(ServiceFailure) -> T) async throws(DBusError) -> T {
    do { return try await body() } catch { throw DBusError(error) }
}
