#include <dbus/dbus.h>
// malloc_trim: BatonDBus gives memory back after refusing an oversized message.
#include <malloc.h>
