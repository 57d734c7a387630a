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
 * libfuse.
 *
 * Two more for parallel writers of one file, which libfuse 3.14 has no
 * word for either.  An open with O_DIRECT is answered FOPEN_DIRECT_IO
 * with FOPEN_PARALLEL_DIRECT_WRITES (bcfs_reply_open()), so the
 * kernel takes the inode's lock shared, not exclusive, for a direct
 * write within the file's size: writers of different parts of one file
 * each have their request out at once.  That is done only when the INIT
 * reply could carry FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6): with it a
 * direct-I/O descriptor can still be mapped shared, and the kernel
 * writes back the pages another descriptor dirtied before a direct read
 * or write and drops the ones a direct write made old, as it does for
 * O_DIRECT on a cached descriptor (doc/design.md, "Parallel writers of
 * one file").  bcfs_open_direct() (ops_rw.c) chooses those opens.
 *
 * The hooks otherwise do exactly what libfuse does without them: read(2)
 * and writev(2).
 */
#include "config.h"

#include <linux/fuse.h>
#include <stddef.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bcfs_i.h"

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP	(1ULL << 36)
#endif

/* the INIT request's unique id while its reply is still to come, else 0 */
static uint64_t bcfs_init_unique;
/* the INIT request offered FUSE_DIRECT_IO_ALLOW_MMAP (set before the id) */
static int bcfs_init_mmap;
/* FOPEN_* flags the open reply this thread is sending gets on top */
static __thread uint32_t bcfs_open_extra;

static ssize_t bcfs_io_read(int fd, void *buf, size_t len, void *userdata)
{
	const struct fuse_in_header *h = buf;
	ssize_t n;

	(void)userdata;
	n = read(fd, buf, len);
	if (n >= (ssize_t)sizeof(*h) && h->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(h + 1);
		uint64_t flags = 0;

		if ((size_t)n >= sizeof(*h) + sizeof(*in)) {
			flags = in->flags;
			if (in->flags & FUSE_INIT_EXT)
				flags |= (uint64_t)in->flags2 << 32;
		}
		bcfs_init_mmap = in->major == FUSE_KERNEL_VERSION &&
				 !!(flags & FUSE_DIRECT_IO_ALLOW_MMAP);
		__atomic_store_n(&bcfs_init_unique, h->unique,
				 __ATOMIC_RELEASE);
	}
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
		if (!h->error && iov[1].iov_len >= sizeof(*out) &&
		    bcfs_init_mmap && !bcfs_g.o.noparallel_direct) {
			out->flags |= FUSE_INIT_EXT;
			out->flags2 |= (uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >>
						  32);
			__atomic_store_n(&bcfs_g.direct_parallel, 1,
					 __ATOMIC_RELAXED);
		}
	} else if (bcfs_open_extra && count >= 2 &&
		   iov[0].iov_len >= sizeof(*h) && !h->error &&
		   iov[1].iov_len >= sizeof(struct fuse_open_out)) {
		/* OPEN: fuse_open_out; CREATE: fuse_entry_out, then it */
		struct fuse_open_out *o = (void *)((char *)iov[1].iov_base +
				iov[1].iov_len - sizeof(*o));

		o->open_flags |= bcfs_open_extra;
	}
	return writev(fd, iov, count);
}

int bcfs_reply_open(fuse_req_t req, const struct fuse_file_info *fi,
		    const struct fuse_entry_param *e)
{
	int ret;

	bcfs_open_extra = fi->direct_io ? FOPEN_PARALLEL_DIRECT_WRITES : 0;
	ret = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
	bcfs_open_extra = 0;
	return ret;
}

int bcfs_fuseio_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = bcfs_io_read,
		.writev = bcfs_io_writev,
	};

	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
