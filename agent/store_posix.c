/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store_posix.c - the posix store of bluecache-agent (see store.h): the
 * objects are the files of a directory of the agent's own filesystem.
 *
 * Nodes are kept like libfuse's passthrough_hp keeps inodes: an O_PATH fd
 * opened with O_NOFOLLOW and a lookup count mirroring the host kernel's.
 * Operations that need a real file descriptor or a path go through
 * /proc/self/fd/N of that O_PATH fd (after checking the node's type, which
 * never changes for an inode) or use *at(fd, "", AT_EMPTY_PATH).
 *
 * Lifetimes: a node lives while its lookup count is above zero (the root
 * forever); an open file lives until RELEASE and until the last in-flight
 * transfer drops its reference.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "notify.h"
#include "resume.h"
#include "store.h"

#define STORE_BUCKETS_MIN	4096	/* doubled as nodes outnumber them */
#define STORE_COPY_MAX		(64ull << 20)	/* per COPY_FILE_RANGE */
#define STORE_LRU_MIN		8	/* node descriptors a session caches */

/*
 * A node names its object by fid and holds a descriptor only while it is
 * in the session's LRU (store_node_fd()); a node without a fid (handles
 * off, another mount) is pinned: its descriptor is its only name.
 */
struct store_node {
	uint64_t handle;
	uint64_t dev, ino;
	uint64_t nlookup;
	uint32_t mode;			/* S_IFMT bits */
	int fd;				/* O_PATH, or -1 when not cached */
	int pinned;			/* fd is kept for the node's life */
	/*
	 * A handle a host still holds for an object that is gone (its
	 * REBIND found nothing): it names nothing, so every request on it
	 * is ESTALE, but it keeps its value from being handed out again
	 * until the host forgets it.  Only in the by-handle table.
	 */
	int dead;
	struct store_node *hnext;	/* by handle */
	struct store_node *inext;	/* by (dev, ino) */
	struct store_node *lru_prev;	/* cached descriptors, newest first */
	struct store_node *lru_next;
	/* registered while the session takes notifications (notify.h) */
	struct agent_notify_hold hold;
	uint8_t fid[BCP_FID_LEN];	/* sealed once, at creation */
};

/*
 * An open file.  Batches and blocking-pool calls hold pointers to it while
 * they run, so it never moves: the table is an array of fixed chunks that
 * only grows (the chunk pointers may move, the chunks never do).
 */
struct agent_file {
	int fd;
	int dir;
	int closing;			/* RELEASE seen */
	unsigned int refs;		/* 1 for the fh + in-flight users */
	int io_inline;			/* enum agent_io_inline */
	struct agent_obj obj;		/* what it is open on (notify.h) */
	uint32_t gen;
	uint32_t idx;			/* its place in the table */
	uint32_t next_free;
};

#define FILE_CHUNK	64		/* files per chunk */

struct posix_store {
	struct agent_store base;	/* first */
	struct agent_ring *ring;
	int root_fd;
	uid_t euid;
	struct store_node *root;
	uint64_t next_handle;
	uint64_t nnodes;
	struct store_node **by_handle;	/* nbuckets each */
	struct store_node **by_ino;
	size_t nbuckets;		/* a power of two */
	struct store_node lru;		/* list head: lru_next is the newest */
	unsigned int lru_len, lru_max;
	struct agent_file **chunks;	/* FILE_CHUNK files each */
	uint32_t nfiles, nchunks, free_head, live_files;
	const struct agent_ident *ident;
	/*
	 * The session's notification queue, once it negotiated
	 * BCP_FEAT_NOTIFY and authenticated: its nodes are registered
	 * (notify.h) and the changes it makes skip it.  NULL otherwise: its
	 * changes are still published to everyone else.
	 */
	struct agent_notify_sess *ns;
};

#define FILE_NONE	UINT32_MAX

static struct agent_file *store_file_at(const struct posix_store *s,
					uint32_t idx)
{
	return &s->chunks[idx / FILE_CHUNK][idx % FILE_CHUNK];
}

static unsigned int store_max_handles(void)
{
	return agent_cfg.max_handles ? agent_cfg.max_handles :
				       AGENT_HANDLES_MAX;
}

static unsigned int store_max_files(void)
{
	return agent_cfg.max_files ? agent_cfg.max_files : AGENT_FILES_MAX;
}

static size_t store_hash(const struct posix_store *s, uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	return (size_t)(v & (s->nbuckets - 1));
}

static size_t store_ino_hash(const struct posix_store *s,
			     const struct store_node *n)
{
	return store_hash(s, (n->dev << 32) ^ n->ino);
}

/*
 * Double both tables when the nodes outnumber the buckets twice, so a
 * million handles still cost a short chain.  Failing to grow only costs
 * speed.
 */
static void store_hash_grow(struct posix_store *s)
{
	struct store_node **bh, **bi, *n, *next;
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
			b = store_hash(s, n->handle);
			n->hnext = bh[b];
			bh[b] = n;
		}
		for (n = s->by_ino[i]; n; n = next) {
			next = n->inext;
			b = store_ino_hash(s, n);
			n->inext = bi[b];
			bi[b] = n;
		}
	}
	free(s->by_handle);
	free(s->by_ino);
	s->by_handle = bh;
	s->by_ino = bi;
}

static void store_procpath(char *buf, size_t cap, int fd)
{
	snprintf(buf, cap, "/proc/self/fd/%d", fd);
}

/* Copy a name into a C string after checking it again at this boundary. */
static int store_name(const char *name, size_t len, char out[256])
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

/* The node under handle, a dead one included. */
static struct store_node *store_node_any(struct posix_store *s,
					 uint64_t handle)
{
	struct store_node *n;

	for (n = s->by_handle[store_hash(s, handle)]; n; n = n->hnext)
		if (n->handle == handle)
			return n;
	return NULL;
}

/* The live node under handle, or NULL (ESTALE to the host). */
static struct store_node *store_node_find(struct posix_store *s,
					  uint64_t handle)
{
	struct store_node *n = store_node_any(s, handle);

	return n && !n->dead ? n : NULL;
}

static struct agent_obj store_obj(const struct store_node *n)
{
	struct agent_obj o = { n->dev, n->ino };

	return o;
}

static struct agent_obj store_obj_x(const struct statx *x)
{
	struct agent_obj o = {
		makedev(x->stx_dev_major, x->stx_dev_minor), x->stx_ino
	};

	return o;
}

/* Tell the other sessions holding obj: its data [off, off + len) and
 * attributes changed (off -1: the attributes only). */
static void store_pub_inode(struct posix_store *s, struct agent_obj obj,
			    int64_t off, int64_t len)
{
	struct agent_change c = {
		.kind = BCP_NOTIFY_INODE, .obj = obj,
		.offset = off, .length = len,
	};

	agent_notify_publish(s->ns, &c);
}

/*
 * name in parent changed: kind ENTRY (obj, when known, changed too) or
 * DELETE (the name that named obj is gone).
 */
static void store_pub_name(struct posix_store *s, uint32_t kind,
			   const struct store_node *parent, const char *name,
			   struct agent_obj obj)
{
	struct agent_change c = {
		.kind = kind, .obj = obj, .parent = store_obj(parent),
		.name = name, .len = strlen(name),
	};

	agent_notify_publish(s->ns, &c);
}

/*
 * What name in dirfd is before it is removed or replaced, for the
 * notifications (store_pub_gone()) and, always, for store_node_gone();
 * *obj {0, 0} when nobody may care (and not always) or it is not there.
 */
static void store_pub_peek(struct posix_store *s, int dirfd, const char *name,
			   int always, struct agent_obj *obj, uint32_t *nlink)
{
	struct statx x;

	obj->dev = obj->ino = 0;
	*nlink = 0;
	if ((!always && !agent_notify_wanted(s->ns)) ||
	    statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS,
		  &x) < 0)
		return;
	*obj = store_obj_x(&x);
	*nlink = S_ISDIR(x.stx_mode) ? 1 : x.stx_nlink;
}

/*
 * name in parent, which named obj (nlink links before), is gone.  A
 * holder's kernel takes DELETE as the end of the object (it clears its
 * link count), so an object that keeps other links gets ENTRY instead;
 * its holders get INODE either way.
 */
static void store_pub_gone(struct posix_store *s,
			   const struct store_node *parent, const char *name,
			   struct agent_obj obj, uint32_t nlink)
{
	store_pub_name(s, nlink == 1 ? BCP_NOTIFY_DELETE : BCP_NOTIFY_ENTRY,
		       parent, name, obj);
}

static void store_attr_fill(const struct statx *x, struct bcp_attr *a)
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
	a->rdev = makedev(x->stx_rdev_major, x->stx_rdev_minor);
}

/*
 * Metadata operations are described once, as io_uring SQEs, and run as
 * --meta-io says.  "sync" (the default) carries out the SQE's system call
 * on the worker thread; "uring" submits it and waits for its completion.
 * The worker waits either way, and io_uring hands statx and every
 * creating or removing operation to an io-wq thread: two context switches
 * and an eventfd wake-up per operation more than the call itself
 * (doc/design.md has the measurement).
 */
static struct io_uring_sqe *store_meta_sqe(struct posix_store *s,
					   struct io_uring_sqe *own)
{
	if (agent_cfg.meta_io == AGENT_META_URING)
		return agent_ring_sqe(s->ring);
	memset(own, 0, sizeof(*own));
	return own;
}

#define U2P(v)	((void *)(uintptr_t)(v))

