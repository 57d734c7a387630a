/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store.h - the store interface: a session's view of where the objects
 * live.  Two stores implement it: posix (store_posix.c, a directory of
 * the DPU's own filesystem) and cephfs (store_ceph.c, a CephFS reached
 * with libcephfs).  The session, handle and batch code call the
 * agent_store_*() functions below and know nothing of either.
 *
 * An agent serves one store (struct agent_backend, opened at start-up
 * from --store); every session gets its own struct agent_store from it:
 * its handle table (handle -> object + lookup count; one handle per
 * object unless REBIND installed a second), its open files (fh) and, once
 * it takes notifications, its registrations (notify.h).  Handles, fhs and
 * fids are the store's; the host sees them only as numbers.
 *
 * All functions return 0 (or a count) or -errno, and write their outputs
 * only on success.
 *
 * Threads: a store that is not AGENT_STORE_BLOCKING is used by its
 * session's worker only, and every call returns soon (io_uring or calls
 * that do not wait for a device for long).  A store that is
 * AGENT_STORE_BLOCKING (cephfs: every call may wait for the cluster) is
 * called by the session from blocking-pool threads, several calls at
 * once: its functions are thread-safe, except those marked "worker"
 * below, which the session calls on its worker and which never block.
 */
#ifndef AGENT_STORE_H
#define AGENT_STORE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"

struct agent_store;
struct agent_file;
struct agent_notify_sess;
struct agent_store_call;

/* ---- the agent's one store, opened at start-up ---- */

/*
 * --store SPEC (doc/bluecache-agent.8):
 *   posix:DIR                                 (--root DIR is short for it)
 *   cephfs:[PATH][,conf=FILE][,id=NAME][,fs=NAME]
 * PATH is the directory within the CephFS that is the root (default /),
 * conf the ceph.conf (default: libcephfs's search: $CEPH_CONF,
 * /etc/ceph/ceph.conf), id the client name without "client." (default
 * admin), fs the file system's name (default: the cluster's default).
 */
enum agent_store_kind {
	AGENT_STORE_POSIX = 1,
	AGENT_STORE_CEPHFS,
};

struct agent_store_spec {
	int kind;			/* enum agent_store_kind */
	char *path;			/* posix: DIR; cephfs: PATH or NULL */
	char *conf, *id, *fs;		/* cephfs only; NULL: the default */
	/*
	 * cephfs: who this agent is to the cluster across its restarts
	 * (set by main, never parsed): the Ceph session a killed run left
	 * behind is reset at start-up instead of holding its capabilities
	 * until the MDS times it out.  NULL: no reclaim.
	 */
	char *uuid;
	/*
	 * cephfs: the directory acknowledged writes are logged in until the
	 * cluster has them (ceph_wlog.h; set by main): a tmpfs, which
	 * outlives the agent as the posix store's page cache does.  NULL or
	 * "none": no log, each write waits for the cluster.
	 */
	char *run_dir;
};

/*
 * Parse SPEC into out (strings malloc'ed; agent_store_spec_free()).
 * -EINVAL with one line in err that names what is wrong.
 */
int agent_store_spec_parse(const char *spec, struct agent_store_spec *out,
			   char *err, size_t errlen);
void agent_store_spec_free(struct agent_store_spec *sp);

struct agent_backend;

struct agent_backend_ops {
	const char *name;		/* "posix", "cephfs" */
	/* a new session's store; NULL on failure (logged) */
	struct agent_store *(*session)(struct agent_backend *b,
				       struct agent_ring *r,
				       const struct agent_ident *id);
	/* shutdown: persist everything written (syncfs, ceph_sync_fs) */
	int (*sync)(struct agent_backend *b);
	/* the store's size and use, for metrics (statvfs-like) */
	int (*statfs)(struct agent_backend *b, struct bcp_statfs_rep *out);
	void (*close)(struct agent_backend *b);
};

struct agent_backend {
	const struct agent_backend_ops *ops;
	const char *desc;		/* for log lines: "/srv/data", "cephfs:/" */
	int root_fd;			/* posix: O_PATH of the root; else -1 */
	unsigned int flags;		/* AGENT_STORE_* */
};

/* Every call may block: the session runs them on the blocking pool. */
#define AGENT_STORE_BLOCKING	0x1
/* A cluster's client, which the cluster may fence off (agent_store_ret()) */
#define AGENT_STORE_FENCEABLE	0x2
/*
 * The session's host takes BCP_MODE_NO_XATTRS in entries
 * (BCP_FEAT_XATTR_HINT); a store that knows it cheaply says it.
 */
