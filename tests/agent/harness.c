/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * harness.c - see harness.h.  The agent runs with --ready-fd so a test
 * starts only once it listens; its stderr goes to a log file that
 * t_agent_stop() scans for "error" and sanitizer reports.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "bcp_auth.h"
#include "bcp_frame.h"
#include "harness.h"

static struct t_agent *t_current;

static void t_vmsg(const char *kind, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void t_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t_vmsg("FAIL", fmt, ap);
	va_end(ap);
	if (t_current)
		t_agent_cleanup(t_current);
	exit(1);
}

void t_hard(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t_vmsg("HARD ERROR", fmt, ap);
	va_end(ap);
	if (t_current)
		t_agent_cleanup(t_current);
	exit(T_HARD);
}

static int t_free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int fd, port;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		t_hard("cannot find a free port: %s", strerror(errno));
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

void t_agent_init(struct t_agent *a, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	memset(a, 0, sizeof(*a));
	snprintf(a->dir, sizeof(a->dir), "%s/%s.XXXXXX", tmp ? tmp : "/tmp",
		 name);
	if (!mkdtemp(a->dir))
		t_hard("mkdtemp: %s", strerror(errno));
	snprintf(a->root, sizeof(a->root), "%s/root", a->dir);
	if (mkdir(a->root, 0755) < 0)
		t_hard("mkdir: %s", strerror(errno));
	snprintf(a->unix_addr, sizeof(a->unix_addr), "unix:%s/sock", a->dir);
	snprintf(a->log, sizeof(a->log), "%s/agent.log", a->dir);
	snprintf(a->secret_path, sizeof(a->secret_path), "%s/secret",
		 a->dir);
	a->pid = -1;
	t_current = a;
}

void t_agent_start(struct t_agent *a)
{
	const char *extra[9] = { NULL };
	unsigned int i;

	for (i = 0; i < 8 && a->extra[i]; i++)
		extra[i] = a->extra[i];
	if (t_agent_start_args(a, extra, 0) < 0)
		t_hard("agent did not become ready (see %s)", a->log);
}

int t_log_has(const struct t_agent *a, const char *s)
{
	char line[2048];
	int found = 0;
	FILE *f;

	f = fopen(a->log, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, s))
			found = 1;
	fclose(f);
	return found;
}

int t_agent_stop(struct t_agent *a)
{
	char line[2048];
	int st, i, bad = 0;
	FILE *f;

	if (a->pid <= 0)
		return -1;
	kill(a->pid, SIGTERM);
	for (i = 0; i < 300; i++) {
		if (waitpid(a->pid, &st, WNOHANG) == a->pid)
			break;
		usleep(50000);
	}
	if (i == 300) {
		kill(a->pid, SIGKILL);
		waitpid(a->pid, &st, 0);
		a->pid = -1;
		t_fail("agent did not exit within 15 s of SIGTERM");
	}
	a->pid = -1;
	f = fopen(a->log, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (strstr(line, "error") || strstr(line, "Sanitizer") ||
		    strstr(line, "runtime error")) {
			fprintf(stderr, "unexpected agent log line: %s", line);
			bad = 1;
		}
	}
	if (f)
		fclose(f);
	if (bad)
		t_fail("the agent logged a fault (see above)");
	if (!WIFEXITED(st))
		t_fail("agent died of signal %d", WTERMSIG(st));
	return WEXITSTATUS(st);
}

void t_agent_cleanup(struct t_agent *a)
{
	char cmd[600];

	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		waitpid(a->pid, NULL, 0);
		a->pid = -1;
	}
	if (getenv("T_KEEP")) {
		fprintf(stderr, "kept %s\n", a->dir);
		return;
	}
	if (a->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", a->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", a->dir);
		a->dir[0] = '\0';
	}
}

struct bcp_client *t_client(struct t_agent *a, int tcp,
			    enum bcp_transport tr, size_t pool)
{
	return t_client_features(a, tcp, tr, pool, 0);
}

struct bcp_client *t_client_features(const struct t_agent *a, int tcp,
				     enum bcp_transport tr, size_t pool,
				     uint64_t reply_features)
{
	struct bcp_client_opts o;
	struct bcp_client *c;
	char err[256];
	int ret;

	bcp_client_opts_init(&o);
	o.addr = tcp ? a->tcp_addr : a->unix_addr;
	o.transport = tr;
	o.pool_size = pool;
	o.timeout_ms = 10000;
	o.reply_features = reply_features;
	if (a->secret) {
		o.secret = a->secret;
		o.secret_len = strlen(a->secret);
	}
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	if (ret < 0)
		t_fail("client connect to %s: %s (%s)", o.addr,
		       strerror(-ret), err);
	return c;
}

