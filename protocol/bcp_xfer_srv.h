/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_xfer_srv.h - the agent's half of the bulk data transports.
 *
 * The host registers buffer regions; the agent then moves bytes between its
 * own (staging) memory and a region with one-sided operations, as an RDMA
 * engine does: a WRITE copies local bytes into region+offset (a PULL lands
 * in the host), a READ copies region+offset into local memory (a PUSH comes
 * from the host).  The caller owns every struct bcp_xsrv_op it posts until
 * the completion callback has run for it; the transport never allocates per
 * operation.
 *
 * Implementations:
 *   shm  the region is a memfd passed over the unix socket; the agent maps it
 *        and copies.  Operations complete inside bcp_xsrv_post().
 *   tcp  a separate data connection (DATA_ATTACH) on which the agent sends
 *        DATA_WRITE / DATA_READ and the host answers them in order.  Posts
 *        are queued; bcp_xsrv_progress() moves them when the event loop
 *        sees the data socket ready, and completes them as replies arrive.
 *   rdma (bcp_xfer_rdma.c) the host connects a queue pair with librdmacm
 *        and registers its pool as a memory region (addr + rkey); posts
 *        become RDMA WRITE / READ work requests from the agent's staging
 *        memory, chained and sent by bcp_xsrv_kick(), and complete from
 *        the completion queue (polled, or its channel in the event loop).
 *
 * Everything the host says is untrusted: a reply is checked against the
 * operation it must answer (request id, opcode, status, length) and any
 * mismatch fails the whole data connection.  Per-session limits bound what
 * regions may pin (struct bcp_xsrv_limits), and a transfer the host does
 * not complete in time fails the data connection (bcp_xsrv_kick()).
 *
 * Threads: one struct bcp_xsrv belongs to one event loop; no locking.
 */
#ifndef BCP_XFER_SRV_H
#define BCP_XFER_SRV_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include "bcp_wire.h"

struct bcp_xsrv;

enum bcp_xsrv_dir {
	BCP_XSRV_WRITE = 1,	/* local -> region (serves BATCH_PULL) */
	BCP_XSRV_READ = 2,	/* region -> local (serves BATCH_PUSH) */
};

/* One posted transfer.  The caller fills the first block. */
struct bcp_xsrv_op {
	enum bcp_xsrv_dir dir;
	uint32_t region_id;
	uint64_t region_off;
	void *local;
	uint32_t len;
	/* private to the transport */
	struct bcp_xsrv_op *next;
	uint64_t raddr;		/* rdma: remote address */
	uint32_t rkey;		/* rdma: remote key */
	uint64_t req_id;
	uint32_t sent;		/* bytes of hdr + body + payload sent */
	uint64_t posted_ns;	/* CLOCK_MONOTONIC at bcp_xsrv_post() */
	uint8_t hbuf[BCP_HDR_SIZE + 16];
};

/*
 * Completion: status is len on success or -errno.  Called from
 * bcp_xsrv_post() (shm), bcp_xsrv_progress() or bcp_xsrv_fail(); the
 * callback may post again.
 */
typedef void (*bcp_xsrv_done_fn)(void *ctx, struct bcp_xsrv_op *op,
				 int status);

/* NULL when out of memory.  Limits start as all zero (see below). */
struct bcp_xsrv *bcp_xsrv_create(bcp_xsrv_done_fn done, void *ctx);
/* Fails what is still posted (-ECONNABORTED), unmaps, closes; NULL no-op. */
void bcp_xsrv_destroy(struct bcp_xsrv *x);

/*
 * What one session may hold.  A host picks region sizes and counts, and an
 * shm region is mapped into the agent: without a bound on their sum a few
 * sparse memfds exhaust the agent's address space.  rdma and tcp regions
 * pin nothing locally but count the same, so the limit means one thing
 * whatever the transport.
 */
struct bcp_xsrv_limits {
	unsigned int max_regions;	/* 0: BCP_REGIONS_MAX */
	uint64_t max_bytes;		/* all regions; 0: no limit */
	unsigned int timeout_ms;	/* one transfer; 0: never */
};

/*
 * Before any region is registered (regions registered earlier stay and
 * count); values over the built-in maxima are clamped: max_regions to
 * BCP_REGIONS_MAX.  Registering past max_regions or past max_bytes in all
 * is refused with -ENOSPC.  A transfer posted and not completed within
 * timeout_ms fails the data connection (see bcp_xsrv_kick()).
 */
