/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inode.c - the inodes the kernel holds references to.
 *
 * Every reply that hands the kernel an entry (lookup, create, mkdir, mknod,
 * symlink, link, readdirplus) takes one agent reference on the handle and
 * one kernel lookup count; the record here counts them, remembers where
 * the inode was last seen (parent handle and name), the fid the agent
 * sealed for it (so that a restarted agent takes the handle back: REBIND)
 * and the mtime/size seen at the last open (for keep_cache).  FUSE
 * forgets go to the agent in batches through bcp_client_forget().  A
 * record is about 200 bytes with its name: a million inodes fit in 200 MB.
 *
 * Locking: bcfs_itable.lock protects the table and every record's mutable
 * fields.  It is a leaf lock: nothing else of the daemon is taken while it
 * is held.  The resume holds it across its REBIND calls, which are made
 * on the client library's reconnect thread straight on the new connection
 * and take none of the daemon's locks either.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bcfs_i.h"

#define BCFS_ITABLE_MIN	1024

static size_t bcfs_ihash(uint64_t handle, size_t nbuckets)
{
	handle ^= handle >> 33;
	handle *= 0xff51afd7ed558ccdull;
	handle ^= handle >> 33;
	return handle & (nbuckets - 1);
}

int bcfs_itable_init(struct bcfs_itable *t)
{
	int ret;

	t->buckets = calloc(BCFS_ITABLE_MIN, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	t->nbuckets = BCFS_ITABLE_MIN;
	t->count = 0;
	ret = -pthread_mutex_init(&t->lock, NULL);
	if (ret)
		goto out_free_buckets;
	return 0;

out_free_buckets:
	free(t->buckets);
	t->buckets = NULL;
	return ret;
}

void bcfs_itable_fini(struct bcfs_itable *t)
{
	struct bcfs_inode *in, *next;
	size_t i;

	if (!t->buckets)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		for (in = t->buckets[i]; in; in = next) {
			next = in->hnext;
			free(in->name);
			free(in);
		}
	}
	free(t->buckets);
	t->buckets = NULL;
	pthread_mutex_destroy(&t->lock);
}

/* Called with t->lock held. */
static struct bcfs_inode *bcfs_ifind(struct bcfs_itable *t, uint64_t handle)
{
	struct bcfs_inode *in;

	for (in = t->buckets[bcfs_ihash(handle, t->nbuckets)]; in;
	     in = in->hnext)
		if (in->handle == handle)
			return in;
	return NULL;
}

/* Called with t->lock held.  Failing to grow only costs speed. */
static void bcfs_igrow(struct bcfs_itable *t)
{
	struct bcfs_inode **nb, *in, *next;
	size_t n = t->nbuckets * 2, i, h;

	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		for (in = t->buckets[i]; in; in = next) {
			next = in->hnext;
			h = bcfs_ihash(in->handle, n);
			in->hnext = nb[h];
			nb[h] = in;
		}
	}
	free(t->buckets);
	t->buckets = nb;
	t->nbuckets = n;
}

int bcfs_inode_ref(uint64_t handle, uint64_t parent, const char *name,
		   size_t name_len, const uint8_t *fid)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in, *fresh = NULL;
	char *nm = NULL;
	size_t h;

	if (handle == bcfs_g.root)
		return 0;
	if (name) {
		nm = strndup(name, name_len);
		if (!nm)
			return -ENOMEM;
	}
	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind(t, handle);
	if (!in) {
		pthread_mutex_unlock(&t->lock);
		fresh = calloc(1, sizeof(*fresh));
		if (!fresh) {
			free(nm);
			return -ENOMEM;
		}
		fresh->handle = handle;
		pthread_mutex_lock(&t->lock);
		in = bcfs_ifind(t, handle);
		if (!in) {
			if (t->count >= t->nbuckets)
				bcfs_igrow(t);
			h = bcfs_ihash(handle, t->nbuckets);
			fresh->hnext = t->buckets[h];
			t->buckets[h] = fresh;
			t->count++;
			in = fresh;
			fresh = NULL;
		}
	}
	in->nlookup++;
	if (fid) {
		memcpy(in->fid, fid, BCP_FID_LEN);
		in->stale = 0;
	}
	if (nm) {
		free(in->name);
		in->name = nm;
		in->parent = parent;
	}
	pthread_mutex_unlock(&t->lock);
	free(fresh);
	return 0;
}

