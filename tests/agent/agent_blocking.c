// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_blocking.c - the session engine serving a store that may block on
 * every call (AGENT_STORE_BLOCKING, as the cephfs store is): every request
 * that calls the store runs on the blocking pool, so a call that waits
 * never stalls the other sessions of its worker.
 *
 * In-process: real workers, sessions and pool on a posix store whose
 * backend is flagged AGENT_STORE_BLOCKING after opening (the session
 * passes the flag on to its store, as for cephfs).  One worker, so every
 * session shares it.  Checked:
 *   - the pool is sized for a blocking store (at least 16 threads);
 *   - several sessions' metadata requests, at once, are all answered
 *     right, and one session's 40 requests sent together (more than it
 *     may have out) are all answered;
 *   - a store call that really blocks (an OPEN for writing of a file on
 *     which the test holds a read lease: the kernel makes the open wait
 *     until the lease is given up) does not delay another session's PING
 *     nor its LOOKUP, and is answered once the lease goes; meanwhile its
 *     session gets a NOTIFY BUSY every 250-450 ms and nothing else;
 *   - the reply cache still answers replays (MKDIR, UNLINK);
 *   - replies the pool threads send themselves stay whole frames when
 *     the host reads late: 4 KB GETXATTR replies and small GETATTR ones
 *     of the root, four at a time, read only once all had time to go,
 *     on a socket whose send buffer is small enough that it takes some
 *     replies only in part, are all answered once, each frame whole,
 *     and the agent counts such partial sends.
 * Without the pool path, the blocked OPEN stalls the worker for the
 * lease break time (45 s by default) and the PING is not answered.
 *
 * A posix store is not thread-safe within one session: each session here
 * keeps one request out at a time, except for GETATTRs of the root,
 * which only read.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "agent.h"
#include "bcp_auth.h"
#include "bcp_xfer_srv.h"
#include "harness.h"
#include "resume.h"
#include "store.h"

#define NSESS		4	/* sessions working at once */
#define NROUNDS		40	/* metadata rounds per session */
#define NPIPE		40	/* requests sent together by one session */
#define PING_MS		1000	/* a PING beside a blocked call, at most */
#define SLOW_ROUNDS	100	/* rounds of requests read late */
#define SLOW_BURST	4	/* requests of a round */
#define SLOW_VAL	4000	/* bytes of the root's xattr (ext4 takes it) */
#define SLOW_PEEK	16384	/* bytes of a file OPEN brings: > SO_SNDBUF */

/* main.c is not linked: this is the agent's whole configuration. */
struct agent_config agent_cfg = {
	.queue_depth = 8,
	.slot_size = 64u << 10,
	.workers = 1,
	.log_level = AGENT_LOG_WARNING,
	.ready_fd = -1,
	.completion = BCP_XSRV_CQ_ADAPTIVE,
	.poll_usec = 20,
	.inline_max = 16u << 10,
	.meta_io = AGENT_META_SYNC,
	.squash = AGENT_SQUASH_NONE,
	.anon_uid = 65534,
	.anon_gid = 65534,
	.max_handles = 4096,
	.max_files = 256,
	.max_regions = 8,
	.max_region_bytes = 4ull << 20,
	.max_slots = 8,
	.max_sessions = 16,
	.max_unauth = 16,
	.handshake_ms = 10000,
	.xfer_timeout_ms = 10000,
	.pool_threads = 4,
	.root_fd = -1,
};

static char tb_base[256], tb_root[300];
static atomic_int tb_errors;
static int tb_sndbuf;		/* the agent's end's SO_SNDBUF; 0: default */

void __wrap_agent_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void __real_agent_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* An error line of the agent fails the test (at the end). */
void __wrap_agent_log(int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > agent_cfg.log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	__real_agent_log(level, "%s", msg);
	if (level == AGENT_LOG_ERROR)
		atomic_fetch_add(&tb_errors, 1);
}

static void tb_rm(const char *path)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", path);
}

static void tb_cleanup(void)
{
	if (tb_base[0])
		tb_rm(tb_base);
}

