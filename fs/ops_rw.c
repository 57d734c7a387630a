/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops_rw.c - open files and their data: open, create, read, write(_buf),
 * release, fsync, fallocate, lseek and copy_file_range.
 *
 * Writes are with the agent before they are acknowledged, except those a
 * file this mount created gathers (wb.c): only its descriptors ask for
 * FLUSH at close, every other open says FOPEN_NOFLUSH.
 *
 * The data path never waits per request: a read or write takes pool
 * memory (bcp_client_io_get), becomes one or more struct bcp_io handed to
 * the client library, and returns.  The library's receiver thread calls
 * bcfs_rw_done() for each piece; the last one replies to the kernel and
 * gives the memory back.  Requests fit one piece unless the pool hands out
 * less than max_write at once; then they are split (bcfs_g.chunk).  The
 * contexts are preallocated: a FUSE thread blocks only when BCFS_RW_CTX
 * requests are already in flight, or while the pool is exhausted.
 *
 * Page cache: close-to-open.  An open keeps the cached pages only when the
 * file's mtime and size are those seen at the previous open (inode.c); a
 * writer's release records the attributes its own writes produced.  With
 * an agent that tells of changes (notify.c), attributes are cached for
 * long, so an open also waits until the kernel was told every change the
 * agent reported before answering it: the size it reads up to is current.
 *
 * Locks: bcfs.rw_lock (context free list); bcfs_rw_split_lock is taken
 * before it and only while a split request collects its pieces, so that
 * two split requests never each hold part of the pool waiting for the rest.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "bcfs_i.h"

#define BCFS_CHUNK_MIN	4096u

static pthread_mutex_t bcfs_rw_split_lock = PTHREAD_MUTEX_INITIALIZER;

int bcfs_rw_init(void)
{
	struct bcfs_rw *all;
	unsigned int i;
	int ret;

	all = calloc(BCFS_RW_CTX, sizeof(*all));
	if (!all)
		return -ENOMEM;
	ret = -pthread_mutex_init(&bcfs_g.rw_lock, NULL);
	if (ret)
		goto out_free_all;
	ret = -pthread_cond_init(&bcfs_g.rw_cond, NULL);
	if (ret)
		goto out_destroy_lock;
	for (i = 0; i < BCFS_RW_CTX; i++) {
		all[i].next = bcfs_g.rw_free;
		bcfs_g.rw_free = &all[i];
	}
	bcfs_g.rw_all = all;
	bcfs_g.chunk = BCFS_IO_MAX;
	return 0;

out_destroy_lock:
	pthread_mutex_destroy(&bcfs_g.rw_lock);
out_free_all:
	free(all);
	return ret;
}

void bcfs_rw_fini(void)
{
	if (!bcfs_g.rw_all)
		return;
	pthread_cond_destroy(&bcfs_g.rw_cond);
	pthread_mutex_destroy(&bcfs_g.rw_lock);
	free(bcfs_g.rw_all);
	bcfs_g.rw_all = NULL;
	bcfs_g.rw_free = NULL;
}

static struct bcfs_rw *bcfs_rw_get(void)
{
	struct bcfs_rw *rw;

	pthread_mutex_lock(&bcfs_g.rw_lock);
	while (!bcfs_g.rw_free)
		pthread_cond_wait(&bcfs_g.rw_cond, &bcfs_g.rw_lock);
	rw = bcfs_g.rw_free;
	bcfs_g.rw_free = rw->next;
	pthread_mutex_unlock(&bcfs_g.rw_lock);
	return rw;
}

static void bcfs_rw_put(struct bcfs_rw *rw)
{
	unsigned int i;

	for (i = 0; i < rw->nchunks; i++)
		bcp_client_io_put(bcfs_g.client, rw->io[i]);
	rw->nchunks = 0;
	pthread_mutex_lock(&bcfs_g.rw_lock);
	rw->next = bcfs_g.rw_free;
	bcfs_g.rw_free = rw;
	pthread_cond_signal(&bcfs_g.rw_cond);
	pthread_mutex_unlock(&bcfs_g.rw_lock);
}

/*
 * Pool memory for len bytes.  When the pool cannot give that much at once,
 * halve bcfs_g.chunk (down to BCFS_CHUNK_MIN) and return NULL: the caller
 * starts over with smaller pieces.
 */
static struct bcp_io *bcfs_io_get(size_t len)
{
	struct bcp_io *io;
	uint32_t chunk;