#define AGENT_STORE_XATTR_HINT	0x4

/*
 * Open the store sp names (posix: the directory; cephfs: mount the file
 * system, waiting at most timeout_ms for the cluster).  On failure one
 * line saying what and why is logged (agent_err) and -errno returned, so
 * a wrong conf, an unreachable cluster or a missing keyring fails at
 * start-up, never at the first request.
 */
int agent_backend_open(const struct agent_store_spec *sp,
		       unsigned int timeout_ms, struct agent_backend **out);
int agent_posix_open(const char *dir, struct agent_backend **out);
/* -EOPNOTSUPP (logged) when built without libcephfs */
int agent_ceph_open(const struct agent_store_spec *sp,
		    unsigned int timeout_ms, struct agent_backend **out);
void agent_backend_close(struct agent_backend *b);

/*
 * A store call's result.  ESHUTDOWN is what a cluster's client answers
 * once the cluster fenced it off (libcephfs's EBLOCKLISTED: the MDS
 * evicted it, its address is blocklisted): its caches, capabilities and
 * open files are gone, and no call of it can succeed again, not even the
 * orderly stop's sync.  An AGENT_STORE_FENCEABLE store's agent then ends
 * at once (agent_store_fenced(): one line, exit status
 * AGENT_EXIT_FENCED): its service manager starts it again with a new
 * client, which replays the write log, and the hosts take their files
 * back on it as after a crash.  A posix store's, of a request or of its
 * data's I/O (a kernel CephFS mount under it, say: a new agent would not
 * help), becomes EIO, which means something to the host's applications.
 */
#define AGENT_EXIT_FENCED	75	/* EX_TEMPFAIL */
int agent_store_fenced(int ret);

static inline int agent_store_ret(int ret)
{
	return ret == -ESHUTDOWN ? agent_store_fenced(ret) : ret;
}

/* The store this agent serves (main.c opens it before the workers). */
extern struct agent_backend *agent_backend;

/* ---- a session's store ---- */

/*
 * Threads: "worker" marks a call the session always makes on its worker
 * thread; it never blocks, even in a blocking store.
 */
struct agent_store_ops {
	/* worker; closes every fh and handle */
	void (*destroy)(struct agent_store *s);
	/* worker */
	uint64_t (*root)(const struct agent_store *s);
	/*
	 * worker.  The session negotiated BCP_FEAT_NOTIFY and
	 * authenticated: from now on every node of s is registered with ns
	 * (notify.h), until it is freed or s destroyed, and the changes s
	 * makes are not notified to ns.  Before (and without) it, the
	 * changes s makes are still published to the other sessions.  ns
	 * outlives s.  Once only.
	 */
	void (*notify_start)(struct agent_store *s,
			     struct agent_notify_sess *ns);

