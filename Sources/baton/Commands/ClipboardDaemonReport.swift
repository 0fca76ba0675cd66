// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCommandLine

/// What `baton clipboard status` says from batond's side (Clipboard1.GetStatus): the account's copy
/// on offer, who asked for its types, where its bytes were pasted, what batond holds for it from
/// another machine, and the counts since batond started. So a person can see that nothing of a
/// copy left before a paste on another machine asked for it.
enum ClipboardDaemonReport {
    static func size(_ bytes: UInt64) -> String { bytes == 1 ? "1 byte" : "\(bytes) bytes" }

    static func lines(_ status: ClipboardAccountStatus, busName: String) -> [String] {
        var lines: [String] = []
        let daemon = "batond (\(busName))"
        if !status.registered { lines.append("\(daemon): no agent of yours is registered, so nothing is shared") }
        if let offer = status.offer {
            var line = "\(daemon): offers your \(offer.kind.name) copy for \(offer.expiresIn) s more"
            line += offer.askedBy.isEmpty ? "; no machine asked for it yet" : "; its types were asked for by \(offer.askedBy.joined(separator: ", "))"
            if offer.pastedOn.isEmpty {
                line += "; pasted nowhere (no byte of it left this machine)"
            } else {
                let pastes = offer.pastedOn.map { "\($0.device) (\($0.mediaType), \(size($0.size)))" }
                line += "; pasted on " + pastes.joined(separator: ", ") + (offer.morePastes > 0 ? " and \(offer.morePastes) more" : "")
            }
            lines.append(line)
        } else if status.registered {
            lines.append("\(daemon): offers no copy of yours")
        }
        if let taken = status.taken {
            let total = taken.items.reduce(UInt64(0)) { $0 + $1.size }
            lines.append("\(daemon): holds your \(taken.kind.name) copy from \(taken.device) for \(taken.expiresIn) s more (\(size(total)), fetched only when pasted)")
        }
        lines.append("since batond started: other machines were told the types of your copies \(times(status.offersAnswered)) and took their bytes at \(pastes(status.pastesAnswered))")
        return lines
    }

    private static func times(_ count: UInt64) -> String { count == 1 ? "1 time" : "\(count) times" }
    private static func pastes(_ count: UInt64) -> String { count == 1 ? "1 paste" : "\(count) pastes" }

    static func json(_ status: ClipboardAccountStatus) -> JSONValue {
        func items(_ list: [ClipboardItem]) -> JSONValue {
            .array(list.map { .object([(key: "MediaType", value: .string($0.mediaType)), (key: "Size", value: .integer(Int64(clamping: $0.size)))]) })
        }
        let offer: JSONValue = status.offer.map { offer in
            .object([
                (key: "Kind", value: .string(offer.kind.name)),
                (key: "Items", value: items(offer.items)),
                (key: "ExpiresIn", value: .integer(Int64(offer.expiresIn))),
                (key: "AskedBy", value: .array(offer.askedBy.map { .string($0) })),
                (key: "PastedOn", value: .array(offer.pastedOn.map {
                    .object([(key: "Device", value: .string($0.device)), (key: "MediaType", value: .string($0.mediaType)),
                             (key: "Size", value: .integer(Int64(clamping: $0.size)))])
                })),
                (key: "MorePastes", value: .integer(Int64(clamping: offer.morePastes))),
            ])
        } ?? .null
        let taken: JSONValue = status.taken.map { taken in
            .object([
                (key: "Device", value: .string(taken.device)),
                (key: "Kind", value: .string(taken.kind.name)),
                (key: "Items", value: items(taken.items)),
                (key: "ExpiresIn", value: .integer(Int64(taken.expiresIn))),
            ])
        } ?? .null
        return .object([
            (key: "Registered", value: .boolean(status.registered)),
            (key: "Offer", value: offer),
            (key: "Taken", value: taken),
            (key: "OffersAnswered", value: .integer(Int64(clamping: status.offersAnswered))),
            (key: "PastesAnswered", value: .integer(Int64(clamping: status.pastesAnswered))),
        ])
    }
}
