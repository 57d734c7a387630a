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
 *   rdma (later) posts RDMA WRITE / READ work requests and completes them
 *        from the completion queue, with the same calls.
 *
 * Threads: one struct bcp_xsrv belongs to one event loop; no locking.
 */
#ifndef BCP_XFER_SRV_H
#define BCP_XFER_SRV_H

#include <stddef.h>
#include <stdint.h>
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
	uint64_t req_id;
	uint32_t sent;		/* bytes of hdr + body + payload sent */
	uint8_t hbuf[BCP_HDR_SIZE + 16];
};

/*
 * Completion: status is len on success or -errno.  Called from
 * bcp_xsrv_post() (shm), bcp_xsrv_progress() or bcp_xsrv_fail(); the
 * callback may post again.
 */
typedef void (*bcp_xsrv_done_fn)(void *ctx, struct bcp_xsrv_op *op,
				 int status);

/* NULL when out of memory. */
struct bcp_xsrv *bcp_xsrv_create(bcp_xsrv_done_fn done, void *ctx);
/* Fails what is still posted (-ECONNABORTED), unmaps, closes; NULL no-op. */
void bcp_xsrv_destroy(struct bcp_xsrv *x);

/*
 * Register a region of kind enum bcp_region_kind.  shm: fd is the memfd
 * (borrowed: the caller closes it afterwards); it must be at least len
 * bytes.  tcp: needs an attached data connection.  Returns 0 or -errno:
 * -EEXIST (id in use), -ENOSPC (BCP_REGIONS_MAX reached), -EINVAL (size),
 * -EBADF (no or a wrong fd), -ENOTCONN (tcp without data connection),
 * -EOPNOTSUPP (kind not served).
 */
int bcp_xsrv_region_register(struct bcp_xsrv *x, uint32_t id, uint32_t kind,
			     uint64_t len, uint64_t addr, uint32_t rkey,
			     int fd);
/* 0, -ENOENT, or -EBUSY while transfers on it are posted. */
int bcp_xsrv_region_unregister(struct bcp_xsrv *x, uint32_t id);
/* Length of a registered region: 0 with *len set, or -ENOENT. */
int bcp_xsrv_region_len(const struct bcp_xsrv *x, uint32_t id,
			uint64_t *len);

/* tcp: adopt the data connection (non-blocking socket; ownership moves). */
int bcp_xsrv_data_attach(struct bcp_xsrv *x, int fd);
/* The data connection, or -1; and the poll events it currently needs. */
int bcp_xsrv_fd(const struct bcp_xsrv *x);
uint32_t bcp_xsrv_events(const struct bcp_xsrv *x);

/*
 * Post a transfer.  0: done() will be (or already was) called exactly once.
 * -errno: nothing was posted and done() is not called (-ENOENT unknown
 * region, -EFAULT out of its bounds, -ENOTCONN no data connection).
 */
int bcp_xsrv_post(struct bcp_xsrv *x, struct bcp_xsrv_op *op);

/*
 * Drive the data connection after the poller reported revents (EPOLLIN,
 * EPOLLOUT, EPOLLERR/HUP).  Returns 0, or -errno when the connection failed
 * (everything posted has then been completed with that error and the
 * connection is closed).  *why names the cause for a log line.
 */
int bcp_xsrv_progress(struct bcp_xsrv *x, uint32_t revents,
		      const char **why);

/* Complete everything posted with err and close the data connection. */
void bcp_xsrv_fail(struct bcp_xsrv *x, int err);

/* Transfers posted and not yet completed. */
unsigned int bcp_xsrv_pending(const struct bcp_xsrv *x);

#endif /* BCP_XFER_SRV_H */