	io = bcp_client_io_get(bcfs_g.client, len);
	if (io || len <= BCFS_CHUNK_MIN)
		return io;
	chunk = __atomic_load_n(&bcfs_g.chunk, __ATOMIC_RELAXED);
	if (len / 2 < chunk) {
		__atomic_store_n(&bcfs_g.chunk, (uint32_t)(len / 2),
				 __ATOMIC_RELAXED);
		bcfs_info("the pool gives less than %zu bytes at once: "
			  "larger requests are split", len);
	}
	return NULL;
}

/*
 * Split size bytes at off into pieces and take pool memory for them.
 * Returns 0, or -errno with nothing held.
 */
static int bcfs_rw_prepare(struct bcfs_rw *rw, uint16_t op, uint64_t fh,
			   size_t size, off_t off)
{
	struct bcp_io *io;
	size_t done = 0, len;
	uint32_t chunk;
	int split = 0, ret;

retry:
	chunk = __atomic_load_n(&bcfs_g.chunk, __ATOMIC_RELAXED);
	if (size > chunk && !split) {
		pthread_mutex_lock(&bcfs_rw_split_lock);
		split = 1;
	}
	while (done < size) {
		len = size - done;
		if (len > chunk)
			len = chunk;
		if (rw->nchunks == BCFS_RW_CHUNKS) {
			ret = -EIO;	/* more than max_write: never */
			goto out_put;
		}
		io = bcfs_io_get(len);
		if (!io) {
			ret = -ENOTCONN;	/* shutting down */
			if (__atomic_load_n(&bcfs_g.chunk, __ATOMIC_RELAXED) >=
			    chunk)
				goto out_put;
			/* the chunk shrank: start over with smaller pieces */
			while (rw->nchunks)
				bcp_client_io_put(bcfs_g.client,
						  rw->io[--rw->nchunks]);
			done = 0;
			goto retry;
		}
		io->op = op;
		io->fh = fh;
		io->offset = off + done;
		io->length = len;
		io->priv = rw;
		rw->result[rw->nchunks] = 0;
		rw->io[rw->nchunks++] = io;
		done += len;
	}
	if (split)
		pthread_mutex_unlock(&bcfs_rw_split_lock);
	return 0;

out_put:
	while (rw->nchunks)
		bcp_client_io_put(bcfs_g.client, rw->io[--rw->nchunks]);
	if (split)
		pthread_mutex_unlock(&bcfs_rw_split_lock);
	return ret;
}

/* Bytes moved by the whole request: pieces up to the first short one. */
static ssize_t bcfs_rw_total(const struct bcfs_rw *rw, unsigned int *npieces)
{
	ssize_t total = 0;
	unsigned int i;

	for (i = 0; i < rw->nchunks; i++) {
		if (rw->result[i] < 0) {
			if (!i)
				return rw->result[i];
			break;
		}
		total += rw->result[i];
		if ((uint32_t)rw->result[i] < rw->io[i]->length) {
			i++;
			break;
		}
	}
	*npieces = i;
	return total;
}

/* Runs on the client library's receiver thread: must not block. */
static void bcfs_rw_done(struct bcp_io *io, int32_t result)
{
	struct iovec iov[BCFS_RW_CHUNKS];
	struct bcfs_rw *rw = io->priv;
	unsigned int i, n = 0;
	ssize_t total;

	for (i = 0; i < rw->nchunks; i++)
		if (rw->io[i] == io)
			rw->result[i] = result > (int32_t)io->length ?
					-EIO : result;
	if (__atomic_sub_fetch(&rw->pending, 1, __ATOMIC_ACQ_REL))
		return;
	total = bcfs_rw_total(rw, &n);
	if (total >= 0 && (size_t)total < rw->whole) {
		bcfs_dbg("writing back %zu bytes at %" PRIu64 ": the agent "
			 "wrote %zd", rw->whole, rw->io[0]->offset, total);
		total = -EIO;
	}
	bcfs_metrics_rw(rw->write, total, rw->t0);
	if (rw->write)
		bcfs_peek_dirty();	/* it may have reached the file now */
	else
		bcfs_dattr_files();	/* its atime may have moved */
	if (total < 0) {
		bcfs_reply_status(rw->req, (int)total);
	} else if (rw->write) {
		fuse_reply_write(rw->req, total);
	} else {
		for (i = 0; i < n; i++) {
			iov[i].iov_base = rw->io[i]->buf;
			iov[i].iov_len = rw->result[i];
		}
		fuse_reply_iov(rw->req, iov, n);
	}
	bcfs_rw_put(rw);
}

