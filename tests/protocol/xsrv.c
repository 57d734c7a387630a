/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xsrv.c - the agent's shm and tcp data transports (bcp_xfer_srv.c) against
 * a hostile host.  A real struct bcp_xsrv runs over a socketpair (tcp) or a
 * real memfd (shm); the test plays the host: it answers DATA_WRITE and
 * DATA_READ, or answers them wrongly, late, in pieces or not at all, and
 * shrinks memfds while the agent registers them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "bcp_codec.h"
#include "bcp_xfer_srv.h"
#include "check.h"

#define NOPS	64

/* Completions as the transport reported them. */
struct log {
	unsigned int n;
	int status[NOPS];
	struct bcp_xsrv_op *op[NOPS];
};

static void log_done(void *ctx, struct bcp_xsrv_op *op, int status)
{
	struct log *l = ctx;

	REQUIRE(l->n < NOPS, "too many completions");
	l->op[l->n] = op;
	l->status[l->n] = status;
	l->n++;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* An xsrv with a data connection; *host is the host's (blocking) end. */
static struct bcp_xsrv *tcp_setup(struct log *l, int *host,
				  const struct bcp_xsrv_limits *lim)
{
	struct bcp_xsrv *x;
	int sv[2];

	memset(l, 0, sizeof(*l));
	x = bcp_xsrv_create(log_done, l);
	REQUIRE(x, "bcp_xsrv_create");
	if (lim)
		bcp_xsrv_set_limits(x, lim);
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	REQUIRE(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	REQUIRE(bcp_xsrv_data_attach(x, sv[0]) == 0, "attach");
	REQUIRE(bcp_xsrv_region_register(x, 1, BCP_REGION_TCP, 1u << 20, 0, 0,
					 -1) == 0, "register tcp region");
	*host = sv[1];
	return x;
}

static void op_init(struct bcp_xsrv_op *op, enum bcp_xsrv_dir dir,
		    uint64_t off, void *local, uint32_t len)
{
	memset(op, 0, sizeof(*op));
	op->dir = dir;
	op->region_id = 1;
	op->region_off = off;
	op->local = local;
	op->len = len;
}

static void read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		REQUIRE(n > 0, "host read: %s", n < 0 ? strerror(errno) :
			"eof");
		p += n;
		len -= (size_t)n;
	}
}

