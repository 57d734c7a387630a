/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * resume.c - what the daemon gives a restarted agent so that the mount
 * goes on: the table of open files and directories (fh -> handle, open
 * flags, directory or not, from OPEN/CREATE/OPENDIR to RELEASE/
 * RELEASEDIR), and the client library's resume callback, which REBINDs
 * every inode of inode.c with its lookup count and REOPENs every fh under
 * its old value.  An object the agent no longer has (ESTALE) stays gone:
 * the agent answers ESTALE for it from then on, and nothing else stops.
 *
 * Locking: bcfs_open_lock protects the open table.  It is a leaf lock; the
 * resume holds it across its REOPEN calls, which run on the client
 * library's reconnect thread straight on the new connection.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "bcfs_i.h"

#define BCFS_OPEN_BUCKETS	4096	/* a power of two */

struct bcfs_open {
	struct bcfs_open *next;
	uint64_t fh;
	uint64_t handle;
	uint32_t flags;
	int dir;
	int stale;		/* the restarted agent could not reopen it */
};

static pthread_mutex_t bcfs_open_lock = PTHREAD_MUTEX_INITIALIZER;
/* bcfs_open_lock: */
static struct bcfs_open *bcfs_open_tab[BCFS_OPEN_BUCKETS];
static size_t bcfs_open_count;

static size_t bcfs_open_hash(uint64_t fh)
{
	fh ^= fh >> 29;
	fh *= 0xbf58476d1ce4e5b9ull;
	fh ^= fh >> 32;
	return fh & (BCFS_OPEN_BUCKETS - 1);
}

int bcfs_open_add(uint64_t fh, uint64_t handle, uint32_t flags, int dir)
{
	struct bcfs_open *o;
	size_t h = bcfs_open_hash(fh);

	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->fh = fh;
	o->handle = handle;
	o->flags = flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC);
	o->dir = dir;
	pthread_mutex_lock(&bcfs_open_lock);
	o->next = bcfs_open_tab[h];
	bcfs_open_tab[h] = o;
	bcfs_open_count++;
	pthread_mutex_unlock(&bcfs_open_lock);
	return 0;
}

void bcfs_open_del(uint64_t fh)
{
	struct bcfs_open **pp, *o = NULL;

	pthread_mutex_lock(&bcfs_open_lock);
	for (pp = &bcfs_open_tab[bcfs_open_hash(fh)]; *pp;
	     pp = &(*pp)->next) {
		if ((*pp)->fh == fh) {
			o = *pp;
			*pp = o->next;
			bcfs_open_count--;
			break;
		}
	}
	pthread_mutex_unlock(&bcfs_open_lock);
	free(o);
}

void bcfs_open_fini(void)
{
	struct bcfs_open *o, *next;
	size_t i;

	for (i = 0; i < BCFS_OPEN_BUCKETS; i++) {
		for (o = bcfs_open_tab[i]; o; o = next) {
			next = o->next;
			free(o);
		}
		bcfs_open_tab[i] = NULL;
	}
	bcfs_open_count = 0;
}

/* REOPEN every open fh.  Adds those reopened to *ok.  0 or -errno. */
static int bcfs_reopen_all(struct bcp_client *c, uint64_t *ok)
{
	static uint8_t rbuf[4096];	/* the reconnect thread's */
	struct bcp_msg m, r;
	struct bcfs_open *o;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&bcfs_open_lock);
	for (i = 0; i < BCFS_OPEN_BUCKETS && ret >= 0; i++) {
		for (o = bcfs_open_tab[i]; o && ret >= 0; o = o->next) {
			if (o->stale)
				continue;
			bcfs_msg(&m, BCP_OP_REOPEN);
			m.u.reopen_req.handle = o->handle;
			m.u.reopen_req.fh = o->fh;
			m.u.reopen_req.flags = o->flags;
			m.u.reopen_req.dir = o->dir ? 1 : 0;
			ret = bcp_client_call(c, &m, &r, rbuf, sizeof(rbuf));
			if (ret == -ENOTCONN || ret == -ETIMEDOUT ||
			    ret == -EIO)
				break;
			if (ret < 0) {
				/* this one is gone; the others go on */
				bcfs_dbg("fh %llu of inode %llu not reopened: %s",
					 (unsigned long long)o->fh,
					 (unsigned long long)o->handle,
					 strerror(-ret));
				o->stale = 1;
				ret = 0;
				continue;
			}
			(*ok)++;
		}
	}
	pthread_mutex_unlock(&bcfs_open_lock);
	return ret < 0 ? ret : 0;
}

int bcfs_resume(struct bcp_client *c, void *arg)
{
	static int said;
	uint64_t handles = 0, files = 0;
	int ret;

	(void)arg;
	bcfs_rda_resumed();
	if (!(bcp_client_hello(c)->features & BCP_FEAT_RESUME)) {
		/* the root is always the same handle; the rest is lost */
		if (!said++)
			bcfs_warn("agent at %s cannot resume handles or open "
				  "files: only paths looked up again work",
				  bcfs_g.o.agent);
		return 0;
	}
	ret = bcfs_inode_rebind_all(c, &handles);
	if (ret < 0)
		return ret;
	ret = bcfs_reopen_all(c, &files);
	if (ret < 0)
		return ret;
	bcp_client_resumed(c, handles, files);
	return 0;
}
