/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops_attr.c - attributes (getattr, setattr, readlink, statfs) and the
 * helpers every operation family shares: the synchronous agent call with
 * its per-thread reply buffer, and the conversion of agent entries and
 * attributes into what the kernel expects.
 *
 * The reply buffer is allocated once per FUSE thread (BCP_FRAME_MAX bytes,
 * enough for any reply) and freed when the thread exits, so that no
 * metadata request allocates.
 *
 * Requests whose answer to the kernel is a status, attributes or an entry
 * do not wait at all (bcfs_call_reply): they go out with a context from a
 * fixed set, and the client library's receiver thread, already awake with
 * the reply, answers the kernel.  That saves the wake-up of a waiting FUSE
 * thread per request.  Locks: bcfs_acall_lock (the free list) is a leaf.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "bcfs_i.h"

static pthread_key_t bcfs_rbuf_key;
static pthread_once_t bcfs_rbuf_once = PTHREAD_ONCE_INIT;

static void bcfs_rbuf_key_init(void)
{
	if (pthread_key_create(&bcfs_rbuf_key, free))
		abort();
}

static void *bcfs_rbuf(void)
{
	void *b;

	pthread_once(&bcfs_rbuf_once, bcfs_rbuf_key_init);
	b = pthread_getspecific(bcfs_rbuf_key);
	if (b)
		return b;
	b = malloc(BCP_FRAME_MAX);
	if (b && pthread_setspecific(bcfs_rbuf_key, b)) {
		free(b);
		b = NULL;
	}
	return b;
}

/* contexts of requests answered from the receiver thread */
#define BCFS_ACALLS		128

static struct bcfs_acall bcfs_acalls[BCFS_ACALLS];
static struct bcfs_acall *bcfs_acall_free;
static pthread_mutex_t bcfs_acall_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bcfs_acall_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t bcfs_acall_once = PTHREAD_ONCE_INIT;

static void bcfs_acall_init(void)
{
	unsigned int i;

	for (i = 0; i < BCFS_ACALLS; i++) {
		bcfs_acalls[i].next_free = bcfs_acall_free;
		bcfs_acall_free = &bcfs_acalls[i];
	}
}

struct bcfs_acall *bcfs_acall_get(void)
{
	struct bcfs_acall *a;

	pthread_once(&bcfs_acall_once, bcfs_acall_init);
	pthread_mutex_lock(&bcfs_acall_lock);
	while (!(a = bcfs_acall_free))
		pthread_cond_wait(&bcfs_acall_cond, &bcfs_acall_lock);
	bcfs_acall_free = a->next_free;
	pthread_mutex_unlock(&bcfs_acall_lock);
	return a;
}

static void bcfs_acall_put(struct bcfs_acall *a)
{
	pthread_mutex_lock(&bcfs_acall_lock);
	a->next_free = bcfs_acall_free;
	bcfs_acall_free = a;
	pthread_cond_signal(&bcfs_acall_cond);
	pthread_mutex_unlock(&bcfs_acall_lock);
}

/*
 * Changes this mount asked the agent for, begun or ended (atomic): with
 * bcfs_peek_wgen() (changes of file data), what bcfs_change_gen() counts.
 */
static uint64_t bcfs_changes;

/* Whether m may change what the agent would list or describe. */
static int bcfs_msg_changes(const struct bcp_msg *m)
{
	switch (m->hdr.opcode) {
	case BCP_OP_LOOKUP:
	case BCP_OP_GETATTR:
	case BCP_OP_READLINK:
	case BCP_OP_RELEASE:
	case BCP_OP_OPENDIR:
	case BCP_OP_RELEASEDIR:
	case BCP_OP_READDIR:
	case BCP_OP_STATFS:
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
	case BCP_OP_GETXATTR:
	case BCP_OP_LISTXATTR:
	case BCP_OP_FORGET:
	case BCP_OP_LSEEK:
	case BCP_OP_PING:
		return 0;
	case BCP_OP_OPEN:
		return !!(m->u.open_req.flags & O_TRUNC);
	}
	return 1;
}

static void bcfs_change_mark(void)
{
	__atomic_add_fetch(&bcfs_changes, 1, __ATOMIC_ACQ_REL);
}

