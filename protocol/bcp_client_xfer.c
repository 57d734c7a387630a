/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_client_xfer.c - the host side of the data transports: the pool's
 * memory, its registration with the agent and, for tcp, the data
 * connection on which the agent plays the RDMA engine.
 *
 *   shm   the pool is a memfd mapped MAP_SHARED; REGISTER_REGION passes
 *         the fd (unix sockets only) and the agent maps the same pages.
 *   tcp   the pool is anonymous memory; a second connection, bound to the
 *         session by DATA_ATTACH, carries DATA_WRITE (agent -> pool) and
 *         DATA_READ (pool -> agent), answered in order by one thread that
 *         receives straight into the pool and sends straight from it.
 *   rdma  the pool is anonymous memory registered as a memory region;
 *         the agent reads and writes it (bcp_client_rdma.c).
 *
 * The pool memory belongs to the transport (mapped in setup, unmapped in
 * teardown); the allocator in bcp_client_pool.c only hands out pieces.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bcp_auth.h"
#include "bcp_client_i.h"

#define BCP_CLIENT_REGION_ID	1
#define BCP_DISCARD_LEN		(64u * 1024)

int bcp_client_register_pool(struct bcp_client *c, uint32_t kind,
			     int pass_fd, uint64_t addr, uint32_t rkey,
			     char *err, size_t errlen)
{
	static const char *const kind_name[] = {
		[BCP_REGION_SHM] = "shm",
		[BCP_REGION_TCP] = "tcp",
		[BCP_REGION_RDMA] = "rdma",
	};
	struct bcp_msg req, rep;
	uint8_t buf[256];
	int32_t status;
	int ret;

	bcp_msg_init(&req, BCP_OP_REGISTER_REGION, 3);
	req.u.region_req.region_id = c->region_id;
	req.u.region_req.kind = kind;
	req.u.region_req.length = c->pool_len;
	req.u.region_req.addr = addr;
	req.u.region_req.rkey = rkey;

	ret = bcp_client_rpc_sync(c, c->ctl, &req, pass_fd, &rep, buf,
				  sizeof(buf), &status, err, errlen);
	if (ret < 0)
		return ret;
	if (status < 0)
		snprintf(err, errlen,
			 "agent at %s refused to register the %zu byte %s buffer pool: %s",
			 c->addr_str, c->pool_len, kind_name[kind],
			 strerror(-status));
	return status;
}

static int xfer_shm_setup(struct bcp_client *c, char *err, size_t errlen)
{
	int ret;

	c->memfd = memfd_create("bluecachefs-pool",
				 MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (c->memfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot create the shm buffer pool: %s",
			 strerror(-ret));
		return ret;
	}
	if (ftruncate(c->memfd, (off_t)c->pool_len) < 0) {
		ret = -errno;
		snprintf(err, errlen,
			 "cannot size the shm buffer pool to %zu bytes: %s",
			 c->pool_len, strerror(-ret));
		goto out_close;
	}
	c->pool_base = mmap(NULL, c->pool_len, PROT_READ | PROT_WRITE,
			    MAP_SHARED, c->memfd, 0);
	if (c->pool_base == MAP_FAILED) {
		ret = -errno;
		c->pool_base = NULL;
		snprintf(err, errlen, "cannot map the shm buffer pool: %s",
			 strerror(-ret));
		goto out_close;
	}
	ret = bcp_client_register_pool(c, BCP_REGION_SHM, c->memfd, 0, 0, err,
				       errlen);
	if (ret < 0)
		goto out_unmap;
	/*
	 * The agent holds its own mapping now; ours stays until teardown.
	 * With reconnect the memfd stays too: a restarted agent is given
	 * the same pages again.
	 */
	if (c->opts.reconnect_timeout_ms <= 0) {
		close(c->memfd);
		c->memfd = -1;
	}
	return 0;

out_unmap:
	munmap(c->pool_base, c->pool_len);
	c->pool_base = NULL;
out_close:
	close(c->memfd);
	c->memfd = -1;
	return ret;
}