static void bcfs_rw_submit(struct bcfs_rw *rw)
{
	unsigned int i, n = rw->nchunks;
	struct bcp_io *io[BCFS_RW_CHUNKS];

	/* done() may run before submit returns and free rw */
	memcpy(io, rw->io, n * sizeof(io[0]));
	rw->t0 = bcfs_now_ns();
	__atomic_store_n(&rw->pending, n, __ATOMIC_RELEASE);
	for (i = 0; i < n; i++) {
		io[i]->done = bcfs_rw_done;
		bcp_client_submit(bcfs_g.client, io[i]);
	}
}

void bcfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct bcfs_rw *rw;
	int ret;

	if (!size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (bcfs_peek_read(req, fi->fh, size, off))
		return;
	bcfs_wb_flush(bcfs_handle(ino), 0);
	rw = bcfs_rw_get();
	rw->req = req;
	rw->write = 0;
	rw->whole = 0;
	ret = bcfs_rw_prepare(rw, BCP_OP_BATCH_PULL, fi->fh, size, off);
	if (ret) {
		bcfs_rw_put(rw);
		bcfs_reply_status(req, ret);
		return;
	}
	bcfs_rw_submit(rw);
}

/*
 * The kernel takes an O_APPEND write's offset from the size it holds, and
 * news of a change made elsewhere drops its attributes without giving it
 * the new size: the append would land on what the other writer wrote.
 * From such news on (bcfs_inode_size_behind()), an append asks the agent
 * where the file ends and goes there when that is past the kernel's
 * offset (never before it: this mount's own writes may still be on the
 * way), and the kernel's pages from its offset on are dropped once it has
 * let go of them (the NOTIFY queued here), which also keeps the next
 * append asking; once the kernel's size is found right (a stat refreshed
 * it), appends go where the kernel says again.  The kernel holds the
 * inode's lock over each append, so this mount's appends to a file come
 * one at a time; two made at the same moment on two hosts may still meet,
 * as on NFS.
 */
static off_t bcfs_append_at(fuse_ino_t ino, uint64_t fh, off_t off)
{
	uint64_t handle = bcfs_handle(ino), gen = 0;
	struct bcp_msg m, r;

	if (!bcfs_inode_size_behind(handle, &gen))
		return off;
	bcfs_msg(&m, BCP_OP_GETATTR);
	m.u.node_req.handle = handle;
	m.u.node_req.fh = fh;
	if (bcfs_call(&m, &r))
		return off;	/* the write finds out what is wrong */
	if (r.u.attr_rep.attr.size <= (uint64_t)off) {
		bcfs_inode_size_right(handle, gen);
		return off;
	}
	bcfs_dbg("an append at %lld goes to the end at %llu", (long long)off,
		 (unsigned long long)r.u.attr_rep.attr.size);
	bcfs_notify_self(handle, off);
	return (off_t)r.u.attr_rep.attr.size;
}

void bcfs_op_write_buf(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_bufvec *bufv, off_t off,
		       struct fuse_file_info *fi)
{
	size_t size = fuse_buf_size(bufv);
	struct bcfs_rw *rw;
	unsigned int i;
	ssize_t got;
	int ret;

	if (!size) {
		fuse_reply_write(req, 0);
		return;
	}
	bcfs_peek_dirty();
	/* pages the kernel writes back (mmap) go straight through */
	if (bcfs_wb_write(req, bcfs_handle(ino), fi->fh,
			  fi->writepage || (fi->flags & (O_APPEND | O_SYNC |
							 O_DSYNC | O_DIRECT)),
			  bufv, size, off))
		return;
	if ((fi->flags & O_APPEND) && !fi->writepage && !bcfs_g.o.writeback)
		off = bcfs_append_at(ino, fi->fh, off);
	rw = bcfs_rw_get();
	rw->req = req;
	rw->write = 1;
	/*
	 * A page the kernel writes back is done with whatever the count:
	 * the rest of a short write (the store filled up meanwhile) would
	 * be lost without a word.
	 */
	rw->whole = fi->writepage ? size : 0;
	ret = bcfs_rw_prepare(rw, BCP_OP_BATCH_PUSH, fi->fh, size, off);
	if (ret)
		goto out_put;
	for (i = 0; i < rw->nchunks; i++) {
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(rw->io[i]->length);

		dst.buf[0].mem = rw->io[i]->buf;
		got = fuse_buf_copy(&dst, bufv, 0);
		if (got != (ssize_t)rw->io[i]->length) {
			ret = got < 0 ? (int)got : -EIO;
			goto out_put;
		}
	}
	bcfs_rw_submit(rw);
	return;

out_put:
	bcfs_rw_put(rw);
	bcfs_reply_status(req, ret);
}

void bcfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		   size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec src = FUSE_BUFVEC_INIT(size);

	src.buf[0].mem = (void *)buf;
	bcfs_op_write_buf(req, ino, &src, off, fi);
}

/* O_* flags the agent opens its file with (O_DIRECT: past its caches). */
static uint32_t bcfs_open_flags(int flags)
{
	flags &= O_ACCMODE | O_APPEND | O_SYNC | O_DSYNC | O_TRUNC | O_DIRECT;
	if (bcfs_g.o.writeback) {
		/* the kernel reads to fill partial pages, and appends itself */
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags;
}

/*
 * Close the agent's file; nobody waits for the answer, and any thread may
 * (the receiver too).  A failure is the agent's to log: the file is
 * closed with the session at the latest.
 */
void bcfs_release_fh(uint64_t handle, uint64_t fh)
{
	struct bcp_msg m;

	bcfs_open_del(fh);
	bcfs_peek_release(fh);
	bcfs_msg(&m, BCP_OP_RELEASE);
	m.u.node_req.handle = handle;
	m.u.node_req.fh = fh;
	bcp_client_post(bcfs_g.client, &m);
}

/*
 * An O_DIRECT open of a regular file of mode (0: not known) as direct
 * I/O, whose writes within the file's size the kernel then lets run in
 * parallel (fuseio.c; not under -o writeback).  Only for a file a write
 * takes no privileges from: the kernel's page cache path clears set-ID
 * bits and removes security.capability at a write by a writer without
 * CAP_FSETID, where a direct-I/O write only says so in a flag libfuse
 * 3.14 drops.  So no set-ID bits, and security.capability known absent:
 * ask (not from the receiver) asks the agent when it is not known.
 */
static void bcfs_open_direct(struct fuse_file_info *fi, uint64_t handle,
			     uint32_t mode, int ask)
{
	if ((fi->flags & O_DIRECT) && !bcfs_g.o.writeback && S_ISREG(mode) &&
	    !(mode & (S_ISUID | S_ISGID)) &&
	    __atomic_load_n(&bcfs_g.direct_parallel, __ATOMIC_RELAXED) &&
	    bcfs_xattr_cap_absent(handle, ask))
		fi->direct_io = 1;
}

static void bcfs_answer_open(struct bcfs_acall *a, int result)
{
	if (result) {
		bcfs_reply_status(a->req, result);
		return;
	}
	a->fi.fh = a->call.rep.u.open_rep.fh;
	if (a->fi.flags & O_TRUNC)
		bcfs_dattr_files();	/* its size and times moved */
	/* before the kernel has it: its release may come at once */
	bcfs_open_add(a->fi.fh, a->parent, bcfs_open_flags(a->fi.flags), 0);
	bcfs_open_direct(&a->fi, a->parent, a->call.rep.u.open_rep.attr.ino ?
			 a->call.rep.u.open_rep.attr.mode : 0, 0);
	if (bcfs_reply_open(a->req, &a->fi, NULL))
		bcfs_release_fh(a->parent, a->fi.fh);
}

void bcfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	uint64_t handle = bcfs_handle(ino);
	uint64_t fh, ngen, wgen = 0;
	struct bcfs_acall *a;
	struct bcp_msg m, r;
	struct bcp_attr attr;
	int ret, first, slot = -1, have_attr = 0;

	/* a file gathering writes sends them now, and from now on at once */
	bcfs_wb_flush(handle, BCFS_WB_END);
	fi->noflush = 1;
	bcfs_msg(&m, BCP_OP_OPEN);
	m.u.open_req.handle = handle;
	m.u.open_req.flags = bcfs_open_flags(fi->flags);
	/*
	 * O_DIRECT is the kernel's to serve, as direct I/O (fi->direct_io)
	 * only where it writes back the pages another descriptor dirtied
	 * before a direct read or write and drops those a direct write made
	 * old, as a local filesystem (bcfs_open_direct(), fuseio.c).
	 */
	first = bcfs_inode_open_first(handle);
	if (first && !(bcfs_g.features & BCP_FEAT_NOTIFY)) {
		/* no cached page to judge: answered from the reply */
		a = bcfs_acall_get();
		a->parent = handle;
		a->fi = *fi;
		bcfs_acall_send(a, req, &m, bcfs_answer_open);
		return;
	}
	/* a small file comes whole with its first open for reading */
	if (first && (fi->flags & O_ACCMODE) == O_RDONLY &&
	    !(fi->flags & (O_DIRECT | O_TRUNC))) {
		slot = bcfs_peek_take();
		if (slot >= 0) {
			m.u.open_req.peek = BCP_OPEN_PEEK_MAX;
			wgen = bcfs_peek_wgen();
		}
	}
	ngen = bcfs_notify_gen();
	ret = bcfs_call(&m, &r);
	/* a truncate, or a read of the file (atime) at the agent */
	if ((fi->flags & O_TRUNC) || slot >= 0)
		bcfs_dattr_files();
	if (ret) {
		bcfs_peek_put(slot);
		bcfs_reply_status(req, ret);
		return;
	}
	fh = r.u.open_rep.fh;
	fi->fh = fh;
	if (r.u.open_rep.attr.ino) {
		attr = r.u.open_rep.attr;
		have_attr = 1;
	}
	if (slot >= 0 && (r.u.open_rep.open_flags & BCP_OPEN_DATA) &&
	    have_attr && attr.size == r.data_len)
		bcfs_peek_fill(slot, fh, handle, ngen, wgen, r.data,
			       r.data_len);
	else
		bcfs_peek_put(slot);
	/*
	 * Known as open before anything else is asked: a connection lost
	 * during the GETATTR below must find it to reopen on the new one.
	 */
	bcfs_open_add(fh, handle, bcfs_open_flags(fi->flags), 0);
	/* close-to-open: keep the pages only if nothing changed */
	if (!first && !have_attr) {
		bcfs_msg(&m, BCP_OP_GETATTR);
		m.u.node_req.handle = handle;
		m.u.node_req.fh = fh;
		if (!bcfs_call(&m, &r)) {
			attr = r.u.attr_rep.attr;
			have_attr = 1;
		}
	}
	if (first && have_attr)
		bcfs_inode_open_update(handle, &attr);
	else if (have_attr && bcfs_inode_open_check(handle, &attr))
		fi->keep_cache = 1;
	/*
	 * Cached for long, the size the kernel holds may be older than
	 * what the agent said before answering: a change told before the
	 * answer reaches the kernel before the open does.
	 */
	if (bcfs_g.features & BCP_FEAT_NOTIFY)
		bcfs_notify_sync();
	bcfs_open_direct(fi, handle, have_attr ? attr.mode : 0, 1);
	if (bcfs_reply_open(req, fi, NULL))
		bcfs_release_fh(handle, fh);
}