uint64_t bcfs_change_gen(void)
{
	return __atomic_load_n(&bcfs_changes, __ATOMIC_ACQUIRE) +
	       bcfs_peek_wgen();
}

/* On the receiver thread: answer the kernel, give the context back. */
static void bcfs_acall_done(struct bcp_call *call, int result)
{
	struct bcfs_acall *a = call->priv;

	/* before the kernel learns of it (ops_dir.c: read-ahead) */
	if (a->changes)
		bcfs_change_mark();
	bcfs_metrics_end(&a->mt, result);
	a->answer(a, result);
	bcfs_acall_put(a);
}

void bcfs_acall_send(struct bcfs_acall *a, fuse_req_t req, struct bcp_msg *m,
		     bcfs_answer_fn answer)
{
	int ret;

	a->req = req;
	a->answer = answer;
	a->call.rbuf = a->rbuf;
	a->call.rcap = sizeof(a->rbuf);
	a->call.done = bcfs_acall_done;
	a->call.priv = a;
	a->ngen = bcfs_notify_gen();
	a->xepoch = bcfs_xattr_epoch();
	a->changes = bcfs_msg_changes(m);
	if (a->changes)
		bcfs_change_mark();
	bcfs_metrics_begin(&a->mt, m->hdr.opcode);
	ret = bcp_client_call_async(bcfs_g.client, m, &a->call);
	if (ret < 0)
		bcfs_acall_done(&a->call, ret);
}

static void bcfs_answer_status(struct bcfs_acall *a, int result)
{
	bcfs_reply_status(a->req, result);
}

/* UNLINK, RMDIR: the parent's attributes after it (dattr.c) */
static void bcfs_answer_remove(struct bcfs_acall *a, int result)
{
	/* the nlink and ctime of what was removed moved */
	bcfs_dattr_files();
	bcfs_dattr_end(a->dir, a->dticket,
		       result ? NULL : &a->call.rep.u.dir_rep.dir, a->ngen);
	bcfs_reply_status(a->req, result);
}

static void bcfs_answer_rename(struct bcfs_acall *a, int result)
{
	const struct bcp_rename_rep *r = &a->call.rep.u.rename_rep;

	bcfs_dattr_end(a->dir, a->dticket, result ? NULL : &r->dir, a->ngen);
	bcfs_dattr_end(a->dir2, a->dticket2, result ? NULL : &r->newdir,
		       a->ngen);
	if (!result)
		bcfs_dattr_moved(a->dir, a->dir2);
	bcfs_reply_status(a->req, result);
}

/* FALLOCATE: a change of file data ended (peek.c) */
static void bcfs_answer_changed(struct bcfs_acall *a, int result)
{
	bcfs_peek_dirty();
	bcfs_reply_status(a->req, result);
}

static void bcfs_answer_attr(struct bcfs_acall *a, int result)
{
	struct stat st;

	if (result) {
		bcfs_reply_status(a->req, result);
		return;
	}
	bcfs_attr_to_stat(&a->call.rep.u.attr_rep.attr, &st);
	/* a->parent: the node the request is about */
	fuse_reply_attr(a->req, &st,
			bcfs_notify_timeout(bcfs_g.o.attr_timeout, a->ngen,
					    a->parent, 0));
}

/* SETATTR: its reply answers the kernel's next GETATTR (dattr.c) */
static void bcfs_answer_setattr(struct bcfs_acall *a, int result)
{
	bcfs_dattr_end(a->dir, a->dticket,
		       result ? NULL : &a->call.rep.u.attr_rep.attr, a->ngen);
	bcfs_answer_attr(a, result);
}

/* SETATTR of a size: a change of file data ended (peek.c) */
static void bcfs_answer_truncate(struct bcfs_acall *a, int result)
{
	bcfs_peek_dirty();
	bcfs_answer_setattr(a, result);
}

/* The entry of a's reply to the kernel; made_dir: a MKDIR's (dirs.c). */
static void bcfs_reply_entry(struct bcfs_acall *a, int made_dir)
{
	const struct bcp_entry *entry = &a->call.rep.u.entry_rep.entry;
	struct fuse_entry_param e;

	bcfs_fill_entry(entry, a->parent, &e, a->ngen);
	if (bcfs_inode_ref(entry->handle, a->parent, a->name,
			   strlen(a->name), entry->fid)) {
		/* no record, no kernel reference: give the agent's back */
		bcp_client_forget(bcfs_g.client, entry->handle, 1);
		fuse_reply_err(a->req, ENOMEM);
		return;
	}
	bcfs_xattr_hint(entry, &e, a->xepoch);
	/* before the kernel can make a name in it */
	if (made_dir)
		bcfs_dirs_made(entry->handle, a->ngen);
	if (fuse_reply_entry(a->req, &e))
		bcfs_inode_forget(entry->handle, 1);
}

