/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_fake.c - the client library against a scripted fake agent (no
 * agent binary needed): a HELLO reply of another protocol version, a
 * refusal of every version, a server that cannot prove the secret, and a
 * complete tcp session in which the fake plays the RDMA engine on the data
 * connection: DATA_WRITE lands in the pool, DATA_READ returns pool bytes,
 * ranges outside the pool get -EFAULT, batches complete only with their
 * reply, and a dropped connection fails the waiting call with -ENOTCONN.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bcp_auth.h"
#include "bcp_client.h"
#include "bcp_frame.h"
#include "harness.h"

#define SECRET		"fake-secret"
#define POOL		(1u << 20)
#define SESSION		0x1122334455667788ull
#define ROOT		77

enum scenario {
	SC_HDR_VERSION,		/* reply header of a newer version */
	SC_BODY_VERSION,	/* hello_rep.version newer */
	SC_NO_VERSION,		/* status -EPROTONOSUPPORT */
	SC_BAD_SERVER_MAC,
	SC_TCP_SESSION,
};

struct fake {
	enum scenario sc;
	int lfd;
	int ctl, data;
	uint8_t nc[BCP_NONCE_LEN], ns[BCP_NONCE_LEN];
	uint8_t *buf;
	int ok;			/* the script ran to its end */
};

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

static int recv_msg(int fd, uint8_t *buf, size_t cap, struct bcp_msg *m)
{
	enum bcp_err why;
	int n = bcp_frame_recv(fd, buf, cap, NULL, 10000, &why);

	if (n <= 0)
		return -1;
	if (bcp_decode(buf, (size_t)n, m, &why) < 0) {
		fprintf(stderr, "fake: bad frame: %s\n", bcp_err_str(why));
		return -1;
	}
	return n;
}

static int send_msg(int fd, const struct bcp_msg *m)
{
	uint8_t out[4096];
	int n = bcp_encode(out, sizeof(out), m);

	if (n < 0)
		return n;
	return bcp_frame_send(fd, out, (size_t)n, -1);
}

/* One DATA_* exchange on the data connection; returns the reply status. */
static int32_t data_op(struct fake *f, uint16_t op, uint64_t off,
		       uint32_t len, const void *bytes, void *back)
{
	struct bcp_msg req, rep;
	static uint64_t id = 100;

	bcp_msg_init(&req, op, id++);
	req.u.data_req.region_id = 1;
	req.u.data_req.length = len;
	req.u.data_req.region_off = off;
	if (op == BCP_OP_DATA_WRITE) {
		req.data = bytes;
		req.data_len = len;
	}
	{
		uint8_t *out = malloc(len + 64);
		int n = bcp_encode(out, len + 64, &req);

		if (n < 0 || bcp_frame_send(f->data, out, (size_t)n, -1)) {
			free(out);
			return -9999;
		}
		free(out);
	}
	if (recv_msg(f->data, f->buf, BCP_DATA_FRAME_MAX, &rep) < 0)
		return -9998;
	if (rep.hdr.req_id != req.hdr.req_id || rep.hdr.opcode != op)
		return -9997;
	if (op == BCP_OP_DATA_READ && rep.hdr.status == 0) {
		if (rep.data_len != len)
			return -9996;
		memcpy(back, rep.data, len);
	}
	return rep.hdr.status;
}

