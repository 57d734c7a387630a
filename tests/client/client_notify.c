/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_notify.c - NOTIFY, the agent's word that something a session
 * holds changed, against a fake agent, one session per scenario:
 *   - with opts.notify set the client asks for BCP_FEAT_NOTIFY, and every
 *     NOTIFY kind reaches the callback whole and in order, before the
 *     reply that followed it on the wire;
 *   - without it nothing is asked, and a NOTIFY is a protocol violation;
 *   - hostile NOTIFYs (a kind out of range, a req_id other than 0, a name
 *     where none belongs, none where one does) never reach the callback:
 *     the session is given up, the caller gets its error, the process
 *     stays healthy;
 *   - after a reconnect the callback gets a RESET: what changed while no
 *     connection was up was told to nobody;
 *   - a session lost the moment it began is resumed even when the
 *     client's threads start slowly (a loaded host): no thread of the
 *     first connection is left to start after the reconnect began and
 *     read the new connection's frames.  Built with
 *     -Wl,--wrap=pthread_create, so every thread start can be slowed.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
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

/* What the callback was told. */
#define NOTES_MAX	16

struct note {
	struct bcp_notify_req n;
	char name[BCP_NAME_MAX + 1];
	int named;
};

static struct notes {
	pthread_mutex_t lock;
	int count;
	struct note v[NOTES_MAX];
} notes = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void note_cb(void *arg, const struct bcp_notify_req *n,
		    const char *name)
{
	struct notes *ns = arg;
	struct note *e;

	pthread_mutex_lock(&ns->lock);
	if (ns->count < NOTES_MAX) {
		e = &ns->v[ns->count];
		e->n = *n;
		e->named = name != NULL;
		if (name)
			snprintf(e->name, sizeof(e->name), "%s", name);
	}
	ns->count++;
	pthread_mutex_unlock(&ns->lock);
}

static int notes_count(void)
{
	int n;

	pthread_mutex_lock(&notes.lock);
	n = notes.count;
	pthread_mutex_unlock(&notes.lock);
	return n;
}

static void notes_clear(void)
{
	pthread_mutex_lock(&notes.lock);
	notes.count = 0;
	memset(notes.v, 0, sizeof(notes.v));
	pthread_mutex_unlock(&notes.lock);
}

/*
 * Slow thread starts: each pthread_create of this process waits slow_ms
 * first, and the fake answers a reconnect's DATA_ATTACH slow_ms * 4
 * late.  A thread of the first connection started while that answer is
 * on its way would read it off the new data connection.
 */
static int slow_ms;		/* atomic: set by the test, read by any */