static void write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		REQUIRE(n > 0, "host write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* The host takes one request off the data connection; payload: WRITE's. */
static void host_req(int fd, struct bcp_hdr *h, struct bcp_data_req *d,
		     void *payload, size_t cap)
{
	uint8_t buf[BCP_HDR_SIZE + 16];

	read_full(fd, buf, sizeof(buf));
	REQUIRE(bcp_hdr_check(buf, BCP_DATA_FRAME_MAX, h, NULL) == 0,
		"agent sent a bad header");
	bcp_dec_data_req(buf + BCP_HDR_SIZE, d);
	REQUIRE(h->payload_len == 16 + (h->opcode == BCP_OP_DATA_WRITE ?
					d->length : 0), "request length");
	if (h->opcode == BCP_OP_DATA_WRITE) {
		REQUIRE(d->length <= cap, "payload too long for the test");
		read_full(fd, payload, d->length);
	}
}

static void hdr_make(uint8_t *buf, uint16_t opcode, uint16_t flags,
		     uint64_t req_id, int32_t status, uint32_t plen)
{
	struct bcp_hdr h = {
		.magic = BCP_MAGIC,
		.version = BCP_VERSION_MAX,
		.opcode = opcode,
		.flags = flags,
		.payload_len = plen,
		.req_id = req_id,
		.status = status,
	};

	bcp_enc_hdr(buf, &h);
}

static void host_reply(int fd, uint16_t opcode, uint64_t req_id,
		       int32_t status, const void *payload, uint32_t plen)
{
	uint8_t buf[BCP_HDR_SIZE];

	hdr_make(buf, opcode, BCP_HF_REPLY, req_id, status, plen);
	write_full(fd, buf, sizeof(buf));
	if (plen)
		write_full(fd, payload, plen);
}

/* Drive the agent side until nothing more moves (bounded). */
static int pump(struct bcp_xsrv *x, uint32_t revents, const char **why)
{
	return bcp_xsrv_progress(x, revents, why);
}

/* An honest host: a WRITE and a READ, the READ's reply in 1-byte pieces. */
static void test_tcp_roundtrip(void)
{
	static uint8_t out[4096], in[4096], host_mem[4096];
	struct bcp_xsrv_op w, r;
	struct bcp_data_req d;
	struct bcp_hdr h;
	const char *why;
	struct log l;
	uint8_t rep[BCP_HDR_SIZE + sizeof(host_mem)];
	unsigned int i;
	int host, ret = 0;
	struct bcp_xsrv *x = tcp_setup(&l, &host, NULL);

	memset(out, 0xab, sizeof(out));
	for (i = 0; i < sizeof(host_mem); i++)
		host_mem[i] = (uint8_t)i;
	op_init(&w, BCP_XSRV_WRITE, 0, out, sizeof(out));
	op_init(&r, BCP_XSRV_READ, 8192, in, sizeof(in));
	CHECK(bcp_xsrv_post(x, &w) == 0, "post write");
	CHECK(bcp_xsrv_post(x, &r) == 0, "post read");
	CHECK(bcp_xsrv_events(x) & EPOLLOUT, "wants EPOLLOUT");
	CHECK(pump(x, EPOLLOUT, &why) == 0, "send");
	CHECK(!(bcp_xsrv_events(x) & EPOLLOUT), "all sent");

	host_req(host, &h, &d, host_mem, sizeof(host_mem));
	CHECK(h.opcode == BCP_OP_DATA_WRITE && d.length == sizeof(out) &&
	      d.region_off == 0 && d.region_id == 1, "write request");
	CHECK(host_mem[100] == 0xab, "write payload");
	host_reply(host, BCP_OP_DATA_WRITE, h.req_id, 0, NULL, 0);
	CHECK(pump(x, EPOLLIN, &why) == 0, "write reply: %s", why);
	CHECK(l.n == 1 && l.op[0] == &w && l.status[0] == (int)sizeof(out),
	      "write completed (%u)", l.n);

	host_req(host, &h, &d, NULL, 0);
	CHECK(h.opcode == BCP_OP_DATA_READ && d.region_off == 8192,
	      "read request");
	for (i = 0; i < sizeof(host_mem); i++)
		host_mem[i] = (uint8_t)(i * 7);
	hdr_make(rep, BCP_OP_DATA_READ, BCP_HF_REPLY, h.req_id, 0,
		 sizeof(host_mem));
	memcpy(rep + BCP_HDR_SIZE, host_mem, sizeof(host_mem));
	/* a partial frame at a time: header bytes, then payload bytes */
	for (i = 0; i < sizeof(rep) && ret == 0; i += 509) {
		size_t n = sizeof(rep) - i < 509 ? sizeof(rep) - i : 509;

		write_full(host, rep + i, n);
		ret = pump(x, EPOLLIN, &why);
		if (i + n < sizeof(rep))
			CHECK(l.n == 1, "read completed early");
	}
	CHECK(ret == 0, "read reply in pieces: %s", why);
	CHECK(l.n == 2 && l.op[1] == &r && l.status[1] == (int)sizeof(in),
	      "read completed");
	CHECK(!memcmp(in, host_mem, sizeof(in)), "read payload");
	CHECK(bcp_xsrv_pending(x) == 0, "nothing pending");
	CHECK(bcp_xsrv_kick(x, &why) == 0, "kick without timeout");
	CHECK(bcp_xsrv_region_unregister(x, 1) == 0, "unregister");
	bcp_xsrv_destroy(x);
	close(host);
}

/* A host's error status fails that transfer alone. */
static void test_tcp_error_status(void)
{
	uint8_t buf[64];
	struct bcp_xsrv_op r, w;
	struct bcp_data_req d;
	struct bcp_hdr h;
	const char *why;
	struct log l;
	int host;
	struct bcp_xsrv *x = tcp_setup(&l, &host, NULL);

	op_init(&r, BCP_XSRV_READ, 0, buf, sizeof(buf));
	op_init(&w, BCP_XSRV_WRITE, 0, buf, sizeof(buf));
	CHECK(bcp_xsrv_post(x, &r) == 0 && bcp_xsrv_post(x, &w) == 0, "post");
	CHECK(pump(x, EPOLLOUT, &why) == 0, "send");
	host_req(host, &h, &d, NULL, 0);
	host_reply(host, BCP_OP_DATA_READ, h.req_id, -EFAULT, NULL, 0);
	host_req(host, &h, &d, buf, sizeof(buf));
	host_reply(host, BCP_OP_DATA_WRITE, h.req_id, -EIO, NULL, 0);
	CHECK(pump(x, EPOLLIN, &why) == 0, "error replies: %s", why);
	CHECK(l.n == 2 && l.status[0] == -EFAULT && l.status[1] == -EIO,
	      "statuses %d %d", l.status[0], l.status[1]);
	CHECK(bcp_xsrv_fd(x) >= 0, "connection stays");
	bcp_xsrv_destroy(x);
	close(host);
}

enum bad_reply {
	BAD_OPCODE,		/* a DATA_READ reply to a DATA_WRITE */
	BAD_REQ_ID,
	BAD_NOT_POSTED,		/* a reply while nothing is posted */
	BAD_NOT_REPLY,		/* a request frame */
	BAD_READ_LEN,		/* DATA_READ reply shorter than asked */
	BAD_WRITE_BODY,		/* DATA_WRITE reply with a payload */
	BAD_TOO_LONG,		/* over BCP_DATA_FRAME_MAX */
	BAD_STATUS,		/* a positive status */
	BAD_MAX
};

static const char *const bad_names[BAD_MAX] = {
	"wrong opcode", "wrong req_id", "never posted", "not a reply",
	"short read", "write with body", "too long", "positive status",
};

/* Every wrong field of a reply fails the connection and every op. */
static void test_tcp_bad_reply(enum bad_reply kind)
{
	uint8_t buf[64], frame[BCP_HDR_SIZE + 64];
	struct bcp_xsrv_op w, r;
	struct bcp_data_req d;
	struct bcp_hdr h = { 0 };
	const char *why = NULL;
	struct log l;
	size_t flen = BCP_HDR_SIZE;
	int host, ret;
	struct bcp_xsrv *x = tcp_setup(&l, &host, NULL);

	op_init(&w, BCP_XSRV_WRITE, 0, buf, sizeof(buf));
	op_init(&r, BCP_XSRV_READ, 64, buf, sizeof(buf));
	if (kind != BAD_NOT_POSTED) {
		CHECK(bcp_xsrv_post(x, kind == BAD_READ_LEN ? &r : &w) == 0,
		      "post");
		CHECK(pump(x, EPOLLOUT, &why) == 0, "send");
		host_req(host, &h, &d, buf, sizeof(buf));
	}
	memset(frame, 0, sizeof(frame));
	switch (kind) {
	case BAD_OPCODE:
		hdr_make(frame, BCP_OP_DATA_READ, BCP_HF_REPLY, h.req_id, 0, 0);
		break;
	case BAD_REQ_ID:
		hdr_make(frame, BCP_OP_DATA_WRITE, BCP_HF_REPLY, h.req_id + 1,
			 0, 0);
		break;
	case BAD_NOT_POSTED:
		hdr_make(frame, BCP_OP_DATA_WRITE, BCP_HF_REPLY, 1, 0, 0);
		break;
	case BAD_NOT_REPLY:
		hdr_make(frame, BCP_OP_DATA_WRITE, 0, h.req_id, 0, 0);
		break;
	case BAD_READ_LEN:
		hdr_make(frame, BCP_OP_DATA_READ, BCP_HF_REPLY, h.req_id, 0,
			 32);
		flen += 32;
		break;
	case BAD_WRITE_BODY:
		hdr_make(frame, BCP_OP_DATA_WRITE, BCP_HF_REPLY, h.req_id, 0,
			 8);
		flen += 8;
		break;
	case BAD_TOO_LONG:
		hdr_make(frame, BCP_OP_DATA_WRITE, BCP_HF_REPLY, h.req_id, 0,
			 BCP_DATA_FRAME_MAX);
		break;
	case BAD_STATUS:
		hdr_make(frame, BCP_OP_DATA_WRITE, BCP_HF_REPLY, h.req_id, 5,
			 0);
		break;
	case BAD_MAX:
		break;
	}
	write_full(host, frame, flen);
	ret = pump(x, EPOLLIN, &why);
	CHECK(ret < 0, "%s: accepted", bad_names[kind]);
	CHECK(bcp_xsrv_fd(x) < 0 && bcp_xsrv_events(x) == 0,
	      "%s: connection still open", bad_names[kind]);
	CHECK(bcp_xsrv_pending(x) == 0, "%s: ops pending", bad_names[kind]);
	if (kind == BAD_NOT_POSTED)
		CHECK(l.n == 0, "%s: completions", bad_names[kind]);
	else
		CHECK(l.n == 1 && l.status[0] < 0, "%s: op status %d",
		      bad_names[kind], l.n ? l.status[0] : 0);
	bcp_xsrv_destroy(x);
	close(host);
}

/* A host that never answers loses its data connection after timeout_ms. */
static void test_tcp_timeout_unanswered(void)
{
	const struct bcp_xsrv_limits lim = { .timeout_ms = 150 };
	uint8_t buf[64];
	struct bcp_xsrv_op w, r;
	struct bcp_data_req d;
	struct bcp_hdr h;
	const char *why = NULL;
	struct log l;
	int host, ret;
	struct bcp_xsrv *x = tcp_setup(&l, &host, &lim);

	op_init(&w, BCP_XSRV_WRITE, 0, buf, sizeof(buf));
	op_init(&r, BCP_XSRV_READ, 0, buf, sizeof(buf));
	CHECK(bcp_xsrv_post(x, &w) == 0, "post");
	CHECK(pump(x, EPOLLOUT, &why) == 0, "send");
	host_req(host, &h, &d, buf, sizeof(buf));
	CHECK(bcp_xsrv_kick(x, &why) == 0, "timed out early");
	sleep_ms(80);
	/* a later transfer does not restart the clock of the first */
	CHECK(bcp_xsrv_post(x, &r) == 0, "post 2");
	CHECK(bcp_xsrv_kick(x, &why) == 0, "timed out early");
	sleep_ms(100);
	ret = bcp_xsrv_kick(x, &why);
	CHECK(ret == -ETIMEDOUT, "kick: %d", ret);
	CHECK(ret != -ETIMEDOUT || strstr(why, "timed out after"),
	      "why: %s", why);
	CHECK(l.n == 2 && l.status[0] == -ETIMEDOUT &&
	      l.status[1] == -ETIMEDOUT, "ops failed with -ETIMEDOUT");
	CHECK(bcp_xsrv_fd(x) < 0 && bcp_xsrv_pending(x) == 0,
	      "connection closed");
	CHECK(bcp_xsrv_post(x, &w) == -ENOTCONN, "post after timeout");
	bcp_xsrv_destroy(x);
	close(host);
}

/* A host that stops reading DATA_WRITE frames: send blocks, same timeout. */
static void test_tcp_timeout_not_reading(void)
{
	const struct bcp_xsrv_limits lim = { .timeout_ms = 150 };
	static uint8_t big[1u << 20];
	struct bcp_xsrv_op ops[16];
	const char *why = NULL;
	struct log l;
	unsigned int i;
	int host, ret;
	struct bcp_xsrv *x = tcp_setup(&l, &host, &lim);

	for (i = 0; i < 16; i++) {
		op_init(&ops[i], BCP_XSRV_WRITE, 0, big, sizeof(big));
		CHECK(bcp_xsrv_post(x, &ops[i]) == 0, "post %u", i);
	}
	CHECK(pump(x, EPOLLOUT, &why) == 0, "send");
	CHECK(bcp_xsrv_events(x) & EPOLLOUT, "socket buffer full");
	CHECK(bcp_xsrv_kick(x, &why) == 0, "timed out early");
	sleep_ms(200);
	CHECK(pump(x, EPOLLOUT, &why) == 0, "send again");
	ret = bcp_xsrv_kick(x, &why);
	CHECK(ret == -ETIMEDOUT, "kick: %d", ret);
	CHECK(l.n == 16, "completions %u", l.n);
	for (i = 0; i < l.n; i++)
		CHECK(l.status[i] == -ETIMEDOUT, "status %d", l.status[i]);
	CHECK(bcp_xsrv_fd(x) < 0, "connection closed");
	bcp_xsrv_destroy(x);
	close(host);
}

/* Hang-up: the connection ends, even with a partial frame buffered. */
static void test_tcp_hangup(void)
{
	uint8_t buf[64], frame[BCP_HDR_SIZE];
	struct bcp_xsrv_op r;
	struct bcp_data_req d;
	struct bcp_hdr h;
	const char *why = NULL;
	struct log l;
	int host, ret, ep;
	struct epoll_event ev = { .events = EPOLLIN };
	struct bcp_xsrv *x = tcp_setup(&l, &host, NULL);

	op_init(&r, BCP_XSRV_READ, 0, buf, sizeof(buf));
	CHECK(bcp_xsrv_post(x, &r) == 0, "post");
	CHECK(pump(x, EPOLLOUT, &why) == 0, "send");
	host_req(host, &h, &d, NULL, 0);
	hdr_make(frame, BCP_OP_DATA_READ, BCP_HF_REPLY, h.req_id, 0,
		 sizeof(buf));
	write_full(host, frame, 10);
	close(host);
	ep = epoll_create1(0);
	REQUIRE(ep >= 0, "epoll");
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, bcp_xsrv_fd(x), &ev) == 0,
		"epoll_ctl");
	CHECK(epoll_wait(ep, &ev, 1, 1000) == 1 && (ev.events & EPOLLHUP),
	      "hang-up seen");
	ret = pump(x, ev.events, &why);
	CHECK(ret < 0, "hang-up: %d", ret);
	CHECK(l.n == 1 && l.status[0] < 0, "op failed");
	CHECK(bcp_xsrv_fd(x) < 0 && bcp_xsrv_events(x) == 0,
	      "connection closed");
	/* a later wake-up (stale event) does nothing */
	CHECK(pump(x, EPOLLHUP, &why) == 0, "closed connection");
	close(ep);
	bcp_xsrv_destroy(x);

	/* EPOLLERR/HUP with nothing to read still ends the connection */
	x = tcp_setup(&l, &host, NULL);
	ret = pump(x, EPOLLERR, &why);
	CHECK(ret < 0 && bcp_xsrv_fd(x) < 0, "EPOLLERR ignored: %d", ret);
	bcp_xsrv_destroy(x);
	close(host);
}