static void bcfs_answer_entry_ex(struct bcfs_acall *a, int result,
				 int made_dir)
{
	bcfs_dattr_end(a->dir, a->dticket,
		       result ? NULL : &a->call.rep.u.entry_rep.dir, a->ngen);
	if (result) {
		bcfs_reply_status(a->req, result);
		return;
	}
	bcfs_reply_entry(a, made_dir);
}

static void bcfs_answer_entry(struct bcfs_acall *a, int result)
{
	bcfs_answer_entry_ex(a, result, 0);
}

/* LINK: the nlink and ctime of the file linked moved (dattr.c) */
static void bcfs_answer_link(struct bcfs_acall *a, int result)
{
	bcfs_dattr_files();
	bcfs_answer_entry_ex(a, result, 0);
}

/* the new directory is known in full (dirs.c) */
static void bcfs_answer_mkdir(struct bcfs_acall *a, int result)
{
	bcfs_answer_entry_ex(a, result, 1);
}

/*
 * A LOOKUP's ENOENT is an entry with no inode: the kernel keeps it as a
 * negative entry for its timeout (with notifications only: nothing else
 * would tell this mount when the name appears).
 */
static void bcfs_answer_lookup(struct bcfs_acall *a, int result)
{
	struct fuse_entry_param e;

	if (result == -ENOENT && bcfs_g.neg_timeout > 0) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = bcfs_notify_negative(
			bcfs_nodeid(a->parent), a->name, a->ngen);
		if (e.entry_timeout > 0) {
			fuse_reply_entry(a->req, &e);
			return;
		}
	}
	bcfs_answer_entry(a, result);
}

/* no request: the attributes of a file closed after writing (inode.c) */
static void bcfs_answer_open_attr(struct bcfs_acall *a, int result)
{
	if (!result)
		bcfs_inode_open_update(a->parent,
				       &a->call.rep.u.attr_rep.attr);
}

void bcfs_call_reply(fuse_req_t req, struct bcp_msg *m, enum bcfs_reply kind,
		     uint64_t parent, const char *name)
{
	static const bcfs_answer_fn answers[] = {
		[BCFS_REPLY_STATUS] = bcfs_answer_status,
		[BCFS_REPLY_ATTR] = bcfs_answer_attr,
		[BCFS_REPLY_ENTRY] = bcfs_answer_entry,
		[BCFS_REPLY_LINK] = bcfs_answer_link,
		[BCFS_REPLY_LOOKUP] = bcfs_answer_lookup,
		[BCFS_REPLY_OPEN_ATTR] = bcfs_answer_open_attr,
		[BCFS_REPLY_MKDIR] = bcfs_answer_mkdir,
		[BCFS_REPLY_REMOVE] = bcfs_answer_remove,
		[BCFS_REPLY_RENAME] = bcfs_answer_rename,
		[BCFS_REPLY_CHANGED] = bcfs_answer_changed,
		[BCFS_REPLY_SETATTR] = bcfs_answer_setattr,
		[BCFS_REPLY_TRUNCATE] = bcfs_answer_truncate,
	};
	struct bcfs_acall *a = bcfs_acall_get();

	a->parent = parent;
	if (name)
		snprintf(a->name, sizeof(a->name), "%s", name);
	/* requests that change a directory: its attributes come back */
	a->dticket = a->dticket2 = 0;
	switch (kind) {
	case BCFS_REPLY_ENTRY:
	case BCFS_REPLY_LINK:
	case BCFS_REPLY_MKDIR:
	case BCFS_REPLY_REMOVE:
		a->dir = parent;
		a->dticket = bcfs_dattr_begin(parent);
		break;
	case BCFS_REPLY_RENAME:
		a->dir = m->u.rename_req.parent;
		a->dticket = bcfs_dattr_begin(a->dir);
		a->dir2 = m->u.rename_req.newparent;
		if (a->dir2 != a->dir)
			a->dticket2 = bcfs_dattr_begin(a->dir2);
		break;
	case BCFS_REPLY_SETATTR:
	case BCFS_REPLY_TRUNCATE:
		a->dir = m->u.setattr_req.handle;
		a->dticket = bcfs_dattr_begin(a->dir);
		break;
	default:
		break;
	}
	bcfs_acall_send(a, req, m, answers[kind]);
}

