// SPDX-License-Identifier: GPL-2.0-or-later
// libxcb and its XFixes extension for BatonX11 (the session clipboard on X11).
#include <xcb/xcb.h>
#include <xcb/xfixes.h>

// The XFixes extension's data (its first event number), without naming the library's mutable
// global from Swift (strict concurrency refuses a reference to a C global variable).
static inline const xcb_query_extension_reply_t *baton_xfixes_extension(xcb_connection_t *connection) {
    return xcb_get_extension_data(connection, &xcb_xfixes_id);
}
