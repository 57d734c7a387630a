/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ceph_wlog.c - the cephfs store's log of acknowledged writes
 * (ceph_wlog.h says why).
 *
 * A file in the runtime directory per running agent and CephFS (the fid
 * tag and a number in its name; the agent holds a lock on its own, so two
 * agents sharing a runtime directory take two): an index of WL_SLOTS
 * slots, mapped shared, then a ring of WL_DATA bytes written with pwrite.  A write takes the next slot (by sequence number)
 * and the next bytes of the ring, copies its bytes there, then fills the
 * slot and marks it live with one aligned store: a SIGKILL leaves either
 * a live slot whose bytes are all in the page cache, or no slot.  A slot
 * is retired (state 0) once the cluster has its write, before its bytes
 * can be given to another; the ring's tail is the oldest slot not free.
 * Host bytes only ever land in the ring, never in the index, so nothing a
 * host writes can pass for an entry.
 *
 * Replay (start-up): of the agent's own file, and of every other one of
 * this CephFS that no running agent holds (an agent that died and will
 * not start again as this one), which is then removed.  The live slots
 * in sequence order, each written to
 * its inode again (ceph_ll_lookup_inode(); a file gone since is skipped),
 * then one ceph_sync_fs() and every slot retired.  A write that the
 * cluster already had is written again with the same bytes: what a later
 * truncate, fallocate, copy or direct write did to the file is safe, as
 * those first make the cluster have the file's logged writes and retire
 * them (store_ceph.c: cs_settle()); only another Ceph client's write to
 * the same bytes within a flush interval of an agent crash could be
 * undone (doc/design.md).  A SETATTR's entry (kind WL_ATTR) holds the
 * owner, mode or times the store set, set again the same way; a later
 * truncate does not retire it, and setting those again is harmless.
 *
 * Locks: w->lock guards the in-memory slot states, the ring and the
 * counters; it is never held across a call into libcephfs or a pwrite.
 */
#define _FILE_OFFSET_BITS 64
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cephfs/libcephfs.h>

#include "agent.h"
#include "ceph_wlog.h"
#include "store.h"

/*
 * "BCCWLOG2": slots may hold attributes (WL_ATTR), which an agent that
 * knows only "BCCWLOG1" would write into the file as bytes; a log of the
 * first kind is taken and marked as the second, so that such an agent
 * refuses it rather than replay it.
 */
#define WL_MAGIC	0x32474f4c57434342ull
#define WL_MAGIC1	0x31474f4c57434342ull
#define WL_SLOTS	4096u
#define WL_INDEX	(1u << 20)		/* header + slots, then the ring */
#define WL_DATA		(64ull << 20)
#define WL_ENTRY_MAX	(1u << 20)		/* larger writes wait instead */
#define WL_ALIGN	64u
#define WL_LIVE		0x4556494cu		/* "LIVE" */
#define WL_FLUSH_MS	100
#define WL_FILES	16			/* agents sharing a runtime dir */
#define WL_INO_HASH	1024u			/* counters of entries by inode */

struct wl_hdr {
	uint64_t magic;
	uint32_t nslots;
	uint32_t index_len;
	uint64_t data_len;
	uint8_t tag[16];
};

/* one slot of the index, as it is in the file */
struct wl_slot {
	_Atomic uint32_t state;		/* WL_LIVE, or 0 */
	uint32_t len;
	uint64_t seq;
	uint64_t ino;
	uint64_t off;			/* in the file */
	uint64_t pos;			/* in the ring */
	uint32_t kind;			/* WL_WRITE or WL_ATTR */
	uint8_t pad[20];
};

/* what a slot's bytes are: a write's, or a struct cs_wlog_attr */
enum { WL_WRITE = 0, WL_ATTR = 1 };

enum wl_state { WL_FREE, WL_BUSY, WL_WRITING, WL_DONE };

struct wl_mem {
	enum wl_state state;
	uint64_t lpos;			/* where in the ring, not wrapped */
	uint64_t ino;
	uint64_t done;			/* mark when the write was made */
};