/* The system call a metadata SQE stands for; returns its result or -errno. */
static long store_meta_call(const struct io_uring_sqe *q)
{
	switch (q->opcode) {
	case IORING_OP_STATX:
		return statx(q->fd, U2P(q->addr), (int)q->statx_flags, q->len,
			     U2P(q->off));
	case IORING_OP_OPENAT2:
		return syscall(SYS_openat2, q->fd, U2P(q->addr), U2P(q->off),
			       (size_t)q->len);
	case IORING_OP_MKDIRAT:
		return mkdirat(q->fd, U2P(q->addr), (mode_t)q->len);
	case IORING_OP_SYMLINKAT:
		return symlinkat(U2P(q->addr), q->fd, U2P(q->off));
	case IORING_OP_LINKAT:
		return linkat(q->fd, U2P(q->addr), (int)q->len, U2P(q->off),
			      (int)q->hardlink_flags);
	case IORING_OP_UNLINKAT:
		return unlinkat(q->fd, U2P(q->addr), (int)q->unlink_flags);
	case IORING_OP_RENAMEAT:
		return syscall(SYS_renameat2, q->fd, U2P(q->addr), (int)q->len,
			       U2P(q->off), q->rename_flags);
	case IORING_OP_FSYNC:
		return q->fsync_flags & IORING_FSYNC_DATASYNC ?
			fdatasync(q->fd) : fsync(q->fd);
	case IORING_OP_FALLOCATE:
		return fallocate(q->fd, (int)q->len, (off_t)q->off,
				 (off_t)q->addr);
	case IORING_OP_SETXATTR:
		return setxattr(U2P(q->addr3), U2P(q->addr), U2P(q->off),
				q->len, (int)q->xattr_flags);
	case IORING_OP_GETXATTR:
		return getxattr(U2P(q->addr3), U2P(q->addr), U2P(q->off),
				q->len);
	}
	errno = EOPNOTSUPP;
	return -1;
}

static int store_meta_run(struct posix_store *s, struct io_uring_sqe *sqe)
{
	long ret;

	if (agent_cfg.meta_io == AGENT_META_URING)
		return agent_ring_wait(s->ring, sqe);
	ret = store_meta_call(sqe);
	return ret < 0 ? -errno : (int)ret;
}

static int store_statx(struct posix_store *s, int fd, struct statx *x)
{
	struct io_uring_sqe own, *sqe = store_meta_sqe(s, &own);

	io_uring_prep_statx(sqe, fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
			    STATX_BASIC_STATS, x);
	return store_meta_run(s, sqe);
}

/* openat2 beneath dirfd through the ring; returns an fd or -errno. */
static int store_openat2(struct posix_store *s, int dirfd, const char *name,
			 uint64_t flags, uint64_t mode, uint64_t resolve)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC,
		.mode = mode,
		.resolve = resolve | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	struct io_uring_sqe own, *sqe = store_meta_sqe(s, &own);

	io_uring_prep_openat2(sqe, dirfd, name, &how);
	return store_meta_run(s, sqe);
}

/*
 * The LRU of node descriptors.  A descriptor is taken from the agent's
 * budget when it enters and given back when it leaves; at --fd-cache
 * entries the oldest leaves first.
 */
static void store_lru_unlink(struct posix_store *s, struct store_node *n)
{
	n->lru_prev->lru_next = n->lru_next;
	n->lru_next->lru_prev = n->lru_prev;
	n->lru_prev = n->lru_next = NULL;
	s->lru_len--;
}

static void store_lru_front(struct posix_store *s, struct store_node *n)
{
	n->lru_next = s->lru.lru_next;
	n->lru_prev = &s->lru;
	s->lru.lru_next->lru_prev = n;
	s->lru.lru_next = n;
}

static int store_lru_evict(struct posix_store *s)
{
	struct store_node *n = s->lru.lru_prev;

	if (n == &s->lru)
		return -ENFILE;
	store_lru_unlink(s, n);
	close(n->fd);
	n->fd = -1;
	agent_fd_give();
	return 0;
}

/* Charge fd (ownership moves here) to the budget: pinned or cached. */
static int store_node_hold(struct posix_store *s, struct store_node *n,
			   int fd, int pinned)
{
	int ret;

	if (!pinned && s->lru_len >= s->lru_max)
		store_lru_evict(s);
	while ((ret = agent_fd_take()) < 0) {
		if (store_lru_evict(s) < 0) {
			agent_warn_rl("the agent's descriptor budget (%ld) is "
				      "spent", agent_fds_budget);
			close(fd);
			return ret;
		}
	}
	n->fd = fd;
	n->pinned = pinned;
	if (!pinned) {
		store_lru_front(s, n);
		s->lru_len++;
	}
	return 0;
}

/*
 * The node's O_PATH descriptor: the cached one (now the newest), or the
 * object opened again by its fid.  It stays valid until the LRU has taken
 * lru_max other descriptors (at least STORE_LRU_MIN), so one operation may
 * use the descriptors of the two or three nodes it names; nothing keeps
 * one beyond the operation (a pool call opens its own, store_reopen()).
 * -ESTALE: the object is gone.
 */
static int store_node_fd(struct posix_store *s, struct store_node *n)
{
	int fd, ret;

	if (n->fd >= 0) {
		if (!n->pinned && s->lru.lru_next != n) {
			n->lru_prev->lru_next = n->lru_next;
			n->lru_next->lru_prev = n->lru_prev;
			store_lru_front(s, n);
		}
		return n->fd;
	}
	fd = agent_fid_open(n->fid, O_PATH);
	if (fd < 0)
		return fd == -EMFILE || fd == -ENFILE ? -ENFILE : -ESTALE;
	ret = store_node_hold(s, n, fd, 0);
	return ret < 0 ? ret : fd;
}

/* The next handle value no node holds (REBIND installs any value). */
static uint64_t store_handle_next(struct posix_store *s)
{
	while (s->next_handle < 2 || store_node_any(s, s->next_handle))
		s->next_handle++;
	return s->next_handle++;
}

/* A new node for the object x describes, under handle, holding fd. */
static int store_node_new(struct posix_store *s, uint64_t handle,
			  const struct statx *x, int fd,
			  const uint8_t *fid, struct store_node **out)
{
	struct store_node *n;
	unsigned int b;
	int ret;

	if (s->nnodes >= store_max_handles()) {
		agent_warn_rl("handle limit (%u per session) reached",
			      store_max_handles());
		close(fd);
		return -ENFILE;
	}
	n = calloc(1, sizeof(*n));
	if (!n) {
		close(fd);
		return -ENOMEM;
	}
	if (fid)
		memcpy(n->fid, fid, BCP_FID_LEN);
	else
		agent_fid_seal(fd, n->fid);
	n->fd = -1;
	ret = store_node_hold(s, n, fd, agent_fid_zero(n->fid));
	if (ret < 0) {
		free(n);
		return ret;
	}
	n->handle = handle ? handle : store_handle_next(s);
	n->dev = makedev(x->stx_dev_major, x->stx_dev_minor);
	n->ino = x->stx_ino;
	n->mode = x->stx_mode & S_IFMT;
	b = store_ino_hash(s, n);
	n->inext = s->by_ino[b];
	s->by_ino[b] = n;
	b = store_hash(s, n->handle);
	n->hnext = s->by_handle[b];
	s->by_handle[b] = n;
	s->nnodes++;
	store_hash_grow(s);
	if (s->ns)
		agent_notify_hold(&n->hold, s->ns, store_obj(n), n->handle);
	*out = n;
	return 0;
}

/* Keep handle (held nlookup times) from naming anything again. */
static void store_node_bury(struct posix_store *s, uint64_t handle,
			    uint64_t nlookup)
{
	struct store_node *n;
	size_t b;

	if (s->nnodes >= store_max_handles())
		return;
	n = calloc(1, sizeof(*n));
	if (!n)
		return;
	n->handle = handle;
	n->nlookup = nlookup;
	n->fd = -1;
	n->dead = 1;
	b = store_hash(s, handle);
	n->hnext = s->by_handle[b];
	s->by_handle[b] = n;
	s->nnodes++;
	store_hash_grow(s);
}

static void store_entry_fill(const struct store_node *n,
			     const struct statx *x, struct bcp_entry *out)
{
	memset(out, 0, sizeof(*out));
	out->handle = n->handle;
	store_attr_fill(x, &out->attr);
	memcpy(out->fid, n->fid, BCP_FID_LEN);
}

/*
 * 1 when node n, found under the inode number of x (the object behind
 * fd), names another object: n's was removed, and with no descriptor
 * holding it the file system gave its number to x's.  A node with a
 * descriptor keeps its inode, and so its number; one without has a fid
 * whose file handle carries the inode's generation.
 */
static int store_node_stale(const struct store_node *n,
			    const struct statx *x, int fd)
{
	if (n->fd >= 0)
		return 0;
	if (n->mode != (x->stx_mode & S_IFMT))
		return 1;
	return agent_fid_names(n->fid, fd) == 0;
}

/*
 * A stale node leaves the by-(dev, ino) table: its handle still counts the
 * host's lookups until it forgets them, and every request on it is ESTALE.
 */
static void store_node_retire(struct store_node *n)
{
	agent_notify_unhold(&n->hold);
	n->dead = 1;
	n->inext = NULL;
}

/*
 * BCP_MODE_NO_XATTRS for the object behind fd when the host takes it
 * (AGENT_STORE_XATTR_HINT): a listxattr of size 0, one system call; a
 * symlink's extended attributes are never served (posix_getxattr()).
 */
