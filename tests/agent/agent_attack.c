/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_attack.c - a hostile host against a live agent.  Each attack is a
 * case of its own, run in a child process with its own agent, temp dir
 * and process group (so a hung case is killed whole and leaves nothing
 * behind); the output is TAP ("ok N - name", "not ok N - name: reason")
 * and the exit status 1 when any case failed.  `agent_attack NAME...`
 * runs the named cases alone.
 *
 * After an attack a case checks that the agent still runs, that a benign
 * session (LOOKUP, CREATE, BATCH_PUSH, BATCH_PULL and a byte compare, in a
 * thread while the attack runs where that makes sense) keeps making
 * progress, and that nothing outside the data root changed: a sibling
 * directory the root links to, the test's own temp dir and /etc/passwd.
 * A case reports every expectation it finds broken, not only the first.
 *
 * Every agent runs with --xfer-timeout 2000 --handshake-timeout 2000.  An
 * option the agent does not know is a failure of the case, which then
 * goes on without it so the rest of the behaviour is still measured.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "bcp_auth.h"
#include "bcp_frame.h"
#include "harness.h"

#define A_XFER_MS	2000	/* --xfer-timeout */
#define A_SLACK_MS	2000	/* what a timeout may overrun by */
#define A_TOTAL_S	170	/* the whole program */
#define A_MIB		(1u << 20)

static struct t_agent A;	/* the running case's agent */
static int a_nfail;		/* expectations broken in this case */
static char *a_snap0;		/* outside-the-root snapshot at start */
static pthread_mutex_t a_out_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- reporting ------------------------------------------------------ */

static void a_fail(int line, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void a_fail(int line, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&a_out_lock);
	fprintf(stderr, "FAIL: line %d: ", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	a_nfail++;
	pthread_mutex_unlock(&a_out_lock);
}
#define EXPECT(c, ...) do { if (!(c)) a_fail(__LINE__, __VA_ARGS__); } \
	while (0)

static void a_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void a_note(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&a_out_lock);
	fputs("note: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	pthread_mutex_unlock(&a_out_lock);
}

static uint64_t a_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *a_err(int e)
{
	static _Thread_local char bufs[4][64];
	static _Thread_local unsigned int next;
	char *b = bufs[next++ % 4];	/* several in one message */

	if (e >= 0) {
		snprintf(b, 64, "%d", e);
		return b;
	}
	snprintf(b, 64, "-%s", strerrorname_np(-e) ?
		 strerrorname_np(-e) : "?");
	return b;
}

/* ---- files ---------------------------------------------------------- */

static void a_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", A.root, name);
}

static uint8_t a_pat(unsigned int seed, uint64_t off)
{
	uint8_t v = (uint8_t)(off * 7 + seed * 31 + (off >> 12) + 1);

	return v == 0xee ? 0xef : v;
}

/* A file in the data root of len bytes of a_pat(seed). */
static void a_file(const char *name, uint64_t len, unsigned int seed)
{
	static uint8_t b[A_MIB];
	char p[600];
	uint64_t off, i;
	int fd;

	a_path(p, sizeof(p), name);
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		t_hard("%s: %s", p, strerror(errno));
	for (off = 0; off < len; off += sizeof(b)) {
		uint64_t n = len - off < sizeof(b) ? len - off : sizeof(b);

		for (i = 0; i < n; i++)
			b[i] = a_pat(seed, off + i);
		if (pwrite(fd, b, n, (off_t)off) != (ssize_t)n)
			t_hard("write %s: %s", p, strerror(errno));
	}
	close(fd);
}

/* ---- raw sessions --------------------------------------------------- */

struct rs {
	int fd;
	uint64_t root;
	uint64_t id;
	struct bcp_hello_rep hello;
};

static _Thread_local uint8_t a_rbuf[BCP_FRAME_MAX];

static int a_send(int fd, struct bcp_msg *m)
{
	uint8_t b[BCP_FRAME_MAX];
	int n = bcp_encode(b, sizeof(b), m);

	if (n < 0)
		t_hard("encode %s: %s", bcp_op_name(m->hdr.opcode),
		       strerror(-n));
	return bcp_frame_send(fd, b, (size_t)n, -1);
}

/* One frame, decoded; its tails point into a_rbuf.  Status or -errno. */
static int a_recv(int fd, struct bcp_msg *rep, int timeout_ms)
{
	enum bcp_err why;
	int n;

	/* req_id 0 (never used here) marks a failure of the transport */
	memset(rep, 0, sizeof(*rep));
	n = bcp_frame_recv(fd, a_rbuf, sizeof(a_rbuf), NULL, timeout_ms,
			   &why);
	if (n <= 0)
		return n == 0 ? -ECONNRESET : n;
	if (bcp_decode(a_rbuf, (size_t)n, rep, &why) < 0)
		return -EBADMSG;
	return rep->hdr.status;
}

static int a_call(int fd, struct bcp_msg *m, struct bcp_msg *rep,
		  int timeout_ms)
{
	int ret = a_send(fd, m);

	if (ret < 0)
		return ret;
	return a_recv(fd, rep, timeout_ms);
}

static int rs_connect(struct rs *s, int tcp, int timeout_ms)
{
	struct bcp_addr ad;
	char err[256];
	uint8_t nc[BCP_NONCE_LEN], ns[BCP_NONCE_LEN];
	struct bcp_msg m, rep;
	int ret;

	memset(s, 0, sizeof(*s));
	if (bcp_addr_parse(tcp ? A.tcp_addr : A.unix_addr, &ad, err,
			   sizeof(err)) < 0)
		t_hard("address: %s", err);
	s->fd = bcp_addr_connect(&ad, timeout_ms);
	if (s->fd < 0)
		return s->fd;
	bcp_random(nc, sizeof(nc));
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = BCP_VERSION_MIN;
	m.u.hello_req.ver_max = BCP_VERSION_MAX;
	/* NOTIFY frames would come between the replies read here */
	m.u.hello_req.features = BCP_FEAT_ALL &
				 ~(BCP_FEAT_NOTIFY | BCP_FEAT_BUSY);
	memcpy(m.u.hello_req.nonce, nc, sizeof(nc));
	ret = a_call(s->fd, &m, &rep, timeout_ms);
	if (ret < 0)
		goto out_close;
	s->hello = rep.u.hello_rep;
	memcpy(ns, rep.u.hello_rep.nonce, sizeof(ns));
	bcp_msg_init(&m, BCP_OP_AUTH, 2);
	bcp_auth_mac("", 0, BCP_AUTH_LABEL_CLIENT, ns, sizeof(ns), nc,
		     sizeof(nc), m.u.auth_req.mac);
	ret = a_call(s->fd, &m, &rep, timeout_ms);
	if (ret < 0)
		goto out_close;
	s->root = rep.u.auth_rep.root;
	s->id = 100;
	return 0;

out_close:
	close(s->fd);
	s->fd = -1;
	return ret;
}

static void rs_open(struct rs *s, int tcp)
{
	int ret = rs_connect(s, tcp, 5000);

	if (ret < 0)
		t_fail("a %s session cannot start: %s", tcp ? "tcp" : "unix",
		       a_err(ret));
}

static void rs_close(struct rs *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

static int rs_call(struct rs *s, struct bcp_msg *m, struct bcp_msg *rep)
{
	m->hdr.req_id = ++s->id;
	return a_call(s->fd, m, rep, 5000);
}

static int rs_lookup(struct rs *s, uint64_t parent, const char *name,
		     struct bcp_entry *e)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_LOOKUP, 0);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	ret = rs_call(s, &m, &rep);
	if (!ret && e)
		*e = rep.u.entry_rep.entry;
	return ret;
}

static void rs_create_msg(struct bcp_msg *m, uint64_t parent,
			  const char *name, uint32_t mode, uint32_t flags,
			  uint32_t uid, uint32_t gid)
{
	bcp_msg_init(m, BCP_OP_CREATE, 0);
	m->u.create_req.parent = parent;
	m->u.create_req.mode = mode;
	m->u.create_req.flags = flags;
	m->u.create_req.uid = uid;
	m->u.create_req.gid = gid;
	m->u.create_req.name_len = (uint16_t)strlen(name);
	m->name = name;
}

static int rs_create(struct rs *s, uint64_t parent, const char *name,
		     uint32_t flags, uint32_t uid, uint32_t gid,
		     struct bcp_entry *e, uint64_t *fh)
{
	struct bcp_msg m, rep;
	int ret;

	rs_create_msg(&m, parent, name, 0644, flags, uid, gid);
	ret = rs_call(s, &m, &rep);
	if (!ret) {
		if (e)
			*e = rep.u.create_rep.entry;
		if (fh)
			*fh = rep.u.create_rep.fh;
	}
	return ret;
}

static int rs_mkdir(struct rs *s, uint64_t parent, const char *name,
		    uint32_t uid, uint32_t gid)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_MKDIR, 0);
	m.u.mkdir_req.parent = parent;
	m.u.mkdir_req.mode = 0755;
	m.u.mkdir_req.uid = uid;
	m.u.mkdir_req.gid = gid;
	m.u.mkdir_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	return rs_call(s, &m, &rep);
}

static int rs_mknod(struct rs *s, uint64_t parent, const char *name,
		    uint32_t mode, uint64_t rdev)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_MKNOD, 0);
	m.u.mknod_req.parent = parent;
	m.u.mknod_req.mode = mode;
	m.u.mknod_req.rdev = rdev;
	m.u.mknod_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	return rs_call(s, &m, &rep);
}

static int rs_open_fh(struct rs *s, uint64_t handle, uint32_t flags,
		      uint64_t *fh)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_OPEN, 0);
	m.u.open_req.handle = handle;
	m.u.open_req.flags = flags;
	ret = rs_call(s, &m, &rep);
	if (!ret && fh)
		*fh = rep.u.open_rep.fh;
	return ret;
}

static int rs_getattr(struct rs *s, uint64_t handle, uint64_t fh,
		      struct bcp_attr *at)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_GETATTR, 0);
	m.u.node_req.handle = handle;
	m.u.node_req.fh = fh;
	ret = rs_call(s, &m, &rep);
	if (!ret && at)
		*at = rep.u.attr_rep.attr;
	return ret;
}

static int rs_setattr(struct rs *s, uint64_t handle, uint32_t valid,
		      uint32_t mode, uint32_t uid, uint32_t gid)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_SETATTR, 0);
	m.u.setattr_req.handle = handle;
	m.u.setattr_req.valid = valid;
	m.u.setattr_req.mode = mode;
	m.u.setattr_req.uid = uid;
	m.u.setattr_req.gid = gid;
	return rs_call(s, &m, &rep);
}

static int rs_setxattr(struct rs *s, uint64_t handle, const char *name)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_SETXATTR, 0);
	m.u.setxattr_req.handle = handle;
	m.u.setxattr_req.name_len = (uint16_t)strlen(name);
	m.u.setxattr_req.value_len = 3;
	m.name = name;
	m.data = "abc";
	m.data_len = 3;
	return rs_call(s, &m, &rep);
}

static int rs_ping(struct rs *s, int timeout_ms)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_PING, ++s->id);
	return a_call(s->fd, &m, &rep, timeout_ms);
}

static int rs_release(struct rs *s, uint64_t handle, uint64_t fh)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_RELEASE, 0);
	m.u.node_req.handle = handle;
	m.u.node_req.fh = fh;
	return rs_call(s, &m, &rep);
}

static int rs_register(struct rs *s, uint32_t id, uint32_t kind, int mfd,
		       uint64_t len)
{
	struct bcp_msg m, rep;
	uint8_t b[256];
	int n;

	bcp_msg_init(&m, BCP_OP_REGISTER_REGION, ++s->id);
	m.hdr.flags = mfd >= 0 ? BCP_HF_FD : 0;
	m.u.region_req.region_id = id;
	m.u.region_req.kind = kind;
	m.u.region_req.length = len;
	n = bcp_encode(b, sizeof(b), &m);
	if (n < 0)
		t_hard("encode REGISTER_REGION: %s", strerror(-n));
	n = bcp_frame_send(s->fd, b, (size_t)n, mfd);
	if (n < 0)
		return n;
	return a_recv(s->fd, &rep, 5000);
}

