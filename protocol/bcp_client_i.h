/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_client_i.h - private declarations of the client library, shared by
 * bcp_client.c (session, threads, calls, batches), bcp_client_pool.c (the
 * buffer pool allocator) and bcp_client_xfer.c (the data transports).
 * Nothing outside protocol/bcp_client*.c includes it.
 *
 * Lock order: qlock, then wlock, then send_lock; send_lock and the pool
 * lock are leaves (nothing else is taken while holding them).
 */
#ifndef BCP_CLIENT_I_H
#define BCP_CLIENT_I_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "bcp_client.h"
#include "bcp_frame.h"

#define BCP_POOL_PAGE_SHIFT	12
#define BCP_POOL_PAGE		(1u << BCP_POOL_PAGE_SHIFT)
#define BCP_POOL_ORDERS		12	/* 4 KiB << 11 = BCP_SEG_LEN_MAX */
#define BCP_POOL_NONE		UINT32_MAX

/*
 * A buddy allocator over the registered pool.  Blocks are 4 KiB << order;
 * each block is named by the index of its first page, and the I/O
 * descriptor of a block is ios[that index], so descriptors need no list of
 * their own and are never allocated on the data path.
 */
struct bcp_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a block was freed, or closing */
	uint8_t *base;
	size_t size;			/* a multiple of BCP_POOL_PAGE */
	uint32_t npages;
	unsigned int max_order;
	struct bcp_io *ios;		/* npages descriptors */
	/* lock: */
	uint32_t free_head[BCP_POOL_ORDERS];
	uint32_t *next;			/* per page: free list links */
	uint32_t *prev;
	uint8_t *order;			/* per block head: its order */
	uint8_t *is_free;		/* per block head: on a free list */
	uint32_t waiters;
	int closing;
};

int bcp_pool_init(struct bcp_pool *p, void *base, size_t size);
void bcp_pool_fini(struct bcp_pool *p);
/* NULL when len can never fit, or when the pool is closing */
struct bcp_io *bcp_pool_get(struct bcp_pool *p, size_t len);
void bcp_pool_put(struct bcp_pool *p, struct bcp_io *io);
/* Wake every bcp_pool_get() waiter for good. */
void bcp_pool_close(struct bcp_pool *p);

/*
 * The session's state.  Only client_state_set() changes it, and it is
 * written with both qlock and wlock held, so either lock suffices to read
 * it.  With reconnect_timeout_ms, a loss goes READY -> PAUSED, a new
 * connection PAUSED -> RESUMING (resume runs, unanswered requests go out
 * again) -> READY; a loss while resuming goes back to PAUSED.
 */
enum bcp_client_state {
	BCP_CLIENT_CONNECTING = 0,	/* handshake, transport set-up */
	BCP_CLIENT_READY,		/* calls and I/O flow */
	BCP_CLIENT_BROKEN,		/* lost: all fail -ENOTCONN */
	BCP_CLIENT_CLOSING,		/* bcp_client_destroy() runs */
	BCP_CLIENT_PAUSED,		/* lost: requests wait, reconnecting */
	BCP_CLIENT_RESUMING,		/* new connection: resume, replay */
};

/*
 * With reconnect, a tracked request is encoded into its slot's buffer
 * (keep, this long; a larger one into a buffer the slot allocates once
 * and keeps) so that it can be sent again on a new connection.
 */
#define BCP_CLIENT_KEEP_LEN	1024

enum bcp_wslot_kind {
	BCP_WSLOT_FREE = 0,
	BCP_WSLOT_RESERVED,		/* the sender is building a batch */
	BCP_WSLOT_CALL,			/* a bcp_client_call() waits */
	BCP_WSLOT_ACALL,		/* a bcp_client_call_async() */
	BCP_WSLOT_BATCH,		/* a batch is in flight */
	BCP_WSLOT_ABANDONED,		/* its caller gave up (timeout): the
					 * agent still holds the request; the
					 * late reply frees the slot and undoes
					 * what it created */
};

/*
 * One outstanding request.  There are max_inflight of them (from HELLO),
 * so the client never has more requests outstanding than the agent takes.
 * req_id = generation << 32 | index.  A slot stays taken until its reply
 * comes (a caller that times out leaves it ABANDONED), so a reply whose
 * req_id matches no taken slot is the agent's error.
 */
struct bcp_wslot {
	/* wlock: */
	uint64_t req_id;
	enum bcp_wslot_kind kind;
	uint32_t next_free;
	pthread_cond_t cond;		/* CALL: the reply arrived */
	struct bcp_msg *rep;		/* CALL */
	void *rbuf;
	size_t rcap;
	int result;
	int done;
	uint16_t op;			/* the request's opcode */
	uint32_t count;
	uint64_t start_ms;		/* when it was taken (monotonic) */
	uint64_t handle;		/* OPEN, OPENDIR: its handle */
	uint32_t plus;			/* READDIR: plus entries asked for */
	int inl;			/* BATCH: BCP_BATCH_INLINE asked */
	struct bcp_io *head;
	struct bcp_call *call;		/* ACALL */
	uint64_t epoch;			/* the connection it was taken on */
	uint8_t *keep;			/* reconnect: BCP_CLIENT_KEEP_LEN */
	uint8_t *keep_big;		/* reconnect: BCP_FRAME_MAX, or NULL */
	uint8_t *frame;			/* keep or keep_big: the request */
	uint32_t frame_len;		/* 0: none kept */
	int resend;			/* send again on the next connection */
};