static int xfer_tcp_attach(struct bcp_client *c, char *err, size_t errlen)
{
	struct bcp_msg req, rep;
	uint8_t sess[8], buf[256];
	int32_t status;
	int one = 1, ret, i;

	c->data = bcp_addr_connect(&c->addr, c->opts.timeout_ms);
	if (c->data < 0) {
		ret = c->data;
		c->data = -1;
		snprintf(err, errlen,
			 "cannot open the data connection to agent at %s: %s",
			 c->addr_str, strerror(-ret));
		return ret;
	}
	if (c->addr.family != AF_UNIX)
		setsockopt(c->data, IPPROTO_TCP, TCP_NODELAY, &one,
			   sizeof(one));

	for (i = 0; i < 8; i++)
		sess[i] = (uint8_t)(c->hello.session >> (8 * i));
	bcp_msg_init(&req, BCP_OP_DATA_ATTACH, 1);
	req.u.attach_req.session = c->hello.session;
	ret = bcp_auth_mac(c->secret, c->secret_len, BCP_AUTH_LABEL_DATA,
			   c->hello.nonce, BCP_NONCE_LEN, sess, sizeof(sess),
			   req.u.attach_req.mac);
	if (ret < 0) {
		snprintf(err, errlen, "cannot compute the data MAC: %s",
			 strerror(-ret));
		goto out_close;
	}
	ret = bcp_client_rpc_sync(c, c->data, &req, -1, &rep, buf,
				  sizeof(buf), &status, err, errlen);
	if (ret < 0)
		goto out_close;
	ret = status;
	if (ret == -EACCES)
		snprintf(err, errlen,
			 "agent at %s refused the data connection (check secret_file)",
			 c->addr_str);
	else if (ret < 0)
		snprintf(err, errlen,
			 "agent at %s refused the data connection: %s",
			 c->addr_str, strerror(-ret));
	if (ret < 0)
		goto out_close;
	return 0;

out_close:
	close(c->data);
	c->data = -1;
	return ret;
}

static int xfer_tcp_setup(struct bcp_client *c, char *err, size_t errlen)
{
	int ret;

	c->pool_base = mmap(NULL, c->pool_len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->pool_base == MAP_FAILED) {
		ret = -errno;
		c->pool_base = NULL;
		snprintf(err, errlen, "cannot map the buffer pool: %s",
			 strerror(-ret));
		return ret;
	}
	c->dbuf = malloc(BCP_DISCARD_LEN);
	if (!c->dbuf) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_unmap;
	}
	ret = xfer_tcp_attach(c, err, errlen);
	if (ret < 0)
		goto out_free_dbuf;
	ret = bcp_client_register_pool(c, BCP_REGION_TCP, -1, 0, 0, err,
				       errlen);
	if (ret < 0)
		goto out_close_data;
	return 0;

out_close_data:
	close(c->data);
	c->data = -1;
out_free_dbuf:
	free(c->dbuf);
	c->dbuf = NULL;
out_unmap:
	munmap(c->pool_base, c->pool_len);
	c->pool_base = NULL;
	return ret;
}

int bcp_client_xfer_setup(struct bcp_client *c, enum bcp_transport t,
			  char *err, size_t errlen)
{
	c->region_id = BCP_CLIENT_REGION_ID;
	c->transport = t;
	switch (t) {
	case BCP_XFER_SHM:
		return xfer_shm_setup(c, err, errlen);
	case BCP_XFER_TCP:
		return xfer_tcp_setup(c, err, errlen);
	case BCP_XFER_RDMA:
		return bcp_client_rdma_setup(c, err, errlen);
	default:
		snprintf(err, errlen, "unknown transport %d", (int)t);
		return -EINVAL;
	}
}

void bcp_client_xfer_disconnect(struct bcp_client *c)
{
	bcp_client_rdma_teardown(c);
	if (c->data >= 0) {
		close(c->data);
		c->data = -1;
	}
}

int bcp_client_xfer_reconnect(struct bcp_client *c, char *err,
			      size_t errlen)
{
	int ret;

	switch (c->transport) {
	case BCP_XFER_SHM:
		return bcp_client_register_pool(c, BCP_REGION_SHM, c->memfd,
						0, 0, err, errlen);
	case BCP_XFER_TCP:
		ret = xfer_tcp_attach(c, err, errlen);
		if (ret < 0)
			return ret;
		ret = bcp_client_register_pool(c, BCP_REGION_TCP, -1, 0, 0,
					       err, errlen);
		if (ret < 0) {
			close(c->data);
			c->data = -1;
		}
		return ret;
	case BCP_XFER_RDMA:
		/* a new queue pair; the pool is registered again */
		return bcp_client_rdma_setup(c, err, errlen);
	default:
		snprintf(err, errlen, "unknown transport %d",
			 (int)c->transport);
		return -EINVAL;
	}
}

/*
 * Read exactly len bytes.  0, -ECONNRESET on EOF, or -errno.  Sleeps in
 * poll(), never in recv(): a sleeping recv() is woken, for nothing, each
 * time the agent reads what this thread sent (bcp_frame_read()).
 */
