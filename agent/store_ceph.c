/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store_ceph.c - the cephfs store of bluecache-agent (see store.h): the
 * objects are the files of a CephFS, reached with libcephfs's low-level
 * (ll, Inode-based) API, so a host sees a local filesystem while the DPU
 * runs the Ceph client.
 *
 * The backend holds the one mount (struct ceph_mount_info) every session
 * shares; the handle API is thread-safe.  A session's store keeps its own
 * handle table (handle -> node: one Inode reference and the host's lookup
 * count, one node per inode number unless REBIND installed a second) and
 * its own open files (fh -> a Fh, or a directory stream).  Every call may
 * wait for the cluster (AGENT_STORE_BLOCKING): the session runs them on
 * the blocking pool, several at once, except those store.h marks
 * "worker", which here never call into Ceph except ceph_ll_put(), which
 * only drops a reference in the client's cache.
 *
 * Identity: the store acts on the CephFS as root (one UserPerm for the
 * backend); the host's kernel checked permissions already.  What a host
 * creates is given to its caller afterwards, as the session's identity
 * policy maps the ids, exactly as the posix store does.
 *
 * Lifetimes: a node lives while the host holds lookups on it and while a
 * call uses it (refs); the last reference puts its Inode.  An open file
 * lives until RELEASE and until the last in-flight transfer or call drops
 * its reference; closing a Fh may flush data (wait for the cluster), so
 * the last reference hands the Fh to the backend's closer thread rather
 * than close it on the worker.
 *
 * Lock order: a session's lock (ceph_store.lock), then the backend's
 * watch_lock, then a notify stripe lock (notify.h).  No lock of ours is
 * held across a call into libcephfs but ceph_ll_put() and a
 * ceph_ll_getattr() answered from the client's cache (AT_STATX_DONT_SYNC,
 * cs_watch_hold()), which only take the client's own lock.  A
 * directory's stream has its own lock (one READDIR at a time on one fh),
 * taken with no other lock held.
 *
 * Durability: a write is answered once it is in the write log
 * (ceph_wlog.h) or the cluster has it (cs_wflags()), a SETATTR once the
 * write log or the cluster has it (cfs_setattr()), as the posix store's
 * are once the DPU's kernel has them: the daemon replays only what was
 * not answered.
 *
 * Changes made by another Ceph client (a second agent on the same
 * CephFS, a ceph-fuse) reach the sessions holding the objects as
 * agent_notify_external() events: from libcephfs's ino_cb and dentry_cb,
 * and from the sweeper, which re-reads the attributes of every held
 * object every CS_SWEEP_MS, a message to the MDS only where another
 * client's change revoked our caps (see "changes made by other Ceph
 * clients" below for what Ceph tells and what it does not).
 */
/* libcephfs.h refuses a 32-bit off_t (its readdir offsets are 64-bit) */
#define _FILE_OFFSET_BITS 64
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <cephfs/libcephfs.h>

#include "ceph_wlog.h"
#include "notify.h"
#include "resume.h"
#include "store.h"

#define CS_BUCKETS_MIN		1024	/* doubled as nodes outnumber them */
#define CS_COPY_MAX		(64ull << 20)	/* per COPY_FILE_RANGE */
#define CS_COPY_BUF		(1u << 20)	/* bytes moved per read/write */
#define CS_FID_FORMAT		0xc1	/* fid[0] of a cephfs fid */
#define CS_FID_TAG_OFF		8	/* 16 bytes naming the CephFS */
#define CS_FID_INO_OFF		24	/* 8 bytes, little-endian */
#define CS_WANT			(CEPH_STATX_BASIC_STATS)
#define CS_WATCH_BUCKETS	4096	/* chains of held objects */
#define CS_SWEEP_MS		250	/* a held object's attributes re-read */
#define CS_SWEEP_FILES		1000	/* at most, per pass: the rest next */
#define CS_SWEEP_DIRS		100
#define CS_SNAP_MAX		4096	/* names remembered per directory */
#define CS_SELF_MAX		32	/* own names remembered per sweep */
#define CS_SELF_ANY		UINT64_MAX /* what an own name names: unknown */
#define CS_SCATTER_MS		15000	/* a name change's lazy directory stats */

struct cs_watch;
struct ceph_backend;
static void cs_watch_hold(struct ceph_backend *cb, uint64_t ino, Inode *in);
static void cs_watch_unhold(struct ceph_backend *cb, uint64_t ino);
static void cs_watch_self(struct ceph_backend *cb, uint64_t ino,
			  const char *name, uint64_t now);
static void cs_watch_name(struct ceph_backend *cb, uint64_t dir,
			  const char *name, uint64_t ino);
static void cs_dio_put(struct ceph_backend *cb, uint64_t ino);
static int cs_dio_open(struct ceph_backend *cb, uint64_t ino);
struct cs_close;
static int cs_linger(struct ceph_backend *cb, struct cs_close *c,
		     int stopping);

#define CS_DIO_BUCKETS	1024	/* cs_dio_get() */

/* ---- the backend: one mount for the agent ---- */

/* A Fh or a directory stream whose last user is gone, to be closed. */
struct cs_close {
	struct cs_close *next;
	struct ceph_backend *cb;
	struct Fh *fh;
	struct ceph_dir_result *dir;
	uint64_t dio_ino;		/* cs_dio_put() once closed; 0: none */
	uint64_t linger_ino;		/* fh's file, to keep if removed */
};

struct ceph_backend {
	struct agent_backend base;	/* first */
	struct ceph_mount_info *cm;
	UserPerm *perms;		/* root: the host checked already */
	uint64_t dev;			/* notify objects are (dev, ino) */
	uint8_t tag[16];		/* names this CephFS in fids */
	/*
	 * The closer: Fhs and directory streams closed off the worker.
	 * Under close_lock: close_head, close_stop.
	 */
	pthread_t closer;
	pthread_mutex_t close_lock;
	pthread_cond_t close_cond;
	struct cs_close *close_head;
	int close_stop;
	/*
	 * Changes by other Ceph clients (cs_watch_*): the objects the
	 * sessions hold, swept by the sweeper thread.  Under watch_lock:
	 * watch, nwatch, sweep_stop.
	 */
	struct cs_sweeper {
		struct ceph_backend *cb;
		int dirs;		/* directories, or the rest */
		size_t cursor;		/* the bucket the next pass starts at */
		pthread_t thread;
	} sweeper[2];
	pthread_mutex_t watch_lock;
	pthread_cond_t sweep_cond;
	struct cs_watch **watch;	/* CS_WATCH_BUCKETS chains */
	size_t nwatch;
	size_t nfresh;			/* watches not swept yet */
	int sweep_stop;
	int sweeping;			/* the sweeper runs */
	/* BLUECACHE_CEPH_SWEEP_PAUSE_MS: a wait between read and compare */
	unsigned int sweep_pause_ms;
	/* events published, by source (logged at close) */
	atomic_ulong ev_ino_cb, ev_dentry_cb, ev_sweep, ev_self;
	atomic_ulong ev_sweep_names;	/* of ev_sweep: ENTRY, DELETE */
	/* Files written past the object cacher (cs_dio_*): under dio_lock. */
	pthread_mutex_t dio_lock;
	struct cs_dio *dio[CS_DIO_BUCKETS];
	size_t ndirect;			/* of them marked direct */
	/* acknowledged writes not yet in the cluster, or NULL: none */
	struct cs_wlog *wlog;
};

static void *cs_closer_main(void *arg)
{
	struct ceph_backend *cb = arg;
	struct cs_close *c;
	int stopping;

	pthread_mutex_lock(&cb->close_lock);
	for (;;) {
		while (!cb->close_head && !cb->close_stop)
			pthread_cond_wait(&cb->close_cond, &cb->close_lock);
		c = cb->close_head;
		if (!c)
			break;		/* stopping, and drained */
		cb->close_head = c->next;
		stopping = cb->close_stop;
		pthread_mutex_unlock(&cb->close_lock);
		if (c->linger_ino && cs_linger(cb, c, stopping)) {
			pthread_mutex_lock(&cb->close_lock);
			continue;	/* linger.c has it now */
		}
		if (c->fh)
			ceph_ll_close(cb->cm, c->fh);
		if (c->dir)
			ceph_ll_releasedir(cb->cm, c->dir);
		if (c->dio_ino)
			cs_dio_put(cb, c->dio_ino);
		free(c);
		pthread_mutex_lock(&cb->close_lock);
	}
	pthread_mutex_unlock(&cb->close_lock);
	return NULL;
}

/* Stop the closer once it has drained its queue, and wait for it. */
static void cs_closer_join(struct ceph_backend *cb)
{
	pthread_mutex_lock(&cb->close_lock);
	cb->close_stop = 1;
	pthread_cond_signal(&cb->close_cond);
	pthread_mutex_unlock(&cb->close_lock);
	pthread_join(cb->closer, NULL);
}

static void cs_close_queue(struct ceph_backend *cb, struct cs_close *c)
{
	pthread_mutex_lock(&cb->close_lock);
	c->next = cb->close_head;
	cb->close_head = c;
	pthread_cond_signal(&cb->close_cond);
	pthread_mutex_unlock(&cb->close_lock);
}

/* linger.c lets go of a Fh it kept: close it on the closer after all */
static void cs_linger_close(void *obj)
{
	struct cs_close *c = obj;

	c->linger_ino = 0;
	cs_close_queue(c->cb, c);
}

/*
 * On the closer: c's Fh, of a session that ended with it open, is handed
 * to linger.c when its file (c->linger_ino) has no name left and no other
 * Fh of this agent holds it, so that its host, reconnecting, finds it
 * (cfs_reopen() claims it); 1: kept.  A Fh closed while the cluster does
 * not answer waits as long anyway.
 */
static int cs_linger(struct ceph_backend *cb, struct cs_close *c,
		     int stopping)
{
	inodeno_t ino = { c->linger_ino };
	struct ceph_statx x;
	Inode *in;
	int ret;

	if (!c->fh || stopping)
		return 0;
	/* the host opened it again already (REOPEN came first) */
	if (cs_dio_open(cb, c->linger_ino) > (c->dio_ino ? 1 : 0))
		return 0;
	if (ceph_ll_lookup_inode(cb->cm, ino, &in) < 0)
		return 0;
	ret = ceph_ll_getattr(cb->cm, in, &x, CEPH_STATX_MODE |
			      CEPH_STATX_NLINK, AT_SYMLINK_NOFOLLOW,
			      cb->perms);
	ceph_ll_put(cb->cm, in);
	if (ret < 0 || !S_ISREG(x.stx_mode) || x.stx_nlink)
		return 0;
	return agent_linger_keep_obj(cb->dev, c->linger_ino, NULL,
				     cs_linger_close, c);
}

/*
 * Close fh or dir on the closer (never blocks the caller), then let go of
 * dio_ino's count (cs_dio_get()) when not 0; a Fh whose file (linger_ino,
 * 0: none) may have no name left is kept a while if so (cs_linger()).
 * Out of memory: close here, which may wait, rather than leak a
 * capability.
 */
static void cs_close_kept(struct ceph_backend *cb, struct Fh *fh,
			  struct ceph_dir_result *dir, uint64_t dio_ino,
			  uint64_t linger_ino)
{
	struct cs_close *c = malloc(sizeof(*c));

	if (!c) {
		if (fh)
			ceph_ll_close(cb->cm, fh);
		if (dir)
			ceph_ll_releasedir(cb->cm, dir);
		if (dio_ino)
			cs_dio_put(cb, dio_ino);
		return;
	}
	c->cb = cb;
	c->fh = fh;
	c->dir = dir;
	c->dio_ino = dio_ino;
	c->linger_ino = linger_ino;
	cs_close_queue(cb, c);
}

static void cs_close_later(struct ceph_backend *cb, struct Fh *fh,
			   struct ceph_dir_result *dir, uint64_t dio_ino)
{
	cs_close_kept(cb, fh, dir, dio_ino, 0);
}

/*
 * Files written past the object cacher.  A Fh opened O_DIRECT reads and
 * writes the OSDs at once (Client::_read, Client::_write), which costs a
 * 4 KiB read or write less than the cacher does; but a direct write
 * leaves what the cacher holds of the range as it was, and a Fh that
 * reads through the cacher would find the old bytes there.  So a file is
 * written past the cacher only from a moment when no Fh that goes
 * through the cacher is open on it, and from then on every Fh of it is
 * O_DIRECT, for the agent's life (the cacher may keep the old bytes after
 * the last Fh closed).  cached counts the open Fhs of ino that go through
 * the cacher; an entry lives while it counts one or is direct.
 */
#define CS_DIO_MAX	4096	/* direct files; past that, through the cacher */

struct cs_dio {
	struct cs_dio *next;
	uint64_t ino;
	uint32_t cached;
	int direct;
};

/*
 * The flags of a Fh about to be opened on ino, for flags (O_DIRECT: what
 * the application asked for): *out; *counted is 1 when that Fh goes
 * through the cacher, and cs_dio_put() must follow its close (or the
 * failure to open it).  0 or -ENOMEM.
 */
static int cs_dio_get(struct ceph_backend *cb, uint64_t ino, uint32_t flags,
		      uint32_t *out, int *counted)
{
	struct cs_dio **head = &cb->dio[ino % CS_DIO_BUCKETS], *d;
	int ret = 0;

	*counted = 0;
	*out = flags;
	pthread_mutex_lock(&cb->dio_lock);
	for (d = *head; d && d->ino != ino; d = d->next)
		;
	if (d && d->direct) {
		*out |= O_DIRECT;
		goto out;
	}
	/* a Fh that only reads directly never looks in the cacher */
	if ((flags & O_DIRECT) && (flags & O_ACCMODE) == O_RDONLY)
		goto out;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			ret = -ENOMEM;
			goto out;
		}
		d->ino = ino;
		d->next = *head;
		*head = d;
	}
	if ((flags & O_DIRECT) && d->cached == 0 &&
	    cb->ndirect < CS_DIO_MAX) {
		d->direct = 1;
		cb->ndirect++;
		goto out;
	}
	d->cached++;
	*counted = 1;
	*out &= ~(uint32_t)O_DIRECT;
out:
	pthread_mutex_unlock(&cb->dio_lock);
	return ret;
}

/* A Fh of ino that went through the cacher is closed. */
static void cs_dio_put(struct ceph_backend *cb, uint64_t ino)
{
	struct cs_dio **pp = &cb->dio[ino % CS_DIO_BUCKETS], *d;

	pthread_mutex_lock(&cb->dio_lock);
	while ((d = *pp) && d->ino != ino)
		pp = &d->next;
	if (d && d->cached && --d->cached == 0 && !d->direct) {
		*pp = d->next;
		free(d);
	}
	pthread_mutex_unlock(&cb->dio_lock);
}

/* How many Fhs of ino that go through the cacher are open. */
static int cs_dio_open(struct ceph_backend *cb, uint64_t ino)
{
	struct cs_dio *d;
	int n = 0;

	pthread_mutex_lock(&cb->dio_lock);
	for (d = cb->dio[ino % CS_DIO_BUCKETS]; d && d->ino != ino;
	     d = d->next)
		;
	if (d)
		n = (int)d->cached;
	pthread_mutex_unlock(&cb->dio_lock);
	return n;
}

static void cs_dio_free(struct ceph_backend *cb)
{
	struct cs_dio *d;
	size_t i;

	for (i = 0; i < CS_DIO_BUCKETS; i++)
		while ((d = cb->dio[i])) {
			cb->dio[i] = d->next;
			free(d);
		}
	pthread_mutex_destroy(&cb->dio_lock);
}

/* ---- a session's store ---- */

struct ceph_node {
	uint64_t handle;
	uint64_t ino;
	uint32_t mode;			/* S_IFMT bits */
	Inode *in;			/* one reference, put with the node */
	/* under the session's lock: */
	uint64_t nlookup;
	unsigned int refs;		/* 1 while in the tables + users */
	int linked;			/* in the tables */
	/*
	 * A handle a host still holds for an object that is gone (its
	 * REBIND found nothing): every request on it is ESTALE, but its
	 * value is not handed out again until the host forgets it.  Only in
	 * the by-handle table; in is NULL.
	 */
	int dead;
	struct ceph_node *hnext;	/* by handle */
	struct ceph_node *inext;	/* by ino */
	/* registered while the session takes notifications (notify.h) */
	struct agent_notify_hold hold;
};

/*
 * An open file.  Batches and pool calls hold pointers to it while they
 * run, so it never moves: an array of fixed chunks that only grows.
 * Under the session's lock: used, closing, refs, gen, next_free.  fh,
 * dir and node are set when it opens and stay until its last reference
 * is gone.
 */
struct agent_file {
	int used;
	int isdir;
	int closing;			/* RELEASE seen */
	unsigned int refs;		/* 1 for the fh + in-flight users */
	struct Fh *fh;			/* a regular file */
	struct ceph_dir_result *dir;	/* a directory */
	struct ceph_node *node;		/* referenced while open */
	uint64_t dio_ino;		/* fh counted by cs_dio_get(), or 0 */
	int logged;			/* writes go to the wlog first */
	pthread_mutex_t dlock;		/* one READDIR at a time on dir */
	int dlock_init;
	uint32_t gen;
	uint32_t idx;
	uint32_t next_free;
};

#define FILE_CHUNK	64
#define FILE_NONE	UINT32_MAX

struct ceph_store {
	struct agent_store base;	/* first */
	struct ceph_backend *cb;
	struct ceph_mount_info *cm;
	const struct agent_ident *ident;
	uint64_t root_handle;
	pthread_mutex_t lock;		/* everything below */
	struct ceph_node *root;
	uint64_t next_handle;
	uint64_t nnodes;
	struct ceph_node **by_handle;
	struct ceph_node **by_ino;
	size_t nbuckets;		/* a power of two */
	struct agent_file **chunks;
	uint32_t nfiles, nchunks, free_head, live_files;
	/* set once by notify_start (the worker), read by publishers */
	struct agent_notify_sess *ns;
};

static unsigned int cs_max_handles(void)
{
	return agent_cfg.max_handles ? agent_cfg.max_handles :
				       AGENT_HANDLES_MAX;
}

static unsigned int cs_max_files(void)
{
	return agent_cfg.max_files ? agent_cfg.max_files : AGENT_FILES_MAX;
}

static struct agent_file *cs_file_at(const struct ceph_store *s, uint32_t idx)
{
	return &s->chunks[idx / FILE_CHUNK][idx % FILE_CHUNK];
}

static size_t cs_hash(const struct ceph_store *s, uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	return (size_t)(v & (s->nbuckets - 1));
}

/* Copy a name into a C string after checking it again at this boundary. */
static int cs_name(const char *name, size_t len, char out[256])
{
	enum bcp_err why;
	int ret;

	ret = bcp_name_check(name, len, &why);
	if (ret < 0)
		return ret;
	memcpy(out, name, len);
	out[len] = '\0';
	return 0;
}

static struct agent_obj cs_obj(const struct ceph_store *s, uint64_t ino)
{
	struct agent_obj o = { s->cb->dev, ino };

	return o;
}

static void cs_pub_inode(struct ceph_store *s, uint64_t ino, int64_t off,
			 int64_t len)
{
	struct agent_change c = {
		.kind = BCP_NOTIFY_INODE, .obj = cs_obj(s, ino),
		.offset = off, .length = len,
	};

	cs_watch_self(s->cb, ino, NULL, 0);
	agent_notify_publish(s->ns, &c);
}

/*
 * name in parent changed: ENTRY (obj, when known, too) or DELETE.  now:
 * what the name names after the change, 0 nothing, CS_SELF_ANY unknown
 * (the sweep tells apart another client's change under the same name).
 */
