// SPDX-License-Identifier: LGPL-2.1-or-later
/// What an advertiser heard on the air is, for diagnostics (`baton diag rssi`).
public enum AdvertiserKind: Hashable, Sendable {
    case ringMember(DeviceID)
    case foreignBaton
    case batonPairing(name: String)
    case appleContinuity
    case microsoftCDP
    case googleFastPair
    case other(companyID: UInt16?)

    /// Classifies by company ID and service UUIDs, no keys needed. Ring members are decided
    /// by the matcher, not here.
    public static func classify(companyID: UInt16?, batonCompanyID: UInt16, manufacturerData: [UInt8]?,
                                serviceUUIDs: [String]) -> AdvertiserKind {
        if let companyID, companyID == batonCompanyID, let data = manufacturerData,
           let kind = try? AdvertKind.classify(data) {
            if kind == .pairing, let advert = try? PairingAdvert(decoding: data) { return .batonPairing(name: advert.name) }
            return .foreignBaton
        }
        if serviceUUIDs.contains(where: { $0.lowercased().hasPrefix("0000fe2c") }) { return .googleFastPair }
        switch companyID {
        case 0x004C: return .appleContinuity
        case 0x0006: return .microsoftCDP
        default: return .other(companyID: companyID)
        }
    }
}