static uint32_t store_xattr_hint(const struct posix_store *s, int fd,
				 const struct statx *x)
{
	char proc[64];

	if (!(s->base.flags & AGENT_STORE_XATTR_HINT))
		return 0;
	if (S_ISLNK(x->stx_mode))
		return BCP_MODE_NO_XATTRS;
	store_procpath(proc, sizeof(proc), fd);
	return listxattr(proc, NULL, 0) == 0 ? BCP_MODE_NO_XATTRS : 0;
}

/*
 * Take a lookup reference on the inode behind fd (an O_PATH fd whose
 * ownership moves here): the existing node, or a new one.
 */
static int store_node_get(struct posix_store *s, int fd,
			  struct bcp_entry *out)
{
	struct store_node *n, **pp;
	uint32_t hint = 0;
	struct statx x;
	uint64_t dev;
	int ret;

	ret = store_statx(s, fd, &x);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	if (out)
		hint = store_xattr_hint(s, fd, &x);
	dev = makedev(x.stx_dev_major, x.stx_dev_minor);
	pp = &s->by_ino[store_hash(s, (dev << 32) ^ x.stx_ino)];
	while ((n = *pp)) {
		if (n->ino != x.stx_ino || n->dev != dev) {
			pp = &n->inext;
			continue;
		}
		if (!store_node_stale(n, &x, fd))
			break;
		/* a removed object's number, given out again */
		*pp = n->inext;
		store_node_retire(n);
	}
	if (n) {
		/* a fresh descriptor is as good as a reopened one */
		if (n->fd < 0)
			store_node_hold(s, n, fd, 0);
		else
			close(fd);
		n->nlookup++;
	} else {
		ret = store_node_new(s, 0, &x, fd, NULL, &n);
		if (ret < 0)
			return ret;
		n->nlookup = 1;
	}
	if (out) {
		store_entry_fill(n, &x, out);
		out->attr.mode |= hint;
	}
	return 0;
}

static void store_node_drop(struct posix_store *s, struct store_node *n)
{
	struct store_node **pp;

	for (pp = &s->by_handle[store_hash(s, n->handle)]; *pp;
	     pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	}
	for (pp = n->dead ? NULL : &s->by_ino[store_ino_hash(s, n)];
	     pp && *pp; pp = &(*pp)->inext) {
		if (*pp == n) {
			*pp = n->inext;
			break;
		}
	}
	agent_notify_unhold(&n->hold);
	if (n->fd >= 0) {
		if (!n->pinned)
			store_lru_unlink(s, n);
		close(n->fd);
		agent_fd_give();
	}
	free(n);
	s->nnodes--;
}

/*
 * obj, a file that had nlink links, lost one.  Its last: the descriptor
 * this session caches for it would keep its blocks allocated until the
 * host forgets it, some time after the unlink, where a local file system
 * frees them as soon as nothing holds the file open (a write right after
 * the rm of a big file found the store full).  Closed: while an open
 * file keeps the object, the node opens it again by its fid.
 */
static void store_node_gone(struct posix_store *s, struct agent_obj obj,
			    uint32_t nlink)
{
	struct store_node *n;

	if (nlink != 1 || !(obj.dev || obj.ino))
		return;
	for (n = s->by_ino[store_hash(s, (obj.dev << 32) ^ obj.ino)]; n;
	     n = n->inext) {
		if (n->ino != obj.ino || n->dev != obj.dev || n->fd < 0 ||
		    n->pinned || n->mode == S_IFDIR)
			continue;
		store_lru_unlink(s, n);
		close(n->fd);
		n->fd = -1;
		agent_fd_give();
	}
}

static const struct agent_store_ops posix_ops;

static struct agent_store *posix_session(struct agent_backend *b,
					 struct agent_ring *r,
					 const struct agent_ident *id)
{
	int root_fd = b->root_fd;
	struct posix_store *s;
	int fd;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->base.ops = &posix_ops;
	s->ident = id;
	s->ring = r;
	s->root_fd = root_fd;
	s->euid = geteuid();
	s->next_handle = 2;	/* 0 = none, 1 = the FUSE root nodeid */
	s->free_head = FILE_NONE;
	s->lru.lru_next = s->lru.lru_prev = &s->lru;
	s->lru_max = agent_cfg.fd_cache ? agent_cfg.fd_cache :
					  AGENT_FD_CACHE_DEFAULT;
	if (s->lru_max < STORE_LRU_MIN)
		s->lru_max = STORE_LRU_MIN;
	s->nbuckets = STORE_BUCKETS_MIN;
	s->by_handle = calloc(s->nbuckets, sizeof(*s->by_handle));
	s->by_ino = calloc(s->nbuckets, sizeof(*s->by_ino));
	if (!s->by_handle || !s->by_ino)
		goto out_free;
	fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		goto out_free;
	if (store_node_get(s, fd, NULL) < 0)
		goto out_free;
	s->root = store_node_find(s, 2);
	/* the root is always at hand: every name starts there */
	if (!s->root->pinned) {
		store_lru_unlink(s, s->root);
		s->root->pinned = 1;
	}
	return &s->base;

out_free:
	free(s->by_handle);
	free(s->by_ino);
	free(s);
	return NULL;
}

static void posix_destroy(struct agent_store *bs)
{
	struct posix_store *s = (struct posix_store *)bs;
	unsigned int i;

	if (!s)
		return;
	for (i = 0; i < s->nfiles; i++) {
		struct agent_file *f = store_file_at(s, i);

		if (f->fd < 0)
			continue;
		/* a removed file its host may open again: linger.c */
		if (f->dir || f->closing || !agent_linger_keep(f->fd, s)) {
			close(f->fd);
			agent_fd_give();
		}
	}
	agent_linger_forget(s);		/* its claims end with it */
	for (i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	free(s->chunks);
	for (i = 0; i < s->nbuckets; i++) {
		while (s->by_handle[i])
			store_node_drop(s, s->by_handle[i]);
	}
	free(s->by_handle);
	free(s->by_ino);
	free(s);
}

static void posix_notify_start(struct agent_store *bs,
			       struct agent_notify_sess *ns)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n;
	size_t i;

	if (s->ns || !ns)
		return;
	s->ns = ns;
	for (i = 0; i < s->nbuckets; i++)
		for (n = s->by_ino[i]; n; n = n->inext)
			agent_notify_hold(&n->hold, ns, store_obj(n),
					  n->handle);
}

static uint64_t posix_root(const struct agent_store *bs)
{
	const struct posix_store *s = (const struct posix_store *)bs;

	return s->root->handle;
}

static void posix_counts(const struct agent_store *bs, uint64_t *handles,
			 uint64_t *files)
{
	const struct posix_store *s = (const struct posix_store *)bs;

	*handles = s->nnodes;
	*files = s->live_files;
}

/* The directory node and its descriptor (store_node_fd()), or -errno. */
static int store_dir_node(struct posix_store *s, uint64_t handle,
			  struct store_node **out)
{
	struct store_node *n = store_node_find(s, handle);
	int fd;

	if (!n)
		return -ESTALE;
	if (n->mode != S_IFDIR)
		return -ENOTDIR;
	fd = store_node_fd(s, n);
	if (fd < 0)
		return fd;
	*out = n;
	return fd;
}

/*
 * A checked, NUL-terminated copy of name and the directory it lives in;
 * returns the directory's descriptor.
 */
static int store_dir_entry(struct posix_store *s, uint64_t parent,
			   const char *name, size_t len, char cname[256],
			   struct store_node **dir)
{
	int ret;

	ret = store_name(name, len, cname);
	if (ret < 0)
		return ret;
	return store_dir_node(s, parent, dir);
}

static int store_lookup_fd(struct posix_store *s, int dirfd, const char *name,
			   struct bcp_entry *out)
{
	int fd;

	fd = store_openat2(s, dirfd, name, O_PATH | O_NOFOLLOW, 0,
			   RESOLVE_NO_SYMLINKS);
	if (fd < 0)
		return fd;
	return store_node_get(s, fd, out);
}

static int posix_lookup(struct agent_store *bs, uint64_t parent,
			const char *name, size_t len, struct bcp_entry *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *p;
	char cname[256];
	int ret;

	ret = store_dir_entry(s, parent, name, len, cname, &p);
	if (ret < 0)
		return ret;
	return store_lookup_fd(s, ret, cname, out);
}

/* The file behind an fh, without taking a reference. */
static struct agent_file *store_file_find(struct posix_store *s, uint64_t fh)
{
	uint32_t idx = (uint32_t)(fh & 0xffffffffu);
	struct agent_file *f;

	if (idx == 0 || idx > s->nfiles)
		return NULL;
	f = store_file_at(s, idx - 1);
	if (f->fd < 0 || f->closing || f->gen != (uint32_t)(fh >> 32))
		return NULL;
	return f;
}

static int posix_getattr(struct agent_store *bs, uint64_t handle, uint64_t fh,
			 struct bcp_attr *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n = store_node_find(s, handle);
	struct agent_file *f = NULL;
	struct statx x;
	int ret;

	if (fh) {
		f = store_file_find(s, fh);
		if (!f)
			return -EBADF;
	} else if (!n) {
		return -ESTALE;
	}
	ret = f ? f->fd : store_node_fd(s, n);
	if (ret < 0)
		return ret;
	ret = store_statx(s, ret, &x);
	if (ret < 0)
		return ret;
	store_attr_fill(&x, out);
	return 0;
}