void bcp_xsrv_set_limits(struct bcp_xsrv *x,
			 const struct bcp_xsrv_limits *l);

/*
 * Register a region of kind enum bcp_region_kind.  shm: fd is the memfd
 * (borrowed: the caller closes it afterwards); the agent seals it against
 * shrinking (F_SEAL_SHRINK) before it looks at its size, which must then be
 * at least len bytes.  tcp: needs an attached data connection.  Returns 0
 * or -errno: -EEXIST (id in use), -ENOSPC (max_regions reached, or the
 * session's regions would exceed max_bytes in all), -EINVAL (size, 1 byte
 * to 1 TiB), -EBADF (no or a wrong fd), -EPERM (shm: cannot be sealed),
 * -ENOTCONN (tcp without data connection), -EOPNOTSUPP (kind not served).
 */
int bcp_xsrv_region_register(struct bcp_xsrv *x, uint32_t id, uint32_t kind,
			     uint64_t len, uint64_t addr, uint32_t rkey,
			     int fd);
/* 0, -ENOENT, or -EBUSY while transfers on it are posted. */
int bcp_xsrv_region_unregister(struct bcp_xsrv *x, uint32_t id);
/* Length of a registered region: 0 with *len set, or -ENOENT. */
int bcp_xsrv_region_len(const struct bcp_xsrv *x, uint32_t id,
			uint64_t *len);

/*
 * shm: the agent's own mapping of len bytes at off of region id, for
 * callers that move bytes straight between a file and the host's memory
 * (no staging copy).  The pointer stays valid until the region is
 * unregistered, which the same event loop does.  0 with *out set,
 * -ENOENT (unknown region), -EFAULT (out of its bounds), -EOPNOTSUPP (not
 * an shm region: post transfers instead).
 */
int bcp_xsrv_region_map(const struct bcp_xsrv *x, uint32_t id, uint64_t off,
			uint64_t len, void **out);
/*
 * shm: the same mapping for use beyond this turn of the event loop (by
 * another thread): the region is held, its unregistering refused (-EBUSY)
 * as while transfers are posted, until bcp_xsrv_region_put().
 */
int bcp_xsrv_region_hold(struct bcp_xsrv *x, uint32_t id, uint64_t off,
			 uint64_t len, void **out);
void bcp_xsrv_region_put(struct bcp_xsrv *x, uint32_t id);

/* tcp: adopt the data connection (non-blocking socket; ownership moves). */
int bcp_xsrv_data_attach(struct bcp_xsrv *x, int fd);
/* The data connection, or -1; and the poll events it currently needs. */
int bcp_xsrv_fd(const struct bcp_xsrv *x);
uint32_t bcp_xsrv_events(const struct bcp_xsrv *x);

/*
 * Post a transfer.  0: done() will be (or already was) called exactly once.
 * -errno: nothing was posted and done() is not called (-ENOENT unknown
 * region, -EFAULT out of its bounds, -ENOTCONN no data connection,
 * -EMSGSIZE tcp: longer than a data frame carries).
 */
int bcp_xsrv_post(struct bcp_xsrv *x, struct bcp_xsrv_op *op);

/*
 * Drive the data connection after the poller reported revents (EPOLLIN,
 * EPOLLOUT, EPOLLERR/HUP).  Returns 0, or -errno when the connection failed
 * (everything posted has then been completed with that error and the
 * connection is closed).  EPOLLERR or EPOLLHUP always ends the connection
 * once what was still readable has been taken (-ECONNRESET or the socket's
 * error), so a level-triggered hang-up is never reported twice.  *why
 * names the cause for a log line (valid until the next call on x).
 */
int bcp_xsrv_progress(struct bcp_xsrv *x, uint32_t revents,
		      const char **why);

/* Complete everything posted with err and close the data connection. */
void bcp_xsrv_fail(struct bcp_xsrv *x, int err);

/* Transfers posted and not yet completed. */
unsigned int bcp_xsrv_pending(const struct bcp_xsrv *x);

/*
 * Once or twice per event-loop pass, and at least every 200 ms: hand what
 * bcp_xsrv_post() queued to the device (rdma chains the work requests and
 * signals only the last) and, while the completion mode polls, reap
 * completions.  Also enforces the transfer timeout: when the oldest
 * transfer posted (tcp: still unsent or unanswered; rdma: queued or on the
 * queue pair) is older than timeout_ms, everything posted completes with
 * -ETIMEDOUT, the connection is closed and -ETIMEDOUT is returned with
 * *why "transfer timed out after N ms".  Returns 1 when the loop should
 * come back without sleeping (work queued, completions reaped or a
 * polling window open), 0 when it may sleep, or -errno as
 * bcp_xsrv_progress() when the connection failed.  shm and tcp: 0 or
 * -ETIMEDOUT.
 */