static void cs_pub_name(struct ceph_store *s, uint32_t kind,
			const struct ceph_node *parent, const char *name,
			uint64_t ino, uint64_t now)
{
	struct agent_change c = {
		.kind = kind, .parent = cs_obj(s, parent->ino),
		.name = name, .len = strlen(name),
	};

	cs_watch_self(s->cb, parent->ino, name, now);
	if (ino) {
		c.obj = cs_obj(s, ino);
		cs_watch_self(s->cb, ino, NULL, 0);
	}
	agent_notify_publish(s->ns, &c);
}

/*
 * What name in parent is before it is removed or replaced: *ino 0 when
 * nobody may care or it is not there.
 */
static void cs_pub_peek(struct ceph_store *s, const struct ceph_node *parent,
			const char *name, uint64_t *ino, uint32_t *nlink)
{
	struct ceph_statx x;
	Inode *in;

	*ino = 0;
	*nlink = 0;
	if (!agent_notify_wanted(s->ns) ||
	    ceph_ll_lookup(s->cm, parent->in, name, &in, &x,
			   CEPH_STATX_INO | CEPH_STATX_MODE |
			   CEPH_STATX_NLINK, AT_SYMLINK_NOFOLLOW,
			   s->cb->perms) < 0)
		return;
	ceph_ll_put(s->cm, in);
	*ino = x.stx_ino;
	*nlink = S_ISDIR(x.stx_mode) ? 1 : x.stx_nlink;
}

/*
 * A holder's kernel takes DELETE as the end of the object (store_posix.c).
 * now: what the name names afterwards (cs_pub_name()).
 */
static void cs_pub_gone(struct ceph_store *s, const struct ceph_node *parent,
			const char *name, uint64_t ino, uint32_t nlink,
			uint64_t now)
{
	cs_pub_name(s, nlink == 1 ? BCP_NOTIFY_DELETE : BCP_NOTIFY_ENTRY,
		    parent, name, ino, now);
}

static void cs_attr_fill(const struct ceph_statx *x, struct bcp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = x->stx_ino;
	a->size = x->stx_size;
	a->blocks = x->stx_blocks;
	a->atime = x->stx_atime.tv_sec;
	a->atime_nsec = x->stx_atime.tv_nsec;
	a->mtime = x->stx_mtime.tv_sec;
	a->mtime_nsec = x->stx_mtime.tv_nsec;
	a->ctime = x->stx_ctime.tv_sec;
	a->ctime_nsec = x->stx_ctime.tv_nsec;
	a->mode = x->stx_mode;
	a->nlink = x->stx_nlink;
	a->uid = x->stx_uid;
	a->gid = x->stx_gid;
	a->blksize = x->stx_blksize;
	a->rdev = x->stx_rdev;
}

/*
 * fid: format, tag of this CephFS, inode number, zeros, and a MAC over
 * all of it and the tag made with the agent's handle key (resume.h), so
 * that a host cannot name an inode it was never given (one outside the
 * served path, say) by writing its number into a fid.
 */
static void cs_fid_make(const struct ceph_store *s, uint64_t ino,
			uint8_t fid[BCP_FID_LEN])
{
	unsigned int i;

	memset(fid, 0, BCP_FID_LEN);
	fid[0] = CS_FID_FORMAT;
	memcpy(fid + CS_FID_TAG_OFF, s->cb->tag, sizeof(s->cb->tag));
	for (i = 0; i < 8; i++)
		fid[CS_FID_INO_OFF + i] = (uint8_t)(ino >> (8 * i));
	/* without a key the MAC stays zero: such a fid never passes */
	agent_fid_store_seal(s->cb->tag, sizeof(s->cb->tag), fid);
}

/* The inode number a fid of this CephFS names, or 0. */
static uint64_t cs_fid_ino(const struct ceph_store *s,
			   const uint8_t fid[BCP_FID_LEN])
{
	uint8_t want[BCP_FID_LEN];
	uint64_t ino = 0;
	unsigned int i;

	for (i = 0; i < 8; i++)
		ino |= (uint64_t)fid[CS_FID_INO_OFF + i] << (8 * i);
	if (!ino)
		return 0;
	if (agent_fid_store_check(s->cb->tag, sizeof(s->cb->tag), fid) < 0)
		return 0;
	cs_fid_make(s, ino, want);
	return memcmp(want, fid, AGENT_FID_MAC_OFF) ? 0 : ino;
}

static void cs_entry_fill(const struct ceph_store *s,
			  const struct ceph_node *n, const struct ceph_statx *x,
			  struct bcp_entry *out)
{
	memset(out, 0, sizeof(*out));
	out->handle = n->handle;
	cs_attr_fill(x, &out->attr);
	cs_fid_make(s, n->ino, out->fid);
}

/* ---- the handle table (all under s->lock) ---- */

static struct ceph_node *cs_node_any(struct ceph_store *s, uint64_t handle)
{
	struct ceph_node *n;

	for (n = s->by_handle[cs_hash(s, handle)]; n; n = n->hnext)
		if (n->handle == handle)
			return n;
	return NULL;
}

static void cs_hash_grow(struct ceph_store *s)
{
	struct ceph_node **bh, **bi, *n, *next;
	size_t old = s->nbuckets, i, b;

	if (s->nnodes < 2 * old || old >= ((size_t)1 << 28))
		return;
	bh = calloc(old * 2, sizeof(*bh));
	bi = calloc(old * 2, sizeof(*bi));
	if (!bh || !bi) {
		free(bh);
		free(bi);
		return;
	}
	s->nbuckets = old * 2;
	for (i = 0; i < old; i++) {
		for (n = s->by_handle[i]; n; n = next) {
			next = n->hnext;
			b = cs_hash(s, n->handle);
			n->hnext = bh[b];
			bh[b] = n;
		}
		for (n = s->by_ino[i]; n; n = next) {
			next = n->inext;
			b = cs_hash(s, n->ino);
			n->inext = bi[b];
			bi[b] = n;
		}
	}
	free(s->by_handle);
	free(s->by_ino);
	s->by_handle = bh;
	s->by_ino = bi;
}

static uint64_t cs_handle_next(struct ceph_store *s)
{
	while (s->next_handle < 2 || cs_node_any(s, s->next_handle))
		s->next_handle++;
	return s->next_handle++;
}

static void cs_node_link(struct ceph_store *s, struct ceph_node *n)
{
	size_t b;

	b = cs_hash(s, n->handle);
	n->hnext = s->by_handle[b];
	s->by_handle[b] = n;
	if (!n->dead) {
		b = cs_hash(s, n->ino);
		n->inext = s->by_ino[b];
		s->by_ino[b] = n;
		if (s->ns) {
			agent_notify_hold(&n->hold, s->ns, cs_obj(s, n->ino),
					  n->handle);
			cs_watch_hold(s->cb, n->ino, n->in);
		}
	}
	n->linked = 1;
	s->nnodes++;
	cs_hash_grow(s);
}

static void cs_node_unlink(struct ceph_store *s, struct ceph_node *n)
{
	struct ceph_node **pp;

	for (pp = &s->by_handle[cs_hash(s, n->handle)]; *pp;
	     pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	}
	for (pp = n->dead ? NULL : &s->by_ino[cs_hash(s, n->ino)];
	     pp && *pp; pp = &(*pp)->inext) {
		if (*pp == n) {
			*pp = n->inext;
			break;
		}
	}
	if (n->hold.ns)
		cs_watch_unhold(s->cb, n->ino);
	agent_notify_unhold(&n->hold);
	n->linked = 0;
	s->nnodes--;
}

/* Drop a reference taken under s->lock; the last one puts the Inode. */
static int cs_node_unref_locked(struct ceph_node *n)
{
	return --n->refs == 0;
}

static void cs_node_free(struct ceph_store *s, struct ceph_node *n)
{
	if (n->in)
		ceph_ll_put(s->cm, n->in);
	free(n);
}

static void cs_node_put(struct ceph_store *s, struct ceph_node *n)
{
	int last;

	if (!n)
		return;
	pthread_mutex_lock(&s->lock);
	last = cs_node_unref_locked(n);
	pthread_mutex_unlock(&s->lock);
	if (last)
		cs_node_free(s, n);
}

/*
 * The live node under handle, referenced for the call (cs_node_put()),
 * or NULL: ESTALE to the host.
 */
static struct ceph_node *cs_node_get(struct ceph_store *s, uint64_t handle)
{
	struct ceph_node *n;

	pthread_mutex_lock(&s->lock);
	n = cs_node_any(s, handle);
	if (n && n->dead)
		n = NULL;
	if (n)
		n->refs++;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* A referenced directory node, or -errno. */
static int cs_dir_get(struct ceph_store *s, uint64_t handle,
		      struct ceph_node **out)
{
	struct ceph_node *n = cs_node_get(s, handle);

	if (!n)
		return -ESTALE;
	if (n->mode != S_IFDIR) {
		cs_node_put(s, n);
		return -ENOTDIR;
	}
	*out = n;
	return 0;
}

/*
 * BCP_MODE_NO_XATTRS for in when the host takes it (AGENT_STORE_XATTR_HINT):
 * a listxattr of size 0, answered from the Ceph client's copy while it
 * holds the inode's xattr capability; a symlink's extended attributes are
 * never served (cfs_getxattr()).
 */
static uint32_t cs_xattr_hint(struct ceph_store *s, Inode *in,
			      const struct ceph_statx *x)
{
	size_t len = 0;

	if (!(s->base.flags & AGENT_STORE_XATTR_HINT))
		return 0;
	if (S_ISLNK(x->stx_mode))
		return BCP_MODE_NO_XATTRS;
	if (ceph_ll_listxattr(s->cm, in, NULL, 0, &len, s->cb->perms) < 0)
		return 0;
	return len == 0 ? BCP_MODE_NO_XATTRS : 0;
}

/*
 * Take a lookup reference on in (whose Ceph reference moves here): the
 * node that has its inode number already, or a new one.  handle: 0 for
 * a new value, or the value to install (REBIND, which always makes a new
 * node).  With out, the entry; with nout, the node, referenced.
 */
static int cs_node_add(struct ceph_store *s, Inode *in,
		       const struct ceph_statx *x, uint64_t handle,
		       uint64_t nlookup, struct bcp_entry *out,
		       struct ceph_node **nout)
{
	struct ceph_node *n = NULL, *fresh;
	uint32_t hint = 0;

	if (out)
		hint = cs_xattr_hint(s, in, x);
	fresh = calloc(1, sizeof(*fresh));
	pthread_mutex_lock(&s->lock);
	if (!handle) {
		for (n = s->by_ino[cs_hash(s, x->stx_ino)]; n; n = n->inext)
			if (n->ino == x->stx_ino)
				break;
	}
	if (n) {
		n->nlookup += nlookup;
	} else {
		if (!fresh || s->nnodes >= cs_max_handles()) {
			pthread_mutex_unlock(&s->lock);
			if (fresh)
				agent_warn_rl("handle limit (%u per session) "
					      "reached", cs_max_handles());
			free(fresh);
			ceph_ll_put(s->cm, in);
			return fresh ? -ENFILE : -ENOMEM;
		}
		n = fresh;
		fresh = NULL;
		n->in = in;
		in = NULL;
		n->ino = x->stx_ino;
		n->mode = x->stx_mode & S_IFMT;
		n->handle = handle ? handle : cs_handle_next(s);
		n->nlookup = nlookup;
		n->refs = 1;
		cs_node_link(s, n);
	}
	if (out) {
		cs_entry_fill(s, n, x, out);
		out->attr.mode |= hint;
	}
	if (nout) {
		n->refs++;
		*nout = n;
	}
	pthread_mutex_unlock(&s->lock);
	free(fresh);
	if (in)
		ceph_ll_put(s->cm, in);
	return 0;
}

/* Keep handle (held nlookup times) from naming anything again. */
static void cs_node_bury(struct ceph_store *s, uint64_t handle,
			 uint64_t nlookup)
{
	struct ceph_node *n;

	if (s->nnodes >= cs_max_handles())
		return;
	n = calloc(1, sizeof(*n));
	if (!n)
		return;
	n->handle = handle;
	n->nlookup = nlookup;
	n->refs = 1;
	n->dead = 1;
	cs_node_link(s, n);
}

static const struct agent_store_ops cfs_ops;
static void cfs_forget_handle(struct ceph_store *s, uint64_t handle,
			       uint64_t nlookup);

static struct agent_store *cfs_session(struct agent_backend *b,
					struct agent_ring *r,
					const struct agent_ident *id)
{
	struct ceph_backend *cb = (struct ceph_backend *)b;
	struct ceph_store *s;
	struct ceph_statx x;
	Inode *in;
	int ret;

	(void)r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->base.ops = &cfs_ops;
	s->base.flags = AGENT_STORE_BLOCKING;
	s->cb = cb;
	s->cm = cb->cm;
	s->ident = id;
	s->next_handle = 2;	/* 0 = none, 1 = the FUSE root nodeid */
	s->free_head = FILE_NONE;
	s->nbuckets = CS_BUCKETS_MIN;
	pthread_mutex_init(&s->lock, NULL);
	s->by_handle = calloc(s->nbuckets, sizeof(*s->by_handle));
	s->by_ino = calloc(s->nbuckets, sizeof(*s->by_ino));
	if (!s->by_handle || !s->by_ino)
		goto out_free;
	ret = ceph_ll_lookup_root(s->cm, &in);
	if (ret == 0) {
		ret = ceph_ll_getattr(s->cm, in, &x, CS_WANT,
				      AT_SYMLINK_NOFOLLOW, cb->perms);
		if (ret < 0)
			ceph_ll_put(s->cm, in);
	}
	if (ret == 0)
		ret = cs_node_add(s, in, &x, 0, 1, NULL, &s->root);
	if (ret < 0) {
		agent_err("store %s: the root: %s", b->desc, strerror(-ret));
		goto out_free;
	}
	/* the root is never forgotten: the session's reference keeps it */
	s->root_handle = s->root->handle;
	return &s->base;

out_free:
	free(s->by_handle);
	free(s->by_ino);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return NULL;
}

static void cfs_destroy(struct agent_store *bs)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n;
	unsigned int i;

	if (!s)
		return;
	/* nothing runs for this session any more: no lock needed */
	for (i = 0; i < s->nfiles; i++) {
		struct agent_file *f = cs_file_at(s, i);

		if (f->dlock_init)
			pthread_mutex_destroy(&f->dlock);
		if (!f->used)
			continue;
		/* a removed file its host may open again: cs_linger() */
		cs_close_kept(s->cb, f->fh, f->dir, f->dio_ino,
			      f->fh && !f->closing ? f->node->ino : 0);
		/* a node the host forgot lives on only for its files */
		if (cs_node_unref_locked(f->node))
			cs_node_free(s, f->node);
	}
	for (i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	free(s->chunks);
	if (s->root)
		s->root->refs--;	/* the session's own reference */
	for (i = 0; i < s->nbuckets; i++) {
		while ((n = s->by_handle[i])) {
			cs_node_unlink(s, n);
			cs_node_free(s, n);	/* the table's reference */
		}
	}
	free(s->by_handle);
	free(s->by_ino);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static void cfs_notify_start(struct agent_store *bs,
			      struct agent_notify_sess *ns)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n;
	size_t i;

	pthread_mutex_lock(&s->lock);
	if (!s->ns && ns) {
		s->ns = ns;
		for (i = 0; i < s->nbuckets; i++)
			for (n = s->by_ino[i]; n; n = n->inext) {
				agent_notify_hold(&n->hold, ns,
						  cs_obj(s, n->ino),
						  n->handle);
				cs_watch_hold(s->cb, n->ino, n->in);
			}
	}
	pthread_mutex_unlock(&s->lock);
}

static uint64_t cfs_root(const struct agent_store *bs)
{
	return ((const struct ceph_store *)bs)->root_handle;
}

static void cfs_counts(const struct agent_store *bs, uint64_t *handles,
			uint64_t *files)
{
	struct ceph_store *s = (struct ceph_store *)bs;

	pthread_mutex_lock(&s->lock);
	*handles = s->nnodes;
	*files = s->live_files;
	pthread_mutex_unlock(&s->lock);
}

/* Look name up in p and take a lookup reference on what is there. */
static int cs_lookup_in(struct ceph_store *s, struct ceph_node *p,
			const char *cname, struct bcp_entry *out,
			struct ceph_node **nout)
{
	struct ceph_statx x;
	Inode *in;
	int ret;

