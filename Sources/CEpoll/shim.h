// SPDX-License-Identifier: LGPL-2.1-or-later
// epoll(7) for BatonReadiness: Swift's Glibc module does not include <sys/epoll.h>.
#include <sys/epoll.h>