struct tb_conn {
	int fd;
	uint64_t root;
	uint64_t next_id;
	uint8_t buf[BCP_FRAME_MAX];
};

/* A session as the acceptor makes one: HELLO handed over, then AUTH. */
static void tb_connect(struct tb_conn *c, const uint8_t *client)
{
	uint8_t buf[512], nc[BCP_NONCE_LEN];
	struct bcp_msg m, rep;
	int sv[2], n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		t_hard("socketpair: %s", strerror(errno));
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (tb_sndbuf && setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &tb_sndbuf,
				    sizeof(tb_sndbuf)) < 0)
		t_hard("SO_SNDBUF: %s", strerror(errno));
	c->fd = sv[0];
	c->next_id = 10;
	bcp_random(nc, sizeof(nc));
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = BCP_VERSION_MIN;
	m.u.hello_req.ver_max = BCP_VERSION_MAX;
	m.u.hello_req.features = BCP_FEAT_ALL & ~BCP_FEAT_RDMA;
	memcpy(m.u.hello_req.nonce, nc, sizeof(nc));
	if (client)
		memcpy(m.u.hello_req.client, client, BCP_CLIENT_ID_LEN);
	n = bcp_encode(buf, sizeof(buf), &m);
	if (n < 0)
		t_hard("encode HELLO: %s", strerror(-n));
	atomic_fetch_add(&agent_live_sessions, 1);
	agent_worker_hand(sv[1], "test", buf, (size_t)n, 1);
	if (t_raw_recv(c->fd, &rep, c->buf, sizeof(c->buf), 5000) < 0 ||
	    rep.hdr.status < 0)
		t_fail("HELLO not answered");
	if (client && !(rep.u.hello_rep.features & BCP_FEAT_RESUME))
		t_fail("the agent offers no BCP_FEAT_RESUME");
	bcp_msg_init(&m, BCP_OP_AUTH, 2);
	bcp_auth_mac("", 0, BCP_AUTH_LABEL_CLIENT, rep.u.hello_rep.nonce,
		     BCP_NONCE_LEN, nc, sizeof(nc), m.u.auth_req.mac);
	if (t_raw_call(c->fd, &m, &rep, c->buf, sizeof(c->buf)) < 0 ||
	    rep.hdr.status < 0)
		t_fail("AUTH refused");
	c->root = rep.u.auth_rep.root;
}

/* One request, its reply (skipping NOTIFY frames) within timeout_ms. */
static int tb_call(struct tb_conn *c, struct bcp_msg *m, struct bcp_msg *rep,
		   int timeout_ms)
{
	int ret;

	m->hdr.req_id = c->next_id++;
	if (t_raw_send(c->fd, m) < 0)
		t_fail("send %s: connection lost", bcp_op_name(m->hdr.opcode));
	do {
		ret = t_raw_recv(c->fd, rep, c->buf, sizeof(c->buf),
				 timeout_ms);
		if (ret < 0)
			return ret;
	} while (rep->hdr.opcode == BCP_OP_NOTIFY);
	if (rep->hdr.req_id != m->hdr.req_id)
		t_fail("reply to #%llu, expected #%llu",
		       (unsigned long long)rep->hdr.req_id,
		       (unsigned long long)m->hdr.req_id);
	return rep->hdr.status;
}

static void tb_named(struct bcp_msg *m, uint16_t op, uint64_t parent,
		     const char *name)
{
	bcp_msg_init(m, op, 0);
	m->u.named_req.parent = parent;
	m->u.named_req.name_len = (uint16_t)strlen(name);
	m->name = name;
}

static void tb_mkdir_msg(struct bcp_msg *m, uint64_t parent, const char *name)
{
	bcp_msg_init(m, BCP_OP_MKDIR, 0);
	m->u.mkdir_req.parent = parent;
	m->u.mkdir_req.mode = 0755;
	m->u.mkdir_req.name_len = (uint16_t)strlen(name);
	m->name = name;
}

