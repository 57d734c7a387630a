/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_misbehave.c - the client library against a fake agent that
 * misbehaves, one session per scenario.  The caller must get its error
 * (EIO for a bad reply, ENOTCONN once the session is given up, ETIMEDOUT
 * for a slow answer), the process must stay healthy, and nothing may
 * hang:
 *   - an agent that stops reading its socket while the receiver thread
 *     has FORGETs to give: the receiver still reads replies;
 *   - replies that come after their caller gave up: what a success made
 *     (a handle reference, an open file) is given back to the agent;
 *   - garbage, replies to unknown requests, of the wrong opcode or size,
 *     batch statuses larger than their segment or of the wrong count;
 *   - a data connection that stalls in the middle of a transfer.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bcp_auth.h"
#include "bcp_client.h"
#include "bcp_frame.h"
#include "harness.h"

#define SECRET		"fake-secret"
#define POOL		(1u << 20)
#define SESSION		0x1122334455667788ull
#define ROOT		77
#define INFLIGHT	8

struct fake;
typedef int (*fake_script)(struct fake *f);

struct fake {
	fake_script script;
	int lfd, ctl, data;
	uint8_t nc[BCP_NONCE_LEN], ns[BCP_NONCE_LEN];
	uint8_t *buf;
	int ok;			/* the script ran to its end */
	int go;			/* the test tells the script to go on */
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int recv_msg(int fd, uint8_t *buf, size_t cap, struct bcp_msg *m,
		    int timeout_ms)
{
	enum bcp_err why;
	int n = bcp_frame_recv(fd, buf, cap, NULL, timeout_ms, &why);

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
	static uint8_t out[BCP_FRAME_MAX];
	int n = bcp_encode(out, sizeof(out), m);

	if (n < 0)
		return n;
	return bcp_frame_send(fd, out, (size_t)n, -1);
}

/* The next request of opcode op on the control connection, else -1. */
static int expect(struct fake *f, uint16_t op, struct bcp_msg *m)
{
	if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, m, 10000) < 0)
		return -1;
	if (m->hdr.opcode != op) {
		fprintf(stderr, "fake: %s where %s was expected\n",
			bcp_op_name(m->hdr.opcode), bcp_op_name(op));
		return -1;
	}
	return 0;
}

