/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bcfs_i.h - private declarations of the bluecachefs FUSE daemon.
 *
 * The daemon is one process with one mount: the state lives in a single
 * struct bcfs (bcfs_g), set up by main.c before the session starts and torn
 * down after it ends.  The operation families (ops_*.c) reach the agent
 * through the client library; inode.c keeps the table of inodes the kernel
 * knows about; embed.c runs the private agent of "local:DIR".
 *
 * Node ids: the agent's handle is the FUSE nodeid, except the agent's root
 * handle, which is FUSE_ROOT_ID (handles are never 0 or 1, so the two
 * spaces do not collide).
 */
#ifndef BCFS_I_H
#define BCFS_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "bcp_client.h"
#include "metrics.h"

#define BCFS_PROG		"bluecachefs"
#define BCFS_IO_MAX		(1u << 20)	/* max_read / max_write */
#define BCFS_READAHEAD		(4u << 20)	/* conn->max_readahead */
#define BCFS_RW_CTX		256		/* preallocated r/w contexts */
#define BCFS_RW_CHUNKS		(BCFS_IO_MAX / 4096) /* pieces of one r/w */

/* Command-line options (fuse_opt_parse fills the strings). */
/* -o timeout: long enough for a batch on a loaded host */
#define BCFS_TIMEOUT_DEFAULT	30.0
/* -o attr_timeout, entry_timeout: agents that tell of changes, and not */
#define BCFS_CACHE_TIMEOUT	60.0
#define BCFS_SHORT_TIMEOUT	1.0
/* -o reconnect_timeout: an agent restart, or a reboot of its host */
#define BCFS_RECONNECT_TIMEOUT_DEFAULT	300.0
/* -o busy_timeout: a cluster that stalls for minutes */
#define BCFS_BUSY_TIMEOUT_DEFAULT	600.0

struct bcfs_opts {
	char *agent;		/* the AGENT argument */
	char *mountpoint;
	char *transport;	/* auto|shm|tcp|rdma */
	char *secret_file;
	char *pool_size;	/* bytes, with an optional K/M/G suffix */
	char *metrics;		/* -o metrics=ADDR:PORT (metrics.c) */
	double attr_timeout;	/* < 0 until set: chosen at connect */
	double entry_timeout;
	double timeout;		/* seconds for an answer or a transfer */
	double reconnect_timeout; /* seconds of agent outage before EIO */
	double busy_timeout;	/* seconds a request may take while the
				 * agent is heard from */
	unsigned int max_batch;
	unsigned int spin_usec;	/* -o spin_usec, when spin_usec_set */
	int spin_usec_set;
	/* local: the private agent's staging; 0 = sized to RLIMIT_MEMLOCK */
	unsigned int queue_depth;
	unsigned int slot_size;
	int writeback;		/* -o writeback / nowriteback */
	int nowritebehind;	/* -o nowritebehind (wb.c) */
	int noparallel_direct;	/* -o noparallel_direct (fuseio.c) */
	int private_mount;	/* root: do not serve other users */
	int foreground;
	int debug;
	int single;
	int ro;
	int show_help;
	int show_version;
};

/* the xattrs whose absence an inode remembers (bcfs_inode_xattr_absent) */
enum {
	BCFS_XA_CAP,		/* security.capability */
	BCFS_XA_ACL,		/* system.posix_acl_access */
	BCFS_XA_DACL,		/* system.posix_acl_default */
	BCFS_XA_SELINUX,	/* security.selinux */
	BCFS_XA_N
};

