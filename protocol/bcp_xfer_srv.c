/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_xfer_srv.c - shm and tcp implementations of the agent's one-sided
 * transfer interface (see bcp_xfer_srv.h).
 *
 * tcp: posted operations wait in a send queue; once their request (and, for
 * a WRITE, its payload) is fully on the socket they move to a reply queue.
 * The host answers in order, so the head of the reply queue is always the
 * operation the next reply belongs to; anything else is a protocol fault
 * that fails the whole connection.  READ replies are received straight into
 * the operation's local buffer.
 *
 * rdma: regions carry the host's address and rkey; posts are checked here
 * against the region and handed to bcp_xfer_rdma.c, which owns the queue
 * pair (see bcp_xfer_rdma_i.h).
 *
 * A host may stop answering (or be stopped) at any time while the agent's
 * staging slots wait on its transfers: every post is stamped and
 * bcp_xsrv_kick() fails the connection once the oldest transfer is older
 * than the session's timeout.  Both transports complete in order, so the
 * oldest transfer is always at the head of a queue.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <time.h>

#include "bcp_codec.h"
#include "bcp_xfer_srv.h"
#include "bcp_xfer_rdma_i.h"

/* Longest region a host may register (and map, for shm). */
#define XSRV_REGION_LEN_MAX	(1ull << 40)
/* Longest transfer a DATA_WRITE request or DATA_READ reply carries. */
#define XSRV_TCP_LEN_MAX	(BCP_DATA_FRAME_MAX - BCP_HDR_SIZE - 16)

struct xsrv_region {
	uint32_t id;
	uint32_t kind;		/* 0 = unused */
	uint64_t len;
	void *map;		/* shm */
	uint64_t addr;		/* rdma: the host's address and key */
	uint32_t rkey;
	unsigned int busy;	/* posted operations */
};

struct bcp_xsrv {
	bcp_xsrv_done_fn done;
	void *ctx;
	struct xsrv_region regions[BCP_REGIONS_MAX];
	/* registered regions and their summed lengths, and the limits */
	unsigned int nregions;
	uint64_t region_bytes;
	unsigned int max_regions;	/* clamped to BCP_REGIONS_MAX */
	uint64_t max_bytes;
	unsigned int timeout_ms;
	char why[64];		/* *why of a timeout */
	int data_fd;
	struct xrdma_conn *rdma;	/* rdma: the session's queue pair */
	uint64_t next_req_id;
	/* send queue and reply queue (FIFO, tail pointers for append) */
	struct bcp_xsrv_op *sq_head, *sq_tail;
	struct bcp_xsrv_op *rq_head, *rq_tail;
	unsigned int pending;
	/* receive state of the current reply */
	uint8_t rhdr[BCP_HDR_SIZE];
	uint32_t rgot;		/* bytes of header, then of payload */
	int rin_payload;
	struct bcp_hdr cur;
};

struct bcp_xsrv *bcp_xsrv_create(bcp_xsrv_done_fn done, void *ctx)
{
	struct bcp_xsrv *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->done = done;
	x->ctx = ctx;
	x->data_fd = -1;
	x->next_req_id = 1;
	x->max_regions = BCP_REGIONS_MAX;
	return x;
}

void bcp_xsrv_set_limits(struct bcp_xsrv *x, const struct bcp_xsrv_limits *l)
{
	x->max_regions = l->max_regions && l->max_regions < BCP_REGIONS_MAX ?
			 l->max_regions : BCP_REGIONS_MAX;
	x->max_bytes = l->max_bytes;
	x->timeout_ms = l->timeout_ms;
}

static uint64_t xsrv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct xsrv_region *xsrv_region_find(const struct bcp_xsrv *x,
					    uint32_t id)
{
	unsigned int i;

	for (i = 0; i < BCP_REGIONS_MAX; i++)
		if (x->regions[i].kind && x->regions[i].id == id)
			return (struct xsrv_region *)&x->regions[i];
	return NULL;
}

