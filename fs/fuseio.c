/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuseio.c - the daemon's reads and writes of /dev/fuse, through libfuse's
 * custom I/O hooks, for one purpose: the INIT reply.
 *
 * libfuse before 3.16 never puts FUSE_PARALLEL_DIROPS into its INIT reply,
 * whatever the file system asks for (libfuse pull request 861).  Without
 * it the kernel holds a directory's FUSE lock over every LOOKUP and
 * READDIR in it, so lookups of different names in one directory go to the
 * daemon one at a time: parallel work in a shared directory waits in line,
 * and while the agent is away each request in the line waits out its own
 * timeout after the one before.  Every request handler here is ready for
 * concurrent lookups and listings (they are concurrent across directories
 * already), so the reply gets the flag whenever bcfs_init() asked for
 * it (libfuse lets it ask only for what the kernel offered), on any
 * libfuse.  The hooks otherwise do exactly what libfuse does without
 * them: read(2) and writev(2).
 */
#include "config.h"

#include <linux/fuse.h>
#include <stddef.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bcfs_i.h"

/* the INIT request's unique id while its reply is still to come, else 0 */
static uint64_t bcfs_init_unique;

static ssize_t bcfs_io_read(int fd, void *buf, size_t len, void *userdata)
{
	const struct fuse_in_header *h = buf;
	ssize_t n;

	(void)userdata;
	n = read(fd, buf, len);
	if (n >= (ssize_t)sizeof(*h) && h->opcode == FUSE_INIT)
		__atomic_store_n(&bcfs_init_unique, h->unique,
				 __ATOMIC_RELEASE);
	return n;
}

static ssize_t bcfs_io_writev(int fd, struct iovec *iov, int count,
			      void *userdata)
{
	const struct fuse_out_header *h = iov[0].iov_base;
	uint64_t unique = __atomic_load_n(&bcfs_init_unique, __ATOMIC_ACQUIRE);
	struct fuse_init_out *out;

	(void)userdata;
	if (unique && count >= 2 && iov[0].iov_len >= sizeof(*h) &&
	    h->unique == unique) {
		__atomic_store_n(&bcfs_init_unique, 0, __ATOMIC_RELAXED);
		out = iov[1].iov_base;
		/* libfuse wants only what the kernel offered (capable) */
		if (!h->error && iov[1].iov_len >=
		    offsetof(struct fuse_init_out, flags) + sizeof(out->flags) &&
		    bcfs_g.parallel_dirops)
			out->flags |= FUSE_PARALLEL_DIROPS;
	}
	return writev(fd, iov, count);
}

int bcfs_fuseio_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = bcfs_io_read,
		.writev = bcfs_io_writev,
	};

	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