	ret = ceph_ll_lookup(s->cm, p->in, cname, &in, &x, CS_WANT,
			     AT_SYMLINK_NOFOLLOW, s->cb->perms);
	if (ret < 0)
		return ret;
	cs_watch_name(s->cb, p->ino, cname, x.stx_ino);
	return cs_node_add(s, in, &x, 0, 1, out, nout);
}

static int cfs_lookup(struct agent_store *bs, uint64_t parent,
		       const char *name, size_t len, struct bcp_entry *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *p;
	char cname[256];
	int ret;

	ret = cs_name(name, len, cname);
	if (ret < 0)
		return ret;
	ret = cs_dir_get(s, parent, &p);
	if (ret < 0)
		return ret;
	ret = cs_lookup_in(s, p, cname, out, NULL);
	cs_node_put(s, p);
	return ret;
}

/* ---- open files ---- */

/* The file behind an fh, referenced (cs_file_put()), or NULL. */
static struct agent_file *cs_file_get(struct ceph_store *s, uint64_t fh,
				      int dir)
{
	uint32_t idx = (uint32_t)(fh & 0xffffffffu);
	struct agent_file *f = NULL;

	pthread_mutex_lock(&s->lock);
	if (idx && idx <= s->nfiles) {
		f = cs_file_at(s, idx - 1);
		if (!f->used || f->closing || f->gen != (uint32_t)(fh >> 32) ||
		    (dir >= 0 && !!f->isdir != !!dir))
			f = NULL;
	}
	if (f)
		f->refs++;
	pthread_mutex_unlock(&s->lock);
	return f;
}

/* Why cs_file_get() found nothing: -EBADF, or the type's error. */
static int cs_file_err(struct ceph_store *s, uint64_t fh, int dir)
{
	struct agent_file *f = cs_file_get(s, fh, -1);
	int isdir;

	if (!f)
		return -EBADF;
	isdir = f->isdir;
	/* cs_file_put() needs no lookup here: drop it directly */
	pthread_mutex_lock(&s->lock);
	f->refs--;
	pthread_mutex_unlock(&s->lock);
	return isdir ? -EISDIR : dir ? -ENOTDIR : -EISDIR;
}

static void cs_file_put(struct ceph_store *s, struct agent_file *f)
{
	struct ceph_node *n = NULL;
	struct Fh *fh = NULL;
	struct ceph_dir_result *dir = NULL;
	uint64_t dio_ino = 0;
	int last_node = 0;

	pthread_mutex_lock(&s->lock);
	if (--f->refs == 0) {
		fh = f->fh;
		dir = f->dir;
		n = f->node;
		dio_ino = f->dio_ino;
		f->fh = NULL;
		f->dir = NULL;
		f->node = NULL;
		f->dio_ino = 0;
		f->used = 0;
		f->next_free = s->free_head;
		s->free_head = f->idx;
		s->live_files--;
		last_node = cs_node_unref_locked(n);
	}
	pthread_mutex_unlock(&s->lock);
	if (fh || dir)
		cs_close_later(s->cb, fh, dir, dio_ino);
	if (last_node)
		cs_node_free(s, n);
}

static int cs_file_grow(struct ceph_store *s)
{
	struct agent_file **nc, *c;

	if (s->nfiles % FILE_CHUNK == 0 &&
	    s->nfiles / FILE_CHUNK == s->nchunks) {
		nc = realloc(s->chunks, (s->nchunks + 1) * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		s->chunks = nc;
		c = calloc(FILE_CHUNK, sizeof(*c));
		if (!c)
			return -ENOMEM;
		s->chunks[s->nchunks++] = c;
	}
	return 0;
}

static int cs_file_extend(struct ceph_store *s, uint32_t idx)
{
	struct agent_file *f;
	int ret;

	while (s->nfiles <= idx) {
		ret = cs_file_grow(s);
		if (ret < 0)
			return ret;
		f = cs_file_at(s, s->nfiles);
		f->idx = s->nfiles;
		f->gen = 0;
		f->next_free = s->free_head;
		s->free_head = s->nfiles++;
	}
	return 0;
}

static int cs_file_claim(struct ceph_store *s, uint32_t idx)
{
	uint32_t *pp = &s->free_head;

	while (*pp != FILE_NONE) {
		if (*pp == idx) {
			*pp = cs_file_at(s, idx)->next_free;
			return 0;
		}
		pp = &cs_file_at(s, *pp)->next_free;
	}
	return -EEXIST;
}

/* 0 while the session may open one more file, else -EMFILE (said). */
static int cs_file_room(const struct ceph_store *s)
{
	if (s->live_files < cs_max_files())
		return 0;
	agent_warn_rl("open file limit (%u per session) reached",
		      cs_max_files());
	return -EMFILE;
}

/*
 * A new fh for fh or dir (ownership moves here on success, with fh's
 * cs_dio_get() count when dio_ino is not 0) on node n (referenced here
 * for the file's life).  want: 0 for any slot, or the fh value to
 * install (REOPEN).
 */
static int cs_file_new(struct ceph_store *s, struct Fh *cfh,
		       struct ceph_dir_result *dir, uint64_t dio_ino,
		       int logged, struct ceph_node *n, uint64_t want,
		       uint64_t *fh)
{
	struct agent_file *f;
	uint32_t idx;
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = cs_file_room(s);
	if (ret < 0)
		goto out_unlock;
	if (want) {
		idx = (uint32_t)(want & 0xffffffffu) - 1;
		ret = cs_file_extend(s, idx);
		if (ret == 0)
			ret = cs_file_claim(s, idx);
		if (ret < 0)
			goto out_unlock;
		/* the gen++ below gives the fh its old generation */
		cs_file_at(s, idx)->gen = (uint32_t)(want >> 32) - 1;
	} else if (s->free_head != FILE_NONE) {
		idx = s->free_head;
		s->free_head = cs_file_at(s, idx)->next_free;
	} else {
		ret = cs_file_grow(s);
		if (ret < 0)
			goto out_unlock;
		idx = s->nfiles++;
		cs_file_at(s, idx)->gen = 0;
	}
	f = cs_file_at(s, idx);
	if (!f->dlock_init) {
		pthread_mutex_init(&f->dlock, NULL);
		f->dlock_init = 1;
	}
	f->idx = idx;
	f->used = 1;
	f->isdir = !!dir;
	f->fh = cfh;
	f->dir = dir;
	f->logged = logged;
	f->dio_ino = dio_ino;
	f->closing = 0;
	f->node = n;
	n->refs++;
	f->refs = 1;
	f->gen++;
	if (f->gen == 0)
		f->gen = 1;
	f->next_free = FILE_NONE;
	s->live_files++;
	*fh = ((uint64_t)f->gen << 32) | (idx + 1);
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* ---- metadata ---- */

static int cfs_getattr(struct agent_store *bs, uint64_t handle, uint64_t fh,
			struct bcp_attr *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct agent_file *f = NULL;
	struct ceph_node *n;
	struct ceph_statx x;
	int ret;

	if (fh) {
		f = cs_file_get(s, fh, -1);
		if (!f)
			return -EBADF;
		n = f->node;
	} else {
		n = cs_node_get(s, handle);
		if (!n)
			return -ESTALE;
	}
	ret = ceph_ll_getattr(s->cm, n->in, &x, CS_WANT, AT_SYMLINK_NOFOLLOW,
			      s->cb->perms);
	if (f)
		cs_file_put(s, f);
	else
		cs_node_put(s, n);
	if (ret < 0)
		return ret;
	cs_attr_fill(&x, out);
	return 0;
}

static void cs_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

/*
 * A time a host sets: CephFS keeps 32-bit seconds (utime_t), so one out
 * of that range is clamped to its end, with no nanoseconds, as the kernel
 * clamps a time to the range of the file system it mounts (timestamp_
 * truncate(), a CephFS's 0 to 2^32 - 1), instead of wrapping (2^32 s
 * would be 1970).  -EINVAL for nanoseconds past a second.
 */
static int cs_time_set(struct timespec *ts, int64_t sec, uint32_t nsec)
{
	if (nsec >= 1000000000u)
		return -EINVAL;
	ts->tv_nsec = (long)nsec;
	if (sec < 0 || sec > (int64_t)UINT32_MAX) {
		sec = sec < 0 ? 0 : (int64_t)UINT32_MAX;
		ts->tv_nsec = 0;
	}
	ts->tv_sec = (time_t)sec;
	return 0;
}

/*
 * Make the cluster have the logged writes of ino (in) and retire them:
 * before anything that changes its bytes past the log (a truncate,
 * fallocate, a direct or synchronous write), which a replay of an older
 * logged write must never undo.
 *
 * Before a truncate also for the OSDs' sake: a write the Ceph client
 * still has on its way when the MDS cuts the objects reaches them with
 * the old truncate sequence, and the OSD clips it to nothing, but a
 * write of nothing past an object's end extends the object to its
 * offset.  The MDS's size does not move, so nothing shows until the
 * client dies: the MDS then takes a file's size from its objects
 * (RecoveryQueue), and the file grows back (tests/fs/truncrace-cephfs).
 */
static int cs_settle(struct ceph_store *s, Inode *in, uint64_t ino)
{
	struct cs_wlog *w = s->cb->wlog;
	uint64_t mark;
	int ret;

	if (!w || !cs_wlog_holds(w, ino))
		return 0;
	mark = cs_wlog_mark(w);
	ret = ceph_ll_sync_inode(s->cm, in, 0);
	if (ret == 0)
		cs_wlog_synced(w, ino, mark);
	return ret;
}

static int cs_setattr(struct ceph_store *s, struct ceph_node *n,
		      const struct bcp_setattr_req *r)
{
	UserPerm *perms = s->cb->perms;
	struct ceph_statx x, cur;
	uint32_t keep = 0;
	int mask, ret;

	if (r->valid & ~BCP_SETATTR_ALL)
		return -EINVAL;
	if (r->fh) {
		struct agent_file *f = cs_file_get(s, r->fh, -1);

		if (!f)
			return -EBADF;
		cs_file_put(s, f);
	}
	/* owner first, then mode: as store_posix.c, a mode given is final */
	if (r->valid & (BCP_SETATTR_UID | BCP_SETATTR_GID)) {
		/*
		 * The MDS drops both set-ID bits on every change of owner;
		 * the host's kernel already decided which go (it sends a
		 * mode then), so a change of owner alone keeps the mode
		 */
		if (!(r->valid & BCP_SETATTR_MODE)) {
			ret = ceph_ll_getattr(s->cm, n->in, &cur,
					      CEPH_STATX_MODE,
					      AT_SYMLINK_NOFOLLOW, perms);
			if (ret < 0)
				return ret;
			keep = cur.stx_mode & (S_ISUID | S_ISGID);
		}
		/*
		 * chown(2) marks ctime even when owner and group stay; the
		 * Ceph client drops a change to what is there already
		 */
		memset(&x, 0, sizeof(x));
		cs_now(&x.stx_ctime);
		mask = CEPH_SETATTR_CTIME;
		if (r->valid & BCP_SETATTR_UID) {
			x.stx_uid = agent_ident_map(s->ident, r->uid, 0);
			mask |= CEPH_SETATTR_UID;
		}
		if (r->valid & BCP_SETATTR_GID) {
			x.stx_gid = agent_ident_map(s->ident, r->gid, 1);
			mask |= CEPH_SETATTR_GID;
		}
		ret = ceph_ll_setattr(s->cm, n->in, &x, mask, perms);
		if (ret < 0)
			return ret;
	}
	if ((r->valid & BCP_SETATTR_MODE) || keep) {
		uint32_t mode = r->valid & BCP_SETATTR_MODE ? r->mode & 07777 :
				(cur.stx_mode & 07777);

		if (n->mode == S_IFLNK)
			return -EOPNOTSUPP;
		if (s->ident->squash != AGENT_SQUASH_NONE &&
		    (mode & (S_ISUID | S_ISGID))) {
			/* no set-ID-root program made by a squashed host */
			ret = ceph_ll_getattr(s->cm, n->in, &cur, CS_WANT,
					      AT_SYMLINK_NOFOLLOW, perms);
			if (ret < 0)
				return ret;
			if (cur.stx_uid == 0)
				mode &= ~(uint32_t)S_ISUID;
			if (cur.stx_gid == 0)
				mode &= ~(uint32_t)S_ISGID;
		}
		memset(&x, 0, sizeof(x));
		x.stx_mode = (uint16_t)mode;
		ret = ceph_ll_setattr(s->cm, n->in, &x, CEPH_SETATTR_MODE,
				      perms);
		if (ret < 0)
			return ret;
	}
	if (r->valid == BCP_SETATTR_CTIME) {
		memset(&x, 0, sizeof(x));
		cs_now(&x.stx_ctime);
		ret = ceph_ll_setattr(s->cm, n->in, &x, CEPH_SETATTR_CTIME,
				      perms);
		if (ret < 0)
			return ret;
	}
	if (r->valid & BCP_SETATTR_SIZE) {
		if (r->size > INT64_MAX)
			return -EFBIG;
		if (n->mode == S_IFDIR)
			return -EISDIR;
		if (n->mode != S_IFREG)
			return -EINVAL;
		/* every write before it first (cs_settle()) */
		ret = cs_settle(s, n->in, n->ino);
		if (ret < 0)
			return ret;
		/*
		 * A truncate marks mtime and ctime for update even when
		 * the size stays (open(O_TRUNC) of an empty file); the MDS
		 * changes neither then, so they are set with the size
		 */
		memset(&x, 0, sizeof(x));
		x.stx_size = r->size;
		mask = CEPH_SETATTR_SIZE;
		if (!(r->valid & (BCP_SETATTR_MTIME | BCP_SETATTR_CTIME))) {
			cs_now(&x.stx_mtime);
			x.stx_ctime = x.stx_mtime;
			mask |= CEPH_SETATTR_MTIME | CEPH_SETATTR_CTIME;
		}
		ret = ceph_ll_setattr(s->cm, n->in, &x, mask, perms);
		if (ret < 0)
			return ret;
	}
	if (r->valid & (BCP_SETATTR_ATIME | BCP_SETATTR_MTIME |
			BCP_SETATTR_ATIME_NOW | BCP_SETATTR_MTIME_NOW)) {
		memset(&x, 0, sizeof(x));
		mask = 0;
		if (r->valid & BCP_SETATTR_ATIME_NOW) {
			cs_now(&x.stx_atime);
			mask |= CEPH_SETATTR_ATIME;
		} else if (r->valid & BCP_SETATTR_ATIME) {
			if (cs_time_set(&x.stx_atime, r->atime, r->atime_nsec))
				return -EINVAL;
			mask |= CEPH_SETATTR_ATIME;
		}
		if (r->valid & BCP_SETATTR_MTIME_NOW) {
			cs_now(&x.stx_mtime);
			mask |= CEPH_SETATTR_MTIME;
		} else if (r->valid & BCP_SETATTR_MTIME) {
			if (cs_time_set(&x.stx_mtime, r->mtime, r->mtime_nsec))
				return -EINVAL;
			mask |= CEPH_SETATTR_MTIME;
		}
		/*
		 * utimensat marks ctime even when the times stay; the Ceph
		 * client does not when it sends the change to the MDS
		 */
		cs_now(&x.stx_ctime);
		mask |= CEPH_SETATTR_CTIME;
		ret = ceph_ll_setattr(s->cm, n->in, &x, mask, perms);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/*
 * Log the attributes a (those after the change) of mask's fields
 * (CEPH_SETATTR_*) instead of waiting for the MDS.  < 0: not logged (no
 * log, the log full): the caller syncs.
 */
static int cs_attr_log(struct ceph_store *s, uint32_t mask,
		       const struct bcp_attr *a)
{
	struct cs_wlog_attr la;

	if (!s->cb->wlog)
		return -EINVAL;
	memset(&la, 0, sizeof(la));
	la.mask = mask;
	la.uid = a->uid;
	la.gid = a->gid;
	la.mode = a->mode;
	la.atime = a->atime;
	la.atime_nsec = a->atime_nsec;
	la.mtime = a->mtime;
	la.mtime_nsec = a->mtime_nsec;
	return cs_wlog_add_attr(s->cb->wlog, a->ino, &la);
}

/*
 * Log what a SETATTR made of a regular file's owner, mode or times (a:
 * the attributes after it; cs_attr_log()).  < 0: not logged (also a size
 * or a ctime alone, or not a regular file): the caller syncs.  Not a
 * directory: the MDS moves its times itself at every change of its
 * names, and a time this client set and holds dirty went back over them
 * when it reached the MDS (a mkdir in a directory right after a utime of
 * it left its mtime unmoved).
 */
static int cs_setattr_log(struct ceph_store *s,
			  const struct bcp_setattr_req *r,
			  const struct bcp_attr *a)
{
	uint32_t mask = 0;

	if ((r->valid & BCP_SETATTR_SIZE) || !S_ISREG(a->mode))
		return -EINVAL;
	if (r->valid & BCP_SETATTR_UID)
		mask |= CEPH_SETATTR_UID;
	if (r->valid & BCP_SETATTR_GID)
		mask |= CEPH_SETATTR_GID;
	/* a change of owner alone set the set-ID bits again (cs_setattr()) */
	if (r->valid & (BCP_SETATTR_MODE | BCP_SETATTR_UID | BCP_SETATTR_GID))
		mask |= CEPH_SETATTR_MODE;
	if (r->valid & (BCP_SETATTR_ATIME | BCP_SETATTR_ATIME_NOW))
		mask |= CEPH_SETATTR_ATIME;
	if (r->valid & (BCP_SETATTR_MTIME | BCP_SETATTR_MTIME_NOW))
		mask |= CEPH_SETATTR_MTIME;
	if (!mask)
		return -EINVAL;
	return cs_attr_log(s, mask, a);
}

static int cfs_setattr(struct agent_store *bs,
			const struct bcp_setattr_req *r, struct bcp_attr *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n = cs_node_get(s, r->handle);
	uint64_t mark = 0;
	int ret;

	if (!n)
		return -ESTALE;
	if (s->cb->wlog)
		mark = cs_wlog_mark(s->cb->wlog);
	ret = cs_setattr(s, n, r);
	/*
	 * With exclusive capabilities the Ceph client keeps a new mode,
	 * owner, times or a larger size to itself for a while: in the
	 * write log or in the MDS before the answer, or they die with the
	 * agent (cs_wflags())
	 */
	if (ret == 0)
		ret = cfs_getattr(bs, r->handle, 0, out);
	if (ret == 0 && cs_setattr_log(s, r, out) < 0) {
		ret = ceph_ll_sync_inode(s->cm, n->in, 0);
		/* which also made the cluster have the writes logged before */
		if (ret == 0 && s->cb->wlog)
			cs_wlog_synced(s->cb->wlog, n->ino, mark);
		if (ret == 0)
			ret = cfs_getattr(bs, r->handle, 0, out);
	}
	/* even a failure may follow a step that was made (store_posix.c) */
	cs_pub_inode(s, n->ino, ret == 0 && (r->valid & BCP_SETATTR_SIZE) ?
		     (int64_t)r->size : -1, 0);
	cs_node_put(s, n);
	return ret;
}

/*
 * Give a newly made object (in, whose attributes are *x) to the caller,
 * as the session's identity policy maps the ids.  In a set-group-ID
 * directory it keeps the group the MDS gave it (the directory's).  A mode
 * with set-ID bits is applied again after the owner (mode 0: a symlink).
 * What already is as asked is not set again: a host acting as the
 * agent's own identity creates with one request to the MDS.  What was
 * set is logged (cs_attr_log(): a host whose ids are not the agent's
 * creates with one wait for the MDS, not two), of any kind of object:
 * owner and mode are the client's to hold (the Ax capability), not
 * moved by the MDS as a directory's times are (cs_setattr_log()).  In
 * the MDS before the answer when the log cannot take it.  *x is fetched
 * anew when something changed.
 */
static int cs_own_new(struct ceph_store *s, struct ceph_node *parent,
		      Inode *in, struct ceph_statx *x, uint32_t uid,
		      uint32_t gid, uint32_t mode)
{
	int mask = CEPH_SETATTR_UID | CEPH_SETATTR_GID, ret;
	struct ceph_statx y;
	struct bcp_attr a;

	ret = ceph_ll_getattr(s->cm, parent->in, &y, CEPH_STATX_MODE,
			      AT_SYMLINK_NOFOLLOW, s->cb->perms);
	if (ret < 0)
		return ret;
	if (y.stx_mode & S_ISGID)
		mask &= ~CEPH_SETATTR_GID;
	memset(&y, 0, sizeof(y));
	y.stx_uid = agent_ident_map(s->ident, uid, 0);
	y.stx_gid = agent_ident_map(s->ident, gid, 1);
	if (y.stx_uid == (uint32_t)-1 || y.stx_uid == x->stx_uid)
		mask &= ~CEPH_SETATTR_UID;
	if (y.stx_gid == (uint32_t)-1 || y.stx_gid == x->stx_gid)
		mask &= ~CEPH_SETATTR_GID;
	if (mask) {
		ret = ceph_ll_setattr(s->cm, in, &y, mask, s->cb->perms);
		if (ret < 0)
			return ret;
	}
	if ((mode & (S_ISUID | S_ISGID)) &&
	    (mask || (x->stx_mode & 07777) != (mode & 07777))) {
		memset(&y, 0, sizeof(y));
		y.stx_mode = (uint16_t)(mode & 07777);
		ret = ceph_ll_setattr(s->cm, in, &y, CEPH_SETATTR_MODE,
				      s->cb->perms);
		if (ret < 0)
			return ret;
		mask = 1;
	}
	if (!mask)
		return 0;
	ret = ceph_ll_getattr(s->cm, in, x, CS_WANT, AT_SYMLINK_NOFOLLOW,
			      s->cb->perms);
	if (ret < 0)
		return ret;
	cs_attr_fill(x, &a);
	if (cs_attr_log(s, CEPH_SETATTR_UID | CEPH_SETATTR_GID |
			CEPH_SETATTR_MODE, &a) == 0)
		return 0;
	/* in the MDS before the answer, as cfs_setattr() says */
	return ceph_ll_sync_inode(s->cm, in, 0);
}

/*
 * O_* bits a host may ask for (store_posix.c says why not O_APPEND or
 * O_NONBLOCK; cs_dio_get() what becomes of O_DIRECT).
 */
#define CS_OPEN_FLAGS	(O_ACCMODE | O_TRUNC | O_SYNC | O_DSYNC | O_DIRECT)

static int cs_type_err(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return 0;
	case S_IFDIR:
		return -EISDIR;
	case S_IFLNK:
		return -ELOOP;
	default:
		return -ENXIO;
	}
}

/*
 * The flags of the Fh for a host's open, before cs_dio_get() decides on
 * O_DIRECT (the application opened past the caches: see there).
 *
 * A write is acknowledged to the host only once it would outlive the
 * agent: bytes in the Ceph client's cache alone die with it, and a host
 * that outlives its agent (the daemon replays only what was not answered)
 * must lose nothing.  With a write log (ceph_wlog.h) a write through the
 * cache is logged first, and the cluster gets it a moment later; without
 * one, O_DSYNC on every Fh that writes keeps the cache for reads and
 * makes each write flush its range (Client::_write).  A direct write
 * waits for the OSDs anyway.
 */
static uint32_t cs_wflags(const struct ceph_store *s, uint32_t flags)
{
	if ((flags & O_ACCMODE) == O_RDONLY || s->cb->wlog)
		return flags;
	return flags | O_DSYNC;
}

/* A Fh opened for flags whose writes go to the write log first. */
static int cs_logged(const struct ceph_store *s, uint32_t flags,
		     uint64_t dio_ino)
{
	return s->cb->wlog && dio_ino && (flags & O_ACCMODE) != O_RDONLY &&
	       !(flags & (O_SYNC | O_DSYNC));
}

/*
 * Open in (ino) for flags; *dio_ino: ino when the Fh holds a
 * cs_dio_get() count, else 0.  O_TRUNC of an empty file changes no size,
 * and then the MDS leaves mtime and ctime alone; POSIX marks both for
 * update on every O_TRUNC open of an existing file, so they are set here.
 */
static int cs_open_file(struct ceph_store *s, Inode *in, uint64_t ino,
			uint32_t flags, struct Fh **cfh, uint64_t *dio_ino)
{
	struct ceph_statx x;
	uint32_t fl;
	int ret, empty = 0, counted;

	*dio_ino = 0;
	if (flags & O_TRUNC) {
		ret = ceph_ll_getattr(s->cm, in, &x, CEPH_STATX_SIZE,
				      AT_SYMLINK_NOFOLLOW, s->cb->perms);
		if (ret < 0)
			return ret;
		empty = x.stx_size == 0;
	}
	/* a truncate: every write before it first (cs_settle()) */
	if (flags & O_TRUNC) {
		ret = cs_settle(s, in, ino);
		if (ret < 0)
			return ret;
	}
	ret = cs_dio_get(s->cb, ino, cs_wflags(s, flags), &fl, &counted);
	if (ret < 0)
		return ret;
	ret = ceph_ll_open(s->cm, in, (int)fl, cfh, s->cb->perms);
	if (ret == 0 && (flags & O_TRUNC)) {
		ret = cs_settle(s, in, ino);
		if (ret < 0) {
			ceph_ll_close(s->cm, *cfh);
			*cfh = NULL;
		}
	}
	if (ret == 0 && empty) {
		memset(&x, 0, sizeof(x));
		cs_now(&x.stx_mtime);
		x.stx_ctime = x.stx_mtime;
		ret = ceph_ll_setattr(s->cm, in, &x,
				      CEPH_SETATTR_MTIME | CEPH_SETATTR_CTIME,
				      s->cb->perms);
		if (ret < 0) {
			ceph_ll_close(s->cm, *cfh);
			*cfh = NULL;
		}
	}
	if (ret < 0 && counted)
		cs_dio_put(s->cb, ino);
	else if (counted)
		*dio_ino = ino;
	return ret;
}

/*
 * The Fh ceph_ll_create() made for a new file (ino) went through the
 * cacher: keep it counted, or, when the file is to be written past the
 * cacher (the host asked, or another session made it so meanwhile), open
 * one that does not in its place.
 */
static int cs_created_fh(struct ceph_store *s, Inode *in, uint64_t ino,
			 uint32_t flags, struct Fh **cfh, uint64_t *dio_ino)
{
	struct Fh *dfh;
	uint32_t fl;
	int ret, counted;

	*dio_ino = 0;
	ret = cs_dio_get(s->cb, ino, cs_wflags(s, flags), &fl, &counted);
	if (ret < 0)
		return ret;
	if (counted) {
		*dio_ino = ino;
		return 0;
	}
	ret = ceph_ll_open(s->cm, in, (int)(fl & ~(uint32_t)O_TRUNC), &dfh,
			   s->cb->perms);
	if (ret < 0)
		return ret;
	cs_close_later(s->cb, *cfh, NULL, 0);
	*cfh = dfh;
	return 0;
}

/*
 * The mode a new object of directory p is made with: the host's umask
 * applies unless p has a default ACL, which the client then applies
 * instead (as a local file system ignores the umask there).
 */
static uint32_t cs_new_mode(struct ceph_store *s, struct ceph_node *p,
			    uint32_t mode, uint32_t umask)
{
	mode &= 07777;
	if (!(mode & umask))
		return mode;
	if (ceph_ll_getxattr(s->cm, p->in, "system.posix_acl_default", NULL,
			     0, s->cb->perms) > 0)
		return mode;
	return mode & ~umask;
}

static int cfs_create_file(struct agent_store *bs,
			    const struct bcp_create_req *r, const char *name,
			    struct bcp_create_rep *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	uint32_t flags = r->flags & CS_OPEN_FLAGS;
	uint32_t mode;
	struct ceph_node *p, *n = NULL;
	struct bcp_entry e;
	struct ceph_statx x;
	struct Fh *cfh = NULL;
	uint64_t fh, dio_ino = 0;
	char cname[256];
	Inode *in;
	int ret, made = 0;

	ret = cs_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	/* no room for one more open file: fail before the name is made */
	pthread_mutex_lock(&s->lock);
	ret = cs_file_room(s);
	pthread_mutex_unlock(&s->lock);
	if (ret < 0)
		return ret;
	ret = cs_dir_get(s, r->parent, &p);
	if (ret < 0)
		return ret;
	mode = cs_new_mode(s, p, r->mode, r->umask);
	/* through the cacher at first: cs_created_fh() decides */
	ret = ceph_ll_create(s->cm, p->in, cname, mode,
			     (int)((cs_wflags(s, flags) & ~(uint32_t)O_DIRECT) |
				   O_CREAT | O_EXCL | O_NOFOLLOW),
			     &in, &cfh, &x, CS_WANT, 0, s->cb->perms);
	if (ret == 0) {
		made = 1;
		ret = cs_own_new(s, p, in, &x, r->uid, r->gid, mode);
		if (ret == 0)
			ret = cs_created_fh(s, in, x.stx_ino, flags, &cfh,
					    &dio_ino);
		if (ret < 0) {
			ceph_ll_put(s->cm, in);
			goto out_close;
		}
	} else if (ret == -EEXIST && !(r->flags & O_EXCL)) {
		/* it exists: open what is there only if a regular file */
		ret = ceph_ll_lookup(s->cm, p->in, cname, &in, &x, CS_WANT,
				     AT_SYMLINK_NOFOLLOW, s->cb->perms);
		if (ret < 0)
			goto out_put;
		ret = cs_type_err(x.stx_mode);
		if (ret == 0)
			ret = cs_open_file(s, in, x.stx_ino, flags, &cfh,
					   &dio_ino);
		if (ret < 0) {
			ceph_ll_put(s->cm, in);
			goto out_put;
		}
	} else {
		goto out_put;
	}
	ret = cs_node_add(s, in, &x, 0, 1, &e, &n);
	if (ret < 0)
		goto out_close;
	/* the entry is there: it is news even if what follows fails */
	if (made)
		cs_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, 0, n->ino);
	else if (flags & O_TRUNC)
		cs_pub_inode(s, n->ino, 0, 0);
	ret = cs_file_new(s, cfh, NULL, dio_ino, cs_logged(s, flags, dio_ino),
			  n, 0, &fh);
	cs_node_put(s, n);
	if (ret < 0) {
		cfs_forget_handle(s, e.handle, 1);
		goto out_close;
	}
	cs_node_put(s, p);
	memset(out, 0, sizeof(*out));
	out->entry = e;
	out->fh = fh;
	if (made)
		out->open_flags = BCP_OPEN_CREATED;
	return 0;

out_close:
	if (cfh)
		cs_close_later(s->cb, cfh, NULL, dio_ino);
out_put:
	cs_node_put(s, p);
	return ret;
}

/*
 * After making cname (in: its reference moves here) in p: give it to the
 * caller and take a lookup reference.
 */
static int cs_made(struct ceph_store *s, struct ceph_node *p,
		   const char *cname, Inode *in, struct ceph_statx *x,
		   uint32_t uid, uint32_t gid, uint32_t mode,
		   struct bcp_entry *out)
{
	int ret;

	/* the name is made: news for the directory's holders */
	cs_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, 0, x->stx_ino);
	ret = cs_own_new(s, p, in, x, uid, gid, mode);
	if (ret < 0) {
		ceph_ll_put(s->cm, in);
		return ret;
	}
	return cs_node_add(s, in, x, 0, 1, out, NULL);
}

static int cfs_mkdir(struct agent_store *bs, const struct bcp_mkdir_req *r,
		      const char *name, struct bcp_entry *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	uint32_t mode;
	struct ceph_node *p;
	struct ceph_statx x;
	char cname[256];
	Inode *in;
	int ret;

	ret = cs_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	ret = cs_dir_get(s, r->parent, &p);
	if (ret < 0)
		return ret;
	mode = cs_new_mode(s, p, r->mode, r->umask);
	ret = ceph_ll_mkdir(s->cm, p->in, cname, mode, &in, &x, CS_WANT, 0,
			    s->cb->perms);
	if (ret == 0)
		ret = cs_made(s, p, cname, in, &x, r->uid, r->gid, mode, out);
	cs_node_put(s, p);
	return ret;
}

static int cfs_mknod(struct agent_store *bs, const struct bcp_mknod_req *r,
		      const char *name, struct bcp_entry *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	uint32_t mode;
	struct ceph_node *p;
	struct ceph_statx x;
	char cname[256];
	Inode *in;
	int ret;

	ret = cs_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	switch (r->mode & S_IFMT) {
	case S_IFREG: case S_IFIFO: case S_IFSOCK:
		break;
	case S_IFCHR: case S_IFBLK:
		if (!s->ident->allow_devices)
			return -EPERM;
		break;
	case S_IFDIR: case S_IFLNK:
		return -EPERM;
	default:
		return -EINVAL;
	}
	ret = cs_dir_get(s, r->parent, &p);
	if (ret < 0)
		return ret;
	mode = cs_new_mode(s, p, r->mode, r->umask);
	ret = ceph_ll_mknod(s->cm, p->in, cname, (r->mode & S_IFMT) | mode,
			    (dev_t)r->rdev, &in, &x, CS_WANT, 0,
			    s->cb->perms);
	if (ret == 0)
		ret = cs_made(s, p, cname, in, &x, r->uid, r->gid, mode, out);
	cs_node_put(s, p);
	return ret;
}

static int cfs_symlink(struct agent_store *bs,
			const struct bcp_symlink_req *r, const char *name,
			const char *target, struct bcp_entry *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *p;
	struct ceph_statx x;
	char cname[256];
	Inode *in;
	char *t;
	int ret;

	ret = cs_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	if (r->target_len == 0 || r->target_len > BCP_SYMLINK_MAX ||
	    memchr(target, '\0', r->target_len))
		return -EINVAL;
	t = strndup(target, r->target_len);
	if (!t)
		return -ENOMEM;
	ret = cs_dir_get(s, r->parent, &p);
	if (ret == 0) {
		ret = ceph_ll_symlink(s->cm, p->in, cname, t, &in, &x,
				      CS_WANT, 0, s->cb->perms);
		if (ret == 0)
			ret = cs_made(s, p, cname, in, &x, r->uid, r->gid, 0,
				      out);
		cs_node_put(s, p);
	}
	free(t);
	return ret;
}

static int cfs_readlink(struct agent_store *bs, uint64_t handle, char *buf,
			 size_t cap)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n = cs_node_get(s, handle);
	int ret;

	if (!n)
		return -ESTALE;
	if (n->mode != S_IFLNK)
		ret = -EINVAL;
	else
		ret = ceph_ll_readlink(s->cm, n->in, buf, cap, s->cb->perms);
	cs_node_put(s, n);
	return ret;
}

static int cfs_link(struct agent_store *bs, const struct bcp_link_req *r,
		     const char *name, struct bcp_entry *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n, *p;
	char cname[256];
	int ret;

	ret = cs_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	n = cs_node_get(s, r->handle);
	if (!n)
		return -ESTALE;
	if (n->mode == S_IFDIR) {
		cs_node_put(s, n);
		return -EPERM;
	}
	ret = cs_dir_get(s, r->newparent, &p);
	if (ret < 0) {
		cs_node_put(s, n);
		return ret;
	}
	ret = ceph_ll_link(s->cm, n->in, p->in, cname, s->cb->perms);
	if (ret == 0) {
		/* a new name, and the object's link count */
		cs_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, n->ino, n->ino);
		ret = cs_lookup_in(s, p, cname, out, NULL);
	}
	cs_node_put(s, p);
	cs_node_put(s, n);
	return ret;
}