void bcp_xsrv_complete_i(struct bcp_xsrv *x, struct bcp_xsrv_op *op,
			 int status)
{
	bcp_xsrv_region_put(x, op->region_id);
	x->pending--;
	op->next = NULL;
	x->done(x->ctx, op, status);
}

void bcp_xsrv_fail(struct bcp_xsrv *x, int err)
{
	struct bcp_xsrv_op *op;

	if (x->data_fd >= 0) {
		close(x->data_fd);
		x->data_fd = -1;
	}
	while ((op = x->rq_head)) {
		x->rq_head = op->next;
		bcp_xsrv_complete_i(x, op, err);
	}
	x->rq_tail = NULL;
	while ((op = x->sq_head)) {
		x->sq_head = op->next;
		bcp_xsrv_complete_i(x, op, err);
	}
	x->sq_tail = NULL;
	if (x->rdma)
		xrdma_fail(x->rdma, err);
}

void bcp_xsrv_destroy(struct bcp_xsrv *x)
{
	unsigned int i;

	if (!x)
		return;
	bcp_xsrv_fail(x, -ECONNABORTED);
	xrdma_conn_destroy(x->rdma);
	for (i = 0; i < BCP_REGIONS_MAX; i++)
		if (x->regions[i].kind && x->regions[i].map)
			munmap(x->regions[i].map, x->regions[i].len);
	free(x);
}

static int xsrv_shm_map(struct xsrv_region *r, int fd, uint64_t len)
{
	struct stat st;
	void *map;
	int seals;

	if (fd < 0)
		return -EBADF;
	/*
	 * A host that shrinks the memfd under our mapping makes our copies
	 * fault (SIGBUS in the agent), so a region must be sealed against
	 * shrinking: a memfd created without MFD_ALLOW_SEALING is refused.
	 * Seal first, size after: the host keeps the fd and may ftruncate
	 * it at any moment, and only once F_SEAL_SHRINK is set (it can never
	 * be removed again) does the size we read stay true.
	 */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
			return -EPERM;
		seals = fcntl(fd, F_GET_SEALS);
		if (seals < 0 || !(seals & F_SEAL_SHRINK))
			return -EPERM;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADF;
	if ((uint64_t)st.st_size < len)
		return -EINVAL;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	r->map = map;
	return 0;
}

int bcp_xsrv_region_register(struct bcp_xsrv *x, uint32_t id, uint32_t kind,
			     uint64_t len, uint64_t addr, uint32_t rkey,
			     int fd)
{
	struct xsrv_region *r = NULL;
	unsigned int i;
	int ret;

	if (xsrv_region_find(x, id))
		return -EEXIST;
	if (len == 0 || len > XSRV_REGION_LEN_MAX)
		return -EINVAL;
	if (x->nregions >= x->max_regions)
		return -ENOSPC;
	/* limits set after regions were registered may be exceeded already */
	if (x->max_bytes && (x->region_bytes > x->max_bytes ||
			     len > x->max_bytes - x->region_bytes))
		return -ENOSPC;
	for (i = 0; i < BCP_REGIONS_MAX; i++) {
		if (!x->regions[i].kind) {
			r = &x->regions[i];
			break;
		}
	}
	if (!r)
		return -ENOSPC;
	switch (kind) {
	case BCP_REGION_SHM:
		ret = xsrv_shm_map(r, fd, len);
		if (ret < 0)
			return ret;
		break;
	case BCP_REGION_TCP:
		if (fd >= 0)
			return -EINVAL;
		if (x->data_fd < 0)
			return -ENOTCONN;
		r->map = NULL;
		break;
	case BCP_REGION_RDMA:
		if (fd >= 0)
			return -EINVAL;
		if (!x->rdma)
			return -EOPNOTSUPP;
		ret = xrdma_conn_ready(x->rdma);
		if (ret < 0)
			return ret;
		if (addr + len < addr)
			return -EINVAL;
		r->map = NULL;
		r->addr = addr;
		r->rkey = rkey;
		break;
	default:
		return -EOPNOTSUPP;
	}
	r->id = id;
	r->kind = kind;
	r->len = len;
	r->busy = 0;
	x->nregions++;
	x->region_bytes += len;
	return 0;
}