static int store_setattr(struct posix_store *s, struct store_node *n,
			 const struct bcp_setattr_req *r, struct bcp_attr *out)
{
	struct agent_file *f = NULL;
	char proc[64];
	int nfd, ret;

	if (r->valid & ~BCP_SETATTR_ALL)
		return -EINVAL;
	if (r->fh) {
		f = store_file_find(s, r->fh);
		if (!f)
			return -EBADF;
	}
	nfd = store_node_fd(s, n);
	if (nfd < 0)
		return nfd;
	store_procpath(proc, sizeof(proc), nfd);
	/*
	 * Owner first, then mode: chown(2) clears the set-ID bits of what is
	 * not a directory, and a mode given in the same request is final.
	 */
	if (r->valid & (BCP_SETATTR_UID | BCP_SETATTR_GID)) {
		uid_t uid = (r->valid & BCP_SETATTR_UID) ?
			    agent_ident_map(s->ident, r->uid, 0) : (uid_t)-1;
		gid_t gid = (r->valid & BCP_SETATTR_GID) ?
			    agent_ident_map(s->ident, r->gid, 1) : (gid_t)-1;

		if (fchownat(nfd, "", uid, gid,
			     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	if (r->valid & BCP_SETATTR_MODE) {
		uint32_t mode = r->mode & 07777;

		if (n->mode == S_IFLNK)
			return -EOPNOTSUPP;
		if (s->ident->squash != AGENT_SQUASH_NONE &&
		    (mode & (S_ISUID | S_ISGID))) {
			struct statx x;

			/* no set-ID-root program made by a squashed host */
			ret = store_statx(s, nfd, &x);
			if (ret < 0)
				return ret;
			if (x.stx_uid == 0)
				mode &= ~(uint32_t)S_ISUID;
			if (x.stx_gid == 0)
				mode &= ~(uint32_t)S_ISGID;
		}
		ret = f ? fchmod(f->fd, mode) : chmod(proc, mode);
		if (ret < 0)
			return -errno;
	}
	if (r->valid == BCP_SETATTR_CTIME) {
		struct statx x;

		/*
		 * Nothing but ctime: set the mode it has, which changes
		 * ctime and, done by root, nothing else (a chown(-1, -1)
		 * would clear set-ID bits the host did not ask to clear).
		 */
		ret = store_statx(s, nfd, &x);
		if (ret < 0)
			return ret;
		if (n->mode == S_IFLNK)
			ret = fchownat(nfd, "", (uid_t)-1, (gid_t)-1,
				       AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		else
			ret = chmod(proc, x.stx_mode & 07777);
		if (ret < 0)
			return -errno;
	}
	if (r->valid & BCP_SETATTR_SIZE) {
		if (r->size > INT64_MAX)
			return -EFBIG;
		if (n->mode == S_IFDIR)
			return -EISDIR;
		if (n->mode != S_IFREG)
			return -EINVAL;
		ret = f ? ftruncate(f->fd, (off_t)r->size) :
			  truncate(proc, (off_t)r->size);
		if (ret < 0)
			return -errno;
		/*
		 * The kernel asks for a size alone after open(O_TRUNC) and
		 * ftruncate(2), and leaves the times to the server: both mark
		 * mtime and ctime for update, an empty file's too (POSIX).
		 * ftruncate(2) here does; truncate(2) of a file whose size
		 * stays does not on every file system (tmpfs), so the times
		 * are set then, unless the request sets them itself.
		 */
		if (!f && !(r->valid & (BCP_SETATTR_MTIME |
					BCP_SETATTR_MTIME_NOW))) {
			const struct timespec now[2] = {
				{ .tv_nsec = UTIME_OMIT },
				{ .tv_nsec = UTIME_NOW },
			};

			if (utimensat(AT_FDCWD, proc, now, 0) < 0)
				return -errno;
		}
	}
	if (r->valid & (BCP_SETATTR_ATIME | BCP_SETATTR_MTIME |
			BCP_SETATTR_ATIME_NOW | BCP_SETATTR_MTIME_NOW)) {
		struct timespec ts[2] = {
			{ .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT },
		};

		if (r->valid & BCP_SETATTR_ATIME_NOW) {
			ts[0].tv_nsec = UTIME_NOW;
		} else if (r->valid & BCP_SETATTR_ATIME) {
			if (r->atime_nsec >= 1000000000u)
				return -EINVAL;
			ts[0].tv_sec = r->atime;
			ts[0].tv_nsec = r->atime_nsec;
		}
		if (r->valid & BCP_SETATTR_MTIME_NOW) {
			ts[1].tv_nsec = UTIME_NOW;
		} else if (r->valid & BCP_SETATTR_MTIME) {
			if (r->mtime_nsec >= 1000000000u)
				return -EINVAL;
			ts[1].tv_sec = r->mtime;
			ts[1].tv_nsec = r->mtime_nsec;
		}
		if (f)
			ret = futimens(f->fd, ts);
		else if (n->mode == S_IFLNK)
			ret = utimensat(nfd, "", ts,
					AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		else
			ret = utimensat(AT_FDCWD, proc, ts, 0);
		if (ret < 0)
			return -errno;
	}
	return agent_store_getattr(&s->base, r->handle, 0, out);
}

static int posix_setattr(struct agent_store *bs,
			 const struct bcp_setattr_req *r, struct bcp_attr *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n = store_node_find(s, r->handle);
	int ret;

	if (!n)
		return -ESTALE;
	ret = store_setattr(s, n, r, out);
	/*
	 * Even a failure may follow a step that was made (owner set, mode
	 * refused): the holders look again, which costs them little.  A
	 * new size changes the data from there on.
	 */
	store_pub_inode(s, store_obj(n),
			ret == 0 && (r->valid & BCP_SETATTR_SIZE) ?
			(int64_t)r->size : -1, 0);
	return ret;
}

/*
 * Give a newly created object (fd: O_PATH or open, on that object) to the
 * caller, as the session's identity policy maps the ids.  In a set-group-ID
 * directory the object keeps the group the backing filesystem gave it (the
 * directory's), as on a local filesystem.  chown(2) clears the set-ID bits
 * of what is not a directory, so a mode that asks for them is applied again
 * afterwards (mode: the final permission bits, or 0 for a symlink).
 */
static int store_own_new(struct posix_store *s, struct store_node *parent,
			 int fd, uint32_t uid, uint32_t gid, uint32_t mode)
{
	struct statx x;
	char proc[64];
	int ret;

	if (s->euid != 0)
		return 0;
	uid = agent_ident_map(s->ident, uid, 0);
	gid = agent_ident_map(s->ident, gid, 1);
	ret = store_node_fd(s, parent);
	if (ret < 0)
		return ret;
	ret = store_statx(s, ret, &x);
	if (ret < 0)
		return ret;
	if (x.stx_mode & S_ISGID)
		gid = (uint32_t)-1;
	if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (mode & (S_ISUID | S_ISGID)) {
		store_procpath(proc, sizeof(proc), fd);
		if (chmod(proc, mode & 07777) < 0)
			return -errno;
	}
	return 0;
}

/* What open(2) of a non-regular node gives here: we open regular files only. */
static int store_type_err(uint32_t mode)
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

/* Reopen the object behind an O_PATH fd (the same inode, never a name). */
static int store_reopen(int pfd, int flags)
{
	char proc[64];
	int fd;

	store_procpath(proc, sizeof(proc), pfd);
	fd = open(proc, flags | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

/* Add a chunk of FILE_CHUNK files; the chunks already there stay put. */
static int store_file_grow(struct posix_store *s)
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

/* Add free slots to the table until slot idx exists. */
static int store_file_extend(struct posix_store *s, uint32_t idx)
{
	struct agent_file *f;
	int ret;

	while (s->nfiles <= idx) {
		ret = store_file_grow(s);
		if (ret < 0)
			return ret;
		f = store_file_at(s, s->nfiles);
		f->idx = s->nfiles;
		f->fd = -1;
		f->gen = 0;
		f->next_free = s->free_head;
		s->free_head = s->nfiles++;
	}
	return 0;
}

/* Take slot idx off the free list: -EEXIST when it is not there (used). */
static int store_file_claim(struct posix_store *s, uint32_t idx)
{
	uint32_t *pp = &s->free_head;

	while (*pp != FILE_NONE) {
		if (*pp == idx) {
			*pp = store_file_at(s, idx)->next_free;
			return 0;
		}
		pp = &store_file_at(s, *pp)->next_free;
	}
	return -EEXIST;
}

/* 0 while the session may open one more file, else -EMFILE (said). */
static int store_file_room(const struct posix_store *s)
{
	if (s->live_files < store_max_files())
		return 0;
	agent_warn_rl("open file limit (%u per session) reached",
		      store_max_files());
	return -EMFILE;
}

/*
 * Takes ownership of fd on success (counted in the descriptor budget).
 * want: 0 for any slot, or the fh value to install (REOPEN).  n: the
 * node it is open on.
 */
static int store_file_new(struct posix_store *s, int fd, int dir,
			  const struct store_node *n, uint64_t want,
			  uint64_t *fh)
{
	struct agent_file *f;
	uint32_t idx;
	int ret;

	ret = store_file_room(s);
	if (ret < 0)
		return ret;
	ret = agent_fd_take();
	if (ret < 0) {
		agent_warn_rl("the agent's descriptor budget (%ld) is spent",
			      agent_fds_budget);
		return ret;
	}
	if (want) {
		idx = (uint32_t)(want & 0xffffffffu) - 1;
		ret = store_file_extend(s, idx);
		if (ret == 0)
			ret = store_file_claim(s, idx);
		if (ret < 0) {
			agent_fd_give();
			return ret;
		}
		/* the gen++ below gives the fh its old generation */
		store_file_at(s, idx)->gen = (uint32_t)(want >> 32) - 1;
	} else if (s->free_head != FILE_NONE) {
		idx = s->free_head;
		s->free_head = store_file_at(s, idx)->next_free;
	} else {
		ret = store_file_grow(s);
		if (ret < 0) {
			agent_fd_give();
			return ret;
		}
		idx = s->nfiles++;
		store_file_at(s, idx)->gen = 0;
	}
	f = store_file_at(s, idx);
	f->idx = idx;
	f->fd = fd;
	f->dir = dir;
	f->closing = 0;
	f->io_inline = AGENT_INLINE_UNKNOWN;
	f->obj = store_obj(n);
	f->refs = 1;
	f->gen++;
	if (f->gen == 0)
		f->gen = 1;	/* an fh is never 0 in its high half either */
	f->next_free = FILE_NONE;
	s->live_files++;
	*fh = ((uint64_t)f->gen << 32) | (idx + 1);
	return 0;
}

static void store_file_unref(struct posix_store *s, struct agent_file *f)
{
	if (--f->refs)
		return;
	close(f->fd);
	agent_fd_give();
	f->fd = -1;
	f->next_free = s->free_head;
	s->free_head = f->idx;
	s->live_files--;
}

/*
 * The mode a new object of directory dfd is made with: the host's umask
 * applies unless the directory has a default ACL, which the backing file
 * system then applies instead (a local file system ignores the umask
 * there; the mount asks the kernel to leave the umask to us).
 */
static uint32_t store_new_mode(int dfd, uint32_t mode, uint32_t umask)
{
	char proc[64];

	mode &= 07777;
	if (!(mode & umask))
		return mode;
	store_procpath(proc, sizeof(proc), dfd);
	if (getxattr(proc, "system.posix_acl_default", NULL, 0) > 0)
		return mode;
	return mode & ~umask;
}

/*
 * O_* bits a host may ask for; the rest are ours to decide.  Not O_APPEND:
 * the host's kernel chose every write's offset already, and an O_APPEND
 * descriptor would make pwrite ignore it.  Not O_NONBLOCK: only regular
 * files are opened.
 */
#define STORE_OPEN_FLAGS	(O_ACCMODE | O_TRUNC | O_SYNC | O_DSYNC)

static int posix_create_file(struct agent_store *bs,
			     const struct bcp_create_req *r, const char *name,
			     struct bcp_create_rep *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	uint32_t flags = r->flags & STORE_OPEN_FLAGS;
	uint32_t mode;
	struct agent_obj none = { 0, 0 };
	struct bcp_entry e;
	struct store_node *p, *n;
	struct statx x;
	char cname[256];
	uint64_t fh;
	int fd, pfd, dfd, ret, made = 0;

	/*
	 * No room for one more open file: fail before the name is made, as
	 * open(2) fails with EMFILE before it creates anything.
	 */
	ret = store_file_room(s);
	if (ret < 0)
		return ret;
	dfd = store_dir_entry(s, r->parent, name, r->name_len, cname, &p);
	if (dfd < 0)
		return dfd;
	mode = store_new_mode(dfd, r->mode, r->umask);
	fd = store_openat2(s, dfd, cname, flags | O_CREAT | O_EXCL |
			   O_NOFOLLOW, mode, RESOLVE_NO_SYMLINKS);
	if (fd >= 0) {
		made = 1;
		/* ours and new: name it by the open file, not the name */
		pfd = store_reopen(fd, O_PATH);
		if (pfd < 0) {
			ret = pfd;
			goto out_close;
		}
		ret = store_own_new(s, p, pfd, r->uid, r->gid, mode);
		if (ret < 0) {
			close(pfd);
			goto out_close;
		}
	} else if (fd == -EEXIST && !(r->flags & O_EXCL)) {
		/*
		 * It exists: open what is there only if it is a regular
		 * file, and exactly the inode that was checked.
		 */
		dfd = store_node_fd(s, p);
		if (dfd < 0)
			return dfd;
		pfd = store_openat2(s, dfd, cname, O_PATH | O_NOFOLLOW, 0,
				    RESOLVE_NO_SYMLINKS);
		if (pfd < 0)
			return pfd;
		ret = store_statx(s, pfd, &x);
		if (ret == 0)
			ret = store_type_err(x.stx_mode);
		if (ret == 0)
			ret = fd = store_reopen(pfd, (int)flags);
		if (ret < 0) {
			close(pfd);
			return ret;
		}
	} else {
		return fd;
	}
	ret = store_node_get(s, pfd, &e);
	if (ret < 0)
		goto out_close;
	n = store_node_find(s, e.handle);
	/* the entry is there: it is news even if the open fails */
	if (made)
		store_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, none);
	else if (flags & O_TRUNC)
		store_pub_inode(s, store_obj(n), 0, 0);
	ret = store_file_new(s, fd, 0, n, 0, &fh);
	if (ret < 0) {
		agent_store_forget(&s->base, e.handle, 1);
		goto out_close;
	}
	memset(out, 0, sizeof(*out));
	out->entry = e;
	out->fh = fh;
	/* a new inode: no xattrs, so no file capabilities to ask for */
	if (made)
		out->open_flags = BCP_OPEN_CREATED;
	return 0;

out_close:
	close(fd);
	return ret;
}

/*
 * After creating name (of type ifmt) in p: give it to the caller and look
 * it up.  A rename racing with us may have put another object under the
 * name; then it is not touched.
 */
static int store_made(struct posix_store *s, struct store_node *p,
		      const char *cname, uint32_t ifmt, uint32_t uid,
		      uint32_t gid, uint32_t mode, struct bcp_entry *out)
{
	struct agent_obj none = { 0, 0 };
	struct bcp_entry e;
	struct statx x;
	int fd, ret;

	/* the name is made: news for the directory's holders, whatever
	 * follows */
	store_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, none);
	fd = store_node_fd(s, p);
	if (fd < 0)
		return fd;
	fd = store_openat2(s, fd, cname, O_PATH | O_NOFOLLOW, 0,
			   RESOLVE_NO_SYMLINKS);
	if (fd < 0)
		return fd;
	ret = store_statx(s, fd, &x);
	if (ret == 0 && (x.stx_mode & S_IFMT) != ifmt)
		ret = -ESTALE;
	if (ret == 0)
		ret = store_own_new(s, p, fd, uid, gid,
				    ifmt == S_IFLNK ? 0 : mode);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	ret = store_node_get(s, fd, &e);
	if (ret < 0)
		return ret;
	*out = e;
	return 0;
}

static int posix_mkdir(struct agent_store *bs, const struct bcp_mkdir_req *r,
		       const char *name, struct bcp_entry *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct io_uring_sqe own, *sqe;
	struct store_node *p;
	uint32_t mode;
	char cname[256];
	int ret;

	ret = store_dir_entry(s, r->parent, name, r->name_len, cname, &p);
	if (ret < 0)
		return ret;
	mode = store_new_mode(ret, r->mode, r->umask);
	sqe = store_meta_sqe(s, &own);
	io_uring_prep_mkdirat(sqe, ret, cname, mode);
	ret = store_meta_run(s, sqe);
	if (ret < 0)
		return ret;
	return store_made(s, p, cname, S_IFDIR, r->uid, r->gid, mode, out);
}

static int posix_mknod(struct agent_store *bs, const struct bcp_mknod_req *r,
		       const char *name, struct bcp_entry *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *p;
	uint32_t mode;
	char cname[256];
	int ret;

	ret = store_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	switch (r->mode & S_IFMT) {
	case S_IFREG: case S_IFIFO: case S_IFSOCK:
		break;
	case S_IFCHR: case S_IFBLK:
		/* a device node in the root is a door to the DPU's devices */
		if (!s->ident->allow_devices)
			return -EPERM;
		break;
	case S_IFDIR: case S_IFLNK:
		return -EPERM;
	default:
		return -EINVAL;
	}
	ret = store_dir_node(s, r->parent, &p);
	if (ret < 0)
		return ret;
	mode = store_new_mode(ret, r->mode, r->umask);
	if (mknodat(ret, cname, (r->mode & S_IFMT) | mode,
		    (dev_t)r->rdev) < 0)
		return -errno;
	return store_made(s, p, cname, r->mode & S_IFMT, r->uid, r->gid,
			  mode, out);
}

static int posix_symlink(struct agent_store *bs,
			 const struct bcp_symlink_req *r, const char *name,
			 const char *target, struct bcp_entry *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct io_uring_sqe own, *sqe;
	struct store_node *p;
	char cname[256];
	char *t;
	int ret;

	ret = store_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	if (r->target_len == 0 || r->target_len > BCP_SYMLINK_MAX ||
	    memchr(target, '\0', r->target_len))
		return -EINVAL;
	ret = store_dir_node(s, r->parent, &p);
	if (ret < 0)
		return ret;
	/* Metadata path: one allocation for the NUL-terminated target. */
	t = strndup(target, r->target_len);
	if (!t)
		return -ENOMEM;
	sqe = store_meta_sqe(s, &own);
	io_uring_prep_symlinkat(sqe, t, ret, cname);
	ret = store_meta_run(s, sqe);
	free(t);
	if (ret < 0)
		return ret;
	return store_made(s, p, cname, S_IFLNK, r->uid, r->gid, 0, out);
}

static int posix_readlink(struct agent_store *bs, uint64_t handle, char *buf,
			  size_t cap)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n = store_node_find(s, handle);
	ssize_t len;

	if (!n)
		return -ESTALE;
	if (n->mode != S_IFLNK)
		return -EINVAL;
	len = store_node_fd(s, n);
	if (len < 0)
		return (int)len;
	len = readlinkat((int)len, "", buf, cap);
	if (len < 0)
		return -errno;
	return (int)len;
}

static int posix_link(struct agent_store *bs, const struct bcp_link_req *r,
		      const char *name, struct bcp_entry *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n = store_node_find(s, r->handle);
	struct io_uring_sqe own, *sqe;
	struct store_node *p;
	char cname[256], proc[64];
	int dfd, ret;

	ret = store_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	if (!n)
		return -ESTALE;
	if (n->mode == S_IFDIR)
		return -EPERM;
	ret = store_node_fd(s, n);
	if (ret < 0)
		return ret;
	store_procpath(proc, sizeof(proc), ret);
	dfd = store_dir_node(s, r->newparent, &p);
	if (dfd < 0)
		return dfd;
	sqe = store_meta_sqe(s, &own);
	io_uring_prep_linkat(sqe, AT_FDCWD, proc, dfd, cname,
			     AT_SYMLINK_FOLLOW);
	ret = store_meta_run(s, sqe);
	if (ret < 0)
		return ret;
	/* a new name, and the object's link count */
	store_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, store_obj(n));
	return store_lookup_fd(s, store_node_fd(s, p), cname, out);
}

static int posix_unlink(struct agent_store *bs, uint64_t parent,
			const char *name, size_t len, int rmdir)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct io_uring_sqe own, *sqe;
	struct store_node *p;
	struct agent_obj child;
	char cname[256];
	uint32_t nlink;
	int ret;

	ret = store_dir_entry(s, parent, name, len, cname, &p);
	if (ret < 0)
		return ret;
	store_pub_peek(s, ret, cname, !rmdir, &child, &nlink);
	sqe = store_meta_sqe(s, &own);
	io_uring_prep_unlinkat(sqe, ret, cname, rmdir ? AT_REMOVEDIR : 0);
	ret = store_meta_run(s, sqe);
	if (ret == 0) {
		store_pub_gone(s, p, cname, child, nlink);
		store_node_gone(s, child, nlink);
	}
	return ret;
}

static int posix_rename(struct agent_store *bs, const struct bcp_rename_req *r,
			const char *name, const char *newname)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct io_uring_sqe own, *sqe;
	struct store_node *p, *np;
	struct agent_obj moved, target;
	char cname[256], cnew[256];
	uint32_t nlink, tlink;
	int nfd, ret;

	if (r->flags & ~(BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE) ||
	    r->flags == (BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE))
		return -EINVAL;
	ret = store_name(name, r->name_len, cname);
	if (ret < 0)
		return ret;
	ret = store_name(newname, r->newname_len, cnew);
	if (ret < 0)
		return ret;
	nfd = store_dir_node(s, r->newparent, &np);
	if (nfd < 0)
		return nfd;
	/* nfd is the newest descriptor: taking one more keeps it open */
	ret = store_dir_node(s, r->parent, &p);
	if (ret < 0)
		return ret;
	store_pub_peek(s, ret, cname, 0, &moved, &nlink);
	store_pub_peek(s, nfd, cnew, !(r->flags & BCP_RENAME_EXCHANGE), &target,
		       &tlink);
	sqe = store_meta_sqe(s, &own);
	io_uring_prep_renameat(sqe, ret, cname, nfd, cnew, r->flags);
	ret = store_meta_run(s, sqe);
	if (ret < 0)
		return ret;
	/*
	 * The old name names something else or nothing: ENTRY, never
	 * DELETE, which would end the moved object in its holders' kernels.
	 * The new name: ENTRY, or the end of the object it replaced.
	 */
	store_pub_name(s, BCP_NOTIFY_ENTRY, p, cname, moved);
	if (r->flags & BCP_RENAME_EXCHANGE || !(target.dev || target.ino))
		store_pub_name(s, BCP_NOTIFY_ENTRY, np, cnew, target);
	else
		store_pub_gone(s, np, cnew, target, tlink);
	if (!(r->flags & BCP_RENAME_EXCHANGE))
		store_node_gone(s, target, tlink);
	return 0;
}

/* A new descriptor on handle's object, as OPEN or OPENDIR opens it. */
static int store_open_node(struct posix_store *s, uint64_t handle,
			   uint32_t flags, int dir)
{
	struct store_node *n = store_node_find(s, handle);
	char proc[64];
	int fd;

	if (!n)
		return -ESTALE;
	if (dir && n->mode != S_IFDIR)
		return -ENOTDIR;
	if (!dir && n->mode == S_IFDIR)
		return -EISDIR;
	if (!dir && n->mode != S_IFREG)
		return n->mode == S_IFLNK ? -ELOOP : -ENXIO;
	fd = store_node_fd(s, n);
	if (fd < 0)
		return fd;
	store_procpath(proc, sizeof(proc), fd);
	if (dir)
		fd = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else
		fd = open(proc, (int)(flags & STORE_OPEN_FLAGS) | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int posix_open(struct agent_store *bs, uint64_t handle, uint32_t flags,
		      int dir, struct bcp_open_rep *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n;
	uint64_t fh;
	int fd, ret;

	fd = store_open_node(s, handle, flags, dir);
	if (fd < 0)
		return fd;
	n = store_node_find(s, handle);
	if (!dir && (flags & O_TRUNC))
		store_pub_inode(s, store_obj(n), 0, 0);
	ret = store_file_new(s, fd, dir, n, 0, &fh);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	memset(out, 0, sizeof(*out));
	out->fh = fh;
	return 0;
}

static int posix_reopen(struct agent_store *bs, const struct bcp_reopen_req *r,
			struct bcp_open_rep *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	uint32_t idx = (uint32_t)(r->fh & 0xffffffffu);
	uint64_t fh;
	int fd, ret;

	if (idx == 0 || (r->fh >> 32) == 0 || idx > store_max_files() ||
	    r->dir > 1)
		return -EINVAL;
	if (idx <= s->nfiles && store_file_at(s, idx - 1)->fd >= 0)
		return -EEXIST;
	/* what the first OPEN did is done: never truncate or create again */
	fd = store_open_node(s, r->handle, r->flags & ~(uint32_t)O_TRUNC,
			     (int)r->dir);
	if (fd < 0)
		return fd;
	ret = store_file_new(s, fd, (int)r->dir,
			     store_node_find(s, r->handle), r->fh, &fh);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	/* this descriptor keeps a removed file now: linger.c */
	if (!r->dir)
		agent_linger_claim(fd, s);
	memset(out, 0, sizeof(*out));
	out->fh = fh;
	return 0;
}

static int posix_rebind(struct agent_store *bs, uint64_t handle,
			uint64_t nlookup, const uint8_t fid[BCP_FID_LEN])
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n;
	struct statx x;
	uint64_t dev;
	int fd, ret;

	if (handle < 2 || nlookup == 0)
		return -EINVAL;
	n = store_node_any(s, handle);
	if (n && n->dead) {
		n->nlookup = n->nlookup + nlookup < n->nlookup ?
			     UINT64_MAX : n->nlookup + nlookup;
		return -ESTALE;
	}
	fd = agent_fid_open(fid, O_PATH);
	if (fd == -EMFILE || fd == -ENFILE)
		return -ENFILE;
	if (fd >= 0 && store_statx(s, fd, &x) < 0) {
		close(fd);
		fd = -ESTALE;
	}
	if (fd < 0) {
		/* gone: the host still holds the value, so keep it taken */
		if (!n)
			store_node_bury(s, handle, nlookup);
		return n ? -EEXIST : -ESTALE;
	}
	dev = makedev(x.stx_dev_major, x.stx_dev_minor);
	if (n) {
		close(fd);
		if (n->dev != dev || n->ino != x.stx_ino)
			return -EEXIST;
		if (n != s->root)
			n->nlookup = n->nlookup + nlookup < n->nlookup ?
				     UINT64_MAX : n->nlookup + nlookup;
		return 0;
	}
	/*
	 * Another handle of this session may name the object already (a
	 * host that had two handles for it, or that looked it up again
	 * before rebinding): this one becomes a second node of its own, so
	 * each handle is counted and forgotten on its own.
	 */
	ret = store_node_new(s, handle, &x, fd, fid, &n);
	if (ret < 0)
		return ret;
	n->nlookup = nlookup;
	return 0;
}

static int posix_fid_entry(struct agent_store *bs,
			   const uint8_t fid[BCP_FID_LEN],
			   struct bcp_entry *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	int fd;

	fd = agent_fid_open(fid, O_PATH);
	if (fd < 0)
		return fd == -EMFILE || fd == -ENFILE ? -ENFILE : -ESTALE;
	return store_node_get(s, fd, out);
}

static int posix_release(struct agent_store *bs, uint64_t handle, uint64_t fh,
			 int dir)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct agent_file *f = store_file_find(s, fh);

	if (!f)
		return -EBADF;
	if (!!f->dir != !!dir)
		return dir ? -ENOTDIR : -EISDIR;
	f->closing = 1;
	store_file_unref(s, f);
	return 0;
}

static int posix_file_get(struct agent_store *bs, uint64_t fh,
			  struct agent_file **out, int *fd)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct agent_file *f = store_file_find(s, fh);

	if (!f)
		return -EBADF;
	if (f->dir)
		return -EISDIR;
	f->refs++;
	*out = f;
	*fd = f->fd;
	return 0;
}

