// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers

/// GNOME's Mutter keeps a copy of the clipboard (its "clipboard manager", src/core/meta-clipboard-
/// manager.c): whenever CLIPBOARD gets a new owner, Wayland or X11, Mutter at once reads one type
/// of it, the one it prefers of a fixed list (text before images; text up to 4 MB, images up to
/// 200 MB in Mutter 43), and when the owner goes away it becomes the owner itself with those bytes.
/// For an offer of the agent that would pull a copy from the machine that made it at every copy
/// (no longer at the paste), and keep it on the clipboard after the agent withdrew it (expired, or
/// changed at its machine), where the agent would even see it as a new copy.
///
/// Mutter asks an X11 owner in a fixed order: TARGETS (to learn the types, before the owner counts
/// as new), then, within the same turn of its loop, the manager's read; a Wayland app's paste can
/// only come later (it learns of the new owner in that same turn). So with
/// `X11SessionClipboard.Configuration.mutterXWayland` the first content request by
/// the X client that made the first TARGETS request of an offer (Mutter: each of its requests has a
/// window of its own, all of its connection) is refused when its type is one the manager keeps:
/// Mutter then keeps nothing, and a paste is asked of the agent as the owner. (Checked against
/// Mutter 43.8 and GNOME Shell 43.9 by X11GnomeSessionTests.)
enum MutterClipboardManager {
    /// Where an offer stands.
    enum Stage: Equatable {
        /// No TARGETS request yet since the offer took the clipboard.
        case awaitingTargets
        /// TARGETS was asked by this X client (a requestor's resource id without the bits the client
        /// chooses): its next content request is the manager's, when its type is one the manager keeps.
        case awaitingRead(client: UInt32)
        /// That request came.
        case done
    }

    /// The media types Mutter 43's clipboard manager keeps (its list of supported types).
    static let keptTypes: Set<String> = [
        "image/tiff", "image/bmp", "image/gif", "image/jpeg", "image/webp", "image/png", "image/svg+xml",
        "text/plain", ClipboardTypes.text,
    ]

    static func keeps(_ type: String) -> Bool { keptTypes.contains(type) }

    /// Mutter's copy of a secret copy: when the owner of a copy goes away (a password manager that
    /// clears the clipboard by giving it up, or exits), Mutter makes its kept copy the owner, with
    /// the one type it read and without the secrecy marker (`x-kde-passwordManagerHint`), so the
    /// password would look like an ordinary copy. The manager keeps only the newest owner's copy,
    /// so such a copy can only be the change right after the secret one. That change counts as
    /// secret when its content targets are among the secret copy's (`secret`: nil when the change
    /// before was not secret). An ordinary copy right after a secret one with no other types is
    /// counted as secret too: failing closed, once.
    static func isRestoreOfSecret(_ targets: Set<String>, after secret: Set<String>?) -> Bool {
        guard let secret, !targets.isEmpty else { return false }
        return targets.isSubset(of: secret)
    }
}
