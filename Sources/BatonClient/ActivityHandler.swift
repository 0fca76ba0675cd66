// SPDX-License-Identifier: LGPL-2.1-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonDBus
import BatonSystem

/// Receives activities continued from other devices (the app side of org.baton.ActivityHandler1).
///
/// The daemon calls in from any thread; conforming types are `Sendable` (an actor, or a class
/// whose state is protected). Each call completes before the daemon's reply is sent.
public protocol ActivityHandler: Sendable {
    /// An activity of `type` is about to be continued here; return false to decline. Default: true.
    func willContinue(type: String, from device: String) async -> Bool
    /// Deliver the activity.
    func `continue`(_ activity: ContinuedActivity) async
    /// Deliver the activity, or refuse it by throwing: the daemon's Continue then ends with the
    /// outcome "failed", the source is not told, and this handler hears FailedToContinue
    /// "cancelled" (docs/dbus-api.md). Default: `continue`, which never refuses.
    func continueOrRefuse(_ activity: ContinuedActivity) async throws(BatonClientError)
    /// A continuation this handler accepted (WillContinue returned true) could not complete;
    /// `error.continuationFailure` says why (cancelled, unreachable, interrupted,
    /// versionUnsupported, noLongerCurrent, timedOut). Default: nothing.
    func didFailToContinue(type: String, error: BatonClientError) async
}

extension ActivityHandler {
    public func willContinue(type: String, from device: String) async -> Bool { true }
    public func didFailToContinue(type: String, error: BatonClientError) async {}
    public func continueOrRefuse(_ activity: ContinuedActivity) async throws(BatonClientError) { await self.continue(activity) }
}

/// An `ActivityHandler` made of closures.
public struct ClosureActivityHandler: ActivityHandler {
    let willContinueClosure: @Sendable (String, String) async -> Bool
    let continueClosure: @Sendable (ContinuedActivity) async -> Void
    let didFailClosure: @Sendable (String, BatonClientError) async -> Void

    public init(
        willContinue: @escaping @Sendable (_ type: String, _ device: String) async -> Bool = { _, _ in true },
        continue continueActivity: @escaping @Sendable (ContinuedActivity) async -> Void,
        didFailToContinue: @escaping @Sendable (_ type: String, _ error: BatonClientError) async -> Void = { _, _ in }
    ) {
        willContinueClosure = willContinue
        continueClosure = continueActivity
        didFailClosure = didFailToContinue
    }

    public func willContinue(type: String, from device: String) async -> Bool { await willContinueClosure(type, device) }
    public func `continue`(_ activity: ContinuedActivity) async { await continueClosure(activity) }
    public func didFailToContinue(type: String, error: BatonClientError) async { await didFailClosure(type, error) }
}

/// The exported org.baton.ActivityHandler1 object forwarding to an `ActivityHandler`.
struct ActivityHandlerObject: Sendable {
    let handler: any ActivityHandler
    /// Weak: the connection owns the exported object, not the other way round.
    weak var connection: BatonConnection?

    init(handler: any ActivityHandler, connection: BatonConnection) {
        self.handler = handler
        self.connection = connection
    }

    private func requireDaemon(_ call: DBusMethodCall) async throws(DBusError) {
        guard let connection else { throw .disconnected() }
        try await connection.requireDaemon(call)
    }

    var interface: DBusInterface {
        let object = self
        return DBusInterface(OrgBaton.ActivityHandler1.name, methods: [
            DBusMethod(OrgBaton.ActivityHandler1.willContinue) { call in
                try await object.requireDaemon(call)
                let method = OrgBaton.ActivityHandler1.willContinue
                let (type, device) = try decodedArguments(method, call)
                return method.encodeReply(await object.handler.willContinue(type: type, from: device))
            },
            DBusMethod(OrgBaton.ActivityHandler1.continue) { call in
                try await object.requireDaemon(call)
                let activity = try Self.continuedActivity(from: call.arguments)
                do throws(BatonClientError) {
                    try await object.handler.continueOrRefuse(activity)
                } catch {
                    throw DBusError(name: error.name, message: error.message)
                }
                return []
            },
            DBusMethod(OrgBaton.ActivityHandler1.failedToContinue) { call in
                try await object.requireDaemon(call)
                let (type, name, message) = try decodedArguments(OrgBaton.ActivityHandler1.failedToContinue, call)
                await object.handler.didFailToContinue(type: type, error: Self.failure(named: name, message: message))
                return []
            },
        ])
    }

    /// FailedToContinue's `error` is a continuation category ("interrupted"); the error the handler
    /// gets reads it back as `continuationFailure`. Another name (an older daemon) is kept as it is.
    static func failure(named name: String, message: String) -> BatonClientError {
        guard let category = ContinuationFailure(rawValue: name) else { return BatonClientError(name: name, message: message) }
        let detail = ContinuationFailure(errorMessage: message) == category ? message : category.message(message)
        return BatonClientError(name: category.errorName.rawValue, message: detail)
    }

    static func continuedActivity(from arguments: [DBusValue]) throws(DBusError) -> ContinuedActivity {
        func invalid(_ message: String) -> DBusError {
            DBusError(name: BatonErrorName.invalidArguments, message: message)
        }
        guard arguments.count == 4, let type = arguments[0].stringValue, let title = arguments[1].stringValue,
              let info = arguments[3].asDictionary else { throw invalid("Continue expects (ssa{sv}a{sv})") }
        let userInfo: [String: PropertyValue]
        do {
            userInfo = try PropertyValueCoding.decodeUserInfo(arguments[2])
        } catch {
            throw error.dbusError
        }
        var url: URL?
        if let text = info["WebpageURL"]?.stringValue, !text.isEmpty {
            guard let parsed = URL(string: text) else { throw invalid("WebpageURL is not a URL") }
            url = parsed
        }
        var document: ContinuedDocument?
        if let entry = info["Document"]?.asDictionary {
            guard let descriptor = entry["Fd"]?.unixFDValue, let id = entry["Id"]?.stringValue, let mediaType = entry["MediaType"]?.stringValue,
                  let size = entry["Size"]?.uint64Value, let digest = entry["Digest"]?.stringValue else {
                if let descriptor = entry["Fd"]?.unixFDValue { FileDescriptor(taking: descriptor).close() }
                throw invalid("Document expects Fd (h), Id, MediaType, Digest (s) and Size (t)")
            }
            document = ContinuedDocument(id: id, mediaType: mediaType, size: size, digest: digest, descriptor: descriptor)
        }
        return ContinuedActivity(activityType: type, title: title, userInfo: userInfo, webpageURL: url,
                                 version: info["Version"]?.int64Value ?? 0, device: info["Device"]?.stringValue ?? "", document: document)
    }
}