static int posix_file_inline(struct agent_file *f, int fd)
{
	struct statfs sfs;

	if (f->io_inline != AGENT_INLINE_UNKNOWN)
		return f->io_inline;
	/* memory-backed filesystems without IOCB_NOWAIT support */
	if (!fstatfs(fd, &sfs) && (sfs.f_type == TMPFS_MAGIC ||
				   sfs.f_type == RAMFS_MAGIC))
		f->io_inline = AGENT_INLINE_MEMORY;
	else
		f->io_inline = AGENT_INLINE_NOWAIT;
	return f->io_inline;
}

static void posix_file_inline_set(struct agent_file *f, int mode)
{
	f->io_inline = mode;
}

static void posix_file_wrote(struct agent_store *bs, struct agent_file *f,
			     uint64_t off, uint64_t len)
{
	struct posix_store *s = (struct posix_store *)bs;

	if (len && off <= INT64_MAX && len <= INT64_MAX - off)
		store_pub_inode(s, f->obj, (int64_t)off, (int64_t)len);
}

static void posix_file_put(struct agent_store *bs, struct agent_file *f)
{
	struct posix_store *s = (struct posix_store *)bs;

	store_file_unref(s, f);
}

static int posix_statfs(struct agent_store *bs, uint64_t handle,
			struct bcp_statfs_rep *out)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n = store_node_find(s, handle);
	struct statfs sf;

	int fd;

	if (!n)
		return -ESTALE;
	fd = store_node_fd(s, n);
	if (fd < 0)
		return fd;
	if (fstatfs(fd, &sf) < 0)
		return -errno;
	memset(out, 0, sizeof(*out));
	out->blocks = sf.f_blocks;
	out->bfree = sf.f_bfree;
	out->bavail = sf.f_bavail;
	out->files = sf.f_files;
	out->ffree = sf.f_ffree;
	out->bsize = (uint32_t)sf.f_bsize;
	out->frsize = (uint32_t)(sf.f_frsize ? sf.f_frsize : sf.f_bsize);
	out->namemax = BCP_NAME_MAX;
	return 0;
}