static void fake_go(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->go++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void fake_wait_go(struct fake *f, int n)
{
	pthread_mutex_lock(&f->lock);
	while (f->go < n)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static void entry_fill(struct bcp_entry *e, uint64_t handle)
{
	memset(e, 0, sizeof(*e));
	e->handle = handle;
	e->generation = 1;
	e->attr.ino = handle;
	e->attr.mode = S_IFREG | 0644;
	e->attr.nlink = 1;
	e->attr.blksize = 4096;
}

static int fake_handshake(struct fake *f)
{
	struct bcp_msg m, r;
	uint8_t mac[BCP_MAC_LEN], sess[8];
	int i;

	f->ctl = accept(f->lfd, NULL, NULL);
	if (f->ctl < 0 || expect(f, BCP_OP_HELLO, &m) < 0)
		return -1;
	memcpy(f->nc, m.u.hello_req.nonce, BCP_NONCE_LEN);
	bcp_random(f->ns, sizeof(f->ns));
	bcp_msg_init_reply(&r, &m, 0);
	r.u.hello_rep.version = BCP_VERSION_MAX;
	r.u.hello_rep.max_segs = 64;
	r.u.hello_rep.features = m.u.hello_req.features & BCP_FEAT_TCP_DATA;
	r.u.hello_rep.max_frame = BCP_FRAME_MAX;
	r.u.hello_rep.max_inflight = INFLIGHT;
	r.u.hello_rep.slot_size = 1 << 20;
	r.u.hello_rep.nslots = 4;
	r.u.hello_rep.session = SESSION;
	memcpy(r.u.hello_rep.nonce, f->ns, BCP_NONCE_LEN);
	if (send_msg(f->ctl, &r) || expect(f, BCP_OP_AUTH, &m) < 0)
		return -1;
	bcp_msg_init_reply(&r, &m, 0);
	bcp_auth_mac(SECRET, strlen(SECRET), BCP_AUTH_LABEL_SERVER, f->nc,
		     BCP_NONCE_LEN, f->ns, BCP_NONCE_LEN, r.u.auth_rep.mac);
	r.u.auth_rep.root = ROOT;
	if (send_msg(f->ctl, &r))
		return -1;

	f->data = accept(f->lfd, NULL, NULL);
	if (f->data < 0 ||
	    recv_msg(f->data, f->buf, BCP_FRAME_MAX, &m, 10000) < 0 ||
	    m.hdr.opcode != BCP_OP_DATA_ATTACH)
		return -1;
	for (i = 0; i < 8; i++)
		sess[i] = (uint8_t)(SESSION >> (8 * i));
	bcp_auth_mac(SECRET, strlen(SECRET), BCP_AUTH_LABEL_DATA, f->ns,
		     BCP_NONCE_LEN, sess, 8, mac);
	bcp_msg_init_reply(&r, &m, bcp_auth_mac_equal(mac,
				m.u.attach_req.mac) ? 0 : -EACCES);
	if (send_msg(f->data, &r) || r.hdr.status)
		return -1;
	if (expect(f, BCP_OP_REGISTER_REGION, &m) < 0)
		return -1;
	bcp_msg_init_reply(&r, &m, 0);
	return send_msg(f->ctl, &r);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;

	if (fake_handshake(f) == 0)
		f->ok = f->script(f);
	else
		fprintf(stderr, "fake: handshake failed\n");
	/* the client sees the end of the session */
	if (f->data >= 0)
		close(f->data);
	if (f->ctl >= 0)
		close(f->ctl);
	f->data = f->ctl = -1;
	return NULL;
}

static struct bcp_client *session_start(struct fake *f, fake_script script,
					int timeout_ms, pthread_t *t,
					char *dir, size_t dirlen)
{
	struct sockaddr_un sun;
	struct bcp_client_opts o;
	struct bcp_client *c = NULL;
	char addr[PATH_MAX + 16], err[512];
	int ret;

	memset(f, 0, sizeof(*f));
	f->script = script;
	f->ctl = f->data = -1;
	f->buf = malloc(BCP_DATA_FRAME_MAX);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	if (!f->buf || th_tmpdir(dir, dirlen, "misbehave") < 0) {
		fprintf(stderr, "no temp dir\n");
		exit(TH_HARD);
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/fake.sock", dir);
	f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (f->lfd < 0 ||
	    bind(f->lfd, (struct sockaddr *)&sun, sizeof(sun)) ||
	    listen(f->lfd, 4)) {
		perror("fake listen");
		exit(TH_HARD);
	}
	snprintf(addr, sizeof(addr), "unix:%s", sun.sun_path);
	pthread_create(t, NULL, fake_main, f);

	bcp_client_opts_init(&o);
	o.addr = addr;
	o.secret = SECRET;
	o.secret_len = strlen(SECRET);
	o.transport = BCP_XFER_TCP;
	o.pool_size = POOL;
	o.timeout_ms = timeout_ms;
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "connect: %s\n", err);
		exit(TH_HARD);
	}
	return c;
}

static void session_end(struct fake *f, struct bcp_client *c, pthread_t t,
			const char *dir, const char *name)
{
	fake_go(f);
	pthread_join(t, NULL);
	bcp_client_destroy(c);
	TH_CHECK(f->ok, "%s: the fake agent's script failed", name);
	close(f->lfd);
	free(f->buf);
	th_rmtree(dir);
	printf("%s: done\n", name);
}

/* ---- the receiver never blocks on a send ------------------------------ */

struct acall {
	struct bcp_call call;
	struct bcp_client *c;
	uint8_t rbuf[1024];
	int result;		/* 1 until done */
	int forgets;		/* FORGETs to queue from done() */
	int64_t at;		/* when done() ran */
};

static void acall_done(struct bcp_call *call, int result)
{
	struct acall *a = call->priv;
	int i;

	/* on the receiver thread, as the FUSE daemon does */
	for (i = 0; i < a->forgets; i++)
		bcp_client_forget(a->c, 1000 + i, 1);
	a->at = now_ms();
	__atomic_store_n(&a->result, result, __ATOMIC_RELEASE);
}

static int acall_wait(struct acall *a, int ms)
{
	int64_t end = now_ms() + ms;

	while (__atomic_load_n(&a->result, __ATOMIC_ACQUIRE) == 1 &&
	       now_ms() < end)
		usleep(5000);
	return __atomic_load_n(&a->result, __ATOMIC_ACQUIRE);
}

static int acall_start(struct bcp_client *c, struct acall *a, uint16_t op,
		       int forgets)
{
	struct bcp_msg req;

	memset(a, 0, sizeof(*a));
	a->c = c;
	a->result = 1;
	a->forgets = forgets;
	a->call.rbuf = a->rbuf;
	a->call.rcap = sizeof(a->rbuf);
	a->call.done = acall_done;
	a->call.priv = a;
	bcp_msg_init(&req, op, 0);
	req.u.node_req.handle = ROOT;
	return bcp_client_call_async(c, &req, &a->call);
}

static uint64_t stall_ids[2];

/*
 * Read two GETATTRs, then never read again: the client's socket fills.
 * Answer the first when told (its done() queues FORGETs on the receiver
 * thread), then the second, which the receiver must still read.
 */
static int script_stall(struct fake *f)
{
	struct bcp_msg m[2], r;
	int i, small = 4096;

	setsockopt(f->ctl, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	for (i = 0; i < 2; i++) {
		if (expect(f, BCP_OP_GETATTR, &m[i]) < 0)
			return 0;
		stall_ids[i] = m[i].hdr.req_id;
	}
	fake_wait_go(f, 1);
	for (i = 0; i < 2; i++) {
		bcp_msg_init_reply(&r, &m[i], 0);
		r.u.attr_rep.attr.mode = S_IFDIR | 0755;
		r.u.attr_rep.attr.nlink = 2;
		r.u.attr_rep.attr.ino = ROOT;
		if (send_msg(f->ctl, &r))
			return 0;
		usleep(100000);
	}
	fake_wait_go(f, 2);
	return 1;
}

static void *flood_main(void *arg)
{
	struct bcp_client *c = arg;
	int i;

	/* far more than any socket buffer holds; blocks when stuck */
	for (i = 0; i < 1 << 20; i++)
		bcp_client_forget(c, 5000000 + i, 1);
	return NULL;
}

static void test_stall(void)
{
	struct acall a, b;
	struct bcp_client *c;
	struct fake f;
	pthread_t t, flood;
	char dir[PATH_MAX];
	int64_t sent;

	c = session_start(&f, script_stall, 8000, &t, dir, sizeof(dir));
	TH_CHECK(acall_start(c, &a, BCP_OP_GETATTR, 10000) == 0, "call a");
	TH_CHECK(acall_start(c, &b, BCP_OP_GETATTR, 0) == 0, "call b");
	pthread_create(&flood, NULL, flood_main, c);
	/* let the FORGETs fill every buffer between client and fake */
	usleep(1000000);
	sent = now_ms();
	fake_go(&f);
	TH_CHECK(acall_wait(&a, 3000) == 0, "stall: first reply: %d",
		 a.result);
	TH_CHECK(acall_wait(&b, 3000) == 0,
		 "stall: the receiver did not read the second reply: %d",
		 b.result);
	TH_CHECK(b.result != 0 || b.at - sent < 3000,
		 "stall: second reply after %lld ms",
		 (long long)(b.at - sent));
	fake_go(&f);
	/* the fake closes: the stuck sends fail, the flood ends */
	pthread_join(flood, NULL);
	session_end(&f, c, t, dir, "stall");
}

/* ---- late replies are undone ------------------------------------------ */

#define LATE_MS		300	/* the client's timeout */
#define LATE_H		0x5000	/* handles the fake makes */
#define LATE_FH		0x7000

/* The untracked requests that undo late replies, as the fake saw them. */
struct undo {
	uint64_t forget[16];
	int nforget;
	uint64_t release[8][2];		/* handle, fh */
	int nrelease;
	uint64_t releasedir[8][2];
	int nreleasedir;
};

static struct undo late_undo;

static int undo_got;

/* Record m if it undoes something: 1, else 0. */
static int undo_record(const struct bcp_msg *mp)
{
	const struct bcp_msg m = *mp;
	struct bcp_forget_one one;
	struct undo *u = &late_undo;
	uint32_t i;
	int got = 0;

	{
		switch (m.hdr.opcode) {
		case BCP_OP_FORGET:
			for (i = 0; i < m.u.forget_req.count; i++) {
				bcp_msg_forget(&m, i, &one);
				if (one.nlookup == 1 && u->nforget < 16)
					u->forget[u->nforget++] = one.handle;
				got++;
			}
			break;
		case BCP_OP_RELEASE:
			if (u->nrelease < 8) {
				u->release[u->nrelease][0] =
					m.u.node_req.handle;
				u->release[u->nrelease++][1] =
					m.u.node_req.fh;
			}
			got++;
			break;
		case BCP_OP_RELEASEDIR:
			if (u->nreleasedir < 8) {
				u->releasedir[u->nreleasedir][0] =
					m.u.node_req.handle;
				u->releasedir[u->nreleasedir++][1] =
					m.u.node_req.fh;
			}
			got++;
			break;
		default:
			return 0;
		}
	}
	undo_got += got;
	return 1;
}

/* The next request but the undoing ones, which it records. */
static int late_expect(struct fake *f, uint16_t op, struct bcp_msg *m,
		       int ms)
{
	int64_t end = now_ms() + ms;

	while (now_ms() < end) {
		if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, m,
			     (int)(end - now_ms())) < 0)
			return -1;
		if (undo_record(m))
			continue;
		if (m->hdr.opcode != op) {
			fprintf(stderr, "fake: %s where %s was expected\n",
				bcp_op_name(m->hdr.opcode), bcp_op_name(op));
			return -1;
		}
		return 0;
	}
	return -1;
}