static int rs_unregister(struct rs *s, uint32_t id)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_UNREGISTER_REGION, 0);
	m.u.unregion_req.region_id = id;
	return rs_call(s, &m, &rep);
}

/* A BATCH of one segment; the segment's status, or the reply's -errno. */
static int rs_batch1(struct rs *s, uint16_t op, uint64_t fh, uint64_t off,
		     uint32_t len, uint32_t region, uint64_t region_off)
{
	struct bcp_seg seg = { fh, off, len, region, region_off };
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, op, 0);
	m.u.batch_req.count = 1;
	m.segs = &seg;
	ret = rs_call(s, &m, &rep);
	if (ret < 0)
		return ret;
	if (rep.u.batch_rep.count != 1)
		return -EBADMSG;
	return bcp_msg_status(&rep, 0);
}

/* A sealable memfd of len bytes, sealed against shrinking when seal. */
static int a_memfd(uint64_t len, int sealable, int seal)
{
	int fd = memfd_create("attack", MFD_CLOEXEC |
			      (sealable ? MFD_ALLOW_SEALING : 0));

	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		t_hard("memfd of %llu bytes: %s", (unsigned long long)len,
		       strerror(errno));
	if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		t_hard("F_SEAL_SHRINK: %s", strerror(errno));
	return fd;
}

/* ---- outside the root ----------------------------------------------- */

static char *a_snap_buf;
static size_t a_snap_len, a_snap_cap;
static char a_snap_skip[3][400];

static void a_snap_add(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void a_snap_add(const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(a_snap_buf + a_snap_len, a_snap_cap - a_snap_len,
			      fmt, ap);
		va_end(ap);
		if ((size_t)n < a_snap_cap - a_snap_len)
			break;
		a_snap_cap = a_snap_cap * 2 + (size_t)n + 1;
		a_snap_buf = realloc(a_snap_buf, a_snap_cap);
		if (!a_snap_buf)
			t_hard("out of memory");
	}
	a_snap_len += (size_t)n;
}

static uint64_t a_file_hash(const char *p)
{
	uint8_t b[65536];
	uint64_t h = 0;
	ssize_t n;
	int fd = open(p, O_RDONLY | O_NONBLOCK);

	if (fd < 0)
		return 0;
	while ((n = read(fd, b, sizeof(b))) > 0)
		h = h * 31 + t_fnv(b, (size_t)n);
	close(fd);
	return h;
}

static int a_snap_one(const char *p, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	int i;

	(void)flag;
	(void)ftw;
	for (i = 0; i < 3; i++)
		if (a_snap_skip[i][0] && !strncmp(p, a_snap_skip[i],
						  strlen(a_snap_skip[i])))
			return 0;
	a_snap_add("%s %o %u:%u %lld %lld.%09ld %llx\n", p, st->st_mode,
		   st->st_uid, st->st_gid, (long long)st->st_size,
		   (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
		   S_ISREG(st->st_mode) ?
		   (unsigned long long)a_file_hash(p) : 0ull);
	return 0;
}

/* Everything in the test's dir but the root, the log and the socket. */
static char *a_snap_take(void)
{
	struct stat st;

	a_snap_len = 0;
	a_snap_cap = 4096;
	a_snap_buf = malloc(a_snap_cap);
	if (!a_snap_buf)
		t_hard("out of memory");
	a_snap_buf[0] = '\0';
	snprintf(a_snap_skip[0], sizeof(a_snap_skip[0]), "%s", A.root);
	snprintf(a_snap_skip[1], sizeof(a_snap_skip[1]), "%s", A.log);
	snprintf(a_snap_skip[2], sizeof(a_snap_skip[2]), "%s/sock", A.dir);
	nftw(A.dir, a_snap_one, 16, FTW_PHYS);
	if (stat("/etc/passwd", &st) == 0)
		a_snap_one("/etc/passwd", &st, 0, NULL);
	return a_snap_buf;
}

static void a_snap_check(void)
{
	char *now = a_snap_take();

	if (a_snap0 && strcmp(a_snap0, now)) {
		a_fail(__LINE__, "something outside the data root changed");
		fprintf(stderr, "before:\n%safter:\n%s", a_snap0, now);
	}
	free(now);
}

/* ---- the agent ------------------------------------------------------ */

/* Options with an argument (the others stand alone). */
static int a_opt_has_arg(const char *o)
{
	return strcmp(o, "--allow-devices") != 0;
}

/* The temp dir, a sibling dir the root points into, links out of it. */
static void agent_init(const char *name)
{
	char p[500], q[800];
	int fd;

	t_agent_init(&A, name);
	chmod(A.dir, 0755);
	snprintf(p, sizeof(p), "%s/outside", A.dir);
	if (mkdir(p, 0755) < 0)
		t_hard("mkdir %s: %s", p, strerror(errno));
	snprintf(q, sizeof(q), "%s/victim", p);
	fd = open(q, O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || write(fd, "precious\n", 9) != 9)
		t_hard("%s: %s", q, strerror(errno));
	close(fd);
	snprintf(q, sizeof(q), "%s/sub", p);
	mkdir(q, 0700);
	a_path(q, sizeof(q), "evil");
	if (symlink("../outside", q) < 0)
		t_hard("symlink: %s", strerror(errno));
	a_path(q, sizeof(q), "evil_abs");
	snprintf(p, sizeof(p), "%s/outside/victim", A.dir);
	if (symlink(p, q) < 0)
		t_hard("symlink: %s", strerror(errno));
}

/*
 * Start the agent with the usual timeouts and opts (NULL-terminated).
 * An option it refuses as unknown fails the case and is dropped.
 */
static void agent_go(const char *const *opts, long nofile)
{
	const char *args[40];
	char line[512];
	int n = 0, i, ret, tries;
	FILE *f;

	args[n++] = "--xfer-timeout";
	args[n++] = "2000";
	args[n++] = "--handshake-timeout";
	args[n++] = "2000";
	for (i = 0; opts && opts[i]; i++)
		args[n++] = opts[i];
	args[n] = NULL;
	for (tries = 0; tries < 10; tries++) {
		ret = t_agent_start_args(&A, args, nofile);
		if (!ret)
			break;
		f = fopen(A.log, "r");
		ret = 0;
		while (f && fgets(line, sizeof(line), f)) {
			char *o = strstr(line, "unrecognized option '");

			if (!o)
				continue;
			o += strlen("unrecognized option '");
			o[strcspn(o, "'=")] = '\0';
			for (i = 0; i < n; i++) {
				int k = a_opt_has_arg(o) ? 2 : 1;

				if (strcmp(args[i], o))
					continue;
				a_fail(__LINE__, "the agent does not accept "
				       "%s%s%s; going on without it", o,
				       k == 2 ? " " : "",
				       k == 2 ? args[i + 1] : "");
				memmove(&args[i], &args[i + k],
					(size_t)(n + 1 - i - k) *
					sizeof(args[0]));
				n -= k;
				ret = 1;
				break;
			}
		}
		if (f)
			fclose(f);
		if (!ret) {
			char cmd[400];

			snprintf(cmd, sizeof(cmd), "tail -5 '%s' >&2", A.log);
			if (system(cmd) != 0)
				a_note("cannot show %s", A.log);
			t_hard("the agent does not start (see above)");
		}
		/* start over with a fresh log */
		unlink(A.log);
	}
	if (A.pid <= 0)
		t_hard("the agent does not start");
	a_snap0 = a_snap_take();
}

/* 1 when the agent runs; else the case fails with how it ended. */
static int agent_alive(const char *after)
{
	int st = t_agent_exited(&A);

	if (st < 0)
		return 1;
	if (WIFSIGNALED(st))
		a_fail(__LINE__, "the agent died of signal %d (%s) after %s",
		       WTERMSIG(st), strsignal(WTERMSIG(st)), after);
	else
		a_fail(__LINE__, "the agent exited with %d after %s",
		       WEXITSTATUS(st), after);
	return 0;
}

/*
 * SIGTERM and a clean exit.  The log may hold warnings about the hostile
 * peers, whose strerror() text can say "error" ("Protocol error"): only
 * the error level, a sanitizer report or a runtime error is a fault.
 */
static void agent_stop(void)
{
	char line[2048];
	int st = -1, i;
	FILE *f;

	kill(A.pid, SIGTERM);
	for (i = 0; i < 300; i++) {
		st = t_agent_exited(&A);
		if (st >= 0)
			break;
		usleep(50000);
	}
	if (st < 0)
		a_fail(__LINE__, "the agent did not exit within 15 s of "
		       "SIGTERM");
	else if (!WIFEXITED(st) || WEXITSTATUS(st))
		a_fail(__LINE__, "the agent ended with status %#x on SIGTERM",
		       st);
	f = fopen(A.log, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, ": error: ") || strstr(line, "Sanitizer") ||
		    strstr(line, "runtime error"))
			a_fail(__LINE__, "the agent logged a fault: %s", line);
	if (f)
		fclose(f);
}

/* ---- the benign session --------------------------------------------- */

struct benign {
	pthread_t th;
	int tcp;
	enum bcp_transport tr;
	atomic_int stop;
	atomic_int done;
	atomic_long iters;
	atomic_long bad;
	atomic_ulong last_ms;	/* when the last round ended */
	char why[256];
};

static void benign_bad(struct benign *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void benign_bad(struct benign *b, const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&b->bad, 1) == 0) {
		va_start(ap, fmt);
		vsnprintf(b->why, sizeof(b->why), fmt, ap);
		va_end(ap);
	}
}

static int benign_connect(struct benign *b, struct bcp_client **out)
{
	struct bcp_client_opts o;
	char err[256];
	uint64_t t0 = a_ms();
	int ret;

	bcp_client_opts_init(&o);
	o.addr = b->tcp ? A.tcp_addr : A.unix_addr;
	o.transport = b->tr;
	o.pool_size = 4 * A_MIB;
	o.timeout_ms = 5000;
	do {
		ret = bcp_client_connect(&o, out, err, sizeof(err));
		if (!ret)
			return 0;
		usleep(100000);
	} while (!atomic_load(&b->stop) && a_ms() - t0 < 8000);
	benign_bad(b, "cannot connect: %s (%s)", a_err(ret), err);
	return ret;
}

#define BENIGN_LEN	(128u * 1024)

static void *benign_main(void *arg)
{
	static _Thread_local uint8_t w[BENIGN_LEN], r[BENIGN_LEN];
	struct benign *b = arg;
	struct bcp_client *c;
	struct bcp_entry e, e2;
	uint64_t fh, i;
	char name[32];
	int ret, k;

	if (benign_connect(b, &c) < 0)
		goto out;
	for (i = 0; !atomic_load(&b->stop); i++) {
		snprintf(name, sizeof(name), "benign.%d", (int)(i % 4));
		ret = t_create(c, bcp_client_root(c), name, 0644,
			       O_RDWR | O_TRUNC, &e, &fh);
		if (ret < 0) {
			benign_bad(b, "CREATE %s: %s", name, a_err(ret));
			if (ret == -ENOTCONN)
				break;
			continue;
		}
		for (k = 0; k < (int)BENIGN_LEN; k++)
			w[k] = a_pat((unsigned int)i, (uint64_t)k);
		for (k = 0; k < 2; k++) {
			ret = t_io(c, BCP_OP_BATCH_PUSH, fh,
				   (uint64_t)k * BENIGN_LEN / 2,
				   w + k * BENIGN_LEN / 2, BENIGN_LEN / 2);
			if (ret != (int)BENIGN_LEN / 2)
				benign_bad(b, "BATCH_PUSH: %s", a_err(ret));
		}
		memset(r, 0, sizeof(r));
		ret = t_io(c, BCP_OP_BATCH_PULL, fh, 0, r, BENIGN_LEN);
		if (ret != (int)BENIGN_LEN)
			benign_bad(b, "BATCH_PULL: %s", a_err(ret));
		else if (memcmp(r, w, BENIGN_LEN))
			benign_bad(b, "BATCH_PULL returned other bytes");
		ret = t_lookup(c, bcp_client_root(c), name, &e2);
		if (ret < 0)
			benign_bad(b, "LOOKUP %s: %s", name, a_err(ret));
		else if (e2.handle != e.handle ||
			 e2.attr.size != BENIGN_LEN)
			benign_bad(b, "LOOKUP %s: handle %llx size %llu",
				   name, (unsigned long long)e2.handle,
				   (unsigned long long)e2.attr.size);
		t_release(c, e.handle, fh);
		bcp_client_forget(c, e.handle, ret < 0 ? 1 : 2);
		atomic_store(&b->last_ms, a_ms());
		atomic_fetch_add(&b->iters, 1);
	}
	bcp_client_destroy(c);
out:
	atomic_store(&b->done, 1);
	return NULL;
}

