// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.Ring1: members, the radio's diagnostics, Continue by hand.
extension RingBus {
    func ring1Interface() -> DBusInterface {
        let ring = self.ring
        return DBusInterface(BatonInterface.ring, methods: [
            DBusMethod(OrgBaton.Ring1.dumpRadio) { call in
                let format = call.arguments.first?.stringValue ?? ""
                return [.string(try await mappingFailures { () throws(ServiceFailure) in try await ring.radio.dumpRadio(format: format) })]
            },
            DBusMethod(OrgBaton.Ring1.getRadioNotices) { _ in
                [.stringArray(await ring.radio.notices())]
            },
            DBusMethod(OrgBaton.Ring1.listMembers) { _ in
                [.array(elementSignature: "a{sv}", await ring.memberSummaries().map { Self.ringMember($0).dbusValue })]
            },
            DBusMethod(OrgBaton.Ring1.continue) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.requireRingUser(call.sender)
                guard call.arguments.count == 2, let device = call.arguments[0].stringValue, let type = call.arguments[1].stringValue else {
                    throw DBusError(ServiceFailure.invalidArguments("Continue takes (s device, s type)"))
                }
                guard let continuation = self.continuation else { throw DBusError(ServiceFailure.notReady("the transfer is not running")) }
                return [.string(try await mappingFailures { () throws(ServiceFailure) in
                    try await continuation.continueActivity(from: device, type: type, uid: uid, caller: call.sender)
                })]
            },
        ], properties: [
            DBusProperty(OrgBaton.Ring1.deviceId) { .string(await ring.snapshot().deviceID.description) },
            DBusProperty(OrgBaton.Ring1.shortId) { .string(await ring.snapshot().deviceID.shortForm) },
            DBusProperty(OrgBaton.Ring1.deviceName) { .string(await ring.snapshot().name) },
        ], signals: [
            OrgBaton.Ring1.documentProgress.description,
        ])
    }

    /// One ListMembers entry, in BatonAPI's coding (the one the client decodes).
    static func ringMember(_ member: MemberSummary) -> RingMember {
        let id = member.deviceID
        return RingMember(name: member.name, deviceID: id.description, shortID: id.shortForm, isSelf: member.isSelf,
                          pairedSince: member.peer?.pairedSince, lastSeen: member.peer?.lastSeen,
                          lastRSSI: member.peer?.lastRSSI.map { Int16(clamping: $0) }, endpoints: member.peer?.endpoints,
                          introducedBy: member.introducedBy?.shortForm,
                          introducerRemoved: member.introducedBy == nil ? nil : member.introducerRemoved)
    }
}