static int cfs_unlink(struct agent_store *bs, uint64_t parent,
		       const char *name, size_t len, int rmdir)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *p;
	char cname[256];
	uint64_t child;
	uint32_t nlink;
	int ret;

	ret = cs_name(name, len, cname);
	if (ret < 0)
		return ret;
	ret = cs_dir_get(s, parent, &p);
	if (ret < 0)
		return ret;
	cs_pub_peek(s, p, cname, &child, &nlink);
	if (rmdir)
		ret = ceph_ll_rmdir(s->cm, p->in, cname, s->cb->perms);
	else
		ret = ceph_ll_unlink(s->cm, p->in, cname, s->cb->perms);
	if (ret == 0)
		cs_pub_gone(s, p, cname, child, nlink, 0);
	cs_node_put(s, p);
	return ret;
}

/*
 * The MDS's reply to a rename carries the new parent, not the old one,
 * so the Ceph client keeps the old parent's times and link count from
 * before while its capabilities last.  Setting its ctime fetches the
 * whole inode anew, with the mtime the rename gave it.  Not the mtime as
 * well: one set by a client stays, the MDS no longer moves it for the
 * next changes of names in the directory.  Best effort: the rename is
 * made.
 */
static void cs_rename_source(struct ceph_store *s, struct ceph_node *p)
{
	struct ceph_statx x;

	memset(&x, 0, sizeof(x));
	cs_now(&x.stx_ctime);
	(void)ceph_ll_setattr(s->cm, p->in, &x, CEPH_SETATTR_CTIME,
			      s->cb->perms);
}

/*
 * A rename over a name whose inode keeps other names (a hard link): once
 * the MDS commits it, the Ceph client forgets every name of the replaced
 * inode it knows (Client::put_request() trims it as if it were gone), and
 * a directory it holds complete then lacks the names that remain: their
 * lookups say ENOENT, and rmdir of the directory ENOTEMPTY, until its
 * caps on the directory change (ceph-fuse shows the same).  Such a target
 * is unlinked first, which the Ceph client takes as it should; the
 * replace is then not atomic for it (another client may find the name
 * missing in between).  Returns 1 when both names are of one inode
 * (rename(2) then does nothing), 0 to go on, or an error.
 */
static int cs_rename_linked(struct ceph_store *s, struct ceph_node *p,
			    const char *cname, struct ceph_node *np,
			    const char *cnew)
{
	struct ceph_statx x, y;
	Inode *in;
	int ret;

	ret = ceph_ll_lookup(s->cm, np->in, cnew, &in, &x,
			     CEPH_STATX_INO | CEPH_STATX_MODE |
			     CEPH_STATX_NLINK, AT_SYMLINK_NOFOLLOW,
			     s->cb->perms);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	ceph_ll_put(s->cm, in);
	if (S_ISDIR(x.stx_mode) || x.stx_nlink < 2)
		return 0;
	ret = ceph_ll_lookup(s->cm, p->in, cname, &in, &y,
			     CEPH_STATX_INO | CEPH_STATX_MODE,
			     AT_SYMLINK_NOFOLLOW, s->cb->perms);
	if (ret < 0)
		return ret;
	ceph_ll_put(s->cm, in);
	if (y.stx_ino == x.stx_ino)
		return 1;
	if (S_ISDIR(y.stx_mode))
		return -ENOTDIR;
	return ceph_ll_unlink(s->cm, np->in, cnew, s->cb->perms);
}

static int cfs_rename(struct agent_store *bs, const struct bcp_rename_req *r,
		       const char *name, const char *newname)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *p, *np;
	char cname[256], cnew[256];
	uint64_t moved, target, now;
	uint32_t nlink, tlink;
	struct ceph_statx x;
	Inode *in;
	int ret;

	if (r->flags & ~(BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE) ||
	    r->flags == (BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE))
		return -EINVAL;
	/* libcephfs has no renameat2(): no atomic exchange */
	if (r->flags & BCP_RENAME_EXCHANGE)
		return -EINVAL;
	ret = cs_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	ret = cs_name(newname, r->newname_len, cnew);
	if (ret < 0)
		return ret;
	ret = cs_dir_get(s, r->parent, &p);
	if (ret < 0)
		return ret;
	ret = cs_dir_get(s, r->newparent, &np);
	if (ret < 0)
		goto out_p;
	if (r->flags & BCP_RENAME_NOREPLACE) {
		/*
		 * Check, then rename: another client may make the name in
		 * between (libcephfs cannot refuse to replace); a host of
		 * this agent cannot, its requests on np come one at a time
		 * through its kernel's directory lock.
		 */
		ret = ceph_ll_lookup(s->cm, np->in, cnew, &in, &x, 0,
				     AT_SYMLINK_NOFOLLOW, s->cb->perms);
		if (ret == 0) {
			ceph_ll_put(s->cm, in);
			ret = -EEXIST;
			goto out_np;
		}
		if (ret != -ENOENT)
			goto out_np;
	}
	cs_pub_peek(s, p, cname, &moved, &nlink);
	cs_pub_peek(s, np, cnew, &target, &tlink);
	if (!(r->flags & BCP_RENAME_NOREPLACE)) {
		ret = cs_rename_linked(s, p, cname, np, cnew);
		if (ret)
			goto out_np;	/* 1: nothing to do */
	}
	ret = ceph_ll_rename(s->cm, p->in, cname, np->in, cnew, s->cb->perms);
	if (ret == 0 && p->ino != np->ino)
		cs_rename_source(s, p);
	if (ret == 0) {
		now = moved ? moved : CS_SELF_ANY;
		cs_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, moved, 0);
		if (!target)
			cs_pub_name(s, BCP_NOTIFY_ENTRY, np, cnew, 0, now);
		else
			cs_pub_gone(s, np, cnew, target, tlink, now);
	}
out_np:
	cs_node_put(s, np);
out_p:
	cs_node_put(s, p);
	return ret < 0 ? ret : 0;
}

/* Open n as OPEN (flags) or OPENDIR does: a Fh or a directory stream. */
static int cs_open_node(struct ceph_store *s, struct ceph_node *n,
			uint32_t flags, int dir, struct Fh **cfh,
			struct ceph_dir_result **cdir, uint64_t *dio_ino)
{
	*cfh = NULL;
	*cdir = NULL;
	*dio_ino = 0;
	if (dir && n->mode != S_IFDIR)
		return -ENOTDIR;
	if (!dir && n->mode != S_IFREG)
		return cs_type_err(n->mode);
	if (dir)
		return ceph_ll_opendir(s->cm, n->in, cdir, s->cb->perms);
	return cs_open_file(s, n->in, n->ino, flags & CS_OPEN_FLAGS, cfh,
			    dio_ino);
}

static int cs_open(struct ceph_store *s, uint64_t handle, uint32_t flags,
		   int dir, uint64_t want, struct bcp_open_rep *out)
{
	struct ceph_dir_result *cdir;
	struct ceph_node *n;
	struct Fh *cfh;
	uint64_t fh, dio_ino;
	int ret;

	n = cs_node_get(s, handle);
	if (!n)
		return -ESTALE;
	ret = cs_open_node(s, n, flags, dir, &cfh, &cdir, &dio_ino);
	if (ret < 0)
		goto out_put;
	if (!dir && (flags & O_TRUNC))
		cs_pub_inode(s, n->ino, 0, 0);
	ret = cs_file_new(s, cfh, cdir, dio_ino,
			  cs_logged(s, flags & CS_OPEN_FLAGS, dio_ino), n, want,
			  &fh);
	if (ret < 0) {
		cs_close_later(s->cb, cfh, cdir, dio_ino);
		goto out_put;
	}
	memset(out, 0, sizeof(*out));
	out->fh = fh;
out_put:
	cs_node_put(s, n);
	return ret;
}

