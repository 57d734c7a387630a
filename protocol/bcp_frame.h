/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_frame.h - whole frames over a stream socket (TCP or unix).
 *
 * Blocking helpers used by the client library and by tests.  The agent's
 * event loop reads incrementally with bcp_hdr_check() and its own buffers;
 * the rules are the same: a frame longer than the receiver's limit is never
 * read into memory, the connection is closed instead.
 */
#ifndef BCP_FRAME_H
#define BCP_FRAME_H

#include <stddef.h>
#include <sys/uio.h>
#include "bcp_codec.h"

/*
 * Send iov as one frame (the caller encoded it), retrying short writes and
 * EINTR, with MSG_NOSIGNAL.  pass_fd >= 0 rides along with SCM_RIGHTS
 * (unix sockets only) on the first byte.  Returns 0 or -errno.
 */
int bcp_frame_sendv(int sock, const struct iovec *iov, int iovcnt,
		    int pass_fd);
int bcp_frame_send(int sock, const void *buf, size_t len, int pass_fd);

/*
 * Receive one whole frame into buf[cap] (cap bounds the frame).  Returns
 * the frame length (> 0); 0 when the peer closed cleanly between frames;
 * or -errno: -ECONNRESET when it closed mid-frame, -EMSGSIZE/-EPROTO/
 * -EBADMSG from bcp_hdr_check() with *why set.  If fd_out is not NULL it
 * receives a passed descriptor or -1; an unexpected descriptor is closed.
 * timeout_ms < 0 waits forever; on timeout, -ETIMEDOUT.
 */
int bcp_frame_recv(int sock, void *buf, size_t cap, int *fd_out,
		   int timeout_ms, enum bcp_err *why);

/*
 * A buffered reader for a connection that carries many small frames (the
 * client's receiver): one recv takes whatever the peer has sent, however
 * many frames that is, and frames are handed out in place.  buf holds
 * 2 * max bytes so that a frame of up to max always fits behind a partial
 * one.  Descriptors passed with SCM_RIGHTS are discarded.
 */
struct bcp_frame_reader {
	uint8_t *buf;
	size_t max;			/* longest frame accepted */
	size_t start, end;		/* unconsumed bytes: buf[start..end) */
};

int bcp_frame_reader_init(struct bcp_frame_reader *r, size_t max);
void bcp_frame_reader_fini(struct bcp_frame_reader *r);

/*
 * The next whole frame, blocking until it is there: *frame points into
 * the reader's buffer and stays valid until the next call.  Returns as
 * bcp_frame_recv() does (the frame length, 0 at a clean close between
 * frames, or -errno with *why set for a bad header).
 */
int bcp_frame_read(struct bcp_frame_reader *r, int sock,
		   const uint8_t **frame, enum bcp_err *why);

/*
 * Address parsing shared by both programs:
 *   "tcp://HOST[:PORT]" (HOST may be [v6]), "unix:PATH".
 * Returns 0 with *out filled, or -EINVAL with a message in err[errlen].
 */
struct bcp_addr {
	int family;			/* AF_INET, AF_INET6 or AF_UNIX */
	char host[256];			/* tcp: the host as given */
	unsigned short port;		/* tcp */
	char path[108];			/* unix */
};
int bcp_addr_parse(const char *s, struct bcp_addr *out, char *err,
		   size_t errlen);

/* Connect (with timeout) / listen.  Return a socket fd or -errno. */
int bcp_addr_connect(const struct bcp_addr *a, int timeout_ms);
int bcp_addr_listen(const struct bcp_addr *a, int backlog);
/* 1 if a is loopback (127.0.0.0/8, ::1) or a unix socket; else 0 */
int bcp_addr_is_local(const struct bcp_addr *a);

/* The port a listening TCP socket is bound to (after port 0), or -errno. */
int bcp_addr_bound_port(int sock);

/*
 * 1 when a CPU is idle: fewer threads runnable than ncpus, read from the
 * fourth field of /proc/loadavg ("2/345") at fd.  0 when not, or when it
 * cannot be read.  For bounded spinning (doc/performance.md).
 */
int bcp_cpu_idle(int loadavg_fd, unsigned int ncpus);

/* *ts: ms milliseconds from now on CLOCK_MONOTONIC, for a timed wait. */
struct timespec;
void bcp_deadline_ms(struct timespec *ts, unsigned int ms);

#endif /* BCP_FRAME_H */
