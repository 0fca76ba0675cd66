// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonDBus
import BatonSystem

/// The calls to applications: org.baton.ActivitySource1 (WillSave, WasContinued),
/// org.baton.ActivityHandler1 (WillContinue, Continue, FailedToContinue) and org.baton.Agent1
/// (Launch), coded and decoded here; the activities see typed answers.
extension ActivityBus: SourceCalls {
    public func willSave(_ activity: Activity, source: String) async -> WillSaveAnswer {
        let reply: [DBusValue]
        do {
            reply = try await connection.call(destination: activity.owner.connection, path: source, interface: BatonInterface.source,
                                              method: OrgBaton.ActivitySource1.willSave.name, arguments: [.objectPath(activity.id.objectPath)],
                                              timeout: configuration.saveTimeout)
        } catch {
            return .failed(Self.callError(error) == .gone ? .sourceGone : .sourceTimeout)
        }
        guard reply.count == 1 else { return .failed(.sourceTimeout) }
        do {
            return .changes(try Self.decodeChanges(reply[0], allowed: ["Title", "UserInfo", "WebpageURL", "Version"]))
        } catch {
            return .failed(.sourceTimeout)
        }
    }

    public func wasContinued(_ activity: Activity, source: String, device: String) async -> Bool {
        do {
            _ = try await connection.call(destination: activity.owner.connection, path: source, interface: BatonInterface.source,
                                          method: OrgBaton.ActivitySource1.wasContinued.name, arguments: [.objectPath(activity.id.objectPath), .string(device)],
                                          timeout: configuration.saveTimeout)
            return true
        } catch {
            return false
        }
    }

}

extension ActivityBus: HandlerCalls {
    package func launch(type: String, agent: HandlerKey) async -> Result<String?, ApplicationCallError> {
        do {
            let reply = try await connection.call(destination: agent.connection, path: agent.path, interface: BatonInterface.agent,
                                                  method: OrgBaton.Agent1.launch.name, arguments: [.string(type)], timeout: configuration.handlerCallTimeout)
            return .success(reply.first?.stringValue)
        } catch {
            return .failure(Self.callError(error))
        }
    }

    package func willContinue(type: String, from device: String, handler: HandlerKey) async -> Result<Bool, ApplicationCallError> {
        do {
            let reply = try await connection.call(destination: handler.connection, path: handler.path, interface: BatonInterface.handler,
                                                  method: OrgBaton.ActivityHandler1.willContinue.name, arguments: [.string(type), .string(device)],
                                                  timeout: configuration.handlerCallTimeout)
            guard reply.count == 1, case .boolean(let answer) = reply[0] else { return .failure(.failed("WillContinue must answer (b)")) }
            return .success(answer)
        } catch {
            return .failure(Self.callError(error))
        }
    }

    package func continueActivity(_ record: ActivityRecord, document: PulledDocument?, from device: String,
                                 handler: HandlerKey) async -> ContinueCallOutcome {
        var info: [String: DBusValue] = ["Version": .int64(record.version), "Device": .string(device)]
        if let url = record.webpageURL { info["WebpageURL"] = .string(url) }
        var opened: FileDescriptor?
        if let document {
            guard let file = Self.openHandlerDocument(document) else { return .documentUnopenable }
            info["Document"] = Self.handlerDocument(document, file: file)
            opened = consume file
        }
        // The message carries its own duplicate: ours closes once the call is done.
        defer { opened.take()?.close() }
        do {
            _ = try await connection.call(destination: handler.connection, path: handler.path, interface: BatonInterface.handler,
                                          method: OrgBaton.ActivityHandler1.`continue`.name,
                                          arguments: [.string(record.activityType), .string(record.title),
                                                      PropertyValueCoding.encodeUserInfo(record.userInfo), .propertyDictionary(info)],
                                          timeout: configuration.handlerCallTimeout)
            return .delivered
        } catch {
            return .failed(Self.callError(error))
        }
    }

    package func failedToContinue(type: String, _ failure: ContinuationFailure, message: String, handler: HandlerKey) async {
        _ = try? await connection.call(destination: handler.connection, path: handler.path, interface: BatonInterface.handler,
                                       method: OrgBaton.ActivityHandler1.failedToContinue.name,
                                       arguments: [.string(type), .string(failure.rawValue), .string(message)],
                                       timeout: configuration.handlerCallTimeout)
    }

}

extension ActivityBus {
    /// No reply in time, the peer gone, or another failure (its D-Bus text for the log only).
    static func callError(_ error: any Error) -> ApplicationCallError {
        guard let error = error as? DBusError else { return .failed("\(error)") }
        if error.name == DBusError.noReplyName { return .timedOut }
        let gone: Set<String> = [DBusError.serviceUnknownName, DBusError.nameHasNoOwnerName, DBusError.disconnectedName]
        return gone.contains(error.name) ? .gone : .failed("\(error)")
    }

    /// What a handler gets for a received document (ActivityHandler1.Continue, info "Document"): a
    /// read-only descriptor of the daemon's checked copy, never a path (docs/dbus-api.md says why),
    /// and what the wire said of it. `file` (from `openHandlerDocument`) stays the caller's: the
    /// message sends a duplicate.
    static func handlerDocument(_ document: PulledDocument, file: borrowing FileDescriptor) -> DBusValue {
        var entries = documentDescription(document.info)
        entries["Fd"] = .unixFD(file.rawValue)
        return .propertyDictionary(entries)
    }

    /// The daemon's checked copy of `document`, read-only; nil when it cannot be opened.
    static func openHandlerDocument(_ document: PulledDocument) -> FileDescriptor? {
        try? FileDescriptor.open(document.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    }

    /// Id, MediaType, Size and Digest (hex) of a document: what Activity1.Document shows and a
    /// handler gets; never a path.
    static func documentDescription(_ info: DocumentInfo) -> [String: DBusValue] {
        ["Id": .string(info.documentID), "MediaType": .string(info.mediaType), "Size": .uint64(info.totalSize),
         "Digest": .string(info.digest.hexString)]
    }
}