	int (*lookup)(struct agent_store *s, uint64_t parent,
		      const char *name, size_t len, struct bcp_entry *out);
	int (*getattr)(struct agent_store *s, uint64_t handle, uint64_t fh,
		       struct bcp_attr *out);
	int (*setattr)(struct agent_store *s, const struct bcp_setattr_req *r,
		       struct bcp_attr *out);
	int (*create_file)(struct agent_store *s,
			   const struct bcp_create_req *r, const char *name,
			   struct bcp_create_rep *out);
	int (*mkdir)(struct agent_store *s, const struct bcp_mkdir_req *r,
		     const char *name, struct bcp_entry *out);
	int (*mknod)(struct agent_store *s, const struct bcp_mknod_req *r,
		     const char *name, struct bcp_entry *out);
	int (*symlink)(struct agent_store *s, const struct bcp_symlink_req *r,
		       const char *name, const char *target,
		       struct bcp_entry *out);
	/* Returns the target's length, written to buf[cap]. */
	int (*readlink)(struct agent_store *s, uint64_t handle, char *buf,
			size_t cap);
	int (*link)(struct agent_store *s, const struct bcp_link_req *r,
		    const char *name, struct bcp_entry *out);
	int (*unlink)(struct agent_store *s, uint64_t parent,
		      const char *name, size_t len, int rmdir);
	int (*rename)(struct agent_store *s, const struct bcp_rename_req *r,
		      const char *name, const char *newname);
	int (*open)(struct agent_store *s, uint64_t handle, uint32_t flags,
		    int dir, struct bcp_open_rep *out);
	int (*release)(struct agent_store *s, uint64_t handle, uint64_t fh,
		       int dir);
	/*
	 * REOPEN: open r->handle again (r->dir: as OPENDIR; else as OPEN,
	 * never truncating) under exactly the fh value r->fh.  -EEXIST
	 * when that fh is in use, -EINVAL when it cannot be one (index 0 or
	 * past --max-files, generation 0), else as OPEN.
	 */
	int (*reopen)(struct agent_store *s, const struct bcp_reopen_req *r,
		      struct bcp_open_rep *out);
	/*
	 * REBIND one entry: install handle (>= 2) with nlookup references
	 * on the object fid names.  0 (also when handle already names that
	 * object: the references add up), -ESTALE (fid not this store's,
	 * object gone), -EEXIST (handle names another object), -ENFILE
	 * (limits), -EINVAL.
	 */
	int (*rebind)(struct agent_store *s, uint64_t handle,
		      uint64_t nlookup, const uint8_t fid[BCP_FID_LEN]);
	/* An entry (one lookup reference) for the object fid names. */
	int (*fid_entry)(struct agent_store *s,
			 const uint8_t fid[BCP_FID_LEN],
			 struct bcp_entry *out);
	int (*statfs)(struct agent_store *s, uint64_t handle,
		      struct bcp_statfs_rep *out);
	int (*setxattr)(struct agent_store *s, uint64_t handle,
			uint32_t flags, const char *name, size_t nlen,
			const void *value, size_t vlen);
	/* size 0: return the size only.  Returns the size. */
	int (*getxattr)(struct agent_store *s, uint64_t handle,
			const char *name, size_t nlen, void *buf,
			size_t size);
	int (*listxattr)(struct agent_store *s, uint64_t handle, void *buf,
			 size_t size);
	int (*removexattr)(struct agent_store *s, uint64_t handle,
			   const char *name, size_t nlen);
	/* worker: never blocks */
	void (*forget)(struct agent_store *s, uint64_t handle,
		       uint64_t nlookup);
	int (*lseek)(struct agent_store *s, const struct bcp_lseek_req *r,
		     int64_t *off);

	/*
	 * worker.  Data path: take a reference on an open regular file (so
	 * RELEASE cannot close it under an in-flight transfer) and give its
	 * fd, or -1 when the store's files have none (then the batch engine
	 * moves their bytes with file_rw() on the blocking pool).  -EBADF
	 * for an unknown fh, -EISDIR for a directory.
	 */
	int (*file_get)(struct agent_store *s, uint64_t fh,
			struct agent_file **out, int *fd);
	/* worker */
	void (*file_put)(struct agent_store *s, struct agent_file *f);
	/*
	 * worker.  The batch engine wrote [off, off + len) of f (len > 0):
	 * the other sessions holding its object are told (one call per
	 * file per batch).
	 */
	void (*file_wrote)(struct agent_store *s, struct agent_file *f,
			   uint64_t off, uint64_t len);
	/* worker; see enum agent_io_inline.  NULL: AGENT_INLINE_NEVER. */
	int (*file_inline)(struct agent_file *f, int fd);
	void (*file_inline_set)(struct agent_file *f, int mode);
	/*
	 * Any thread (blocking pool), for files whose file_get() gave fd
	 * -1: read (write 0) or write len bytes at off between f and buf.
	 * Returns the bytes moved (short only at the end of the file) or
	 * -errno.  f is referenced (file_get) for the whole call.
	 */
	ssize_t (*file_rw)(struct agent_store *s, struct agent_file *f,
			   int write, void *buf, size_t len, uint64_t off);

	/*
	 * The calls that may block for long (FSYNC, FSYNCDIR, FALLOCATE,
	 * COPY_FILE_RANGE, READDIR), in every store: call_begin() on the
	 * worker checks the request and takes references (never blocks;
	 * on failure it holds nothing), call_run() on a pool thread does
	 * the work, call_end() on the worker drops the references.
	 * readdir_fill() (worker, between run() and end()) gives the
	 * reply's entries; it never blocks in a blocking store (run() did
	 * the work).
	 */
	int (*call_begin)(struct agent_store *s, const struct bcp_msg *m,
			  struct agent_store_call *c);
	void (*call_run)(struct agent_store_call *c);
	void (*call_end)(struct agent_store *s, struct agent_store_call *c);
	int (*readdir_fill)(struct agent_store *s,
			    const struct agent_store_call *c, void *buf,
			    size_t cap, size_t *len, uint32_t *count,
			    uint32_t *eof);

	/* worker: live handles and fhs, for tests and the summary */
	void (*counts)(const struct agent_store *s, uint64_t *handles,
		       uint64_t *files);
};

/* Every store begins with this. */
struct agent_store {
	const struct agent_store_ops *ops;
	unsigned int flags;		/* AGENT_STORE_* */
};

