/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent.h - declarations shared by the modules of bluecache-agent:
 * configuration, logging, statistics, the io_uring wrapper used for
 * metadata operations, and the worker/session entry points.
 *
 * Threads: the main thread accepts connections, reads each one's first
 * frame and hands the connection to a worker; each worker runs one event
 * loop with its own io_uring, staging slots and sessions.  Nothing below is
 * shared between workers except the read-only configuration and the
 * inboxes (see worker.c).
 */
#ifndef AGENT_H
#define AGENT_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <liburing.h>

#include "bcp_codec.h"
#include "bcp_frame.h"
#include "notify.h"

#define AGENT_NAME		"bluecache-agent"
#define AGENT_LISTEN_MAX	16
#define AGENT_INFLIGHT_MAX	32	/* outstanding batches per session */
#define AGENT_HANDLES_MAX	(1u << 20) /* handles per session */
#define AGENT_FILES_MAX		65536	/* open fhs per session */
#define AGENT_DRAIN_MS		10000	/* SIGTERM: time to finish in flight */
#define AGENT_FD_CACHE_DEFAULT	1024	/* node descriptors per session */
#define AGENT_STATE_DIR		"/var/lib/bluecache-agent"

enum agent_log_level {
	AGENT_LOG_ERROR = 0,
	AGENT_LOG_WARNING,
	AGENT_LOG_INFO,
	AGENT_LOG_DEBUG,
};

/* How metadata operations run (--meta-io, store.c). */
enum agent_meta_io {
	AGENT_META_SYNC,		/* the system call on the worker */
	AGENT_META_URING,		/* submitted to the ring, waited for */
};

struct agent_config {
	char *root;			/* posix store: its dir, or NULL */
	char *listen[AGENT_LISTEN_MAX];
	unsigned int nlisten;
	char *secret_file;
	unsigned int queue_depth;	/* slots per worker */
	unsigned int slot_size;
	unsigned int workers;
	int log_level;
	int foreground;
	int ready_fd;
	char *rdma_listen;		/* ADDR[:PORT], or NULL */
	char *metrics_listen;		/* ADDR:PORT, or NULL */
	int completion;			/* enum bcp_xsrv_completion */
	unsigned int poll_usec;		/* adaptive polling window */
	unsigned int inline_max;	/* shm: segments tried inline, bytes */
	unsigned int spin_usec;		/* worker: poll before sleeping */
	int meta_io;			/* enum agent_meta_io */
	/* identity policy (doc/security.md) */
	int squash;			/* enum agent_squash: tcp/rdma hosts */
	uint32_t anon_uid, anon_gid;	/* what squashed ids become */
	int allow_devices;		/* MKNOD of block/char devices */
	/* per-session limits (doc/security.md); 0 = derived at start-up */
	unsigned int max_handles;	/* handles a session holds */
	unsigned int max_files;		/* open fhs a session holds */
	unsigned int max_regions;	/* registered regions */
	uint64_t max_region_bytes;	/* all regions of a session, bytes */
	unsigned int max_slots;		/* staging slots one session holds */
	/* agent-wide limits and timeouts */
	unsigned int max_sessions;	/* authenticated or not */
	unsigned int max_unauth;	/* connections not yet authenticated */
	unsigned int handshake_ms;	/* connect .. AUTH done */
	unsigned int xfer_timeout_ms;	/* one transfer on a data connection */
	unsigned int pool_threads;	/* blocking pool (pool.c) */
	unsigned int store_timeout_s;	/* opening the store at start-up */
	/* resuming (resume.h) */
	char *state_dir;		/* NULL: AGENT_STATE_DIR; "none" */
	unsigned int fd_cache;		/* node descriptors a session caches */
	/* derived */
	uint8_t *secret;		/* NULL: the empty secret */
	size_t secret_len;
	int root_fd;			/* posix store: O_PATH of its root;
					 * -1 for a store without one */
};

extern struct agent_config agent_cfg;
/* Guards agent_cfg.secret and secret_len, which SIGHUP may replace. */
extern pthread_mutex_t agent_secret_lock;

/*
 * Identity policy, like NFS exports: what a session may make the agent
 * store as owner, and which privileged names it may set.
 */
enum agent_squash {
	AGENT_SQUASH_NONE = 0,		/* ids stored as the host sends them */
	AGENT_SQUASH_ROOT,		/* uid/gid 0 become anon_uid/gid */
	AGENT_SQUASH_ALL,		/* every id becomes anon_uid/gid */
};

