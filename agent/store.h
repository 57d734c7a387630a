/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store.h - the posix backend: a session's view of the data root.
 *
 * Each session owns one struct agent_store: its handle table (handle ->
 * fid + lookup count, hashed both by handle and by (dev, ino), so a
 * backing inode has one handle unless REBIND installed a second one), an
 * LRU of at most --fd-cache O_PATH descriptors of recently used nodes (a
 * node out of it is opened again by its fid; a node without a fid keeps
 * its descriptor) and its open files (fh).  Every name
 * is resolved beneath the O_PATH fd of its parent with openat2(2) and
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS, so neither
 * "..", an absolute name nor a symlink leads out of the root.  Metadata
 * operations io_uring offers go through the worker's ring.
 *
 * All functions return 0 (or a count) or -errno, and write their outputs
 * only on success.  Threads: a store is used by its session's worker only.
 */
#ifndef AGENT_STORE_H
#define AGENT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"

struct agent_store;
struct agent_file;

struct agent_notify_sess;

/* id: the session's identity policy; it outlives the store. */
struct agent_store *agent_store_create(int root_fd, struct agent_ring *r,
				       const struct agent_ident *id);
/* Closes every fh and handle; NULL is a no-op. */
void agent_store_destroy(struct agent_store *s);
uint64_t agent_store_root(const struct agent_store *s);
/*
 * The session negotiated BCP_FEAT_NOTIFY and authenticated: from now on
 * every node of s is registered with ns (notify.h), until it is freed or
 * s destroyed, and the changes s makes are not notified to ns.  Before
 * (and without) it, the changes s makes are still published to the other
 * sessions.  ns outlives s.  Once only.
 */
void agent_store_notify_start(struct agent_store *s,
			      struct agent_notify_sess *ns);

int agent_store_lookup(struct agent_store *s, uint64_t parent,
		       const char *name, size_t len, struct bcp_entry *out);
int agent_store_getattr(struct agent_store *s, uint64_t handle, uint64_t fh,
			struct bcp_attr *out);
int agent_store_setattr(struct agent_store *s,
			const struct bcp_setattr_req *r, struct bcp_attr *out);
int agent_store_create_file(struct agent_store *s,
			    const struct bcp_create_req *r, const char *name,
			    struct bcp_create_rep *out);
int agent_store_mkdir(struct agent_store *s, const struct bcp_mkdir_req *r,
		      const char *name, struct bcp_entry *out);
int agent_store_mknod(struct agent_store *s, const struct bcp_mknod_req *r,
		      const char *name, struct bcp_entry *out);
int agent_store_symlink(struct agent_store *s,
			const struct bcp_symlink_req *r, const char *name,
			const char *target, struct bcp_entry *out);
/* Returns the target's length, written to buf[cap]. */
int agent_store_readlink(struct agent_store *s, uint64_t handle, char *buf,
			 size_t cap);
int agent_store_link(struct agent_store *s, const struct bcp_link_req *r,
		     const char *name, struct bcp_entry *out);
int agent_store_unlink(struct agent_store *s, uint64_t parent,
		       const char *name, size_t len, int rmdir);
int agent_store_rename(struct agent_store *s, const struct bcp_rename_req *r,
		       const char *name, const char *newname);
int agent_store_open(struct agent_store *s, uint64_t handle, uint32_t flags,
		     int dir, struct bcp_open_rep *out);
int agent_store_release(struct agent_store *s, uint64_t handle, uint64_t fh,
			int dir);

/*
 * REOPEN: open r->handle again (r->dir: as OPENDIR; else as OPEN, never
 * truncating) under exactly the fh value r->fh.  -EEXIST when that fh is
 * in use, -EINVAL when it cannot be one (index 0 or past --max-files,
 * generation 0), else as OPEN.
 */
int agent_store_reopen(struct agent_store *s, const struct bcp_reopen_req *r,
		       struct bcp_open_rep *out);
/*
 * REBIND one entry: install handle (>= 2) with nlookup references on the
 * object fid names.  0 (also when handle already names that object: the
 * references add up), -ESTALE (fid not this agent's, object gone),
 * -EEXIST (handle names another object), -ENFILE (limits), -EINVAL.
 */