static int cfs_open(struct agent_store *bs, uint64_t handle, uint32_t flags,
		     int dir, struct bcp_open_rep *out)
{
	return cs_open((struct ceph_store *)bs, handle, flags, dir, 0, out);
}

static int cfs_reopen(struct agent_store *bs, const struct bcp_reopen_req *r,
		       struct bcp_open_rep *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	uint32_t idx = (uint32_t)(r->fh & 0xffffffffu);
	struct ceph_node *n;
	int used, ret;

	if (idx == 0 || (r->fh >> 32) == 0 || idx > cs_max_files() ||
	    r->dir > 1)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	used = idx <= s->nfiles && cs_file_at(s, idx - 1)->used;
	pthread_mutex_unlock(&s->lock);
	if (used)
		return -EEXIST;
	/* what the first OPEN did is done: never truncate again; a
	 * concurrent REOPEN of the same fh loses in cs_file_new() */
	ret = cs_open(s, r->handle, r->flags & ~(uint32_t)O_TRUNC,
		      (int)r->dir, r->fh, out);
	/* this Fh keeps a removed file now: what lingers of it may go */
	if (ret == 0 && !r->dir && (n = cs_node_get(s, r->handle))) {
		agent_linger_claim_obj(s->cb->dev, n->ino, NULL);
		cs_node_put(s, n);
	}
	return ret;
}

static int cfs_release(struct agent_store *bs, uint64_t handle, uint64_t fh,
			int dir)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct agent_file *f = cs_file_get(s, fh, dir);

	(void)handle;
	if (!f)
		return cs_file_err(s, fh, dir);
	pthread_mutex_lock(&s->lock);
	f->closing = 1;
	f->refs--;		/* the fh's own; ours goes below */
	pthread_mutex_unlock(&s->lock);
	cs_file_put(s, f);
	return 0;
}

/* The Inode a fid names, referenced; -ESTALE when not ours or gone. */
static int cs_fid_inode(struct ceph_store *s, const uint8_t fid[BCP_FID_LEN],
			Inode **in, struct ceph_statx *x)
{
	inodeno_t ino = { cs_fid_ino(s, fid) };
	int ret;

	if (!ino.val)
		return -ESTALE;
	ret = ceph_ll_lookup_inode(s->cm, ino, in);
	if (ret < 0)
		return ret == -ENOMEM ? ret : -ESTALE;
	ret = ceph_ll_getattr(s->cm, *in, x, CS_WANT, AT_SYMLINK_NOFOLLOW,
			      s->cb->perms);
	/* unlinked: alive while this agent holds it open (as a posix
	 * store's handle is), so that a host that had it open at a cut
	 * gets it back */
	if (ret == 0 && x->stx_nlink == 0 &&
	    !cs_dio_open(s->cb, ino.val) &&
	    !agent_linger_holds(s->cb->dev, ino.val))
		ret = -ESTALE;
	if (ret < 0) {
		ceph_ll_put(s->cm, *in);
		return ret == -ENOMEM ? ret : -ESTALE;
	}
	return 0;
}

static int cfs_rebind(struct agent_store *bs, uint64_t handle,
		       uint64_t nlookup, const uint8_t fid[BCP_FID_LEN])
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_statx x;
	struct ceph_node *n;
	Inode *in;
	int ret, found;

	if (handle < 2 || nlookup == 0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	n = cs_node_any(s, handle);
	if (n && n->dead) {
		n->nlookup = n->nlookup + nlookup < n->nlookup ?
			     UINT64_MAX : n->nlookup + nlookup;
		pthread_mutex_unlock(&s->lock);
		return -ESTALE;
	}
	pthread_mutex_unlock(&s->lock);
	found = cs_fid_inode(s, fid, &in, &x);
	if (found == -ENOMEM)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	n = cs_node_any(s, handle);
	if (found < 0) {
		/* gone: the host still holds the value, so keep it taken */
		if (!n)
			cs_node_bury(s, handle, nlookup);
		pthread_mutex_unlock(&s->lock);
		return n ? -EEXIST : -ESTALE;
	}
	if (n) {
		ret = n->dead || n->ino != x.stx_ino ? -EEXIST : 0;
		if (ret == 0 && n != s->root)
			n->nlookup = n->nlookup + nlookup < n->nlookup ?
				     UINT64_MAX : n->nlookup + nlookup;
		pthread_mutex_unlock(&s->lock);
		ceph_ll_put(s->cm, in);
		return ret;
	}
	pthread_mutex_unlock(&s->lock);
	/*
	 * A second node of its own when another handle names the object
	 * already, so each handle is counted and forgotten on its own.  A
	 * racing REBIND of the same value: the host does not send two.
	 */
	return cs_node_add(s, in, &x, handle, nlookup, NULL, NULL);
}

static int cfs_fid_entry(struct agent_store *bs,
			  const uint8_t fid[BCP_FID_LEN],
			  struct bcp_entry *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_statx x;
	Inode *in;
	int ret;

	ret = cs_fid_inode(s, fid, &in, &x);
	if (ret < 0)
		return ret;
	return cs_node_add(s, in, &x, 0, 1, out, NULL);
}

static int cfs_statfs(struct agent_store *bs, uint64_t handle,
		       struct bcp_statfs_rep *out)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n = cs_node_get(s, handle);
	struct statvfs sv;
	int ret;

	if (!n)
		return -ESTALE;
	ret = ceph_ll_statfs(s->cm, n->in, &sv);
	cs_node_put(s, n);
	if (ret < 0)
		return ret;
	memset(out, 0, sizeof(*out));
	out->blocks = sv.f_blocks;
	out->bfree = sv.f_bfree;
	out->bavail = sv.f_bavail;
	out->files = sv.f_files;
	out->ffree = sv.f_ffree;
	out->bsize = (uint32_t)sv.f_bsize;
	out->frsize = (uint32_t)(sv.f_frsize ? sv.f_frsize : sv.f_bsize);
	out->namemax = BCP_NAME_MAX;
	return 0;
}

/* trusted.* and security.*: only a session whose ids are not squashed. */
static int cs_xattr_privileged(const struct ceph_store *s, const char *name)
{
	return s->ident->squash != AGENT_SQUASH_NONE &&
	       (!strncmp(name, "trusted.", 8) ||
		!strncmp(name, "security.", 9));
}

static int cs_xattr_node(struct ceph_store *s, uint64_t handle,
			 const char *name, size_t nlen, char cname[256],
			 struct ceph_node **out)
{
	enum bcp_err why;
	int ret;

	if (name) {
		ret = bcp_xattr_name_check(name, nlen, &why);
		if (ret < 0)
			return ret;
		memcpy(cname, name, nlen);
		cname[nlen] = '\0';
	}
	*out = cs_node_get(s, handle);
	return *out ? 0 : -ESTALE;
}

static int cfs_setxattr(struct agent_store *bs, uint64_t handle,
			 uint32_t flags, const char *name, size_t nlen,
			 const void *value, size_t vlen)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n;
	char cname[256];
	int ret;

	ret = cs_xattr_node(s, handle, name, nlen, cname, &n);
	if (ret < 0)
		return ret;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		ret = -EINVAL;
	else if (cs_xattr_privileged(s, cname) || n->mode == S_IFLNK)
		ret = -EPERM;
	else
		ret = ceph_ll_setxattr(s->cm, n->in, cname, value, vlen,
				       (int)flags, s->cb->perms);
	if (ret == 0)
		cs_pub_inode(s, n->ino, -1, 0);
	cs_node_put(s, n);
	return ret;
}

static int cfs_getxattr(struct agent_store *bs, uint64_t handle,
			 const char *name, size_t nlen, void *buf,
			 size_t size)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n;
	char cname[256];
	int ret;

	ret = cs_xattr_node(s, handle, name, nlen, cname, &n);
	if (ret < 0)
		return ret;
	if (n->mode == S_IFLNK)
		ret = -ENODATA;
	else
		ret = ceph_ll_getxattr(s->cm, n->in, cname, size ? buf : NULL,
				       size, s->cb->perms);
	cs_node_put(s, n);
	return ret;
}

static int cfs_listxattr(struct agent_store *bs, uint64_t handle, void *buf,
			  size_t size)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n;
	size_t len = 0;
	int ret;

	ret = cs_xattr_node(s, handle, NULL, 0, NULL, &n);
	if (ret < 0)
		return ret;
	if (n->mode != S_IFLNK)
		ret = ceph_ll_listxattr(s->cm, n->in, size ? buf : NULL, size,
					&len, s->cb->perms);
	cs_node_put(s, n);
	if (ret < 0)
		return ret;
	return (int)len;
}

static int cfs_removexattr(struct agent_store *bs, uint64_t handle,
			    const char *name, size_t nlen)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct ceph_node *n;
	char cname[256];
	int ret;

	ret = cs_xattr_node(s, handle, name, nlen, cname, &n);
	if (ret < 0)
		return ret;
	if (cs_xattr_privileged(s, cname) || n->mode == S_IFLNK)
		ret = -EPERM;
	else
		ret = ceph_ll_removexattr(s->cm, n->in, cname, s->cb->perms);
	if (ret == 0)
		cs_pub_inode(s, n->ino, -1, 0);
	cs_node_put(s, n);
	return ret;
}

/* Drop nlookup of handle; the last takes the node out of the tables. */
static void cfs_forget_handle(struct ceph_store *s, uint64_t handle,
			       uint64_t nlookup)
{
	struct ceph_node *n;
	int last = 0;

	pthread_mutex_lock(&s->lock);
	n = cs_node_any(s, handle);
	if (n && n != s->root) {
		if (nlookup >= n->nlookup) {
			cs_node_unlink(s, n);
			last = cs_node_unref_locked(n);
		} else {
			n->nlookup -= nlookup;
		}
	}
	pthread_mutex_unlock(&s->lock);
	/* ceph_ll_put() drops a cache reference: it never waits */
	if (last)
		cs_node_free(s, n);
}

static void cfs_forget(struct agent_store *bs, uint64_t handle,
			uint64_t nlookup)
{
	cfs_forget_handle((struct ceph_store *)bs, handle, nlookup);
}

static int cfs_lseek(struct agent_store *bs, const struct bcp_lseek_req *r,
		      int64_t *off)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct agent_file *f = cs_file_get(s, r->fh, -1);
	struct ceph_statx x;
	int64_t o = 0;
	int ret = 0;

	if (!f)
		return -EBADF;
	switch (r->whence) {
	case SEEK_SET:
	case SEEK_CUR:
		if (r->offset > INT64_MAX)
			ret = -EINVAL;
		o = (int64_t)r->offset;
		break;
	case SEEK_END:
	case SEEK_DATA:
	case SEEK_HOLE:
		/* no extent map: the whole file is data */
		ret = ceph_ll_getattr(s->cm, f->node->in, &x, CEPH_STATX_SIZE,
				      0, s->cb->perms);
		if (ret < 0)
			break;
		o = (int64_t)r->offset;
		if (r->whence == SEEK_END)
			o = (int64_t)x.stx_size + o;
		else if (o < 0 || (uint64_t)o >= x.stx_size)
			ret = -ENXIO;
		else if (r->whence == SEEK_HOLE)
			o = (int64_t)x.stx_size;
		if (ret == 0 && o < 0)
			ret = -EINVAL;
		break;
	default:
		ret = -EINVAL;
	}
	cs_file_put(s, f);
	if (ret < 0)
		return ret;
	*off = o;
	return 0;
}

/* ---- the data path ---- */

static int cfs_file_get(struct agent_store *bs, uint64_t fh,
			 struct agent_file **out, int *fd)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	struct agent_file *f = cs_file_get(s, fh, -1);

	if (!f)
		return -EBADF;
	if (f->isdir) {
		cs_file_put(s, f);	/* not the last: the fh holds one */
		return -EISDIR;
	}
	*out = f;
	*fd = -1;		/* bytes move with file_rw() */
	return 0;
}

static void cfs_file_put(struct agent_store *bs, struct agent_file *f)
{
	cs_file_put((struct ceph_store *)bs, f);
}

static void cfs_file_wrote(struct agent_store *bs, struct agent_file *f,
			    uint64_t off, uint64_t len)
{
	struct ceph_store *s = (struct ceph_store *)bs;

	if (len && off <= INT64_MAX && len <= INT64_MAX - off)
		cs_pub_inode(s, f->node->ino, (int64_t)off, (int64_t)len);
}

/*
 * A write through a Fh whose writes are logged: logged, written, then
 * answered (ceph_wlog.h); when the log cannot take it, written and
 * flushed.  A write past the log (direct, or O_DSYNC) first makes the
 * cluster have the file's logged ones, which a replay must not write over
 * it.
 */
static ssize_t cs_write(struct ceph_store *s, struct agent_file *f,
			const void *buf, size_t len, uint64_t off)
{
	struct cs_wlog *w = s->cb->wlog;
	uint32_t slot;
	int logged = 0, ret, n;

	if (f->logged)
		logged = cs_wlog_add(w, f->node->ino, off, buf, len,
				     &slot) == 0;
	else if (w && (ret = cs_settle(s, f->node->in, f->node->ino)) < 0)
		return ret;
	n = ceph_ll_write(s->cm, f->fh, (int64_t)off, len, buf);
	if (logged)
		cs_wlog_done(w, slot, n > 0);
	else if (f->logged && n > 0 &&
		 (ret = ceph_ll_fsync(s->cm, f->fh, 0)) < 0)
		return ret;
	return n;
}

static ssize_t cfs_file_rw(struct agent_store *bs, struct agent_file *f,
			    int write, void *buf, size_t len, uint64_t off)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	size_t done = 0;
	ssize_t n;

	if (off > INT64_MAX || len > INT64_MAX - off)
		return -EFBIG;
	/*
	 * Our own write, not another client's, for the sweep, before and
	 * after it (a sweep in between clears the first): the batch engine
	 * tells the store what a push wrote only when another session holds
	 * something, and the sweep otherwise told the writer's own host its
	 * write was news, which dropped its cached pages of the file.
	 */
	if (write)
		cs_watch_self(s->cb, f->node->ino, NULL, 0);
	/* an int result: at most 1 GiB per call */
	while (done < len) {
		size_t chunk = len - done > (1u << 30) ? (1u << 30) :
							 len - done;

		if (write)
			n = cs_write(s, f, (const char *)buf + done, chunk,
				     off + done);
		else
			n = ceph_ll_read(s->cm, f->fh, (int64_t)(off + done),
					 chunk, (char *)buf + done);
		if (n < 0)
			return done ? (ssize_t)done : n;
		if (n == 0) {
			if (write)
				return done ? (ssize_t)done : -EIO;
			break;		/* the end of the file */
		}
		done += (size_t)n;
	}
	if (write)
		cs_watch_self(s->cb, f->node->ino, NULL, 0);
	return (ssize_t)done;
}

/* ---- calls on the blocking pool ---- */

/* The node a call works on when it has no file: c->priv. */
static int cfs_call_begin(struct agent_store *bs, const struct bcp_msg *m,
			   struct agent_store_call *c)
{
	struct ceph_store *s = (struct ceph_store *)bs;
	const struct bcp_fallocate_req *fa;
	const struct bcp_copy_req *cp;
	const struct bcp_fsync_req *fs;
	const struct bcp_readdir_req *rd;
	struct ceph_node *n;

	c->op = m->hdr.opcode;
	c->f = c->f2 = NULL;
	c->fd = c->fd2 = -1;
	c->own_fd = 0;
	c->priv = NULL;
	c->res = 0;
	c->nread = 0;
	c->eof = 0;
	switch (c->op) {
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
		fs = &m->u.fsync_req;
		c->datasync = !!fs->datasync;
		if (fs->fh) {
			c->f = cs_file_get(s, fs->fh, -1);
			return c->f ? 0 : -EBADF;
		}
		n = cs_node_get(s, fs->handle);
		if (!n)
			return -ESTALE;
		if (n->mode != S_IFDIR && n->mode != S_IFREG) {
			cs_node_put(s, n);
			return -EINVAL;
		}
		c->priv = n;
		return 0;
	case BCP_OP_FALLOCATE:
		fa = &m->u.fallocate_req;
		if (fa->offset > INT64_MAX || fa->length > INT64_MAX ||
		    fa->offset + fa->length > INT64_MAX)
			return -EFBIG;
		/* libcephfs knows no other mode (cs_call_fallocate()) */
		if (fa->mode & ~(uint32_t)(FALLOC_FL_KEEP_SIZE |
					   FALLOC_FL_PUNCH_HOLE))
			return -EOPNOTSUPP;
		c->f = cs_file_get(s, fa->fh, 0);
		if (!c->f)
			return cs_file_err(s, fa->fh, 0);
		c->mode = fa->mode;
		c->off = fa->offset;
		c->len = fa->length;
		return 0;
	case BCP_OP_COPY_FILE_RANGE:
		cp = &m->u.copy_req;
		if (cp->flags)
			return -EINVAL;
		if (cp->off_in > INT64_MAX || cp->off_out > INT64_MAX)
			return -EINVAL;
		c->f = cs_file_get(s, cp->fh_in, 0);
		if (!c->f)
			return cs_file_err(s, cp->fh_in, 0);
		c->f2 = cs_file_get(s, cp->fh_out, 0);
		if (!c->f2) {
			cs_file_put(s, c->f);
			c->f = NULL;
			return cs_file_err(s, cp->fh_out, 0);
		}
		c->off = cp->off_in;
		c->off2 = cp->off_out;
		c->len = cp->length > CS_COPY_MAX ? CS_COPY_MAX : cp->length;
		return 0;
	case BCP_OP_READDIR:
		rd = &m->u.readdir_req;
		if (rd->flags & ~BCP_READDIR_PLUS)
			return -EINVAL;
		if (rd->cookie > INT64_MAX)
			return -EINVAL;
		if (!c->buf)
			return -ENOMEM;
		c->f = cs_file_get(s, rd->fh, 1);
		if (!c->f)
			return cs_file_err(s, rd->fh, 1);
		c->rd = *rd;
		return 0;
	}
	return -EINVAL;
}

/* COPY_FILE_RANGE: read and write through a buffer of the call's own. */
static long cs_call_copy(struct ceph_store *s, struct agent_store_call *c)
{
	uint64_t done = 0;
	size_t chunk;
	ssize_t n, w;
	char *buf;

	buf = malloc(CS_COPY_BUF);
	if (!buf)
		return -ENOMEM;
	while (done < c->len) {
		chunk = c->len - done > CS_COPY_BUF ? CS_COPY_BUF :
						      (size_t)(c->len - done);
		n = cfs_file_rw(&s->base, c->f, 0, buf, chunk,
				 c->off + done);
		if (n <= 0) {
			if (n < 0 && !done)
				done = (uint64_t)n;
			break;
		}
		w = cfs_file_rw(&s->base, c->f2, 1, buf, (size_t)n,
				 c->off2 + done);
		if (w < 0) {
			if (!done)
				done = (uint64_t)w;
			break;
		}
		done += (uint64_t)w;
		if (w < n)
			break;
	}
	free(buf);
	return (long)done;
}

/*
 * READDIR: entries from the cookie on, encoded into c->buf as the reply
 * carries them (at most max_bytes), so that readdir_fill() on the worker
 * only copies.  PLUS takes a lookup reference per entry here.  An error
 * after some entries is still an error (store_posix.c), unless entries
 * were read: then the host asks again from the last one.
 */