int bcp_xsrv_region_unregister(struct bcp_xsrv *x, uint32_t id)
{
	struct xsrv_region *r = xsrv_region_find(x, id);

	if (!r)
		return -ENOENT;
	if (r->busy)
		return -EBUSY;
	if (r->map)
		munmap(r->map, r->len);
	x->nregions--;
	x->region_bytes -= r->len;
	memset(r, 0, sizeof(*r));
	return 0;
}

int bcp_xsrv_region_len(const struct bcp_xsrv *x, uint32_t id,
			uint64_t *len)
{
	const struct xsrv_region *r = xsrv_region_find(x, id);

	if (!r)
		return -ENOENT;
	*len = r->len;
	return 0;
}

int bcp_xsrv_region_map(const struct bcp_xsrv *x, uint32_t id, uint64_t off,
			uint64_t len, void **out)
{
	const struct xsrv_region *r = xsrv_region_find(x, id);

	if (!r)
		return -ENOENT;
	if (r->kind != BCP_REGION_SHM || !r->map)
		return -EOPNOTSUPP;
	if (off > r->len || len > r->len - off)
		return -EFAULT;
	*out = (uint8_t *)r->map + off;
	return 0;
}

int bcp_xsrv_region_hold(struct bcp_xsrv *x, uint32_t id, uint64_t off,
			 uint64_t len, void **out)
{
	struct xsrv_region *r;
	int ret = bcp_xsrv_region_map(x, id, off, len, out);

	if (ret < 0)
		return ret;
	r = xsrv_region_find(x, id);
	r->busy++;
	return 0;
}

void bcp_xsrv_region_put(struct bcp_xsrv *x, uint32_t id)
{
	struct xsrv_region *r = xsrv_region_find(x, id);

	if (r && r->busy)
		r->busy--;
}

int bcp_xsrv_data_attach(struct bcp_xsrv *x, int fd)
{
	if (x->data_fd >= 0)
		return -EBUSY;
	x->data_fd = fd;
	x->rgot = 0;
	x->rin_payload = 0;
	return 0;
}

int bcp_xsrv_fd(const struct bcp_xsrv *x)
{
	if (x->rdma)
		return xrdma_fd(x->rdma);
	return x->data_fd;
}

uint32_t bcp_xsrv_events(const struct bcp_xsrv *x)
{
	if (x->rdma)
		return EPOLLIN;
	if (x->data_fd < 0)
		return 0;
	return EPOLLIN | (x->sq_head ? EPOLLOUT : 0);
}

unsigned int bcp_xsrv_pending(const struct bcp_xsrv *x)
{
	return x->pending;
}

static void xsrv_tcp_encode(struct bcp_xsrv *x, struct bcp_xsrv_op *op)
{
	struct bcp_hdr h = {
		.magic = BCP_MAGIC,
		.version = BCP_VERSION_MAX,
		.opcode = op->dir == BCP_XSRV_WRITE ? BCP_OP_DATA_WRITE :
						      BCP_OP_DATA_READ,
		.flags = 0,
		.payload_len = 16 + (op->dir == BCP_XSRV_WRITE ? op->len : 0),
		.req_id = x->next_req_id++,
		.status = 0,
	};
	struct bcp_data_req d = {
		.region_id = op->region_id,
		.length = op->len,
		.region_off = op->region_off,
	};

	op->req_id = h.req_id;
	op->sent = 0;
	bcp_enc_hdr(op->hbuf, &h);
	bcp_enc_data_req(op->hbuf + BCP_HDR_SIZE, &d);
}

