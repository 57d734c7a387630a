/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dattr.c - the attributes of directories (and files) this mount changed,
 * as the agent's replies gave them right after the change, so that the
 * GETATTR the kernel sends next is answered without the agent.
 *
 * The kernel drops a directory's attributes at every create, mkdir,
 * mknod, symlink, link, unlink, rmdir and rename in it, and asks for them
 * again at the next permission check there (default_permissions): a
 * create loop, an untar or an rm -r paid one agent round trip per name
 * for it.  The replies to those requests carry the directory's
 * attributes after the change (protocol version 3); they are kept here
 * and answer that GETATTR.
 *
 * A reply's attributes are kept only when they are the directory's
 * latest: no other change of it by this mount was in flight meanwhile
 * (two creates in one directory may be answered in either order), and no
 * notification between the request and its reply may have been about it
 * (another session may have changed it after; the agent tells of that:
 * bcfs_notify_touched_locked(), news of other objects does not count).
 * A notification about the directory, RESET, a reconnect or the kernel
 * forgetting it drops what is kept; it lasts attr_timeout at most.
 *
 * A change of the directory itself rather than of a name in it (SETATTR,
 * SETXATTR, REMOVEXATTR) is a change in flight like the others, whose
 * reply keeps nothing.  A RENAME also changes the ctime of what it moves,
 * which may be a directory kept here, and the daemon does not know which
 * one: every directory but the two whose attributes the reply brought is
 * dropped, and so is whatever a reply still in flight would bring (the
 * epoch).
 *
 * A SETATTR's reply is kept the same way, for a file as for a directory:
 * before a chown the kernel asks for the file's attributes again (to drop
 * set-id bits from a fresh mode), and tar, cp -p and rsync set times,
 * owner and mode on every file they write.  A file's attributes also
 * change with its data, its links and its reads (atime), which are no
 * change of it in the sense above, so what is kept of a file (anything
 * but a directory) also holds only while this mount ended no write,
 * truncate, fallocate or copy of any file (bcfs_peek_wgen()), no read,
 * link, unlink, or open that read or truncated one (bcfs_dattr_files())
 * since the SETATTR went out.
 *
 * A table of BCFS_DATTR_SLOTS entries, indexed by the handle's hash; a
 * directory whose slot another one holds with a change in flight is
 * simply not kept.  One lock, a leaf, taken inside bcfs_notify.lock or
 * alone.
 */
#include "config.h"

#include <string.h>
#include <sys/stat.h>

#include "bcfs_i.h"

#define BCFS_DATTR_SLOTS	256	/* a power of two */

struct bcfs_dattr {
	uint64_t handle;	/* 0: free */
	uint32_t sent;		/* the last change's ticket */
	uint32_t busy;		/* changes in flight */
	uint32_t epoch;		/* bcfs_dattr_epoch at the last change */
	uint64_t fgen;		/* bcfs_dattr_fgen_now() at the last change */
	int valid;
	uint64_t until_ns;	/* valid until */
	struct bcp_attr attr;
};

static pthread_mutex_t bcfs_dattr_lock = PTHREAD_MUTEX_INITIALIZER;
/* protected by bcfs_dattr_lock */
static struct bcfs_dattr bcfs_dattr_tab[BCFS_DATTR_SLOTS];
static uint32_t bcfs_dattr_tickets;
static uint32_t bcfs_dattr_epoch;	/* a RENAME ended */
/* reads, links, unlinks, reading or truncating opens ended (atomic) */
static uint64_t bcfs_dattr_fgen;

void bcfs_dattr_files(void)
{
	__atomic_add_fetch(&bcfs_dattr_fgen, 1, __ATOMIC_ACQ_REL);
}

/* changes no reply tells a file's kept attributes of: both only grow */
static uint64_t bcfs_dattr_fgen_now(void)
{
	return bcfs_peek_wgen() +
	       __atomic_load_n(&bcfs_dattr_fgen, __ATOMIC_ACQUIRE);
}

/* a's attributes stay right while nothing but a change of it moves them */
static int bcfs_dattr_is_dir(const struct bcp_attr *a)
{
	return S_ISDIR(a->mode & BCP_MODE_BITS);
}

static struct bcfs_dattr *bcfs_dattr_slot(uint64_t handle)
{
	uint64_t h = handle * 0x9e3779b97f4a7c15ull;

	return &bcfs_dattr_tab[(h >> 40) & (BCFS_DATTR_SLOTS - 1)];
}

