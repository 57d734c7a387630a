/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * worker_i.h - private to worker.c, session.c and batch.c: the worker's
 * event loop state, sessions, batches and staging slots.
 *
 * Everything here belongs to one worker thread, except the inbox (under
 * inbox_lock) and the stop flag (atomic).
 */
#ifndef AGENT_WORKER_I_H
#define AGENT_WORKER_I_H

#include <pthread.h>
#include <stdatomic.h>

#include "agent.h"
#include "metrics.h"
#include "bcp_xfer_srv.h"
#include "notify.h"
#include "resume.h"
#include "store.h"

enum agent_tag_kind {
	AGENT_TAG_RING = 1,
	AGENT_TAG_INBOX,
	AGENT_TAG_CTL,
	AGENT_TAG_DATA,
};

struct agent_tag {
	enum agent_tag_kind kind;
	void *ptr;
};

enum agent_slot_state {
	SLOT_FREE = 0,
	SLOT_READING,		/* storage read into the slot (PULL) */
	SLOT_XFER,		/* transfer to or from the host region */
	SLOT_WRITING,		/* storage write from the slot (PUSH) */
};

struct agent_slot {
	struct bcp_xsrv_op op;		/* first: completions find the slot */
	/*
	 * The storage I/O of a file without a descriptor (file_get() gave
	 * fd -1), done with file_rw() on the blocking pool; res is its
	 * result, written by the pool thread before the job is handed back.
	 */
	struct agent_job job;
	ssize_t res;
	struct agent_worker *w;
	uint8_t *buf;
	unsigned int idx;		/* fixed buffer index */
	enum agent_slot_state state;
	struct agent_batch *b;
	uint32_t seg;
	uint64_t off;			/* chunk offset within the segment */
	uint32_t len;			/* chunk length (PULL: bytes read) */
	uint32_t done;			/* PUSH: bytes written so far */
	uint64_t t_state;		/* entered its state (metrics.c) */
	struct agent_slot *next;	/* free list */
};

/*
 * A reply a pool thread sent itself (agent_session_pool_send()), of
 * which the socket took only sent of len bytes: the worker sends the
 * rest, at buf + sent, before anything else (agent_session_pool_rest()).
 */
struct agent_out_rest {
	const uint8_t *buf;
	uint32_t len, sent;
};

/* Segments a batch may have to be moved whole by a pool thread. */
#define AGENT_POOL_SEGS	16

struct agent_batch {
	struct agent_session *s;
	uint16_t op;
	uint64_t req_id;
	uint64_t t0;
	uint32_t count;
	uint32_t cur_seg;		/* next chunk to start */
	uint64_t cur_off;
	uint32_t chunks_out;		/* chunks holding a slot */
	int queued;			/* waiting for slots */
	struct agent_batch *next;	/* worker's ring or session free list */
	struct agent_batch *snext;	/* next waiting batch of the session */
	uint32_t lim[BCP_SEGS_MAX];	/* end of the data moved without a
					 * gap (short or failed chunks);
					 * PUSH, once done: UINT32_MAX when
					 * an earlier segment of the same
					 * file told the holders */
	struct bcp_seg segs[BCP_SEGS_MAX];
	int32_t st[BCP_SEGS_MAX];
	uint32_t skip[BCP_SEGS_MAX];	/* bytes already moved inline */
	struct agent_file *files[BCP_SEGS_MAX];
	int fds[BCP_SEGS_MAX];
	/*
	 * BCP_BATCH_INLINE taken: the bytes move through ibuf (a push's
	 * from the request, a pull's into the reply), segment i's at
	 * ipos[i], instead of the host's region.  ibuf is the batch's
	 * for the session's life, grown as needed (batch.c).
	 */
	int inl;
	uint32_t ilen;			/* bytes of every segment */
	uint32_t icap;			/* bytes ibuf holds */
	uint8_t *ibuf;
	uint32_t ipos[BCP_SEGS_MAX];
	/*
	 * A blocking store's small batch moved whole by a pool thread
	 * (batch.c, batch_pool_*): pmap[i] is segment i's bytes in the host's
	 * region or ibuf; the reply, encoded in obuf (ocap bytes), was sent
	 * from there when sent.  ipacked: an inline pull's bytes were packed
	 * (plen of them).
	 */
	int pooled, sent, ipacked;
	uint32_t plen;
	uint64_t t_store;		/* the pool thread's storage stage */
	struct agent_job job;
	void *pmap[AGENT_POOL_SEGS];
	uint8_t *obuf;
	uint32_t ocap;
	struct agent_out_rest rest;
};

enum agent_session_state {
	SESS_AUTH = 1,		/* HELLO answered, AUTH expected */
	SESS_READY,		/* authenticated */
	SESS_CLOSING,		/* no more requests; flush, drain, close */
};

#define SESS_RCAP	(BCP_FRAME_MAX + 4096)
/* one full reply per frame read, plus every batch reply in flight */
#define SESS_BATCH_REP_MAX (BCP_HDR_SIZE + 8 + 4 * BCP_SEGS_MAX + 8)
#define SESS_JOBS_MAX	2	/* blocking-pool calls a session has out */
/*
 * ... when its store is AGENT_STORE_BLOCKING: every request that calls
 * the store is a pool call then, so several may wait for the store at
 * once.  Their replies are mostly small (SESS_REP_SMALL each): the
 * output buffer below holds the room all of them reserve.
 */