static void test_tcp_post_limits(void)
{
	static uint8_t big[BCP_DATA_FRAME_MAX];
	struct bcp_xsrv_op w;
	struct log l;
	int host;
	struct bcp_xsrv *x;

	memset(&l, 0, sizeof(l));
	x = tcp_setup(&l, &host, NULL);
	REQUIRE(bcp_xsrv_region_register(x, 2, BCP_REGION_TCP, 64u << 20, 0,
					 0, -1) == 0, "register");
	op_init(&w, BCP_XSRV_WRITE, 0, big, BCP_DATA_FRAME_MAX - 48 + 1);
	w.region_id = 2;
	CHECK(bcp_xsrv_post(x, &w) == -EMSGSIZE, "over a data frame");
	w.len = BCP_DATA_FRAME_MAX - 48;
	CHECK(bcp_xsrv_post(x, &w) == 0, "a full data frame");
	bcp_xsrv_destroy(x);
	CHECK(l.n == 1 && l.status[0] == -ECONNABORTED, "destroy fails ops");
	close(host);
}

/* max_regions and max_bytes, -ENOSPC both; unregistering gives back. */
static void test_limits(void)
{
	struct bcp_xsrv_limits lim = { .max_regions = 3,
				       .max_bytes = 3u << 20 };
	struct log l;
	uint32_t id;
	int host, ret;
	struct bcp_xsrv *x = tcp_setup(&l, &host, &lim);

	/* region 1 (1 MiB) is in */
	CHECK(bcp_xsrv_region_register(x, 2, BCP_REGION_TCP, 2u << 20, 0, 0,
				       -1) == 0, "to the byte limit");
	CHECK(bcp_xsrv_region_register(x, 3, BCP_REGION_TCP, 1, 0, 0, -1) ==
	      -ENOSPC, "over the byte limit");
	CHECK(bcp_xsrv_region_unregister(x, 2) == 0, "unregister");
	CHECK(bcp_xsrv_region_register(x, 3, BCP_REGION_TCP, 4096, 0, 0, -1)
	      == 0, "bytes given back");
	CHECK(bcp_xsrv_region_register(x, 4, BCP_REGION_TCP, 4096, 0, 0, -1)
	      == 0, "third region");
	CHECK(bcp_xsrv_region_register(x, 5, BCP_REGION_TCP, 4096, 0, 0, -1)
	      == -ENOSPC, "over the region limit");
	/* limits lowered under what is registered: nothing more fits */
	lim.max_regions = 0;
	lim.max_bytes = 4096;
	bcp_xsrv_set_limits(x, &lim);
	CHECK(bcp_xsrv_region_register(x, 5, BCP_REGION_TCP, 4096, 0, 0, -1)
	      == -ENOSPC, "under a lowered byte limit");
	bcp_xsrv_destroy(x);
	close(host);

	/* over the built-in maximum: clamped to BCP_REGIONS_MAX */
	lim.max_regions = BCP_REGIONS_MAX * 2;
	lim.max_bytes = 0;
	x = tcp_setup(&l, &host, &lim);
	for (id = 2, ret = 0; id <= BCP_REGIONS_MAX + 1 && ret == 0; id++)
		ret = bcp_xsrv_region_register(x, id, BCP_REGION_TCP, 1, 0, 0,
					       -1);
	CHECK(ret == -ENOSPC && id == BCP_REGIONS_MAX + 2,
	      "clamped: %d at %u", ret, id);
	bcp_xsrv_destroy(x);
	close(host);
}

