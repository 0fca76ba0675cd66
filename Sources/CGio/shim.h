// GIO from Debian's libglib2.0-dev: desktop entries and app launching the way the desktop does it.
#include <gio/gio.h>
#include <gio/gdesktopappinfo.h>
