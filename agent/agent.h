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

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <liburing.h>

#include "bcp_codec.h"
#include "bcp_frame.h"

#define AGENT_NAME		"bluecache-agent"
#define AGENT_LISTEN_MAX	16
#define AGENT_SESSIONS_MAX	128	/* sessions on the whole agent */
#define AGENT_INFLIGHT_MAX	32	/* outstanding batches per session */
#define AGENT_HANDLES_MAX	(1u << 20) /* handles per session */
#define AGENT_FILES_MAX		65536	/* open fhs per session */
#define AGENT_HANDSHAKE_MS	10000	/* HELLO..AUTH must finish in this */
#define AGENT_DRAIN_MS		10000	/* SIGTERM: time to finish in flight */

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
	char *root;
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
	int completion;			/* enum bcp_xsrv_completion */
	unsigned int poll_usec;		/* adaptive polling window */
	unsigned int inline_max;	/* shm: segments tried inline, bytes */
	unsigned int spin_usec;		/* worker: poll before sleeping */
	int meta_io;			/* enum agent_meta_io */
	/* derived */
	uint8_t *secret;		/* NULL: the empty secret */
	size_t secret_len;
	int root_fd;			/* O_PATH of the data root */
};

extern struct agent_config agent_cfg;

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

/* worker.c */
struct agent_worker;
int agent_workers_start(unsigned int n);
/* Give a connection whose first frame (frame[len]) was read to a worker. */
void agent_worker_hand(int fd, const char *peer, const void *frame,
		       size_t len, int is_unix);
/* Ask every worker to drain and stop; wait; merge their stats. */
void agent_workers_stop(struct agent_stats *total);
/* Live sessions on the whole agent (for the limit in main.c). */
unsigned int agent_sessions_live(void);
/* Sessions counted from the HELLO handed over until freed. */
extern atomic_uint agent_live_sessions;

#endif /* AGENT_H */
