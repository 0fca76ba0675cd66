// SPDX-License-Identifier: LGPL-2.1-or-later
// Clipboard1.GetStatus (`a{sv}`, docs/dbus-api.md "Clipboard"): ClipboardAccountStatus on the bus.
import BatonCore
import BatonDBus

extension Wire {
    public static let clipboardStatus = ValueCoding<ClipboardAccountStatus>("a{sv}", encode: { $0.dbusValue }) {
        value throws(BatonAPIError) in
        guard let entries = value.asDictionary else { return nil }
        return try ClipboardAccountStatus(entries)
    }
}

extension ClipboardAccountStatus {
    /// At most this many askers and pastes are read from a reply (batond keeps 32).
    static let maxListed = 256

    public var dbusValue: DBusValue {
        var status: [String: DBusValue] = [
            "Registered": .boolean(registered), "OffersAnswered": .uint64(offersAnswered), "PastesAnswered": .uint64(pastesAnswered),
        ]
        if let offer {
            status["Offer"] = .propertyDictionary([
                "Kind": .string(offer.kind.name), "Items": Wire.clipboardItems.encode(offer.items), "ExpiresIn": .uint32(offer.expiresIn),
                "AskedBy": .stringArray(offer.askedBy),
                "PastedOn": .array(elementSignature: "(sst)", offer.pastedOn.map { .structure([.string($0.device), .string($0.mediaType), .uint64($0.size)]) }),
                "MorePastes": .uint64(offer.morePastes),
            ])
        }
        if let taken {
            status["Taken"] = .propertyDictionary([
                "Device": .string(taken.device), "Kind": .string(taken.kind.name), "Items": Wire.clipboardItems.encode(taken.items),
                "ExpiresIn": .uint32(taken.expiresIn),
            ])
        }
        return .propertyDictionary(status)
    }

    /// Reads a reply: missing optional keys are absent values; a key of the wrong type is refused.
    init(_ entries: [String: DBusValue]) throws(BatonAPIError) {
        func bad(_ key: String) -> BatonAPIError { .unexpectedReply("Clipboard1.GetStatus \(key) is not what docs/dbus-api.md says") }
        guard let registered = entries["Registered"]?.boolValue else { throw bad("Registered") }
        self.init(registered: registered, offersAnswered: entries["OffersAnswered"]?.uint64Value ?? 0,
                  pastesAnswered: entries["PastesAnswered"]?.uint64Value ?? 0)
        func kindAndItems(_ fields: [String: DBusValue], _ name: String) throws(BatonAPIError) -> (ClipboardKind, [ClipboardItem], UInt32) {
            guard let kindValue = fields["Kind"], let kind = try Wire.clipboardKind.decode(kindValue) else { throw bad("\(name).Kind") }
            guard let itemsValue = fields["Items"], let items = try Wire.clipboardItems.decode(itemsValue) else { throw bad("\(name).Items") }
            guard let expiresIn = fields["ExpiresIn"]?.uint32Value else { throw bad("\(name).ExpiresIn") }
            return (kind, items, expiresIn)
        }
        if let value = entries["Offer"] {
            guard let fields = value.asDictionary else { throw bad("Offer") }
            let (kind, items, expiresIn) = try kindAndItems(fields, "Offer")
            let askedBy = fields["AskedBy"]?.stringArrayValue ?? []
            var pastes: [ClipboardPaste] = []
            for entry in (fields["PastedOn"]?.arrayValue ?? []).prefix(Self.maxListed) {
                guard case .structure(let parts) = entry, parts.count == 3, let device = parts[0].stringValue,
                      let type = parts[1].stringValue, let size = parts[2].uint64Value else { throw bad("Offer.PastedOn") }
                pastes.append(ClipboardPaste(device: device, mediaType: type, size: size))
            }
            offer = Offer(kind: kind, items: items, expiresIn: expiresIn, askedBy: Array(askedBy.prefix(Self.maxListed)), pastedOn: pastes,
                          morePastes: fields["MorePastes"]?.uint64Value ?? 0)
        }
        if let value = entries["Taken"] {
            guard let fields = value.asDictionary, let device = fields["Device"]?.stringValue else { throw bad("Taken") }
            let (kind, items, expiresIn) = try kindAndItems(fields, "Taken")
            taken = Taken(device: device, kind: kind, items: items, expiresIn: expiresIn)
        }
    }
}
