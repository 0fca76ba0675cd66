// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// The clipboard's part of the advert (§4.1 bits 4–5): the planner puts the kind in every ring
/// advert from now on; this file only carries its actions out.
extension RadioService: ClipboardAdvert {
    public func setClipboard(_ kind: ClipboardKind?) async {
        await carry(planner.setClipboard(kind, nowSeconds: clock.unixSeconds()))
    }
}