static void benign_start(struct benign *b, int tcp, enum bcp_transport tr)
{
	memset(b, 0, sizeof(*b));
	b->tcp = tcp;
	b->tr = tr;
	atomic_store(&b->last_ms, a_ms());
	if (pthread_create(&b->th, NULL, benign_main, b))
		t_hard("pthread_create");
}

/* Wait until it made n more rounds; 0 when it did within ms. */
static int benign_wait(struct benign *b, long n, int ms)
{
	long want = atomic_load(&b->iters) + n;
	uint64_t t0 = a_ms();

	while (atomic_load(&b->iters) < want) {
		if (a_ms() - t0 > (uint64_t)ms || atomic_load(&b->done))
			return -1;
		usleep(10000);
	}
	return 0;
}

/* Stop it and check it made progress while it ran; fails the case else */
static void benign_stop(struct benign *b, const char *during)
{
	uint64_t t0 = a_ms();

	if (benign_wait(b, 1, 5000) < 0)
		a_fail(__LINE__, "the benign session made no progress "
		       "within 5 s after %s (%ld rounds)", during,
		       atomic_load(&b->iters));
	atomic_store(&b->stop, 1);
	while (!atomic_load(&b->done)) {
		if (a_ms() - t0 > 8000)
			t_fail("the benign session is stuck after %s "
			       "(%ld rounds)", during,
			       atomic_load(&b->iters));
		usleep(10000);
	}
	pthread_join(b->th, NULL);
	EXPECT(atomic_load(&b->bad) == 0,
	       "the benign session during %s: %ld failures, first: %s",
	       during, atomic_load(&b->bad), b->why);
	EXPECT(atomic_load(&b->iters) > 0,
	       "the benign session never completed a round during %s",
	       during);
}

/*
 * The end of every agent: it is alive, a fresh benign session works,
 * nothing outside the root changed, it stops cleanly with a clean log.
 */
static void agent_finish(enum bcp_transport tr)
{
	struct benign b;

	if (agent_alive("the attacks")) {
		benign_start(&b, tr == BCP_XFER_TCP, tr);
		benign_wait(&b, 3, 5000);
		benign_stop(&b, "the final check");
	}
	a_snap_check();
	free(a_snap0);
	a_snap0 = NULL;
	if (A.pid > 0)
		agent_stop();
	t_agent_cleanup(&A);
}

static void __attribute__((noreturn)) case_end(enum bcp_transport tr)
{
	agent_finish(tr);
	exit(a_nfail ? 1 : 0);
}

/* ---- 1: special files --------------------------------------------- */

/*
 * Send m and a PING together; the PING must come back within ping_ms
 * whatever m does.  When it does not and unblock is set, open that FIFO
 * for reading and writing so an agent stuck in open(2) gets free.
 * Returns m's status; *m_rep gets m's reply.
 */
static int call_with_ping(struct rs *s, struct bcp_msg *m,
			  struct bcp_msg *m_rep, int ping_ms,
			  const char *unblock, const char *what)
{
	struct bcp_msg p, rep;
	uint64_t mid, pid, t0 = a_ms();
	int got_m = 0, got_p = 0, st_m = -ETIMEDOUT, ufd = -1, ret;

	mid = m->hdr.req_id = ++s->id;
	bcp_msg_init(&p, BCP_OP_PING, ++s->id);
	pid = p.hdr.req_id;
	if (a_send(s->fd, m) < 0 || a_send(s->fd, &p) < 0)
		return -EPIPE;
	while (!got_m || !got_p) {
		int64_t left = (int64_t)(got_p ? 5000 : ping_ms) -
			       (int64_t)(a_ms() - t0);

		if (left <= 0) {
			if (got_p)
				break;
			a_fail(__LINE__, "%s: PING on the same session not "
			       "answered within %d ms", what, ping_ms);
			if (unblock && ufd < 0)
				ufd = open(unblock, O_RDWR | O_NONBLOCK);
			got_p = 1;	/* from now on only m counts */
			t0 = a_ms();
			continue;
		}
		ret = a_recv(s->fd, &rep, (int)left);
		if (!rep.hdr.req_id) {
			if (ret == -ETIMEDOUT)
				continue;
			st_m = ret;
			break;
		}
		if (rep.hdr.req_id == mid) {
			got_m = 1;
			st_m = ret;
			*m_rep = rep;
		} else if (rep.hdr.req_id == pid) {
			got_p = 1;
		}
	}
	if (ufd >= 0) {
		usleep(200000);
		close(ufd);
	}
	return st_m;
}

static void case_special(void)
{
	static const struct {
		const char *name;
		int err;
		uint32_t cflags, oflags;
	} tab[] = {
		{ "fifo", -ENXIO, O_WRONLY, O_RDONLY },
		{ "sock", -ENXIO, O_RDWR, O_RDONLY },
		{ "chr", -ENXIO, O_RDWR, O_RDONLY },
		{ "link", -ELOOP, O_RDWR, O_RDONLY },
		{ "dir", -EISDIR, O_RDWR, O_RDONLY },
	};
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct bcp_msg m, rep;
	struct bcp_entry e;
	struct bcp_attr at1, at2;
	struct benign b;
	struct stat st;
	char p[700], what[128];
	uint64_t fh;
	unsigned int i;
	int fd, ret, have_chr;

	agent_init("attack_special");
	a_path(p, sizeof(p), "fifo");
	if (mkfifo(p, 0666) < 0)
		t_hard("mkfifo: %s", strerror(errno));
	a_path(p, sizeof(p), "sock");
	if (strlen(p) >= sizeof(sun.sun_path))
		t_hard("%s: too long for a socket", p);
	memcpy(sun.sun_path, p, strlen(p) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		t_hard("bind: %s", strerror(errno));
	close(fd);
	a_file("file", 10, 1);
	a_path(p, sizeof(p), "link");
	if (symlink("file", p) < 0)
		t_hard("symlink: %s", strerror(errno));
	a_path(p, sizeof(p), "dir");
	mkdir(p, 0755);
	a_path(p, sizeof(p), "chr");
	have_chr = mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0;
	if (!have_chr)
		a_note("cannot make a device node here: %s", strerror(errno));
	agent_go(NULL, 0);
	benign_start(&b, 0, BCP_XFER_SHM);

	struct rs s;

	rs_open(&s, 0);
	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		const char *nm = tab[i].name;

		if (!strcmp(nm, "chr") && !have_chr)
			continue;
		a_path(p, sizeof(p), nm);
		ret = rs_lookup(&s, s.root, nm, &e);
		EXPECT(ret == 0, "LOOKUP %s: %s", nm, a_err(ret));
		if (ret)
			continue;
		snprintf(what, sizeof(what), "CREATE without O_EXCL on %s",
			 nm);
		rs_create_msg(&m, s.root, nm, 0644, tab[i].cflags, 0, 0);
		ret = call_with_ping(&s, &m, &rep, 2000, p, what);
		EXPECT(ret == tab[i].err, "%s: %s, expected %s", what,
		       a_err(ret), a_err(tab[i].err));
		if (ret == 0)
			rs_release(&s, rep.u.create_rep.entry.handle,
				   rep.u.create_rep.fh);
		if (ret == -ETIMEDOUT || ret == -ECONNRESET ||
		    ret == -EPIPE || ret == -EBADMSG) {
			rs_close(&s);
			if (!agent_alive(what))
				case_end(BCP_XFER_SHM);
			rs_open(&s, 0);
		}
		snprintf(what, sizeof(what), "OPEN of %s", nm);
		bcp_msg_init(&m, BCP_OP_OPEN, 0);
		m.u.open_req.handle = e.handle;
		m.u.open_req.flags = tab[i].oflags;
		ret = call_with_ping(&s, &m, &rep, 2000, p, what);
		EXPECT(ret == tab[i].err, "%s: %s, expected %s", what,
		       a_err(ret), a_err(tab[i].err));
		if (ret == 0)
			rs_release(&s, e.handle, rep.u.open_rep.fh);
		if (ret == -ETIMEDOUT || ret == -ECONNRESET ||
		    ret == -EPIPE || ret == -EBADMSG) {
			rs_close(&s);
			if (!agent_alive(what))
				case_end(BCP_XFER_SHM);
			rs_open(&s, 0);
		}
		EXPECT(lstat(p, &st) == 0 && (st.st_mode & S_IFMT) ==
		       (e.attr.mode & S_IFMT), "%s changed type", nm);
	}
	/* device nodes without --allow-devices */
	ret = rs_mknod(&s, s.root, "newblk", S_IFBLK | 0600,
		       makedev(7, 0));
	EXPECT(ret == -EPERM, "MKNOD S_IFBLK: %s, expected -EPERM",
	       a_err(ret));
	a_path(p, sizeof(p), "newblk");
	EXPECT(lstat(p, &st) < 0, "MKNOD S_IFBLK left a node behind");
	ret = rs_mknod(&s, s.root, "newchr", S_IFCHR | 0600,
		       makedev(1, 3));
	EXPECT(ret == -EPERM, "MKNOD S_IFCHR: %s, expected -EPERM",
	       a_err(ret));
	a_path(p, sizeof(p), "newchr");
	EXPECT(lstat(p, &st) < 0, "MKNOD S_IFCHR left a node behind");
	/* CREATE: entry and fh name one inode */
	ret = rs_create(&s, s.root, "fresh", O_RDWR, 0, 0, &e, &fh);
	EXPECT(ret == 0, "CREATE fresh: %s", a_err(ret));
	if (!ret) {
		a_path(p, sizeof(p), "fresh");
		EXPECT(rs_getattr(&s, e.handle, 0, &at1) == 0 &&
		       rs_getattr(&s, e.handle, fh, &at2) == 0 &&
		       lstat(p, &st) == 0,
		       "GETATTR of the created file fails");
		EXPECT(at1.ino == e.attr.ino && at2.ino == e.attr.ino &&
		       st.st_ino == e.attr.ino,
		       "CREATE entry ino %llu, GETATTR(handle) %llu, "
		       "GETATTR(fh) %llu, on disk %llu",
		       (unsigned long long)e.attr.ino,
		       (unsigned long long)at1.ino,
		       (unsigned long long)at2.ino,
		       (unsigned long long)st.st_ino);
	}
	EXPECT(rs_ping(&s, 2000) == 0, "PING after the special files");
	rs_close(&s);
	agent_alive("the special files");
	benign_stop(&b, "the special files");
	case_end(BCP_XFER_SHM);
}

/* ---- 2: opens while batches are in flight --------------------------- */

#define FDT_FILES	8
#define FDT_LEN		(1u << 20)
#define FDT_IO		(64u * 1024)