static int late_reply(struct fake *f, uint16_t op, uint64_t n)
{
	struct bcp_msg m, r;
	uint8_t tail[512];
	size_t off = 0;
	struct bcp_dirent d;
	struct bcp_entry e;

	if (late_expect(f, op, &m, 10000) < 0) {
		fprintf(stderr, "fake: no %s\n", bcp_op_name(op));
		return -1;
	}
	usleep(2 * LATE_MS * 1000);	/* the caller gave up meanwhile */
	bcp_msg_init_reply(&r, &m, 0);
	switch (op) {
	case BCP_OP_LOOKUP:
	case BCP_OP_MKDIR:
		entry_fill(&r.u.entry_rep.entry, LATE_H + n);
		break;
	case BCP_OP_CREATE:
		entry_fill(&r.u.create_rep.entry, LATE_H + n);
		r.u.create_rep.fh = LATE_FH + n;
		break;
	case BCP_OP_OPEN:
	case BCP_OP_OPENDIR:
		r.u.open_rep.fh = LATE_FH + n;
		break;
	case BCP_OP_READDIR:
		memset(&d, 0, sizeof(d));
		memset(&e, 0, sizeof(e));
		d.cookie = 1;
		d.ino = ROOT;
		d.type = 4;
		bcp_dirent_put(tail, sizeof(tail), &off, 1, &d, &e, ".");
		d.cookie = 2;
		d.ino = LATE_H + n;
		d.type = 8;
		entry_fill(&e, LATE_H + n);
		bcp_dirent_put(tail, sizeof(tail), &off, 1, &d, &e, "f");
		r.u.readdir_rep.count = 2;
		r.u.readdir_rep.eof = 1;
		r.dirents = tail;
		r.dirents_len = (uint32_t)off;
		break;
	}
	return send_msg(f->ctl, &r);
}