static int memfd(uint64_t size, unsigned int flags)
{
	int fd = memfd_create("xsrv-test", MFD_CLOEXEC | flags);

	REQUIRE(fd >= 0, "memfd_create: %s", strerror(errno));
	REQUIRE(ftruncate(fd, (off_t)size) == 0, "ftruncate");
	return fd;
}

/* Sparse shm regions count against max_bytes before they are mapped. */
static void test_shm_limits(void)
{
	const uint64_t gib = 1ull << 30;
	const struct bcp_xsrv_limits lim = { .max_bytes = 2 * gib };
	struct log l;
	struct bcp_xsrv *x;
	int fd, ret;

	memset(&l, 0, sizeof(l));
	x = bcp_xsrv_create(log_done, &l);
	REQUIRE(x, "create");
	bcp_xsrv_set_limits(x, &lim);
	fd = memfd(gib, MFD_ALLOW_SEALING);
	CHECK(bcp_xsrv_region_register(x, 1, BCP_REGION_SHM, gib, 0, 0, fd)
	      == 0, "first GiB");
	CHECK(bcp_xsrv_region_register(x, 2, BCP_REGION_SHM, gib, 0, 0, fd)
	      == 0, "second GiB");
	ret = bcp_xsrv_region_register(x, 3, BCP_REGION_SHM, gib, 0, 0, fd);
	CHECK(ret == -ENOSPC, "third GiB: %d", ret);
	CHECK(bcp_xsrv_region_register(x, 3, BCP_REGION_SHM, 1, 0, 0, fd)
	      == -ENOSPC, "one byte more");
	close(fd);
	bcp_xsrv_destroy(x);
}