/* One inode the kernel holds a reference to (a lookup count). */
struct bcfs_inode {
	uint64_t handle;	/* agent handle; immutable */
	/* the fields below are protected by bcfs_itable.lock */
	struct bcfs_inode *hnext;
	uint64_t nlookup;
	uint64_t parent;	/* handle of the parent it was last seen in */
	char *name;		/* its name there, for a reconnect */
	int64_t open_mtime;	/* mtime and size at the last open or */
	uint32_t open_mtime_nsec; /* writer's release, for keep_cache */
	uint64_t open_size;
	int open_valid;		/* 1 recorded, -1 opened unrecorded, 0 not */
	uint64_t absent_until[BCFS_XA_N]; /* that xattr is absent until (ns) */
	uint32_t xattr_gen;	/* setxattr/removexattr seen */
	uint64_t listed_until;	/* a directory: its listing kept until (ns) */
	int stale;		/* a restarted agent no longer has it */
	uint64_t data_gen;	/* news of its data changed elsewhere */
	uint64_t size_gen;	/* data_gen when the kernel's size was right */
	uint8_t fid[BCP_FID_LEN]; /* its lasting name, from the last entry */
};

struct bcfs_itable {
	pthread_mutex_t lock;
	/* protected by lock */
	struct bcfs_inode **buckets;
	size_t nbuckets;
	size_t count;
};

/*
 * A read or write in flight: the kernel request and the pieces it was
 * split into.  Preallocated (BCFS_RW_CTX of them); a FUSE thread waits for
 * a free one only when that many requests are already in flight.
 */
struct bcfs_rw {
	struct bcfs_rw *next;		/* free list, under bcfs.rw_lock */
	fuse_req_t req;
	int write;
	size_t whole;			/* fewer bytes written: EIO */
	unsigned int nchunks;
	unsigned int pending;		/* atomic */
	struct bcp_io *io[BCFS_RW_CHUNKS];
	int32_t result[BCFS_RW_CHUNKS];
	uint64_t t0;			/* sent (metrics.c) */
};

/* The embedded agent of local:DIR. */
#define BCFS_EMBED_BACKLOG	2048

struct bcfs_embed {
	pid_t pid;
	int log_fd;		/* read end of the agent's stderr, or -1 */
	pthread_t log_thread;
	int log_started;
	/*
	 * Until the agent is ready its lines are held back: a start that
	 * fails is told in one line built from them, one that succeeds
	 * passes them on.
	 */
	pthread_mutex_t log_lock;
	/* protected by log_lock */
	int log_live;
	size_t backlog_len;
	char backlog[BCFS_EMBED_BACKLOG];
	/* the staging asked for, and RLIMIT_MEMLOCK (0: none applies) */
	unsigned int queue_depth;
	unsigned int slot_size;
	unsigned long long memlock;
	char dir[256];		/* private directory holding the socket */
	char addr[300];		/* "unix:DIR/agent.sock" */
	char state[300];	/* DIR/state: the agent's --state-dir */
	const char *bin;	/* the agent binary */
	const char *root;	/* the directory it serves */
	/* the agent's restarts while the mount is up */
	pthread_t watch_thread;
	int watch_started;
	int stopping;		/* atomic: unmount; no more restarts */
	uint64_t restarts_ns[5]; /* when the last ones happened */
	unsigned int nrestarts;
};

struct bcfs {
	struct bcfs_opts o;
	struct bcp_client *client;
	uint64_t root;			/* the agent's root handle */
	uint64_t features;		/* negotiated BCP_FEAT_* */
	double neg_timeout;		/* ENOENT cached this long; 0: not */
	struct fuse_session *se;
	struct bcfs_itable itable;
	struct bcfs_embed embed;
	int embedded;
	int log_syslog;
	int parallel_dirops;		/* bcfs_init() asked for them */
	int direct_parallel;		/* atomic: the INIT reply took
					   FUSE_DIRECT_IO_ALLOW_MMAP (fuseio.c) */

	/* read/write contexts; lock order: rw_lock, then the client's */
	pthread_mutex_t rw_lock;
	pthread_cond_t rw_cond;
	/* protected by rw_lock */
	struct bcfs_rw *rw_free;
	struct bcfs_rw *rw_all;
	/* largest piece the pool hands out; shrinks on demand (atomic) */
	uint32_t chunk;
};