static int fake_tcp_session(struct fake *f)
{
	struct bcp_msg m, r;
	struct bcp_seg seg;
	uint8_t mac[BCP_MAC_LEN], sess[8], *bytes, *back;
	int32_t st;
	size_t i;
	int ok = 0;

	bytes = malloc(POOL);
	back = malloc(POOL);
	for (i = 0; i < POOL; i++)
		bytes[i] = pattern(i);

	/* The data connection: DATA_ATTACH with the session's MAC. */
	f->data = accept(f->lfd, NULL, NULL);
	if (f->data < 0 || recv_msg(f->data, f->buf, BCP_FRAME_MAX, &m) < 0 ||
	    m.hdr.opcode != BCP_OP_DATA_ATTACH ||
	    m.u.attach_req.session != SESSION)
		goto out;
	for (i = 0; i < 8; i++)
		sess[i] = (uint8_t)(SESSION >> (8 * i));
	bcp_auth_mac(SECRET, strlen(SECRET), BCP_AUTH_LABEL_DATA, f->ns,
		     BCP_NONCE_LEN, sess, 8, mac);
	bcp_msg_init_reply(&r, &m, bcp_auth_mac_equal(mac,
				m.u.attach_req.mac) ? 0 : -EACCES);
	if (send_msg(f->data, &r) || r.hdr.status)
		goto out;

	/* REGISTER_REGION kind TCP on the control connection. */
	if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m) < 0 ||
	    m.hdr.opcode != BCP_OP_REGISTER_REGION ||
	    m.u.region_req.kind != BCP_REGION_TCP ||
	    m.u.region_req.length != POOL)
		goto out;
	bcp_msg_init_reply(&r, &m, 0);
	if (send_msg(f->ctl, &r))
		goto out;

	/* A BATCH_PULL of one segment, served through DATA_WRITE. */
	if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m) < 0 ||
	    m.hdr.opcode != BCP_OP_BATCH_PULL || m.u.batch_req.count != 1)
		goto out;
	bcp_msg_seg(&m, 0, &seg);
	{
		struct bcp_msg breq = m;
		int32_t stv[1];

		TH_CHECK(seg.fh == 5 && seg.offset == 4096 &&
			 seg.length == 5000 && seg.region_id == 1,
			 "segment as sent");
		st = data_op(f, BCP_OP_DATA_WRITE, seg.region_off, seg.length,
			     bytes, NULL);
		TH_CHECK(st == 0, "DATA_WRITE in range: %d", st);
		st = data_op(f, BCP_OP_DATA_WRITE, POOL - 10, 100, bytes,
			     NULL);
		TH_CHECK(st == -EFAULT, "DATA_WRITE past the pool: %d", st);
		st = data_op(f, BCP_OP_DATA_READ, seg.region_off, seg.length,
			     NULL, back);
		TH_CHECK(st == 0 && !memcmp(back, bytes, seg.length),
			 "DATA_READ gives back what DATA_WRITE put: %d", st);
		st = data_op(f, BCP_OP_DATA_READ, POOL, 1, NULL, back);
		TH_CHECK(st == -EFAULT, "DATA_READ past the pool: %d", st);
		/* The pull is not done before its reply. */
		usleep(100000);
		bcp_msg_init_reply(&r, &breq, 0);
		r.u.batch_rep.count = 1;
		stv[0] = 5000;
		r.statuses = stv;
		if (send_msg(f->ctl, &r))
			goto out;
	}

	/* A BATCH_PUSH: the fake reads the pool with DATA_READ. */
	if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m) < 0 ||
	    m.hdr.opcode != BCP_OP_BATCH_PUSH || m.u.batch_req.count != 1)
		goto out;
	bcp_msg_seg(&m, 0, &seg);
	{
		struct bcp_msg breq = m;
		int32_t stv[1];

		st = data_op(f, BCP_OP_DATA_READ, seg.region_off, seg.length,
			     NULL, back);
		TH_CHECK(st == 0 && seg.length == 3000, "push DATA_READ: %d",
			 st);
		for (i = 0; i < 3000; i++)
			if (back[i] != (uint8_t)(i ^ 0x5a))
				break;
		TH_CHECK(i == 3000, "pushed bytes differ at %zu", i);
		bcp_msg_init_reply(&r, &breq, 0);
		r.u.batch_rep.count = 1;
		stv[0] = 3000;
		r.statuses = stv;
		if (send_msg(f->ctl, &r))
			goto out;
	}

	/* A call that never gets its answer: the connection drops. */
	if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m) < 0 ||
	    m.hdr.opcode != BCP_OP_GETATTR)
		goto out;
	usleep(50000);
	ok = 1;