static long cs_call_readdir(struct ceph_store *s, struct agent_store_call *c)
{
	int plus = !!(c->rd.flags & BCP_READDIR_PLUS);
	struct ceph_dir_result *dir = c->f->dir;
	size_t cap = c->cap, off = 0, nlen;
	struct bcp_dirent de;
	struct bcp_entry e;
	struct ceph_statx x;
	struct dirent d;
	Inode *in;
	int64_t pos;
	uint32_t n = 0;
	long ret = 0;
	int r, dot;

	if (c->rd.max_bytes < cap)
		cap = c->rd.max_bytes;
	pthread_mutex_lock(&c->f->dlock);
	ceph_seekdir(s->cm, dir, (int64_t)c->rd.cookie);
	for (;;) {
		pos = ceph_telldir(s->cm, dir);
		in = NULL;
		if (plus)
			r = ceph_readdirplus_r(s->cm, dir, &d, &x, CS_WANT,
					       AT_SYMLINK_NOFOLLOW, &in);
		else
			r = ceph_readdir_r(s->cm, dir, &d);
		if (r < 0) {
			ret = n ? 0 : r;
			break;
		}
		if (r == 0) {
			c->eof = 1;
			break;
		}
		nlen = strnlen(d.d_name, sizeof(d.d_name));
		if (off + bcp_dirent_size(plus, nlen) > cap) {
			/* the next READDIR starts at this entry */
			if (in)
				ceph_ll_put(s->cm, in);
			ceph_seekdir(s->cm, dir, pos);
			break;
		}
		dot = !strcmp(d.d_name, ".") || !strcmp(d.d_name, "..");
		memset(&de, 0, sizeof(de));
		de.cookie = (uint64_t)ceph_telldir(s->cm, dir);
		de.ino = d.d_ino;
		de.type = d.d_type;
		de.name_len = (uint16_t)nlen;
		memset(&e, 0, sizeof(e));
		if (plus && !dot && in) {
			cs_watch_name(s->cb, c->f->node->ino, d.d_name,
				      x.stx_ino);
			r = cs_node_add(s, in, &x, 0, 1, &e, NULL);
			if (r < 0) {
				ret = n ? 0 : r;
				break;
			}
		} else {
			if (in)
				ceph_ll_put(s->cm, in);
			if (plus) {
				e.attr.ino = d.d_ino;
				e.attr.mode = S_IFDIR;
			}
		}
		if (bcp_dirent_put(c->buf, cap, &off, plus, &de, &e,
				   d.d_name) < 0) {
			if (plus && e.handle)
				cfs_forget_handle(s, e.handle, 1);
			break;
		}
		n++;
	}
	pthread_mutex_unlock(&c->f->dlock);
	c->nread = off;
	c->mode = n;		/* entries in buf, for readdir_fill() */
	return ret;
}

/*
 * fallocate(2) that grows the file: libcephfs sets the new size without
 * checking the file system's max_file_size (a setattr does, EFBIG), and
 * a later truncate of a file grown to exabytes walks every object of the
 * range in the client's memory.  Grow it by a setattr first, so the
 * limit holds; what is left for fallocate is within the size.  A mode
 * libcephfs refuses (it knows only KEEP_SIZE and PUNCH_HOLE) never gets
 * here (cfs_call_begin()): a failed fallocate changes nothing.
 */
static int cs_call_fallocate(struct ceph_store *s, struct agent_store_call *c)
{
	struct ceph_statx x;
	int ret;

	if (!(c->mode & (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))) {
		ret = ceph_ll_getattr(s->cm, c->f->node->in, &x,
				      CEPH_STATX_SIZE, 0, s->cb->perms);
		if (ret < 0)
			return ret;
		if (c->off + c->len > x.stx_size) {
			/* the times are marked after the fallocate */
			memset(&x, 0, sizeof(x));
			x.stx_size = c->off + c->len;
			ret = ceph_ll_setattr(s->cm, c->f->node->in, &x,
					      CEPH_SETATTR_SIZE, s->cb->perms);
			if (ret < 0)
				return ret;
		}
	}
	ret = cs_settle(s, c->f->node->in, c->f->node->ino);
	if (ret < 0)
		return ret;
	ret = ceph_ll_fallocate(s->cm, c->f->fh, (int)c->mode,
				(int64_t)c->off, (int64_t)c->len);
	if (ret < 0)
		return ret;
	/*
	 * Linux's file systems mark mtime and ctime at every fallocate(2)
	 * (file_modified()); the Ceph client does not.  Best effort: the
	 * space is allocated.
	 */
	memset(&x, 0, sizeof(x));
	cs_now(&x.stx_mtime);
	x.stx_ctime = x.stx_mtime;
	(void)ceph_ll_setattr(s->cm, c->f->node->in, &x,
			      CEPH_SETATTR_MTIME | CEPH_SETATTR_CTIME,
			      s->cb->perms);
	/*
	 * A larger size stays in the Ceph client for a while (cfs_setattr()
	 * says so): in the MDS before the answer, or a file grown by
	 * fallocate(2) is short again after the agent dies.
	 */
	return ceph_ll_sync_inode(s->cm, c->f->node->in, 0);
}

static void cfs_call_run(struct agent_store_call *c)
{
	struct ceph_store *s = (struct ceph_store *)c->s;
	struct ceph_node *n = c->priv;
	uint64_t mark;
	long ret;

	switch (c->op) {
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
		mark = s->cb->wlog ? cs_wlog_mark(s->cb->wlog) : 0;
		if (c->f && c->f->fh)
			ret = ceph_ll_fsync(s->cm, c->f->fh, c->datasync);
		else
			ret = ceph_ll_sync_inode(s->cm,
						 c->f ? c->f->node->in : n->in,
						 c->datasync);
		/* a data-only sync may leave the size to the client */
		if (ret == 0 && s->cb->wlog && !c->datasync)
			cs_wlog_synced(s->cb->wlog,
				       c->f ? c->f->node->ino : n->ino, mark);
		break;
	case BCP_OP_FALLOCATE:
		ret = cs_call_fallocate(s, c);
		break;
	case BCP_OP_COPY_FILE_RANGE:
		ret = cs_call_copy(s, c);
		break;
	case BCP_OP_READDIR:
		ret = cs_call_readdir(s, c);
		break;
	default:
		ret = -EINVAL;
	}
	c->res = ret;
}

static void cfs_call_end(struct agent_store *bs, struct agent_store_call *c)
{
	struct ceph_store *s = (struct ceph_store *)bs;

	/* the pool changed the data: tell the holders, back on the worker */
	if (c->op == BCP_OP_FALLOCATE && c->res >= 0 && c->f)
		cs_pub_inode(s, c->f->node->ino, (int64_t)c->off,
			     (int64_t)c->len);
	else if (c->op == BCP_OP_COPY_FILE_RANGE && c->res > 0 && c->f2)
		cs_pub_inode(s, c->f2->node->ino, (int64_t)c->off2,
			     (int64_t)c->res);
	if (c->f)
		cs_file_put(s, c->f);
	if (c->f2)
		cs_file_put(s, c->f2);
	cs_node_put(s, c->priv);
	c->f = c->f2 = NULL;
	c->priv = NULL;
}

static int cfs_readdir_fill(struct agent_store *bs,
			     const struct agent_store_call *c, void *buf,
			     size_t cap, size_t *len, uint32_t *count,
			     uint32_t *eof)
{
	(void)bs;
	if (c->res < 0)
		return (int)c->res;
	if (c->nread > cap)
		return -EINVAL;
	if (c->mode == 0 && !c->eof)
		return -EINVAL;	/* max_bytes too small for one entry */
	memcpy(buf, c->buf, c->nread);
	*len = c->nread;
	*count = c->mode;
	*eof = c->eof;
	return 0;
}

static const struct agent_store_ops cfs_ops = {
	.destroy = cfs_destroy,
	.root = cfs_root,
	.notify_start = cfs_notify_start,
	.lookup = cfs_lookup,
	.getattr = cfs_getattr,
	.setattr = cfs_setattr,
	.create_file = cfs_create_file,
	.mkdir = cfs_mkdir,
	.mknod = cfs_mknod,
	.symlink = cfs_symlink,
	.readlink = cfs_readlink,
	.link = cfs_link,
	.unlink = cfs_unlink,
	.rename = cfs_rename,
	.open = cfs_open,
	.release = cfs_release,
	.reopen = cfs_reopen,
	.rebind = cfs_rebind,
	.fid_entry = cfs_fid_entry,
	.statfs = cfs_statfs,
	.setxattr = cfs_setxattr,
	.getxattr = cfs_getxattr,
	.listxattr = cfs_listxattr,
	.removexattr = cfs_removexattr,
	.forget = cfs_forget,
	.lseek = cfs_lseek,
	.file_get = cfs_file_get,
	.file_put = cfs_file_put,
	.file_wrote = cfs_file_wrote,
	.file_inline = NULL,		/* no descriptors */
	.file_inline_set = NULL,
	.file_rw = cfs_file_rw,
	.call_begin = cfs_call_begin,
	.call_run = cfs_call_run,
	.call_end = cfs_call_end,
	.readdir_fill = cfs_readdir_fill,
	.counts = cfs_counts,
};

/* ---- the agent's cephfs store ---- */

static int cfs_backend_sync(struct agent_backend *b)
{
	struct ceph_backend *cb = (struct ceph_backend *)b;
	int ret = ceph_sync_fs(cb->cm);

	if (ret < 0)
		agent_err("sync of %s: %s", b->desc, strerror(-ret));
	return ret;
}

static int cfs_backend_statfs(struct agent_backend *b,
			       struct bcp_statfs_rep *out)
{
	struct ceph_backend *cb = (struct ceph_backend *)b;
	struct statvfs sv;
	Inode *root;
	int ret;

	ret = ceph_ll_lookup_root(cb->cm, &root);
	if (ret < 0)
		return ret;
	ret = ceph_ll_statfs(cb->cm, root, &sv);
	ceph_ll_put(cb->cm, root);
	if (ret < 0)
		return ret;
	memset(out, 0, sizeof(*out));
	out->bsize = (uint32_t)sv.f_bsize;
	out->frsize = (uint32_t)sv.f_frsize;
	out->blocks = sv.f_blocks;
	out->bfree = sv.f_bfree;
	out->bavail = sv.f_bavail;
	out->files = sv.f_files;
	out->ffree = sv.f_ffree;
	out->namemax = BCP_NAME_MAX;
	return 0;
}

/*
 * ---- changes made by other Ceph clients ----
 *
 * Another Ceph client (a second agent on the same CephFS, a ceph-fuse, a
 * kernel mount) changes an object through the MDS, not through any of
 * our sessions, so nobody publishes it.  What libcephfs tells of it:
 *
 *  - ino_cb when the MDS revokes Fc (cached data) from our client, i.e.
 *    when another client writes or truncates a file we read: the range
 *    to drop.  It runs on the client's invalidator thread (a Finisher),
 *    outside client_lock, and only for revocations: our own writes never
 *    call it.  Published at once as INODE.
 *  - dentry_cb when our client drops a dentry it cached: when it learns,
 *    later, that another client removed or renamed it, and when the MDS
 *    asks it to trim its cache.  Also a Finisher thread of its own.
 *    Published as ENTRY, which at worst makes a host look a name up
 *    again.
 *
 * Neither says anything of attributes (chmod, utimes, chown: the MDS
 * revokes As, and libcephfs has no callback for that) nor of a name
 * created in, or removed from, a directory we hold (Fs on the directory
 * revoked: nothing either, and dentry_cb only when our client next looks
 * there).  What does tell is the revocation itself: while our client
 * holds a cap on an object, ceph_ll_getattr() answers from its cache,
 * without a message; once another client's change revoked it, the next
 * ceph_ll_getattr() asks the MDS and sees the change.  So the sweepers
 * re-read, every CS_SWEEP_MS, the attributes of every object a session
 * holds (cheap while nothing changed), compare them with what they saw
 * last, and publish INODE (pages too when size or mtime moved).  They
 * also list every held directory (from the client's cache while it is
 * complete) and publish ENTRY for every name that appeared or now names
 * another object and DELETE for every name gone: a directory's own
 * attributes are no signal, the MDS gathers the mtime and size of a
 * directory other clients write into lazily, so they may stay put in
 * our cache for seconds after a create.  What a session is told of a
 * name (lookup, READDIRPLUS) joins the remembered listing at once
 * (cs_watch_name()): a name made and removed between two sweeps is in
 * neither listing, but the host that looked it up caches it.  A
 * directory of more than CS_SNAP_MAX names is not remembered: a change
 * in it drops every host's caches (agent_notify_reset_all()).  A pass
 * takes at most CS_SWEEP_FILES files (CS_SWEEP_DIRS directories) and
 * the next one goes on from there: past those, a change takes longer
 * to be seen, and the cost stays bounded.  The first sweep of an
 * object compares with what the client's cache held when the session
 * took its hold, so a change in between is not taken for the starting
 * point (a directory's names then are unknown: a reset).  One sweeper
 * does directories, one the rest: a getattr may wait seconds for
 * another client to flush its dirty data and give its caps back.
 *
 * Our own sessions publish what they change themselves (cs_pub_*), and
 * mark it here (cs_watch_self()): a change the sweep finds on an object
 * marked since the last sweep, or while the last sweep read it (what it
 * read may be from before the change), is not published again.  A
 * directory's names are marked with what they name since (an object, or
 * nothing): a name the sweep finds naming something else is published
 * all the same (another client replaced what our session had just made
 * there).
 * A listing read before one of those changes does not show it: the
 * marks are made true in the new listing before it is compared and
 * kept (cs_self_apply()), or a name made here would be told as gone,
 * one removed here as new, and again at the next sweep.
 * A change another client makes to a marked object's attributes in the
 * same sweep is told only by what the host's timeouts bound, as is one
 * to a directory's times (not its mode or owner) for CS_SCATTER_MS
 * after a name change of ours there: the MDS moves them that lazily.  A
 * directory's name changes of ours are also made in its remembered
 * listing as they happen (cs_watch_self()): a listing read while none
 * happened then differs from it only by other clients' changes, and the
 * marks matter only for one that overlapped ours.  A directory is not
 * listed while our sessions go on changing its names, only after a
 * sweep without, because a listing beside a stream of creates leaves
 * the client's copy of the directory incomplete, and each create then
 * asks the MDS for the name before it makes it; what other clients did
 * there meanwhile is told then.
 *
 * Locks: watch_lock is taken under a session's lock (cs_watch_hold()
 * from cs_node_link()) and held while publishing (notify's stripe
 * locks); never across a call into libcephfs.
 */
struct cs_name {
	uint64_t ino;
	char *name;
};

struct cs_watch {
	struct cs_watch *next;
	uint64_t ino;
	unsigned int holds;		/* session nodes registered */
	int known;			/* x is what the last sweep saw */
	struct ceph_statx x;
	/* a directory's names, sorted; toobig: more than CS_SNAP_MAX */
	int listed, toobig;
	int fresh;			/* not swept yet: soon */
	int isdir;			/* swept by the directories' sweeper */
	struct cs_name *names;
	size_t nnames;
	/*
	 * Our sessions changed it since the last sweep: the object, and
	 * these names in it, each with what it names since (self_now: 0
	 * nothing, CS_SELF_ANY unknown); self_all: more names than that.
	 */
	int self, self_all;
	unsigned int nself;
	/*
	 * Marks counted: a sweep whose reading of the object one fell
	 * beside keeps self (what it read may be from before our change).
	 */
	unsigned long self_seq;
	char *self_names[CS_SELF_MAX];
	uint64_t self_now[CS_SELF_MAX];
	/*
	 * Our sessions' name changes are made in names as they happen
	 * (cs_snap_set()) and counted in self_gen; self_unknown: one of
	 * them could not be (its outcome unknown, or no memory) since the
	 * last listing.
	 */
	unsigned long self_gen;
	int self_unknown;
	/* self_gen when the last sweep chose whether to list */
	unsigned long swept_gen;
	/* when our sessions last changed a name here (CLOCK_MONOTONIC) */
	struct timespec self_named;
};