/*
 * trusted.* and security.* (file capabilities among them) carry the DPU's
 * own privileges: only a session whose ids are not squashed sets them.
 */
static int store_xattr_privileged(const struct posix_store *s,
				  const char *name)
{
	return s->ident->squash != AGENT_SQUASH_NONE &&
	       (!strncmp(name, "trusted.", 8) ||
		!strncmp(name, "security.", 9));
}

static int store_xattr_node(struct posix_store *s, uint64_t handle,
			    const char *name, size_t nlen, char cname[256],
			    char proc[64], struct store_node **out)
{
	struct store_node *n = store_node_find(s, handle);
	enum bcp_err why;
	int ret;

	if (!n)
		return -ESTALE;
	if (name) {
		ret = bcp_xattr_name_check(name, nlen, &why);
		if (ret < 0)
			return ret;
		memcpy(cname, name, nlen);
		cname[nlen] = '\0';
	}
	ret = store_node_fd(s, n);
	if (ret < 0)
		return ret;
	store_procpath(proc, 64, ret);
	*out = n;
	return 0;
}

static int posix_setxattr(struct agent_store *bs, uint64_t handle,
			  uint32_t flags, const char *name, size_t nlen,
			  const void *value, size_t vlen)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct io_uring_sqe own, *sqe;
	struct store_node *n;
	char cname[256], proc[64];
	int ret;

	ret = store_xattr_node(s, handle, name, nlen, cname, proc, &n);
	if (ret < 0)
		return ret;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (store_xattr_privileged(s, cname))
		return -EPERM;
	if (n->mode == S_IFLNK)
		return -EPERM;
	sqe = store_meta_sqe(s, &own);
	io_uring_prep_setxattr(sqe, cname, value, proc, (int)flags,
			       (unsigned int)vlen);
	ret = store_meta_run(s, sqe);
	if (ret == 0)
		store_pub_inode(s, store_obj(n), -1, 0);
	return ret;
}