/*
 * How the batch engine may move an open file's bytes on the worker thread
 * itself (batch.c): with RWF_NOWAIT (it fails rather than block), with a
 * plain call (tmpfs and ramfs, which support no RWF_NOWAIT but never wait
 * for a device), or not at all.  Decided at the first transfer (fd is the
 * file's descriptor) and then remembered.
 */
enum agent_io_inline {
	AGENT_INLINE_UNKNOWN = 0,
	AGENT_INLINE_NOWAIT,
	AGENT_INLINE_MEMORY,
	AGENT_INLINE_NEVER,
};

#define AGENT_STORE_DENTS_BUF	(64u * 1024)	/* READDIR's buffer */
struct agent_store_call {
	uint16_t op;			/* the request's opcode */
	struct agent_store *s;		/* set by call_begin() */
	struct agent_file *f, *f2;	/* references held */
	int fd, fd2;
	int own_fd;			/* fd was opened for this call */
	int datasync;
	uint32_t mode;
	uint64_t off, off2, len;
	struct bcp_readdir_req rd;
	char *buf;			/* READDIR: AGENT_STORE_DENTS_BUF */
	size_t cap;
	void *priv;			/* the store's, between the calls */
	/* results of run() */
	long res;			/* the call's result or -errno */
	size_t nread;			/* READDIR: bytes of entries in buf */
	int eof;			/* READDIR: the end was reached */
};

/* ---- what the session and batch code call ---- */

static inline struct agent_store *
agent_store_new(struct agent_backend *b, struct agent_ring *r,
		const struct agent_ident *id)
{
	return b->ops->session(b, r, id);
}

/* NULL is a no-op. */
static inline void agent_store_destroy(struct agent_store *s)
{
	if (s)
		s->ops->destroy(s);
}

static inline int agent_store_blocking(const struct agent_store *s)
{
	return !!(s->flags & AGENT_STORE_BLOCKING);
}

static inline uint64_t agent_store_root(const struct agent_store *s)
{
	return s->ops->root(s);
}

static inline void agent_store_notify_start(struct agent_store *s,
					    struct agent_notify_sess *ns)
{
	s->ops->notify_start(s, ns);
}

static inline int agent_store_lookup(struct agent_store *s, uint64_t parent,
				     const char *name, size_t len,
				     struct bcp_entry *out)
{
	return s->ops->lookup(s, parent, name, len, out);
}

static inline int agent_store_getattr(struct agent_store *s, uint64_t handle,
				      uint64_t fh, struct bcp_attr *out)
{
	return s->ops->getattr(s, handle, fh, out);
}

static inline int agent_store_setattr(struct agent_store *s,
				      const struct bcp_setattr_req *r,
				      struct bcp_attr *out)
{
	return s->ops->setattr(s, r, out);
}

static inline int agent_store_create_file(struct agent_store *s,
					  const struct bcp_create_req *r,
					  const char *name,
					  struct bcp_create_rep *out)
{
	return s->ops->create_file(s, r, name, out);
}

static inline int agent_store_mkdir(struct agent_store *s,
				    const struct bcp_mkdir_req *r,
				    const char *name, struct bcp_entry *out)
{
	return s->ops->mkdir(s, r, name, out);
}

static inline int agent_store_mknod(struct agent_store *s,
				    const struct bcp_mknod_req *r,
				    const char *name, struct bcp_entry *out)
{
	return s->ops->mknod(s, r, name, out);
}

static inline int agent_store_symlink(struct agent_store *s,
				      const struct bcp_symlink_req *r,
				      const char *name, const char *target,
				      struct bcp_entry *out)
{
	return s->ops->symlink(s, r, name, target, out);
}

static inline int agent_store_readlink(struct agent_store *s, uint64_t handle,
				       char *buf, size_t cap)
{
	return s->ops->readlink(s, handle, buf, cap);
}

static inline int agent_store_link(struct agent_store *s,
				   const struct bcp_link_req *r,
				   const char *name, struct bcp_entry *out)
{
	return s->ops->link(s, r, name, out);
}

static inline int agent_store_unlink(struct agent_store *s, uint64_t parent,
				     const char *name, size_t len, int rmdir)
{
	return s->ops->unlink(s, parent, name, len, rmdir);
}

static inline int agent_store_rename(struct agent_store *s,
				     const struct bcp_rename_req *r,
				     const char *name, const char *newname)
{
	return s->ops->rename(s, r, name, newname);
}

static inline int agent_store_open(struct agent_store *s, uint64_t handle,
				   uint32_t flags, int dir,
				   struct bcp_open_rep *out)
{
	return s->ops->open(s, handle, flags, dir, out);
}