extern struct bcfs bcfs_g;

/*
 * fuseio.c: /dev/fuse read and written through libfuse's custom I/O hooks,
 * so the INIT reply carries FUSE_PARALLEL_DIROPS on every libfuse.  After
 * fuse_session_mount(); 0 or -errno (libfuse's own I/O then stays).
 */
int bcfs_fuseio_install(struct fuse_session *se);
/*
 * fuse_reply_open() (e NULL) or fuse_reply_create(); a direct-I/O open
 * (fi->direct_io) gets FOPEN_PARALLEL_DIRECT_WRITES on top, which
 * libfuse has no fuse_file_info bit for.
 */
int bcfs_reply_open(fuse_req_t req, const struct fuse_file_info *fi,
		    const struct fuse_entry_param *e);

/* log.c */
enum bcfs_level { BCFS_ERR, BCFS_WARN, BCFS_INFO, BCFS_DEBUG };
extern int bcfs_log_level;
void bcfs_log(enum bcfs_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void bcfs_log_to_syslog(void);
void bcfs_log_line(const char *line, size_t len);
#define bcfs_err(...)	bcfs_log(BCFS_ERR, __VA_ARGS__)
#define bcfs_warn(...)	bcfs_log(BCFS_WARN, __VA_ARGS__)
#define bcfs_info(...)	bcfs_log(BCFS_INFO, __VA_ARGS__)
#define bcfs_dbg(...) \
	do { \
		if (bcfs_log_level >= BCFS_DEBUG) \
			bcfs_log(BCFS_DEBUG, __VA_ARGS__); \
	} while (0)

/* main.c: once, from the first requests after INIT */
void bcfs_readahead_raise(void);

/* inode.c */
int bcfs_itable_init(struct bcfs_itable *t);
void bcfs_itable_fini(struct bcfs_itable *t);
/*
 * One more kernel reference to handle, found in parent under name; fid
 * (BCP_FID_LEN bytes, or NULL) is what the entry carried.
 */
int bcfs_inode_ref(uint64_t handle, uint64_t parent, const char *name,
		   size_t name_len, const uint8_t *fid);
/*
 * Resume: REBIND every inode with its lookup count on a new session, in
 * batches of BCP_REBINDS_MAX; an inode the agent no longer has is marked
 * stale.  Adds the handles taken back to *ok.  0 or -errno (the call
 * failed: the connection is gone again).
 */
int bcfs_inode_rebind_all(struct bcp_client *c, uint64_t *ok);

/* resume.c: the open files and directories, for REOPEN */
/*
 * fh opened on handle with flags (O_CREAT, O_EXCL and O_TRUNC are not
 * kept: a reopen must not do them again); dir for OPENDIR.  0 or -ENOMEM
 * (then it is simply not resumed).
 */
int bcfs_open_add(uint64_t fh, uint64_t handle, uint32_t flags, int dir);
void bcfs_open_del(uint64_t fh);
void bcfs_open_fini(void);
/* The client library's resume callback (opts.resume). */
int bcfs_resume(struct bcp_client *c, void *arg);
/* Drop n references; at zero the record goes.  Queues the agent FORGET. */
void bcfs_inode_forget(uint64_t handle, uint64_t n);
/*
 * keep_cache decision for an open: 1 when mtime and size equal those seen
 * at the previous open, and remember them either way.
 */
int bcfs_inode_open_check(uint64_t handle, const struct bcp_attr *a);
/* Forget the open state so that the next open refreshes the cache. */
void bcfs_inode_open_update(uint64_t handle, const struct bcp_attr *a);
/*
 * 1 at the first open of handle, when nothing was recorded: the open needs
 * no attributes (no page of it can be cached yet, keep_cache stays 0).
 * Later opens fetch and record them.
 */
int bcfs_inode_open_first(uint64_t handle);
/*
 * The size the kernel holds for handle, which it takes an O_APPEND
 * write's offset from, may be behind the file's (ops_rw.c,
 * bcfs_append_at()): bcfs_inode_data_news() after news that its data
 * changed elsewhere (or that this mount's append went past the kernel's
 * size); bcfs_inode_size_behind() is 1 since (and *gen the news seen),
 * until bcfs_inode_size_right() for that gen.
 */
void bcfs_inode_data_news(uint64_t handle);
int bcfs_inode_size_behind(uint64_t handle, uint64_t *gen);
void bcfs_inode_size_right(uint64_t handle, uint64_t gen);
/*
 * Negative cache of the xattrs the kernel asks for on its own
 * (ops_xattr.c): security.capability before every write, the POSIX
 * ACLs whenever it checks a non-owner's access and has dropped its
 * copy (each attribute refresh; never kept for the root), and what
 * ls -l asks of every name (security.selinux and the ACL).  1 while the
 * agent's -ENODATA for xattr kind is younger than attr_timeout; set after
 * such an answer, cleared for every kind by this mount's setxattr and
 * removexattr on the inode and by the agent's notification (which also
 * bump its generation, so that an answer in flight across them is not
 * cached).
 */
int bcfs_inode_xattr_absent(uint64_t handle, int kind, uint32_t *gen);
/* The agent said -ENODATA to a question asked at generation gen. */
void bcfs_inode_xattr_absent_known(uint64_t handle, int kind, uint32_t gen);
/* The agent said the object has no xattrs at all: every kind is absent. */
void bcfs_inode_xattr_none(uint64_t handle);
void bcfs_inode_xattr_forget(uint64_t handle);

/*
 * A directory's listing the kernel may keep (ops_dir.c): listed says the
 * agent was asked for it from the start (the entries the kernel got then
 * last entry_timeout); kept: whether that was less than entry_timeout
 * ago, so that a listing is never older than the names it lists.
 */
void bcfs_inode_listed(uint64_t handle);
int bcfs_inode_listing_kept(uint64_t handle);

/*
 * What the table knows, for dropping every cache: each inode with the
 * parent and name it was last seen under (name NULL when none).  Inodes
 * that come meanwhile are not in it.  0, or -ENOMEM with as much as could
 * be copied in *out (NULL names where copies failed); free it with
 * bcfs_inode_names_free() either way.
 */
struct bcfs_iname {
	uint64_t handle;
	uint64_t parent;
	char *name;
};
int bcfs_inode_names(struct bcfs_iname **out, size_t *n);
void bcfs_inode_names_free(struct bcfs_iname *v, size_t n);

/* notify.c: the agent's notifications, as kernel cache invalidations */
int bcfs_notify_init(void);
/* The client library's notify callback (opts.notify); never waits. */
void bcfs_notify_cb(void *arg, const struct bcp_notify_req *n,
		    const char *name);
/*
 * Queue for the kernel, as if the agent had sent it, an INODE notification
 * of handle: its attributes, and its pages from offset on (offset -1: the
 * attributes alone).  From a request handler: never waits.
 */
void bcfs_notify_self(uint64_t handle, int64_t offset);
/* Start the notifier thread once bcfs_g.se is mounted.  0 or -errno. */
int bcfs_notify_start(void);
/*
 * Wait (at most a second) until the kernel was told every notification
 * received so far.  From a FUSE request handler, never from the receiver
 * thread (the notifier may wait for a request the receiver answers).
 */
void bcfs_notify_sync(void);
/* Stop and free; the callback drops what comes after. */
void bcfs_notify_fini(void);
/*
 * The generation of notifications received so far.  A reply to a request
 * sent at generation gen is cached for timeout seconds only when no
 * notification that came meanwhile may have been about what it tells (it
 * may be older than what the notification told): bcfs_notify_timeout()
 * gives timeout or 0.
 */
uint64_t bcfs_notify_gen(void);
/*
 * Whether a notification since generation gen may have been about handle
 * a or b (0: none): one naming either, a RESET, or one no longer
 * remembered (the last 256 are).  A stream of news about other objects
 * leaves a reply about these cacheable.  _locked: within
 * bcfs_notify_lock(), which holds every notification off.
 */
int bcfs_notify_touched(uint64_t gen, uint64_t a, uint64_t b);
int bcfs_notify_touched_locked(uint64_t gen, uint64_t a, uint64_t b);
void bcfs_notify_lock(void);
void bcfs_notify_unlock(void);
/* timeout, or 0 when bcfs_notify_touched(gen, a, b) */
double bcfs_notify_timeout(double timeout, uint64_t gen, uint64_t a,
			   uint64_t b);
/*
 * The entry timeout for an ENOENT of name in parent (0: not cached),
 * remembered so that a RESET can drop it.
 */
double bcfs_notify_negative(fuse_ino_t parent, const char *name,
			    uint64_t gen);
/*
 * The same for an ENOENT known to hold for t seconds; of notify.c's locks
 * it takes only bcfs_neg's (dirs.c calls it under its own).
 */
double bcfs_notify_negative_for(fuse_ino_t parent, const char *name,
				double t);

/*
 * dirs.c: directories this mount made and knows every name of, whose
 * missing names it answers itself.
 *
 * made: handle is a directory MKDIR made, sent at notification generation
 * ngen (recorded only while nothing notified since may have been about
 * it).  add: name is about to be made in parent (before the request goes
 * out).  lookup: when parent is known in full and lacks name, answer req
 * ENOENT and return 1; 0 otherwise.  noted: a notification about handle
 * (RESET drops all), under the notify lock right after the generation
 * moved, before the kernel is told of it.  forget: the kernel forgot
 * handle.
 */
void bcfs_dirs_made(uint64_t handle, uint64_t ngen);
void bcfs_dirs_add(uint64_t parent, const char *name, size_t len);
int bcfs_dirs_lookup(fuse_req_t req, uint64_t parent, const char *name,
		     size_t len);
void bcfs_dirs_noted(uint32_t kind, uint64_t handle);
void bcfs_dirs_forget(uint64_t handle);
void bcfs_dirs_fini(void);

/*
 * dattr.c: the attributes of directories this mount changed, from the
 * agent's replies, for the GETATTR the kernel sends next.
 *
 * begin: a request that changes dir is about to go out; returns a ticket
 * (0: not followed).  end: its reply came (a: dir's attributes after it,
 * or NULL when it failed; ngen: bcfs_notify_gen() when it went out).
 * get: 1 with dir's attributes and how long they stay valid, while kept.
 * drop: handle changed otherwise.  moved: a RENAME between dir and dir2
 * succeeded (its ends came first); what it moved is not known, so every
 * other directory is dropped.  notified: a notification (RESET drops
 * everything), from the notify callback.  files: this mount ended a read,
 * a link, an unlink or an open that read or truncated some file (what is
 * kept of files is old).
 */
uint32_t bcfs_dattr_begin(uint64_t dir);
void bcfs_dattr_end(uint64_t dir, uint32_t ticket, const struct bcp_attr *a,
		    uint64_t ngen);
int bcfs_dattr_get(uint64_t dir, struct bcp_attr *out, double *timeout);
void bcfs_dattr_drop(uint64_t handle);
void bcfs_dattr_moved(uint64_t dir, uint64_t dir2);
void bcfs_dattr_notified(uint32_t kind, uint64_t handle);
void bcfs_dattr_files(void);

/*
 * peek.c: small files whose bytes came with their OPEN.
 *
 * take: a slot before the OPEN goes out (-1: none free, do not ask).  put:
 * give it back unused.  fill: the OPEN of fh (the file handle's), sent at
 * notification generation ngen and change count wgen, brought len bytes.
 * read: 1 when req was answered from them.  release: fh is closed.  dirty:
 * this mount begins or ends a change of some file's data.  wgen: the
 * change count.  bcfs_peek_lock is taken alone or before the notify lock.
 */
int bcfs_peek_take(void);
void bcfs_peek_put(int slot);
void bcfs_peek_fill(int slot, uint64_t fh, uint64_t handle, uint64_t ngen,
		    uint64_t wgen, const void *data, uint32_t len);
int bcfs_peek_read(fuse_req_t req, uint64_t fh, size_t size, off_t off);
void bcfs_peek_release(uint64_t fh);
void bcfs_peek_dirty(void);
uint64_t bcfs_peek_wgen(void);
void bcfs_peek_fini(void);

static inline uint64_t bcfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ops_attr.c: shared helpers for the operation families */
static inline uint64_t bcfs_handle(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? bcfs_g.root : (uint64_t)ino;
}

static inline fuse_ino_t bcfs_nodeid(uint64_t handle)
{
	return handle == bcfs_g.root ? FUSE_ROOT_ID : (fuse_ino_t)handle;
}

/* A zeroed request for op; the client library assigns the req_id. */
static inline void bcfs_msg(struct bcp_msg *m, uint16_t op)
{
	bcp_msg_init(m, op, 0);
}

/* Length of a name the wire can carry, or -ENAMETOOLONG. */
static inline int bcfs_name_len(const char *name)
{
	size_t len = strlen(name);

	return len > BCP_NAME_MAX ? -ENAMETOOLONG : (int)len;
}

void bcfs_attr_to_stat(const struct bcp_attr *a, struct stat *st);
/*
 * A synchronous call with a per-thread reply buffer of BCP_FRAME_MAX bytes:
 * rep's tails point into it until the thread's next call.
 */
int bcfs_call(struct bcp_msg *req, struct bcp_msg *rep);
/*
 * Moves whenever a request of this mount that may change what the agent
 * lists or describes begins or ends (and with bcfs_peek_wgen()); a reply
 * read while it stood still knows of every change this mount made.
 */
uint64_t bcfs_change_gen(void);

/* ops_dir.c: listings read ahead; a reconnect drops those read */
void bcfs_rda_resumed(void);

/*
 * A request answered from its reply on the client library's receiver
 * thread, so that no FUSE thread waits for the agent: take a context
 * (bcfs_acall_get blocks while all are in flight), fill what the answer
 * needs, and bcfs_acall_send().  answer runs once, on the receiver thread
 * (or on this one when nothing could be sent), with the agent's status or
 * a local -errno, and must not wait for the agent itself; the context goes
 * back after it.
 */
struct bcfs_acall;
typedef void (*bcfs_answer_fn)(struct bcfs_acall *a, int result);
struct bcfs_acall {
	struct bcp_call call;		/* call.rep: the decoded reply */
	fuse_req_t req;			/* NULL: nothing to answer */
	bcfs_answer_fn answer;
	uint64_t parent;		/* or the handle the request is about */
	char name[BCP_NAME_MAX + 1];
	struct fuse_file_info fi;
	uint32_t gen;
	uint64_t ngen;			/* bcfs_notify_gen() when sent */
	uint64_t xepoch;		/* bcfs_xattr_epoch() when sent */
	int changes;			/* counted by bcfs_change_gen() */
	/* dattr.c: the directories the request changes, and tickets */
	uint64_t dir, dir2;
	uint32_t dticket, dticket2;
	size_t size;
	struct bcfs_acall *next_free;
	struct bcfs_mtimer mt;		/* metrics.c */
	uint8_t rbuf[512];		/* entries, attributes, small values */
};
struct bcfs_acall *bcfs_acall_get(void);
void bcfs_acall_send(struct bcfs_acall *a, fuse_req_t req, struct bcp_msg *m,
		     bcfs_answer_fn answer);

/* The common answers, for bcfs_call_reply(). */
enum bcfs_reply {
	BCFS_REPLY_STATUS,		/* fuse_reply_err */
	BCFS_REPLY_ATTR,		/* fuse_reply_attr of an attr reply */
	BCFS_REPLY_ENTRY,		/* fuse_reply_entry of an entry reply,
					 * recorded in the inode table */
	BCFS_REPLY_LINK,		/* as ENTRY; a file's links moved */
	BCFS_REPLY_LOOKUP,		/* as ENTRY; ENOENT a negative entry */
	BCFS_REPLY_OPEN_ATTR,		/* no request; the attrs of a file
					 * closed after writing (inode.c) */
	BCFS_REPLY_MKDIR,		/* as ENTRY; the new directory is
					 * known in full (dirs.c) */
	BCFS_REPLY_REMOVE,		/* status of an UNLINK or RMDIR */
	BCFS_REPLY_RENAME,		/* status of a RENAME */
	BCFS_REPLY_CHANGED,		/* as STATUS; file data changed
					 * (peek.c) */
	BCFS_REPLY_SETATTR,		/* as ATTR; the node changed */
	BCFS_REPLY_TRUNCATE,		/* as SETATTR; file data changed */
};

/*
 * Send m and return at once; the receiver thread answers req from the
 * reply as kind says (an entry in parent under name, which is copied; for
 * OPEN_ATTR, parent is the file's handle).  Not on the receiver thread.
 */
void bcfs_call_reply(fuse_req_t req, struct bcp_msg *m, enum bcfs_reply kind,
		     uint64_t parent, const char *name);
/* an entry in parent; ngen: bcfs_notify_gen() when the request went out */
void bcfs_fill_entry(const struct bcp_entry *entry, uint64_t parent,
		     struct fuse_entry_param *e, uint64_t ngen);
/*
 * The errno an application sees for a status from the client library or
 * the agent (negative errno, 0 is success).  A lost agent connection is
 * -ENOTCONN there; to an application ENOTCONN on a FUSE mount means its
 * daemon died, which is not the case, so it becomes EIO.  An answer that
 * did not come within -o timeout is -ETIMEDOUT, which no file system call
 * returns: EIO too.  -EBADF is the agent's answer for an open file it does
 * not know (one that could not be opened again after the agent restarted
 * or the connection was lost; the kernel checks a descriptor's modes
 * before it asks): the application's descriptor is valid, the file is
 * lost, so EIO as well.
 */
static inline int bcfs_errno(int status)
{
	if (status >= 0)
		return 0;
	return status == -ENOTCONN || status == -ETIMEDOUT ||
	       status == -EBADF ? EIO : -status;
}

/* fuse_reply_err of a status, converted by bcfs_errno(). */
static inline void bcfs_reply_status(fuse_req_t req, int status)
{
	fuse_reply_err(req, bcfs_errno(status));
}

void bcfs_op_getattr(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi);
void bcfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		     int to_set, struct fuse_file_info *fi);
void bcfs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void bcfs_op_statfs(fuse_req_t req, fuse_ino_t ino);