static int posix_getxattr(struct agent_store *bs, uint64_t handle,
			  const char *name, size_t nlen, void *buf,
			  size_t size)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct io_uring_sqe own, *sqe;
	struct store_node *n;
	char cname[256], proc[64];
	int ret;

	ret = store_xattr_node(s, handle, name, nlen, cname, proc, &n);
	if (ret < 0)
		return ret;
	if (n->mode == S_IFLNK)
		return -ENODATA;
	sqe = store_meta_sqe(s, &own);
	io_uring_prep_getxattr(sqe, cname, size ? buf : NULL, proc,
			       (unsigned int)size);
	return store_meta_run(s, sqe);
}

static int posix_listxattr(struct agent_store *bs, uint64_t handle, void *buf,
			   size_t size)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n;
	char proc[64];
	ssize_t len;
	int ret;

	ret = store_xattr_node(s, handle, NULL, 0, NULL, proc, &n);
	if (ret < 0)
		return ret;
	if (n->mode == S_IFLNK)
		return 0;
	len = listxattr(proc, size ? buf : NULL, size);
	if (len < 0)
		return -errno;
	return (int)len;
}

static int posix_removexattr(struct agent_store *bs, uint64_t handle,
			     const char *name, size_t nlen)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n;
	char cname[256], proc[64];
	int ret;

	ret = store_xattr_node(s, handle, name, nlen, cname, proc, &n);
	if (ret < 0)
		return ret;
	if (store_xattr_privileged(s, cname))
		return -EPERM;
	if (n->mode == S_IFLNK)
		return -EPERM;
	if (removexattr(proc, cname) < 0)
		return -errno;
	store_pub_inode(s, store_obj(n), -1, 0);
	return 0;
}

static void posix_forget(struct agent_store *bs, uint64_t handle,
			 uint64_t nlookup)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct store_node *n = store_node_any(s, handle);

	if (!n || n == s->root)
		return;
	if (nlookup >= n->nlookup)
		store_node_drop(s, n);
	else
		n->nlookup -= nlookup;
}

static int posix_lseek(struct agent_store *bs, const struct bcp_lseek_req *r,
		       int64_t *off)
{
	struct posix_store *s = (struct posix_store *)bs;
	struct agent_file *f = store_file_find(s, r->fh);
	off_t o;

	if (!f)
		return -EBADF;
	switch (r->whence) {
	case SEEK_SET: case SEEK_CUR: case SEEK_END: case SEEK_DATA:
	case SEEK_HOLE:
		break;
	default:
		return -EINVAL;
	}
	o = lseek(f->fd, (off_t)r->offset, (int)r->whence);
	if (o < 0)
		return -errno;
	*off = o;
	return 0;
}

/*
 * Calls on the blocking pool (store.h).  begin() and end() run on the
 * worker; run() on a pool thread, where it may use only the descriptors
 * and buffers of the call.
 */
struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int store_call_file(struct posix_store *s, uint64_t fh, int dir,
			   struct agent_file **out)
{
	struct agent_file *f = store_file_find(s, fh);

	if (!f)
		return -EBADF;
	if (dir >= 0 && !!f->dir != !!dir)
		return dir ? -ENOTDIR : -EISDIR;
	f->refs++;
	*out = f;
	return 0;
}

static int store_call_fsync(struct posix_store *s,
			    const struct bcp_fsync_req *r, int dir,
			    struct agent_store_call *c)
{
	struct store_node *n;
	int fd;

	c->datasync = !!r->datasync;
	if (r->fh) {
		if (store_call_file(s, r->fh, -1, &c->f) < 0)
			return -EBADF;
		c->fd = c->f->fd;
		return 0;
	}
	n = store_node_find(s, r->handle);
	if (!n)
		return -ESTALE;
	if (n->mode != S_IFDIR && n->mode != S_IFREG)
		return -EINVAL;
	(void)dir;
	fd = store_node_fd(s, n);
	if (fd < 0)
		return fd;
	/* its own descriptor: the LRU may close the node's meanwhile */
	fd = store_reopen(fd, O_RDONLY);
	if (fd < 0)
		return fd;
	c->fd = fd;
	c->own_fd = 1;
	return 0;
}

static int store_call_readdir(struct posix_store *s,
			      const struct bcp_readdir_req *r,
			      struct agent_store_call *c)
{
	int ret;

	if (r->flags & ~BCP_READDIR_PLUS)
		return -EINVAL;
	if (r->cookie > INT64_MAX)
		return -EINVAL;
	ret = store_call_file(s, r->fh, 1, &c->f);
	if (ret < 0)
		return ret;
	c->fd = c->f->fd;
	c->rd = *r;
	return 0;
}

static int posix_call_begin(struct agent_store *bs, const struct bcp_msg *m,
			    struct agent_store_call *c)
{
	struct posix_store *s = (struct posix_store *)bs;
	const struct bcp_fallocate_req *fa;
	const struct bcp_copy_req *cp;
	int ret;