uint32_t bcfs_dattr_begin(uint64_t dir)
{
	struct bcfs_dattr *d;
	uint32_t t = 0;

	if (bcfs_g.o.attr_timeout <= 0)
		return 0;
	pthread_mutex_lock(&bcfs_dattr_lock);
	d = bcfs_dattr_slot(dir);
	if (d->handle != dir) {
		if (d->busy)
			goto out_unlock;	/* another's, in use */
		memset(d, 0, sizeof(*d));
		d->handle = dir;
	}
	/* what is kept is old from now on */
	d->valid = 0;
	d->busy++;
	t = ++bcfs_dattr_tickets;
	if (!t)
		t = ++bcfs_dattr_tickets;
	d->sent = t;
	d->epoch = bcfs_dattr_epoch;
	d->fgen = bcfs_dattr_fgen_now();
out_unlock:
	pthread_mutex_unlock(&bcfs_dattr_lock);
	return t;
}

void bcfs_dattr_end(uint64_t dir, uint32_t ticket, const struct bcp_attr *a,
		    uint64_t ngen)
{
	struct bcfs_dattr *d;

	if (!ticket)
		return;
	/* no notification between the test and the record */
	bcfs_notify_lock();
	pthread_mutex_lock(&bcfs_dattr_lock);
	d = bcfs_dattr_slot(dir);
	if (d->handle != dir || !d->busy)
		goto out_unlock;	/* never: a busy slot is not taken */
	d->busy--;
	if (a && a->ino && d->sent == ticket && !d->busy &&
	    d->epoch == bcfs_dattr_epoch &&
	    (bcfs_dattr_is_dir(a) || d->fgen == bcfs_dattr_fgen_now()) &&
	    !bcfs_notify_touched_locked(ngen, dir, 0)) {
		d->attr = *a;
		d->valid = 1;
		d->until_ns = bcfs_now_ns() +
			      (uint64_t)(bcfs_g.o.attr_timeout * 1e9);
	} else {
		d->valid = 0;
	}
out_unlock:
	pthread_mutex_unlock(&bcfs_dattr_lock);
	bcfs_notify_unlock();
}

int bcfs_dattr_get(uint64_t dir, struct bcp_attr *out, double *timeout)
{
	struct bcfs_dattr *d;
	uint64_t now;
	int ret = 0;

	pthread_mutex_lock(&bcfs_dattr_lock);
	d = bcfs_dattr_slot(dir);
	if (d->handle == dir && d->valid && !d->busy) {
		now = bcfs_now_ns();
		if (now < d->until_ns &&
		    (bcfs_dattr_is_dir(&d->attr) ||
		     d->fgen == bcfs_dattr_fgen_now())) {
			*out = d->attr;
			*timeout = (double)(d->until_ns - now) / 1e9;
			ret = 1;
		} else {
			d->valid = 0;
		}
	}
	pthread_mutex_unlock(&bcfs_dattr_lock);
	return ret;
}

void bcfs_dattr_drop(uint64_t handle)
{
	struct bcfs_dattr *d;

	pthread_mutex_lock(&bcfs_dattr_lock);
	d = bcfs_dattr_slot(handle);
	if (d->handle == handle)
		d->valid = 0;
	pthread_mutex_unlock(&bcfs_dattr_lock);
}

void bcfs_dattr_moved(uint64_t dir, uint64_t dir2)
{
	struct bcfs_dattr *d;
	uint32_t was;

	pthread_mutex_lock(&bcfs_dattr_lock);
	was = bcfs_dattr_epoch++;
	for (d = bcfs_dattr_tab; d < bcfs_dattr_tab + BCFS_DATTR_SLOTS; d++) {
		/* the parents are not what moved */
		if ((d->handle == dir || d->handle == dir2) && d->epoch == was)
			d->epoch = bcfs_dattr_epoch;
		else
			d->valid = 0;
	}
	pthread_mutex_unlock(&bcfs_dattr_lock);
}

void bcfs_dattr_notified(uint32_t kind, uint64_t handle)
{
	unsigned int i;

	if (kind != BCP_NOTIFY_RESET) {
		bcfs_dattr_drop(handle);
		return;
	}
	pthread_mutex_lock(&bcfs_dattr_lock);
	for (i = 0; i < BCFS_DATTR_SLOTS; i++)
		bcfs_dattr_tab[i].valid = 0;
	pthread_mutex_unlock(&bcfs_dattr_lock);
}