/* Threads named bca-pool* in this process. */
static unsigned int tb_pool_threads(void)
{
	char path[300], name[64];
	struct dirent *d;
	unsigned int n = 0;
	DIR *dir = opendir("/proc/self/task");
	FILE *f;

	if (!dir)
		t_hard("/proc/self/task: %s", strerror(errno));
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) &&
		    !strncmp(name, "bca-pool", 8))
			n++;
		fclose(f);
	}
	closedir(dir);
	return n;
}

/* ---- several sessions at once ---- */

static void *tb_worker(void *arg)
{
	long k = (long)arg;
	struct tb_conn *c = calloc(1, sizeof(*c));
	struct bcp_msg m, rep;
	char name[64], name2[64], val[32];
	uint64_t h;
	int i, ret;

	if (!c)
		t_hard("no memory");
	tb_connect(c, NULL);
	for (i = 0; i < NROUNDS; i++) {
		snprintf(name, sizeof(name), "s%ld-%d", k, i);
		snprintf(name2, sizeof(name2), "s%ld-%d.moved", k, i);
		tb_mkdir_msg(&m, c->root, name);
		T_EQ(tb_call(c, &m, &rep, 10000), 0);
		h = rep.u.entry_rep.entry.handle;
		tb_named(&m, BCP_OP_LOOKUP, c->root, name);
		T_EQ(tb_call(c, &m, &rep, 10000), 0);
		T_EQ(rep.u.entry_rep.entry.handle, h);
		bcp_msg_init(&m, BCP_OP_GETATTR, 0);
		m.u.node_req.handle = h;
		T_EQ(tb_call(c, &m, &rep, 10000), 0);
		T_EQ(rep.u.attr_rep.attr.mode & S_IFMT, S_IFDIR);
		snprintf(val, sizeof(val), "v%ld.%d", k, i);
		bcp_msg_init(&m, BCP_OP_SETXATTR, 0);
		m.u.setxattr_req.handle = h;
		m.u.setxattr_req.name_len = 8;
		m.name = "user.tag";
		m.data = val;
		m.data_len = (uint32_t)strlen(val);
		m.u.setxattr_req.value_len = m.data_len;
		ret = tb_call(c, &m, &rep, 10000);
		if (ret == 0) {
			bcp_msg_init(&m, BCP_OP_GETXATTR, 0);
			m.u.getxattr_req.handle = h;
			m.u.getxattr_req.name_len = 8;
			m.u.getxattr_req.size = 64;
			m.name = "user.tag";
			T_EQ(tb_call(c, &m, &rep, 10000), 0);
			T_EQ(rep.data_len, strlen(val));
			T_CHECK(!memcmp(rep.data, val, strlen(val)));
		} else if (ret != -EOPNOTSUPP) {
			t_fail("SETXATTR: %s", strerror(-ret));
		}
		bcp_msg_init(&m, BCP_OP_RENAME, 0);
		m.u.rename_req.parent = c->root;
		m.u.rename_req.newparent = c->root;
		m.u.rename_req.name_len = (uint16_t)strlen(name);
		m.u.rename_req.newname_len = (uint16_t)strlen(name2);
		m.name = name;
		m.name2 = name2;
		T_EQ(tb_call(c, &m, &rep, 10000), 0);
		tb_named(&m, BCP_OP_LOOKUP, c->root, name);
		T_EQ(tb_call(c, &m, &rep, 10000), -ENOENT);
		if (i % 2) {
			tb_named(&m, BCP_OP_RMDIR, c->root, name2);
			T_EQ(tb_call(c, &m, &rep, 10000), 0);
		}
	}
	close(c->fd);
	free(c);
	return NULL;
}

static void tb_many_sessions(void)
{
	pthread_t th[NSESS];
	long i;

	for (i = 0; i < NSESS; i++)
		if (pthread_create(&th[i], NULL, tb_worker, (void *)i))
			t_hard("pthread_create");
	for (i = 0; i < NSESS; i++)
		pthread_join(th[i], NULL);
}