out:
	free(back);
	free(bytes);
	return ok;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct bcp_msg m, r;
	int version_ok;

	f->ctl = accept(f->lfd, NULL, NULL);
	if (f->ctl < 0 || recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m) < 0 ||
	    m.hdr.opcode != BCP_OP_HELLO)
		goto out;
	memcpy(f->nc, m.u.hello_req.nonce, BCP_NONCE_LEN);
	version_ok = m.u.hello_req.ver_min == BCP_VERSION_MIN &&
		     m.u.hello_req.ver_max >= BCP_VERSION_MIN;
	bcp_random(f->ns, sizeof(f->ns));

	bcp_msg_init_reply(&r, &m, f->sc == SC_NO_VERSION ?
			   -EPROTONOSUPPORT : 0);
	if (f->sc != SC_NO_VERSION) {
		r.u.hello_rep.version = f->sc == SC_BODY_VERSION ?
					 BCP_VERSION_MAX + 1 : BCP_VERSION_MAX;
		r.u.hello_rep.max_segs = 64;
		r.u.hello_rep.features = m.u.hello_req.features &
					 (BCP_FEAT_TCP_DATA | BCP_FEAT_SHM);
		r.u.hello_rep.max_frame = BCP_FRAME_MAX;
		r.u.hello_rep.max_inflight = 4;
		r.u.hello_rep.slot_size = 1 << 20;
		r.u.hello_rep.nslots = 4;
		r.u.hello_rep.session = SESSION;
		memcpy(r.u.hello_rep.nonce, f->ns, BCP_NONCE_LEN);
	}
	if (f->sc == SC_HDR_VERSION || f->sc == SC_BODY_VERSION) {
		uint8_t out[256];
		int n;

		/* Versions this codec would not encode: patch the bytes. */
		r.u.hello_rep.version = BCP_VERSION_MAX;
		n = bcp_encode(out, sizeof(out), &r);
		if (f->sc == SC_HDR_VERSION)	/* little-endian */
			out[4] = BCP_VERSION_MAX + 1;
		else				/* hello_rep.version */
			out[BCP_HDR_SIZE] = BCP_VERSION_MAX + 1;
		if (n > 0 && !bcp_frame_send(f->ctl, out, (size_t)n, -1))
			f->ok = version_ok;
		goto out;
	}
	if (send_msg(f->ctl, &r))
		goto out;
	if (f->sc == SC_NO_VERSION) {
		f->ok = version_ok;
		goto out;
	}

	if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m) < 0 ||
	    m.hdr.opcode != BCP_OP_AUTH)
		goto out;
	{
		uint8_t mac[BCP_MAC_LEN];

		bcp_auth_mac(SECRET, strlen(SECRET), BCP_AUTH_LABEL_CLIENT,
			     f->ns, BCP_NONCE_LEN, f->nc, BCP_NONCE_LEN, mac);
		if (!bcp_auth_mac_equal(mac, m.u.auth_req.mac))
			goto out;
		bcp_msg_init_reply(&r, &m, 0);
		bcp_auth_mac(f->sc == SC_BAD_SERVER_MAC ? "other" : SECRET,
			     f->sc == SC_BAD_SERVER_MAC ? 5 : strlen(SECRET),
			     BCP_AUTH_LABEL_SERVER, f->nc, BCP_NONCE_LEN,
			     f->ns, BCP_NONCE_LEN, r.u.auth_rep.mac);
		r.u.auth_rep.root = ROOT;
		if (send_msg(f->ctl, &r))
			goto out;
	}
	if (f->sc == SC_BAD_SERVER_MAC) {
		f->ok = 1;
		goto out;
	}
	f->ok = fake_tcp_session(f);
out:
	if (f->data >= 0)
		close(f->data);
	if (f->ctl >= 0)
		close(f->ctl);
	return NULL;
}

static void pull_done(struct bcp_io *io, int32_t result)
{
	__atomic_store_n((int32_t *)io->priv, result, __ATOMIC_RELEASE);
}

static int32_t wait_result(int32_t *r)
{
	int i;

	for (i = 0; i < 1000 && __atomic_load_n(r, __ATOMIC_ACQUIRE) == 1;
	     i++)
		usleep(10000);
	return __atomic_load_n(r, __ATOMIC_ACQUIRE);
}