static struct cs_watch **cs_watch_slot(struct ceph_backend *cb,
				       uint64_t ino)
{
	struct cs_watch **pp;

	pp = &cb->watch[(ino * 0x9e3779b97f4a7c15ull) >>
			(64 - 12) & (CS_WATCH_BUCKETS - 1)];
	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static void cs_names_free(struct cs_name *v, size_t n)
{
	while (n--)
		free(v[n].name);
	free(v);
}

static void cs_self_clear(struct cs_watch *w)
{
	while (w->nself)
		free(w->self_names[--w->nself]);
	w->self = 0;
	w->self_all = 0;
	w->self_unknown = 0;
}

/*
 * A session registered a hold on ino (its lock held).  What the host
 * was just told of it is what the client's cache holds now: the first
 * sweep compares with that, so that a change between the host's lookup
 * and the sweep is not taken for the starting point.
 */
static void cs_watch_hold(struct ceph_backend *cb, uint64_t ino, Inode *in)
{
	struct cs_watch **pp, *w;
	struct ceph_statx x;
	int known;

	if (!cb->watch)
		return;
	/* from the cache (no message), as ceph_ll_put() is */
	known = in && ceph_ll_getattr(cb->cm, in, &x, CEPH_STATX_BASIC_STATS |
				      CEPH_STATX_VERSION, AT_STATX_DONT_SYNC,
				      cb->perms) == 0;
	pthread_mutex_lock(&cb->watch_lock);
	pp = cs_watch_slot(cb, ino);
	if (*pp) {
		(*pp)->holds++;
	} else {
		w = calloc(1, sizeof(*w));
		/* out of memory: the host's timeouts bound what it misses */
		if (w) {
			w->ino = ino;
			w->holds = 1;
			w->known = known;
			if (known)
				w->x = x;
			w->isdir = !known || S_ISDIR(x.stx_mode);
			*pp = w;
			cb->nwatch++;
			/* a directory's names are listed at once */
			if (!known || S_ISDIR(x.stx_mode)) {
				w->fresh = 1;
				cb->nfresh++;
				pthread_cond_broadcast(&cb->sweep_cond);
			}
		}
	}
	pthread_mutex_unlock(&cb->watch_lock);
}

static void cs_watch_unhold(struct ceph_backend *cb, uint64_t ino)
{
	struct cs_watch **pp, *w;

	if (!cb->watch)
		return;
	pthread_mutex_lock(&cb->watch_lock);
	pp = cs_watch_slot(cb, ino);
	w = *pp;
	if (w && --w->holds == 0) {
		*pp = w->next;
		cb->nwatch--;
		cb->nfresh -= w->fresh;
		cs_names_free(w->names, w->nnames);
		cs_self_clear(w);
		free(w);
	}
	pthread_mutex_unlock(&cb->watch_lock);
}

/*
 * Where name is in the sorted names v[0..n): 1 and *at when there, else
 * 0 and *at where it would go.
 */
static int cs_names_find(const struct cs_name *v, size_t n, const char *name,
			 size_t *at)
{
	size_t lo = 0, hi = n, mid;
	int c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = strcmp(v[mid].name, name);
		if (c == 0) {
			*at = mid;
			return 1;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return 0;
}

/* name names now (0: nothing) in the sorted names *vp[0..*np). */
static int cs_names_set(struct cs_name **vp, size_t *np, const char *name,
			uint64_t now)
{
	struct cs_name *v = *vp;
	size_t n = *np, at;

	if (cs_names_find(v, n, name, &at)) {
		if (now) {
			v[at].ino = now;
			return 0;
		}
		free(v[at].name);
		memmove(&v[at], &v[at + 1], (n - at - 1) * sizeof(*v));
		*np = n - 1;
		return 0;
	}
	if (!now)
		return 0;
	v = realloc(v, (n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	*vp = v;
	memmove(&v[at + 1], &v[at], (n - at) * sizeof(*v));
	v[at].ino = now;
	v[at].name = strdup(name);
	if (!v[at].name) {
		memmove(&v[at], &v[at + 1], (n - at) * sizeof(*v));
		return -ENOMEM;
	}
	*np = n + 1;
	return 0;
}

/*
 * The remembered listing of w (listed, not too big) has name naming now
 * (0: nothing).  A name more than it can hold makes it too big: the next
 * change resets.  -ENOMEM: left as it was.
 */
static int cs_snap_set(struct cs_watch *w, const char *name, uint64_t now)
{
	size_t at;

	if (now && w->nnames >= CS_SNAP_MAX &&
	    !cs_names_find(w->names, w->nnames, name, &at)) {
		cs_names_free(w->names, w->nnames);
		w->names = NULL;
		w->nnames = 0;
		w->toobig = 1;
		return 0;
	}
	return cs_names_set(&w->names, &w->nnames, name, now);
}

/*
 * A session was told that name in dir is ino (a lookup, a READDIRPLUS):
 * the host may cache it, so the next sweep must compare with it.  A name
 * created and gone again between two sweeps is in neither listing, and
 * without this the host would keep it.
 */
static void cs_watch_name(struct ceph_backend *cb, uint64_t dir,
			  const char *name, uint64_t ino)
{
	struct cs_watch *w;

	if (!cb->watch)
		return;
	pthread_mutex_lock(&cb->watch_lock);
	w = *cs_watch_slot(cb, dir);
	/* not listed yet: the first listing is the starting point */
	if (w && w->listed && !w->toobig)
		cs_snap_set(w, name, ino);	/* failing: the timeouts bound it */
	pthread_mutex_unlock(&cb->watch_lock);
}

/*
 * Our session changed ino (name in it, when not NULL, which names now
 * since: 0 nothing, CS_SELF_ANY unknown): not news.
 */
static void cs_watch_self(struct ceph_backend *cb, uint64_t ino,
			  const char *name, uint64_t now)
{
	struct cs_watch *w;
	unsigned int i;
	char *d;

	if (!cb->watch)
		return;
	pthread_mutex_lock(&cb->watch_lock);
	w = *cs_watch_slot(cb, ino);
	if (w) {
		w->self = 1;
		w->self_seq++;
		if (name) {
			w->self_gen++;
			clock_gettime(CLOCK_MONOTONIC, &w->self_named);
			if (now == CS_SELF_ANY ||
			    (w->listed && !w->toobig &&
			     cs_snap_set(w, name, now) < 0))
				w->self_unknown = 1;
		}
		for (i = 0; name && !w->self_all && i < w->nself; i++) {
			if (!strcmp(w->self_names[i], name)) {
				w->self_now[i] = now;
				name = NULL;
			}
		}
		if (name && !w->self_all) {
			d = w->nself < CS_SELF_MAX ? strdup(name) : NULL;
			if (d) {
				w->self_now[w->nself] = now;
				w->self_names[w->nself++] = d;
			} else {
				w->self_all = 1;
			}
		}
	}
	pthread_mutex_unlock(&cb->watch_lock);
}

/*
 * 1 when our sessions left name naming ino (0: nothing), or changed it
 * in a way not remembered: what the sweep finds there is then our own.
 * Another client that replaced our object under the same name in the
 * same sweep is news all the same.
 */
static int cs_self_named(const struct cs_watch *w, const char *name,
			 uint64_t ino)
{
	unsigned int i;

	if (w->self_all)
		return 1;
	for (i = 0; i < w->nself; i++)
		if (!strcmp(w->self_names[i], name))
			return w->self_now[i] == CS_SELF_ANY ||
			       w->self_now[i] == ino;
	return 0;
}

static void cs_ext(struct ceph_backend *cb, uint32_t kind, uint64_t parent,
		   const char *name, uint64_t ino, int64_t off, int64_t len)
{
	struct agent_change c = {
		.kind = kind, .name = name, .len = name ? strlen(name) : 0,
		.offset = off, .length = len,
	};

	if (parent)
		c.parent = (struct agent_obj){ cb->dev, parent };
	if (ino)
		c.obj = (struct agent_obj){ cb->dev, ino };
	agent_notify_external(&c);
}

/* libcephfs's invalidator thread: another client changed ino's data. */
static void cs_ino_cb(void *handle, vinodeno_t ino, int64_t off,
		      int64_t len)
{
	struct ceph_backend *cb = handle;

	/* Ceph's (0, 0) is all of it, as NOTIFY's */
	atomic_fetch_add(&cb->ev_ino_cb, 1);
	cs_ext(cb, BCP_NOTIFY_INODE, 0, NULL, ino.ino.val, off, len);
}

/*
 * The umask the client applies where a new object's directory has no
 * default ACL: none, the host's is applied already (cs_new_mode()).  Its
 * own default would read our handle as its mount's.
 */
static mode_t cs_umask_cb(void *handle)
{
	(void)handle;
	return 0;
}

/* libcephfs's dentry invalidator thread: name in dirino is stale. */
static void cs_dentry_cb(void *handle, vinodeno_t dirino, vinodeno_t ino,
			 const char *name, size_t len)
{
	struct ceph_backend *cb = handle;
	char cname[256];

	if (!len || len > BCP_NAME_MAX)
		return;
	memcpy(cname, name, len);
	cname[len] = '\0';
	atomic_fetch_add(&cb->ev_dentry_cb, 1);
	cs_ext(cb, BCP_NOTIFY_ENTRY, dirino.ino.val, cname, ino.ino.val, 0,
	       0);
}

static int cs_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cs_name *)a)->name,
		      ((const struct cs_name *)b)->name);
}

/*
 * The names of directory in, sorted: 0, or -E2BIG past CS_SNAP_MAX, or
 * -errno.
 */
static int cs_list(struct ceph_backend *cb, Inode *in, struct cs_name **out,
		   size_t *nout)
{
	struct ceph_dir_result *dir;
	struct cs_name *v = NULL, *nv;
	struct dirent d;
	size_t n = 0, cap = 0;
	int ret;

	ret = ceph_ll_opendir(cb->cm, in, &dir, cb->perms);
	if (ret < 0)
		return ret;
	/*
	 * Not ceph_readdir(): its NULL is the end and an error alike, and a
	 * listing cut short by an error would tell every host that the
	 * names past the cut are gone.
	 */
	while ((ret = ceph_readdir_r(cb->cm, dir, &d)) > 0) {
		ret = 0;
		if (!strcmp(d.d_name, ".") || !strcmp(d.d_name, ".."))
			continue;
		if (n == CS_SNAP_MAX) {
			ret = -E2BIG;
			break;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n].ino = d.d_ino;
		v[n].name = strdup(d.d_name);
		if (!v[n].name) {
			ret = -ENOMEM;
			break;
		}
		n++;
	}
	ceph_ll_releasedir(cb->cm, dir);
	if (ret < 0) {
		cs_names_free(v, n);
		return ret;
	}
	if (n)
		qsort(v, n, sizeof(*v), cs_name_cmp);
	*out = v;
	*nout = n;
	return 0;
}

/*
 * The names our sessions changed since the last sweep, made true in a
 * new listing nv (watch_lock): a listing read before such a change would
 * otherwise tell of it as another client's (a name made here as gone, a
 * name removed here as new), and keep telling until the next listing.
 * A change of a name whose outcome is unknown (CS_SELF_ANY) is left to
 * cs_self_named().  Out of memory: the name stays as listed.
 */
static void cs_self_apply(const struct cs_watch *w, struct cs_name **nvp,
			  size_t *nnp)
{
	unsigned int i;

	for (i = 0; !w->self_all && i < w->nself; i++)
		if (w->self_now[i] != CS_SELF_ANY)
			cs_names_set(nvp, nnp, w->self_names[i],
				     w->self_now[i]);
}

/* What changed between a directory's old and new names (watch_lock). */
static void cs_diff(struct ceph_backend *cb, const struct cs_watch *w,
		    const struct cs_name *nv, size_t nn, int marks)
{
	const struct cs_name *ov = w->names;
	size_t i = 0, j = 0, on = w->nnames;
	int c;

	while (i < on || j < nn) {
		c = i == on ? 1 : j == nn ? -1 :
		    strcmp(ov[i].name, nv[j].name);
		if (c < 0 && !(marks && cs_self_named(w, ov[i].name, 0))) {
			atomic_fetch_add(&cb->ev_sweep, 1);
			atomic_fetch_add(&cb->ev_sweep_names, 1);
			cs_ext(cb, BCP_NOTIFY_DELETE, w->ino, ov[i].name,
			       ov[i].ino, 0, 0);
		} else if (c > 0 &&
			   !(marks && cs_self_named(w, nv[j].name, nv[j].ino))) {
			atomic_fetch_add(&cb->ev_sweep, 1);
			atomic_fetch_add(&cb->ev_sweep_names, 1);
			cs_ext(cb, BCP_NOTIFY_ENTRY, w->ino, nv[j].name,
			       nv[j].ino, 0, 0);
		} else if (c == 0 && ov[i].ino != nv[j].ino &&
			   !(marks && cs_self_named(w, nv[j].name, nv[j].ino))) {
			atomic_fetch_add(&cb->ev_sweep, 1);
			atomic_fetch_add(&cb->ev_sweep_names, 1);
			cs_ext(cb, BCP_NOTIFY_ENTRY, w->ino, nv[j].name,
			       ov[i].ino, 0, 0);
		}
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
}

static int cs_time_ne(struct timespec a, struct timespec b)
{
	return a.tv_sec != b.tv_sec || a.tv_nsec != b.tv_nsec;
}

#define CS_SWEEP_SLOW_MS	1000	/* a call slower than this is logged */

static long cs_ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000L +
	       (t.tv_nsec - t0->tv_nsec) / 1000000L;
}

/*
 * A getattr or a listing that waited long (another client slow to give
 * its caps back) delays what every host hears: say which object.
 */
static void cs_sweep_slow(const struct timespec *t0, const char *what,
			  uint64_t ino)
{
	long ms = cs_ms_since(t0);

	if (ms >= CS_SWEEP_SLOW_MS)
		agent_warn_rl("store cephfs: sweep: %s of inode %#llx took "
			      "%ld ms; changes made by other clients are "
			      "told that much later", what,
			      (unsigned long long)ino, ms);
}

/* Re-read ino; publish what another client changed since the last time. */
static void cs_sweep_one(struct ceph_backend *cb, uint64_t ino)
{
	struct cs_name *nv = NULL;
	struct ceph_statx x, y;
	struct timespec t0;
	struct cs_watch *w;
	size_t nn = 0;
	int ret, listed = 0, toobig = 0, attrs, data, was_known, dir;
	int busy = 0, marks, perm, ours;
	unsigned long gen0 = 0, seq0 = 0;
	unsigned int want = CEPH_STATX_BASIC_STATS | CEPH_STATX_VERSION;
	Inode *in;

	/* held by a session: in the client's cache, no message */
	if (ceph_ll_lookup_inode(cb->cm, (struct inodeno_t){ ino }, &in) < 0)
		return;
	/*
	 * A directory whose names our sessions changed since the last
	 * sweep is not listed (below), and its times, link count and
	 * version are taken for ours: only its mode and owner are asked
	 * for.  Its size and times are the MDS's file lock on it, which
	 * each unlink there takes to write: asking for them beside a
	 * stream of removes in a directory another client holds made the
	 * MDS gather them from every client again and again, and the
	 * removes waited behind (2000 unlinks: 31.7 s, 6.8 s without).
	 */
	pthread_mutex_lock(&cb->watch_lock);
	w = *cs_watch_slot(cb, ino);
	if (w)
		seq0 = w->self_seq;
	if (w && w->known && w->isdir && w->listed &&
	    w->self_gen != w->swept_gen) {
		busy = 1;
		want = CEPH_STATX_MODE | CEPH_STATX_UID | CEPH_STATX_GID;
	}
	pthread_mutex_unlock(&cb->watch_lock);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = ceph_ll_getattr(cb->cm, in, &x, want, 0, cb->perms);
	cs_sweep_slow(&t0, "getattr", ino);
	if (agent_store_ret(ret) < 0)
		goto out_put;
	dir = S_ISDIR(x.stx_mode);
	/* list a directory the first time and whenever it moved */
	pthread_mutex_lock(&cb->watch_lock);
	w = *cs_watch_slot(cb, ino);
	if (busy && (!w || !w->known || !w->isdir || !dir)) {
		pthread_mutex_unlock(&cb->watch_lock);
		goto out_put;	/* it changed meanwhile: the next sweep */
	}
	if (busy) {
		/* the rest as the last sweep saw it */
		y = x;
		x = w->x;
		x.stx_mode = y.stx_mode;
		x.stx_uid = y.stx_uid;
		x.stx_gid = y.stx_gid;
	}
	/*
	 * Every sweep: a name created or removed by another client does
	 * not always move the directory's attributes in our client's cache
	 * at once (the MDS gathers a directory's scattered mtime and size
	 * lazily), but it does drop the client's cached listing.  A
	 * directory too big to remember is listed again only once its
	 * attributes moved.
	 */
	if (w && dir && (!w->toobig || x.stx_version != w->x.stx_version ||
			 cs_time_ne(x.stx_mtime, w->x.stx_mtime) ||
			 cs_time_ne(x.stx_ctime, w->x.stx_ctime)))
		listed = 1;
	/*
	 * Our sessions changed names here since the last sweep, and may go
	 * on: list once the directory has gone a sweep without, keeping the
	 * marks until then (the remembered listing has our changes, so the
	 * later listing still tells only other clients' apart).  A listing
	 * beside a stream of creates is not only the cost of reading the
	 * directory: it leaves the client's copy of the directory
	 * incomplete, and each create then asks the MDS whether the name
	 * exists first, however slowly the stream goes.
	 */
	if (busy || (listed && w->listed && w->self_gen != w->swept_gen)) {
		listed = 0;
		busy = 1;
	}
	if (w) {
		gen0 = w->self_gen;
		w->swept_gen = gen0;
	}
	pthread_mutex_unlock(&cb->watch_lock);
	if (!w)
		goto out_put;
	if (listed) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = cs_list(cb, in, &nv, &nn);
		cs_sweep_slow(&t0, "listing", ino);
		if (ret == -E2BIG)
			toobig = 1;
		else if (ret < 0)
			listed = 0;
	}
	/* for testing: changes made meanwhile fall between read and compare */
	if (cb->sweep_pause_ms && (listed || !dir))
		usleep(cb->sweep_pause_ms * 1000u);
	pthread_mutex_lock(&cb->watch_lock);
	w = *cs_watch_slot(cb, ino);
	if (!w)
		goto out_unlock;
	was_known = w->known;
	/*
	 * A directory's size is the bytes of everything under it (Ceph's
	 * rbytes), which a write anywhere below moves, whoever made it: not
	 * a change of the directory's.  Its times, link count and version
	 * follow its names, gathered by the MDS lazily (seconds after the
	 * change): for a while after a name change of ours, they are ours.
	 * Another client's name changes there are told by the listing.
	 */
	data = was_known && !dir && (x.stx_size != w->x.stx_size ||
				     cs_time_ne(x.stx_mtime, w->x.stx_mtime));
	perm = was_known && (x.stx_mode != w->x.stx_mode ||
			     x.stx_uid != w->x.stx_uid ||
			     x.stx_gid != w->x.stx_gid);
	attrs = was_known && (data || perm ||
			      x.stx_nlink != w->x.stx_nlink ||
			      x.stx_version != w->x.stx_version ||
			      cs_time_ne(x.stx_mtime, w->x.stx_mtime) ||
			      cs_time_ne(x.stx_ctime, w->x.stx_ctime));
	if (attrs && (w->self ||
		      (dir && !perm && w->self_named.tv_sec &&
		       cs_ms_since(&w->self_named) < CS_SCATTER_MS))) {
		atomic_fetch_add(&cb->ev_self, 1);
	} else if (attrs) {
		atomic_fetch_add(&cb->ev_sweep, 1);
		cs_ext(cb, BCP_NOTIFY_INODE, 0, NULL, ino, dir || !data ?
		       -1 : 0, 0);
	}
	if (listed && toobig) {
		if (attrs && !w->self)
			agent_notify_reset_all();
		cs_names_free(w->names, w->nnames);
		w->names = NULL;
		w->nnames = 0;
		w->toobig = 1;
		w->listed = 1;
	} else if (listed) {
		/*
		 * The listing was read after every name change of ours the
		 * remembered one has: only other clients' changes differ.
		 * Else ours made meanwhile are made true in it, and a name
		 * that differs but is marked ours is not told.
		 */
		marks = w->self_gen != gen0 || w->self_unknown || w->toobig;
		if (marks)
			cs_self_apply(w, &nv, &nn);
		/* changed since the host looked: which names, unknown */
		if ((!w->listed || w->toobig) && attrs && !w->self)
			agent_notify_reset_all();
		else if (w->listed)
			cs_diff(cb, w, nv, nn, marks);
		cs_names_free(w->names, w->nnames);
		w->names = nv;
		w->nnames = nn;
		nv = NULL;
		nn = 0;
		w->toobig = 0;
		w->listed = 1;
	}
	w->x = x;
	w->known = 1;
	w->isdir = dir;
	/*
	 * A mark made since the getattr above: x may be from before that
	 * change (its write went between the getattr and now), so the next
	 * sweep may still find it, and it is still ours.
	 */
	ours = w->self_seq != seq0;
	if (busy)
		w->self = 0;	/* the names' marks wait for the listing */
	else
		cs_self_clear(w);
	if (ours)
		w->self = 1;
out_unlock:
	pthread_mutex_unlock(&cb->watch_lock);
	cs_names_free(nv, nn);
out_put:
	ceph_ll_put(cb->cm, in);
}

/*
 * Two sweepers: one for the directories, one for the rest, so that a
 * file whose caps another client is slow to give back (it flushes its
 * dirty data first) does not hold the names back.
 */