static int has(const uint64_t *v, int n, uint64_t x)
{
	while (n--)
		if (v[n] == x)
			return 1;
	return 0;
}

static int script_late(struct fake *f)
{
	struct undo *u = &late_undo;
	struct bcp_msg m;
	int i, got;
	static const uint16_t ops[] = {
		BCP_OP_LOOKUP, BCP_OP_MKDIR, BCP_OP_CREATE, BCP_OP_OPEN,
		BCP_OP_OPENDIR, BCP_OP_READDIR, BCP_OP_LOOKUP,
	};

	memset(u, 0, sizeof(*u));
	for (i = 0; i < 7; i++)
		if (late_reply(f, ops[i], (uint64_t)i) < 0)
			return 0;
	/* LOOKUP, MKDIR, CREATE, READDIR "f", async LOOKUP: 5 FORGETs;
	 * CREATE and OPEN: RELEASE; OPENDIR: RELEASEDIR */
	while (undo_got < 8 && late_expect(f, BCP_OP_PING, &m, 3000) == 0)
		;
	got = undo_got;
	TH_CHECK(got == 8, "late: %d undo requests of 8", got);
	TH_CHECK(has(u->forget, u->nforget, LATE_H + 0), "late LOOKUP");
	TH_CHECK(has(u->forget, u->nforget, LATE_H + 1), "late MKDIR");
	TH_CHECK(has(u->forget, u->nforget, LATE_H + 2), "late CREATE");
	TH_CHECK(has(u->forget, u->nforget, LATE_H + 5),
		 "late READDIR plus entry");
	TH_CHECK(has(u->forget, u->nforget, LATE_H + 6),
		 "late asynchronous LOOKUP");
	TH_CHECK(u->nforget == 5, "late: %d FORGETs", u->nforget);
	TH_CHECK(u->nrelease == 2 &&
		 ((u->release[0][0] == LATE_H + 2 &&
		   u->release[0][1] == LATE_FH + 2 &&
		   u->release[1][0] == 42 && u->release[1][1] == LATE_FH + 3) ||
		  (u->release[1][0] == LATE_H + 2 &&
		   u->release[1][1] == LATE_FH + 2 &&
		   u->release[0][0] == 42 && u->release[0][1] == LATE_FH + 3)),
		 "late CREATE and OPEN released: %d", u->nrelease);
	TH_CHECK(u->nreleasedir == 1 && u->releasedir[0][0] == 43 &&
		 u->releasedir[0][1] == LATE_FH + 4,
		 "late OPENDIR released: %d", u->nreleasedir);
	return 1;
}

