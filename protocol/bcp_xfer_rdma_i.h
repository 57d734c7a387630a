/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_xfer_rdma_i.h - private to bcp_xfer_srv.c and bcp_xfer_rdma.c: the
 * calls through which the generic agent transport hands a session's rdma
 * work to the rdma implementation, and back.
 *
 * A struct xrdma_conn is one session's rdma side: the queue pair, its
 * completion queue and channel, the connection manager channel, and two
 * FIFOs of struct bcp_xsrv_op (queued for the device, posted on it).  It
 * belongs to the session's worker thread, except for the hand-over of an
 * incoming connection from the listener (see bcp_xfer_rdma.c).
 */
#ifndef BCP_XFER_RDMA_I_H
#define BCP_XFER_RDMA_I_H

#include "bcp_xfer_srv.h"

struct xrdma_conn;

/* bcp_xfer_srv.c: complete one op (region busy count, pending, done()). */
void bcp_xsrv_complete_i(struct bcp_xsrv *x, struct bcp_xsrv_op *op,
			 int status);

#ifdef HAVE_RDMA
/* NULL with *err set when out of memory or descriptors. */
struct xrdma_conn *xrdma_conn_create(struct bcp_xsrv *x, uint64_t session,
				     const uint8_t nonce[BCP_NONCE_LEN],
				     int *err);
/* Stops, fails what is posted with -ECONNABORTED, frees; NULL no-op. */
void xrdma_conn_destroy(struct xrdma_conn *c);
/* 0 once a connection was accepted for the session, else -ENOTCONN. */
int xrdma_conn_ready(struct xrdma_conn *c);
/* Queue op (raddr/rkey set); 0 or -ENOTCONN once failed. */
int xrdma_post(struct xrdma_conn *c, struct bcp_xsrv_op *op);
int xrdma_kick(struct xrdma_conn *c, const char **why);
int xrdma_progress(struct xrdma_conn *c, const char **why);
/* Tear the queue pair down and complete every op with err. */
void xrdma_fail(struct xrdma_conn *c, int err);
int xrdma_fd(const struct xrdma_conn *c);
/* The oldest op not yet completed (on the queue pair, else queued). */
const struct bcp_xsrv_op *xrdma_oldest(const struct xrdma_conn *c);
#else
static inline struct xrdma_conn *
xrdma_conn_create(struct bcp_xsrv *x, uint64_t session,
		  const uint8_t nonce[BCP_NONCE_LEN], int *err)
{
	*err = -EOPNOTSUPP;
	return NULL;
}

static inline void xrdma_conn_destroy(struct xrdma_conn *c)
{
}

static inline int xrdma_conn_ready(struct xrdma_conn *c)
{
	return -EOPNOTSUPP;
}

static inline int xrdma_post(struct xrdma_conn *c, struct bcp_xsrv_op *op)
{
	return -EOPNOTSUPP;
}

static inline int xrdma_kick(struct xrdma_conn *c, const char **why)
{
	return 0;
}

static inline int xrdma_progress(struct xrdma_conn *c, const char **why)
{
	return 0;
}

static inline void xrdma_fail(struct xrdma_conn *c, int err)
{
}

static inline int xrdma_fd(const struct xrdma_conn *c)
{
	return -1;
}

static inline const struct bcp_xsrv_op *
xrdma_oldest(const struct xrdma_conn *c)
{
	return NULL;
}
#endif /* HAVE_RDMA */

#endif /* BCP_XFER_RDMA_I_H */
