// SPDX-License-Identifier: LGPL-2.1-or-later
// memfd_create(2), file seals (fcntl F_ADD_SEALS/F_GET_SEALS), copy_file_range(2) and fstatfs(2) for
// BatonSystem: Swift's Glibc module declares none of them (they need _GNU_SOURCE).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/vfs.h>

/// A memory file that can be sealed, closed on exec.
static inline int baton_memfd_create(const char *name) { return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING); }

/// Seals what makes the bytes immutable: no write, no shrink, no grow, no further seal change.
static inline int baton_memfd_seal(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

/// 1 when write, shrink and grow are sealed (the bytes can no longer change), 0 when not, -1 when the
/// descriptor is no sealable file.
static inline int baton_memfd_is_immutable(int fd) {
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) return -1;
    int wanted = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    return (seals & wanted) == wanted ? 1 : 0;
}

/// copy_file_range(2) from `in` at *in_offset to `out` at its file position; bytes copied, or -1.
static inline long baton_copy_file_range(int in, long long *in_offset, int out, unsigned long count) {
    off64_t offset = *in_offset;
    ssize_t copied = copy_file_range(in, &offset, out, NULL, count, 0);
    *in_offset = offset;
    return copied;
}

/// fstatfs(2)'s f_type: the kind of file system `fd` is on (PROC_SUPER_MAGIC...), or -1.
static inline long long baton_file_system_type(int fd) {
    struct statfs status;
    return fstatfs(fd, &status) == 0 ? (long long)status.f_type : -1;
}
