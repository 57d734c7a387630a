/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_client.h - the host side of a BCP session, shared by the FUSE daemon
 * and the tests.
 *
 * One control connection carries metadata requests and batch requests; the
 * bulk bytes move through a buffer pool registered once with the agent
 * (shm: a memfd the agent maps; tcp: a second, data connection on which the
 * agent writes into and reads from the pool; rdma: a memory region).
 *
 * Threads: any number of callers may use bcp_client_call() at once (each
 * blocks until its own reply).  Data I/O is asynchronous: bcp_client_submit()
 * queues an I/O and returns; a sender thread coalesces whatever is queued
 * into one BATCH_PULL / BATCH_PUSH (up to max_batch segments); a receiver
 * thread demultiplexes replies by request id and calls each I/O's done()
 * callback.  done() runs on the receiver thread and must not block.
 *
 * With reconnect_timeout_ms, a lost connection pauses everything instead
 * of failing it; a reconnect thread brings the session back (see
 * struct bcp_client_opts).
 */
#ifndef BCP_CLIENT_H
#define BCP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include "bcp_codec.h"

enum bcp_transport {
	BCP_XFER_AUTO = 0,	/* shm on a unix socket, else tcp */
	BCP_XFER_SHM,
	BCP_XFER_TCP,
	BCP_XFER_RDMA,
};
/* "auto", "shm", "tcp", "rdma" <-> enum; parse returns -EINVAL */
const char *bcp_transport_name(enum bcp_transport t);
int bcp_transport_parse(const char *s, enum bcp_transport *out);

struct bcp_client;

#define BCP_CLIENT_POOL_DEFAULT	(64u * 1024 * 1024)

struct bcp_client_opts {
	const char *addr;		/* "tcp://HOST[:PORT]" or "unix:PATH" */
	const void *secret;		/* NULL/0: the empty secret */
	size_t secret_len;
	enum bcp_transport transport;
	size_t pool_size;		/* bytes in the registered pool (0: the
					 * default, BCP_CLIENT_POOL_DEFAULT) */
	uint32_t max_batch;		/* segments per batch, <= BCP_SEGS_MAX */
	int timeout_ms;			/* connect + handshake; and per call */
	/*
	 * Above timeout_ms: a call the agent leaves unanswered past
	 * timeout_ms waits on, up to busy_timeout_ms from its start, for
	 * as long as the agent answers, within every timeout_ms, the
	 * PING the library sends while a call is half its timeout old
	 * (one at a time, each scan), or says by NOTIFY BUSY
	 * (BCP_FEAT_BUSY, asked for then) that it is at work: a store
	 * that takes long (a cluster that stalls, a truncate of a
	 * terabyte) is not a hung agent.  0 or not above timeout_ms: a call fails at timeout_ms.
	 */
	int busy_timeout_ms;
	/*
	 * 0: a lost connection fails everything pending with -ENOTCONN
	 * and the client stays broken.  Above 0: a lost connection pauses
	 * requests (calls wait, I/O stays queued, per-call timeouts stop)
	 * while a thread connects again with backoff (50 ms doubling to
	 * 200 ms), redoes HELLO/AUTH and the transport, runs resume, then
	 * sends every unanswered request again (BCP_HF_REPLAY, same
	 * req_id) before new ones.  After this many ms of pause what waits
	 * fails with -EIO, and new requests fail with -EIO at once, until
	 * a later attempt succeeds.
	 */
	int reconnect_timeout_ms;
	/*
	 * Run on the reconnect thread on each new connection, before any
	 * queued request goes out.  Its bcp_client_call()s go straight to
	 * the new connection (REBIND, REOPEN); nothing else may be called
	 * from it.  A negative return counts the attempt as failed.
	 */
	int (*resume)(struct bcp_client *c, void *arg);
	void *resume_arg;
	/*
	 * Set: BCP_FEAT_NOTIFY is asked for, and each NOTIFY the agent
	 * sends (another session or a process on the agent's machine
	 * changed something this session holds; see bcp_wire.h) is handed
	 * to notify, on the receiver thread, in the order received.  name
	 * is the NUL-terminated name of an ENTRY or DELETE, NULL for the
	 * other kinds; both live only for the call.  notify must not block
	 * (it holds up every reply behind it) nor call into the library.
	 * After a reconnect, once the session is back, it is called with
	 * a RESET (everything else 0) from the reconnect thread: what
	 * changed while no connection was up was told to nobody.  Without
	 * notify, a NOTIFY from the agent is a protocol violation, as is
	 * any other request on the control connection.
	 */
	void (*notify)(void *arg, const struct bcp_notify_req *n,
		       const char *name);
	void *notify_arg;
	/*
	 * Microseconds the receiver polls for the next frame after the
	 * last one, only while a CPU is idle (doc/performance.md): -1 the
	 * default (BLUECACHE_SPIN_USEC in the environment, else 50), 0
	 * never, at most 10000.
	 */
	int spin_usec;
	/*
	 * Features that change only what replies say, asked for on the
	 * caller's behalf (BCP_FEAT_XATTR_HINT: the caller strips
	 * BCP_MODE_NO_XATTRS from the modes of entries); others are ignored.
	 */
	uint64_t reply_features;
};
/* Sensible defaults: 64 MiB pool, 256 segments, 10 s, no reconnect. */
void bcp_client_opts_init(struct bcp_client_opts *o);