int agent_store_rebind(struct agent_store *s, uint64_t handle,
		       uint64_t nlookup, const uint8_t fid[BCP_FID_LEN]);
/* An entry (one lookup reference) for the object fid names; -ESTALE. */
int agent_store_fid_entry(struct agent_store *s,
			  const uint8_t fid[BCP_FID_LEN],
			  struct bcp_entry *out);
int agent_store_statfs(struct agent_store *s, uint64_t handle,
		       struct bcp_statfs_rep *out);
int agent_store_setxattr(struct agent_store *s, uint64_t handle,
			 uint32_t flags, const char *name, size_t nlen,
			 const void *value, size_t vlen);
/* size 0: return the size only.  Returns the size. */
int agent_store_getxattr(struct agent_store *s, uint64_t handle,
			 const char *name, size_t nlen, void *buf,
			 size_t size);
int agent_store_listxattr(struct agent_store *s, uint64_t handle, void *buf,
			  size_t size);
int agent_store_removexattr(struct agent_store *s, uint64_t handle,
			    const char *name, size_t nlen);
void agent_store_forget(struct agent_store *s, uint64_t handle,
			uint64_t nlookup);
int agent_store_lseek(struct agent_store *s, const struct bcp_lseek_req *r,
		      int64_t *off);

/*
 * Data path: take a reference on an open regular file (so RELEASE cannot
 * close it under an in-flight transfer) and give its fd.  -EBADF for an
 * unknown fh, -EISDIR for a directory.
 */
int agent_store_file_get(struct agent_store *s, uint64_t fh,
			 struct agent_file **out, int *fd);
void agent_store_file_put(struct agent_store *s, struct agent_file *f);
/*
 * The batch engine wrote [off, off + len) of f (len > 0): the other
 * sessions holding its object are told (one call per file per batch).
 */
void agent_store_file_wrote(struct agent_store *s, struct agent_file *f,
			    uint64_t off, uint64_t len);

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
int agent_store_file_inline(struct agent_file *f, int fd);
void agent_store_file_inline_set(struct agent_file *f, int mode);

/*
 * Calls that may block for long (FSYNC, FSYNCDIR, FALLOCATE,
 * COPY_FILE_RANGE, READDIR) run on the blocking pool: the worker checks
 * the request and takes references with agent_store_call_begin(), a pool
 * thread runs agent_store_call_run() (the system call only: it touches no
 * store state), and the worker drops the references with
 * agent_store_call_end().  begin() that fails holds nothing.
 */
#define AGENT_STORE_DENTS_BUF	(64u * 1024)	/* READDIR's getdents buffer */
struct agent_store_call {
	uint16_t op;			/* the request's opcode */
	struct agent_file *f, *f2;	/* references held */
	int fd, fd2;
	int own_fd;			/* fd was opened for this call */
	int datasync;
	uint32_t mode;
	uint64_t off, off2, len;
	struct bcp_readdir_req rd;
	char *buf;			/* READDIR: AGENT_STORE_DENTS_BUF */
	size_t cap;
	/* results of run() */
	long res;			/* the call's result or -errno */
	size_t nread;			/* READDIR: bytes of entries in buf */
	int eof;			/* READDIR: the end was reached */
};
int agent_store_call_begin(struct agent_store *s, const struct bcp_msg *m,
			   struct agent_store_call *c);
void agent_store_call_run(struct agent_store_call *c);
void agent_store_call_end(struct agent_store *s, struct agent_store_call *c);
/* READDIR, between run() and end(): the reply's entries into buf[cap]. */
int agent_store_readdir_fill(struct agent_store *s,
			     const struct agent_store_call *c, void *buf,
			     size_t cap, size_t *len, uint32_t *count,
			     uint32_t *eof);

/* Live handles and fhs, for tests of the table and the summary. */
void agent_store_counts(const struct agent_store *s, uint64_t *handles,
			uint64_t *files);

#endif /* AGENT_STORE_H */