static int data_recv_full(int fd, void *buf, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint8_t *p = buf;
	ssize_t n;

	while (len) {
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
					return -errno;
				continue;
			}
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int data_discard(struct bcp_client *c, size_t len)
{
	size_t n;
	int ret;

	while (len) {
		n = len < BCP_DISCARD_LEN ? len : BCP_DISCARD_LEN;
		ret = data_recv_full(c->data, c->dbuf, n);
		if (ret < 0)
			return ret;
		len -= n;
	}
	return 0;
}

static int data_reply(struct bcp_client *c, const struct bcp_hdr *h,
		      int32_t status, const void *data, uint32_t len)
{
	struct bcp_msg req, rep;
	struct iovec iov[2];
	uint8_t hb[BCP_HDR_SIZE];

	memset(&req, 0, sizeof(req));
	req.hdr = *h;
	bcp_msg_init_reply(&rep, &req, status);
	rep.hdr.payload_len = len;
	bcp_enc_hdr(hb, &rep.hdr);
	iov[0].iov_base = hb;
	iov[0].iov_len = sizeof(hb);
	iov[1].iov_base = (void *)data;
	iov[1].iov_len = len;
	return bcp_frame_sendv(c->data, iov, len ? 2 : 1, -1);
}

/*
 * Serve one request of the data connection.  0, or -errno when the
 * connection must go (why says so when it is the agent's fault).
 */
static int data_serve_one(struct bcp_client *c, const char **why)
{
	uint8_t hb[BCP_HDR_SIZE], body[sizeof(struct bcp_w_data_req)];
	struct bcp_data_req d;
	struct bcp_hdr h;
	enum bcp_err e;
	int32_t status;
	int ret;

	ret = data_recv_full(c->data, hb, sizeof(hb));
	if (ret < 0)
		return ret;
	ret = bcp_hdr_check(hb, BCP_DATA_FRAME_MAX, &h, &e);
	if (ret < 0) {
		*why = bcp_err_str(e);
		return ret;
	}
	if ((h.flags & BCP_HF_ALL) != 0 ||
	    (h.opcode != BCP_OP_DATA_WRITE && h.opcode != BCP_OP_DATA_READ) ||
	    h.payload_len < sizeof(body)) {
		*why = "unexpected frame on the data connection";
		return -EPROTO;
	}
	ret = data_recv_full(c->data, body, sizeof(body));
	if (ret < 0)
		return ret;
	if (bcp_dec_data_req(body, &d) < 0) {
		*why = bcp_err_str(BCP_E_BAD_PADDING);
		return -EBADMSG;
	}

	status = 0;
	if (d.region_id != c->region_id || d.region_off > c->pool_len ||
	    d.length > c->pool_len - d.region_off)
		status = -EFAULT;

	if (h.opcode == BCP_OP_DATA_WRITE) {
		if (h.payload_len != sizeof(body) + (uint64_t)d.length) {
			*why = "DATA_WRITE length disagrees with its frame";
			return -EPROTO;
		}
		if (status == 0)
			ret = data_recv_full(c->data,
					     (uint8_t *)c->pool_base +
					     d.region_off, d.length);
		else
			ret = data_discard(c, d.length);
		if (ret < 0)
			return ret;
		return data_reply(c, &h, status, NULL, 0);
	}

	if (h.payload_len != sizeof(body)) {
		*why = "DATA_READ carries a payload";
		return -EPROTO;
	}
	if (status < 0)
		return data_reply(c, &h, status, NULL, 0);
	return data_reply(c, &h, 0, (uint8_t *)c->pool_base + d.region_off,
			  d.length);
}

static void *data_main(void *arg)
{
	struct bcp_client *c = arg;
	const char *why = NULL;
	char msg[640];
	int ret;

	do
		ret = data_serve_one(c, &why);
	while (ret == 0);

	if (why)
		snprintf(msg, sizeof(msg),
			 "bad frame from agent at %s on the data connection: %s",
			 c->addr_str, why);
	else
		snprintf(msg, sizeof(msg),
			 "data connection to agent at %s lost: %s",
			 c->addr_str, ret == -ECONNRESET ?
			 "closed by the agent" : strerror(-ret));
	bcp_client_break(c, msg);
	return NULL;
}

int bcp_client_xfer_start(struct bcp_client *c)
{
	if (c->transport == BCP_XFER_RDMA)
		return bcp_client_rdma_start(c);
	if (c->transport != BCP_XFER_TCP)
		return 0;
	return bcp_client_thread_start(c, &c->data_thread,
				       &c->have_data_thread, data_main,
				       "bcp-data");
}

void bcp_client_xfer_teardown(struct bcp_client *c)
{
	/* before the pool goes: its memory region refers to it */
	bcp_client_rdma_teardown(c);
	if (c->data >= 0) {
		close(c->data);
		c->data = -1;
	}
	if (c->memfd >= 0) {
		close(c->memfd);
		c->memfd = -1;
	}
	if (c->pool_base) {
		munmap(c->pool_base, c->pool_len);
		c->pool_base = NULL;
	}
	free(c->dbuf);
	c->dbuf = NULL;
}