int bcfs_call(struct bcp_msg *req, struct bcp_msg *rep)
{
	void *rbuf = bcfs_rbuf();
	int ret, changes = bcfs_msg_changes(req);
	struct bcfs_mtimer t;

	if (!rbuf)
		return -ENOMEM;
	if (changes)
		bcfs_change_mark();
	bcfs_metrics_begin(&t, req->hdr.opcode);
	ret = bcp_client_call(bcfs_g.client, req, rep, rbuf, BCP_FRAME_MAX);
	bcfs_metrics_end(&t, ret);
	if (changes)
		bcfs_change_mark();
	return ret;
}

void bcfs_attr_to_stat(const struct bcp_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_size = a->size;
	st->st_blocks = a->blocks;
	st->st_atim.tv_sec = a->atime;
	st->st_atim.tv_nsec = a->atime_nsec;
	st->st_mtim.tv_sec = a->mtime;
	st->st_mtim.tv_nsec = a->mtime_nsec;
	st->st_ctim.tv_sec = a->ctime;
	st->st_ctim.tv_nsec = a->ctime_nsec;
	st->st_mode = a->mode & BCP_MODE_BITS;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_blksize = a->blksize;
	st->st_rdev = a->rdev;
}

void bcfs_fill_entry(const struct bcp_entry *entry, uint64_t parent,
		     struct fuse_entry_param *e, uint64_t ngen)
{
	memset(e, 0, sizeof(*e));
	e->ino = bcfs_nodeid(entry->handle);
	e->generation = entry->generation;
	bcfs_attr_to_stat(&entry->attr, &e->attr);
	bcfs_wb_patch(entry->handle, &e->attr);
	e->attr_timeout = bcfs_notify_timeout(bcfs_g.o.attr_timeout, ngen,
					      entry->handle, 0);
	e->entry_timeout = bcfs_notify_timeout(bcfs_g.o.entry_timeout, ngen,
					       entry->handle, parent);
}

void bcfs_op_getattr(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	uint64_t ngen = bcfs_notify_gen();
	struct bcp_attr a;
	struct bcp_msg m;
	struct stat st;
	double timeout;

	bcfs_readahead_raise();
	/*
	 * A directory this mount just changed: the change's reply told.
	 * A notification drops what dattr.c keeps before it counts, so one
	 * that raced with this answer leaves it uncached (as any reply).
	 */
	if (bcfs_dattr_get(bcfs_handle(ino), &a, &timeout)) {
		bcfs_attr_to_stat(&a, &st);
		fuse_reply_attr(req, &st, bcfs_notify_timeout(timeout, ngen,
							      bcfs_handle(ino),
							      0));
		return;
	}
	/* the size and mtime of writes still gathered are the agent's then */
	bcfs_wb_flush(bcfs_handle(ino), 0);
	bcfs_msg(&m, BCP_OP_GETATTR);
	m.u.node_req.handle = bcfs_handle(ino);
	m.u.node_req.fh = fi ? fi->fh : 0;
	bcfs_call_reply(req, &m, BCFS_REPLY_ATTR, m.u.node_req.handle, NULL);
}

/* Is the caller of req in group gid (its own or a supplementary one)? */
static int bcfs_req_in_group(fuse_req_t req, uint32_t gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t list[64];
	int i, n;

	if (ctx->gid == gid)
		return 1;
	n = fuse_req_getgroups(req, 64, list);
	for (i = 0; i < n && i < 64; i++)
		if (list[i] == gid)
			return 1;
	return 0;
}

/*
 * A SETATTR that sets nothing: the kernel decided that a change of the
 * file must drop privileges or touch ctime (a write or chown(f, -1, -1)
 * by its caller), but its FUSE client clears S_ISGID only together with
 * S_IXGRP.  A local file system also clears it when the caller is neither
 * in the file's group nor privileged: do that here, with the caller's
 * credentials the request carries.  Otherwise change ctime alone
 * (FATTR_CTIME itself is sent only with the writeback cache).
 */