struct cs_wlog {
	int fd;
	char *path;
	struct ceph_mount_info *cm;
	struct wl_slot *slots;		/* mapped: the index after the header */
	void *map;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct wl_mem mem[WL_SLOTS];
	uint64_t seq;			/* the next entry's */
	uint64_t lo;			/* the oldest entry not free */
	uint64_t head;			/* the ring's next byte, not wrapped */
	uint64_t marks;
	/* entries not free by hash of inode: 0 says none of ino's at once */
	uint16_t by_ino[WL_INO_HASH];
	unsigned int ndone;		/* entries the flusher may retire */
	unsigned int nlive;
	unsigned int flush_ms;
	int stop;
	pthread_t flusher;
	/* counted for the close's summary */
	uint64_t logged, unlogged, synced_fails;
};

#define WL_SLOTS_AT	4096u			/* the index after its header */
_Static_assert(sizeof(struct wl_slot) == 64, "slot size");
_Static_assert(sizeof(struct wl_hdr) <= WL_SLOTS_AT &&
	       WL_SLOTS_AT + WL_SLOTS * sizeof(struct wl_slot) <= WL_INDEX,
	       "index size");

static unsigned int wl_ino_hash(uint64_t ino)
{
	return (unsigned int)((ino * 0x9e3779b97f4a7c15ull) >> 54) &
	       (WL_INO_HASH - 1);
}

/* Slot i goes back to free (lock held). */
static void wl_free(struct cs_wlog *w, uint32_t i)
{
	w->by_ino[wl_ino_hash(w->mem[i].ino)]--;
	w->mem[i].state = WL_FREE;
}

/* The oldest entry not free, and so the ring's tail (lock held). */
static uint64_t wl_tail(struct cs_wlog *w)
{
	while (w->lo < w->seq && w->mem[w->lo % WL_SLOTS].state == WL_FREE)
		w->lo++;
	return w->lo < w->seq ? w->mem[w->lo % WL_SLOTS].lpos : w->head;
}

/* Retire slot i (lock held): its bytes may be given out again. */
static void wl_retire(struct cs_wlog *w, uint32_t i)
{
	atomic_store_explicit(&w->slots[i].state, 0, memory_order_release);
	if (w->mem[i].state == WL_DONE)
		w->ndone--;
	if (w->mem[i].state != WL_BUSY)
		w->nlive--;
	wl_free(w, i);
}

static int wl_add(struct cs_wlog *w, uint32_t kind, uint64_t ino,
		  uint64_t off, const void *buf, size_t len, uint32_t *slot)
{
	uint64_t p, phys, need, seq;
	struct wl_slot *sl;
	uint32_t i;
	ssize_t n;

	if (len == 0 || len > WL_ENTRY_MAX)
		return -E2BIG;
	need = (len + WL_ALIGN - 1) & ~(uint64_t)(WL_ALIGN - 1);
	pthread_mutex_lock(&w->lock);
	seq = w->seq;
	i = (uint32_t)(seq % WL_SLOTS);
	p = w->head;
	phys = p % WL_DATA;
	if (phys + need > WL_DATA)
		p += WL_DATA - phys;	/* an entry never wraps */
	if (w->mem[i].state != WL_FREE || p + need - wl_tail(w) > WL_DATA) {
		w->unlogged++;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&w->lock);
		return -ENOSPC;
	}
	w->seq = seq + 1;
	w->head = p + need;
	w->mem[i].state = WL_BUSY;
	w->mem[i].lpos = p;
	w->mem[i].ino = ino;
	w->by_ino[wl_ino_hash(ino)]++;
	/* past half full: do not wait for the next tick */
	if (w->head - wl_tail(w) > WL_DATA / 2 ||
	    w->seq - w->lo > WL_SLOTS / 2)
		pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);

	n = pwrite(w->fd, buf, len, (off_t)(WL_INDEX + p % WL_DATA));
	if (n != (ssize_t)len) {
		agent_warn_rl("write log %s: %s; writes wait for the cluster",
			      w->path, n < 0 ? strerror(errno) : "short write");
		pthread_mutex_lock(&w->lock);
		wl_free(w, i);
		w->unlogged++;
		pthread_mutex_unlock(&w->lock);
		return -EIO;
	}
	sl = &w->slots[i];
	sl->len = (uint32_t)len;
	sl->seq = seq;
	sl->ino = ino;
	sl->off = off;
	sl->pos = p % WL_DATA;
	sl->kind = kind;
	atomic_store_explicit(&sl->state, WL_LIVE, memory_order_release);
	pthread_mutex_lock(&w->lock);
	w->mem[i].state = WL_WRITING;
	w->nlive++;
	w->logged++;
	pthread_mutex_unlock(&w->lock);
	*slot = i;
	return 0;
}