int bcp_xsrv_kick(struct bcp_xsrv *x, const char **why);

/* Log sink of the rdma listener: level is a syslog LOG_* value. */
typedef void (*bcp_xsrv_log_fn)(int level, const char *msg);

enum bcp_xsrv_completion {
	BCP_XSRV_CQ_ADAPTIVE = 0,	/* poll for poll_usec, then sleep */
	BCP_XSRV_CQ_POLL,		/* poll while transfers are posted */
	BCP_XSRV_CQ_EVENT,		/* always sleep on the channel */
};

struct bcp_xrdma_cfg {
	const char *listen;		/* ADDR[:PORT], IPv4 or [IPv6] */
	const void *secret;		/* the session secret (may be empty) */
	size_t secret_len;
	enum bcp_xsrv_completion completion;
	unsigned int poll_usec;		/* adaptive: the polling window */
	unsigned int queue_depth;	/* transfers a session may post */
	bcp_xsrv_log_fn log;
};

#ifdef HAVE_RDMA
/*
 * The rdma transport's process-wide half (bcp_xfer_rdma.c).  Lock: one
 * mutex inside guards the device table, the staging areas and the table
 * of sessions expecting a connection; the main thread (listener) and the
 * workers (sessions) meet only there.
 */

/*
 * Record a staging area (a worker's slots).  Registered as a memory region
 * once with every device the agent opens, at start-up or on a device's
 * first connection - never per transfer.  0 or -errno.
 */
int bcp_xrdma_staging_add(void *base, size_t len);

/* Parse "ADDR[:PORT]" as --rdma-listen takes it.  0 or -EINVAL. */
int bcp_xrdma_addr_parse(const char *s, struct sockaddr_storage *ss);

/*
 * Listen for rdma connections (after the staging areas are recorded).
 * Returns the listener's event channel fd for the caller's poller, or
 * -errno with err set.  One listener per process.
 */
int bcp_xrdma_listen(const struct bcp_xrdma_cfg *cfg, char *err,
		     size_t errlen);
/* The listener's fd became readable: accept or refuse connections. */
void bcp_xrdma_listen_event(void);
/*
 * The address and port to announce in HELLO (16 bytes, IPv6 or v4-mapped).
 * local is the control connection's local address, used when the listener
 * is bound to a wildcard.  0, or -ENODEV when there is nothing to offer.
 */
int bcp_xrdma_announce(const struct sockaddr *local, uint8_t addr[16],
		       uint16_t *port);
/* Close the listener, deregister the staging areas, close the devices. */
void bcp_xrdma_shutdown(void);

/*
 * This session announced rdma: accept one connection whose private data
 * proves the secret for (session, nonce) and bind it to x.  Afterwards
 * bcp_xsrv_fd() is the fd to poll for EPOLLIN.  0 or -errno.
 */
int bcp_xsrv_rdma_expect(struct bcp_xsrv *x, uint64_t session,
			 const uint8_t nonce_s[BCP_NONCE_LEN]);
#else
static inline int bcp_xrdma_staging_add(void *base, size_t len)
{
	return 0;
}

static inline int bcp_xrdma_addr_parse(const char *s,
				       struct sockaddr_storage *ss)
{
	return -EOPNOTSUPP;
}

static inline int bcp_xrdma_listen(const struct bcp_xrdma_cfg *cfg,
				   char *err, size_t errlen)
{
	if (errlen)
		snprintf(err, errlen,
			 "the rdma transport is not built into this agent");
	return -EOPNOTSUPP;
}

static inline void bcp_xrdma_listen_event(void)
{
}

static inline int bcp_xrdma_announce(const struct sockaddr *local,
				     uint8_t addr[16], uint16_t *port)
{
	return -ENODEV;
}

static inline void bcp_xrdma_shutdown(void)
{
}

static inline int bcp_xsrv_rdma_expect(struct bcp_xsrv *x, uint64_t session,
				       const uint8_t nonce_s[BCP_NONCE_LEN])
{
	return -EOPNOTSUPP;
}
#endif /* HAVE_RDMA */

#endif /* BCP_XFER_SRV_H */