/*
 * Adaptive spinning of a thread that waits for a frame it expects within
 * microseconds (bcp_client.c client_spin_*): it polls instead of sleeping,
 * which saves its wake-up, the dearest step of a round trip when it lands
 * on an idle (halted) CPU.  It spins only while the machine has an idle
 * CPU (the count of runnable threads in /proc/loadavg, sampled at most
 * every BCP_SPIN_SAMPLE_NS, is below the number of CPUs) and for at most
 * usec after the last frame sent or received, yielding the CPU between
 * polls, so that it costs nothing under load and never keeps a runnable
 * thread off its CPU.  Owned by the one thread that spins.
 */
#define BCP_SPIN_SAMPLE_NS	1000000ull
#define BCP_SPIN_USEC_MAX	10000

struct bcp_spin {
	unsigned int usec;		/* 0: never spin */
	unsigned int ncpus;		/* online CPUs */
	int loadavg_fd;			/* /proc/loadavg, or -1 */
	int open;			/* the last sample allowed spinning */
	uint64_t next_ns;		/* when to sample again (monotonic) */
	uint64_t spun;			/* frames found while spinning */
	uint64_t slept;			/* waits that ended in a sleep */
};

/* Request ids with this bit are untracked (FORGET): replies are dropped. */
#define BCP_REQ_UNTRACKED	(1ull << 63)

/*
 * FORGETs queue up to BCP_FORGETS_MAX; callers other than the receiver
 * thread wait above that.  The receiver never waits (it would stop reading
 * the replies the agent waits to send): it may fill the queue up to
 * BCP_CLIENT_FORGETQ, and drops (with a warning) beyond.
 */
#define BCP_CLIENT_FORGETQ	(2 * BCP_FORGETS_MAX)
/* Requests the receiver thread posts (RELEASE), encoded, for the sender. */
#define BCP_CLIENT_POSTQ	256
#define BCP_CLIENT_POST_LEN	128

struct bcp_client {
	struct bcp_client_opts opts;
	char addr_str[300];
	struct bcp_addr addr;
	uint8_t *secret;
	size_t secret_len;

	int ctl;			/* control socket */
	int data;			/* tcp: the data connection; rdma: the
					 * watcher's wake-up socket; else -1 */
	struct bcp_crdma *rdma;		/* rdma: queue pair, pool's MR */
	int memfd;			/* shm: the pool's memfd, else -1 */
	uint8_t nonce_c[BCP_NONCE_LEN];
	struct bcp_hello_rep hello;
	uint64_t root;
	enum bcp_transport transport;
	uint32_t region_id;
	uint32_t max_segs;		/* segments per batch, all limits met */
	uint32_t next_queue;		/* sender only: queue to serve first */

	/* The pool memory; owned by the transport that mapped it. */
	void *pool_base;
	size_t pool_len;
	struct bcp_pool pool;

	pthread_mutex_t qlock;
	pthread_cond_t qcond;		/* the sender: work arrived */
	/* qlock: */
	struct bcp_io *qhead[2];	/* [0] pulls, [1] pushes */
	struct bcp_io *qtail[2];
	uint32_t qlen[2];
	pthread_cond_t fcond;		/* the FORGET queue drained */
	struct bcp_forget_one *forgets;	/* BCP_CLIENT_FORGETQ */
	uint32_t nforgets;
	uint8_t *posts;			/* BCP_CLIENT_POSTQ frames of
					 * BCP_CLIENT_POST_LEN bytes */
	uint16_t post_len[BCP_CLIENT_POSTQ];
	uint32_t post_head;		/* oldest queued post */
	uint32_t nposts;
	uint64_t dropped;		/* FORGETs and posts the receiver
					 * could not queue */
	int sender_sleeping;
	int direct_busy;		/* a submitter sends on its own */

	pthread_mutex_t wlock;
	pthread_cond_t slot_cond;	/* a slot was freed */
	/* wlock: */
	struct bcp_wslot *slots;
	uint32_t nslots;
	uint32_t free_slot;
	uint32_t gen;
	uint32_t nbusy;			/* slots taken */

	/* qlock and wlock (written with both held): */
	enum bcp_client_state state;
	uint64_t pause_start_ms;	/* when the outage began */
	int expired;			/* paused past reconnect_timeout_ms */
	int closing;			/* wlock: bcp_client_destroy() began */
	/* qlock, wlock and send_lock (written with all three held): */
	uint64_t epoch;			/* bumped as a connection is dropped */

	/* reconnect (opts.reconnect_timeout_ms > 0) */
	uint8_t client_id[BCP_CLIENT_ID_LEN];
	uint8_t *keeps;			/* nslots * BCP_CLIENT_KEEP_LEN */
	pthread_cond_t rcond;		/* under wlock: the reconnect thread */
	pthread_t reconn;
	int have_reconn;
	uint64_t resume_seq;		/* reconnect thread: resume req_ids */
	uint64_t resumed_handles;	/* reconnect thread: from resume */
	uint64_t resumed_files;
	int resumed_noted;