static void bcfs_answer_create(struct bcfs_acall *a, int result)
{
	const struct bcp_create_rep *c = &a->call.rep.u.create_rep;
	struct fuse_file_info *fi = &a->fi;
	struct fuse_entry_param e;
	int ret;

	bcfs_dattr_end(a->dir, a->dticket, result ? NULL : &c->dir, a->ngen);
	if (result) {
		bcfs_reply_status(a->req, result);
		return;
	}
	/* a file another client made meanwhile, opened and truncated */
	if ((fi->flags & O_TRUNC) && !(c->open_flags & BCP_OPEN_CREATED))
		bcfs_dattr_files();
	bcfs_fill_entry(&c->entry, a->parent, &e, a->ngen);
	fi->fh = c->fh;
	ret = bcfs_inode_ref(c->entry.handle, a->parent, a->name,
			     strlen(a->name), c->entry.fid);
	if (ret) {
		bcp_client_forget(bcfs_g.client, c->entry.handle, 1);
		bcfs_release_fh(c->entry.handle, c->fh);
		bcfs_reply_status(a->req, ret);
		return;
	}
	bcfs_inode_open_update(c->entry.handle, &c->entry.attr);
	/* no xattrs at all: its ACL is not asked for either (ops_xattr.c) */
	bcfs_xattr_hint(&c->entry, &e, a->xepoch);
	/*
	 * A file the agent made (it says so, or O_EXCL) has no file
	 * capabilities: its first write needn't ask.  (Without O_EXCL and
	 * without the agent's word, the agent may have opened a file
	 * another client made meanwhile.)
	 */
	if (((fi->flags & O_EXCL) || (c->open_flags & BCP_OPEN_CREATED)) &&
	    bcfs_g.o.attr_timeout > 0) {
		uint32_t gen;

		bcfs_inode_xattr_absent(c->entry.handle, BCFS_XA_CAP, &gen);
		bcfs_inode_xattr_absent_known(c->entry.handle, BCFS_XA_CAP,
					      gen);
	}
	bcfs_open_add(c->fh, c->entry.handle, bcfs_open_flags(fi->flags), 0);
	/* only a file that gathers writes needs the FLUSH of a close */
	fi->noflush = !bcfs_wb_attach(c->entry.handle, c->fh,
				      (int)bcfs_open_flags(fi->flags));
	bcfs_open_direct(fi, c->entry.handle, c->entry.attr.mode, 0);
	if (!bcfs_reply_open(a->req, fi, &e))
		return;
	bcfs_wb_release(c->entry.handle, c->fh);
	bcfs_inode_forget(c->entry.handle, 1);
	bcfs_release_fh(c->entry.handle, c->fh);
}

void bcfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, struct fuse_file_info *fi)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct bcp_create_req *q;
	struct bcfs_acall *a;
	struct bcp_msg m;
	int len;

	len = bcfs_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	bcfs_msg(&m, BCP_OP_CREATE);
	q = &m.u.create_req;
	q->parent = bcfs_handle(parent);
	q->mode = mode;
	q->umask = ctx->umask;
	q->flags = bcfs_open_flags(fi->flags) | (fi->flags & O_EXCL);
	q->uid = ctx->uid;
	q->gid = ctx->gid;
	q->name_len = len;
	m.name = name;
	bcfs_dirs_add(q->parent, name, (size_t)len);
	a = bcfs_acall_get();
	a->parent = q->parent;
	memcpy(a->name, name, (size_t)len + 1);
	a->fi = *fi;
	a->dir = q->parent;
	a->dticket = bcfs_dattr_begin(q->parent);
	bcfs_acall_send(a, req, &m, bcfs_answer_create);
}

/*
 * The kernel sends RELEASE asynchronously, but before the close(2) that
 * caused it returns: a program that closes a file and then removes it
 * expects its space free at once, as on a local file system.  Two FUSE
 * threads take the two requests, though, and the UNLINK's may reach the
 * agent first: the agent then removes a file still open, whose blocks
 * stay taken until the RELEASE comes a moment later (statfs right after
 * the rm said the store was full).  So a name change or a statfs waits
 * out the release handlers already running (they only post; a bounded
 * wait even when one drains a write-behind run).  A RELEASE the kernel
 * queued later makes them wait too, briefly; none is lost.
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int n;			/* release handlers running */
} bcfs_rel = {
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0
};

#define BCFS_REL_WAIT_MS	2000

void bcfs_releases_wait(void)
{
	struct timespec until;

	if (!__atomic_load_n(&bcfs_rel.n, __ATOMIC_ACQUIRE))
		return;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += BCFS_REL_WAIT_MS / 1000;
	pthread_mutex_lock(&bcfs_rel.lock);
	while (bcfs_rel.n &&
	       pthread_cond_clockwait(&bcfs_rel.cond, &bcfs_rel.lock,
				      CLOCK_MONOTONIC, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&bcfs_rel.lock);
}

static void bcfs_releasing(int delta)
{
	pthread_mutex_lock(&bcfs_rel.lock);
	__atomic_add_fetch(&bcfs_rel.n, (unsigned int)delta, __ATOMIC_RELEASE);
	if (!bcfs_rel.n)
		pthread_cond_broadcast(&bcfs_rel.cond);
	pthread_mutex_unlock(&bcfs_rel.lock);
}

void bcfs_op_release(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	uint64_t handle = bcfs_handle(ino);
	struct bcp_attr attr;
	struct bcp_msg m;
	double timeout;

	bcfs_releasing(1);

	/*
	 * Release is asynchronous for the application already; the agent's
	 * answers are not waited for either.  Writes still gathered (after
	 * a FLUSH: only from a race) go first.
	 */
	bcfs_wb_release(handle, fi->fh);
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		/* our own writes are in the page cache: keep it next time */
		if (bcfs_dattr_get(handle, &attr, &timeout)) {
			/* a SETATTR after the last write told (tar, cp -p) */
			bcfs_inode_open_update(handle, &attr);
			goto out;
		}
		/*
		 * Only the writeback cache keeps the pages of a write: without
		 * it the kernel drops them itself once it sees the mtime the
		 * write gave (FUSE_CAP_AUTO_INVAL_DATA), and the next open's
		 * attributes are recorded then.  By handle, not fh: a blocking
		 * store runs the GETATTR and the RELEASE behind it on two
		 * threads, and the RELEASE may come first.
		 */
		if (bcfs_g.o.writeback) {
			bcfs_msg(&m, BCP_OP_GETATTR);
			m.u.node_req.handle = handle;
			m.u.node_req.fh = 0;
			bcfs_call_reply(NULL, &m, BCFS_REPLY_OPEN_ATTR, handle,
					NULL);
		}
	}
out:
	bcfs_release_fh(handle, fi->fh);
	bcfs_releasing(-1);
	fuse_reply_err(req, 0);
}