/* ops_dir.c */
void bcfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void bcfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void bcfs_op_forget_multi(fuse_req_t req, size_t count,
			  struct fuse_forget_data *forgets);
void bcfs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, dev_t rdev);
void bcfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode);
void bcfs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		     const char *name);
void bcfs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		  const char *newname);
void bcfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void bcfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void bcfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname,
		    unsigned int flags);
void bcfs_op_opendir(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi);
void bcfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void bcfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			 off_t off, struct fuse_file_info *fi);
void bcfs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi);
void bcfs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		      struct fuse_file_info *fi);

/* ops_rw.c */
int bcfs_rw_init(void);
void bcfs_release_fh(uint64_t handle, uint64_t fh);
void bcfs_releases_wait(void);
void bcfs_rw_fini(void);
void bcfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void bcfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		    mode_t mode, struct fuse_file_info *fi);
void bcfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);
void bcfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		   size_t size, off_t off, struct fuse_file_info *fi);
void bcfs_op_write_buf(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_bufvec *bufv, off_t off,
		       struct fuse_file_info *fi);
void bcfs_op_release(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi);
void bcfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		   struct fuse_file_info *fi);
void bcfs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
		       off_t offset, off_t length, struct fuse_file_info *fi);
void bcfs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		   struct fuse_file_info *fi);
void bcfs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in,
			     off_t off_in, struct fuse_file_info *fi_in,
			     fuse_ino_t ino_out, off_t off_out,
			     struct fuse_file_info *fi_out, size_t len,
			     int flags);