/* Seals: required, and a memfd already sealed shut is fine if it has it. */
static void test_shm_seals(void)
{
	const uint64_t len = 1u << 16;
	struct bcp_xsrv_op w;
	uint8_t buf[64];
	void *map;
	struct log l;
	struct bcp_xsrv *x;
	int fd;

	memset(&l, 0, sizeof(l));
	x = bcp_xsrv_create(log_done, &l);
	REQUIRE(x, "create");

	fd = memfd(len, 0);
	CHECK(bcp_xsrv_region_register(x, 1, BCP_REGION_SHM, len, 0, 0, fd)
	      == -EPERM, "unsealable memfd");
	close(fd);

	fd = memfd(len, MFD_ALLOW_SEALING);
	REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL) == 0, "seal");
	CHECK(bcp_xsrv_region_register(x, 1, BCP_REGION_SHM, len, 0, 0, fd)
	      == -EPERM, "sealed without F_SEAL_SHRINK");
	close(fd);

	fd = memfd(len, MFD_ALLOW_SEALING);
	REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		      F_SEAL_SEAL) == 0, "seal");
	CHECK(bcp_xsrv_region_register(x, 1, BCP_REGION_SHM, len, 0, 0, fd)
	      == 0, "sealed with F_SEAL_SHRINK and F_SEAL_SEAL");
	close(fd);

	fd = memfd(len - 1, MFD_ALLOW_SEALING);
	CHECK(bcp_xsrv_region_register(x, 2, BCP_REGION_SHM, len, 0, 0, fd)
	      == -EINVAL, "memfd shorter than the region");
	close(fd);

	memset(buf, 0x5a, sizeof(buf));
	op_init(&w, BCP_XSRV_WRITE, len - sizeof(buf), buf, sizeof(buf));
	CHECK(bcp_xsrv_post(x, &w) == 0 && l.n == 1 &&
	      l.status[0] == (int)sizeof(buf), "shm write");
	CHECK(bcp_xsrv_region_map(x, 1, len - 1, 1, &map) == 0 &&
	      *(uint8_t *)map == 0x5a, "shm mapping");
	bcp_xsrv_destroy(x);
}