int cs_wlog_add(struct cs_wlog *w, uint64_t ino, uint64_t off,
		const void *buf, size_t len, uint32_t *slot)
{
	return wl_add(w, WL_WRITE, ino, off, buf, len, slot);
}

int cs_wlog_add_attr(struct cs_wlog *w, uint64_t ino,
		     const struct cs_wlog_attr *a)
{
	uint32_t slot;
	int ret;

	ret = wl_add(w, WL_ATTR, ino, 0, a, sizeof(*a), &slot);
	if (ret == 0)
		cs_wlog_done(w, slot, 1);
	return ret;
}

void cs_wlog_done(struct cs_wlog *w, uint32_t slot, int ok)
{
	pthread_mutex_lock(&w->lock);
	if (ok) {
		w->mem[slot].state = WL_DONE;
		w->mem[slot].done = ++w->marks;
		if (w->ndone++ == 0)
			pthread_cond_signal(&w->cond);	/* the flusher */
	} else {
		wl_retire(w, slot);	/* nothing was written to keep */
	}
	pthread_mutex_unlock(&w->lock);
}

uint64_t cs_wlog_mark(struct cs_wlog *w)
{
	uint64_t m;

	pthread_mutex_lock(&w->lock);
	m = w->marks;
	pthread_mutex_unlock(&w->lock);
	return m;
}

void cs_wlog_synced(struct cs_wlog *w, uint64_t ino, uint64_t mark)
{
	uint64_t q;

	pthread_mutex_lock(&w->lock);
	for (q = w->lo; q < w->seq; q++) {
		uint32_t i = (uint32_t)(q % WL_SLOTS);

		if (w->mem[i].state == WL_DONE && w->mem[i].done <= mark &&
		    (!ino || w->mem[i].ino == ino))
			wl_retire(w, i);
	}
	wl_tail(w);
	pthread_mutex_unlock(&w->lock);
}

int cs_wlog_holds(struct cs_wlog *w, uint64_t ino)
{
	uint64_t q;
	int n = 0;

	pthread_mutex_lock(&w->lock);
	for (q = w->lo; w->by_ino[wl_ino_hash(ino)] && q < w->seq; q++) {
		const struct wl_mem *m = &w->mem[q % WL_SLOTS];

		if (m->state != WL_FREE && m->ino == ino) {
			n = 1;
			break;
		}
	}
	pthread_mutex_unlock(&w->lock);
	return n;
}