/* NPIPE GETATTRs sent at once: more than a session may have out. */
static void tb_pipelined(void)
{
	static struct tb_conn c;
	static uint8_t seen[NPIPE];
	struct bcp_msg m, rep;
	unsigned int i;

	tb_connect(&c, NULL);
	for (i = 0; i < NPIPE; i++) {
		bcp_msg_init(&m, BCP_OP_GETATTR, 100 + i);
		m.u.node_req.handle = c.root;
		if (t_raw_send(c.fd, &m) < 0)
			t_fail("send GETATTR: connection lost");
	}
	for (i = 0; i < NPIPE; i++) {
		if (t_raw_recv(c.fd, &rep, c.buf, sizeof(c.buf), 10000) < 0)
			t_fail("%u of %u pipelined GETATTRs answered", i,
			       NPIPE);
		if (rep.hdr.opcode == BCP_OP_NOTIFY) {
			i--;
			continue;
		}
		T_EQ(rep.hdr.opcode, BCP_OP_GETATTR);
		T_EQ(rep.hdr.status, 0);
		T_CHECK(rep.hdr.req_id >= 100 && rep.hdr.req_id < 100 + NPIPE);
		T_EQ(seen[rep.hdr.req_id - 100], 0);
		seen[rep.hdr.req_id - 100] = 1;
		T_EQ(rep.u.attr_rep.attr.mode & S_IFMT, S_IFDIR);
	}
	close(c.fd);
}

/* ---- a host that reads its replies late ---- */

/*
 * Wait until what fd has to read stops growing: the agent sent all it
 * could (or the socket is full).  A fixed pause was too short on a loaded
 * machine: the test read while the pool threads were still to run, and
 * every reply found room.  At most a second.
 */
static void tb_quiet(int fd)
{
	uint64_t until = agent_now_ns() + 1000000000ull;
	int n, last = -1, same = 0;

	while (same < 3 && agent_now_ns() < until) {
		usleep(2000);
		if (ioctl(fd, FIONREAD, &n) < 0)
			t_hard("FIONREAD: %s", strerror(errno));
		same = n == last ? same + 1 : 0;
		last = n;
	}
}

/*
 * SLOW_ROUNDS rounds of SLOW_BURST requests sent together, read only once
 * every reply had time to be sent: the pool threads send them into a
 * socket the earlier ones of the round fill.  The socket's buffer is as
 * small as the kernel allows: the first request of a round, an OPEN that
 * brings SLOW_PEEK bytes of a file, has a reply larger than it, which a
 * pool thread sending into the empty socket can only send in part; a
 * 4 KB reply sent into a socket holding another may go in part too.
 * 1 when it ran (user xattrs on the root's filesystem).
 */