int bcp_xsrv_post(struct bcp_xsrv *x, struct bcp_xsrv_op *op)
{
	struct xsrv_region *r = xsrv_region_find(x, op->region_id);

	if (!r)
		return -ENOENT;
	if (op->len == 0 || op->region_off > r->len ||
	    op->len > r->len - op->region_off)
		return -EFAULT;
	if (r->kind == BCP_REGION_SHM) {
		uint8_t *p = (uint8_t *)r->map + op->region_off;

		if (op->dir == BCP_XSRV_WRITE)
			memcpy(p, op->local, op->len);
		else
			memcpy(op->local, p, op->len);
		x->pending++;
		r->busy++;
		bcp_xsrv_complete_i(x, op, (int)op->len);
		return 0;
	}
	if (r->kind == BCP_REGION_RDMA) {
		int ret;

		op->raddr = r->addr + op->region_off;
		op->rkey = r->rkey;
		op->posted_ns = xsrv_now_ns();
		ret = xrdma_post(x->rdma, op);
		if (ret < 0)
			return ret;
		x->pending++;
		r->busy++;
		return 0;
	}
	if (x->data_fd < 0)
		return -ENOTCONN;
	if (op->len > XSRV_TCP_LEN_MAX)
		return -EMSGSIZE;
	xsrv_tcp_encode(x, op);
	op->posted_ns = xsrv_now_ns();
	op->next = NULL;
	if (x->sq_tail)
		x->sq_tail->next = op;
	else
		x->sq_head = op;
	x->sq_tail = op;
	x->pending++;
	r->busy++;
	return 0;
}

