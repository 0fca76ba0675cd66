// SPDX-License-Identifier: LGPL-2.1-or-later
/// One scanner report, classified once (§4.3): what the matcher, the suggestions, the pairing
/// list and the diagnostics table all start from. Only `ringMember` names a member: a replayed or
/// forged advert that carries a member's tag is never shown as that member.
public enum HeardAdvert: Hashable, Sendable {
    /// An accepted ring advert (it opened under a member's keys and passed the replay rules).
    case ringMember(Sighting)
    /// A ring advert with a member's tag that did not open, or opened but was refused (stale
    /// epoch, replayed or conflicting sequence, stale revision). On a 48-bit tag collision that
    /// opened under nobody, the member is the first one with that tag.
    case ringRefused(taggedMember: DeviceID, reason: WireError)
    /// A ring advert of another ring: no member's tag.
    case otherRing
    /// A clear pairing advert (§5).
    case pairing(PairingAdvert)
    /// A pairing advert whose fields do not decode.
    case malformedPairing(WireError)
    /// Under Baton's company ID, but not a Baton advert (length, version or kind).
    case malformedBaton(WireError)
    /// No Baton manufacturer data: named by company ID and service UUIDs only.
    case foreign(AdvertiserKind)

    /// How the diagnostics table shows it. Kinds are unchanged from before the single pass, except
    /// that a refused advert with a member's tag shows as another ring's, not as the member.
    public func advertiserKind(batonCompanyID: UInt16) -> AdvertiserKind {
        switch self {
        case .ringMember(let sighting): .ringMember(sighting.member)
        case .ringRefused, .otherRing, .malformedPairing: .foreignBaton
        case .pairing(let advert): .batonPairing(name: advert.name)
        case .malformedBaton: .other(companyID: batonCompanyID)
        case .foreign(let kind): kind
        }
    }

    /// The refusal to count in diagnostics; nil for accepted, foreign and other rings' adverts
    /// (those are the common case and say nothing about this ring).
    public var ringRefusal: WireError? {
        if case .ringRefused(_, let reason) = self { reason } else { nil }
    }
}

extension AdvertMatcher {
    /// Classifies a report and, for a ring advert with a member's tag, opens it once and applies
    /// the replay rules (an accepted advert updates the replay state, as `receive` does).
    public mutating func hear(_ report: AdvertisementReport, batonCompanyID: UInt16) -> HeardAdvert {
        guard let data = report.manufacturerData[batonCompanyID] else {
            let companyID = report.manufacturerData.keys.min()
            return .foreign(AdvertiserKind.classify(companyID: companyID, batonCompanyID: batonCompanyID,
                                                    manufacturerData: companyID.flatMap { report.manufacturerData[$0] },
                                                    serviceUUIDs: report.serviceUUIDs))
        }
        let kind: AdvertKind
        do throws(WireError) { kind = try AdvertKind.classify(data) } catch { return .malformedBaton(error) }
        switch kind {
        case .pairing:
            do throws(WireError) { return .pairing(try PairingAdvert(decoding: data)) } catch { return .malformedPairing(error) }
        case .ring:
            switch judgeRing(data) {
            case .success(let sighting): return .ringMember(sighting)
            case .failure(let refusal):
                guard let member = refusal.taggedMember else { return .otherRing }
                return .ringRefused(taggedMember: member, reason: refusal.reason)
            }
        }
    }
}