void bcfs_inode_forget(uint64_t handle, uint64_t n)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode **pp, *in;

	if (!n || handle == bcfs_g.root)
		return;
	pthread_mutex_lock(&t->lock);
	for (pp = &t->buckets[bcfs_ihash(handle, t->nbuckets)]; *pp;
	     pp = &(*pp)->hnext) {
		in = *pp;
		if (in->handle != handle)
			continue;
		if (in->nlookup <= n) {
			*pp = in->hnext;
			t->count--;
			pthread_mutex_unlock(&t->lock);
			free(in->name);
			free(in);
			bcfs_dirs_forget(handle);
			bcfs_dattr_drop(handle);
			goto out_forget;
		}
		in->nlookup -= n;
		break;
	}
	pthread_mutex_unlock(&t->lock);
out_forget:
	bcp_client_forget(bcfs_g.client, handle, n);
}

static int bcfs_iopen_same(const struct bcfs_inode *in,
			   const struct bcp_attr *a)
{
	return in->open_valid > 0 && in->open_mtime == a->mtime &&
	       in->open_mtime_nsec == a->mtime_nsec &&
	       in->open_size == a->size;
}

static void bcfs_iopen_set(struct bcfs_inode *in, const struct bcp_attr *a)
{
	in->open_mtime = a->mtime;
	in->open_mtime_nsec = a->mtime_nsec;
	in->open_size = a->size;
	in->open_valid = 1;
}

int bcfs_inode_open_check(uint64_t handle, const struct bcp_attr *a)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	int same = 0;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind(t, handle);
	if (in) {
		same = bcfs_iopen_same(in, a);
		bcfs_iopen_set(in, a);
	}
	pthread_mutex_unlock(&t->lock);
	return same;
}

void bcfs_inode_open_update(uint64_t handle, const struct bcp_attr *a)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind(t, handle);
	if (in)
		bcfs_iopen_set(in, a);
	pthread_mutex_unlock(&t->lock);
}

int bcfs_inode_open_first(uint64_t handle)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	int first = 0;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind(t, handle);
	if (in && !in->open_valid) {
		in->open_valid = -1;
		first = 1;
	}
	pthread_mutex_unlock(&t->lock);
	return first;
}

void bcfs_inode_data_news(uint64_t handle)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind(t, handle);
	if (in)
		in->data_gen++;
	pthread_mutex_unlock(&t->lock);
}

int bcfs_inode_size_behind(uint64_t handle, uint64_t *gen)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	int behind = 0;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind(t, handle);
	if (in) {
		*gen = in->data_gen;
		behind = in->data_gen != in->size_gen;
	}
	pthread_mutex_unlock(&t->lock);
	return behind;
}

void bcfs_inode_size_right(uint64_t handle, uint64_t gen)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind(t, handle);
	if (in && in->data_gen == gen)
		in->size_gen = gen;
	pthread_mutex_unlock(&t->lock);
}

/*
 * The root has no record (the kernel holds it without lookups): its xattr
 * answers live here, under the table's lock.
 */
static struct bcfs_inode bcfs_iroot;

/* The record of handle, the root's included (t->lock held). */
static struct bcfs_inode *bcfs_ifind_xattr(struct bcfs_itable *t,
					   uint64_t handle)
{
	struct bcfs_inode *in = bcfs_ifind(t, handle);

	return in ? in : handle == bcfs_g.root ? &bcfs_iroot : NULL;
}

int bcfs_inode_xattr_absent(uint64_t handle, int kind, uint32_t *gen)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	uint64_t now = bcfs_now_ns();
	int known = 0;

	*gen = 0;
	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind_xattr(t, handle);
	if (in) {
		known = in->absent_until[kind] > now;
		*gen = in->xattr_gen;
	}
	pthread_mutex_unlock(&t->lock);
	return known;
}

/*
 * Kinds [kind, kind + n) absent for attr_timeout; gen: only while the
 * inode's xattr generation is still *gen (NULL: whatever it is).
 */
static void bcfs_inode_xattr_absent_set(uint64_t handle, int kind, int n,
					const uint32_t *gen)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	uint64_t until;

	until = bcfs_now_ns() + (uint64_t)(bcfs_g.o.attr_timeout * 1e9);
	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind_xattr(t, handle);
	/* a setxattr or removexattr since the question: the answer is old */
	if (in && (!gen || in->xattr_gen == *gen))
		for (; n > 0; n--, kind++)
			in->absent_until[kind] = until;
	pthread_mutex_unlock(&t->lock);
}

