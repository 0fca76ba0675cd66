// SPDX-License-Identifier: LGPL-2.1-or-later
/// The release every executable reports (`--version`) and batond's Manager1 "Version" property.
public enum BatonRelease {
    public static let version = "0.1.0"
}