	c->op = m->hdr.opcode;
	c->f = c->f2 = NULL;
	c->fd = c->fd2 = -1;
	c->own_fd = 0;
	c->res = 0;
	c->nread = 0;
	c->eof = 0;
	switch (c->op) {
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
		return store_call_fsync(s, &m->u.fsync_req,
					c->op == BCP_OP_FSYNCDIR, c);
	case BCP_OP_FALLOCATE:
		fa = &m->u.fallocate_req;
		if (fa->offset > INT64_MAX || fa->length > INT64_MAX ||
		    fa->offset + fa->length > INT64_MAX)
			return -EFBIG;
		ret = store_call_file(s, fa->fh, 0, &c->f);
		if (ret < 0)
			return ret;
		c->fd = c->f->fd;
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
		ret = store_call_file(s, cp->fh_in, 0, &c->f);
		if (ret < 0)
			return ret;
		ret = store_call_file(s, cp->fh_out, 0, &c->f2);
		if (ret < 0) {
			store_file_unref(s, c->f);
			c->f = NULL;
			return ret;
		}
		c->fd = c->f->fd;
		c->fd2 = c->f2->fd;
		c->off = cp->off_in;
		c->off2 = cp->off_out;
		c->len = cp->length > STORE_COPY_MAX ? STORE_COPY_MAX :
						       cp->length;
		return 0;
	case BCP_OP_READDIR:
		return store_call_readdir(s, &m->u.readdir_req, c);
	}
	return -EINVAL;
}

/*
 * READDIR: read entries from the cookie on, as many as the reply can carry
 * (max_bytes, counted as they go on the wire) and the buffer takes, a
 * step at a time: a part with attributes carries about 120 entries, and
 * reading the whole buffer for it (2000 short names) made the directory's
 * file system walk every entry of a big listing a dozen times.  An error
 * after some entries were read is still an error: a listing that silently
 * ends early would look complete.
 */
#define STORE_DENTS_STEP	(8u * 1024)

static long store_call_getdents(struct agent_store_call *c)
{
	int plus = !!(c->rd.flags & BCP_READDIR_PLUS);
	size_t room, pos, wire = 0, want = c->rd.max_bytes;
	long n;

	if (want > BCP_READDIR_MAX)
		want = BCP_READDIR_MAX;
	if (lseek(c->fd, (off_t)c->rd.cookie, SEEK_SET) < 0)
		return -errno;
	while ((room = c->cap - c->nread) >= 1024 && wire <= want) {
		if (room > STORE_DENTS_STEP)
			room = STORE_DENTS_STEP;
		n = syscall(SYS_getdents64, c->fd, c->buf + c->nread, room);
		if (n < 0)
			return -errno;
		if (n == 0) {
			c->eof = 1;
			break;
		}
		for (pos = c->nread; pos < c->nread + (size_t)n;) {
			struct linux_dirent64 *d = (void *)(c->buf + pos);

			wire += bcp_dirent_size(plus, strnlen(d->d_name,
							      d->d_reclen));
			pos += d->d_reclen;
		}
		c->nread += (size_t)n;
	}
	return 0;
}

static void posix_call_run(struct agent_store_call *c)
{
	loff_t in, out;
	long ret;

	switch (c->op) {
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
		ret = c->datasync ? fdatasync(c->fd) : fsync(c->fd);
		break;
	case BCP_OP_FALLOCATE:
		ret = fallocate(c->fd, (int)c->mode, (off_t)c->off,
				(off_t)c->len);
		break;
	case BCP_OP_COPY_FILE_RANGE:
		in = (loff_t)c->off;
		out = (loff_t)c->off2;
		ret = copy_file_range(c->fd, &in, c->fd2, &out, c->len, 0);
		break;
	case BCP_OP_READDIR:
		c->res = store_call_getdents(c);
		return;
	default:
		errno = EINVAL;
		ret = -1;
	}
	c->res = ret < 0 ? -errno : ret;
}

static void posix_call_end(struct agent_store *bs, struct agent_store_call *c)
{
	struct posix_store *s = (struct posix_store *)bs;

	/* the pool changed the data: tell the holders, back on the worker */
	if (c->op == BCP_OP_FALLOCATE && c->res >= 0 && c->f)
		store_pub_inode(s, c->f->obj, (int64_t)c->off,
				(int64_t)c->len);
	else if (c->op == BCP_OP_COPY_FILE_RANGE && c->res > 0 && c->f2)
		store_pub_inode(s, c->f2->obj, (int64_t)c->off2,
				(int64_t)c->res);
	if (c->f)
		store_file_unref(s, c->f);
	if (c->f2)
		store_file_unref(s, c->f2);
	if (c->own_fd)
		close(c->fd);
	c->f = c->f2 = NULL;
	c->own_fd = 0;
	c->fd = c->fd2 = -1;
}

static int posix_readdir_fill(struct agent_store *bs,
			      const struct agent_store_call *c, void *buf,
			      size_t cap, size_t *len, uint32_t *count,
			      uint32_t *eof)
{
	struct posix_store *s = (struct posix_store *)bs;
	int plus = !!(c->rd.flags & BCP_READDIR_PLUS);
	size_t pos = 0, off = 0;
	uint32_t n = 0;
	int ret, full = 0;

	if (c->res < 0)
		return (int)c->res;
	if (c->rd.max_bytes < cap)
		cap = c->rd.max_bytes;
	while (pos < c->nread) {
		struct linux_dirent64 *d = (void *)(c->buf + pos);
		size_t nlen = strnlen(d->d_name, d->d_reclen);
		int dot = !strcmp(d->d_name, ".") || !strcmp(d->d_name, "..");
		struct bcp_dirent de = {
			.cookie = (uint64_t)d->d_off,
			.ino = d->d_ino,
			.type = d->d_type,
			.name_len = (uint16_t)nlen,
		};
		struct bcp_entry e;

		pos += d->d_reclen;
		if (off + bcp_dirent_size(plus, nlen) > cap) {
			full = 1;
			break;
		}
		memset(&e, 0, sizeof(e));
		if (plus && !dot) {
			ret = store_lookup_fd(s, c->fd, d->d_name, &e);
			if (ret == -ENOENT)
				continue;	/* vanished meanwhile */
			if (ret < 0) {
				/* the host asks again from here */
				if (n)
					full = 1;
				else
					return ret;
				break;
			}
		} else if (plus) {
			e.attr.ino = d->d_ino;
			e.attr.mode = S_IFDIR;
		}
		if (bcp_dirent_put(buf, cap, &off, plus, &de, &e,
				   d->d_name) < 0) {
			if (plus && !dot)
				agent_store_forget(&s->base, e.handle, 1);
			full = 1;
			break;
		}
		n++;
	}
	if (n == 0 && !c->eof)
		return -EINVAL;	/* max_bytes too small for one entry */
	*eof = c->eof && !full;
	*len = off;
	*count = n;
	return 0;
}

static const struct agent_store_ops posix_ops = {
	.destroy = posix_destroy,
	.root = posix_root,
	.notify_start = posix_notify_start,
	.lookup = posix_lookup,
	.getattr = posix_getattr,
	.setattr = posix_setattr,
	.create_file = posix_create_file,
	.mkdir = posix_mkdir,
	.mknod = posix_mknod,
	.symlink = posix_symlink,
	.readlink = posix_readlink,
	.link = posix_link,
	.unlink = posix_unlink,
	.rename = posix_rename,
	.open = posix_open,
	.release = posix_release,
	.reopen = posix_reopen,
	.rebind = posix_rebind,
	.fid_entry = posix_fid_entry,
	.statfs = posix_statfs,
	.setxattr = posix_setxattr,
	.getxattr = posix_getxattr,
	.listxattr = posix_listxattr,
	.removexattr = posix_removexattr,
	.forget = posix_forget,
	.lseek = posix_lseek,
	.file_get = posix_file_get,
	.file_put = posix_file_put,
	.file_wrote = posix_file_wrote,
	.file_inline = posix_file_inline,
	.file_inline_set = posix_file_inline_set,
	.file_rw = NULL,		/* every file has its descriptor */
	.call_begin = posix_call_begin,
	.call_run = posix_call_run,
	.call_end = posix_call_end,
	.readdir_fill = posix_readdir_fill,
	.counts = posix_counts,
};

/* ---- the agent's posix store ---- */

static int posix_backend_sync(struct agent_backend *b)
{
	int fd, ret = 0;

	fd = openat(b->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	if (ret < 0)
		agent_err("syncfs of %s: %s", b->desc, strerror(-ret));
	return ret;
}

static int posix_backend_statfs(struct agent_backend *b,
				struct bcp_statfs_rep *out)
{
	struct statvfs sv;

	if (fstatvfs(b->root_fd, &sv) < 0)
		return -errno;
	memset(out, 0, sizeof(*out));
	out->bsize = sv.f_bsize;
	out->frsize = sv.f_frsize;
	out->blocks = sv.f_blocks;
	out->bfree = sv.f_bfree;
	out->bavail = sv.f_bavail;
	out->files = sv.f_files;
	out->ffree = sv.f_ffree;
	out->namemax = (uint32_t)sv.f_namemax;
	return 0;
}

static void posix_backend_close(struct agent_backend *b)
{
	close(b->root_fd);
	free((char *)b->desc);
	free(b);
}

static const struct agent_backend_ops posix_backend_ops = {
	.name = "posix",
	.session = posix_session,
	.sync = posix_backend_sync,
	.statfs = posix_backend_statfs,
	.close = posix_backend_close,
};

int agent_posix_open(const char *dir, struct agent_backend **out)
{
	struct agent_backend *b;
	int ret;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->ops = &posix_backend_ops;
	b->desc = strdup(dir);
	b->root_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (b->root_fd < 0 || !b->desc) {
		ret = b->desc ? -errno : -ENOMEM;
		agent_err("data root %s: %s", dir, strerror(-ret));
		if (b->root_fd >= 0)
			close(b->root_fd);
		free((char *)b->desc);
		free(b);
		return ret;
	}
	*out = b;
	return 0;
}
