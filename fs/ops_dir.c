/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops_dir.c - the namespace: lookup and forget, creating and removing
 * names (mknod, mkdir, symlink, link, unlink, rmdir, rename) and reading
 * directories (opendir, readdir, readdirplus, releasedir, fsyncdir).
 *
 * Each entry the agent returns carries one reference on its handle; the
 * kernel's lookup count mirrors it (inode.c).  readdirplus entries that do
 * not fit into the kernel's buffer, or that the kernel never received, are
 * given back to the agent at once.
 *
 * Read-ahead: once the kernel took a part of a listing that did not end
 * it, the next part is asked for at once (bcfs_rda_send), so that the
 * agent reads it while the kernel takes in the last one and its caller
 * looks at the entries; the kernel's next READDIR(PLUS) from that cookie
 * is answered from it.  A part read ahead serves only while what it says
 * is as new as what the agent would say then: no change this mount asked
 * for began or ended since it went out (bcfs_change_gen(); a change
 * other sessions made comes as a notification, which the entries' cache
 * timeouts heed as for any reply), it has attributes if they are asked
 * for (a part with them answers a READDIR without, and gives their
 * references back), and the connection it came on is the one up.
 * Otherwise its entries' references go back to the agent and the
 * kernel's request goes out as usual.  At most one part per open
 * directory is ahead, in a fixed set of BCFS_RDA_SLOTS (each with a reply
 * buffer, allocated at first use).
 * Locks: bcfs_rda_lock is a leaf; no FORGET is queued under it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcfs_i.h"

static pthread_key_t bcfs_dbuf_key;
static pthread_once_t bcfs_dbuf_once = PTHREAD_ONCE_INIT;

static void bcfs_dbuf_key_init(void)
{
	if (pthread_key_create(&bcfs_dbuf_key, free))
		abort();
}

/* A per-thread buffer for the kernel's side of a readdir reply. */
static char *bcfs_dbuf(void)
{
	char *b;

	pthread_once(&bcfs_dbuf_once, bcfs_dbuf_key_init);
	b = pthread_getspecific(bcfs_dbuf_key);
	if (b)
		return b;
	b = malloc(2 * BCP_READDIR_MAX);
	if (b && pthread_setspecific(bcfs_dbuf_key, b)) {
		free(b);
		b = NULL;
	}
	return b;
}

/* Send m, whose reply is an entry for name in parent, and answer req. */
static void bcfs_call_entry(fuse_req_t req, struct bcp_msg *m,
			    uint64_t parent, const char *name)
{
	bcfs_call_reply(req, m, BCFS_REPLY_ENTRY, parent, name);
}

void bcfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct bcp_msg m;
	int len;

	bcfs_readahead_raise();
	len = bcfs_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	if (bcfs_dirs_lookup(req, bcfs_handle(parent), name, (size_t)len))
		return;
	bcfs_msg(&m, BCP_OP_LOOKUP);
	m.u.named_req.parent = bcfs_handle(parent);
	m.u.named_req.name_len = len;
	m.name = name;
	bcfs_call_reply(req, &m, BCFS_REPLY_LOOKUP, m.u.named_req.parent,
			name);
}

void bcfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	bcfs_inode_forget(bcfs_handle(ino), nlookup);
	fuse_reply_none(req);
}

void bcfs_op_forget_multi(fuse_req_t req, size_t count,
			  struct fuse_forget_data *forgets)
{
	size_t i;

	for (i = 0; i < count; i++)
		bcfs_inode_forget(bcfs_handle(forgets[i].ino),
				  forgets[i].nlookup);
	fuse_reply_none(req);
}

void bcfs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, dev_t rdev)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct bcp_mknod_req *q;
	struct bcp_msg m;
	int len;

	len = bcfs_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	bcfs_msg(&m, BCP_OP_MKNOD);
	q = &m.u.mknod_req;
	q->parent = bcfs_handle(parent);
	q->rdev = rdev;
	q->mode = mode;
	q->umask = ctx->umask;
	q->uid = ctx->uid;
	q->gid = ctx->gid;
	q->name_len = len;
	m.name = name;
	bcfs_dirs_add(q->parent, name, (size_t)len);
	bcfs_call_entry(req, &m, q->parent, name);
}

void bcfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct bcp_mkdir_req *q;
	struct bcp_msg m;
	int len;

	len = bcfs_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	bcfs_msg(&m, BCP_OP_MKDIR);
	q = &m.u.mkdir_req;
	q->parent = bcfs_handle(parent);
	q->mode = mode;
	q->umask = ctx->umask;
	q->uid = ctx->uid;
	q->gid = ctx->gid;
	q->name_len = len;
	m.name = name;
	bcfs_dirs_add(q->parent, name, (size_t)len);
	bcfs_call_reply(req, &m, BCFS_REPLY_MKDIR, q->parent, name);
}

void bcfs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		     const char *name)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct bcp_symlink_req *q;
	struct bcp_msg m;
	size_t tlen = strlen(link);
	int len;

	len = bcfs_name_len(name);
	if (len < 0 || tlen > BCP_SYMLINK_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	bcfs_msg(&m, BCP_OP_SYMLINK);
	q = &m.u.symlink_req;
	q->parent = bcfs_handle(parent);
	q->uid = ctx->uid;
	q->gid = ctx->gid;
	q->name_len = len;
	q->target_len = tlen;
	m.name = name;
	m.name2 = link;
	bcfs_dirs_add(q->parent, name, (size_t)len);
	bcfs_call_entry(req, &m, q->parent, name);
}

void bcfs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		  const char *newname)
{
	struct bcp_msg m;
	int len;

	len = bcfs_name_len(newname);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	bcfs_msg(&m, BCP_OP_LINK);
	m.u.link_req.handle = bcfs_handle(ino);
	m.u.link_req.newparent = bcfs_handle(newparent);
	m.u.link_req.name_len = len;
	m.name = newname;
	bcfs_dirs_add(m.u.link_req.newparent, newname, (size_t)len);
	bcfs_call_reply(req, &m, BCFS_REPLY_LINK, m.u.link_req.newparent,
			newname);
}

static void bcfs_remove(fuse_req_t req, uint16_t op, fuse_ino_t parent,
			const char *name)
{
	struct bcp_msg m;
	int len;

	len = bcfs_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	/* after the RELEASEs already taken: the space is free at once */
	bcfs_releases_wait();
	bcfs_msg(&m, op);
	m.u.named_req.parent = bcfs_handle(parent);
	m.u.named_req.name_len = len;
	m.name = name;
	bcfs_call_reply(req, &m, BCFS_REPLY_REMOVE, m.u.named_req.parent,
			NULL);
}

void bcfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	bcfs_remove(req, BCP_OP_UNLINK, parent, name);
}

void bcfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	bcfs_remove(req, BCP_OP_RMDIR, parent, name);
}

void bcfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname,
		    unsigned int flags)
{
	struct bcp_rename_req *q;
	struct bcp_msg m;
	int len, newlen;

	if (flags & ~(BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	len = bcfs_name_len(name);
	newlen = bcfs_name_len(newname);
	if (len < 0 || newlen < 0) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	bcfs_msg(&m, BCP_OP_RENAME);
	q = &m.u.rename_req;
	q->parent = bcfs_handle(parent);
	q->newparent = bcfs_handle(newparent);
	q->flags = flags;
	q->name_len = len;
	q->newname_len = newlen;
	m.name = name;
	m.name2 = newname;
	/* a file renamed over is freed at once (bcfs_releases_wait()) */
	if (!(flags & (BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE)))
		bcfs_releases_wait();
	/* the old name may stay known: that only costs a lookup */
	bcfs_dirs_add(q->newparent, newname, (size_t)newlen);
	if (flags & BCP_RENAME_EXCHANGE)
		bcfs_dirs_add(q->parent, name, (size_t)len);
	bcfs_call_reply(req, &m, BCFS_REPLY_RENAME, 0, NULL);
}

/* Whether the kernel may keep directory listings (bcfs_op_opendir()). */
static int bcfs_listings_kept(void)
{
	return (bcfs_g.features & BCP_FEAT_NOTIFY) &&
	       bcfs_g.o.attr_timeout > 0 && bcfs_g.o.entry_timeout > 0;
}

void bcfs_op_opendir(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	struct bcp_msg m, r;
	int ret;

	bcfs_msg(&m, BCP_OP_OPENDIR);
	m.u.open_req.handle = bcfs_handle(ino);
	m.u.open_req.flags = fi->flags;
	ret = bcfs_call(&m, &r);
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	fi->fh = r.u.open_rep.fh;
	bcfs_open_add(fi->fh, bcfs_handle(ino), fi->flags, 1);
	/*
	 * The kernel keeps the listing (FOPEN_CACHE_DIR) while the agent
	 * tells of changes: it starts over after its own changes to the
	 * directory, when the notifier drops the directory's pages (a name
	 * changed elsewhere), and when the directory's mtime is not the one
	 * it had at the listing.  It is kept (FOPEN_KEEP_CACHE) only while
	 * younger than the names it brought: an older one would make the
	 * kernel look up every name again, where a new listing brings them.
	 */
	if (bcfs_listings_kept()) {
		fi->cache_readdir = 1;
		fi->keep_cache = bcfs_inode_listing_kept(bcfs_handle(ino));
	}
	if (fuse_reply_open(req, fi)) {
		bcfs_open_del(fi->fh);
		/* the kernel is gone: it will never release this fh */
		bcfs_msg(&m, BCP_OP_RELEASEDIR);
		m.u.node_req.handle = bcfs_handle(ino);
		m.u.node_req.fh = r.u.open_rep.fh;
		bcfs_call(&m, &r);
	}
}

static int bcfs_is_dot(const struct bcp_dirent_view *v)
{
	return (v->d.name_len == 1 && v->name[0] == '.') ||
	       (v->d.name_len == 2 && v->name[0] == '.' && v->name[1] == '.');
}

/*
 * Give back the agent references of the plus entries of r from index
 * "from" on (those the kernel did not take).
 */
static void bcfs_readdir_unref(const struct bcp_msg *r, uint32_t from)
{
	struct bcp_dirent_iter it = { 0 };
	struct bcp_dirent_view v;
	uint32_t i = 0;

	while (bcp_dirent_next(r, 1, &it, &v) == 1) {
		if (i++ < from || bcfs_is_dot(&v) || !v.entry.handle)
			continue;
		bcp_client_forget(bcfs_g.client, v.entry.handle, 1);
	}
}

/* A READDIR of the listing of fh (of directory handle) from cookie on. */
static void bcfs_readdir_msg(struct bcp_msg *m, uint64_t handle, uint64_t fh,
			     uint64_t cookie, uint32_t max_bytes, int plus)
{
	bcfs_msg(m, BCP_OP_READDIR);
	m->u.readdir_req.handle = handle;
	m->u.readdir_req.fh = fh;
	m->u.readdir_req.cookie = cookie;
	m->u.readdir_req.max_bytes = max_bytes;
	m->u.readdir_req.flags = plus ? BCP_READDIR_PLUS : 0;
}

/* ---- read-ahead ------------------------------------------------------ */

#define BCFS_RDA_SLOTS	8

enum bcfs_rda_state {
	BCFS_RDA_FREE,
	BCFS_RDA_SENT,		/* asked for; the reply fills call */
	BCFS_RDA_DONE,		/* answered (result), to be taken */
	BCFS_RDA_GONE,		/* nobody wants it: its reply frees it */
	BCFS_RDA_TAKEN,		/* a FUSE thread answers from it or drops it */
};

struct bcfs_rda {
	enum bcfs_rda_state state;
	int result;
	int plus;
	uint64_t fh;
	uint64_t cookie;	/* where it starts */
	uint64_t ngen;		/* bcfs_notify_gen() when it went out */
	uint64_t xepoch;	/* bcfs_xattr_epoch() then */
	uint64_t cgen;		/* bcfs_change_gen() then */
	uint64_t seq;		/* moves at each send */
	struct bcp_call call;
	struct bcfs_mtimer mt;
	void *buf;		/* BCP_FRAME_MAX bytes */
};

static pthread_mutex_t bcfs_rda_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bcfs_rda_cond = PTHREAD_COND_INITIALIZER;
/* protected by bcfs_rda_lock */
static struct bcfs_rda bcfs_rdas[BCFS_RDA_SLOTS];

/* The slot ahead for fh (sent or answered), or NULL.  Under the lock. */
static struct bcfs_rda *bcfs_rda_find_locked(uint64_t fh)
{
	unsigned int i;

	for (i = 0; i < BCFS_RDA_SLOTS; i++) {
		struct bcfs_rda *p = &bcfs_rdas[i];

		if ((p->state == BCFS_RDA_SENT || p->state == BCFS_RDA_DONE) &&
		    p->fh == fh)
			return p;
	}
	return NULL;
}

static void bcfs_rda_free(struct bcfs_rda *p)
{
	pthread_mutex_lock(&bcfs_rda_lock);
	p->state = BCFS_RDA_FREE;
	pthread_mutex_unlock(&bcfs_rda_lock);
}

/* A taken slot nobody answers from: its references go back. */
static void bcfs_rda_drop(struct bcfs_rda *p)
{
	if (p->result == 0 && p->plus)
		bcfs_readdir_unref(&p->call.rep, 0);
	bcfs_rda_free(p);
}

/* On the receiver thread. */
static void bcfs_rda_done(struct bcp_call *call, int result)
{
	struct bcfs_rda *p = call->priv;
	int gone;

	bcfs_metrics_end(&p->mt, result);
	pthread_mutex_lock(&bcfs_rda_lock);
	p->result = result;
	gone = p->state == BCFS_RDA_GONE;
	p->state = gone ? BCFS_RDA_TAKEN : BCFS_RDA_DONE;
	pthread_cond_broadcast(&bcfs_rda_cond);
	pthread_mutex_unlock(&bcfs_rda_lock);
	if (gone)
		bcfs_rda_drop(p);	/* FORGET never waits on this thread */
}

/* Ask for the part of the listing of fh from cookie on. */
static void bcfs_rda_send(uint64_t handle, uint64_t fh, uint64_t cookie,
			  uint32_t max_bytes, int plus)
{
	struct bcfs_rda *p = NULL;
	struct bcp_msg m;
	unsigned int i;
	int ret;

	pthread_mutex_lock(&bcfs_rda_lock);
	for (i = 0; i < BCFS_RDA_SLOTS && !p; i++) {
		if (bcfs_rdas[i].state != BCFS_RDA_FREE)
			continue;
		if (!bcfs_rdas[i].buf)
			bcfs_rdas[i].buf = malloc(BCP_FRAME_MAX);
		if (bcfs_rdas[i].buf)
			p = &bcfs_rdas[i];
	}
	if (!p) {
		pthread_mutex_unlock(&bcfs_rda_lock);
		return;
	}
	p->state = BCFS_RDA_SENT;
	p->seq++;
	p->fh = fh;
	p->cookie = cookie;
	p->plus = plus;
	p->result = 0;
	/* before it goes out: what ends after counts against it */
	p->ngen = bcfs_notify_gen();
	p->xepoch = bcfs_xattr_epoch();
	p->cgen = bcfs_change_gen();
	pthread_mutex_unlock(&bcfs_rda_lock);

	bcfs_readdir_msg(&m, handle, fh, cookie, max_bytes, plus);
	memset(&p->call.rep, 0, sizeof(p->call.rep));
	p->call.rbuf = p->buf;
	p->call.rcap = BCP_FRAME_MAX;
	p->call.done = bcfs_rda_done;
	p->call.priv = p;
	bcfs_metrics_begin(&p->mt, BCP_OP_READDIR);
	ret = bcp_client_call_async(bcfs_g.client, &m, &p->call);
	if (ret < 0)
		bcfs_rda_done(&p->call, ret);
}

/*
 * The part read ahead for fh that answers a READDIR(PLUS) from off, taken
 * (give it back with bcfs_rda_free), or NULL; one that does not answer
 * it is given up.
 */
static struct bcfs_rda *bcfs_rda_take(uint64_t fh, uint64_t off, int plus)
{
	struct bcfs_rda *p;
	uint64_t seq;
	int fits;

	pthread_mutex_lock(&bcfs_rda_lock);
	p = bcfs_rda_find_locked(fh);
	if (!p) {
		pthread_mutex_unlock(&bcfs_rda_lock);
		return NULL;
	}
	seq = p->seq;
	/* a part with attributes answers a READDIR without them too */
	fits = p->cookie == (uint64_t)off && (p->plus || !plus);
	/*
	 * Wait for it even when it does not answer: the agent reads a
	 * directory from the position of its one descriptor, and two
	 * READDIRs of one fh at once would each move it under the other.
	 */
	while (p->seq == seq && p->state == BCFS_RDA_SENT)
		pthread_cond_wait(&bcfs_rda_cond, &bcfs_rda_lock);
	if (p->seq != seq || p->state != BCFS_RDA_DONE) {
		/* dropped by a reconnect meanwhile (and maybe sent again) */
		pthread_mutex_unlock(&bcfs_rda_lock);
		return NULL;
	}
	p->state = BCFS_RDA_TAKEN;
	pthread_mutex_unlock(&bcfs_rda_lock);
	if (fits && p->result == 0 && p->cgen == bcfs_change_gen())
		return p;
	bcfs_rda_drop(p);
	return NULL;
}

/* RELEASEDIR: what was read ahead for fh goes back. */
static void bcfs_rda_release(uint64_t fh)
{
	struct bcfs_rda *p;

	pthread_mutex_lock(&bcfs_rda_lock);
	p = bcfs_rda_find_locked(fh);
	if (p && p->state == BCFS_RDA_SENT) {
		p->state = BCFS_RDA_GONE;
		p = NULL;
	} else if (p) {
		p->state = BCFS_RDA_TAKEN;
	}
	pthread_mutex_unlock(&bcfs_rda_lock);
	if (p)
		bcfs_rda_drop(p);
}

/*
 * On the reconnect thread, once the receiver of the lost connection is
 * gone: the references of parts answered on it went with it.  Parts still
 * asked for are answered on the new connection, or fail.
 */
void bcfs_rda_resumed(void)
{
	unsigned int i;

	pthread_mutex_lock(&bcfs_rda_lock);
	for (i = 0; i < BCFS_RDA_SLOTS; i++)
		if (bcfs_rdas[i].state == BCFS_RDA_DONE)
			bcfs_rdas[i].state = BCFS_RDA_FREE;
	pthread_mutex_unlock(&bcfs_rda_lock);
}

static void bcfs_readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
				off_t off, struct fuse_file_info *fi,
				int plus)
{
	struct bcp_dirent_iter it = { 0 };
	struct bcp_dirent_view v;
	struct fuse_entry_param e;
	char name[BCP_NAME_MAX + 1];
	struct bcp_msg m, r;
	uint64_t parent = bcfs_handle(ino);
	uint32_t max_bytes, n = 0;
	uint64_t ngen, xepoch, next = 0;
	size_t pos = 0, ent;
	int ret, full = 0, bad, rplus = plus;
	struct bcfs_rda *ahead;
	char *buf;

	buf = bcfs_dbuf();
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (size > 2 * BCP_READDIR_MAX)
		size = 2 * BCP_READDIR_MAX;
	/* ask for about what fits: plus entries grow in the kernel format */
	max_bytes = plus ? size * 3 / 4 : size;
	if (max_bytes > BCP_READDIR_MAX)
		max_bytes = BCP_READDIR_MAX;
	ahead = bcfs_rda_take(fi->fh, (uint64_t)off, plus);
	if (ahead) {
		r = ahead->call.rep;
		rplus = ahead->plus;
		ngen = ahead->ngen;
		xepoch = ahead->xepoch;
	} else {
		bcfs_readdir_msg(&m, parent, fi->fh, (uint64_t)off, max_bytes,
				 plus);
		ngen = bcfs_notify_gen();
		xepoch = bcfs_xattr_epoch();
		ret = bcfs_call(&m, &r);
		if (ret) {
			bcfs_reply_status(req, ret);
			return;
		}
	}
	if (off == 0 && bcfs_listings_kept())
		bcfs_inode_listed(parent);
	while (bcp_dirent_next(&r, rplus, &it, &v) == 1) {
		memcpy(name, v.name, v.d.name_len);
		name[v.d.name_len] = '\0';
		if (!plus) {
			struct stat st = {
				.st_ino = v.d.ino,
				.st_mode = (v.d.type & 017) << 12,
			};

			ent = fuse_add_direntry(req, buf + pos, size - pos,
						name, &st, v.d.cookie);
		} else if (bcfs_is_dot(&v) || !v.entry.handle) {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = v.d.ino;
			e.attr.st_mode = (v.d.type & 017) << 12;
			ent = fuse_add_direntry_plus(req, buf + pos,
						     size - pos, name, &e,
						     v.d.cookie);
		} else {
			bcfs_fill_entry(&v.entry, parent, &e, ngen);
			ent = fuse_add_direntry_plus(req, buf + pos,
						     size - pos, name, &e,
						     v.d.cookie);
			if (ent <= size - pos) {
				if (bcfs_inode_ref(v.entry.handle, parent,
						   name, v.d.name_len,
						   v.entry.fid))
					ent = size + 1; /* no record: stop */
				else
					bcfs_xattr_hint(&v.entry, &e, xepoch);
			}
		}
		if (ent > size - pos) {
			full = 1;
			break;
		}
		pos += ent;
		n++;
		next = v.d.cookie;
	}
	if (rplus)
		bcfs_readdir_unref(&r, plus ? n : 0);
	/*
	 * Entries that do not parse (or in the other form than asked for)
	 * would end the listing early as if the directory ended there.
	 */
	bad = !full && it.idx < r.u.readdir_rep.count;
	if (bad) {
		bcfs_err("the agent's READDIR reply does not parse after %u of "
			 "%u entries", it.idx, r.u.readdir_rep.count);
		fuse_reply_err(req, EIO);
	} else if (n && (full || !r.u.readdir_rep.eof)) {
		/* the next part, while the kernel takes in this one */
		bcfs_rda_send(parent, fi->fh, next, max_bytes, plus);
	}
	if ((bad || fuse_reply_buf(req, buf, pos)) && plus) {
		/* the kernel took none of the n it was given */
		struct bcp_dirent_iter again = { 0 };
		uint32_t i = 0;

		while (i < n && bcp_dirent_next(&r, 1, &again, &v) == 1) {
			i++;
			if (bcfs_is_dot(&v) || !v.entry.handle)
				continue;
			bcfs_inode_forget(v.entry.handle, 1);
		}
	}
	if (ahead)
		bcfs_rda_free(ahead);
}

void bcfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	bcfs_readdir_common(req, ino, size, off, fi, 0);
}

void bcfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			 off_t off, struct fuse_file_info *fi)
{
	bcfs_readdir_common(req, ino, size, off, fi, 1);
}

void bcfs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct bcp_msg m;

	bcfs_open_del(fi->fh);
	bcfs_rda_release(fi->fh);
	bcfs_msg(&m, BCP_OP_RELEASEDIR);
	m.u.node_req.handle = bcfs_handle(ino);
	m.u.node_req.fh = fi->fh;
	bcfs_call_reply(req, &m, BCFS_REPLY_STATUS, 0, NULL);
}

void bcfs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		      struct fuse_file_info *fi)
{
	struct bcp_msg m;

	bcfs_msg(&m, BCP_OP_FSYNCDIR);
	m.u.fsync_req.handle = bcfs_handle(ino);
	m.u.fsync_req.fh = fi->fh;
	m.u.fsync_req.datasync = datasync;
	bcfs_call_reply(req, &m, BCFS_REPLY_STATUS, 0, NULL);
}