	pthread_mutex_t send_lock;
	/* send_lock: */
	uint8_t *sbuf;			/* encode buffer of bcp_client_call() */

	/* thread-private buffers, allocated once */
	struct bcp_frame_reader rd;	/* receiver */
	struct bcp_spin rspin;		/* receiver: its spinning */
	uint64_t rd_last_ns;		/* receiver: its last frame */
	uint8_t *bbuf;			/* sender */
	uint64_t next_scan_ms;		/* sender: next look for overdue
					 * requests */
	/* liveness (opts.busy_timeout_ms): */
	uint64_t heard_ms;		/* a PING's answer or a NOTIFY BUSY
					 * came (atomic, client_heard()) */
	int ping_out;			/* a PING is in flight (atomic) */
	struct bcp_call ping_call;	/* sender: that PING */
	uint8_t ping_buf[256];		/* its reply */
	struct bcp_seg *segs;		/* sender */
	/* the submitter that holds direct_busy (qlock): */
	uint8_t *dbuf_batch;		/* encode buffer of its batch */
	struct bcp_seg *dsegs;		/* its batch's segments */
	struct bcp_forget_one *fbuf;	/* sender */
	uint8_t *dbuf;			/* data thread: discard buffer */

	pthread_t receiver;
	pthread_t sender;
	pthread_t data_thread;
	int have_receiver;
	int have_sender;
	int have_data_thread;

	/* atomics */
	struct bcp_client_stats stats;
	uint64_t forget_seq;		/* ids of untracked requests */
	uint64_t last_send_ns;		/* the last frame sent (monotonic) */
};

/*
 * Start one of the client's threads (receiver, sender, data) with fn(c),
 * set *have, and name it for top -H and perf (at most 15 characters).
 */
int bcp_client_thread_start(struct bcp_client *c, pthread_t *th, int *have,
			    void *(*fn)(void *), const char *name);

/* log.  level: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
void bcp_client_logf(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * REGISTER_REGION of the whole pool as a region of kind (shm: pass_fd is
 * the memfd; rdma: addr and rkey of its memory region).  Returns the
 * agent's status, or a local -errno; err says why.
 */
int bcp_client_register_pool(struct bcp_client *c, uint32_t kind,
			     int pass_fd, uint64_t addr, uint32_t rkey,
			     char *err, size_t errlen);

/*
 * A synchronous request/reply on a socket no thread reads yet (handshake,
 * set-up).  Returns 0 with the reply's status in *status (rep decoded into
 * buf), or a local -errno with err set.
 */
int bcp_client_rpc_sync(struct bcp_client *c, int sock, struct bcp_msg *req,
			int pass_fd, struct bcp_msg *rep, void *buf,
			size_t cap, int32_t *status, char *err,
			size_t errlen);

/*
 * Mark the session lost (from any thread): without reconnect, fail what
 * is pending; with it, pause.  Only from threads of the current
 * connection (receiver, data): the reconnect thread joins them before it
 * drops the connection.
 */
void bcp_client_break(struct bcp_client *c, const char *why);

/* Transports: set up the pool and register it; tear it down. */
int bcp_client_xfer_setup(struct bcp_client *c, enum bcp_transport t,
			  char *err, size_t errlen);
int bcp_client_xfer_start(struct bcp_client *c);
void bcp_client_xfer_teardown(struct bcp_client *c);
/*
 * Reconnect: drop the transport's connection but keep the pool memory
 * (disconnect); connect it again on the new control connection and
 * register the same pool (reconnect; 0 or -errno + err).
 */
void bcp_client_xfer_disconnect(struct bcp_client *c);
int bcp_client_xfer_reconnect(struct bcp_client *c, char *err,
			      size_t errlen);

#ifdef HAVE_RDMA
/* bcp_client_rdma.c.  1 when this host has an RDMA device. */
int bcp_client_rdma_available(void);
/* Pool, queue pair, rdma_connect, REGISTER_REGION.  0 or -errno + err. */
int bcp_client_rdma_setup(struct bcp_client *c, char *err, size_t errlen);
/* The thread that breaks the session when the connection drops. */
int bcp_client_rdma_start(struct bcp_client *c);
/* Disconnect, free the verbs objects (not the pool); NULL-safe. */
void bcp_client_rdma_teardown(struct bcp_client *c);
#else
static inline int bcp_client_rdma_available(void)
{
	return 0;
}

static inline int bcp_client_rdma_setup(struct bcp_client *c, char *err,
					size_t errlen)
{
	snprintf(err, errlen,
		 "transport rdma is not built into this client (use tcp or shm)");
	return -EOPNOTSUPP;
}

static inline int bcp_client_rdma_start(struct bcp_client *c)
{
	return -EOPNOTSUPP;
}

static inline void bcp_client_rdma_teardown(struct bcp_client *c)
{
}
#endif /* HAVE_RDMA */

#endif /* BCP_CLIENT_I_H */