/* Send as much of the send queue as the socket takes.  0 or -errno. */
static int xsrv_tcp_send(struct bcp_xsrv *x)
{
	struct bcp_xsrv_op *op;

	while ((op = x->sq_head)) {
		uint32_t hlen = sizeof(op->hbuf);
		uint32_t plen = op->dir == BCP_XSRV_WRITE ? op->len : 0;
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t n;

		if (op->sent < hlen) {
			iov[0].iov_base = op->hbuf + op->sent;
			iov[0].iov_len = hlen - op->sent;
			iov[1].iov_base = op->local;
			iov[1].iov_len = plen;
			mh.msg_iovlen = plen ? 2 : 1;
		} else {
			iov[0].iov_base = (uint8_t *)op->local +
					  (op->sent - hlen);
			iov[0].iov_len = hlen + plen - op->sent;
			mh.msg_iovlen = 1;
		}
		n = sendmsg(x->data_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		op->sent += (uint32_t)n;
		if (op->sent < hlen + plen)
			continue;
		x->sq_head = op->next;
		if (!x->sq_head)
			x->sq_tail = NULL;
		op->next = NULL;
		if (x->rq_tail)
			x->rq_tail->next = op;
		else
			x->rq_head = op;
		x->rq_tail = op;
	}
	return 0;
}

/* Receive replies and complete their operations.  0 or -errno. */
static int xsrv_tcp_recv(struct bcp_xsrv *x, const char **why)
{
	for (;;) {
		struct bcp_xsrv_op *op = x->rq_head;
		enum bcp_err e;
		ssize_t n;

		if (!x->rin_payload) {
			n = recv(x->data_fd, x->rhdr + x->rgot,
				 BCP_HDR_SIZE - x->rgot, MSG_DONTWAIT);
			if (n < 0)
				return (errno == EAGAIN || errno == EINTR) ?
				       0 : -errno;
			if (n == 0) {
				*why = "data connection closed by the host";
				return -ECONNRESET;
			}
			x->rgot += (uint32_t)n;
			if (x->rgot < BCP_HDR_SIZE)
				continue;
			if (bcp_hdr_check(x->rhdr, BCP_DATA_FRAME_MAX,
					  &x->cur, &e) < 0) {
				*why = bcp_err_str(e);
				return -EPROTO;
			}
			if (!op || !(x->cur.flags & BCP_HF_REPLY) ||
			    x->cur.req_id != op->req_id) {
				*why = "reply out of order on data connection";
				return -EPROTO;
			}
			if (x->cur.opcode != (op->dir == BCP_XSRV_WRITE ?
					      BCP_OP_DATA_WRITE :
					      BCP_OP_DATA_READ)) {
				*why = "reply of the wrong opcode on data "
				       "connection";
				return -EPROTO;
			}
			if (x->cur.status < 0 || op->dir == BCP_XSRV_WRITE) {
				if (x->cur.payload_len != 0) {
					*why = "unexpected payload in reply";
					return -EPROTO;
				}
			} else if (x->cur.payload_len != op->len) {
				*why = "DATA_READ reply of the wrong length";
				return -EPROTO;
			}
			x->rgot = 0;
			x->rin_payload = 1;
		}
		if (x->rgot < x->cur.payload_len) {
			n = recv(x->data_fd, (uint8_t *)op->local + x->rgot,
				 x->cur.payload_len - x->rgot, MSG_DONTWAIT);
			if (n < 0)
				return (errno == EAGAIN || errno == EINTR) ?
				       0 : -errno;
			if (n == 0) {
				*why = "data connection closed mid-reply";
				return -ECONNRESET;
			}
			x->rgot += (uint32_t)n;
			if (x->rgot < x->cur.payload_len)
				continue;
		}
		x->rq_head = op->next;
		if (!x->rq_head)
			x->rq_tail = NULL;
		x->rgot = 0;
		x->rin_payload = 0;
		bcp_xsrv_complete_i(x, op, x->cur.status < 0 ? x->cur.status :
				     (int)op->len);
		if (x->data_fd < 0)
			return -ECONNABORTED;
	}
}

int bcp_xsrv_progress(struct bcp_xsrv *x, uint32_t revents, const char **why)
{
	int ret = 0;

	*why = "data connection failed";
	if (x->rdma) {
		ret = xrdma_progress(x->rdma, why);
		if (ret < 0)
			bcp_xsrv_fail(x, ret);
		return ret;
	}
	if (x->data_fd < 0)
		return 0;
	if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP))
		ret = xsrv_tcp_recv(x, why);
	if (!ret && x->data_fd >= 0 && !(revents & (EPOLLERR | EPOLLHUP)))
		ret = xsrv_tcp_send(x);
	/*
	 * Hang-up and error are level-triggered and cannot be masked: left
	 * open, the connection would wake the loop for ever.  What the host
	 * sent before it went is taken above; nothing more can come.
	 */
	if (!ret && x->data_fd >= 0 && (revents & (EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t elen = sizeof(err);

		if (getsockopt(x->data_fd, SOL_SOCKET, SO_ERROR, &err,
			       &elen) < 0 || err <= 0)
			err = ECONNRESET;
		*why = "data connection hung up";
		ret = -err;
	}
	if (ret < 0 && x->data_fd >= 0)
		bcp_xsrv_fail(x, ret);
	return ret;
}

/* -ETIMEDOUT when the oldest transfer still posted is overdue, else 0. */
static int xsrv_timeout_check(struct bcp_xsrv *x, const char **why)
{
	const struct bcp_xsrv_op *op;
	uint64_t age;

	if (!x->timeout_ms || !x->pending)
		return 0;
	if (x->rdma)
		op = xrdma_oldest(x->rdma);
	else
		op = x->rq_head ? x->rq_head : x->sq_head;
	if (!op)
		return 0;
	age = xsrv_now_ns() - op->posted_ns;
	if (age < x->timeout_ms * 1000000ull)
		return 0;
	snprintf(x->why, sizeof(x->why), "transfer timed out after %llu ms",
		 (unsigned long long)(age / 1000000));
	*why = x->why;
	return -ETIMEDOUT;
}

int bcp_xsrv_kick(struct bcp_xsrv *x, const char **why)
{
	int ret;

	ret = xsrv_timeout_check(x, why);
	if (!ret && x->rdma)
		ret = xrdma_kick(x->rdma, why);
	if (ret < 0)
		bcp_xsrv_fail(x, ret);
	return ret;
}

#ifdef HAVE_RDMA
int bcp_xsrv_rdma_expect(struct bcp_xsrv *x, uint64_t session,
			 const uint8_t nonce_s[BCP_NONCE_LEN])
{
	int ret = 0;

	if (x->rdma || x->data_fd >= 0)
		return -EBUSY;
	x->rdma = xrdma_conn_create(x, session, nonce_s, &ret);
	return x->rdma ? 0 : ret;
}
#endif
