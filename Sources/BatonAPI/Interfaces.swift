// SPDX-License-Identifier: LGPL-2.1-or-later
// Every method, signal and property of the org.baton interfaces, declared once (docs/dbus-api.md;
// dbus/<interface>.xml describes the same, and ContractTests checks both ways).
import BatonCore
import BatonDBus

/// The org.baton interfaces, by their D-Bus names: `OrgBaton.Manager1.createActivity` is
/// org.baton.Manager1.CreateActivity.
public enum OrgBaton {
    /// Every interface, daemon side, application side and the session agent's.
    public static var interfaces: [any InterfaceContract.Type] {
        [Manager1.self, Activity1.self, Suggestion1.self, ActivitySource1.self, ActivityHandler1.self, Ring1.self,
         Pairing1.self, PairingSession1.self, Agent1.self, Clipboard1.self, ClipboardAgent1.self]
    }

    /// org.baton.Manager1 at /org/baton.
    public enum Manager1: InterfaceContract {
        public static let name = BatonInterface.manager

        public static let createActivity = MethodContract(
            name, "CreateActivity",
            in: Wire.four("type", Wire.string, "title", Wire.string, "userInfo", Wire.userInfo, "options", Wire.dictionary),
            out: Wire.one("activity", Wire.objectPath))
        /// The caller's current activity, or "/" (BatonObjectPath.none).
        public static let getCurrentActivity = MethodContract(name, "GetCurrentActivity", in: Wire.none, out: Wire.one("activity", Wire.objectPath))
        public static let registerHandler = MethodContract(
            name, "RegisterHandler", in: Wire.two("handler", Wire.objectPath, "types", Wire.stringArray), out: Wire.none)
        public static let registerHandlerWithOptions = MethodContract(
            name, "RegisterHandlerWithOptions",
            in: Wire.three("handler", Wire.objectPath, "types", Wire.stringArray, "options", Wire.dictionary), out: Wire.none)
        public static let unregisterHandler = MethodContract(name, "UnregisterHandler", in: Wire.one("handler", Wire.objectPath), out: Wire.none)
        public static let registerAgent = MethodContract(name, "RegisterAgent", in: Wire.one("agent", Wire.objectPath), out: Wire.none)
        public static let getHandledTypes = MethodContract(name, "GetHandledTypes", in: Wire.none, out: Wire.one("types", Wire.stringArray))
        public static let getStatus = MethodContract(name, "GetStatus", in: Wire.none, out: Wire.one("status", Wire.managerStatus))

        public static let version = PropertyContract(name, "Version", Wire.string)
        public static let busName = PropertyContract(name, "BusName", Wire.string)

        public static var members: [MemberContract] {
            [createActivity.member, getCurrentActivity.member, registerHandler.member, registerHandlerWithOptions.member,
             unregisterHandler.member, registerAgent.member, getHandledTypes.member, getStatus.member,
             version.member, busName.member]
        }
    }

    /// org.baton.Activity1 at /org/baton/activity/u{uid}_{n}.
    public enum Activity1: InterfaceContract {
        public static let name = BatonInterface.activity

        public static let update = MethodContract(name, "Update", in: Wire.one("changes", Wire.dictionary), out: Wire.none)
        public static let becomeCurrent = MethodContract(name, "BecomeCurrent", in: Wire.none, out: Wire.none)
        public static let resignCurrent = MethodContract(name, "ResignCurrent", in: Wire.none, out: Wire.none)
        public static let invalidate = MethodContract(name, "Invalidate", in: Wire.none, out: Wire.none)
        public static let getPayload = MethodContract(name, "GetPayload", in: Wire.none, out: Wire.one("payload", Wire.dictionary))
        /// The descriptor stays the caller's (the daemon copies the snapshot).
        public static let attachDocument = MethodContract(
            name, "AttachDocument", in: Wire.three("snapshot", Wire.unixFD, "mediaType", Wire.string, "documentId", Wire.string), out: Wire.none)
        public static let documentEdited = MethodContract(name, "DocumentEdited", in: Wire.none, out: Wire.none)

        public static let activityType = PropertyContract(name, "Type", Wire.string)
        public static let title = PropertyContract(name, "Title", Wire.string)
        public static let userInfo = PropertyContract(name, "UserInfo", Wire.userInfo)
        public static let webpageURL = PropertyContract(name, "WebpageURL", Wire.string)
        public static let version = PropertyContract(name, "Version", Wire.int64)
        public static let needsSave = PropertyContract(name, "NeedsSave", Wire.boolean)
        public static let current = PropertyContract(name, "Current", Wire.boolean)
        public static let owner = PropertyContract(name, "Owner", Wire.uint32)
        public static let revision = PropertyContract(name, "Revision", Wire.uint32)
        public static let status = PropertyContract(name, "Status", Wire.string)
        public static let lastError = PropertyContract(name, "LastError", Wire.string)
        public static let document = PropertyContract(name, "Document", Wire.dictionary)
        public static let editSession = PropertyContract(name, "EditSession", Wire.string)