#define SESS_JOBS_BLOCKING 16
#define SESS_WCAP	((2 + SESS_JOBS_MAX) * BCP_FRAME_MAX + \
			 AGENT_INFLIGHT_MAX * SESS_BATCH_REP_MAX)
#define SESS_FDS_MAX	4
/* The reply of a metadata request without a variable-length tail. */
#define SESS_REP_SMALL	8192u
/* A reply's data: an xattr value or list, a symlink's target. */
#define SESS_TAIL_MAX	(BCP_XATTR_LIST_MAX > BCP_READDIR_MAX ? \
			 BCP_XATTR_LIST_MAX : BCP_READDIR_MAX)
/*
 * A blocking store's request keeps in its job: the frame (the decoded
 * message points into it), the reply's data and REBIND's statuses.
 */
#define SESS_JOB_BUF	(BCP_FRAME_MAX + SESS_TAIL_MAX + \
			 BCP_REBINDS_MAX * sizeof(int32_t))
/* A reply a pool thread sends itself: a small file's bytes at most. */
#define SESS_OBUF	(SESS_REP_SMALL + BCP_OPEN_PEEK_MAX)

/*
 * A request served on the blocking pool (session.c): one of the calls
 * that may block for long in every store (call, through call_begin/run/
 * end), or, when the session's store is AGENT_STORE_BLOCKING, any request
 * that calls the store (m, rep: the store calls run in run(); the reply
 * cache, stats and the reply stay on the worker, in done()).
 */
struct agent_sjob {
	struct agent_job job;		/* first: the pool hands this back */
	struct agent_session *s;
	struct bcp_hdr hdr;		/* the request's, for the reply */
	uint64_t t0;
	uint64_t t1;			/* the store's call began (pool) */
	uint32_t rsv;			/* output room its reply reserves */
	struct agent_store_call call;
	/* a blocking store's request; written by run(), read by done() */
	struct bcp_msg m, rep;
	int ret;
	int answer;			/* a replay answered from oc */
	int again;			/* a replay that may have run */
	int cached;			/* its outcome goes to the cache */
	struct agent_rc_outcome oc;
	uint64_t forget;		/* a handle done() forgets; 0: none */
	uint8_t *buf;			/* SESS_JOB_BUF, lazily */
	/* the reply as the pool thread sent it; obuf: SESS_OBUF bytes */
	int sent;
	uint8_t *obuf;
	struct agent_out_rest rest;
	struct agent_sjob *next;	/* the session's free list */
};

struct agent_session {
	struct agent_worker *w;
	enum agent_session_state state;
	int fd;
	int is_unix;
	int peer_gone;			/* control connection lost */
	int ev_gone;			/* its fd is out of the epoll set */
	int kick;			/* parse buffered frames again */
	uint32_t ev;			/* epoll events registered */
	uint32_t data_ev;
	char peer[64];
	uint64_t id;
	uint64_t t_start;
	uint8_t nonce_c[BCP_NONCE_LEN], nonce_s[BCP_NONCE_LEN];
	uint64_t features;
	/* HELLO's client id: keys the reply cache; all zeros: none */
	uint8_t client[BCP_CLIENT_ID_LEN];
	struct agent_tag tag, data_tag;
	struct agent_store *store;
	struct bcp_xsrv *xsrv;
	uint8_t *rbuf;
	uint32_t rlen;
	uint8_t *wbuf;
	uint32_t wlen, wpos;		/* the worker's alone */
	/*
	 * A blocking store's pool thread sends its reply itself when the
	 * stream is between frames (agent_session_pool_send()).  out_lock
	 * serialises every send on fd and guards the three below: out_part,
	 * a frame is partly sent (the worker's output is not empty, or a
	 * pool thread's frame is partly out); out_hold, the rest of a pool
	 * thread's frame, which the worker must send before anything else;
	 * out_dead, the peer is gone.
	 */
	pthread_mutex_t out_lock;
	int out_part;
	struct agent_out_rest *out_hold;
	int out_dead;
	int fds[SESS_FDS_MAX];		/* descriptors received, FIFO */
	unsigned int nfds;
	struct agent_batch *batch_pool;	/* free batches */
	unsigned int batches_live;
	struct agent_batch *batches;	/* the pool's memory */
	unsigned int jobs_live;		/* blocking-pool jobs not done */
	uint64_t busy_ns;		/* the last NOTIFY BUSY went then */
	unsigned int jobs_max;		/* SESS_JOBS_MAX or _BLOCKING */
	uint32_t jobs_rsv;		/* output room their replies hold */
	uint32_t inl_rsv;		/* ... and inline pulls' bytes */
	unsigned int slots_held;	/* staging slots its chunks hold */
	struct agent_sjob *job_pool;	/* free jobs */
	struct agent_sjob *jobs;	/* the pool's memory (lazily) */
	struct agent_ident ident;	/* identity policy (doc/security.md) */
	/* BCP_FEAT_NOTIFY: its queue (notify.h), freed after the store */
	struct agent_notify_sess *ns;
	unsigned int xport;		/* enum agent_xport of its regions */
	struct agent_session *next;
	struct agent_session **pprev;
};

