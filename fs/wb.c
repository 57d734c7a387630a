/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wb.c - write-behind for files this mount creates.
 *
 * Without the kernel's writeback cache every write(2) is a FUSE WRITE, and
 * each was one BATCH_PUSH the application waited for: tar, cp and rsync
 * writing a new file in 10-128 KiB records paid a round trip to the agent
 * (on a CephFS store, an OSD commit) per record.  A file opened by CREATE
 * for writing, without O_APPEND, O_SYNC, O_DSYNC or O_DIRECT, now gathers
 * a run of sequential writes in pool memory and answers each at once; the
 * run reaches the agent as one BATCH_PUSH when it is broken (a write
 * elsewhere), when the buffer is full, and at close (FLUSH: the push's
 * completion answers it, no thread waits), fsync and release.  A failed
 * push is reported by the write that
 * caused it, and by the next FLUSH or fsync of the file: close(2) or
 * fsync(2) return the error, as on NFS; the file's later writes then go
 * straight through, so that each reports its own failure.  A run is not
 * kept longer than BCFS_WB_AGE_MS: a file written slowly and kept open
 * (a log, a metrics file) reaches the agent, and other hosts, that soon,
 * not at its close; the flusher thread pushes it, and a failure is then
 * reported by the next FLUSH or fsync.
 *
 * A gathered write is answered before the store has taken it: on a full
 * store the run that fails loses writes the application was told were
 * made.  So a file gathers only while the store has room to spare: the
 * flusher asks the agent (STATFS of the root) when gathering starts and
 * every second while it goes on, and a run starts only while the last
 * answer is fresh and left more than BCFS_WB_ROOM plus what every slot
 * may hold free (or the store tells no size at all); otherwise each
 * write goes straight through and reports its own ENOSPC, as a local
 * file system's would.
 *
 * Everything else that could see the file's data or size first pushes
 * what is gathered: a read, GETATTR, SETATTR, fallocate, lseek,
 * copy_file_range, and another open of the file, which also ends write-
 * behind for it (its writes then go straight through, so that two
 * descriptors never reorder; a write through another descriptor pushes
 * first too).  Attributes the agent sends in an entry (LOOKUP,
 * READDIRPLUS, LINK) may predate a push: their size is raised to the end
 * of what the file was written to here, until it is truncated
 * (bcfs_wb_patch()); once such a size was handed out, the close tells the
 * kernel to fetch the attributes again, so that mtime is the agent's.
 * Opens that never gather ask the kernel not to send FLUSH at all
 * (FOPEN_NOFLUSH).
 *
 * Memory: at most bcfs_wbt.nslots files gather at once, each in one
 * piece of BCFS_WB_CAP bytes taken from the pool when the first write
 * comes and given back after each push; the slots are sized so that they
 * hold at most an eighth of the pool.  A file created while every slot is
 * taken writes straight through.
 *
 * Locks: bcfs_wbt.lock is a leaf except that bcp_client_io_put (the
 * client's pool lock) is called under it; it is never held across a push,
 * a copy or bcp_client_io_get, which may wait (the slot is marked busy
 * instead, and waiters sleep on bcfs_wbt.cond).  A push's completion runs
 * on the client's receiver thread and only takes the lock to post the
 * result (and, for a close, answers the FLUSH).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "bcfs_i.h"

#define BCFS_WB_CAP	(256u << 10)
#define BCFS_WB_MAX	32
#define BCFS_WB_AGE_MS	1000	/* a run older than this is pushed */
#define BCFS_WB_ROOM	(64ull << 20)	/* free bytes to spare, at least */
#define BCFS_WB_ROOM_MS	1500	/* an answer about room lasts this long */

/* O_* flags of a write that must not be gathered */
#define BCFS_WB_NOT	(O_APPEND | O_SYNC | O_DSYNC | O_DIRECT)

struct bcfs_wb {
	/* all protected by bcfs_wbt.lock */
	uint64_t handle;	/* 0: a free slot */
	uint64_t fh;		/* the descriptor that gathers */
	unsigned int users;	/* threads waiting on it, besides release */
	int busy;		/* a copy or push runs without the lock */
	int ended;		/* another open came: writes go through */
	int told;		/* a gathered size was handed to the kernel */
	struct bcp_io *io;	/* pool memory of the run, or NULL */
	uint64_t start;		/* the run: [start, start + len) */
	uint32_t len;
	uint64_t since;		/* when its first write came (ns) */
	uint64_t end;		/* end of what was written through it, or 0 */
	int err;		/* first failed push not yet reported */
	int done;		/* the push in flight finished ... */
	int32_t result;		/* ... with this */
	fuse_req_t close_req;	/* the FLUSH its push answers, or NULL */
	uint32_t close_len;	/* the bytes of that push */
	int close_rest;		/* it was short: the flusher pushes the rest */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a slot stopped being busy or used */
	uint32_t cap;			/* bytes gathered at most per file */
	unsigned int nslots;		/* slots in use at most */
	unsigned int active;		/* slots taken (atomic for readers) */
	struct bcfs_wb slot[BCFS_WB_MAX];
	/* the flusher of old runs: sleeps on tick (CLOCK_MONOTONIC) */
	pthread_t flusher;
	pthread_cond_t tick;
	int started, stop;
	/*
	 * The store's room: when last asked (ns, 0 never), the answer (the
	 * free bytes, UINT64_MAX when it tells no size) and the bytes this
	 * mount had written when it asked: the metrics' count, which every
	 * write answered adds to (gathered here or pushed by ops_rw.c), so
	 * that the data path keeps one counter, not two.
	 */
	uint64_t room_at;
	int room_ok;
	uint64_t room_free;
	uint64_t room_written;
	int room_ask;			/* a writer wants a fresh answer */
	unsigned int rests;		/* slots with close_rest set */
} bcfs_wbt = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void bcfs_wb_start(void);

void bcfs_wb_init(size_t pool_size)
{
	size_t cap = BCFS_WB_CAP, n;

	if (bcp_client_io_max(bcfs_g.client) < cap)
		cap = bcp_client_io_max(bcfs_g.client);
	n = pool_size / 8 / cap;
	if (n > BCFS_WB_MAX)
		n = BCFS_WB_MAX;
	if (bcfs_g.o.writeback)
		n = 0;		/* the kernel gathers writes itself */
	if (bcfs_g.o.nowritebehind)
		n = 0;
	bcfs_wbt.cap = (uint32_t)cap;
	bcfs_wbt.nslots = (unsigned int)n;
	bcfs_dbg("write-behind: %u files of up to %zu bytes", bcfs_wbt.nslots,
		 cap);
	if (n)
		bcfs_wb_start();
}

static int bcfs_wb_none(void)
{
	return !__atomic_load_n(&bcfs_wbt.active, __ATOMIC_ACQUIRE);
}

/* The slot gathering for handle, or NULL.  Under bcfs_wbt.lock. */
static struct bcfs_wb *bcfs_wb_find(uint64_t handle)
{
	unsigned int i;

	for (i = 0; i < BCFS_WB_MAX; i++)
		if (bcfs_wbt.slot[i].handle == handle)
			return &bcfs_wbt.slot[i];
	return NULL;
}

static void bcfs_wb_wait(struct bcfs_wb *w)
{
	while (w->busy)
		pthread_cond_wait(&bcfs_wbt.cond, &bcfs_wbt.lock);
}

int bcfs_wb_attach(uint64_t handle, uint64_t fh, int flags)
{
	struct bcfs_wb *w = NULL;
	unsigned int i;

	if ((flags & O_ACCMODE) == O_RDONLY || (flags & BCFS_WB_NOT) ||
	    !bcfs_wbt.nslots || !handle)
		return 0;
	pthread_mutex_lock(&bcfs_wbt.lock);
	w = bcfs_wb_find(handle);
	if (w) {
		/*
		 * Made again by another CREATE (on another mount first):
		 * the first descriptor stops gathering.  No waiting here
		 * (the receiver thread): whatever it gathered goes before
		 * anything else touches the file.
		 */
		w->ended = 1;
		w = NULL;
	} else if (bcfs_wbt.active < bcfs_wbt.nslots) {
		for (i = 0; i < BCFS_WB_MAX && !w; i++)
			if (!bcfs_wbt.slot[i].handle)
				w = &bcfs_wbt.slot[i];
	}
	if (w) {
		memset(w, 0, sizeof(*w));
		w->handle = handle;
		w->fh = fh;
		__atomic_add_fetch(&bcfs_wbt.active, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&bcfs_wbt.lock);
	return w != NULL;
}

/* Runs on the client library's receiver thread: must not wait long. */
static void bcfs_wb_pushed(struct bcp_io *io, int32_t result)
{
	struct bcfs_wb *w = io->priv;

	bcfs_peek_dirty();
	pthread_mutex_lock(&bcfs_wbt.lock);
	w->result = result;
	w->done = 1;
	pthread_cond_broadcast(&bcfs_wbt.cond);
	pthread_mutex_unlock(&bcfs_wbt.lock);
}

static void bcfs_wb_io(struct bcfs_wb *w, struct bcp_io *io, uint64_t off,
		       uint32_t len, bcp_io_done_fn done)
{
	/* the file's data changes now (peek.c, dattr.c) */
	bcfs_peek_dirty();
	io->op = BCP_OP_BATCH_PUSH;
	io->fh = w->fh;
	io->offset = off;
	io->length = len;
	io->done = done;
	io->priv = w;
}

/* The free bytes a run needs the store to have. */
static uint64_t bcfs_wb_room_want(void)
{
	return BCFS_WB_ROOM + (uint64_t)bcfs_wbt.nslots * bcfs_wbt.cap;
}

/*
 * Whether a run may start now: the store had room to spare a moment ago,
 * less what this mount wrote since.  If the answer is old, the flusher is
 * asked for a new one and the write goes through meanwhile.  Under
 * bcfs_wbt.lock.
 */
static int bcfs_wb_room(uint64_t now)
{
	uint64_t spent;

	if (bcfs_wbt.room_at &&
	    now - bcfs_wbt.room_at < BCFS_WB_ROOM_MS * 1000000ull) {
		/* what this mount wrote since comes off the answer */
		spent = bcfs_metrics_written() - bcfs_wbt.room_written;
		return bcfs_wbt.room_ok &&
		       (bcfs_wbt.room_free == UINT64_MAX ||
			(bcfs_wbt.room_free > spent &&
			 bcfs_wbt.room_free - spent >= bcfs_wb_room_want()));
	}
	if (bcfs_wbt.started && !bcfs_wbt.room_ask) {
		bcfs_wbt.room_ask = 1;
		pthread_cond_signal(&bcfs_wbt.tick);
	}
	return 0;
}

/* Ask the agent how much room the store has.  Under bcfs_wbt.lock. */
static void bcfs_wb_room_ask(void)
{
	struct bcp_msg m, r;
	uint64_t want, avail, written;
	int ret, ok;

	bcfs_msg(&m, BCP_OP_STATFS);
	m.u.handle_req.handle = bcfs_g.root;
	written = bcfs_metrics_written();
	pthread_mutex_unlock(&bcfs_wbt.lock);
	ret = bcfs_call(&m, &r);
	pthread_mutex_lock(&bcfs_wbt.lock);
	want = bcfs_wb_room_want();
	avail = 0;
	if (!ret)
		avail = r.u.statfs_rep.bavail * (r.u.statfs_rep.frsize ?
						 r.u.statfs_rep.frsize :
						 r.u.statfs_rep.bsize);
	/* a store that tells no size (a CephFS without a mgr): as before */
	ok = !ret && (!r.u.statfs_rep.blocks || avail >= want);
	if (ok != bcfs_wbt.room_ok)
		bcfs_dbg("write-behind: %s (%s)", ok ? "on" : "off",
			 ret ? strerror(bcfs_errno(ret)) :
			 ok ? "the store has room" : "the store is nearly full");
	bcfs_wbt.room_ok = ok;
	bcfs_wbt.room_free = !ret && !r.u.statfs_rep.blocks ? UINT64_MAX :
			     avail;
	bcfs_wbt.room_written = written;
	bcfs_wbt.room_at = bcfs_now_ns();
	bcfs_wbt.room_ask = 0;
}

/* The error not yet reported, and whether to tell (then both cleared). */
static int bcfs_wb_take(struct bcfs_wb *w, int *told)
{
	int ret = w->err;

	*told = w->told;
	w->err = 0;
	w->told = 0;
	return ret;
}

/*
 * Push the run and wait for it; under bcfs_wbt.lock, with w not busy and
 * w->len > 0 (the lock is dropped meanwhile).  A short push is continued
 * until it fails, so that the error is the agent's.  The pool memory goes
 * back.  Returns 0 or -errno (also kept in w->err).
 */
static int bcfs_wb_push(struct bcfs_wb *w)
{
	struct bcp_io *io = w->io;
	uint64_t off = w->start;
	uint32_t done = 0, len = w->len;
	int ret = 0;

	w->busy = 1;
	w->io = NULL;
	w->len = 0;
	while (done < len) {
		bcfs_wb_io(w, io, off + done, len - done, bcfs_wb_pushed);
		if (done)
			memmove(io->buf, (char *)io->buf + done, len - done);
		w->done = 0;
		pthread_mutex_unlock(&bcfs_wbt.lock);
		bcp_client_submit(bcfs_g.client, io);
		pthread_mutex_lock(&bcfs_wbt.lock);
		while (!w->done)
			pthread_cond_wait(&bcfs_wbt.cond, &bcfs_wbt.lock);
		if (w->result <= 0 || (uint32_t)w->result > len - done) {
			ret = w->result < 0 ? w->result : -EIO;
			break;
		}
		done += (uint32_t)w->result;
	}
	bcp_client_io_put(bcfs_g.client, io);
	if (ret) {
		bcfs_dbg("writing %" PRIu32 " bytes at %" PRIu64 " of a new "
			 "file failed: %s", len - done, off + done,
			 strerror(bcfs_errno(ret)));
		if (!w->err)
			w->err = ret;
	}
	w->busy = 0;
	pthread_cond_broadcast(&bcfs_wbt.cond);
	return ret;
}

/* Push what w gathered, if anything.  Under bcfs_wbt.lock. */
static void bcfs_wb_drain(struct bcfs_wb *w)
{
	bcfs_wb_wait(w);
	if (w->len)
		bcfs_wb_push(w);
}

int bcfs_wb_write(fuse_req_t req, uint64_t handle, uint64_t fh, int through,
		  struct fuse_bufvec *bufv, size_t size, off_t off)
{
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
	uint64_t t0 = bcfs_now_ns();
	struct bcfs_wb *w;
	struct bcp_io *io;
	ssize_t got;
	int ret;

	if (bcfs_wb_none())
		return 0;
	pthread_mutex_lock(&bcfs_wbt.lock);
	w = bcfs_wb_find(handle);
	if (!w) {
		pthread_mutex_unlock(&bcfs_wbt.lock);
		return 0;
	}
	w->users++;
	for (;;) {
		bcfs_wb_wait(w);
		if (w->len && !through && !w->ended && w->fh == fh &&
		    w->start + w->len == (uint64_t)off &&
		    size <= bcfs_wbt.cap - w->len)
			break;		/* it extends the run */
		if (w->len) {
			/* a broken or full run goes first */
			ret = bcfs_wb_push(w);
			if (ret)
				goto out_answer;
			continue;
		}
		/* nothing gathered: start a run, or go straight through */
		if (w->ended || w->err || w->fh != fh || through ||
		    size > bcfs_wbt.cap || off < 0 || !bcfs_wb_room(t0))
			goto out_through;
		w->start = (uint64_t)off;
		w->since = t0;
		break;
	}
	if (!w->io) {
		w->busy = 1;
		pthread_mutex_unlock(&bcfs_wbt.lock);
		io = bcp_client_io_get(bcfs_g.client, bcfs_wbt.cap);
		pthread_mutex_lock(&bcfs_wbt.lock);
		w->busy = 0;
		pthread_cond_broadcast(&bcfs_wbt.cond);
		if (!io) {
			ret = -ENOTCONN;	/* shutting down */
			goto out_answer;
		}
		w->io = io;
	}
	/* the copy runs without the lock; the run is ours meanwhile */
	w->busy = 1;
	pthread_mutex_unlock(&bcfs_wbt.lock);
	dst.buf[0].mem = (char *)w->io->buf + w->len;
	got = fuse_buf_copy(&dst, bufv, 0);
	pthread_mutex_lock(&bcfs_wbt.lock);
	w->busy = 0;
	pthread_cond_broadcast(&bcfs_wbt.cond);
	if (got != (ssize_t)size) {
		ret = got < 0 ? (int)got : -EIO;
		goto out_answer;
	}
	w->len += (uint32_t)size;
	if (w->end < w->start + w->len)
		w->end = w->start + w->len;
	ret = (int)size;

out_answer:
	w->users--;
	pthread_cond_broadcast(&bcfs_wbt.cond);
	pthread_mutex_unlock(&bcfs_wbt.lock);
	bcfs_metrics_rw(1, ret, t0);
	if (ret < 0)
		bcfs_reply_status(req, ret);
	else
		fuse_reply_write(req, (size_t)ret);
	return 1;

out_through:
	w->users--;
	pthread_cond_broadcast(&bcfs_wbt.cond);
	pthread_mutex_unlock(&bcfs_wbt.lock);
	return 0;
}

/*
 * After the push of a close: a size handed to the kernel while the writes
 * were gathered came with an mtime from before the push; drop it.
 */
static void bcfs_wb_told(uint64_t handle)
{
	if (bcfs_g.features & BCP_FEAT_NOTIFY)
		bcfs_notify_self(handle, -1);
}

int bcfs_wb_flush(uint64_t handle, int how)
{
	struct bcfs_wb *w;
	int ret = 0, told = 0;

	if (bcfs_wb_none())
		return 0;
	pthread_mutex_lock(&bcfs_wbt.lock);
	w = bcfs_wb_find(handle);
	if (w) {
		w->users++;
		bcfs_wb_drain(w);
		if (how & BCFS_WB_TRUNC)
			w->end = 0;
		if (how & BCFS_WB_END)
			w->ended = 1;
		if (how & BCFS_WB_REPORT)
			ret = bcfs_wb_take(w, &told);
		w->users--;
		pthread_cond_broadcast(&bcfs_wbt.cond);
	}
	pthread_mutex_unlock(&bcfs_wbt.lock);
	if (told)
		bcfs_wb_told(handle);
	return ret;
}

/*
 * Answers the FLUSH of a close whose push is over with the error gathered
 * for the file, if any.  Called under bcfs_wbt.lock, which it drops.
 */
static void bcfs_wb_close_reply(struct bcfs_wb *w)
{
	fuse_req_t req = w->close_req;
	uint64_t handle = w->handle;
	int ret, told;

	w->close_req = NULL;
	ret = bcfs_wb_take(w, &told);
	pthread_cond_broadcast(&bcfs_wbt.cond);
	pthread_mutex_unlock(&bcfs_wbt.lock);
	if (told)
		bcfs_wb_told(handle);
	bcfs_reply_status(req, ret);
}

/*
 * The push of a close finished: answer its FLUSH.  Receiver thread.  A
 * short one (the store filled up after part of it) is not answered here:
 * the flusher pushes the rest, whose failure is the error the close gets,
 * as bcfs_wb_push() does for a writer.
 */
static void bcfs_wb_closed(struct bcp_io *io, int32_t result)
{
	struct bcfs_wb *w = io->priv;
	int ret;

	bcfs_peek_dirty();
	pthread_mutex_lock(&bcfs_wbt.lock);
	if (result > 0 && (uint32_t)result < w->close_len &&
	    bcfs_wbt.started && !bcfs_wbt.stop) {
		w->len = w->close_len - (uint32_t)result;
		memmove(io->buf, (char *)io->buf + result, w->len);
		w->io = io;
		w->start = io->offset + (uint32_t)result;
		w->close_rest = 1;	/* still busy: nobody else touches it */
		bcfs_wbt.rests++;
		pthread_cond_signal(&bcfs_wbt.tick);
		pthread_mutex_unlock(&bcfs_wbt.lock);
		return;
	}
	/* a short one the flusher cannot finish (it is gone) fails */
	ret = result < 0 ? result :
	      (uint32_t)result != w->close_len ? -EIO : 0;
	if (ret) {
		bcfs_dbg("writing %" PRIu32 " bytes of a new file at close "
			 "failed: %s", w->close_len, strerror(bcfs_errno(ret)));
		if (!w->err)
			w->err = ret;
	}
	w->busy = 0;
	bcfs_wb_close_reply(w);
	bcp_client_io_put(bcfs_g.client, io);
}

void bcfs_wb_close(fuse_req_t req, uint64_t handle)
{
	struct bcfs_wb *w;
	struct bcp_io *io;
	int ret = 0, told = 0;

	if (bcfs_wb_none()) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&bcfs_wbt.lock);
	w = bcfs_wb_find(handle);
	if (w) {
		w->users++;
		bcfs_wb_wait(w);
		w->users--;
		pthread_cond_broadcast(&bcfs_wbt.cond);
		if (w->len) {
			/* the push answers the FLUSH: no thread waits for it */
			io = w->io;
			w->io = NULL;
			bcfs_wb_io(w, io, w->start, w->len, bcfs_wb_closed);
			w->close_len = w->len;
			w->close_req = req;
			w->len = 0;
			w->busy = 1;
			pthread_mutex_unlock(&bcfs_wbt.lock);
			bcp_client_submit(bcfs_g.client, io);
			return;
		}
		ret = bcfs_wb_take(w, &told);
	}
	pthread_mutex_unlock(&bcfs_wbt.lock);
	if (told)
		bcfs_wb_told(handle);
	bcfs_reply_status(req, ret);
}

void bcfs_wb_release(uint64_t handle, uint64_t fh)
{
	struct bcfs_wb *w;

	if (bcfs_wb_none())
		return;
	pthread_mutex_lock(&bcfs_wbt.lock);
	w = bcfs_wb_find(handle);
	if (w && w->fh == fh) {
		/* until nobody is inside and nothing is gathered */
		for (;;) {
			bcfs_wb_drain(w);
			while (w->users || w->busy)
				pthread_cond_wait(&bcfs_wbt.cond,
						  &bcfs_wbt.lock);
			if (!w->len)
				break;
		}
		if (w->err)
			bcfs_dbg("a new file was closed with a write that "
				 "failed unreported: %s",
				 strerror(bcfs_errno(w->err)));
		if (w->io)
			bcp_client_io_put(bcfs_g.client, w->io);
		memset(w, 0, sizeof(*w));
		__atomic_sub_fetch(&bcfs_wbt.active, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&bcfs_wbt.lock);
}

void bcfs_wb_patch(uint64_t handle, struct stat *st)
{
	struct bcfs_wb *w;

	if (bcfs_wb_none())
		return;
	pthread_mutex_lock(&bcfs_wbt.lock);
	w = bcfs_wb_find(handle);
	if (w && w->end) {
		if ((uint64_t)st->st_size < w->end)
			st->st_size = (off_t)w->end;
		w->told = 1;
	}
	pthread_mutex_unlock(&bcfs_wbt.lock);
}

/*
 * The rest of a short push of a close (bcfs_wb_closed()): pushed and
 * waited for, and the FLUSH answered with what it found.  Flusher thread,
 * under bcfs_wbt.lock (dropped meanwhile).
 */
static void bcfs_wb_close_rest(struct bcfs_wb *w)
{
	w->close_rest = 0;
	bcfs_wbt.rests--;
	w->busy = 0;
	w->users++;
	bcfs_wb_push(w);	/* until it fails: the error is the agent's */
	w->users--;
	bcfs_wb_close_reply(w);
	pthread_mutex_lock(&bcfs_wbt.lock);
}

/*
 * Pushes the runs older than BCFS_WB_AGE_MS, one at a time (it waits for
 * each push, as a writer would), every quarter of that, and the rest of a
 * close's short push at once.
 */
static void *bcfs_wb_flusher(void *arg)
{
	struct timespec t;
	struct bcfs_wb *w;
	unsigned int i;
	uint64_t now;

	(void)arg;
	pthread_mutex_lock(&bcfs_wbt.lock);
	while (!bcfs_wbt.stop) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += BCFS_WB_AGE_MS / 4 * 1000000L;
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		if (!bcfs_wbt.room_ask && !bcfs_wbt.rests)
			pthread_cond_timedwait(&bcfs_wbt.tick, &bcfs_wbt.lock,
					       &t);
		if (bcfs_wbt.stop)
			break;
		for (i = 0; i < BCFS_WB_MAX && bcfs_wbt.rests; i++)
			if (bcfs_wbt.slot[i].close_rest)
				bcfs_wb_close_rest(&bcfs_wbt.slot[i]);
		now = bcfs_now_ns();
		/* asked, or files gather and the answer is a second old */
		if (bcfs_wbt.room_ask ||
		    (bcfs_wbt.active &&
		     now - bcfs_wbt.room_at >= BCFS_WB_AGE_MS * 1000000ull)) {
			bcfs_wb_room_ask();
			now = bcfs_now_ns();
		}
		for (i = 0; i < BCFS_WB_MAX && !bcfs_wbt.stop; i++) {
			w = &bcfs_wbt.slot[i];
			if (!w->handle || !w->len || w->busy ||
			    now - w->since < BCFS_WB_AGE_MS * 1000000ull)
				continue;
			/* release waits for it, as for a writer */
			w->users++;
			bcfs_wb_push(w);
			w->users--;
			pthread_cond_broadcast(&bcfs_wbt.cond);
		}
	}
	pthread_mutex_unlock(&bcfs_wbt.lock);
	return NULL;
}

static void bcfs_wb_start(void)
{
	pthread_condattr_t ca;
	int ret;

	if (pthread_condattr_init(&ca) ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
	    pthread_cond_init(&bcfs_wbt.tick, &ca)) {
		bcfs_warn("write-behind: no flusher thread: writes are "
			  "sent at once");
		return;
	}
	pthread_condattr_destroy(&ca);
	ret = pthread_create(&bcfs_wbt.flusher, NULL, bcfs_wb_flusher, NULL);
	if (ret) {
		bcfs_warn("write-behind: cannot start the flusher thread "
			  "(%s): writes are sent at once", strerror(ret));
		pthread_cond_destroy(&bcfs_wbt.tick);
		return;
	}
	pthread_setname_np(bcfs_wbt.flusher, "bcfs-wb");
	pthread_mutex_lock(&bcfs_wbt.lock);
	bcfs_wbt.started = 1;
	bcfs_wbt.room_ask = 1;		/* the first answer at once */
	pthread_cond_signal(&bcfs_wbt.tick);
	pthread_mutex_unlock(&bcfs_wbt.lock);
}

void bcfs_wb_fini(void)
{
	unsigned int i;

	if (bcfs_wbt.started) {
		pthread_mutex_lock(&bcfs_wbt.lock);
		bcfs_wbt.stop = 1;
		pthread_cond_signal(&bcfs_wbt.tick);
		pthread_mutex_unlock(&bcfs_wbt.lock);
		pthread_join(bcfs_wbt.flusher, NULL);
		pthread_cond_destroy(&bcfs_wbt.tick);
		bcfs_wbt.started = 0;
	}
	if (bcfs_wb_none())
		return;
	pthread_mutex_lock(&bcfs_wbt.lock);
	for (i = 0; i < BCFS_WB_MAX; i++) {
		struct bcfs_wb *w = &bcfs_wbt.slot[i];

		if (!w->handle)
			continue;
		if (w->close_rest)
			bcfs_wb_close_rest(w);	/* the flusher is gone */
		bcfs_wb_drain(w);
		if (w->io) {
			bcp_client_io_put(bcfs_g.client, w->io);
			w->io = NULL;
		}
	}
	pthread_mutex_unlock(&bcfs_wbt.lock);
}