struct fdt_io {
	int push;
	unsigned int file;	/* pull: data file; push: chunk number */
	uint64_t off;
};

static atomic_int fdt_inflight;
static atomic_long fdt_bad, fdt_done;
static atomic_int fdt_pushed[400];	/* push chunk k: 1 done, -1 failed */
static char fdt_why[200];
static struct bcp_client *fdt_c;

static void fdt_done_cb(struct bcp_io *io, int32_t res)
{
	struct fdt_io *x = io->priv;
	const uint8_t *p = io->buf;
	uint32_t i;

	if (x->push) {
		atomic_store(&fdt_pushed[x->file], res == (int)FDT_IO ? 1 : -1);
		if (res != (int)FDT_IO &&
		    atomic_fetch_add(&fdt_bad, 1) == 0)
			snprintf(fdt_why, sizeof(fdt_why), "push: %d", res);
	} else if (res != (int)FDT_IO) {
		if (atomic_fetch_add(&fdt_bad, 1) == 0)
			snprintf(fdt_why, sizeof(fdt_why), "pull: %d", res);
	} else {
		for (i = 0; i < FDT_IO; i++)
			if (p[i] != a_pat(x->file, x->off + i))
				break;
		if (i < FDT_IO && atomic_fetch_add(&fdt_bad, 1) == 0)
			snprintf(fdt_why, sizeof(fdt_why),
				 "pull of file %u at %llu: wrong byte at %u",
				 x->file, (unsigned long long)x->off, i);
	}
	free(x);
	bcp_client_io_put(fdt_c, io);
	atomic_fetch_add(&fdt_done, 1);
	atomic_fetch_sub(&fdt_inflight, 1);
}

static void case_fd_table(void)
{
	uint64_t fh[FDT_FILES], fhs, ofh[300], oh[300], t0;
	struct bcp_entry e, es;
	struct bcp_client *c;
	unsigned int i, k, pushes = 0, seed = 7;
	char name[32], p[700];
	int ret, j;

	agent_init("attack_fd_table");
	for (i = 0; i < FDT_FILES; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		a_file(name, FDT_LEN, i);
	}
	agent_go(NULL, 0);
	c = t_client(&A, 0, BCP_XFER_SHM, 16 * A_MIB);
	fdt_c = c;
	for (i = 0; i < FDT_FILES; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		T_EQ(t_lookup(c, bcp_client_root(c), name, &e), 0);
		T_EQ(t_open(c, e.handle, O_RDONLY, &fh[i]), 0);
	}
	T_EQ(t_create(c, bcp_client_root(c), "scratch", 0644, O_RDWR, &es,
		      &fhs), 0);
	for (i = 0; i < 300; i++) {
		/* keep batches on earlier fhs in flight ... */
		while (atomic_load(&fdt_inflight) < 24) {
			struct fdt_io *x = calloc(1, sizeof(*x));
			struct bcp_io *io = bcp_client_io_get(c, FDT_IO);

			if (!x || !io)
				t_hard("out of memory");
			seed = seed * 1103515245 + 12345;
			x->push = (seed >> 16) % 4 == 0 && pushes < 400;
			if (x->push) {
				x->file = pushes++;
				for (k = 0; k < FDT_IO; k++)
					((uint8_t *)io->buf)[k] =
						a_pat(100 + x->file, k);
				io->op = BCP_OP_BATCH_PUSH;
				io->fh = fhs;
				io->offset = (uint64_t)x->file * FDT_IO;
			} else {
				x->file = (seed >> 8) % FDT_FILES;
				x->off = ((seed >> 4) % (FDT_LEN - FDT_IO));
				io->op = BCP_OP_BATCH_PULL;
				io->fh = fh[x->file];
				io->offset = x->off;
			}
			io->length = FDT_IO;
			io->done = fdt_done_cb;
			io->priv = x;
			atomic_fetch_add(&fdt_inflight, 1);
			bcp_client_submit(c, io);
		}
		/* ... while the open-file table grows under them */
		snprintf(name, sizeof(name), "o%03u", i);
		ret = t_create(c, bcp_client_root(c), name, 0644, O_RDWR, &e,
			       &ofh[i]);
		EXPECT(ret == 0, "CREATE %s: %s", name, a_err(ret));
		if (ret) {
			if (!agent_alive("CREATE"))
				case_end(BCP_XFER_SHM);
			if (ret == -ENOTCONN)
				t_fail("the agent closed the session with "
				       "batches in flight");
			ofh[i] = 0;
			continue;
		}
		oh[i] = e.handle;
		if (i % 3 == 2 && ofh[i - 1]) {
			t_release(c, oh[i - 1], ofh[i - 1]);
			ofh[i - 1] = 0;
		}
		if (i % 25 == 0) {
			uint64_t extra;

			ret = t_open(c, oh[i], O_RDONLY, &extra);
			EXPECT(ret == 0, "OPEN %s: %s", name, a_err(ret));
		}
	}
	t0 = a_ms();
	while (atomic_load(&fdt_inflight) > 0 && a_ms() - t0 < 8000)
		usleep(10000);
	EXPECT(atomic_load(&fdt_inflight) == 0,
	       "%d batches never completed", atomic_load(&fdt_inflight));
	EXPECT(atomic_load(&fdt_bad) == 0, "%ld wrong I/Os, first: %s",
	       atomic_load(&fdt_bad), fdt_why);
	a_note("%ld I/Os while 300 files were opened", atomic_load(&fdt_done));
	for (i = 0; i < 300; i++)
		if (ofh[i])
			t_release(c, oh[i], ofh[i]);
	t_release(c, es.handle, fhs);
	bcp_client_destroy(c);
	/* every completed push landed where it was aimed */
	a_path(p, sizeof(p), "scratch");
	{
		static uint8_t b[FDT_IO];
		int fd = open(p, O_RDONLY);
		unsigned int wrong = 0;

		for (k = 0; fd >= 0 && k < pushes; k++) {
			if (atomic_load(&fdt_pushed[k]) != 1)
				continue;
			if (pread(fd, b, FDT_IO, (off_t)k * FDT_IO) !=
			    (ssize_t)FDT_IO) {
				wrong++;
				continue;
			}
			for (j = 0; j < (int)FDT_IO; j++)
				if (b[j] != a_pat(100 + k, (uint64_t)j))
					break;
			wrong += j < (int)FDT_IO;
		}
		if (fd >= 0)
			close(fd);
		EXPECT(fd >= 0 && wrong == 0,
		       "%u of %u pushed chunks hold other bytes", wrong,
		       pushes);
	}
	case_end(BCP_XFER_SHM);
}

/* ---- 3: identity ---------------------------------------------------- */

static void expect_owner(const char *name, uid_t uid, gid_t gid,
			 const char *how)
{
	char p[700];
	struct stat st;

	a_path(p, sizeof(p), name);
	if (lstat(p, &st) < 0) {
		a_fail(__LINE__, "%s: %s not created", how, name);
		return;
	}
	EXPECT(st.st_uid == uid && st.st_gid == gid,
	       "%s: %s is owned by %u:%u, expected %u:%u", how, name,
	       st.st_uid, st.st_gid, uid, gid);
}

static void ident_xattrs(struct rs *s, uint64_t h, const char *how)
{
	int ret;

	ret = rs_setxattr(s, h, "trusted.attack");
	EXPECT(ret == -EPERM, "%s: SETXATTR trusted.*: %s, expected -EPERM",
	       how, a_err(ret));
	ret = rs_setxattr(s, h, "security.attack");
	EXPECT(ret == -EPERM, "%s: SETXATTR security.*: %s, expected -EPERM",
	       how, a_err(ret));
}

/* The unprivileged peer, in a child: the parent checks the owners. */
static int ident_as_nobody(void)
{
	struct bcp_entry e;
	struct rs s;
	int ret, bad = 0;

	if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
	    setresuid(65534, 65534, 65534) < 0) {
		fprintf(stderr, "FAIL: cannot become 65534: %s\n",
			strerror(errno));
		return 1;
	}
	ret = rs_connect(&s, 0, 5000);
	if (ret < 0) {
		fprintf(stderr, "FAIL: uid 65534: no session: %s\n",
			a_err(ret));
		return 1;
	}
	ret = rs_create(&s, s.root, "nobody_c", O_RDWR, 0, 0, &e, NULL);
	if (ret < 0) {
		fprintf(stderr, "FAIL: uid 65534: CREATE: %s\n", a_err(ret));
		bad++;
	}
	ret = rs_mkdir(&s, s.root, "nobody_d", 1000, 1000);
	if (ret < 0) {
		fprintf(stderr, "FAIL: uid 65534: MKDIR: %s\n", a_err(ret));
		bad++;
	}
	ret = rs_setxattr(&s, e.handle, "trusted.attack");
	if (ret != -EPERM) {
		fprintf(stderr, "FAIL: uid 65534: SETXATTR trusted.*: %s, "
			"expected -EPERM\n", a_err(ret));
		bad++;
	}
	ret = rs_setxattr(&s, e.handle, "security.attack");
	if (ret != -EPERM) {
		fprintf(stderr, "FAIL: uid 65534: SETXATTR security.*: %s, "
			"expected -EPERM\n", a_err(ret));
		bad++;
	}
	rs_close(&s);
	return bad ? 1 : 0;
}

static void case_identity(void)
{
	static const char *const squash_all[] = { "--squash", "all", NULL };
	struct bcp_entry e;
	struct stat st;
	struct rs s;
	char p[700], sock[400];
	pid_t pid;
	int ret, stt, i;

	/* the default: --squash root for tcp hosts */
	agent_init("attack_identity");
	a_file("rootfile", 10, 1);
	agent_go(NULL, 0);
	rs_open(&s, 1);
	ret = rs_create(&s, s.root, "tcp_c", O_RDWR, 0, 0, &e, NULL);
	EXPECT(ret == 0, "tcp CREATE: %s", a_err(ret));
	expect_owner("tcp_c", 65534, 65534, "tcp, squash root, CREATE 0:0");
	ret = rs_mkdir(&s, s.root, "tcp_d", 0, 0);
	EXPECT(ret == 0, "tcp MKDIR: %s", a_err(ret));
	expect_owner("tcp_d", 65534, 65534, "tcp, squash root, MKDIR 0:0");
	ret = rs_create(&s, s.root, "tcp_u", O_RDWR, 1000, 1000, &e, NULL);
	EXPECT(ret == 0, "tcp CREATE 1000: %s", a_err(ret));
	expect_owner("tcp_u", 1000, 1000, "tcp, squash root, CREATE 1000");
	if (!ret) {
		ret = rs_setattr(&s, e.handle, BCP_SETATTR_UID |
				 BCP_SETATTR_GID, 0, 0, 0);
		EXPECT(ret == 0 || ret == -EPERM, "SETATTR 0:0: %s",
		       a_err(ret));
		expect_owner("tcp_u", ret ? 1000 : 65534, ret ? 1000 : 65534,
			     "tcp, squash root, SETATTR uid/gid 0");
		ident_xattrs(&s, e.handle, "tcp, squash root");
	}
	ret = rs_lookup(&s, s.root, "rootfile", &e);
	EXPECT(ret == 0, "LOOKUP rootfile: %s", a_err(ret));
	if (!ret) {
		ret = rs_setattr(&s, e.handle, BCP_SETATTR_MODE, 06755, 0, 0);
		a_path(p, sizeof(p), "rootfile");
		EXPECT(lstat(p, &st) == 0 && !(st.st_mode &
					       (S_ISUID | S_ISGID)),
		       "tcp, squash root: SETATTR mode 06755 on a file of "
		       "0:0 (%s) left mode %o", a_err(ret),
		       st.st_mode & 07777);
	}
	rs_close(&s);
	/* unix from root: ids as sent */
	rs_open(&s, 0);
	ret = rs_create(&s, s.root, "unix_c", O_RDWR, 0, 0, &e, NULL);
	EXPECT(ret == 0, "unix CREATE: %s", a_err(ret));
	expect_owner("unix_c", 0, 0, "unix from root, CREATE 0:0");
	ret = rs_create(&s, s.root, "unix_u", O_RDWR, 1000, 1001, &e, NULL);
	EXPECT(ret == 0, "unix CREATE: %s", a_err(ret));
	expect_owner("unix_u", 1000, 1001, "unix from root, CREATE 1000:1001");
	rs_close(&s);
	/* unix from uid 65534 */
	snprintf(sock, sizeof(sock), "%s/sock", A.dir);
	chmod(sock, 0777);
	chmod(A.root, 0777);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		t_hard("fork: %s", strerror(errno));
	if (pid == 0)
		_exit(ident_as_nobody());
	for (i = 0; i < 200 && waitpid(pid, &stt, WNOHANG) != pid; i++)
		usleep(50000);
	if (i == 200) {
		kill(pid, SIGKILL);
		waitpid(pid, &stt, 0);
		a_fail(__LINE__, "the uid 65534 peer hung");
	} else if (!WIFEXITED(stt) || WEXITSTATUS(stt)) {
		a_nfail++;	/* it said why */
	}
	expect_owner("nobody_c", 65534, 65534,
		     "unix from uid 65534, CREATE 0:0");
	expect_owner("nobody_d", 65534, 65534,
		     "unix from uid 65534, MKDIR 1000:1000");
	chmod(A.root, 0755);
	agent_finish(BCP_XFER_SHM);

	/* --squash all */
	agent_init("attack_identity_all");
	agent_go(squash_all, 0);
	rs_open(&s, 1);
	ret = rs_create(&s, s.root, "all_c", O_RDWR, 1000, 1001, &e, NULL);
	EXPECT(ret == 0, "CREATE: %s", a_err(ret));
	expect_owner("all_c", 65534, 65534, "squash all, CREATE 1000:1001");
	if (!ret) {
		ret = rs_setattr(&s, e.handle, BCP_SETATTR_UID |
				 BCP_SETATTR_GID, 0, 1234, 1234);
		expect_owner("all_c", 65534, 65534,
			     "squash all, SETATTR 1234:1234");
	}
	ret = rs_mkdir(&s, s.root, "all_d", 1000, 1000);
	EXPECT(ret == 0, "MKDIR: %s", a_err(ret));
	expect_owner("all_d", 65534, 65534, "squash all, MKDIR 1000:1000");
	rs_close(&s);
	case_end(BCP_XFER_SHM);
}