static int tb_slow_reader(void)
{
	static struct tb_conn c;
	static uint8_t val[SLOW_VAL], peek[SLOW_PEEK];
	struct bcp_msg m, rep;
	uint8_t seen[SLOW_BURST];
	unsigned int r, i, k, peeked = 0;
	char path[400];
	uint64_t h;
	int fd;

	for (i = 0; i < SLOW_VAL; i++)
		val[i] = (uint8_t)(i * 7 + i / 251);
	for (i = 0; i < SLOW_PEEK; i++)
		peek[i] = (uint8_t)(i * 13 + i / 241);
	if (setxattr(tb_root, "user.big", val, SLOW_VAL, 0) < 0) {
		printf("# late reader: no user xattrs here (%s); skipped\n",
		       strerror(errno));
		return 0;
	}
	snprintf(path, sizeof(path), "%s/peeked", tb_root);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	/*
	 * Written back before the rounds: the agent reads a peek without
	 * waiting (RWF_NOWAIT) and brings none while the pages are locked
	 * for a writeback, which on a busy disk hit a round now and then.
	 */
	if (fd < 0 || write(fd, peek, SLOW_PEEK) != SLOW_PEEK || fsync(fd) ||
	    close(fd))
		t_hard("%s: %s", path, strerror(errno));
	tb_sndbuf = 1;
	tb_connect(&c, NULL);
	tb_sndbuf = 0;
	tb_named(&m, BCP_OP_LOOKUP, c.root, "peeked");
	T_EQ(tb_call(&c, &m, &rep, 5000), 0);
	h = rep.u.entry_rep.entry.handle;
	for (r = 0; r < SLOW_ROUNDS; r++) {
		for (i = 0; i < SLOW_BURST; i++) {
			if (i == 0) {
				bcp_msg_init(&m, BCP_OP_OPEN, 1000 + i);
				m.u.open_req.handle = h;
				m.u.open_req.flags = O_RDONLY;
				m.u.open_req.peek = SLOW_PEEK;
			} else if (i % 2) {
				bcp_msg_init(&m, BCP_OP_GETATTR, 1000 + i);
				m.u.node_req.handle = c.root;
			} else {
				bcp_msg_init(&m, BCP_OP_GETXATTR, 1000 + i);
				m.u.getxattr_req.handle = c.root;
				m.u.getxattr_req.name_len = 8;
				m.u.getxattr_req.size = SLOW_VAL;
				m.name = "user.big";
			}
			if (t_raw_send(c.fd, &m) < 0)
				t_fail("send: connection lost");
		}
		tb_quiet(c.fd);
		memset(seen, 0, sizeof(seen));
		for (i = 0; i < SLOW_BURST; i++) {
			if (t_raw_recv(c.fd, &rep, c.buf, sizeof(c.buf),
				       10000) < 0)
				t_fail("round %u: %u of %u answered", r, i,
				       SLOW_BURST);
			if (rep.hdr.opcode == BCP_OP_NOTIFY) {
				i--;
				continue;
			}
			T_CHECK(rep.hdr.req_id >= 1000 &&
				rep.hdr.req_id < 1000 + SLOW_BURST);
			k = (unsigned int)(rep.hdr.req_id - 1000);
			T_EQ(seen[k], 0);
			seen[k] = 1;
			T_EQ(rep.hdr.status, 0);
			if (k == 0) {
				T_EQ(rep.hdr.opcode, BCP_OP_OPEN);
				/* best effort (a page not at hand): none */
				if (!(rep.u.open_rep.open_flags &
				      BCP_OPEN_DATA)) {
					T_EQ(rep.data_len, 0);
					continue;
				}
				peeked++;
				T_EQ(rep.data_len, SLOW_PEEK);
				T_CHECK(!memcmp(rep.data, peek, SLOW_PEEK));
			} else if (k % 2) {
				T_EQ(rep.hdr.opcode, BCP_OP_GETATTR);
				T_EQ(rep.u.attr_rep.attr.mode & S_IFMT,
				     S_IFDIR);
			} else {
				T_EQ(rep.hdr.opcode, BCP_OP_GETXATTR);
				T_EQ(rep.data_len, SLOW_VAL);
				T_CHECK(!memcmp(rep.data, val, SLOW_VAL));
			}
		}
	}
	/* the round's large reply was sent in part in most rounds */
	printf("# late reader: %u of %u OPENs brought their bytes\n", peeked,
	       SLOW_ROUNDS);
	T_CHECK(peeked >= SLOW_ROUNDS / 2);
	/* the session's end releases the opens */
	close(c.fd);
	return 1;
}

/* ---- a store call that blocks ---- */