struct bcp_client;

/*
 * Connect, HELLO, AUTH, set up the data transport and register the pool.
 * Errors come back as -errno with a one-line explanation in err:
 *   -ECONNREFUSED, -ENOENT, -EHOSTUNREACH, -ETIMEDOUT: agent unreachable
 *   -EACCES: the secret does not match
 *   -EPROTONOSUPPORT: no common protocol version
 *   -EOPNOTSUPP: the transport asked for is not offered
 */
int bcp_client_connect(const struct bcp_client_opts *o,
		       struct bcp_client **out, char *err, size_t errlen);
/*
 * Fails outstanding calls and I/O with -ENOTCONN and stops a reconnect in
 * progress; destroy(NULL) is a no-op.
 */
void bcp_client_destroy(struct bcp_client *c);

uint64_t bcp_client_root(const struct bcp_client *c);
enum bcp_transport bcp_client_transport(const struct bcp_client *c);
const struct bcp_hello_rep *bcp_client_hello(const struct bcp_client *c);

/*
 * A synchronous round trip.  req->hdr.req_id is assigned here.  The reply is
 * decoded into rep; its tails point into rbuf[rcap] (BCP_FRAME_MAX fits any
 * reply).  Returns the agent's status (0 or -errno), or a local -errno:
 * -ENOTCONN (connection lost), -ETIMEDOUT, -EMSGSIZE, -EIO (the reply was
 * malformed or of another opcode; the connection is given up).  After
 * -ETIMEDOUT the request keeps its place until the agent answers, and
 * what a late success created (a handle reference, an open file) is
 * given back to the agent.
 */
int bcp_client_call(struct bcp_client *c, struct bcp_msg *req,
		    struct bcp_msg *rep, void *rbuf, size_t rcap);

/*
 * An asynchronous round trip, for a caller that answers its own caller
 * from the reply (the FUSE daemon replies to the kernel) and so need not
 * wait: the receiver thread decodes the reply into call->rep (tails in
 * call->rbuf[call->rcap]) and runs call->done with the agent's status or a
 * local -errno (-ENOTCONN when the connection is lost, -EMSGSIZE when the
 * reply does not fit rbuf, -EIO when it is malformed, -ETIMEDOUT when the
 * agent leaves it unanswered past the timeout; the sender thread runs
 * done then).  done must not make synchronous calls: it runs on the
 * thread that receives their replies.  Returns 0 when done will
 * run (possibly before this returns; the call must not be touched after),
 * or -errno when nothing was sent and done will not run.
 */