static void test_late(void)
{
	struct bcp_msg req, rep;
	struct bcp_client *c;
	struct acall a;
	struct fake f;
	pthread_t t;
	char dir[PATH_MAX];
	uint8_t rbuf[4096];
	int ret;

	c = session_start(&f, script_late, LATE_MS, &t, dir, sizeof(dir));

	bcp_msg_init(&req, BCP_OP_LOOKUP, 0);
	req.u.named_req.parent = ROOT;
	req.u.named_req.name_len = 1;
	req.name = "a";
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ETIMEDOUT, "late LOOKUP: %d", ret);

	bcp_msg_init(&req, BCP_OP_MKDIR, 0);
	req.u.mkdir_req.parent = ROOT;
	req.u.mkdir_req.mode = 0755;
	req.u.mkdir_req.name_len = 1;
	req.name = "d";
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ETIMEDOUT, "late MKDIR: %d", ret);

	bcp_msg_init(&req, BCP_OP_CREATE, 0);
	req.u.create_req.parent = ROOT;
	req.u.create_req.mode = 0644;
	req.u.create_req.flags = 0101;	/* O_WRONLY | O_CREAT */
	req.u.create_req.name_len = 1;
	req.name = "c";
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ETIMEDOUT, "late CREATE: %d", ret);

	bcp_msg_init(&req, BCP_OP_OPEN, 0);
	req.u.open_req.handle = 42;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ETIMEDOUT, "late OPEN: %d", ret);

	bcp_msg_init(&req, BCP_OP_OPENDIR, 0);
	req.u.open_req.handle = 43;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ETIMEDOUT, "late OPENDIR: %d", ret);

	bcp_msg_init(&req, BCP_OP_READDIR, 0);
	req.u.readdir_req.handle = 43;
	req.u.readdir_req.fh = 1;
	req.u.readdir_req.max_bytes = 4096;
	req.u.readdir_req.flags = BCP_READDIR_PLUS;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ETIMEDOUT, "late READDIR: %d", ret);

	/* an asynchronous call times out too */
	memset(&a, 0, sizeof(a));
	a.c = c;
	a.result = 1;
	a.call.rbuf = a.rbuf;
	a.call.rcap = sizeof(a.rbuf);
	a.call.done = acall_done;
	a.call.priv = &a;
	bcp_msg_init(&req, BCP_OP_LOOKUP, 0);
	req.u.named_req.parent = ROOT;
	req.u.named_req.name_len = 1;
	req.name = "b";
	TH_CHECK(bcp_client_call_async(c, &req, &a.call) == 0, "async");
	TH_CHECK(acall_wait(&a, 5000) == -ETIMEDOUT,
		 "late asynchronous LOOKUP: %d", a.result);

	session_end(&f, c, t, dir, "late");
}