int __real_pthread_create(pthread_t *t, const pthread_attr_t *a,
			  void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a,
			  void *(*fn)(void *), void *arg);

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a,
			  void *(*fn)(void *), void *arg)
{
	int ms = __atomic_load_n(&slow_ms, __ATOMIC_RELAXED);

	if (ms)
		usleep((useconds_t)ms * 1000);
	return __real_pthread_create(t, a, fn, arg);
}

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
	int attach_late_ms;	/* DATA_ATTACH answered this late */
	int go;			/* the test tells the script to go on */
	uint64_t feat;		/* offered beyond tcp data */
	uint64_t asked;		/* the last HELLO's features */
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
	r.u.hello_rep.features = m.u.hello_req.features &
				  (BCP_FEAT_TCP_DATA | f->feat);
	f->asked = m.u.hello_req.features;
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
	if (f->attach_late_ms)
		usleep((useconds_t)f->attach_late_ms * 1000);
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
					uint64_t feat, int notify,
					int reconnect_ms, pthread_t *t,
					char *dir, size_t dirlen)
{
	struct sockaddr_un sun;
	struct bcp_client_opts o;
	struct bcp_client *c = NULL;
	char addr[PATH_MAX + 16], err[512];
	int ret;

	memset(f, 0, sizeof(*f));
	f->script = script;
	f->feat = feat;
	f->ctl = f->data = -1;
	f->buf = malloc(BCP_DATA_FRAME_MAX);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	if (!f->buf || th_tmpdir(dir, dirlen, "notify") < 0) {
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
	o.timeout_ms = 5000;
	o.reconnect_timeout_ms = reconnect_ms;
	if (notify) {
		o.notify = note_cb;
		o.notify_arg = &notes;
	}
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

/* ---- scripts ----------------------------------------------------------- */

/* A NOTIFY, encoded; then bytes changed as hostile says. */
enum hostile {
	H_NONE,
	H_KIND,		/* kind 9 */
	H_REQ_ID,	/* req_id 7 */
	H_NAME_INODE,	/* INODE with a name */
	H_NONAME_ENTRY,	/* ENTRY without one */
	H_MAX
};

static const char *hostile_name[H_MAX] = {
	"valid", "kind out of range", "req_id not 0", "INODE with a name",
	"ENTRY without a name"
};

static int send_notify(int fd, uint32_t kind, uint64_t handle,
		       uint64_t child, int64_t offset, int64_t length,
		       const char *name, enum hostile h)
{
	static uint8_t out[BCP_FRAME_MAX];
	struct bcp_msg m;
	int n;

	bcp_msg_init(&m, BCP_OP_NOTIFY, 0);
	m.u.notify_req.kind = kind;
	m.u.notify_req.handle = handle;
	m.u.notify_req.child = child;
	m.u.notify_req.offset = offset;
	m.u.notify_req.length = length;
	if (name) {
		m.u.notify_req.name_len = (uint16_t)strlen(name);
		m.name = name;
	}
	if (h == H_NAME_INODE || h == H_NONAME_ENTRY) {
		/* a valid ENTRY, relabelled */
		m.u.notify_req.kind = BCP_NOTIFY_ENTRY;
		m.u.notify_req.name_len = 3;
		m.name = "abc";
	}
	n = bcp_encode(out, sizeof(out), &m);
	if (n < 0) {
		fprintf(stderr, "fake: cannot encode NOTIFY: %s\n",
			strerror(-n));
		return n;
	}
	switch (h) {
	case H_KIND:
		out[BCP_HDR_SIZE] = 9;
		break;
	case H_REQ_ID:
		out[16] = 7;
		break;
	case H_NAME_INODE:
		out[BCP_HDR_SIZE] = BCP_NOTIFY_INODE;
		break;
	case H_NONAME_ENTRY:
		/* name_len 0, the name's bytes left as padding */
		out[BCP_HDR_SIZE + 4] = 0;
		break;
	default:
		break;
	}
	return bcp_frame_send(fd, out, (size_t)n, -1);
}

static int answer_getattr(struct fake *f, const struct bcp_msg *q)
{
	struct bcp_msg r;

	bcp_msg_init_reply(&r, q, 0);
	r.u.attr_rep.attr.ino = ROOT;
	r.u.attr_rep.attr.mode = S_IFDIR | 0755;
	r.u.attr_rep.attr.nlink = 2;
	return send_msg(f->ctl, &r);
}

/* Every kind, then the reply to the GETATTR they came before. */
static int script_all(struct fake *f)
{
	struct bcp_msg m;

	if (expect(f, BCP_OP_GETATTR, &m) < 0)
		return 0;
	if (send_notify(f->ctl, BCP_NOTIFY_INODE, 1001, 0, 4096, 100,
			NULL, H_NONE) ||
	    send_notify(f->ctl, BCP_NOTIFY_INODE, 1002, 0, -1, 0, NULL,
			H_NONE) ||
	    send_notify(f->ctl, BCP_NOTIFY_ENTRY, ROOT, 0, 0, 0, "a name",
			H_NONE) ||
	    send_notify(f->ctl, BCP_NOTIFY_DELETE, ROOT, 1003, 0, 0, "gone",
			H_NONE) ||
	    send_notify(f->ctl, BCP_NOTIFY_RESET, 0, 0, 0, 0, NULL, H_NONE))
		return 0;
	if (answer_getattr(f, &m))
		return 0;
	/* the session goes on: a second call is answered */
	if (expect(f, BCP_OP_GETATTR, &m) < 0 || answer_getattr(f, &m))
		return 0;
	fake_wait_go(f, 1);
	return 1;
}

static enum hostile script_hostile_kind;

/* A bad NOTIFY instead of the reply; the client must hang up. */
static int script_hostile(struct fake *f)
{
	struct bcp_msg m;
	int i;

	if (expect(f, BCP_OP_GETATTR, &m) < 0)
		return 0;
	if (script_hostile_kind == H_NONE) {
		/* valid, but never asked for */
		if (send_notify(f->ctl, BCP_NOTIFY_INODE, 1001, 0, -1, 0,
				NULL, H_NONE))
			return 0;
	} else if (send_notify(f->ctl, BCP_NOTIFY_INODE, 1001, 0, -1, 0,
			       NULL, script_hostile_kind)) {
		return 0;
	}
	/* the client closes the control connection: reads end */
	for (i = 0; i < 100; i++)
		if (recv_msg(f->ctl, f->buf, BCP_FRAME_MAX, &m, 10000) < 0)
			return 1;
	fprintf(stderr, "fake: the client kept the session\n");
	return 0;
}

/* Drop the session at once, serve the reconnect. */
static int script_drop(struct fake *f)
{
	close(f->data);
	close(f->ctl);
	f->data = f->ctl = -1;
	f->attach_late_ms = __atomic_load_n(&slow_ms, __ATOMIC_RELAXED) * 4;
	if (fake_handshake(f) < 0) {
		fprintf(stderr, "fake: second handshake failed\n");
		return 0;
	}
	fake_wait_go(f, 1);
	return 1;
}

/* ---- tests ------------------------------------------------------------- */

static int getattr(struct bcp_client *c)
{
	static uint8_t rbuf[4096];
	struct bcp_msg q, r;

	bcp_msg_init(&q, BCP_OP_GETATTR, 0);
	q.u.node_req.handle = ROOT;
	return bcp_client_call(c, &q, &r, rbuf, sizeof(rbuf));
}

static void test_all(void)
{
	struct bcp_client *c;
	struct fake f;
	pthread_t t;
	char dir[PATH_MAX];
	struct note *v = notes.v;
	int ret;

	notes_clear();
	c = session_start(&f, script_all, BCP_FEAT_NOTIFY, 1, 0, &t, dir,
			  sizeof(dir));
	TH_CHECK(f.asked & BCP_FEAT_NOTIFY, "HELLO asked for 0x%llx",
		 (unsigned long long)f.asked);
	TH_CHECK(bcp_client_hello(c)->features & BCP_FEAT_NOTIFY,
		 "NOTIFY not negotiated");
	ret = getattr(c);
	TH_CHECK(ret == 0, "getattr: %d", ret);
	/* delivered on the receiver thread before the reply behind them */
	TH_CHECK(notes_count() == 5, "%d notifications", notes_count());
	TH_CHECK(v[0].n.kind == BCP_NOTIFY_INODE && v[0].n.handle == 1001 &&
		 v[0].n.offset == 4096 && v[0].n.length == 100 &&
		 !v[0].named, "INODE: kind %u handle %llu", v[0].n.kind,
		 (unsigned long long)v[0].n.handle);
	TH_CHECK(v[1].n.kind == BCP_NOTIFY_INODE && v[1].n.handle == 1002 &&
		 v[1].n.offset == -1 && v[1].n.length == 0,
		 "INODE attrs only: offset %lld",
		 (long long)v[1].n.offset);
	TH_CHECK(v[2].n.kind == BCP_NOTIFY_ENTRY && v[2].n.handle == ROOT &&
		 v[2].named && !strcmp(v[2].name, "a name") &&
		 v[2].n.name_len == 6, "ENTRY: '%s'", v[2].name);
	TH_CHECK(v[3].n.kind == BCP_NOTIFY_DELETE && v[3].n.handle == ROOT &&
		 v[3].n.child == 1003 && v[3].named &&
		 !strcmp(v[3].name, "gone"), "DELETE: '%s' child %llu",
		 v[3].name, (unsigned long long)v[3].n.child);
	TH_CHECK(v[4].n.kind == BCP_NOTIFY_RESET && !v[4].named,
		 "RESET: kind %u", v[4].n.kind);
	ret = getattr(c);
	TH_CHECK(ret == 0, "getattr after the notifications: %d", ret);
	session_end(&f, c, t, dir, "deliver");
}

static void test_hostile(enum hostile h)
{
	struct bcp_client *c;
	struct fake f;
	pthread_t t;
	char dir[PATH_MAX];
	int ret;

	notes_clear();
	script_hostile_kind = h;
	/* H_NONE: a valid NOTIFY to a client that did not ask */
	c = session_start(&f, script_hostile, BCP_FEAT_NOTIFY, h != H_NONE,
			  0, &t, dir, sizeof(dir));
	if (h == H_NONE)
		TH_CHECK(!(f.asked & BCP_FEAT_NOTIFY),
			 "NOTIFY asked for without a callback");
	ret = getattr(c);
	TH_CHECK(ret == -EIO || ret == -ENOTCONN, "%s: getattr: %d",
		 hostile_name[h], ret);
	TH_CHECK(notes_count() == 0, "%s: %d notifications delivered",
		 hostile_name[h], notes_count());
	ret = getattr(c);
	TH_CHECK(ret == -ENOTCONN, "%s: getattr after: %d", hostile_name[h],
		 ret);
	session_end(&f, c, t, dir, hostile_name[h]);
}

static void test_reconnect(int slow)
{
	const char *name = slow ? "reconnect, threads slow to start" :
				  "reconnect";
	struct bcp_client *c;
	struct fake f;
	pthread_t t;
	char dir[PATH_MAX];
	int64_t end;

	notes_clear();
	__atomic_store_n(&slow_ms, slow, __ATOMIC_RELAXED);
	c = session_start(&f, script_drop, BCP_FEAT_NOTIFY, 1, 5000, &t, dir,
			  sizeof(dir));
	end = now_ms() + 8000;
	while (notes_count() == 0 && now_ms() < end)
		usleep(10000);
	__atomic_store_n(&slow_ms, 0, __ATOMIC_RELAXED);
	TH_CHECK(notes_count() == 1, "%s: %d notifications after it", name,
		 notes_count());
	TH_CHECK(notes.v[0].n.kind == BCP_NOTIFY_RESET && !notes.v[0].named,
		 "%s: kind %u after it", name, notes.v[0].n.kind);
	TH_CHECK(f.asked & BCP_FEAT_NOTIFY,
		 "%s: its HELLO asked for 0x%llx", name,
		 (unsigned long long)f.asked);
	session_end(&f, c, t, dir, name);
}

int main(void)
{
	int h;

	alarm(120);
	test_all();
	for (h = 0; h < H_MAX; h++)
		test_hostile((enum hostile)h);
	test_reconnect(0);
	test_reconnect(50);
	if (th_failed) {
		fprintf(stderr, "%d check(s) failed\n", th_failed);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