void bcfs_op_flush(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi);

/* wb.c: write-behind for files this mount creates */
#define BCFS_WB_REPORT	1	/* bcfs_wb_flush: return (and clear) an error */
#define BCFS_WB_TRUNC	2	/* ... and forget the size written */
#define BCFS_WB_END	4	/* ... and gather no more (another open) */
void bcfs_wb_init(size_t pool_size);
int bcfs_wb_attach(uint64_t handle, uint64_t fh, int flags);
int bcfs_wb_write(fuse_req_t req, uint64_t handle, uint64_t fh, int through,
		  struct fuse_bufvec *bufv, size_t size, off_t off);
int bcfs_wb_flush(uint64_t handle, int how);
void bcfs_wb_close(fuse_req_t req, uint64_t handle);
void bcfs_wb_release(uint64_t handle, uint64_t fh);
void bcfs_wb_patch(uint64_t handle, struct stat *st);
void bcfs_wb_fini(void);

/* ops_xattr.c */
void bcfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      const char *value, size_t size, int flags);
void bcfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      size_t size);
void bcfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void bcfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
/*
 * Moved on by this mount's every setxattr and removexattr, before and
 * after: an answer to a request sent at another epoch may be older than
 * one of them.
 */
uint64_t bcfs_xattr_epoch(void);
/*
 * An entry the agent says has no xattrs (BCP_MODE_NO_XATTRS), recorded in
 * the inode table and filled into e (bcfs_fill_entry()): every kind's
 * absence is remembered, unless a change may have come since the request
 * went out (a notification zeroed e's attr_timeout; xepoch moved).
 */
