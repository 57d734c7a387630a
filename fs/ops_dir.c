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
	uint64_t ngen, xepoch;
	size_t pos = 0, ent;
	int ret, full = 0, bad;
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
	bcfs_msg(&m, BCP_OP_READDIR);
	m.u.readdir_req.handle = parent;
	m.u.readdir_req.fh = fi->fh;
	m.u.readdir_req.cookie = off;
	m.u.readdir_req.max_bytes = max_bytes;
	m.u.readdir_req.flags = plus ? BCP_READDIR_PLUS : 0;
	ngen = bcfs_notify_gen();
	xepoch = bcfs_xattr_epoch();
	ret = bcfs_call(&m, &r);
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	if (off == 0 && bcfs_listings_kept())
		bcfs_inode_listed(parent);
	while (bcp_dirent_next(&r, plus, &it, &v) == 1) {
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
	}
	if (plus)
		bcfs_readdir_unref(&r, n);
	/*
	 * Entries that do not parse (or in the other form than asked for)
	 * would end the listing early as if the directory ended there.
	 */
	bad = !full && it.idx < r.u.readdir_rep.count;
	if (bad) {
		bcfs_err("the agent's READDIR reply does not parse after %u of "
			 "%u entries", it.idx, r.u.readdir_rep.count);
		fuse_reply_err(req, EIO);
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