struct agent_inbox_item {
	int fd;
	int is_unix;
	int hello, flood;		/* worker_inbox_order() */
	uint16_t src;			/* agent_peer_hash() of peer */
	char peer[64];
	uint8_t frame[128];
	size_t len;
	struct agent_inbox_item *next;
};

struct agent_worker {
	unsigned int idx;
	pthread_t thread;
	int epfd;
	struct agent_ring ring;
	struct agent_tag ring_tag, inbox_tag;
	/* staging: allocated once, registered with the ring */
	uint8_t *staging;
	size_t staging_len;
	struct agent_slot *slots;
	struct agent_slot *free_slots;
	unsigned int nfree;
	/*
	 * Batches waiting for slots: a ring with the first waiting batch of
	 * each session, served one chunk per turn; a session's other
	 * waiting batches follow its first through snext.
	 */
	struct agent_batch *bq_head, *bq_tail;
	unsigned int bq_len;		/* sessions on the ring */
	int in_sched, resched;
	struct agent_session *sessions;
	unsigned int nsessions;
	unsigned int nunauth;		/* sessions in SESS_AUTH, counted */
	int stopping;
	uint64_t stop_deadline;
	struct agent_stats stats;
	struct agent_wmetrics metrics;	/* read by metrics_http.c */
	/* inbox: the main thread hands over connections here */
	pthread_mutex_t inbox_lock;
	struct agent_inbox_item *inbox;	/* under inbox_lock */
	struct agent_job *jobs_done;	/* under inbox_lock (pool.c) */
	int inbox_efd;
	atomic_int stop;
};

/* worker.c: worker i while the workers run, or NULL (metrics.c). */
struct agent_worker *agent_worker_nth(unsigned int i);
/* worker.c: a pool thread hands a finished job back to its worker. */
void agent_worker_job_done(struct agent_job *j);
/*
 * worker.c: s may have left SESS_AUTH (authenticated or closing); call
 * after the state changed.  Keeps the agent-wide count of unauthenticated
 * sessions (--max-unauth) exact between passes of the loop.
 */
void agent_worker_unauth_done(struct agent_session *s);

/* session.c */
struct agent_session *agent_session_new(struct agent_worker *w, int fd,
					const char *peer, int is_unix);
void agent_session_free(struct agent_session *s);
/* A HELLO that arrived first (frame decoded by the caller). */
void agent_session_hello(struct agent_session *s, const struct bcp_msg *m);
void agent_session_on_ctl(struct agent_session *s, uint32_t events);
void agent_session_on_data(struct agent_session *s, uint32_t events);
/* Parse and serve what is buffered (after backpressure lifted). */
void agent_session_parse(struct agent_session *s);
int agent_session_flush(struct agent_session *s);
void agent_session_close(struct agent_session *s, int peer_gone);
/* Append an encoded reply; 0 or -errno (then the session closes). */
int agent_session_reply(struct agent_session *s, const struct bcp_msg *m);
int agent_session_inline_hold(struct agent_session *s, uint32_t len);
/*
 * A pool thread's reply of len bytes at buf, sent at once when the stream
 * is between frames: 1 when it went (*r is the rest the worker must send
 * if the socket took only part), 0 when the worker must send it.
 */
int agent_session_pool_send(struct agent_session *s, const uint8_t *buf,
			    uint32_t len, struct agent_out_rest *r);
/*
 * Worker, when the pool's job that sent is back: what is left of r goes
 * first; counted.
 */
void agent_session_pool_rest(struct agent_session *s,
			     struct agent_out_rest *r);
/* DATA_ATTACH on a new connection for a session of this worker. */
void agent_session_attach(struct agent_worker *w, int fd, const char *peer,
			  const struct bcp_msg *m);
void agent_session_update_events(struct agent_session *s);
/* Post queued transfers, reap polled completions: 1 = keep polling. */
int agent_session_kick(struct agent_session *s);
/*
 * Encode the NOTIFY frames queued for s into its output, as many as fit
 * beside the room kept for replies.  The worker's pass, before flushing.
 */
void agent_session_notify(struct agent_session *s);
void agent_session_busy(struct agent_session *s, uint64_t now);

/* batch.c */
int agent_batch_slots_init(struct agent_worker *w);
void agent_batch_slots_fini(struct agent_worker *w);
/* Start a decoded BATCH_PULL/PUSH; -EAGAIN when no batch is free. */
int agent_batch_start(struct agent_session *s, const struct bcp_msg *m);
void agent_batch_schedule(struct agent_worker *w);
/* A ring completion for a slot (user_data with bit 0 set). */
void agent_batch_ring_done(struct agent_worker *w, uint64_t user_data,
			   int32_t res);
/* xsrv completion callback. */
void agent_batch_xfer_done(void *ctx, struct bcp_xsrv_op *op, int status);

#endif /* AGENT_WORKER_I_H */