        public static var members: [MemberContract] {
            [update.member, becomeCurrent.member, resignCurrent.member, invalidate.member, getPayload.member, attachDocument.member,
             documentEdited.member,
             activityType.member, title.member, userInfo.member, webpageURL.member, version.member, needsSave.member, current.member,
             owner.member, revision.member, status.member, lastError.member, document.member, editSession.member]
        }
    }

    /// org.baton.Suggestion1 at /org/baton/suggestion/{n}.
    public enum Suggestion1: InterfaceContract {
        public static let name = BatonInterface.suggestion

        /// Continue the suggested activity here; the outcome ("delivered", ...).
        public static let `continue` = MethodContract(name, "Continue", in: Wire.none, out: Wire.one("outcome", Wire.string))
        public static let continueInBrowser = MethodContract(name, "ContinueInBrowser", in: Wire.none, out: Wire.one("url", Wire.string))
        public static let dismiss = MethodContract(name, "Dismiss", in: Wire.none, out: Wire.none)

        public static let activityType = PropertyContract(name, "ActivityType", Wire.string)
        public static let device = PropertyContract(name, "Device", Wire.string)
        public static let fallback = PropertyContract(name, "Fallback", Wire.string)
        public static let deviceName = PropertyContract(name, "DeviceName", Wire.string)
        public static let hasWebpageURL = PropertyContract(name, "HasWebpageURL", Wire.boolean)
        public static let near = PropertyContract(name, "Near", Wire.boolean)
        public static let revision = PropertyContract(name, "Revision", Wire.uint32)
        public static let title = PropertyContract(name, "Title", Wire.string)

        public static var members: [MemberContract] {
            [`continue`.member, continueInBrowser.member, dismiss.member,
             activityType.member, device.member, fallback.member, deviceName.member, hasWebpageURL.member, near.member,
             revision.member, title.member]
        }
    }

    /// org.baton.ActivitySource1: exported by an app for one of its activities; the daemon calls it.
    public enum ActivitySource1: InterfaceContract {
        public static let name = BatonInterface.source

        public static let willSave = MethodContract(name, "WillSave", in: Wire.one("activity", Wire.objectPath),
                                                    out: Wire.one("changes", Wire.dictionary))
        public static let wasContinued = MethodContract(name, "WasContinued", in: Wire.two("activity", Wire.objectPath, "device", Wire.string),
                                                        out: Wire.none)

        public static var members: [MemberContract] { [willSave.member, wasContinued.member] }
    }

    /// org.baton.ActivityHandler1: exported by an app that continues activities; the daemon calls it.
    public enum ActivityHandler1: InterfaceContract {
        public static let name = BatonInterface.handler

        public static let willContinue = MethodContract(name, "WillContinue", in: Wire.two("type", Wire.string, "device", Wire.string),
                                                        out: Wire.one("accept", Wire.boolean))
        /// info: WebpageURL, Version, Device, Document (Fd h, Id, MediaType, Size t, Digest).
        public static let `continue` = MethodContract(
            name, "Continue", in: Wire.four("type", Wire.string, "title", Wire.string, "userInfo", Wire.raw("a{sv}"), "info", Wire.dictionary),
            out: Wire.none)
        /// error: a ContinuationFailure category.
        public static let failedToContinue = MethodContract(
            name, "FailedToContinue", in: Wire.three("type", Wire.string, "error", Wire.string, "message", Wire.string), out: Wire.none)

        public static var members: [MemberContract] { [willContinue.member, `continue`.member, failedToContinue.member] }
    }

    /// org.baton.Agent1 at /org/baton/Agent: served by baton-agent.
    public enum Agent1: InterfaceContract {
        public static let name = BatonInterface.agent

        public static let launch = MethodContract(name, "Launch", in: Wire.one("activity_type", Wire.string), out: Wire.one("desktop_id", Wire.string))
        public static let getHandlers = MethodContract(name, "GetHandlers", in: Wire.one("activity_type", Wire.string),
                                                       out: Wire.one("desktop_ids", Wire.stringArray))

        public static var members: [MemberContract] { [launch.member, getHandlers.member] }
    }

    /// org.baton.Ring1 at /org/baton/ring.
    public enum Ring1: InterfaceContract {
        public static let name = BatonInterface.ring

        /// format: "text" or "json".
        public static let dumpRadio = MethodContract(name, "DumpRadio", in: Wire.one("format", Wire.string), out: Wire.one("dump", Wire.string))
        public static let getRadioNotices = MethodContract(name, "GetRadioNotices", in: Wire.none, out: Wire.one("notices", Wire.stringArray))
        public static let listMembers = MethodContract(name, "ListMembers", in: Wire.none, out: Wire.one("members", Wire.ringMembers))
        public static let `continue` = MethodContract(name, "Continue", in: Wire.two("device", Wire.string, "type", Wire.string),
                                                      out: Wire.one("outcome", Wire.string))