static void bcfs_setattr_nothing(fuse_req_t req, struct bcp_setattr_req *s)
{
	struct bcp_msg m, r;

	if (fuse_req_ctx(req)->uid != 0) {
		bcfs_msg(&m, BCP_OP_GETATTR);
		m.u.node_req.handle = s->handle;
		m.u.node_req.fh = s->fh;
		if (!bcfs_call(&m, &r) &&
		    (r.u.attr_rep.attr.mode & (S_ISGID | S_IXGRP)) == S_ISGID &&
		    S_ISREG(r.u.attr_rep.attr.mode) &&
		    !bcfs_req_in_group(req, r.u.attr_rep.attr.gid)) {
			s->valid = BCP_SETATTR_MODE;
			s->mode = r.u.attr_rep.attr.mode & 07777 & ~S_ISGID;
			return;
		}
	}
	if (bcfs_g.features & BCP_FEAT_SETATTR_CTIME)
		s->valid = BCP_SETATTR_CTIME;
}

void bcfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		     int to_set, struct fuse_file_info *fi)
{
	struct bcp_setattr_req *s;
	struct bcp_msg m;

	bcfs_wb_flush(bcfs_handle(ino),
		      to_set & FUSE_SET_ATTR_SIZE ? BCFS_WB_TRUNC : 0);
	bcfs_msg(&m, BCP_OP_SETATTR);
	s = &m.u.setattr_req;
	s->handle = bcfs_handle(ino);
	s->fh = fi ? fi->fh : 0;
	if (to_set & FUSE_SET_ATTR_MODE) {
		s->valid |= BCP_SETATTR_MODE;
		s->mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		s->valid |= BCP_SETATTR_UID;
		s->uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		s->valid |= BCP_SETATTR_GID;
		s->gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		s->valid |= BCP_SETATTR_SIZE;
		s->size = attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		s->valid |= BCP_SETATTR_ATIME | BCP_SETATTR_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		s->valid |= BCP_SETATTR_ATIME;
		s->atime = attr->st_atim.tv_sec;
		s->atime_nsec = attr->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		s->valid |= BCP_SETATTR_MTIME | BCP_SETATTR_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		s->valid |= BCP_SETATTR_MTIME;
		s->mtime = attr->st_mtim.tv_sec;
		s->mtime_nsec = attr->st_mtim.tv_nsec;
	}
	if (!s->valid)
		bcfs_setattr_nothing(req, s);
	if (s->valid & BCP_SETATTR_SIZE) {
		bcfs_peek_dirty();
		bcfs_call_reply(req, &m, BCFS_REPLY_TRUNCATE,
				m.u.setattr_req.handle, NULL);
		return;
	}
	bcfs_call_reply(req, &m, BCFS_REPLY_SETATTR, m.u.setattr_req.handle,
			NULL);
}

void bcfs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[BCP_SYMLINK_MAX + 1];
	struct bcp_msg m, r;
	size_t len;
	int ret;

	bcfs_msg(&m, BCP_OP_READLINK);
	m.u.handle_req.handle = bcfs_handle(ino);
	ret = bcfs_call(&m, &r);
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	len = r.data_len;
	if (len > BCP_SYMLINK_MAX || !r.data) {
		fuse_reply_err(req, EIO);
		return;
	}
	memcpy(target, r.data, len);
	target[len] = '\0';
	fuse_reply_readlink(req, target);
}

void bcfs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	const struct bcp_statfs_rep *s;
	struct bcp_msg m, r;
	struct statvfs sv;
	int ret;

	bcfs_releases_wait();
	bcfs_msg(&m, BCP_OP_STATFS);
	m.u.handle_req.handle = bcfs_handle(ino);
	ret = bcfs_call(&m, &r);
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	s = &r.u.statfs_rep;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = s->bsize;
	sv.f_frsize = s->frsize;
	sv.f_blocks = s->blocks;
	sv.f_bfree = s->bfree;
	sv.f_bavail = s->bavail;
	sv.f_files = s->files;
	sv.f_ffree = s->ffree;
	sv.f_favail = s->ffree;
	sv.f_namemax = s->namemax;
	fuse_reply_statfs(req, &sv);
}