static inline int agent_store_release(struct agent_store *s, uint64_t handle,
				      uint64_t fh, int dir)
{
	return s->ops->release(s, handle, fh, dir);
}

static inline int agent_store_reopen(struct agent_store *s,
				     const struct bcp_reopen_req *r,
				     struct bcp_open_rep *out)
{
	return s->ops->reopen(s, r, out);
}

static inline int agent_store_rebind(struct agent_store *s, uint64_t handle,
				     uint64_t nlookup,
				     const uint8_t fid[BCP_FID_LEN])
{
	return s->ops->rebind(s, handle, nlookup, fid);
}

static inline int agent_store_fid_entry(struct agent_store *s,
					const uint8_t fid[BCP_FID_LEN],
					struct bcp_entry *out)
{
	return s->ops->fid_entry(s, fid, out);
}

static inline int agent_store_statfs(struct agent_store *s, uint64_t handle,
				     struct bcp_statfs_rep *out)
{
	return s->ops->statfs(s, handle, out);
}

static inline int agent_store_setxattr(struct agent_store *s, uint64_t handle,
				       uint32_t flags, const char *name,
				       size_t nlen, const void *value,
				       size_t vlen)
{
	return s->ops->setxattr(s, handle, flags, name, nlen, value, vlen);
}

static inline int agent_store_getxattr(struct agent_store *s, uint64_t handle,
				       const char *name, size_t nlen,
				       void *buf, size_t size)
{
	return s->ops->getxattr(s, handle, name, nlen, buf, size);
}

static inline int agent_store_listxattr(struct agent_store *s,
					uint64_t handle, void *buf,
					size_t size)
{
	return s->ops->listxattr(s, handle, buf, size);
}

static inline int agent_store_removexattr(struct agent_store *s,
					  uint64_t handle, const char *name,
					  size_t nlen)
{
	return s->ops->removexattr(s, handle, name, nlen);
}

static inline void agent_store_forget(struct agent_store *s, uint64_t handle,
				      uint64_t nlookup)
{
	s->ops->forget(s, handle, nlookup);
}

static inline int agent_store_lseek(struct agent_store *s,
				    const struct bcp_lseek_req *r,
				    int64_t *off)
{
	return s->ops->lseek(s, r, off);
}

static inline int agent_store_file_get(struct agent_store *s, uint64_t fh,
				       struct agent_file **out, int *fd)
{
	return s->ops->file_get(s, fh, out, fd);
}

static inline void agent_store_file_put(struct agent_store *s,
					struct agent_file *f)
{
	s->ops->file_put(s, f);
}

static inline void agent_store_file_wrote(struct agent_store *s,
					  struct agent_file *f, uint64_t off,
					  uint64_t len)
{
	s->ops->file_wrote(s, f, off, len);
}

static inline int agent_store_file_inline(struct agent_store *s,
					  struct agent_file *f, int fd)
{
	if (fd < 0 || !s->ops->file_inline)
		return AGENT_INLINE_NEVER;
	return s->ops->file_inline(f, fd);
}

static inline void agent_store_file_inline_set(struct agent_store *s,
					       struct agent_file *f, int mode)
{
	if (s->ops->file_inline_set)
		s->ops->file_inline_set(f, mode);
}

static inline ssize_t agent_store_file_rw(struct agent_store *s,
					  struct agent_file *f, int write,
					  void *buf, size_t len, uint64_t off)
{
	ssize_t n = s->ops->file_rw(s, f, write, buf, len, off);

	return n == -ESHUTDOWN ? agent_store_fenced((int)n) : n;
}

static inline int agent_store_call_begin(struct agent_store *s,
					 const struct bcp_msg *m,
					 struct agent_store_call *c)
{
	c->s = s;
	return s->ops->call_begin(s, m, c);
}

static inline void agent_store_call_run(struct agent_store_call *c)
{
	c->s->ops->call_run(c);
}

static inline void agent_store_call_end(struct agent_store *s,
					struct agent_store_call *c)
{
	s->ops->call_end(s, c);
}

static inline int agent_store_readdir_fill(struct agent_store *s,
					   const struct agent_store_call *c,
					   void *buf, size_t cap, size_t *len,
					   uint32_t *count, uint32_t *eof)
{
	return s->ops->readdir_fill(s, c, buf, cap, len, count, eof);
}

static inline void agent_store_counts(const struct agent_store *s,
				      uint64_t *handles, uint64_t *files)
{
	s->ops->counts(s, handles, files);
}

#endif /* AGENT_STORE_H */