void bcfs_inode_xattr_absent_known(uint64_t handle, int kind, uint32_t gen)
{
	bcfs_inode_xattr_absent_set(handle, kind, 1, &gen);
}

void bcfs_inode_xattr_none(uint64_t handle)
{
	bcfs_inode_xattr_absent_set(handle, 0, BCFS_XA_N, NULL);
}

void bcfs_inode_listed(uint64_t handle)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	uint64_t until;

	until = bcfs_now_ns() + (uint64_t)(bcfs_g.o.entry_timeout * 1e9);
	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind_xattr(t, handle);
	if (in)
		in->listed_until = until;
	pthread_mutex_unlock(&t->lock);
}

int bcfs_inode_listing_kept(uint64_t handle)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	uint64_t now = bcfs_now_ns();
	int kept = 0;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind_xattr(t, handle);
	if (in)
		kept = in->listed_until > now;
	pthread_mutex_unlock(&t->lock);
	return kept;
}

void bcfs_inode_xattr_forget(uint64_t handle)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;

	pthread_mutex_lock(&t->lock);
	in = bcfs_ifind_xattr(t, handle);
	if (in) {
		memset(in->absent_until, 0, sizeof(in->absent_until));
		in->xattr_gen++;
	}
	pthread_mutex_unlock(&t->lock);
}

/* Send the n rebinds in buf; mark what the agent no longer has. */
static int bcfs_rebind_send(struct bcp_client *c, struct bcp_rebind_one *buf,
			    uint32_t n, struct bcfs_inode **ins, uint64_t *ok)
{
	static uint8_t rbuf[BCP_FRAME_MAX];	/* the reconnect thread's */
	struct bcp_msg m, r;
	int32_t st;
	uint32_t i;
	int ret;

	bcfs_msg(&m, BCP_OP_REBIND);
	m.u.rebind_req.count = n;
	m.rebinds = buf;
	ret = bcp_client_call(c, &m, &r, rbuf, sizeof(rbuf));
	if (ret < 0)
		return ret;
	if (r.u.batch_rep.count != n)
		return -EIO;
	for (i = 0; i < n; i++) {
		st = bcp_msg_status(&r, i);
		if (st == 0) {
			(*ok)++;
			continue;
		}
		ins[i]->stale = 1;
		bcfs_dbg("inode %llu is gone from the restarted agent: %s",
			 (unsigned long long)ins[i]->handle, strerror(-st));
	}
	return 0;
}

int bcfs_inode_rebind_all(struct bcp_client *c, uint64_t *ok)
{
	static struct bcp_rebind_one buf[BCP_REBINDS_MAX];
	static struct bcfs_inode *ins[BCP_REBINDS_MAX];
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_inode *in;
	uint32_t n = 0;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nbuckets && !ret; i++) {
		for (in = t->buckets[i]; in && !ret; in = in->hnext) {
			if (in->stale)
				continue;
			buf[n].handle = in->handle;
			buf[n].nlookup = in->nlookup;
			memcpy(buf[n].fid, in->fid, BCP_FID_LEN);
			ins[n++] = in;
			if (n == BCP_REBINDS_MAX) {
				ret = bcfs_rebind_send(c, buf, n, ins, ok);
				n = 0;
			}
		}
	}
	if (n && !ret)
		ret = bcfs_rebind_send(c, buf, n, ins, ok);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int bcfs_inode_names(struct bcfs_iname **out, size_t *n)
{
	struct bcfs_itable *t = &bcfs_g.itable;
	struct bcfs_iname *v;
	struct bcfs_inode *in;
	size_t i, k = 0, cap;
	int ret = 0;

	/* the names are copied outside the lock: count, then copy */
	pthread_mutex_lock(&t->lock);
	cap = t->count;
	pthread_mutex_unlock(&t->lock);
	v = calloc(cap ? cap : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nbuckets; i++) {
		for (in = t->buckets[i]; in && k < cap; in = in->hnext) {
			v[k].handle = in->handle;
			v[k].parent = in->parent;
			if (in->name) {
				v[k].name = strdup(in->name);
				if (!v[k].name)
					ret = -ENOMEM;
			}
			k++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	*n = k;
	return ret;
}

void bcfs_inode_names_free(struct bcfs_iname *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		free(v[i].name);
	free(v);
}
