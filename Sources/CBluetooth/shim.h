// SPDX-License-Identifier: GPL-2.0-or-later
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>