/*
 * Only descriptors of a file that gathers writes (wb.c) ask for FLUSH:
 * the close waits until they are with the agent, and returns their error.
 */
void bcfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	bcfs_wb_close(req, bcfs_handle(ino));
}

void bcfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		   struct fuse_file_info *fi)
{
	struct bcp_msg m;
	int ret;

	ret = bcfs_wb_flush(bcfs_handle(ino), BCFS_WB_REPORT);
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	bcfs_msg(&m, BCP_OP_FSYNC);
	m.u.fsync_req.handle = bcfs_handle(ino);
	m.u.fsync_req.fh = fi->fh;
	m.u.fsync_req.datasync = datasync;
	bcfs_call_reply(req, &m, BCFS_REPLY_STATUS, 0, NULL);
}

void bcfs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
		       off_t offset, off_t length, struct fuse_file_info *fi)
{
	struct bcp_msg m;

	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	bcfs_wb_flush(bcfs_handle(ino), 0);
	bcfs_msg(&m, BCP_OP_FALLOCATE);
	m.u.fallocate_req.handle = bcfs_handle(ino);
	m.u.fallocate_req.fh = fi->fh;
	m.u.fallocate_req.offset = offset;
	m.u.fallocate_req.length = length;
	m.u.fallocate_req.mode = mode;
	bcfs_peek_dirty();
	bcfs_call_reply(req, &m, BCFS_REPLY_CHANGED, 0, NULL);
}

void bcfs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		   struct fuse_file_info *fi)
{
	struct bcp_msg m, r;
	int ret;

	if (bcfs_g.o.writeback) {
		/*
		 * Dirty pages the agent has not seen yet would look like
		 * holes; the kernel's generic answer (all data) is right.
		 */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	bcfs_wb_flush(bcfs_handle(ino), 0);
	bcfs_msg(&m, BCP_OP_LSEEK);
	m.u.lseek_req.fh = fi->fh;
	m.u.lseek_req.offset = off;
	m.u.lseek_req.whence = whence;
	ret = bcfs_call(&m, &r);
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	fuse_reply_lseek(req, r.u.lseek_rep.offset);
}

void bcfs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in,
			     off_t off_in, struct fuse_file_info *fi_in,
			     fuse_ino_t ino_out, off_t off_out,
			     struct fuse_file_info *fi_out, size_t len,
			     int flags)
{
	struct bcp_copy_req *q;
	struct bcp_msg m, r;
	int ret;

	if (!(bcfs_g.features & BCP_FEAT_COPY_RANGE)) {
		/* the kernel falls back to reading and writing */
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	bcfs_wb_flush(bcfs_handle(ino_in), 0);
	bcfs_wb_flush(bcfs_handle(ino_out), 0);
	bcfs_msg(&m, BCP_OP_COPY_FILE_RANGE);
	q = &m.u.copy_req;
	q->fh_in = fi_in->fh;
	q->off_in = off_in;
	q->fh_out = fi_out->fh;
	q->off_out = off_out;
	q->length = len;
	q->flags = flags;
	bcfs_peek_dirty();
	ret = bcfs_call(&m, &r);
	bcfs_peek_dirty();
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	fuse_reply_write(req, r.u.copy_rep.copied);
}