/* A session's identity policy, fixed when the session starts. */
struct agent_ident {
	int squash;			/* enum agent_squash */
	uint32_t anon_uid, anon_gid;
	int allow_devices;		/* may MKNOD block/char devices */
};

/* The id a session with policy in may store for uid (or gid). */
static inline uint32_t agent_ident_map(const struct agent_ident *in,
				       uint32_t id, int gid)
{
	uint32_t anon = gid ? in->anon_gid : in->anon_uid;

	if (id == (uint32_t)-1)
		return id;
	switch (in->squash) {
	case AGENT_SQUASH_ALL:
		return anon;
	case AGENT_SQUASH_ROOT:
		return id == 0 ? anon : id;
	default:
		return id;
	}
}

/*
 * Descriptors: the agent-wide budget (RLIMIT_NOFILE less a reserve for
 * listeners, connections and the pool) that handles and open files of
 * every session draw from; agent_fd_take() fails with -ENFILE when it is
 * spent, so no session can starve accept(2) or another session.
 */
extern atomic_long agent_fds_used;
extern long agent_fds_budget;
static inline int agent_fd_take(void)
{
	if (atomic_fetch_add(&agent_fds_used, 1) >= agent_fds_budget) {
		atomic_fetch_sub(&agent_fds_used, 1);
		return -ENFILE;
	}
	return 0;
}
static inline void agent_fd_give(void)
{
	atomic_fetch_sub(&agent_fds_used, 1);
}

/*
 * linger.c: a file removed while a session held it open is kept, when the
 * session ends, AGENT_LINGER_S seconds (at most AGENT_LINGER_MAX of them
 * for all sessions, the oldest going first), so that its host, which
 * reconnects and opens it again by handle, still finds it.  owner names
 * the session (its store); NULL: a store that tells by itself whether
 * another session holds the file (a cephfs store counts its Fhs).
 * keep_obj: keeps the open file obj of the removed object (dev, ino)
 * (close_fn(obj) lets go of it, under linger.c's lock: it must not block)
 * and returns 1; 0 (stopping, or another session opened the file again
 * already) leaves obj to the caller.  keep: the
 * same for a descriptor (and its unit of the descriptor budget), when fd
 * is a regular file with no name left.  claim_obj: owner just opened
 * (dev, ino) again; what lingers of it is let go, or, when nothing does,
 * what another session hands over of it later.  claim: the same for a new
 * descriptor.  forget: owner ends; its claims go.  holds: whether
 * (dev, ino) lingers.  expire: lets go of those past their time (cheap
 * while none lingers).  fini: lets go of all, keeps nothing from then on.
 * Any thread.
 */
#define AGENT_LINGER_S		60
#define AGENT_LINGER_MAX	256
typedef void (*agent_linger_close_fn)(void *obj);
int agent_linger_keep_obj(uint64_t dev, uint64_t ino, const void *owner,
			  agent_linger_close_fn close_fn, void *obj);
int agent_linger_keep(int fd, const void *owner);
void agent_linger_claim_obj(uint64_t dev, uint64_t ino, const void *owner);
void agent_linger_claim(int fd, const void *owner);
void agent_linger_forget(const void *owner);
int agent_linger_holds(uint64_t dev, uint64_t ino);
void agent_linger_expire(void);
void agent_linger_fini(void);

