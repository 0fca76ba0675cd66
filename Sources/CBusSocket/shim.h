// SPDX-License-Identifier: LGPL-2.1-or-later
// mallopt, malloc_trim: batond's memory policy (BatonService's DaemonMemoryPolicy; BatonDBus uses neither).
#include <malloc.h>
// SCM_RIGHTS for the bus socket (BusSocket): CMSG_* are macros Swift cannot call.
#include <sys/socket.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

/// recvmsg of up to `length` bytes and up to `max_fds` descriptors (close-on-exec); `*fd_count`
/// gets how many arrived. `*truncated` is set when descriptors were lost: the kernel sets
/// MSG_CTRUNC when it could not install them all (the process at its descriptor limit) or the
/// control room was too small; descriptors beyond `max_fds` count as lost too. The caller's room
/// exceeds what the kernel passes in one message (SCM_MAX_FD, 253).
static inline ssize_t baton_recv_with_fds(int socket, void *buffer, size_t length, int *fds, int max_fds, int *fd_count, int *truncated) {
    union { struct cmsghdr header; char room[CMSG_SPACE(sizeof(int) * 256)]; } control;
    struct iovec vector = { .iov_base = buffer, .iov_len = length };
    struct msghdr message = { 0 };
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.room;
    message.msg_controllen = sizeof(control.room);
    *fd_count = 0;
    *truncated = 0;
    ssize_t received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (received < 0) return received;
    if (message.msg_flags & MSG_CTRUNC) *truncated = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        const int *data = (const int *)CMSG_DATA(c);
        for (int i = 0; i < count; i++) {
            if (*fd_count < max_fds) fds[(*fd_count)++] = data[i];
            else { close(data[i]); *truncated = 1; }
        }
    }
    return received;
}

/// sendmsg of `length` bytes with `fd_count` descriptors (at most 253) attached to them.
static inline ssize_t baton_send_with_fds(int socket, const void *buffer, size_t length, const int *fds, int fd_count) {
    union { struct cmsghdr header; char room[CMSG_SPACE(sizeof(int) * 253)]; } control;
    struct iovec vector = { .iov_base = (void *)buffer, .iov_len = length };
    struct msghdr message = { 0 };
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    if (fd_count > 0) {
        if (fd_count > 253) { errno = EINVAL; return -1; }
        memset(&control, 0, sizeof(control));
        message.msg_control = control.room;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)fd_count);
        struct cmsghdr *c = CMSG_FIRSTHDR(&message);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)fd_count);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)fd_count);
    }
    return sendmsg(socket, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
}