static void session_io(struct bcp_client *c)
{
	int32_t res = 1;
	struct bcp_msg req, rep;
	uint8_t rbuf[1024];
	struct bcp_io *io;
	size_t i;
	int ret;

	io = bcp_client_io_get(c, 5000);
	TH_CHECK(io && io->cap >= 5000, "io_get");
	if (!io)
		return;
	io->op = BCP_OP_BATCH_PULL;
	io->fh = 5;
	io->offset = 4096;
	io->length = 5000;
	io->done = pull_done;
	io->priv = &res;
	memset(io->buf, 0, 5000);
	bcp_client_submit(c, io);
	usleep(50000);
	TH_CHECK(__atomic_load_n(&res, __ATOMIC_ACQUIRE) == 1,
		 "pull completed before its reply: %d", res);
	TH_CHECK(wait_result(&res) == 5000, "pull result %d", res);
	for (i = 0; i < 5000; i++)
		if (((uint8_t *)io->buf)[i] != pattern(i))
			break;
	TH_CHECK(i == 5000, "pulled bytes differ at %zu", i);

	__atomic_store_n(&res, 1, __ATOMIC_RELEASE);
	io->op = BCP_OP_BATCH_PUSH;
	io->length = 3000;
	for (i = 0; i < 3000; i++)
		((uint8_t *)io->buf)[i] = (uint8_t)(i ^ 0x5a);
	bcp_client_submit(c, io);
	TH_CHECK(wait_result(&res) == 3000, "push result %d", res);
	bcp_client_io_put(c, io);

	bcp_msg_init(&req, BCP_OP_GETATTR, 0);
	req.u.node_req.handle = ROOT;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ENOTCONN, "call on a dropped connection: %d", ret);
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ENOTCONN, "call after the drop: %d", ret);
}

static void run(enum scenario sc, int expect, const char *expect_msg)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct bcp_client_opts o;
	struct bcp_client *c = NULL;
	struct fake f;
	pthread_t t;
	char addr[64], err[512];
	int ret;

	memset(&f, 0, sizeof(f));
	f.sc = sc;
	f.ctl = f.data = -1;
	f.buf = malloc(BCP_DATA_FRAME_MAX);
	f.lfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (f.lfd < 0 || bind(f.lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(f.lfd, 4) ||
	    getsockname(f.lfd, (struct sockaddr *)&sin, &sl)) {
		perror("fake listen");
		exit(TH_HARD);
	}
	snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%u",
		 ntohs(sin.sin_port));
	pthread_create(&t, NULL, fake_main, &f);

	bcp_client_opts_init(&o);
	o.addr = addr;
	o.secret = SECRET;
	o.secret_len = strlen(SECRET);
	o.pool_size = POOL;
	o.timeout_ms = 5000;
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	printf("scenario %d: %d %s\n", (int)sc, ret, err);
	TH_CHECK(ret == expect, "scenario %d: %d, expected %d", (int)sc, ret,
		 expect);
	if (expect_msg)
		TH_CHECK(strstr(err, expect_msg) != NULL, "message: %s", err);
	if (ret == 0) {
		TH_CHECK(bcp_client_root(c) == ROOT, "root");
		TH_CHECK(bcp_client_transport(c) == BCP_XFER_TCP, "transport");
		session_io(c);
		bcp_client_destroy(c);
	}
	pthread_join(t, NULL);
	TH_CHECK(f.ok, "scenario %d: the fake agent's script failed",
		 (int)sc);
	close(f.lfd);
	free(f.buf);
}

int main(void)
{
	alarm(60);
	run(SC_HDR_VERSION, -EPROTONOSUPPORT, "protocol version 4");
	run(SC_BODY_VERSION, -EPROTONOSUPPORT, "protocol version 4");
	run(SC_NO_VERSION, -EPROTONOSUPPORT, "protocol versions 3-3");
	run(SC_BAD_SERVER_MAC, -EACCES, "prove");
	run(SC_TCP_SESSION, 0, NULL);
	bcp_client_destroy(NULL);
	if (th_failed) {
		fprintf(stderr, "%d check(s) failed\n", th_failed);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
