// SPDX-License-Identifier: GPL-2.0-or-later
// libdbus, only as the reference DBusFuzz checks BatonDBus against (batond does not link it).
#include <dbus/dbus.h>