static void tb_blocked_open(void)
{
	static struct tb_conn a, b;
	struct bcp_msg m, rep, orep;
	struct pollfd p;
	char path[400];
	uint64_t t, h;
	int lfd, ret, busy;

	snprintf(path, sizeof(path), "%s/leased", tb_root);
	lfd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	if (lfd < 0)
		t_hard("%s: %s", path, strerror(errno));
	if (fcntl(lfd, F_SETLEASE, F_RDLCK) < 0) {
		fprintf(stderr, "SKIP: no read lease on %s: %s\n", path,
			strerror(errno));
		exit(T_SKIP);
	}
	tb_connect(&a, NULL);
	tb_connect(&b, NULL);
	tb_named(&m, BCP_OP_LOOKUP, a.root, "leased");
	T_EQ(tb_call(&a, &m, &rep, 5000), 0);
	h = rep.u.entry_rep.entry.handle;

	/* waits in the kernel until the lease is given up */
	bcp_msg_init(&m, BCP_OP_OPEN, 77);
	m.u.open_req.handle = h;
	m.u.open_req.flags = O_WRONLY;
	if (t_raw_send(a.fd, &m) < 0)
		t_fail("send OPEN: connection lost");
	usleep(100 * 1000);	/* the OPEN is in the store */

	t = agent_now_ns();
	bcp_msg_init(&m, BCP_OP_PING, 0);
	ret = tb_call(&b, &m, &rep, PING_MS);
	if (ret == -ETIMEDOUT || ret == -EAGAIN)
		t_fail("a PING waited more than %d ms behind another "
		       "session's blocked OPEN", PING_MS);
	T_EQ(ret, 0);
	tb_named(&m, BCP_OP_LOOKUP, b.root, "leased");
	ret = tb_call(&b, &m, &rep, PING_MS);
	if (ret == -ETIMEDOUT || ret == -EAGAIN)
		t_fail("a LOOKUP waited more than %d ms behind another "
		       "session's blocked OPEN", PING_MS);
	T_EQ(ret, 0);
	fprintf(stderr, "PING and LOOKUP beside a blocked OPEN: %llu us\n",
		(unsigned long long)((agent_now_ns() - t) / 1000));

	/*
	 * still blocked: its reply has not come; what comes instead is a
	 * NOTIFY BUSY (BCP_FEAT_BUSY) every quarter second or so, so that
	 * a host waits for the slow store past its timeout
	 */
	busy = 0;
	t = agent_now_ns();
	while (agent_now_ns() - t < 1200 * 1000000ull) {
		p.fd = a.fd;
		p.events = POLLIN;
		if (poll(&p, 1, 100) <= 0)
			continue;
		T_EQ(t_raw_recv(a.fd, &orep, a.buf, sizeof(a.buf), 1000), 0);
		T_EQ(orep.hdr.opcode, BCP_OP_NOTIFY);
		T_EQ(orep.u.notify_req.kind, BCP_NOTIFY_BUSY);
		busy++;
	}
	fprintf(stderr, "NOTIFY BUSY frames in 1.2 s of a blocked OPEN: %d\n",
		busy);
	/* one each 250 ms at most, seen at the worker's 200 ms ticks */
	if (busy < 2 || busy > 6)
		t_fail("%d NOTIFY BUSY in 1.2 s of a blocked OPEN, not one "
		       "each 250-450 ms", busy);

	if (fcntl(lfd, F_SETLEASE, F_UNLCK) < 0)
		t_hard("F_UNLCK: %s", strerror(errno));
	do {
		if (t_raw_recv(a.fd, &orep, a.buf, sizeof(a.buf),
			       10000) < 0)
			t_fail("the OPEN was not answered once the lease "
			       "was gone");
	} while (orep.hdr.opcode == BCP_OP_NOTIFY);
	T_EQ(orep.hdr.req_id, 77);
	T_EQ(orep.hdr.status, 0);
	bcp_msg_init(&m, BCP_OP_RELEASE, 0);
	m.u.node_req.handle = h;
	m.u.node_req.fh = orep.u.open_rep.fh;
	T_EQ(tb_call(&a, &m, &rep, 5000), 0);
	close(lfd);
	close(a.fd);
	close(b.fd);
}

/* ---- the reply cache ---- */

