// SPDX-License-Identifier: GPL-2.0-or-later
// GIO from Debian's libglib2.0-dev: desktop entries and app launching the way the desktop does it.
#include <gio/gio.h>
#include <gio/gdesktopappinfo.h>