static void *wl_flusher(void *arg)
{
	struct cs_wlog *w = arg;
	struct timespec ts;
	uint64_t mark;
	int ret;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		/* nothing written to make durable: sleep until there is */
		if (!w->ndone) {
			pthread_cond_wait(&w->cond, &w->lock);
			continue;
		}
		/* a flush interval after it, or at once when half full */
		bcp_deadline_ms(&ts, w->flush_ms);
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
		if (w->stop || !w->ndone)
			continue;
		mark = w->marks;
		pthread_mutex_unlock(&w->lock);
		ret = agent_store_ret(ceph_sync_fs(w->cm));
		if (ret < 0) {
			agent_warn_rl("write log: sync of the CephFS: %s; "
				      "trying again", strerror(-ret));
			pthread_mutex_lock(&w->lock);
			w->synced_fails++;
			continue;
		}
		cs_wlog_synced(w, 0, mark);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int wl_slot_cmp(const void *a, const void *b)
{
	const struct wl_slot *x = *(struct wl_slot *const *)a;
	const struct wl_slot *y = *(struct wl_slot *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Make a logged SETATTR again, in the order the store made it (owner, then
 * mode, then times); in holds a reference.
 */
static int wl_replay_attr(struct cs_wlog *w, Inode *in,
			  const struct cs_wlog_attr *a, const UserPerm *perms)
{
	const uint32_t owner = CEPH_SETATTR_UID | CEPH_SETATTR_GID;
	const uint32_t times = CEPH_SETATTR_ATIME | CEPH_SETATTR_MTIME;
	struct ceph_statx x;
	int ret = 0;

	memset(&x, 0, sizeof(x));
	x.stx_uid = a->uid;
	x.stx_gid = a->gid;
	x.stx_mode = (uint16_t)(a->mode & 07777);
	x.stx_atime.tv_sec = a->atime;
	x.stx_atime.tv_nsec = a->atime_nsec;
	x.stx_mtime.tv_sec = a->mtime;
	x.stx_mtime.tv_nsec = a->mtime_nsec;
	if (a->mask & owner)
		ret = ceph_ll_setattr(w->cm, in, &x, (int)(a->mask & owner),
				      (UserPerm *)perms);
	if (ret == 0 && (a->mask & CEPH_SETATTR_MODE))
		ret = ceph_ll_setattr(w->cm, in, &x, CEPH_SETATTR_MODE,
				      (UserPerm *)perms);
	if (ret == 0 && (a->mask & times))
		ret = ceph_ll_setattr(w->cm, in, &x, (int)(a->mask & times),
				      (UserPerm *)perms);
	return ret;
}

/*
 * Make one entry again; 1: its file is gone, 0: made, < 0: failed.  A
 * write goes only to a regular file that is still linked.
 */
static int wl_replay_one(struct cs_wlog *w, const struct wl_slot *sl,
			 void *buf, const UserPerm *perms)
{
	inodeno_t ino = { sl->ino };
	struct ceph_statx x;
	struct Fh *fh;
	Inode *in;
	ssize_t n;
	int ret;

	n = pread(w->fd, buf, sl->len, (off_t)(WL_INDEX + sl->pos));
	if (n != (ssize_t)sl->len)
		return n < 0 ? -errno : -EIO;
	ret = ceph_ll_lookup_inode(w->cm, ino, &in);
	if (ret == -ENOENT || ret == -ESTALE)
		return 1;
	if (ret < 0)
		return ret;
	if (sl->kind == WL_ATTR) {
		struct cs_wlog_attr a;

		memcpy(&a, buf, sizeof(a));
		ret = wl_replay_attr(w, in, &a, perms);
		ceph_ll_put(w->cm, in);
		return ret == -ENOENT || ret == -ESTALE ? 1 : ret;
	}
	ret = ceph_ll_getattr(w->cm, in, &x, CEPH_STATX_MODE |
			      CEPH_STATX_NLINK, AT_SYMLINK_NOFOLLOW, perms);
	if (ret == 0 && (!S_ISREG(x.stx_mode) || x.stx_nlink == 0))
		ret = 1;
	if (ret == 0)
		ret = ceph_ll_open(w->cm, in, O_WRONLY, &fh, perms);
	if (ret == 0) {
		n = ceph_ll_write(w->cm, fh, (int64_t)sl->off, sl->len, buf);
		ret = n == (ssize_t)sl->len ? 0 : n < 0 ? (int)n : -EIO;
		ceph_ll_close(w->cm, fh);
	}
	ceph_ll_put(w->cm, in);
	return ret == -ENOENT || ret == -ESTALE ? 1 : ret;
}

/* Replay the live slots in order, sync, retire them all. */
static int wl_replay(struct cs_wlog *w, const UserPerm *perms)
{
	struct wl_slot **live;
	uint64_t bytes = 0;
	unsigned int i, n = 0, gone = 0, attrs = 0, unset = 0;
	void *buf;
	int ret = 0;

	live = calloc(WL_SLOTS, sizeof(*live));
	buf = malloc(WL_ENTRY_MAX);
	if (!live || !buf) {
		free(live);
		free(buf);
		return -ENOMEM;
	}
	for (i = 0; i < WL_SLOTS; i++) {
		struct wl_slot *sl = &w->slots[i];

		if (atomic_load(&sl->state) != WL_LIVE)
			continue;
		if (sl->len == 0 || sl->len > WL_ENTRY_MAX ||
		    sl->pos + sl->len > WL_DATA || sl->off > INT64_MAX ||
		    sl->len > INT64_MAX - sl->off ||
		    (sl->kind != WL_WRITE && sl->kind != WL_ATTR) ||
		    (sl->kind == WL_ATTR &&
		     sl->len != sizeof(struct cs_wlog_attr))) {
			agent_err("write log %s: slot %u is damaged", w->path,
				  i);
			ret = -EUCLEAN;
			goto out;
		}
		live[n++] = sl;
	}
	qsort(live, n, sizeof(*live), wl_slot_cmp);
	for (i = 0; i < n; i++) {
		ret = wl_replay_one(w, live[i], buf, perms);
		if (ret < 0 && live[i]->kind == WL_ATTR) {
			/* no bytes to lose: the start goes on */
			agent_warn("write log %s: replaying a change of the "
				   "attributes of inode %#" PRIx64 ": %s",
				   w->path, live[i]->ino, strerror(-ret));
			unset++;
			continue;
		}
		if (ret < 0) {
			agent_err("write log %s: replaying a write of %u bytes "
				  "at %" PRIu64 " of inode %#" PRIx64 ": %s",
				  w->path, live[i]->len, live[i]->off,
				  live[i]->ino, strerror(-ret));
			goto out;
		}
		if (ret == 1)
			gone++;
		else if (live[i]->kind == WL_ATTR)
			attrs++;
		else
			bytes += live[i]->len;
	}
	if (n) {
		ret = ceph_sync_fs(w->cm);
		if (ret < 0) {
			agent_err("write log %s: sync after the replay: %s",
				  w->path, strerror(-ret));
			goto out;
		}
		agent_info("write log: replayed %u writes (%" PRIu64 " bytes) "
			   "and %u changes of attributes a previous run "
			   "acknowledged; %u were of files removed since",
			   n - gone - attrs - unset, bytes, attrs, gone);
	}
	for (i = 0; i < n; i++)
		atomic_store(&live[i]->state, 0);
	ret = 0;
out:
	free(live);
	free(buf);
	return ret;
}

/* The log file: made when missing, checked when there. */
static int wl_file(struct cs_wlog *w, const uint8_t tag[16])
{
	struct wl_hdr h = { 0 };
	struct stat st;
	off_t size = (off_t)(WL_INDEX + WL_DATA);

	if (fstat(w->fd, &st) < 0)
		return -errno;
	if (st.st_size == 0) {
		h.magic = WL_MAGIC;
		h.nslots = WL_SLOTS;
		h.index_len = WL_INDEX;
		h.data_len = WL_DATA;
		memcpy(h.tag, tag, sizeof(h.tag));
		if (ftruncate(w->fd, size) < 0 ||
		    pwrite(w->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
			return errno ? -errno : -EIO;
		return 0;
	}
	if (pread(w->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    st.st_size != size ||
	    (h.magic != WL_MAGIC && h.magic != WL_MAGIC1) ||
	    h.nslots != WL_SLOTS || h.index_len != WL_INDEX ||
	    h.data_len != WL_DATA || memcmp(h.tag, tag, sizeof(h.tag))) {
		agent_err("write log %s is not one this agent made for this "
			  "CephFS; move it away only if it holds nothing "
			  "acknowledged", w->path);
		return -EUCLEAN;
	}
	if (h.magic == WL_MAGIC1) {
		h.magic = WL_MAGIC;
		if (pwrite(w->fd, &h.magic, sizeof(h.magic), 0) !=
		    (ssize_t)sizeof(h.magic))
			return errno ? -errno : -EIO;
	}
	return 0;
}

/* Unmap and close a log file (its lock goes with it). */
static void wl_unload(struct cs_wlog *w)
{
	if (w->map)
		munmap(w->map, WL_INDEX);
	if (w->fd >= 0)
		close(w->fd);
	free(w->path);
	w->map = NULL;
	w->fd = -1;
	w->path = NULL;
}

/*
 * Take log file n of tag: 1 when another agent holds it (or, without
 * create, it is not there), 0 when locked, checked and replayed, < 0 on
 * an error (logged).
 */
static int wl_load(struct cs_wlog *w, const char *dir,
		   const uint8_t tag[16], unsigned int n, int create,
		   const UserPerm *perms)
{
	struct stat a, b;
	uint64_t t0, t1;
	int ret;

	memcpy(&t0, tag, sizeof(t0));
	memcpy(&t1, tag + 8, sizeof(t1));
	if (asprintf(&w->path, "%s/cephfs-%016" PRIx64 "%016" PRIx64
		     "-%u.wlog", dir, t0, t1, n) < 0) {
		w->path = NULL;
		return -ENOMEM;
	}
	w->fd = open(w->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW |
		     (create ? O_CREAT : 0), 0600);
	if (w->fd < 0) {
		ret = -errno;
		if (ret == -ENOENT && !create)
			return 1;
		agent_err("write log %s: %s", w->path, strerror(-ret));
		return ret;
	}
	if (flock(w->fd, LOCK_EX | LOCK_NB) < 0) {
		ret = -errno;
		if (ret == -EWOULDBLOCK)
			return 1;
		agent_err("write log %s: %s", w->path, strerror(-ret));
		return ret;
	}
	/* another agent's start took it for an orphan and removed it */
	if (stat(w->path, &a) < 0 || fstat(w->fd, &b) < 0 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return 1;
	ret = wl_file(w, tag);
	if (ret < 0) {
		if (ret != -EUCLEAN)
			agent_err("write log %s: %s", w->path, strerror(-ret));
		return ret;
	}
	w->map = mmap(NULL, WL_INDEX, PROT_READ | PROT_WRITE, MAP_SHARED,
		      w->fd, 0);
	if (w->map == MAP_FAILED) {
		w->map = NULL;
		ret = -errno;
		agent_err("write log %s: %s", w->path, strerror(-ret));
		return ret;
	}
	w->slots = (struct wl_slot *)((char *)w->map + WL_SLOTS_AT);
	return wl_replay(w, perms);
}

/*
 * The logs of this CephFS no running agent holds but w's own: replayed
 * and removed.
 */
static int wl_orphans(struct cs_wlog *w, const char *dir,
		      const uint8_t tag[16], unsigned int own,
		      const UserPerm *perms)
{
	struct cs_wlog o;
	unsigned int n;
	int ret;

	for (n = 0; n < WL_FILES; n++) {
		if (n == own)
			continue;
		memset(&o, 0, sizeof(o));
		o.fd = -1;
		o.cm = w->cm;
		ret = wl_load(&o, dir, tag, n, 0, perms);
		if (ret == 0 && unlink(o.path) < 0)
			agent_warn("write log %s: %s", o.path,
				   strerror(errno));
		wl_unload(&o);
		if (ret < 0)
			return ret;
	}
	return 0;
}

struct cs_wlog *cs_wlog_open(const char *dir, const uint8_t tag[16],
			     struct ceph_mount_info *cm, UserPerm *perms,
			     int *err)
{
	const char *env = getenv("BLUECACHE_CEPH_FLUSH_MS");
	struct cs_wlog *w;
	unsigned int i, n;
	int ret;

	*err = 0;
	if (!dir || !strcmp(dir, "none")) {
		agent_info("store cephfs: no runtime directory for a write "
			   "log: each write waits for the cluster");
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		*err = -ENOMEM;
		return NULL;
	}
	w->fd = -1;
	w->cm = cm;
	w->flush_ms = WL_FLUSH_MS;
	if (env && atoi(env) > 0)
		w->flush_ms = (unsigned int)atoi(env);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		ret = -errno;
		agent_err("write log directory %s: cannot create it: %s",
			  dir, strerror(-ret));
		goto fail;
	}
	for (n = 0; n < WL_FILES; n++) {
		ret = wl_load(w, dir, tag, n, 1, perms);
		if (ret <= 0)
			break;
		wl_unload(w);
	}
	if (n == WL_FILES) {
		agent_err("write log: %u agents already log writes to this "
			  "CephFS in %s", WL_FILES, dir);
		ret = -EBUSY;
	}
	if (ret == 0)
		ret = wl_orphans(w, dir, tag, n, perms);
	if (ret < 0)
		goto fail;
	for (i = 0; i < WL_SLOTS; i++)
		w->mem[i].state = WL_FREE;
	pthread_mutex_init(&w->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&w->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	ret = -pthread_create(&w->flusher, NULL, wl_flusher, w);
	if (ret < 0) {
		agent_err("write log: flusher thread: %s", strerror(-ret));
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		goto fail;
	}
	return w;

fail:
	wl_unload(w);
	free(w);
	*err = ret;
	return NULL;
}

void cs_wlog_close(struct cs_wlog *w)
{
	uint64_t mark;
	int ret;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->flusher, NULL);
	mark = cs_wlog_mark(w);
	ret = ceph_sync_fs(w->cm);
	if (ret == 0)
		cs_wlog_synced(w, 0, mark);
	else
		agent_err("write log: sync of the CephFS at exit: %s; the "
			  "next start replays what it holds", strerror(-ret));
	agent_info("write log: %" PRIu64 " writes logged, %" PRIu64
		   " waited for the cluster (log full or write too large), "
		   "%" PRIu64 " syncs failed, %u left to replay", w->logged,
		   w->unlogged, w->synced_fails, w->nlive);
	/* nothing to replay: the next start makes a fresh one */
	if (!w->nlive && unlink(w->path) < 0)
		agent_warn("write log %s: %s", w->path, strerror(errno));
	munmap(w->map, WL_INDEX);
	close(w->fd);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w->path);
	free(w);
}