int t_raw_connect(struct t_agent *a, int tcp)
{
	struct bcp_addr ad;
	char err[256];
	int fd;

	if (bcp_addr_parse(tcp ? a->tcp_addr : a->unix_addr, &ad, err,
			   sizeof(err)) < 0)
		t_hard("address: %s", err);
	fd = bcp_addr_connect(&ad, 5000);
	if (fd < 0)
		t_fail("connect: %s", strerror(-fd));
	return fd;
}

int t_raw_call(int fd, struct bcp_msg *m, struct bcp_msg *rep, void *buf,
	       size_t cap)
{
	enum bcp_err why;
	int n;

	n = bcp_encode(buf, cap, m);
	if (n < 0)
		t_hard("encode %s: %s", bcp_op_name(m->hdr.opcode),
		       strerror(-n));
	if (bcp_frame_send(fd, buf, (size_t)n, -1) < 0)
		return -EPIPE;
	do {	/* a NOTIFY may come before the reply: not this call's */
		n = bcp_frame_recv(fd, buf, cap, NULL, 5000, &why);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : n;
		if (bcp_decode(buf, (size_t)n, rep, &why) < 0)
			t_fail("agent sent an undecodable reply: %s",
			       bcp_err_str(why));
	} while (rep->hdr.opcode == BCP_OP_NOTIFY &&
		 !(rep->hdr.flags & BCP_HF_REPLY));
	return rep->hdr.status;
}

int t_raw_handshake(int fd, const char *secret, uint64_t *root,
		    struct bcp_hello_rep *hello)
{
	static const uint8_t none[BCP_CLIENT_ID_LEN];

	return t_raw_handshake_client(fd, secret, none, root, hello);
}

int t_raw_closed(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[4096];

	for (;;) {
		if (poll(&p, 1, timeout_ms) != 1)
			return 0;
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN))
			return 1;
	}
}

static int t_call(struct bcp_client *c, struct bcp_msg *m,
		  struct bcp_msg *rep)
{
	static __thread uint8_t rbuf[BCP_FRAME_MAX];

	return bcp_client_call(c, m, rep, rbuf, sizeof(rbuf));
}

int t_lookup(struct bcp_client *c, uint64_t parent, const char *name,
	     struct bcp_entry *e)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_LOOKUP, 0);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	ret = t_call(c, &m, &rep);
	if (ret == 0 && e)
		*e = rep.u.entry_rep.entry;
	return ret;
}

int t_create(struct bcp_client *c, uint64_t parent, const char *name,
	     uint32_t mode, uint32_t flags, struct bcp_entry *e,
	     uint64_t *fh)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_CREATE, 0);
	m.u.create_req.parent = parent;
	m.u.create_req.mode = mode;
	m.u.create_req.flags = flags;
	m.u.create_req.uid = getuid();
	m.u.create_req.gid = getgid();
	m.u.create_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	ret = t_call(c, &m, &rep);
	if (ret == 0) {
		if (e)
			*e = rep.u.create_rep.entry;
		if (fh)
			*fh = rep.u.create_rep.fh;
	}
	return ret;
}

int t_mkdir(struct bcp_client *c, uint64_t parent, const char *name,
	    struct bcp_entry *e)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_MKDIR, 0);
	m.u.mkdir_req.parent = parent;
	m.u.mkdir_req.mode = 0755;
	m.u.mkdir_req.uid = getuid();
	m.u.mkdir_req.gid = getgid();
	m.u.mkdir_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	ret = t_call(c, &m, &rep);
	if (ret == 0 && e)
		*e = rep.u.entry_rep.entry;
	return ret;
}

int t_open(struct bcp_client *c, uint64_t handle, uint32_t flags,
	   uint64_t *fh)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_OPEN, 0);
	m.u.open_req.handle = handle;
	m.u.open_req.flags = flags;
	ret = t_call(c, &m, &rep);
	if (ret == 0)
		*fh = rep.u.open_rep.fh;
	return ret;
}

int t_release(struct bcp_client *c, uint64_t handle, uint64_t fh)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_RELEASE, 0);
	m.u.node_req.handle = handle;
	m.u.node_req.fh = fh;
	return t_call(c, &m, &rep);
}

struct t_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
	int32_t res;
};