/* ---- bad replies ------------------------------------------------------ */

enum bad {
	BAD_GARBAGE,		/* bytes that are no frame */
	BAD_UNKNOWN_ID,		/* the right slot, another generation */
	BAD_ID_RANGE,		/* a slot that does not exist */
	BAD_OPCODE,		/* a STATFS reply to a GETATTR */
	BAD_SHORT,		/* a GETATTR reply 8 bytes short */
	BAD_ASYNC_OPCODE,	/* as BAD_OPCODE, to an asynchronous call */
	BAD_SEG_STATUS,		/* more bytes moved than the segment has */
	BAD_SEG_COUNT,		/* two statuses for one segment */
	BAD_DATA_STALL,		/* the data connection stops mid-frame */
	BAD_MAX,
};

static const char *const bad_name[BAD_MAX] = {
	"garbage", "unknown id", "id out of range", "wrong opcode",
	"short reply", "wrong opcode, async", "segment status",
	"segment count", "data stall",
};

static enum bad bad_now;

static int script_bad(struct fake *f)
{
	static const uint8_t junk[64] = { 0xab, 0xcd, 0xef };
	uint8_t out[1024];
	struct bcp_msg m, r;
	struct bcp_seg seg;
	int32_t st[2] = { 0, 0 };
	uint16_t op = BCP_OP_GETATTR;
	int n;

	if (bad_now >= BAD_SEG_STATUS)
		op = BCP_OP_BATCH_PULL;
	if (expect(f, op, &m) < 0)
		return 0;
	bcp_msg_init_reply(&r, &m, 0);
	r.u.attr_rep.attr.mode = S_IFDIR | 0755;
	r.u.attr_rep.attr.nlink = 2;
	switch (bad_now) {
	case BAD_GARBAGE:
		if (bcp_frame_send(f->ctl, junk, sizeof(junk), -1))
			return 0;
		fake_wait_go(f, 1);
		return 1;
	case BAD_UNKNOWN_ID:
		r.hdr.req_id ^= 1ull << 32;
		break;
	case BAD_ID_RANGE:
		r.hdr.req_id = (r.hdr.req_id & ~0xffffffffull) | 1000;
		break;
	case BAD_OPCODE:
	case BAD_ASYNC_OPCODE:
		r.hdr.opcode = BCP_OP_STATFS;
		memset(&r.u, 0, sizeof(r.u));
		break;
	case BAD_SHORT:
		n = bcp_encode(out, sizeof(out), &r);
		if (n < BCP_HDR_SIZE + 8)
			return 0;
		n -= 8;
		out[12] = (uint8_t)(n - BCP_HDR_SIZE);
		out[13] = (uint8_t)((n - BCP_HDR_SIZE) >> 8);
		if (bcp_frame_send(f->ctl, out, (size_t)n, -1))
			return 0;
		fake_wait_go(f, 1);
		return 1;
	case BAD_SEG_STATUS:
	case BAD_SEG_COUNT:
		bcp_msg_seg(&m, 0, &seg);
		st[0] = bad_now == BAD_SEG_STATUS ? (int32_t)seg.length * 2 :
			(int32_t)seg.length;
		st[1] = st[0];
		r.u.batch_rep.count = bad_now == BAD_SEG_COUNT ? 2 : 1;
		r.statuses = st;
		break;
	case BAD_DATA_STALL:
		/* a DATA_WRITE of the whole segment, then 100 bytes only */
		bcp_msg_seg(&m, 0, &seg);
		bcp_msg_init(&r, BCP_OP_DATA_WRITE, 7);
		r.u.data_req.region_id = seg.region_id;
		r.u.data_req.region_off = seg.region_off;
		r.u.data_req.length = seg.length;
		r.data = out;		/* not sent: only its length counts */
		r.data_len = seg.length;
		n = bcp_encode_head(out, sizeof(out), &r);
		if (n < 0) {
			fprintf(stderr, "fake: DATA_WRITE: %s\n",
				strerror(-n));
			return 0;
		}
		memset(out + n, 0x11, 100);
		if (bcp_frame_send(f->data, out, (size_t)n + 100, -1))
			return 0;
		/* stalled until the client gives up */
		n = recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m, 10000);
		if (n >= 0)
			fprintf(stderr, "fake: %s during the stall\n",
				bcp_op_name(m.hdr.opcode));
		return n < 0;
	default:
		return 0;
	}
	if (send_msg(f->ctl, &r))
		return 0;
	/* the connection stays until the test has seen what it does */
	fake_wait_go(f, 1);
	return 1;
}