static void tb_replay(void)
{
	static const uint8_t client[BCP_CLIENT_ID_LEN] = { 0xb1, 0x0c, 7 };
	static struct tb_conn c;
	struct bcp_msg m, rep;
	uint64_t ino;

	tb_connect(&c, client);
	tb_mkdir_msg(&m, c.root, "replayed");
	m.hdr.req_id = 5000;
	T_EQ(t_raw_call(c.fd, &m, &rep, c.buf, sizeof(c.buf)), 0);
	T_EQ(rep.hdr.status, 0);
	ino = rep.u.entry_rep.entry.attr.ino;

	/* answered as the first time, not with -EEXIST */
	tb_mkdir_msg(&m, c.root, "replayed");
	m.hdr.req_id = 5000;
	m.hdr.flags |= BCP_HF_REPLAY;
	T_EQ(t_raw_call(c.fd, &m, &rep, c.buf, sizeof(c.buf)), 0);
	T_EQ(rep.hdr.status, 0);
	T_EQ(rep.u.entry_rep.entry.attr.ino, ino);

	tb_named(&m, BCP_OP_RMDIR, c.root, "replayed");
	m.hdr.req_id = 5001;
	T_EQ(t_raw_call(c.fd, &m, &rep, c.buf, sizeof(c.buf)), 0);
	T_EQ(rep.hdr.status, 0);
	/* not -ENOENT: it was done */
	tb_named(&m, BCP_OP_RMDIR, c.root, "replayed");
	m.hdr.req_id = 5001;
	m.hdr.flags |= BCP_HF_REPLAY;
	T_EQ(t_raw_call(c.fd, &m, &rep, c.buf, sizeof(c.buf)), 0);
	T_EQ(rep.hdr.status, 0);
	/* a new request is executed: it is gone */
	tb_named(&m, BCP_OP_RMDIR, c.root, "replayed");
	m.hdr.req_id = 5002;
	T_EQ(t_raw_call(c.fd, &m, &rep, c.buf, sizeof(c.buf)), -ENOENT);
	close(c.fd);
}

static void tb_wait_freed(void)
{
	uint64_t until = agent_now_ns() + 10000000000ull;

	while (atomic_load(&agent_live_sessions)) {
		if (agent_now_ns() > until)
			t_fail("%u sessions not freed within 10 s of their "
			       "hosts closing",
			       atomic_load(&agent_live_sessions));
		usleep(1000);
	}
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	struct agent_stats st;
	char state[400];
	int ret, slow;

	signal(SIGPIPE, SIG_IGN);
	/* a lease break is signalled to its holder */
	signal(SIGIO, SIG_IGN);
	snprintf(tb_base, sizeof(tb_base), "%s/bcf-blocking.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tb_base))
		t_hard("mkdtemp %s: %s", tb_base, strerror(errno));
	atexit(tb_cleanup);
	snprintf(tb_root, sizeof(tb_root), "%s/root", tb_base);
	if (mkdir(tb_root, 0755) < 0)
		t_hard("mkdir %s: %s", tb_root, strerror(errno));
	agent_cfg.root = tb_root;
	ret = agent_posix_open(tb_root, &agent_backend);
	if (ret < 0)
		t_hard("open %s: %s", tb_root, strerror(-ret));
	agent_cfg.root_fd = agent_backend->root_fd;
	/* fids and the reply cache */
	snprintf(state, sizeof(state), "%s/state", tb_base);
	if (mkdir(state, 0700) < 0)
		t_hard("mkdir %s: %s", state, strerror(errno));
	ret = agent_resume_init(state, agent_cfg.root_fd);
	if (ret < 0)
		t_hard("agent_resume_init: %s", strerror(-ret));
	/* as the cephfs store's backend says */
	agent_backend->flags |= AGENT_STORE_BLOCKING;
	ret = agent_workers_start(agent_cfg.workers);
	if (ret < 0)
		t_hard("cannot start the workers: %s", strerror(-ret));

	if (tb_pool_threads() < 16)
		t_fail("%u pool threads for a blocking store, expected 16 or "
		       "more", tb_pool_threads());
	tb_many_sessions();
	tb_pipelined();
	slow = tb_slow_reader();
	tb_replay();
	tb_blocked_open();
	tb_wait_freed();

	memset(&st, 0, sizeof(st));
	agent_workers_stop(&st);
	printf("# %llu replies sent by pool threads, %llu of them in part\n",
	       (unsigned long long)st.pool_sent,
	       (unsigned long long)st.pool_part);
	T_CHECK(st.pool_sent > 0);
	/* the slow reader's socket took some only in part */
	if (slow)
		T_CHECK(st.pool_part > 0);
	agent_resume_fini();
	agent_backend_close(agent_backend);
	agent_backend = NULL;
	if (atomic_load(&tb_errors))
		t_fail("the agent logged %d errors", atomic_load(&tb_errors));
	return 0;
}
