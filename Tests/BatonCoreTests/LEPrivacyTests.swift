// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

@Suite struct LEPrivacyTests {
    /// Read Controller Information's Command Complete for controller `index` with `current` settings
    /// (mgmt-api.txt: address, version, manufacturer, supported and current settings, class, names).
    static func complete(index: UInt16, current: UInt32, status: UInt8 = 0, opcode: UInt16 = 0x0004, cut: Int = 0) -> [UInt8] {
        var parameters: [UInt8] = [UInt8(opcode & 0xFF), UInt8(opcode >> 8), status]
        parameters += [1, 2, 3, 4, 5, 6, 0x09, 0x02, 0x00]              // address, version, manufacturer
        parameters += [0xFF, 0xFF, 0x00, 0x00]                          // supported settings
        parameters += [UInt8(current & 0xFF), UInt8(current >> 8 & 0xFF), UInt8(current >> 16 & 0xFF), UInt8(current >> 24)]
        parameters += [0, 0, 0] + [UInt8](repeating: 0x61, count: 249) + [UInt8](repeating: 0, count: 11)
        parameters.removeLast(cut)
        let length = UInt16(parameters.count)
        return [0x01, 0x00, UInt8(index & 0xFF), UInt8(index >> 8), UInt8(length & 0xFF), UInt8(length >> 8)] + parameters
    }

    @Test func theRequestIsReadControllerInformationForTheIndex() {
        #expect(MgmtControllerInfo.request(index: 0) == [0x04, 0x00, 0x00, 0x00, 0x00, 0x00])
        #expect(MgmtControllerInfo.request(index: 0x0103) == [0x04, 0x00, 0x03, 0x01, 0x00, 0x00])
        #expect(MgmtControllerInfo.index(ofAdapter: "hci0") == 0)
        #expect(MgmtControllerInfo.index(ofAdapter: "hci12") == 12)
        for bad in ["hci", "hci-1", "hcix", "eth0", "hci99999999", "hci１"] { #expect(MgmtControllerInfo.index(ofAdapter: bad) == nil, "\(bad)") }
    }

    @Test func bit13OfTheCurrentSettingsIsPrivacy() throws {
        let powered: UInt32 = 1 << 0 | 1 << 9  // powered, LE
        let on = try #require(MgmtControllerInfo.reply(Self.complete(index: 2, current: powered | 1 << 13), index: 2))
        #expect(on == .settings(powered | 1 << 13))
        #expect(MgmtControllerInfo.setting(of: on) == .on)
        let off = try #require(MgmtControllerInfo.reply(Self.complete(index: 2, current: powered | 1 << 12 | 1 << 14), index: 2))
        #expect(MgmtControllerInfo.setting(of: off) == .off)
    }

    @Test func otherPacketsAreNotTheReply() {
        // Another controller, another command, another event, cut short anywhere: not the reply, no crash.
        #expect(MgmtControllerInfo.reply(Self.complete(index: 1, current: 1 << 13), index: 2) == nil)
        #expect(MgmtControllerInfo.reply(Self.complete(index: 2, current: 1 << 13, opcode: 0x0005), index: 2) == nil)
        var settingsChanged = Self.complete(index: 2, current: 1 << 13)
        settingsChanged[0] = 0x06
        #expect(MgmtControllerInfo.reply(settingsChanged, index: 2) == nil)
        let full = Self.complete(index: 2, current: 1 << 13)
        for length in 0..<full.count { _ = MgmtControllerInfo.reply(Array(full[0..<length]), index: 2) }
        // Short parameters (a length field that says fewer bytes than the settings need).
        #expect(MgmtControllerInfo.reply(Self.complete(index: 2, current: 1 << 13, cut: 263 + 4), index: 2) == nil)
        // The length field claims more than arrived.
        #expect(MgmtControllerInfo.reply(Array(full.dropLast()), index: 2) == nil)
    }

    @Test func aRefusalSaysWhy() throws {
        let invalid = try #require(MgmtControllerInfo.reply(Self.complete(index: 7, current: 0, status: 0x11), index: 7))
        #expect(invalid == .failed(status: 0x11))
        guard case .unknown(let why) = MgmtControllerInfo.setting(of: invalid) else { Issue.record("not unknown"); return }
        #expect(why.contains("no such controller"))
        // Command Status (failure without return parameters).
        let status: [UInt8] = [0x02, 0x00, 0x07, 0x00, 0x03, 0x00, 0x04, 0x00, 0x14]
        #expect(MgmtControllerInfo.reply(status, index: 7) == .failed(status: 0x14))
        guard case .unknown(let refused) = MgmtControllerInfo.setting(of: .failed(status: 0x14)) else { Issue.record("not unknown"); return }
        #expect(refused.contains("0x14"))
    }

    @Test func theFactWarnsOnlyWhenConnectableAdvertsComeFromThePublicAddress() {
        for connectable in [ConnectableAdverts.none, .pairing, .ringAdvert] {
            let on = LEPrivacyFact.assess(.on, connectable: connectable)
            #expect(on.word == .on && on.detail == nil && !on.needsFix)
        }
        let quiet = LEPrivacyFact.assess(.off, connectable: .none)
        #expect(quiet.word == .off && quiet.detail == nil && !quiet.needsFix)

        let pairing = LEPrivacyFact.assess(.off, connectable: .pairing)
        #expect(pairing.word == .off && pairing.needsFix)
        #expect(pairing.detail?.contains("pairing advert") == true && pairing.detail?.contains("public address") == true)
        let ring = LEPrivacyFact.assess(.off, connectable: .ringAdvert)
        #expect(ring.word == .off && ring.needsFix)
        #expect(ring.detail?.contains("ring advert is connectable") == true)
        for fact in [pairing, ring] {
            #expect(fact.detail?.hasSuffix("; " + LEPrivacyFact.fix) == true)
            #expect(fact.detail?.contains("Privacy = device") == true && fact.detail?.contains("/etc/bluetooth/main.conf") == true)
            #expect(fact.detail?.contains("restart bluetooth") == true)
        }

        let unknown = LEPrivacyFact.assess(.unknown("the kernel did not answer within 2000 ms"), connectable: .ringAdvert)
        #expect(unknown.word == .unknown && !unknown.needsFix)
        #expect(unknown.detail?.contains("the kernel did not answer") == true)
    }
}