static void io_done(struct bcp_io *io, int32_t result)
{
	__atomic_store_n((int32_t *)io->priv, result, __ATOMIC_RELEASE);
}

static void test_bad(enum bad b)
{
	struct bcp_msg req, rep;
	struct bcp_client *c;
	struct bcp_io *io;
	struct acall a;
	struct fake f;
	pthread_t t;
	char dir[PATH_MAX];
	uint8_t rbuf[1024];
	int32_t res = 1;
	int64_t start, end;
	int ret, want;

	bad_now = b;
	c = session_start(&f, script_bad, 1500, &t, dir, sizeof(dir));
	start = now_ms();
	if (b == BAD_ASYNC_OPCODE) {
		TH_CHECK(acall_start(c, &a, BCP_OP_GETATTR, 0) == 0, "async");
		ret = acall_wait(&a, 10000);
	} else if (b >= BAD_SEG_STATUS) {
		io = bcp_client_io_get(c, 4096);
		if (!io)
			exit(TH_HARD);
		io->op = BCP_OP_BATCH_PULL;
		io->fh = 5;
		io->offset = 0;
		io->length = 4096;
		io->done = io_done;
		io->priv = &res;
		bcp_client_submit(c, io);
		end = now_ms() + 10000;
		while (__atomic_load_n(&res, __ATOMIC_ACQUIRE) == 1 &&
		       now_ms() < end)
			usleep(5000);
		ret = __atomic_load_n(&res, __ATOMIC_ACQUIRE);
		bcp_client_io_put(c, io);
	} else {
		bcp_msg_init(&req, BCP_OP_GETATTR, 0);
		req.u.node_req.handle = ROOT;
		ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	}
	switch (b) {
	case BAD_OPCODE:
	case BAD_SHORT:
	case BAD_ASYNC_OPCODE:
	case BAD_SEG_STATUS:
	case BAD_SEG_COUNT:
		want = -EIO;		/* the bad reply's own caller */
		break;
	default:
		want = -ENOTCONN;	/* the session was given up */
		break;
	}
	TH_CHECK(ret == want, "%s: %d, expected %d", bad_name[b], ret, want);
	/* in time: before the call's own timeout, or for a stalled
	 * transfer, soon after the transfer's */
	TH_CHECK(now_ms() - start < (b == BAD_DATA_STALL ? 4000 : 1400),
		 "%s: took %lld ms", bad_name[b],
		 (long long)(now_ms() - start));

	/* whatever went wrong, the session is given up, at once */
	bcp_msg_init(&req, BCP_OP_GETATTR, 0);
	req.u.node_req.handle = ROOT;
	start = now_ms();
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	TH_CHECK(ret == -ENOTCONN && now_ms() - start < 1000,
		 "%s: next call: %d", bad_name[b], ret);
	session_end(&f, c, t, dir, bad_name[b]);
}

int main(void)
{
	int b;

	alarm(150);
	test_stall();
	test_late();
	for (b = 0; b < BAD_MAX; b++)
		test_bad((enum bad)b);
	if (th_failed) {
		fprintf(stderr, "%d check(s) failed\n", th_failed);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