static void *cs_sweeper_main(void *arg)
{
	struct cs_sweeper *sw = arg;
	struct ceph_backend *cb = sw->cb;
	uint64_t *v = NULL, *nv;
	size_t n, cap = 0, i;
	struct timespec t, now;
	size_t share = sw->dirs ? CS_SWEEP_DIRS : CS_SWEEP_FILES, k;
	struct cs_watch *w;
	int all;

	pthread_mutex_lock(&cb->watch_lock);
	clock_gettime(CLOCK_MONOTONIC, &t);
	while (!cb->sweep_stop) {
		/* every CS_SWEEP_MS all; in between, new ones at once */
		if (!cb->nfresh || !sw->dirs)
			pthread_cond_timedwait(&cb->sweep_cond,
					       &cb->watch_lock, &t);
		if (cb->sweep_stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		all = now.tv_sec > t.tv_sec ||
		      (now.tv_sec == t.tv_sec && now.tv_nsec >= t.tv_nsec);
		if (!all && (!cb->nfresh || !sw->dirs))
			continue;
		if (all) {
			t = now;
			t.tv_nsec += CS_SWEEP_MS * 1000000L;
			t.tv_sec += t.tv_nsec / 1000000000L;
			t.tv_nsec %= 1000000000L;
		}
		if (cb->nwatch > cap) {
			nv = realloc(v, cb->nwatch * sizeof(*v));
			if (!nv)
				continue;	/* try again next time */
			v = nv;
			cap = cb->nwatch;
		}
		/*
		 * A pass takes whole buckets from the cursor on until it
		 * has its share (a bucket's chain may take it a little
		 * over); the next pass goes on from there.  A fresh
		 * directory is taken wherever it is.
		 */
		n = 0;
		for (k = 0; k < CS_WATCH_BUCKETS; k++) {
			i = (sw->cursor + k) % CS_WATCH_BUCKETS;
			if (all && n >= share) {
				all = 0;	/* only the fresh ones on */
				sw->cursor = i;
			}
			for (w = cb->watch[i]; w; w = w->next) {
				if (w->isdir != sw->dirs ||
				    (!all && !w->fresh))
					continue;
				v[n++] = w->ino;
				cb->nfresh -= w->fresh;
				w->fresh = 0;
			}
		}
		pthread_mutex_unlock(&cb->watch_lock);
		for (i = 0; i < n; i++)
			cs_sweep_one(cb, v[i]);
		pthread_mutex_lock(&cb->watch_lock);
	}
	pthread_mutex_unlock(&cb->watch_lock);
	free(v);
	return NULL;
}

/* Stop the first n sweepers and wait for them. */
static void cs_sweepers_join(struct ceph_backend *cb, int n)
{
	pthread_mutex_lock(&cb->watch_lock);
	cb->sweep_stop = 1;
	pthread_cond_broadcast(&cb->sweep_cond);
	pthread_mutex_unlock(&cb->watch_lock);
	while (n--)
		pthread_join(cb->sweeper[n].thread, NULL);
}

/*
 * After ceph_mount(): the client exists (ceph_init()), no session yet.
 * The callbacks cannot be unregistered: cb lives until ceph_release(),
 * which stops the client's invalidator threads.
 */
static int cs_watch_start(struct ceph_backend *cb)
{
	struct ceph_client_callback_args args = {
		.handle = cb,
		.ino_cb = cs_ino_cb,
		.dentry_cb = cs_dentry_cb,
		.umask_cb = cs_umask_cb,
	};
	pthread_condattr_t ca;
	const char *env;
	int ret = 0, i;

	cb->watch = calloc(CS_WATCH_BUCKETS, sizeof(*cb->watch));
	if (!cb->watch)
		return -ENOMEM;
	pthread_mutex_init(&cb->watch_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cb->sweep_cond, &ca);
	pthread_condattr_destroy(&ca);
	env = getenv("BLUECACHE_CEPH_SWEEP_PAUSE_MS");
	if (env && atoi(env) > 0 && atoi(env) <= 60000)
		cb->sweep_pause_ms = (unsigned int)atoi(env);
	for (i = 0; i < 2; i++) {
		cb->sweeper[i].cb = cb;
		cb->sweeper[i].dirs = i == 0;
		ret = -pthread_create(&cb->sweeper[i].thread, NULL,
				      cs_sweeper_main, &cb->sweeper[i]);
		if (ret < 0)
			break;
	}
	if (ret < 0) {
		agent_err("store cephfs: sweeper thread: %s", strerror(-ret));
		cs_sweepers_join(cb, i);
		pthread_cond_destroy(&cb->sweep_cond);
		pthread_mutex_destroy(&cb->watch_lock);
		free(cb->watch);
		cb->watch = NULL;
		return ret;
	}
	cb->sweeping = 1;
	ceph_ll_register_callbacks(cb->cm, &args);
	return 0;
}

/* Every session is gone: stop the sweeper (the callbacks stay). */
static void cs_watch_stop(struct ceph_backend *cb)
{
	size_t i;
	struct cs_watch *w;

	if (!cb->sweeping)
		return;
	cs_sweepers_join(cb, 2);
	cb->sweeping = 0;
	agent_info("store cephfs: changes by other clients: %lu from ino_cb, "
		  "%lu from dentry_cb, %lu from the sweep (%lu of names); %lu "
		  "own skipped", atomic_load(&cb->ev_ino_cb),
		  atomic_load(&cb->ev_dentry_cb), atomic_load(&cb->ev_sweep),
		  atomic_load(&cb->ev_sweep_names), atomic_load(&cb->ev_self));
	for (i = 0; i < CS_WATCH_BUCKETS; i++)
		while ((w = cb->watch[i])) {
			cb->watch[i] = w->next;
			cs_names_free(w->names, w->nnames);
			cs_self_clear(w);
			free(w);
		}
}

/* After ceph_release(): no callback can run any more. */
static void cs_watch_free(struct ceph_backend *cb)
{
	if (!cb->watch)
		return;
	pthread_cond_destroy(&cb->sweep_cond);
	pthread_mutex_destroy(&cb->watch_lock);
	free(cb->watch);
}

static void cfs_backend_close(struct agent_backend *b)
{
	struct ceph_backend *cb = (struct ceph_backend *)b;

	/* every session is gone: close what they left, then unmount */
	cs_closer_join(cb);
	cs_wlog_close(cb->wlog);
	pthread_cond_destroy(&cb->close_cond);
	pthread_mutex_destroy(&cb->close_lock);
	cs_dio_free(cb);
	cs_watch_stop(cb);
	ceph_userperm_destroy(cb->perms);
	ceph_unmount(cb->cm);
	ceph_release(cb->cm);
	cs_watch_free(cb);
	free((char *)b->desc);
	free(cb);
}

static const struct agent_backend_ops cfs_backend_ops = {
	.name = "cephfs",
	.session = cfs_session,
	.sync = cfs_backend_sync,
	.statfs = cfs_backend_statfs,
	.close = cfs_backend_close,
};

static uint64_t cs_fnv(const void *p, size_t len, uint64_t h)
{
	const uint8_t *b = p;

	while (len--) {
		h ^= *b++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * The fid tag: the cluster (fsid), the file system (its id) and the
 * directory mounted, so a fid of another store, or of another directory
 * of the same CephFS, is ESTALE here.
 */
static void cs_tag(struct ceph_backend *cb, const char *path)
{
	char fsid[64] = "";
	int64_t fscid = ceph_get_fs_cid(cb->cm);
	uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
	unsigned int i;

	ceph_conf_get(cb->cm, "fsid", fsid, sizeof(fsid));
	h1 = cs_fnv(fsid, strlen(fsid), h1);
	h1 = cs_fnv(&fscid, sizeof(fscid), h1);
	h1 = cs_fnv(path, strlen(path), h1);
	h2 = cs_fnv(path, strlen(path), h2);
	h2 = cs_fnv(&fscid, sizeof(fscid), h2);
	h2 = cs_fnv(fsid, strlen(fsid), h2);
	for (i = 0; i < 8; i++) {
		cb->tag[i] = (uint8_t)(h1 >> (8 * i));
		cb->tag[8 + i] = (uint8_t)(h2 >> (8 * i));
	}
	/* notify's objects: a dev no local filesystem has */
	cb->dev = 0xcef5000000000000ull | ((uint64_t)fscid & 0xffffffffull);
}

/* Set a Ceph option; a failure is logged by the caller. */
static int cs_conf_set(struct ceph_mount_info *cm, const char *opt,
		       const char *val)
{
	int ret = ceph_conf_set(cm, opt, val);

	if (ret < 0)
		agent_err("store cephfs: option %s=%s: %s", opt, val,
			  strerror(-ret));
	return ret;
}

/*
 * Ceph formats every message of a subsystem up to its second debug level
 * ("0/5": nothing to the log file, levels up to 5 kept in memory for a
 * crash report) on the calling thread, and its log thread files them: a
 * quarter of the agent's CPU on a stream of creates (doc/performance.md).
 * The subsystems a client runs are quiet (0/0) unless $CEPH_ARGS names
 * them or the configuration file sets them to something else than Ceph's
 * default.
 */
static const char *const cs_quiet_opts[] = {
	"debug_client", "debug_objectcacher", "debug_objecter",
	"debug_filer", "debug_striper", "debug_journaler", "debug_monc",
	"debug_mgrc", "debug_ms", "debug_auth", "debug_crypto",
	"debug_finisher", "debug_context", "debug_timer", "debug_throttle",
	"debug_buffer", "debug_refs", "debug_lockdep", "debug_heartbeatmap",
	"debug_perfcounter", "debug_asok", "debug_optracker", "debug_none",
};
#define CS_QUIET_N	(sizeof(cs_quiet_opts) / sizeof(cs_quiet_opts[0]))
#define CS_QUIET_LEN	32

/* Before the configuration is read: Ceph's defaults (v[i], "" if none). */
static void cs_quiet_defaults(struct ceph_mount_info *cm,
			      char v[CS_QUIET_N][CS_QUIET_LEN])
{
	size_t i;

	for (i = 0; i < CS_QUIET_N; i++)
		if (ceph_conf_get(cm, cs_quiet_opts[i], v[i], CS_QUIET_LEN) < 0)
			v[i][0] = '\0';
}

/*
 * Whether $CEPH_ARGS names opt (as --debug_client or --debug-client, with
 * = or a space after it): ceph_create() applied it already, so that it is
 * in what cs_quiet_defaults() read.
 */
static int cs_quiet_in_args(const char *args, const char *opt)
{
	size_t n = strlen(opt), i;
	const char *p;

	for (p = args; *p; p++) {
		for (i = 0; i < n; i++) {
			char c = p[i] == '-' ? '_' : p[i];

			if (c != opt[i])
				break;
		}
		if (i == n && (p[n] == '=' || p[n] == ' ' || p[n] == '\0'))
			return 1;
	}
	return 0;
}

/* After it: what still has Ceph's default is set to 0/0. */
static void cs_quiet(struct ceph_mount_info *cm,
		     char v[CS_QUIET_N][CS_QUIET_LEN])
{
	const char *args = getenv("CEPH_ARGS");
	char now[CS_QUIET_LEN];
	unsigned int n = 0;
	size_t i;

	for (i = 0; i < CS_QUIET_N; i++) {
		if (!v[i][0] || strcmp(v[i], "0/0") == 0 ||
		    (args && cs_quiet_in_args(args, cs_quiet_opts[i])) ||
		    ceph_conf_get(cm, cs_quiet_opts[i], now, sizeof(now)) < 0 ||
		    strcmp(now, v[i]) != 0)
			continue;
		if (ceph_conf_set(cm, cs_quiet_opts[i], "0/0") == 0)
			n++;
	}
	agent_dbg("store cephfs: %u of Ceph's debug levels set to 0/0", n);
}

/* ceph_start_reclaim() on a thread of its own (cs_reclaim()). */
struct cs_reclaim_run {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* done was set */
	struct ceph_mount_info *cm;
	char *uuid;
	int ret;
	int done;			/* the call returned ret */
	int refs;			/* the thread's, the waiter's */
};

static void cs_reclaim_unref(struct cs_reclaim_run *r)
{
	int last;

	pthread_mutex_lock(&r->lock);
	last = --r->refs == 0;
	pthread_mutex_unlock(&r->lock);
	if (!last)
		return;
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r->uuid);
	free(r);
}

static void *cs_reclaim_main(void *arg)
{
	struct cs_reclaim_run *r = arg;
	int ret = ceph_start_reclaim(r->cm, r->uuid, CEPH_RECLAIM_RESET);

	pthread_mutex_lock(&r->lock);
	r->ret = ret;
	r->done = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	cs_reclaim_unref(r);
	return NULL;
}

/*
 * ceph_start_reclaim(), waited for at most timeout_ms: it has no timeout
 * of its own, and waits for ever for an MDS that does not answer (one
 * stopped, or one that cannot write its journal to a full cluster).
 * -ETIMEDOUT: the call is still running on its thread, inside cm, which
 * must then never be released (the process is failing its start).
 */
static int cs_reclaim_call(struct ceph_mount_info *cm, const char *uuid,
			   unsigned int timeout_ms, int *res)
{
	struct cs_reclaim_run *r = calloc(1, sizeof(*r));
	struct timespec until;
	pthread_t t;
	int ret = 0;

	/* no thread for it: not reset, as the reset is best effort */
	*res = -ENOMEM;
	if (r)
		r->uuid = strdup(uuid);
	if (!r || !r->uuid) {
		free(r);
		return 0;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->cm = cm;
	r->refs = 2;
	if (pthread_create(&t, NULL, cs_reclaim_main, r) != 0) {
		r->refs = 1;
		cs_reclaim_unref(r);
		*res = -EAGAIN;
		return 0;
	}
	pthread_detach(t);
	bcp_deadline_ms(&until, timeout_ms);
	pthread_mutex_lock(&r->lock);
	while (!r->done && ret != ETIMEDOUT)
		ret = pthread_cond_clockwait(&r->cond, &r->lock,
					     CLOCK_MONOTONIC, &until);
	ret = r->done ? 0 : -ETIMEDOUT;
	*res = r->ret;
	pthread_mutex_unlock(&r->lock);
	cs_reclaim_unref(r);
	return ret;
}

/*
 * A killed run of this agent left its Ceph session behind, holding the
 * capabilities of the files it had open: until the MDS gives up on it
 * (session_timeout, 60 s by default) every other client, this run
 * included, waits for them.  The session is known by its uuid, the same
 * for every run of this agent (uuid: main.c), and is reset here before
 * mounting, as NFS-Ganesha does with its own.  Best effort: without it
 * the MDS still ends the old session in time.  But an MDS that does not
 * answer within timeout_ms fails the start (-ETIMEDOUT, cm left in use),
 * as a monitor that does not answer does.
 */
static int cs_reclaim(struct ceph_backend *cb, const char *uuid,
		      unsigned int timeout_ms)
{
	int ret, res = 0;

	ret = cs_reclaim_call(cb->cm, uuid, timeout_ms, &res);
	if (ret < 0) {
		agent_err("store cephfs: no MDS answered within %u ms "
			  "(resetting the Ceph session a previous run left; "
			  "an MDS stopped, or the cluster full?)",
			  timeout_ms);
		return ret;
	}
	if (res == 0)
		agent_info("store cephfs: reset the Ceph session a previous "
			   "run left (%s)", uuid);
	else if (res != -ENOENT)
		agent_warn("store cephfs: cannot reset the Ceph session of a "
			   "previous run (%s): %s", uuid, strerror(-res));
	ceph_finish_reclaim(cb->cm);
	ceph_set_uuid(cb->cm, uuid);
	return 0;
}

int agent_ceph_open(const struct agent_store_spec *sp,
		    unsigned int timeout_ms, struct agent_backend **out)
{
	const char *path = sp->path ? sp->path : "/";
	struct ceph_backend *cb;
	char secs[32], mon[256] = "?";
	char quiet[CS_QUIET_N][CS_QUIET_LEN];
	int ret;

	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	cb->base.ops = &cfs_backend_ops;
	cb->base.root_fd = -1;
	cb->base.flags = AGENT_STORE_BLOCKING | AGENT_STORE_FENCEABLE;
	if (asprintf((char **)&cb->base.desc, "cephfs:%s", path) < 0) {
		free(cb);
		return -ENOMEM;
	}
	ret = ceph_create(&cb->cm, sp->id);
	if (ret < 0) {
		agent_err("store cephfs: client %s: %s",
			  sp->id ? sp->id : "admin", strerror(-ret));
		goto out_free;
	}
	cs_quiet_defaults(cb->cm, quiet);
	ret = ceph_conf_read_file(cb->cm, sp->conf);
	if (ret < 0) {
		agent_err("store cephfs: conf file %s: %s",
			  sp->conf ? sp->conf : "(default search)",
			  strerror(-ret));
		goto out_release;
	}
	/* $CEPH_ARGS and the like, as every Ceph tool takes them */
	ceph_conf_parse_env(cb->cm, NULL);
	cs_quiet(cb->cm, quiet);
	ceph_conf_get(cb->cm, "mon_host", mon, sizeof(mon));
	if (!mon[0])
		snprintf(mon, sizeof(mon), "?");
	/*
	 * An unreachable cluster fails within timeout_ms rather than
	 * hang: the monitor session (client_mount_timeout bounds
	 * authenticating to a monitor and the MDS map wait) and the
	 * monitor commands.
	 */
	if (!timeout_ms)
		timeout_ms = 1;
	/* Ceph takes whole seconds here */
	snprintf(secs, sizeof(secs), "%u", (timeout_ms + 999) / 1000);
	ret = cs_conf_set(cb->cm, "client_mount_timeout", secs);
	if (ret == 0)
		ret = cs_conf_set(cb->cm, "rados_mon_op_timeout", secs);
	/*
	 * The hosts' kernels check POSIX ACLs: the client must keep the
	 * mode in step with them and apply default ACLs, as a local file
	 * system does (without it, setting one fails with EOPNOTSUPP).
	 */
	if (ret == 0)
		ret = cs_conf_set(cb->cm, "client_acl_type", "posix_acl");
	if (ret < 0)
		goto out_release;
	ret = ceph_init(cb->cm);
	if (ret < 0) {
		if (ret == -ETIMEDOUT || ret == -ENOTCONN)
			agent_err("store cephfs: cluster unreachable at %s "
				  "(no answer within %u ms)", mon, timeout_ms);
		else if (ret == -ENOENT || ret == -EACCES || ret == -EPERM ||
			 ret == -EINVAL)
			agent_err("store cephfs: client.%s refused by the "
				  "monitors at %s (keyring missing or "
				  "wrong?): %s", sp->id ? sp->id : "admin",
				  mon, strerror(-ret));
		else
			agent_err("store cephfs: connecting to %s: %s", mon,
				  strerror(-ret));
		goto out_release;
	}
	if (sp->fs) {
		ret = ceph_select_filesystem(cb->cm, sp->fs);
		if (ret < 0) {
			agent_err("store cephfs: file system %s: %s", sp->fs,
				  strerror(-ret));
			goto out_release;
		}
	}
	if (sp->uuid) {
		ret = cs_reclaim(cb, sp->uuid, timeout_ms);
		if (ret < 0)	/* cb->cm is not released: a call is in it */
			goto out_free;
	}
	ret = ceph_mount(cb->cm, path);
	if (ret < 0) {
		if (ret == -ENOENT && sp->fs)
			agent_err("store cephfs: file system %s or path %s "
				  "not found", sp->fs, path);
		else if (ret == -ENOENT)
			agent_err("store cephfs: path %s not found", path);
		else if (ret == -ETIMEDOUT)
			agent_err("store cephfs: mounting %s: no MDS answered "
				  "within %u ms", path, timeout_ms);
		else
			agent_err("store cephfs: mounting %s%s%s: %s", path,
				  sp->fs ? " of " : "", sp->fs ? sp->fs : "",
				  strerror(-ret));
		goto out_release;
	}
	cb->perms = ceph_userperm_new(0, 0, 0, NULL);
	if (!cb->perms) {
		ret = -ENOMEM;
		goto out_unmount;
	}
	cs_tag(cb, path);
	pthread_mutex_init(&cb->dio_lock, NULL);
	pthread_mutex_init(&cb->close_lock, NULL);
	pthread_cond_init(&cb->close_cond, NULL);
	ret = -pthread_create(&cb->closer, NULL, cs_closer_main, cb);
	if (ret < 0) {
		agent_err("store cephfs: closer thread: %s", strerror(-ret));
		goto out_perms;
	}
	cb->wlog = cs_wlog_open(sp->run_dir, cb->tag, cb->cm, cb->perms, &ret);
	if (ret < 0)
		goto out_closer;
	ret = cs_watch_start(cb);
	if (ret < 0)
		goto out_wlog;
	*out = &cb->base;
	return 0;

out_wlog:
	cs_wlog_close(cb->wlog);
out_closer:
	cs_closer_join(cb);
out_perms:
	pthread_cond_destroy(&cb->close_cond);
	pthread_mutex_destroy(&cb->close_lock);
	cs_dio_free(cb);
	ceph_userperm_destroy(cb->perms);
out_unmount:
	ceph_unmount(cb->cm);
out_release:
	ceph_release(cb->cm);
out_free:
	free((char *)cb->base.desc);
	free(cb);
	return ret;
}
