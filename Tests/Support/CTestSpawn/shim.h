// SPDX-License-Identifier: GPL-2.0-or-later
// Test support only: glibc (2.34+) has posix_spawn_file_actions_addclosefrom_np, but declares it
// only under _GNU_SOURCE, which the Glibc module Swift imports is not built with; declared here.
#ifndef BATON_CTESTSPAWN_H
#define BATON_CTESTSPAWN_H
#include <spawn.h>

extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

/// Closes every descriptor from `from` up in the child (what Foundation's Process cannot promise).
static inline int baton_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
#endif