        /// Unicast to the caller of Continue.
        public static let documentProgress = SignalContract(
            name, "DocumentProgress", Wire.three("activityType", Wire.string, "received", Wire.uint64, "total", Wire.uint64))

        public static let deviceId = PropertyContract(name, "DeviceId", Wire.string)
        public static let shortId = PropertyContract(name, "ShortId", Wire.string)
        public static let deviceName = PropertyContract(name, "Name", Wire.string)

        public static var members: [MemberContract] {
            [dumpRadio.member, getRadioNotices.member, listMembers.member, `continue`.member, documentProgress.member,
             deviceId.member, shortId.member, deviceName.member]
        }
    }

    /// org.baton.Pairing1 at /org/baton/ring.
    public enum Pairing1: InterfaceContract {
        public static let name = BatonInterface.pairing

        public static let accept = MethodContract(name, "Accept", in: Wire.one("options", Wire.acceptOptions), out: Wire.one("session", Wire.objectPath))
        /// target: HOST:PORT or ble:ADDRESS/PSM.
        public static let pair = MethodContract(name, "Pair", in: Wire.two("target", Wire.string, "options", Wire.pairOptions),
                                                out: Wire.one("session", Wire.objectPath))
        public static let remove = MethodContract(name, "Remove", in: Wire.one("device", Wire.string), out: Wire.none)
        public static let removeWithIntroduced = MethodContract(name, "RemoveWithIntroduced", in: Wire.one("device", Wire.string), out: Wire.none)
        public static let resetIdentity = MethodContract(name, "ResetIdentity", in: Wire.none, out: Wire.one("device", Wire.string))
        public static let listIntroduced = MethodContract(name, "ListIntroduced", in: Wire.one("device", Wire.string),
                                                          out: Wire.one("members", Wire.ringMembers))
        /// seconds: 1-30.
        public static let discover = MethodContract(name, "Discover", in: Wire.one("seconds", Wire.uint32),
                                                    out: Wire.one("endpoints", Wire.pairingEndpoints))

        public static var members: [MemberContract] {
            [accept.member, pair.member, remove.member, removeWithIntroduced.member, resetIdentity.member, listIntroduced.member,
             discover.member]
        }
    }

    /// org.baton.PairingSession1 at /org/baton/ring/pairing/{n}.
    public enum PairingSession1: InterfaceContract {
        public static let name = BatonInterface.pairingSession

        public static let confirm = MethodContract(name, "Confirm", in: Wire.one("accepted", Wire.boolean), out: Wire.none)
        public static let confirmCode = MethodContract(name, "ConfirmCode", in: Wire.one("code", Wire.string), out: Wire.none)
        public static let commit = MethodContract(name, "Commit", in: Wire.none, out: Wire.none)
        public static let cancel = MethodContract(name, "Cancel", in: Wire.none, out: Wire.none)

        public static let state = PropertyContract(name, "State", Wire.string)
        public static let role = PropertyContract(name, "Role", Wire.string)
        public static let code = PropertyContract(name, "Code", Wire.string)
        public static let peerName = PropertyContract(name, "PeerName", Wire.string)
        public static let peerId = PropertyContract(name, "PeerId", Wire.string)
        public static let error = PropertyContract(name, "Error", Wire.string)
        public static let port = PropertyContract(name, "Port", Wire.uint16)
        public static let sessionId = PropertyContract(name, "SessionId", Wire.string)
        public static let peerMembers = PropertyContract(name, "PeerMembers", Wire.stringArray)
        public static let peerRemovals = PropertyContract(name, "PeerRemovals", Wire.raw("a" + PairingSessionProperties.PeerRemoval.signature))
        public static let peerGenerations = PropertyContract(name, "PeerGenerations", Wire.raw("a" + PairingSessionProperties.PeerGeneration.signature))

        public static var members: [MemberContract] {
            [confirm.member, confirmCode.member, commit.member, cancel.member,
             state.member, role.member, code.member, peerName.member, peerId.member, error.member, port.member, sessionId.member,
             peerMembers.member, peerRemovals.member, peerGenerations.member]
        }
    }
}

extension DBusMethod {
    /// An exported method with the contract's name and arguments.
    public init<Arguments, Reply>(_ contract: MethodContract<Arguments, Reply>, budget: DBusArgumentBudget = .standard,
                                  handler: @escaping Handler) {
        self.init(contract.name, in: contract.inArguments, out: contract.outArguments, budget: budget, handler: handler)
    }
}

extension DBusProperty {
    /// An exported read-only property with the contract's name and type.
    public init<Value>(_ contract: PropertyContract<Value>, get: @escaping Getter) {
        self.init(contract.name, signature: contract.signature, access: contract.access, get: get)
    }
}