void bcfs_xattr_hint(const struct bcp_entry *entry,
		     const struct fuse_entry_param *e, uint64_t xepoch);
/*
 * security.capability known absent from handle's file; when not known
 * and ask (not from the receiver), the agent is asked (and the answer
 * remembered as a GETXATTR's is).  1 absent, 0 present or not known.
 */
int bcfs_xattr_cap_absent(uint64_t handle, int ask);

/* embed.c: local:DIR */
/*
 * Start the agent on dir; fills e, including the address to connect to.
 * queue_depth and slot_size are the agent's staging (0: let the daemon
 * choose).  Unless the process may lock any amount of memory, the staging
 * is sized to fit RLIMIT_MEMLOCK (io_uring pins it), and a staging that
 * cannot fit fails with -ENOMEM and one line naming the limit.
 */
int bcfs_embed_start(const char *dir, unsigned int queue_depth,
		     unsigned int slot_size, struct bcfs_embed *e);
/*
 * Remove the socket, the state directory and the private directory.
 */
void bcfs_embed_dir_remove(struct bcfs_embed *e);
/*
 * Once the mount is up: watch the agent and, when it dies, log how and
 * start it again with the same arguments (at most 5 starts in 10 s, then
 * wait), so that the client library reconnects to it.  0 or -errno.
 */
int bcfs_embed_watch(struct bcfs_embed *e);
/*
 * Stop watching, SIGTERM, wait, remove the private directory.  Safe on a
 * zeroed e.
 */
void bcfs_embed_stop(struct bcfs_embed *e);

#endif /* BCFS_I_H */