/* ---- 4: the data connection ----------------------------------------- */

/* A tcp session with a data connection and a tcp region of len bytes. */
static int evil_data_session(struct rs *s, int *dfd, uint64_t len,
			     const char *file, uint64_t *fh)
{
	struct bcp_msg m, rep;
	struct bcp_addr ad;
	struct bcp_entry e;
	uint8_t sess[8];
	char err[256];
	int i, ret, small = 4096;

	rs_open(s, 1);
	bcp_addr_parse(A.tcp_addr, &ad, err, sizeof(err));
	*dfd = bcp_addr_connect(&ad, 5000);
	if (*dfd < 0)
		t_fail("data connection: %s", a_err(*dfd));
	setsockopt(*dfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	for (i = 0; i < 8; i++)
		sess[i] = (uint8_t)(s->hello.session >> (8 * i));
	bcp_msg_init(&m, BCP_OP_DATA_ATTACH, 1);
	m.u.attach_req.session = s->hello.session;
	bcp_auth_mac("", 0, BCP_AUTH_LABEL_DATA, s->hello.nonce,
		     BCP_NONCE_LEN, sess, sizeof(sess), m.u.attach_req.mac);
	ret = a_call(*dfd, &m, &rep, 5000);
	if (ret < 0)
		t_fail("DATA_ATTACH: %s", a_err(ret));
	ret = rs_register(s, 1, BCP_REGION_TCP, -1, len);
	if (ret < 0)
		t_fail("REGISTER_REGION tcp: %s", a_err(ret));
	ret = rs_lookup(s, s->root, file, &e);
	if (!ret)
		ret = rs_open_fh(s, e.handle, O_RDWR, fh);
	if (ret < 0)
		t_fail("open %s: %s", file, a_err(ret));
	return 0;
}

/* Send a BATCH of n 1 MiB segments and do not wait for it. */
static void evil_batch(struct rs *s, uint16_t op, uint64_t fh, int n)
{
	struct bcp_seg segs[16];
	struct bcp_msg m;
	int i;

	for (i = 0; i < n; i++)
		segs[i] = (struct bcp_seg){ fh, (uint64_t)i * A_MIB, A_MIB, 1,
					    (uint64_t)i * A_MIB };
	bcp_msg_init(&m, op, ++s->id);
	m.u.batch_req.count = (uint32_t)n;
	m.segs = segs;
	if (a_send(s->fd, &m) < 0)
		t_fail("cannot send the batch");
}

struct reader {
	pthread_t th;
	atomic_int done;
	uint64_t ms;		/* how long the read took */
	long bad;
	char why[300];
};

/* A benign 64 MiB read of "big64", checked byte for byte. */
static void *reader_main(void *arg)
{
	static uint8_t b[A_MIB];
	struct reader *r = arg;
	struct bcp_client_opts o;
	struct bcp_client *c;
	struct bcp_entry e;
	char err[256];
	uint64_t fh, off, t0 = a_ms();
	uint32_t i;
	int ret;

	bcp_client_opts_init(&o);
	o.addr = A.unix_addr;
	o.transport = BCP_XFER_SHM;
	o.pool_size = 8 * A_MIB;
	o.timeout_ms = 10000;
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	if (ret < 0) {
		snprintf(r->why, sizeof(r->why), "connect: %s", err);
		r->bad++;
		goto out;
	}
	ret = t_lookup(c, bcp_client_root(c), "big64", &e);
	if (!ret)
		ret = t_open(c, e.handle, O_RDONLY, &fh);
	for (off = 0; !ret && off < 64 * A_MIB; off += A_MIB) {
		ret = t_io(c, BCP_OP_BATCH_PULL, fh, off, b, A_MIB);
		if (ret != (int)A_MIB) {
			snprintf(r->why, sizeof(r->why), "pull at %llu: %s",
				 (unsigned long long)off, a_err(ret));
			r->bad++;
			break;
		}
		ret = 0;
		for (i = 0; i < A_MIB; i++)
			if (b[i] != a_pat(64, off + i))
				break;
		if (i < A_MIB) {
			snprintf(r->why, sizeof(r->why), "wrong byte at %llu",
				 (unsigned long long)(off + i));
			r->bad++;
			break;
		}
	}
	if (ret < 0 && !r->bad) {
		snprintf(r->why, sizeof(r->why), "open big64: %s",
			 a_err(ret));
		r->bad++;
	}
	bcp_client_destroy(c);
out:
	r->ms = a_ms() - t0;
	atomic_store(&r->done, 1);
	return NULL;
}

static void case_data_conn(void)
{
	static const char *const opts[] = { "--workers", "1", NULL };
	struct rs pull, push, hup1, hup2;
	int dpull, dpush, dh1, dh2, closed_pull, closed_push;
	uint64_t fh1, fh2, fh3, fh4, t0, t;
	struct reader rd;
	struct linger lg = { 1, 0 };
	long cpu0, cpu1;

	agent_init("attack_data_conn");
	a_file("big64", 64 * A_MIB, 64);
	a_file("att", 8 * A_MIB, 3);
	agent_go(opts, 0);

	/* two hosts that never answer their data connection */
	evil_data_session(&pull, &dpull, 16 * A_MIB, "att", &fh1);
	evil_data_session(&push, &dpush, 16 * A_MIB, "att", &fh2);
	evil_batch(&pull, BCP_OP_BATCH_PULL, fh1, 8);
	evil_batch(&push, BCP_OP_BATCH_PUSH, fh2, 8);
	t0 = a_ms();
	memset(&rd, 0, sizeof(rd));
	if (pthread_create(&rd.th, NULL, reader_main, &rd))
		t_hard("pthread_create");
	closed_pull = t_raw_closed(pull.fd, A_XFER_MS + A_SLACK_MS);
	t = a_ms() - t0;
	closed_push = t_raw_closed(push.fd, (int)(A_XFER_MS + A_SLACK_MS >
						  (int)(a_ms() - t0) ?
						  A_XFER_MS + A_SLACK_MS -
						  (int)(a_ms() - t0) : 1));
	EXPECT(closed_pull, "a session that never reads its DATA_WRITEs is "
	       "still open %d ms after its BATCH_PULL",
	       A_XFER_MS + A_SLACK_MS);
	EXPECT(closed_push, "a session that never answers its DATA_READs is "
	       "still open %d ms after its BATCH_PUSH",
	       A_XFER_MS + A_SLACK_MS);
	if (closed_pull)
		a_note("the stalled pull session closed after %llu ms",
		       (unsigned long long)t);
	while (!atomic_load(&rd.done) && a_ms() - t0 < 12000)
		usleep(10000);
	if (!atomic_load(&rd.done))
		t_fail("the benign 64 MiB read did not end within 12 s "
		       "beside the stalled sessions");
	if (atomic_load(&rd.done)) {
		pthread_join(rd.th, NULL);
		EXPECT(!rd.bad, "the benign 64 MiB read: %s", rd.why);
		a_note("the benign 64 MiB read took %llu ms",
		       (unsigned long long)rd.ms);
	}
	rs_close(&pull);
	rs_close(&push);
	close(dpull);
	close(dpush);
	if (!agent_alive("stalled data connections"))
		case_end(BCP_XFER_SHM);

	/* data peers that hang up with the agent's buffers full */
	evil_data_session(&hup1, &dh1, 16 * A_MIB, "att", &fh3);
	evil_data_session(&hup2, &dh2, 16 * A_MIB, "att", &fh4);
	evil_batch(&hup1, BCP_OP_BATCH_PULL, fh3, 8);
	evil_batch(&hup2, BCP_OP_BATCH_PUSH, fh4, 8);
	usleep(300000);
	{
		/* answer hup2's first DATA_READ in part, then flood it */
		static uint8_t junk[256 * 1024];
		struct bcp_msg rq, rp;
		uint8_t h[64];
		int n, fl;
		size_t sent = 0;

		n = a_recv(dh2, &rq, 2000);
		if (n == 0 && rq.hdr.opcode == BCP_OP_DATA_READ) {
			bcp_msg_init_reply(&rp, &rq, 0);
			rp.data_len = rq.u.data_req.length;
			rp.data = junk;
			n = bcp_encode_head(h, sizeof(h), &rp);
			if (n > 0 && send(dh2, h, (size_t)n, MSG_NOSIGNAL) != n)
				a_note("cannot send a DATA_READ reply head");
		}
		fl = fcntl(dh2, F_GETFL);
		fcntl(dh2, F_SETFL, fl | O_NONBLOCK);
		memset(junk, 0x5a, sizeof(junk));
		t0 = a_ms();
		while (sent < 32 * A_MIB && a_ms() - t0 < 1500) {
			ssize_t k = send(dh2, junk, sizeof(junk),
					 MSG_NOSIGNAL);

			if (k > 0)
				sent += (size_t)k;
			else if (errno == EAGAIN)
				usleep(10000);
			else
				break;
		}
		a_note("flooded %zu bytes into a data connection", sent);
	}
	setsockopt(dh1, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(dh1);
	close(dh2);
	usleep(300000);
	cpu0 = t_proc_cpu_ms(A.pid);
	sleep(3);
	cpu1 = t_proc_cpu_ms(A.pid);
	EXPECT(cpu0 >= 0 && cpu1 - cpu0 < 1000, "the agent used %ld ms of CPU "
	       "in the 3 s after two data peers hung up", cpu1 - cpu0);
	a_note("agent CPU in the 3 s after the hang-ups: %ld ms", cpu1 - cpu0);
	rs_close(&hup1);
	rs_close(&hup2);
	case_end(BCP_XFER_SHM);
}

/* ---- 5: blocking calls off the worker ------------------------------- */

struct blocker {
	pthread_t th;
	atomic_int stop, done;
	int copies, fsyncs, errs;
	char why[200];
};

static void *blocker_main(void *arg)
{
	static uint8_t b[A_MIB];
	struct blocker *k = arg;
	struct bcp_entry e, ed, edirty;
	struct bcp_msg m, rep;
	uint64_t fin, fout, fdirty, off;
	char p[700];
	struct rs s;
	int ret, fd, round;

	if (rs_connect(&s, 0, 5000) < 0) {
		snprintf(k->why, sizeof(k->why), "no session");
		k->errs++;
		goto out;
	}
	ret = rs_lookup(&s, s.root, "src", &e);
	if (!ret)
		ret = rs_open_fh(&s, e.handle, O_RDONLY, &fin);
	if (!ret)
		ret = rs_create(&s, s.root, "dst", O_RDWR, 0, 0, &ed, &fout);
	if (!ret)
		ret = rs_create(&s, s.root, "dirty", O_RDWR, 0, 0, &edirty,
				&fdirty);
	if (ret < 0) {
		snprintf(k->why, sizeof(k->why), "set-up: %s", a_err(ret));
		k->errs++;
		goto out_close;
	}
	a_path(p, sizeof(p), "dirty");
	fd = open(p, O_WRONLY);
	memset(b, 0x33, sizeof(b));
	/*
	 * Bounded (1 GiB of copies): the point is the worker's other
	 * sessions, not the disk, which the rest of the suite shares.
	 */
	for (round = 0; !atomic_load(&k->stop) && k->copies < 16; round++) {
		bcp_msg_init(&m, BCP_OP_COPY_FILE_RANGE, 0);
		m.u.copy_req.fh_in = fin;
		m.u.copy_req.fh_out = fout;
		m.u.copy_req.length = 64 * A_MIB;
		ret = rs_call(&s, &m, &rep);
		if (ret < 0 && k->errs++ == 0)
			snprintf(k->why, sizeof(k->why), "COPY_FILE_RANGE: %s",
				 a_err(ret));
		k->copies++;
		if (round % 2 || k->fsyncs >= 3 || fd < 0)
			continue;
		/* dirty 64 MiB behind the agent's back, then FSYNC it */
		for (off = 0; off < 64 * A_MIB; off += sizeof(b))
			if (pwrite(fd, b, sizeof(b), (off_t)off) < 0)
				break;
		bcp_msg_init(&m, BCP_OP_FSYNC, 0);
		m.u.fsync_req.handle = edirty.handle;
		m.u.fsync_req.fh = fdirty;
		ret = rs_call(&s, &m, &rep);
		if (ret < 0 && k->errs++ == 0)
			snprintf(k->why, sizeof(k->why), "FSYNC: %s",
				 a_err(ret));
		k->fsyncs++;
	}
	if (fd >= 0)
		close(fd);
out_close:
	rs_close(&s);
out:
	atomic_store(&k->done, 1);
	return NULL;
}

static void case_blocking(void)
{
	static const char *const opts[] = { "--workers", "1", NULL };
	struct blocker k;
	struct rs s;
	uint64_t t0, t, max = 0, sum = 0;
	long n = 0, late = 0;
	int ret;

	agent_init("attack_blocking");
	a_file("src", 64 * A_MIB, 5);
	agent_go(opts, 0);
	rs_open(&s, 0);
	memset(&k, 0, sizeof(k));
	if (pthread_create(&k.th, NULL, blocker_main, &k))
		t_hard("pthread_create");
	t0 = a_ms();
	while (a_ms() - t0 < 5000 && !atomic_load(&k.done)) {
		uint64_t p0 = a_ms();

		ret = rs_ping(&s, 10000);
		t = a_ms() - p0;
		if (ret < 0) {
			a_fail(__LINE__, "PING: %s", a_err(ret));
			break;
		}
		n++;
		sum += t;
		if (t > max)
			max = t;
		if (t > 1000)
			late++;
		usleep(5000);
	}
	atomic_store(&k.stop, 1);
	t0 = a_ms();
	while (!atomic_load(&k.done) && a_ms() - t0 < 20000)
		usleep(10000);
	if (!atomic_load(&k.done))
		t_fail("the COPY_FILE_RANGE/FSYNC session is stuck");
	pthread_join(k.th, NULL);
	a_note("%ld PINGs beside %d COPY_FILE_RANGEs of 64 MiB and %d "
	       "FSYNCs of 64 MiB dirty: max latency %llu ms, mean %llu ms",
	       n, k.copies, k.fsyncs, (unsigned long long)max,
	       (unsigned long long)(n ? sum / (uint64_t)n : 0));
	EXPECT(max <= 1000, "a PING waited %llu ms (%ld over 1 s) behind "
	       "COPY_FILE_RANGE/FSYNC on the same worker",
	       (unsigned long long)max, late);
	EXPECT(k.copies > 0 && !k.errs, "the blocking session: %d errors, "
	       "first: %s", k.errs, k.why);
	rs_close(&s);
	case_end(BCP_XFER_SHM);
}

/* ---- 6: GETXATTR replies and a PING in one write -------------------- */

static void case_xattr_burst(void)
{
	static uint8_t val[65536], out[8 * 1024];
	const char *shm = getenv("A_SHM_DIR");
	struct bcp_msg m, rep;
	struct bcp_entry e;
	struct rs s;
	size_t len, olen = 0;
	char p[700];
	int i, n, got_ping = 0, got_x = 0, ret;
	uint64_t t0;

	if (shm)
		setenv("TMPDIR", shm, 1);	/* tmpfs takes 64 KiB values */
	agent_init("attack_xattr_burst");
	a_file("x", 10, 1);
	a_path(p, sizeof(p), "x");
	memset(val, 'v', sizeof(val));
	for (len = sizeof(val); len >= 1024; len /= 2)
		if (setxattr(p, "user.big", val, len, 0) == 0)
			break;
	if (len < 1024)
		t_hard("no user xattr of 1 KiB here: %s", strerror(errno));
	a_note("xattr value of %zu bytes", len);
	agent_go(NULL, 0);
	rs_open(&s, 0);
	ret = rs_lookup(&s, s.root, "x", &e);
	if (ret)
		t_fail("LOOKUP x: %s", a_err(ret));
	for (i = 0; i < 6; i++) {
		if (i < 5) {
			bcp_msg_init(&m, BCP_OP_GETXATTR, 1000 + i);
			m.u.getxattr_req.handle = e.handle;
			m.u.getxattr_req.size = 65536;
			m.u.getxattr_req.name_len = 8;
			m.name = "user.big";
		} else {
			bcp_msg_init(&m, BCP_OP_PING, 2000);
		}
		n = bcp_encode(out + olen, sizeof(out) - olen, &m);
		if (n < 0)
			t_hard("encode: %s", strerror(-n));
		olen += (size_t)n;
	}
	if (send(s.fd, out, olen, MSG_NOSIGNAL) != (ssize_t)olen)
		t_fail("send: %s", strerror(errno));
	t0 = a_ms();
	while ((!got_ping || got_x < 5) && a_ms() - t0 < 5000) {
		ret = a_recv(s.fd, &rep, 5000 - (int)(a_ms() - t0));
		if (!rep.hdr.req_id) {
			a_note("the session ended: %s", a_err(ret));
			break;
		}
		if (rep.hdr.req_id == 2000)
			got_ping = 1;
		else if (rep.hdr.req_id >= 1000 && rep.hdr.req_id < 1005) {
			got_x++;
			EXPECT(ret == 0 && rep.u.xattr_rep.size == len,
			       "GETXATTR: %s, size %u of %zu", a_err(ret),
			       ret == 0 ? rep.u.xattr_rep.size : 0, len);
		}
	}
	EXPECT(got_ping, "the PING behind five 64 KiB GETXATTRs in one "
	       "write was not answered within 5 s");
	EXPECT(got_x == 5, "%d of 5 GETXATTRs answered", got_x);
	EXPECT(rs_ping(&s, 2000) == 0, "no PING on the session afterwards");
	rs_close(&s);
	case_end(BCP_XFER_SHM);
}

/* ---- 7: connections that never finish the handshake ----------------- */

/*
 * The flood runs in a process of its own, as an attacker beside a host
 * would: the agent makes room by dropping the oldest connection of the
 * source (here, the peer's pid) holding the most, and a flood from the
 * host's own process would be the host's problem.  Shared with the
 * child: stop (set by the test), reopened (counted by the flood).
 */
struct flood {
	pid_t pid;
	atomic_int stop;
	long reopened;
	int fds[200];
};

static int flood_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);

	if (fd < 0)
		return -1;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static void flood_main(struct flood *f)
{
	struct pollfd pf[200];
	uint8_t hello[128], junk[4096], nc[BCP_NONCE_LEN];
	struct bcp_msg m;
	char path[400];
	int i, hl;

	snprintf(path, sizeof(path), "%s/sock", A.dir);
	bcp_random(nc, sizeof(nc));
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = BCP_VERSION_MIN;
	m.u.hello_req.ver_max = BCP_VERSION_MAX;
	memcpy(m.u.hello_req.nonce, nc, sizeof(nc));
	hl = bcp_encode(hello, sizeof(hello), &m);
	for (i = 0; i < 200; i++)
		f->fds[i] = -1;
	while (!atomic_load(&f->stop)) {
		for (i = 0; i < 200; i++) {
			if (f->fds[i] >= 0)
				continue;
			f->fds[i] = flood_connect(path);
			if (f->fds[i] < 0)
				continue;
			if (send(f->fds[i], hello, (size_t)hl,
				 MSG_NOSIGNAL) != hl) {
				close(f->fds[i]);
				f->fds[i] = -1;
				continue;
			}
			f->reopened++;
		}
		for (i = 0; i < 200; i++) {
			pf[i].fd = f->fds[i];
			pf[i].events = POLLIN;
			pf[i].revents = 0;
		}
		if (poll(pf, 200, 50) <= 0)
			continue;
		for (i = 0; i < 200; i++) {
			ssize_t n;

			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = recv(f->fds[i], junk, sizeof(junk), MSG_DONTWAIT);
			if (n > 0 || (n < 0 && errno == EAGAIN))
				continue;
			close(f->fds[i]);
			f->fds[i] = -1;
		}
	}
	for (i = 0; i < 200; i++)
		if (f->fds[i] >= 0)
			close(f->fds[i]);
}

/* A new session within a few tries; the tries it took, or -1. */
static int try_session(int tries, int timeout_ms)
{
	struct rs s;
	int i, ret = 0;

	for (i = 1; i <= tries; i++) {
		ret = rs_connect(&s, 0, timeout_ms);
		if (!ret) {
			ret = rs_ping(&s, timeout_ms);
			rs_close(&s);
			if (!ret)
				return i;
		}
		usleep(300000);
	}
	a_note("the last try ended with %s", a_err(ret));
	return -1;
}

static void case_handshake_flood(void)
{
	static int silent[300];
	struct rlimit rl;
	struct flood *fp;
	long reopened;
	char path[400];
	int tries, i, nsilent = 0;
	uint64_t t0;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	agent_init("attack_handshake_flood");
	agent_go(NULL, 0);
	fp = mmap(NULL, sizeof(*fp), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (fp == MAP_FAILED)
		t_hard("mmap");
	memset(fp, 0, sizeof(*fp));
	fp->pid = fork();
	if (fp->pid < 0)
		t_hard("fork");
	if (fp->pid == 0) {
		flood_main(fp);
		_exit(0);
	}
	t0 = a_ms();
	usleep(500000);
	tries = try_session(5, 3000);
	EXPECT(tries > 0, "no new session in 5 tries beside 200 connections "
	       "that never AUTH");
	if (tries > 0)
		a_note("a new session after %d tries beside the HELLO flood",
		       tries);
	while (a_ms() - t0 < 5000)
		usleep(50000);
	atomic_store(&fp->stop, 1);
	while (waitpid(fp->pid, NULL, 0) < 0 && errno == EINTR)
		;
	reopened = fp->reopened;
	munmap(fp, sizeof(*fp));
	a_note("%ld HELLO-only connections opened in 5 s", reopened);
	if (!agent_alive("the HELLO flood"))
		case_end(BCP_XFER_SHM);
	EXPECT(reopened > 200, "the agent dropped no connection that "
	       "never sent AUTH within 5 s (%ld opened)", reopened);

	snprintf(path, sizeof(path), "%s/sock", A.dir);
	for (i = 0; i < 300; i++) {
		silent[i] = flood_connect(path);
		nsilent += silent[i] >= 0;
	}
	a_note("%d silent connections open", nsilent);
	tries = try_session(5, 3000);
	EXPECT(tries > 0, "no new session in 5 tries beside %d silent "
	       "connections", nsilent);
	for (i = 0; i < 300; i++)
		if (silent[i] >= 0)
			close(silent[i]);
	case_end(BCP_XFER_SHM);
}

/* ---- 8: shm regions ------------------------------------------------- */

struct shrinker {
	pthread_t th;
	int fd;
	uint64_t len;
	atomic_int stop;
};

static void *shrinker_main(void *arg)
{
	struct shrinker *k = arg;

	while (!atomic_load(&k->stop)) {
		if (ftruncate(k->fd, 0) < 0)
			break;		/* sealed */
		if (ftruncate(k->fd, (off_t)k->len) < 0)
			break;
	}
	return NULL;
}

static void case_shm(void)
{
	struct bcp_entry e;
	struct rs s;
	uint64_t fh, t0;
	long regs = 0, shrunk = 0, rounds = 0;
	int fd, ret, i, accepted;
	uint32_t id = 10;
	struct stat st;

	agent_init("attack_shm");
	a_file("src", 256 * 1024, 8);
	agent_go(NULL, 0);
	rs_open(&s, 0);
	ret = rs_lookup(&s, s.root, "src", &e);
	if (!ret)
		ret = rs_open_fh(&s, e.handle, O_RDWR, &fh);
	if (ret)
		t_fail("open src: %s", a_err(ret));

	/* a memfd that cannot be sealed, and one not sealed yet */
	fd = a_memfd(A_MIB, 0, 0);
	ret = rs_register(&s, 1, BCP_REGION_SHM, fd, A_MIB);
	close(fd);
	EXPECT(ret < 0, "a memfd without MFD_ALLOW_SEALING was accepted");
	if (!ret)
		rs_unregister(&s, 1);
	/* sealable, not sealed: the agent seals it before it sizes it */
	fd = a_memfd(A_MIB, 1, 0);
	ret = rs_register(&s, 2, BCP_REGION_SHM, fd, A_MIB);
	EXPECT(ret < 0 || (fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK),
	       "a sealable memfd was accepted without F_SEAL_SHRINK");
	close(fd);
	if (!ret)
		rs_unregister(&s, 2);
	fd = a_memfd(A_MIB, 1, 1);
	ret = rs_register(&s, 3, BCP_REGION_SHM, fd, A_MIB);
	close(fd);
	EXPECT(ret == 0, "a memfd sealed with F_SEAL_SHRINK: %s",
	       a_err(ret));
	if (!ret) {
		ret = rs_batch1(&s, BCP_OP_BATCH_PULL, fh, 0, 4096, 3, 0);
		EXPECT(ret == 4096, "BATCH_PULL into a sealed region: %s",
		       a_err(ret));
		rs_unregister(&s, 3);
	}

	/* shrink and regrow the memfd while it is being registered */
	t0 = a_ms();
	while (a_ms() - t0 < 3000 && rounds < 300) {
		struct shrinker k = { .len = 256 * 1024 };

		rounds++;
		k.fd = a_memfd(k.len, 1, 0);
		if (pthread_create(&k.th, NULL, shrinker_main, &k))
			t_hard("pthread_create");
		usleep(100);
		ret = rs_register(&s, id, BCP_REGION_SHM, k.fd, k.len);
		atomic_store(&k.stop, 1);
		pthread_join(k.th, NULL);
		if (ret == 0) {
			regs++;
			if (fstat(k.fd, &st) == 0 &&
			    (uint64_t)st.st_size < k.len)
				shrunk++;
			ret = rs_batch1(&s, BCP_OP_BATCH_PULL, fh, 0,
					(uint32_t)k.len, id, 0);
			ret = rs_batch1(&s, BCP_OP_BATCH_PUSH, fh, 0,
					(uint32_t)k.len, id, 0);
			rs_unregister(&s, id);
		} else if (ret == -ECONNRESET || ret == -EPIPE) {
			close(k.fd);
			break;
		}
		close(k.fd);
		id++;
	}
	a_note("%ld of %ld racing registrations accepted, %ld of them of a "
	       "shrunken memfd", regs, rounds, shrunk);
	if (!agent_alive("memfds shrunk while registered"))
		case_end(BCP_XFER_TCP);
	rs_close(&s);

	/* 64 sparse regions of 1 TiB, then 1 GiB ones up to the limit */
	rs_open(&s, 0);
	accepted = 0;
	for (i = 0; i < 64; i++) {
		fd = a_memfd(1ull << 40, 1, 1);
		ret = rs_register(&s, 100 + (uint32_t)i, BCP_REGION_SHM, fd,
				  1ull << 40);
		close(fd);
		if (ret == 0)
			accepted++;
		else
			EXPECT(ret == -ENOSPC || ret == -E2BIG,
			       "a 1 TiB region refused with %s, expected "
			       "-ENOSPC or -E2BIG", a_err(ret));
		if (ret == -ECONNRESET || ret == -EPIPE)
			break;
	}
	EXPECT(accepted == 0, "%d regions of 1 TiB accepted over the 16 GiB "
	       "default --max-region-bytes", accepted);
	for (i = 0; i < 64; i++)
		rs_unregister(&s, 100 + (uint32_t)i);
	accepted = 0;
	for (i = 0; i < 17; i++) {
		fd = a_memfd(1ull << 30, 1, 1);
		ret = rs_register(&s, 200 + (uint32_t)i, BCP_REGION_SHM, fd,
				  1ull << 30);
		close(fd);
		if (ret == 0)
			accepted++;
		else if (i < 16)
			a_fail(__LINE__, "1 GiB region %d (of 16 GiB) "
			       "refused: %s", i + 1, a_err(ret));
		else
			EXPECT(ret == -ENOSPC || ret == -E2BIG,
			       "the region past 16 GiB refused with %s",
			       a_err(ret));
	}
	EXPECT(accepted == 16, "%d regions of 1 GiB accepted, expected 16",
	       accepted);
	rs_close(&s);
	case_end(BCP_XFER_TCP);
}

/* ---- 9: descriptor exhaustion --------------------------------------- */

#define FDX_FILES	2500

static void case_fd_exhaust(void)
{
	struct bcp_entry e;
	struct rs s, s2;
	char name[32];
	int i, ret = 0, refused = 0, tries;
	uint64_t fh;
	long cpu0, cpu1;

	agent_init("attack_fd_exhaust");
	for (i = 0; i < FDX_FILES; i++) {
		snprintf(name, sizeof(name), "n%04d", i);
		a_file(name, 1, 0);
	}
	agent_go(NULL, 1024);
	rs_open(&s, 0);
	for (i = 0; i < FDX_FILES && !refused; i++) {
		snprintf(name, sizeof(name), "n%04d", i);
		ret = rs_lookup(&s, s.root, name, &e);
		if (!ret)
			ret = rs_open_fh(&s, e.handle, O_RDONLY, &fh);
		if (ret == -ENFILE || ret == -EMFILE)
			refused = 1;
		else if (ret)
			break;
	}
	if (refused)
		a_note("refused with %s after %d handles", a_err(ret), i);
	else if (ret)
		a_fail(__LINE__, "handle %d refused with %s, expected -ENFILE "
		       "or -EMFILE", i, a_err(ret));
	else
		a_note("no refusal within %d handles and opens", i);
	if (!agent_alive("taking every descriptor"))
		case_end(BCP_XFER_SHM);
	/* the agent still takes a session and does not spin */
	tries = try_session(2, 2000);
	EXPECT(tries > 0, "no new session once one session took every "
	       "descriptor");
	ret = rs_connect(&s2, 1, 2000);
	EXPECT(ret == 0, "no new tcp session: %s", a_err(ret));
	if (!ret) {
		ret = rs_lookup(&s2, s2.root, "n0000", &e);
		EXPECT(ret == 0, "LOOKUP in a new session: %s", a_err(ret));
		rs_close(&s2);
	}
	cpu0 = t_proc_cpu_ms(A.pid);
	sleep(3);
	cpu1 = t_proc_cpu_ms(A.pid);
	EXPECT(cpu0 >= 0 && cpu1 - cpu0 < 1000, "the agent used %ld ms of "
	       "CPU in 3 s with its descriptors spent", cpu1 - cpu0);
	a_note("agent CPU in 3 s with its descriptors spent: %ld ms",
	       cpu1 - cpu0);
	rs_close(&s);
	case_end(BCP_XFER_SHM);
}

/* ---- 10: O_APPEND ---------------------------------------------------- */

static void case_append(void)
{
	struct bcp_client *c;
	struct bcp_entry e;
	uint8_t b[128], want[100];
	char p[700];
	uint64_t fh;
	int fd, ret;
	ssize_t n;

	agent_init("attack_append");
	a_path(p, sizeof(p), "app");
	memset(want, 'A', sizeof(want));
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || write(fd, want, 100) != 100)
		t_hard("%s: %s", p, strerror(errno));
	close(fd);
	agent_go(NULL, 0);
	c = t_client(&A, 0, BCP_XFER_SHM, 4 * A_MIB);
	T_EQ(t_lookup(c, bcp_client_root(c), "app", &e), 0);
	ret = t_open(c, e.handle, O_WRONLY | O_APPEND, &fh);
	EXPECT(ret == 0, "OPEN O_APPEND: %s", a_err(ret));
	if (!ret) {
		memset(b, 'B', 10);
		ret = t_io(c, BCP_OP_BATCH_PUSH, fh, 0, b, 10);
		EXPECT(ret == 10, "BATCH_PUSH: %s", a_err(ret));
		t_release(c, e.handle, fh);
	}
	bcp_client_destroy(c);
	fd = open(p, O_RDONLY);
	n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
	if (fd >= 0)
		close(fd);
	memset(want, 'B', 10);
	EXPECT(n == 100 && !memcmp(b, want, 100), "after a push of 10 bytes "
	       "at offset 0 through an O_APPEND fh the file has %zd bytes, "
	       "starting \"%.12s\"", n, n > 0 ? (char *)b : "");
	case_end(BCP_XFER_SHM);
}

/* ---- 11: PULL status against a file that changes -------------------- */

#define PS_MAX		16384
#define PS_MIN		6144

static atomic_long ps_state;	/* the writer's state number */

static uint32_t ps_size(long k)
{
	return k == 0 ? PS_MAX :
	       PS_MIN + (uint32_t)((k * 1237) % (PS_MAX - PS_MIN + 1));
}

static uint8_t ps_pat(long k, uint32_t o)
{
	uint8_t v = (uint8_t)(k * 61 + o * 7 + (o >> 9) + 1);

	/* never 0xee (not written) nor 0 (extended, not written yet) */
	return v == 0xee ? 0xef : v ? v : 1;
}

struct ps_writer {
	pthread_t th;
	atomic_int stop;
	long errs;
	char why[300];
};

static void *ps_writer_main(void *arg)
{
	static uint8_t b[PS_MAX];
	struct ps_writer *w = arg;
	struct bcp_client *c;
	struct bcp_client_opts o;
	struct bcp_msg m, rep;
	struct bcp_entry e;
	static uint8_t rbuf[BCP_FRAME_MAX];
	char err[256];
	uint64_t fh;
	long k;
	uint32_t i, sz;
	int ret;

	bcp_client_opts_init(&o);
	o.addr = A.unix_addr;
	o.transport = BCP_XFER_SHM;
	o.pool_size = A_MIB;
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	if (ret < 0) {
		snprintf(w->why, sizeof(w->why), "connect: %s", err);
		w->errs++;
		return NULL;
	}
	ret = t_lookup(c, bcp_client_root(c), "var", &e);
	if (!ret)
		ret = t_open(c, e.handle, O_RDWR, &fh);
	for (k = 1; !ret && !atomic_load(&w->stop); k++) {
		sz = ps_size(k);
		for (i = 0; i < sz; i++)
			b[i] = ps_pat(k, i);
		/*
		 * The state number first: a reader may see it early.  The
		 * size changes at once (a truncate), then the bytes within
		 * it, so the file only ever has the sizes of its states (a
		 * push through 4 KiB slots that extended the file would
		 * grow it a slot at a time).
		 */
		atomic_store(&ps_state, k);
		bcp_msg_init(&m, BCP_OP_SETATTR, 0);
		m.u.setattr_req.handle = e.handle;
		m.u.setattr_req.fh = fh;
		m.u.setattr_req.valid = BCP_SETATTR_SIZE;
		m.u.setattr_req.size = sz;
		ret = bcp_client_call(c, &m, &rep, rbuf, sizeof(rbuf));
		if (ret < 0)
			break;
		ret = t_io(c, BCP_OP_BATCH_PUSH, fh, 0, b, sz);
		if (ret != (int)sz)
			break;
		ret = 0;
	}
	if (ret < 0 || (ret > 0 && !atomic_load(&w->stop))) {
		snprintf(w->why, sizeof(w->why), "writer: %s", a_err(ret));
		w->errs++;
	}
	bcp_client_destroy(c);
	return NULL;
}

static void case_pull_status(void)
{
	static const char *const opts[] = {
		"--slot-size", "4096", "--inline-max", "0", NULL };
	struct ps_writer w;
	struct bcp_entry e;
	struct rs s;
	uint8_t *map;
	uint64_t fh, t0;
	long pulls = 0, bad = 0, k0, k1, k;
	int mfd, ret, st;
	uint32_t o;

	agent_init("attack_pull_status");
	{
		static uint8_t b[PS_MAX];
		char p[700];
		int fd;

		for (o = 0; o < PS_MAX; o++)
			b[o] = ps_pat(0, o);
		a_path(p, sizeof(p), "var");
		fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		if (fd < 0 || write(fd, b, PS_MAX) != PS_MAX)
			t_hard("%s: %s", p, strerror(errno));
		close(fd);
	}
	agent_go(opts, 0);
	rs_open(&s, 0);
	mfd = a_memfd(64 * 1024, 1, 1);
	map = mmap(NULL, 64 * 1024, PROT_READ | PROT_WRITE, MAP_SHARED, mfd,
		   0);
	if (map == MAP_FAILED)
		t_hard("mmap: %s", strerror(errno));
	ret = rs_register(&s, 1, BCP_REGION_SHM, mfd, 64 * 1024);
	if (ret)
		t_fail("REGISTER_REGION: %s", a_err(ret));
	ret = rs_lookup(&s, s.root, "var", &e);
	if (!ret)
		ret = rs_open_fh(&s, e.handle, O_RDONLY, &fh);
	if (ret)
		t_fail("open var: %s", a_err(ret));
	memset(&w, 0, sizeof(w));
	if (pthread_create(&w.th, NULL, ps_writer_main, &w))
		t_hard("pthread_create");
	t0 = a_ms();
	while (pulls < 2000 && a_ms() - t0 < 8000) {
		memset(map, 0xee, PS_MAX);
		k0 = atomic_load(&ps_state);
		st = rs_batch1(&s, BCP_OP_BATCH_PULL, fh, 0, PS_MAX, 1, 0);
		k1 = atomic_load(&ps_state);
		pulls++;
		if (st < 0) {
			a_fail(__LINE__, "BATCH_PULL: %s", a_err(st));
			break;
		}
		for (o = 0; o < (uint32_t)st && o < PS_MAX; o++) {
			if (map[o] == 0xee)
				break;
			if (map[o] == 0)	/* extended, not written yet */
				continue;
			for (k = k0 > 0 ? k0 - 1 : 0; k <= k1; k++)
				if (map[o] == ps_pat(k, o))
					break;
			if (k > k1)
				break;
		}
		if (o < (uint32_t)st) {
			if (bad++ < 3)
				a_fail(__LINE__, "a pull returned status %d "
				       "but byte %u is %#x (%s), states "
				       "%ld..%ld",
				       st, o, map[o], map[o] == 0xee ?
				       "never written" : "of no state", k0, k1);
		}
		/*
		 * The status need not be a size the file had: a read racing
		 * a truncate and an extension sees each chunk at its own
		 * moment, as read(2) on a local file system does.  What it
		 * covers must be real bytes, which the loop above checks.
		 */
	}
	atomic_store(&w.stop, 1);
	pthread_join(w.th, NULL);
	a_note("%ld pulls of 16 KiB against %ld file states, %ld wrong",
	       pulls, atomic_load(&ps_state), bad);
	EXPECT(bad == 0, "%ld of %ld pulls wrong", bad, pulls);
	EXPECT(!w.errs, "%s", w.why);
	munmap(map, 64 * 1024);
	close(mfd);
	rs_close(&s);
	case_end(BCP_XFER_SHM);
}

/* ---- 12: READDIR errors --------------------------------------------- */

static void case_readdir_error(void)
{
	/*
	 * A listing that fails midway needs a file system whose getdents
	 * fails after the first page (a corrupt image, a FUSE mount that
	 * returns EIO): nothing this test can set up honestly on any
	 * machine, so it says so instead of pretending.
	 */
	fprintf(stderr, "SKIP: no honest way to make getdents fail midway "
		"without a corrupt file system or a FUSE mount\n");
	exit(T_SKIP);
}

/* ---- the runner ----------------------------------------------------- */

struct acase {
	const char *name;
	void (*fn)(void);
	int budget_s;
};

static const struct acase cases[] = {
	{ "special", case_special, 20 },
	{ "fd_table", case_fd_table, 20 },
	{ "identity", case_identity, 20 },
	{ "data_conn", case_data_conn, 25 },
	{ "blocking", case_blocking, 15 },
	{ "xattr_burst", case_xattr_burst, 12 },
	{ "handshake_flood", case_handshake_flood, 20 },
	{ "shm", case_shm, 20 },
	{ "fd_exhaust", case_fd_exhaust, 25 },
	{ "append", case_append, 10 },
	{ "pull_status", case_pull_status, 15 },
	{ "readdir_error", case_readdir_error, 3 },
};
#define NCASES	(sizeof(cases) / sizeof(cases[0]))

static void rm_rf(const char *dir)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

/* Run one case in a child; print its TAP line; 0 ok, 1 not ok, 77 skip */
static int run_case(unsigned int num, const struct acase *c, int budget_s)
{
	const char *tmp = getenv("TMPDIR");
	char dir[400], shm[400], log[450], line[2048], reason[600] = "";
	char first[600] = "", more[64] = "";
	int st = 0, i, fd, have_shm, timed_out = 0, nfail = 0;
	pid_t pid;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/agent_attack.%s.XXXXXX",
		 tmp ? tmp : "/tmp", c->name);
	if (!mkdtemp(dir))
		t_hard("mkdtemp: %s", strerror(errno));
	chmod(dir, 0755);
	snprintf(shm, sizeof(shm), "/dev/shm/agent_attack.%s.XXXXXX",
		 c->name);
	have_shm = mkdtemp(shm) != NULL;
	if (have_shm)
		chmod(shm, 0755);
	snprintf(log, sizeof(log), "%s/case.log", dir);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		t_hard("fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			_exit(T_HARD);
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
		setvbuf(stderr, NULL, _IONBF, 0);
		setenv("TMPDIR", dir, 1);
		if (have_shm)
			setenv("A_SHM_DIR", shm, 1);
		c->fn();
		exit(0);
	}
	setpgid(pid, pid);
	for (i = 0; i < budget_s * 20; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(50000);
	}
	if (i == budget_s * 20) {
		timed_out = 1;
		kill(-pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	/* whatever the case left running (its agent, a helper) goes */
	kill(-pid, SIGKILL);
	f = fopen(log, "r");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		printf("# %s\n", line);
		if (strncmp(line, "FAIL: ", 6) &&
		    strncmp(line, "HARD ERROR: ", 12) &&
		    strncmp(line, "SKIP: ", 6))
			continue;
		nfail++;
		if (!first[0])
			snprintf(first, sizeof(first), "%s",
				 strchr(line, ':') + 2);
		/* a missing option says less than what went wrong */
		if (!reason[0] && !strstr(line, "does not accept"))
			snprintf(reason, sizeof(reason), "%s",
				 strchr(line, ':') + 2);
	}
	if (f)
		fclose(f);
	if (!reason[0])
		snprintf(reason, sizeof(reason), "%s", first);
	if (nfail > 1)
		snprintf(more, sizeof(more), " (and %d more)", nfail - 1);
	rm_rf(dir);
	if (have_shm)
		rm_rf(shm);
	if (timed_out) {
		printf("not ok %u - %s: timed out after %d s%s%s\n", num,
		       c->name, budget_s, reason[0] ? "; " : "", reason);
		return 1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		printf("ok %u - %s\n", num, c->name);
		return 0;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == T_SKIP) {
		printf("ok %u - %s # SKIP %s\n", num, c->name, reason);
		return T_SKIP;
	}
	if (WIFSIGNALED(st))
		snprintf(reason, sizeof(reason), "killed by signal %d",
			 WTERMSIG(st));
	printf("not ok %u - %s: %s%s\n", num, c->name,
	       reason[0] ? reason : "failed without a reason", more);
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t t0 = a_ms();
	unsigned int i, n = 0, failed = 0, skipped = 0, run = 0;
	int j, want, ret, left;

	if (geteuid() != 0) {
		printf("1..0 # SKIP the attacks need root (devices, "
		       "identities, other users)\n");
		return T_SKIP;
	}
	for (j = 1; j < argc; j++) {
		for (i = 0; i < NCASES; i++)
			if (!strcmp(argv[j], cases[i].name))
				break;
		if (i == NCASES) {
			fprintf(stderr, "unknown case %s; cases:", argv[j]);
			for (i = 0; i < NCASES; i++)
				fprintf(stderr, " %s", cases[i].name);
			fputc('\n', stderr);
			return T_HARD;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	printf("1..%u\n", argc > 1 ? (unsigned int)argc - 1 :
	       (unsigned int)NCASES);
	for (i = 0; i < NCASES; i++) {
		want = argc == 1;
		for (j = 1; j < argc; j++)
			want |= !strcmp(argv[j], cases[i].name);
		if (!want)
			continue;
		n++;
		left = A_TOTAL_S - (int)((a_ms() - t0) / 1000);
		if (left < 3) {
			printf("not ok %u - %s: no time left\n", n,
			       cases[i].name);
			failed++;
			continue;
		}
		ret = run_case(n, &cases[i], cases[i].budget_s < left ?
			       cases[i].budget_s : left);
		fflush(stdout);
		run++;
		if (ret == T_SKIP)
			skipped++;
		else if (ret)
			failed++;
	}
	printf("# %u of %u failed, %u skipped, %llu s\n", failed, n, skipped,
	       (unsigned long long)((a_ms() - t0) / 1000));
	if (failed)
		return 1;
	return run && skipped == run ? T_SKIP : 0;
}