struct bcp_call;
typedef void (*bcp_call_done_fn)(struct bcp_call *call, int result);
struct bcp_call {
	struct bcp_msg rep;
	void *rbuf;
	size_t rcap;
	bcp_call_done_fn done;
	void *priv;		/* the caller's */
	/* private to the client library */
	struct bcp_call *next;
};
int bcp_client_call_async(struct bcp_client *c, struct bcp_msg *req,
			  struct bcp_call *call);

/*
 * Send a request whose answer nobody needs (a RELEASE on a path that has
 * nothing to report): no slot is taken, the reply is dropped when it
 * comes.  Safe inside done callbacks, unlike every other call: there
 * it only queues req for the sender thread (never blocking; dropped with
 * a warning when the queue is full).  Returns 0 (also when this send
 * finds the connection lost, which breaks it), -ENOTCONN when it was lost
 * before, or the encoder's -errno.
 */
int bcp_client_post(struct bcp_client *c, struct bcp_msg *req);

/*
 * Queue a FORGET; the sender sends them in batches (when idle or when a
 * batch is full).  Waits while a full batch is queued, except inside done
 * callbacks, where it never waits (and drops with a warning when twice
 * that is queued: only an agent that stopped reading gets there).
 */
void bcp_client_forget(struct bcp_client *c, uint64_t handle,
		       uint64_t nlookup);

/* An asynchronous data I/O on an open file (fh from OPEN/CREATE). */
struct bcp_io;
typedef void (*bcp_io_done_fn)(struct bcp_io *io, int32_t result);
struct bcp_io {
	uint16_t op;		/* BCP_OP_BATCH_PULL or BCP_OP_BATCH_PUSH */
	uint64_t fh;
	uint64_t offset;
	uint32_t length;	/* <= capacity of buf */
	void *buf;		/* set by bcp_client_io_get(): pool memory */
	size_t cap;		/* set by bcp_client_io_get() */
	bcp_io_done_fn done;	/* result: bytes moved or -errno */
	void *priv;		/* the caller's */
	/* private to the client library */
	struct bcp_io *next;
	uint32_t slot;
};

/*
 * Take an I/O descriptor with at least len bytes of pool memory; blocks
 * while the pool is exhausted (memory stays bounded).  NULL only when len
 * exceeds what the pool can ever give, or the client is shutting down.
 */
struct bcp_io *bcp_client_io_get(struct bcp_client *c, size_t len);
void bcp_client_io_put(struct bcp_client *c, struct bcp_io *io);
/* Queue io; done() is called exactly once, possibly before this returns. */
void bcp_client_submit(struct bcp_client *c, struct bcp_io *io);

/* Counters for observability and benchmarks. */
struct bcp_client_stats {
	uint64_t calls;
	uint64_t batches;
	uint64_t segments;
	uint64_t bytes_pulled;
	uint64_t bytes_pushed;
	uint64_t batches_inline;	/* asked BCP_BATCH_INLINE */
};
void bcp_client_stats(const struct bcp_client *c,
		      struct bcp_client_stats *out);

/*
 * Where the library's log lines go.  level is a syslog LOG_* value; lines
 * above max_level are dropped.  The default (fn NULL) writes
 * "PROGRAM: LEVEL: message" to stderr up to LOG_WARNING.  Call it before
 * bcp_client_connect(); it is process-wide.
 */
typedef void (*bcp_client_log_fn)(int level, const char *msg);
void bcp_client_set_log(bcp_client_log_fn fn, int max_level);

/*
 * From the resume callback: what it resumed, for the line the library
 * logs when the connection is back ("... (N handles and M open files
 * resumed)").
 */
void bcp_client_resumed(struct bcp_client *c, uint64_t handles,
			uint64_t files);

/* The client id sent in every HELLO (BCP_CLIENT_ID_LEN bytes). */
const uint8_t *bcp_client_id(const struct bcp_client *c);

/* Bytes one bcp_client_io_get() can give at most (a power of two). */
size_t bcp_client_io_max(const struct bcp_client *c);

#endif /* BCP_CLIENT_H */