/*
 * The host shrinks the memfd while the agent registers it.  Whatever the
 * interleaving, a region the agent accepted must be as long as it says
 * and stay so: checked with fstat afterwards (the seal is on by then).
 */
static atomic_int race_fd = -1;
static atomic_int race_stop;

static void *race_shrinker(void *arg)
{
	const off_t len = (off_t)(uintptr_t)arg;

	while (!atomic_load(&race_stop)) {
		int fd = atomic_load(&race_fd);

		if (fd < 0)
			continue;
		if (ftruncate(fd, 0) == 0)
			(void)ftruncate(fd, len);
	}
	return NULL;
}

static void test_shm_shrink_race(void)
{
	const uint64_t len = 1u << 16;
	unsigned int tries = 0, taken = 0, short_ones = 0;
	uint64_t deadline = now_ms() + 2000;
	pthread_t t;
	struct log l;
	struct bcp_xsrv *x;

	memset(&l, 0, sizeof(l));
	x = bcp_xsrv_create(log_done, &l);
	REQUIRE(x, "create");
	REQUIRE(pthread_create(&t, NULL, race_shrinker,
			       (void *)(uintptr_t)len) == 0, "thread");
	while (now_ms() < deadline && short_ones == 0) {
		struct stat st;
		int fd = memfd(len, MFD_ALLOW_SEALING);

		atomic_store(&race_fd, fd);
		tries++;
		if (bcp_xsrv_region_register(x, 1, BCP_REGION_SHM, len, 0, 0,
					     fd) == 0) {
			taken++;
			REQUIRE(fstat(fd, &st) == 0, "fstat");
			if ((uint64_t)st.st_size < len)
				short_ones++;
			REQUIRE(bcp_xsrv_region_unregister(x, 1) == 0,
				"unregister");
		}
		atomic_store(&race_fd, -1);
		close(fd);
	}
	atomic_store(&race_stop, 1);
	pthread_join(t, NULL);
	CHECK(short_ones == 0, "a shrunk memfd was registered (%u of %u "
	      "taken, %u tries)", short_ones, taken, tries);
	bcp_xsrv_destroy(x);
}

int main(void)
{
	unsigned int i;

	test_tcp_roundtrip();
	test_tcp_error_status();
	for (i = 0; i < BAD_MAX; i++)
		test_tcp_bad_reply((enum bad_reply)i);
	test_tcp_timeout_unanswered();
	test_tcp_timeout_not_reading();
	test_tcp_hangup();
	test_tcp_post_limits();
	test_limits();
	test_shm_limits();
	test_shm_seals();
	test_shm_shrink_race();
	return check_exit("xsrv");
}