/* log.c: "bluecache-agent: LEVEL: message" on stderr. */
void agent_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int agent_log_level_parse(const char *s);
#define agent_err(...)	agent_log(AGENT_LOG_ERROR, __VA_ARGS__)
#define agent_warn(...)	agent_log(AGENT_LOG_WARNING, __VA_ARGS__)
#define agent_info(...)	agent_log(AGENT_LOG_INFO, __VA_ARGS__)
#define agent_dbg(...)	agent_log(AGENT_LOG_DEBUG, __VA_ARGS__)
/* Rate-limited warning for the data path: at most a few per second. */
void agent_warn_rl(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/*
 * The source of a peer name (main.c's "unix:pid=N,uid=M", "ADDR:PORT",
 * "[ADDR6]:PORT"): the process, or the address whatever the port, as a
 * hash to count connections per source in one pass (a collision only
 * merges two sources' counts).  When connections that have not
 * authenticated must make room, the source holding the most gives up its
 * oldest, so one flooding source cannot crowd out a host that connects
 * once.
 */
#define AGENT_PEER_BUCKETS	512
static inline unsigned int agent_peer_hash(const char *p)
{
	const char *end = NULL;
	uint32_t h = 2166136261u;

	if (strncmp(p, "unix", 4))
		end = strrchr(p, ':');
	for (; *p && p != end; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h % AGENT_PEER_BUCKETS;
}

/* Monotonic time in nanoseconds. */
uint64_t agent_now_ns(void);

/* stats.c: counters and a fixed latency histogram per opcode. */
#define AGENT_HIST_BUCKETS	40	/* log2 of microseconds */
struct agent_op_stats {
	uint64_t count;
	uint64_t failed;
	uint64_t hist[AGENT_HIST_BUCKETS];
};
struct agent_stats {
	struct agent_op_stats op[BCP_OP_MAX];
	uint64_t bytes_pulled;		/* object -> host */
	uint64_t bytes_pushed;		/* host -> object */
	uint64_t segs;
	uint64_t seg_failed;
	uint64_t inline_segs;		/* shm segments moved inline */
	uint64_t inline_missed;		/* tried inline, left to staging */
	uint64_t pool_batches;		/* moved whole by a pool thread */
	uint64_t pool_sent;		/* replies a pool thread sent */
	uint64_t pool_part;		/* ... of which the worker ended */
	uint64_t sessions;
	uint64_t bad_frames;
	uint64_t auth_failed;
};
void agent_stats_op(struct agent_stats *st, uint16_t op, int status,
		    uint64_t start_ns);
void agent_stats_add(struct agent_stats *to, const struct agent_stats *from);
void agent_stats_print(const struct agent_stats *st);

/*
 * ring.c: the worker's io_uring.  Storage transfers complete through the
 * event loop; a metadata operation is submitted and awaited with
 * agent_ring_wait(), which keeps reaping and parks the other completions
 * for the loop (no allocation: the park has room for every SQE).
 */
struct agent_ring_cqe {
	uint64_t user_data;
	int32_t res;
};
struct agent_ring {
	struct io_uring ring;
	int efd;			/* eventfd signalled on completions */
	struct agent_ring_cqe *parked;
	unsigned int nparked, cap;
};
int agent_ring_init(struct agent_ring *r, unsigned int entries);
void agent_ring_fini(struct agent_ring *r);
/* An SQE, submitting what is queued when the SQ is full.  Never NULL. */
struct io_uring_sqe *agent_ring_sqe(struct agent_ring *r);
/* Submit sqe (from agent_ring_sqe) and wait for its result (res). */
int agent_ring_wait(struct agent_ring *r, struct io_uring_sqe *sqe);

/*
 * pool.c: a few threads for system calls that may block for long (fsync
 * of a large file, copy_file_range, getdents of a huge directory), so a
 * worker's event loop never waits on them.  A job is submitted from a
 * worker; run() executes on a pool thread; done() runs back on the
 * submitting worker's thread (through its inbox).  The caller owns the
 * job until done() has run.
 */
struct agent_job {
	void (*run)(struct agent_job *j);	/* pool thread */
	void (*done)(struct agent_job *j);	/* the worker's thread */
	struct agent_worker *w;
	struct agent_job *next;
};
int agent_pool_start(unsigned int nthreads);
void agent_pool_stop(void);
/* j runs run() on a pool thread, then done() on worker w. */
void agent_pool_submit(struct agent_job *j, void (*run)(struct agent_job *),
		       void (*done)(struct agent_job *),
		       struct agent_worker *w);

/* worker.c */
struct agent_worker;
int agent_workers_start(unsigned int n);
/* Give a connection whose first frame (frame[len]) was read to a worker. */
void agent_worker_hand(int fd, const char *peer, const void *frame,
		       size_t len, int is_unix);
/* Ask every worker to drain and stop; wait; merge their stats. */
void agent_workers_stop(struct agent_stats *total);
/*
 * Sessions that count against --max-sessions (main.c): the authenticated
 * ones, plus the unauthenticated ones (HELLOs still in inboxes included)
 * up to --max-unauth, so a flood of idle handshakes cannot fill the table.
 */
unsigned int agent_sessions_live(void);
/* Sessions counted from the HELLO handed over until freed. */
extern atomic_uint agent_live_sessions;

#endif /* AGENT_H */
