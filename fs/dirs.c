/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dirs.c - directories this mount knows every name of.
 *
 * A directory this mount made (MKDIR) starts empty, and while the session
 * holds it the agent tells the session of every name somebody else adds
 * or removes there (an ENTRY notification: another session, a process on
 * the agent's machine seen by its watcher, another client of its store).
 * Until such a notification or a reset comes, every name in it was made
 * through this mount, so a LOOKUP of any other name is answered ENOENT
 * here, without the agent: a new file costs one round trip fewer (the
 * kernel looks a name up before it creates it).  It is the promise a
 * negative entry cached by the kernel makes, for every name at once, kept
 * by the same notifications (doc/design.md, "Directories made here").
 *
 * The knowledge lasts as long as a negative entry would (entry_timeout
 * from the MKDIR): a change nobody told of (a process on the agent's
 * machine that no watcher sees, a store's missed change) stays hidden no
 * longer than it would from the kernel's own negative entries.
 *
 * Only 64-bit hashes of the names are kept.  A collision makes a missing
 * name look present, and its LOOKUP goes to the agent: never wrong, only
 * slower.  A directory whose names outgrow BCFS_DIR_NAMES_MAX, or all of
 * them beyond BCFS_DIRS_SLOTS, is no longer known in full and forgotten.
 *
 * Order.  A notification drops the directory (bcfs_dirs_noted(), on the
 * receiver thread, right after the notification generation moved) before
 * the notifier can tell the kernel, and a local ENOENT is given to the
 * kernel with bcfs_dirs.lock held: the kernel sees the answer before the
 * invalidation that follows the change, never after it (a negative entry
 * cached after its invalidation would hide the name for the whole
 * timeout).  A notification may come while a MKDIR is out, about the new
 * directory before its handle is known here: a directory is recorded only
 * when no notification since its MKDIR went out may have been about it
 * (bcfs_notify_touched_locked(): one naming it, a RESET, or one too old
 * to tell), with the notify lock held so that none comes in between.  A
 * stream of news about other objects (another host filling another
 * directory) then costs this mount nothing of what it knows.
 *
 * Locks: bcfs_dirs.lock, taken inside bcfs_notify.lock or alone; inside
 * it only bcfs_neg's lock (notify.c) and the write of a reply to the
 * kernel.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bcfs_i.h"

/* directories known in full at once */
#define BCFS_DIRS_MAX		1024
/* names one directory may hold and still be known in full */
#define BCFS_DIR_NAMES_MAX	(1u << 16)
/* hash slots of all directories together: 8 MiB */
#define BCFS_DIRS_SLOTS		(1u << 20)
#define BCFS_DIR_BUCKETS	256
#define BCFS_DIR_CAP_MIN	16

struct bcfs_dir {
	struct bcfs_dir *next;
	uint64_t handle;
	uint64_t until;		/* known in full until (monotonic ns) */
	uint32_t count;		/* names */
	uint32_t cap;		/* slots, a power of two */
	uint64_t *h;		/* 0: free */
};

static struct {
	pthread_mutex_t lock;
	/* protected by lock */
	struct bcfs_dir *b[BCFS_DIR_BUCKETS];
	unsigned int ndirs;
	size_t slots;		/* sum of cap */
} bcfs_dirs = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static unsigned int bcfs_dir_bucket(uint64_t handle)
{
	handle ^= handle >> 29;
	handle *= 0xbf58476d1ce4e5b9ull;
	handle ^= handle >> 32;
	return (unsigned int)(handle % BCFS_DIR_BUCKETS);
}

/* FNV-1a, then mixed; never 0 (a free slot). */
static uint64_t bcfs_name_hash(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 31;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 29;
	return h ? h : 1;
}

/* Called with the lock held. */
static struct bcfs_dir **bcfs_dir_find(uint64_t handle)
{
	struct bcfs_dir **pp;

	for (pp = &bcfs_dirs.b[bcfs_dir_bucket(handle)]; *pp;
	     pp = &(*pp)->next)
		if ((*pp)->handle == handle)
			return pp;
	return NULL;
}

/* Called with the lock held. */
static void bcfs_dir_unlink(struct bcfs_dir **pp)
{
	struct bcfs_dir *d = *pp;

	*pp = d->next;
	__atomic_store_n(&bcfs_dirs.ndirs, bcfs_dirs.ndirs - 1,
			 __ATOMIC_RELAXED);
	bcfs_dirs.slots -= d->cap;
	free(d->h);
	free(d);
}

static int bcfs_dir_has(const struct bcfs_dir *d, uint64_t h)
{
	uint32_t i = (uint32_t)h & (d->cap - 1);

	while (d->h[i]) {
		if (d->h[i] == h)
			return 1;
		i = (i + 1) & (d->cap - 1);
	}
	return 0;
}

static void bcfs_dir_put(uint64_t *v, uint32_t cap, uint64_t h)
{
	uint32_t i = (uint32_t)h & (cap - 1);

	while (v[i]) {
		if (v[i] == h)
			return;
		i = (i + 1) & (cap - 1);
	}
	v[i] = h;
}

/* Called with the lock held: 0, or -ENOSPC when d must be forgotten. */
static int bcfs_dir_add(struct bcfs_dir *d, uint64_t h)
{
	uint64_t *v;
	uint32_t cap, i;

	if (bcfs_dir_has(d, h))
		return 0;
	if ((d->count + 1) * 2 > d->cap) {
		cap = d->cap * 2;
		if (d->count + 1 > BCFS_DIR_NAMES_MAX ||
		    bcfs_dirs.slots + cap - d->cap > BCFS_DIRS_SLOTS)
			return -ENOSPC;
		v = calloc(cap, sizeof(*v));
		if (!v)
			return -ENOSPC;
		for (i = 0; i < d->cap; i++)
			if (d->h[i])
				bcfs_dir_put(v, cap, d->h[i]);
		free(d->h);
		d->h = v;
		bcfs_dirs.slots += cap - d->cap;
		d->cap = cap;
	}
	bcfs_dir_put(d->h, d->cap, h);
	d->count++;
	return 0;
}

void bcfs_dirs_made(uint64_t handle, uint64_t ngen)
{
	struct bcfs_dir *d;
	unsigned int b;

	if (bcfs_g.neg_timeout <= 0)
		return;
	d = calloc(1, sizeof(*d));
	if (!d)
		return;
	d->h = calloc(BCFS_DIR_CAP_MIN, sizeof(*d->h));
	if (!d->h) {
		free(d);
		return;
	}
	d->handle = handle;
	d->until = bcfs_now_ns() + (uint64_t)(bcfs_g.neg_timeout * 1e9);
	d->cap = BCFS_DIR_CAP_MIN;
	/* no notification between the test and the record */
	bcfs_notify_lock();
	pthread_mutex_lock(&bcfs_dirs.lock);
	if (bcfs_notify_touched_locked(ngen, handle, 0) ||
	    bcfs_dir_find(handle) || bcfs_dirs.ndirs >= BCFS_DIRS_MAX ||
	    bcfs_dirs.slots + d->cap > BCFS_DIRS_SLOTS) {
		pthread_mutex_unlock(&bcfs_dirs.lock);
		bcfs_notify_unlock();
		free(d->h);
		free(d);
		return;
	}
	b = bcfs_dir_bucket(handle);
	d->next = bcfs_dirs.b[b];
	bcfs_dirs.b[b] = d;
	__atomic_store_n(&bcfs_dirs.ndirs, bcfs_dirs.ndirs + 1,
			 __ATOMIC_RELAXED);
	bcfs_dirs.slots += d->cap;
	pthread_mutex_unlock(&bcfs_dirs.lock);
	bcfs_notify_unlock();
}

void bcfs_dirs_add(uint64_t parent, const char *name, size_t len)
{
	struct bcfs_dir **pp;

	if (!__atomic_load_n(&bcfs_dirs.ndirs, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&bcfs_dirs.lock);
	pp = bcfs_dir_find(parent);
	if (pp && bcfs_dir_add(*pp, bcfs_name_hash(name, len)) < 0)
		bcfs_dir_unlink(pp);
	pthread_mutex_unlock(&bcfs_dirs.lock);
}

int bcfs_dirs_lookup(fuse_req_t req, uint64_t parent, const char *name,
		     size_t len)
{
	struct fuse_entry_param e;
	struct bcfs_dir **pp;

	if (!__atomic_load_n(&bcfs_dirs.ndirs, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&bcfs_dirs.lock);
	pp = bcfs_dir_find(parent);
	if (pp && bcfs_now_ns() >= (*pp)->until) {
		bcfs_dir_unlink(pp);
		pp = NULL;
	}
	if (!pp || bcfs_dir_has(*pp, bcfs_name_hash(name, len))) {
		pthread_mutex_unlock(&bcfs_dirs.lock);
		return 0;
	}
	memset(&e, 0, sizeof(e));
	/* 0 when every remembered negative entry is still live */
	e.entry_timeout = bcfs_notify_negative_for(bcfs_nodeid(parent), name,
						   bcfs_g.neg_timeout);
	fuse_reply_entry(req, &e);
	pthread_mutex_unlock(&bcfs_dirs.lock);
	return 1;
}

/* Called with the lock held. */
static void bcfs_dirs_drop(uint32_t kind, uint64_t handle)
{
	struct bcfs_dir **pp;
	unsigned int i;

	if (kind == BCP_NOTIFY_RESET) {
		for (i = 0; i < BCFS_DIR_BUCKETS; i++)
			while (bcfs_dirs.b[i])
				bcfs_dir_unlink(&bcfs_dirs.b[i]);
	} else {
		pp = bcfs_dir_find(handle);
		if (pp)
			bcfs_dir_unlink(pp);
	}
}

void bcfs_dirs_noted(uint32_t kind, uint64_t handle)
{
	if (!__atomic_load_n(&bcfs_dirs.ndirs, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&bcfs_dirs.lock);
	bcfs_dirs_drop(kind, handle);
	pthread_mutex_unlock(&bcfs_dirs.lock);
}

void bcfs_dirs_forget(uint64_t handle)
{
	bcfs_dirs_noted(BCP_NOTIFY_INODE, handle);
}

void bcfs_dirs_fini(void)
{
	bcfs_dirs_noted(BCP_NOTIFY_RESET, 0);
}