static void t_io_done(struct bcp_io *io, int32_t res)
{
	struct t_wait *w = io->priv;

	pthread_mutex_lock(&w->lock);
	w->done = 1;
	w->res = res;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int t_io(struct bcp_client *c, uint16_t op, uint64_t fh, uint64_t off,
	 void *buf, uint32_t len)
{
	struct t_wait w = { PTHREAD_MUTEX_INITIALIZER,
			    PTHREAD_COND_INITIALIZER, 0, 0 };
	struct bcp_io *io = bcp_client_io_get(c, len);

	if (!io)
		t_hard("no pool memory for %u bytes", len);
	io->op = op;
	io->fh = fh;
	io->offset = off;
	io->length = len;
	io->done = t_io_done;
	io->priv = &w;
	if (op == BCP_OP_BATCH_PUSH)
		memcpy(io->buf, buf, len);
	bcp_client_submit(c, io);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	if (op == BCP_OP_BATCH_PULL && w.res > 0)
		memcpy(buf, io->buf, (size_t)w.res);
	bcp_client_io_put(c, io);
	return w.res;
}

uint64_t t_fnv(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (len--) {
		h ^= *b++;
		h *= 0x100000001b3ull;
	}
	return h;
}

int t_raw_register_shm(int fd, uint64_t req_id, uint32_t id, int mfd,
		       uint64_t len)
{
	static _Thread_local uint8_t buf[BCP_FRAME_MAX];
	struct bcp_msg m, rep;
	enum bcp_err why;
	int n;

	bcp_msg_init(&m, BCP_OP_REGISTER_REGION, req_id);
	m.hdr.flags = BCP_HF_FD;
	m.u.region_req.region_id = id;
	m.u.region_req.kind = BCP_REGION_SHM;
	m.u.region_req.length = len;
	n = bcp_encode(buf, sizeof(buf), &m);
	T_CHECK(n > 0);
	T_EQ(bcp_frame_send(fd, buf, (size_t)n, mfd), 0);
	n = bcp_frame_recv(fd, buf, sizeof(buf), NULL, 5000, &why);
	T_CHECK(n > 0);
	T_EQ(bcp_decode(buf, (size_t)n, &rep, &why), 0);
	return rep.hdr.status;
}

#include <sys/resource.h>

int t_agent_start_args(struct t_agent *a, const char *const *extra,
		       long nofile)
{
	const char *top = getenv("top_builddir");
	char bin[512], rfd[16];
	const char *argv[80];
	struct pollfd pfd;
	int p[2], n = 0, i, ok;
	char buf[8];

	if (!top)
		top = ".";
	snprintf(bin, sizeof(bin), "%s/agent/bluecache-agent", top);
	if (a->secret) {
		FILE *f = fopen(a->secret_path, "w");

		if (!f)
			t_hard("secret: %s", strerror(errno));
		fputs(a->secret, f);
		fclose(f);
		chmod(a->secret_path, 0600);
	}
	snprintf(a->tcp_addr, sizeof(a->tcp_addr), "tcp://127.0.0.1:%d",
		 t_free_port());
	if (pipe(p) < 0)
		t_hard("pipe: %s", strerror(errno));
	snprintf(rfd, sizeof(rfd), "%d", p[1]);
	argv[n++] = bin;
	argv[n++] = "--root";
	argv[n++] = a->root;
	argv[n++] = "--listen";
	argv[n++] = a->unix_addr;
	argv[n++] = "--listen";
	argv[n++] = a->tcp_addr;
	argv[n++] = "--foreground";
	argv[n++] = "--ready-fd";
	argv[n++] = rfd;
	argv[n++] = "--queue-depth";
	argv[n++] = "4";
	argv[n++] = "--slot-size";
	argv[n++] = "64K";
	argv[n++] = "--workers";
	argv[n++] = "2";
	argv[n++] = "--log-level";
	argv[n++] = "info";
	if (getenv("T_AGENT_META_IO")) {
		argv[n++] = "--meta-io";
		argv[n++] = getenv("T_AGENT_META_IO");
	}
	if (a->secret) {
		argv[n++] = "--secret-file";
		argv[n++] = a->secret_path;
	}
	for (i = 0; extra && extra[i]; i++) {
		if (n >= (int)(sizeof(argv) / sizeof(argv[0])) - 1)
			t_hard("too many agent arguments");
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	a->pid = fork();
	if (a->pid < 0)
		t_hard("fork: %s", strerror(errno));
	if (a->pid == 0) {
		int fd = open(a->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		struct rlimit rl = { (rlim_t)nofile, (rlim_t)nofile };

		if (fd < 0)
			_exit(127);
		dup2(fd, 2);
		close(p[0]);
		if (nofile > 0 && setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(127);
		execv(bin, (char **)argv);
		_exit(127);
	}
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	ok = poll(&pfd, 1, 10000) == 1 && read(p[0], buf, 6) == 6 &&
	     !memcmp(buf, "ready\n", 6);
	close(p[0]);
	if (ok)
		return 0;
	/* the pipe closed early when the agent exited; else it hangs */
	for (i = 0; i < 20; i++) {
		if (waitpid(a->pid, NULL, WNOHANG) == a->pid) {
			a->pid = -1;
			return -EINVAL;
		}
		usleep(50000);
	}
	kill(a->pid, SIGKILL);
	waitpid(a->pid, NULL, 0);
	a->pid = -1;
	return -ETIMEDOUT;
}

int t_agent_exited(struct t_agent *a)
{
	int st;

	if (a->pid <= 0)
		return 0;
	if (waitpid(a->pid, &st, WNOHANG) != a->pid)
		return -1;
	a->pid = -1;
	return st;
}

long t_proc_cpu_ms(pid_t pid)
{
	unsigned long long ut, st;
	char path[64], line[1024], *p;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	/* the command name may hold spaces: fields count from its ')' */
	if (!p || !(p = strrchr(line, ')')))
		return -1;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
		   "%llu %llu", &ut, &st) != 2 || hz <= 0)
		return -1;
	return (long)((ut + st) * 1000 / (unsigned long long)hz);
}

#include <sys/mman.h>	/* memfd_create, mmap: the raw shm helpers below */

int t_raw_shm_session(struct t_agent *a, const char *name, size_t rlen,
		      uint8_t **region, uint64_t *fh)
{
	uint8_t buf[1024];
	struct bcp_msg m, rep;
	uint64_t root;
	void *p;
	int fd, mfd;

	fd = t_raw_connect(a, 0);
	T_EQ(t_raw_handshake(fd, a->secret, &root, NULL), 0);
	mfd = memfd_create("t-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, (off_t)rlen) < 0)
		t_hard("memfd: %s", strerror(errno));
	p = mmap(NULL, rlen, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (p == MAP_FAILED)
		t_hard("mmap: %s", strerror(errno));
	T_EQ(t_raw_register_shm(fd, 3, 7, mfd, rlen), 0);
	close(mfd);
	bcp_msg_init(&m, BCP_OP_LOOKUP, 4);
	m.u.named_req.parent = root;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
	bcp_msg_init(&m, BCP_OP_OPEN, 5);
	m.u.open_req.handle = rep.u.entry_rep.entry.handle;
	m.u.open_req.flags = O_RDWR;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
	*fh = rep.u.open_rep.fh;
	*region = p;
	return fd;
}

int t_raw_send(int fd, struct bcp_msg *m)
{
	static _Thread_local uint8_t buf[BCP_FRAME_MAX];
	int n;

	n = bcp_encode(buf, sizeof(buf), m);
	if (n < 0)
		t_hard("encode %s: %s", bcp_op_name(m->hdr.opcode),
		       strerror(-n));
	return bcp_frame_send(fd, buf, (size_t)n, -1) < 0 ? -EPIPE : 0;
}

int t_raw_recv(int fd, struct bcp_msg *rep, void *buf, size_t cap,
	       int timeout_ms)
{
	enum bcp_err why;
	int n;

	n = bcp_frame_recv(fd, buf, cap, NULL, timeout_ms, &why);
	if (n <= 0)
		return n == 0 ? -ECONNRESET : n;
	if (bcp_decode(buf, (size_t)n, rep, &why) < 0)
		t_fail("agent sent an undecodable reply: %s",
		       bcp_err_str(why));
	return 0;
}

int t_raw_handshake_client(int fd, const char *secret,
			   const uint8_t client[BCP_CLIENT_ID_LEN],
			   uint64_t *root, struct bcp_hello_rep *hello)
{
	return t_raw_handshake_features(fd, secret, client,
					BCP_FEAT_ALL & ~BCP_FEAT_BUSY,
					root, hello);
}

int t_raw_handshake_features(int fd, const char *secret,
			     const uint8_t client[BCP_CLIENT_ID_LEN],
			     uint64_t features, uint64_t *root,
			     struct bcp_hello_rep *hello)
{
	uint8_t buf[512], nc[BCP_NONCE_LEN], ns[BCP_NONCE_LEN];
	struct bcp_msg m, rep;
	const char *key = secret ? secret : "";
	int ret;

	bcp_random(nc, sizeof(nc));
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = BCP_VERSION_MIN;
	m.u.hello_req.ver_max = BCP_VERSION_MAX;
	m.u.hello_req.features = features;
	memcpy(m.u.hello_req.nonce, nc, sizeof(nc));
	memcpy(m.u.hello_req.client, client, BCP_CLIENT_ID_LEN);
	ret = t_raw_call(fd, &m, &rep, buf, sizeof(buf));
	if (ret < 0)
		return ret;
	if (hello)
		*hello = rep.u.hello_rep;
	memcpy(ns, rep.u.hello_rep.nonce, sizeof(ns));
	bcp_msg_init(&m, BCP_OP_AUTH, 2);
	bcp_auth_mac(key, strlen(key), BCP_AUTH_LABEL_CLIENT, ns, sizeof(ns),
		     nc, sizeof(nc), m.u.auth_req.mac);
	ret = t_raw_call(fd, &m, &rep, buf, sizeof(buf));
	if (ret < 0)
		return ret;
	if (root)
		*root = rep.u.auth_rep.root;
	return 0;
}

void t_agent_current(struct t_agent *a)
{
	t_current = a;
}
