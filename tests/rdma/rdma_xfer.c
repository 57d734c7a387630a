/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdma_xfer.c - the rdma transport end to end: a real bluecache-agent with
 * --rdma-listen and the client library with transport rdma, on a real
 * RDMA device (Soft-RoCE in the test VM, see check-rdma.sh).
 *
 *   modes     for each of --completion poll, event and adaptive: data
 *             pushed and pulled in chunks larger and smaller than a
 *             staging slot, checked against the bytes and the file on disk
 *   badseg    a BATCH naming memory outside the registered region, or an
 *             unknown region, is refused per segment before any RDMA is
 *             posted: its neighbour succeeds and the connection lives on
 *   badpriv   an rdma connection with bad private data is rejected and the
 *             agent logs a warning naming the peer
 *   hostdrop  a host killed mid-transfer: the agent tears the session down
 *             cleanly (no error line) and serves the next host
 *   agentkill the agent killed mid-transfer: the host's I/O and calls fail
 *             with ENOTCONN promptly instead of hanging
 *
 * Needs RDMA_IP (the address of an RDMA device, set by the VM's init);
 * without it, or without a device, it skips.  Every wait is bounded.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "bcp_client.h"

#define T_SKIP		77
#define T_HARD		99
#define POOL_SIZE	(16u << 20)
#define SLOT_SIZE	(64u << 10)
#define FILE_SIZE	(3u << 20)
#define IO_MAX		(1u << 20)

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, \
			#cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		failed++; \
	} \
} while (0)

static int failed;
static int quiet;		/* expected I/O failures go unprinted */
static const char *rdma_ip;

struct agent {
	pid_t pid;
	char dir[256];
	char root[300];
	char log[300];
	char secret[300];
	char addr[192];
	unsigned short port;
};

/* ---- the agent ------------------------------------------------------- */

static unsigned short free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	unsigned short port = 0;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, rdma_ip, &sin.sin_addr);
	if (s >= 0 && !bind(s, (struct sockaddr *)&sin, sizeof(sin)) &&
	    !getsockname(s, (struct sockaddr *)&sin, &sl))
		port = ntohs(sin.sin_port);
	if (s >= 0)
		close(s);
	return port;
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *f)
{
	remove(p);
	return 0;
}

static int agent_start(struct agent *a, const char *completion)
{
	const char *b = getenv("top_builddir");
	char bin[512], listen[160], rlisten[96], buf[16];
	const char *t = getenv("TMPDIR");
	int p[2], fd, try;
	struct pollfd pfd;
	ssize_t n;

	snprintf(bin, sizeof(bin), "%s/agent/bluecache-agent", b ? b : "..");
	if (!a->dir[0]) {
		snprintf(a->dir, sizeof(a->dir), "%s/bcp-rdma.XXXXXX",
			 t && *t ? t : "/tmp");
		if (!mkdtemp(a->dir))
			return T_HARD;
		snprintf(a->root, sizeof(a->root), "%s/root", a->dir);
		snprintf(a->log, sizeof(a->log), "%s/agent.log", a->dir);
		snprintf(a->secret, sizeof(a->secret), "%s/secret", a->dir);
		mkdir(a->root, 0755);
		fd = open(a->secret, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, "rdma-test-secret\n", 17) != 17)
			return T_HARD;
		close(fd);
	}
	for (try = 0; try < 3; try++) {
		a->port = free_port();
		snprintf(listen, sizeof(listen), "tcp://%s:%u", rdma_ip,
			 a->port);
		snprintf(rlisten, sizeof(rlisten), "%s:0", rdma_ip);
		snprintf(a->addr, sizeof(a->addr), "%s", listen);
		if (pipe(p) < 0)
			return T_HARD;
		a->pid = fork();
		if (a->pid == 0) {
			int lfd = open(a->log, O_WRONLY | O_CREAT | O_APPEND,
				       0644);

			dup2(lfd, 2);
			dup2(p[1], 3);
			execl(bin, bin, "--root", a->root, "--listen", listen,
			      "--rdma-listen", rlisten, "--secret-file",
			      a->secret, "--slot-size", "64K",
			      "--queue-depth", "16", "--workers", "2",
			      "--completion", completion, "--foreground",
			      "--ready-fd", "3", "--log-level", "debug",
			      (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		pfd.fd = p[0];
		pfd.events = POLLIN;
		n = poll(&pfd, 1, 30000) == 1 ? read(p[0], buf, 6) : -1;
		close(p[0]);
		if (n == 6 && !memcmp(buf, "ready\n", 6))
			return 0;
		kill(a->pid, SIGKILL);
		waitpid(a->pid, NULL, 0);
		a->pid = 0;
	}
	fprintf(stderr, "agent did not become ready; its log:\n");
	snprintf(bin, sizeof(bin), "cat %s >&2", a->log);
	if (system(bin))
		return T_HARD;
	return T_HARD;
}

/* Count lines of the log holding pat. */
static int log_count(const struct agent *a, const char *pat)
{
	char line[1024];
	FILE *f = fopen(a->log, "r");
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, pat))
			n++;
	fclose(f);
	return n;
}

/* Stop (SIGTERM unless already dead); fail on error lines in the log. */
static void agent_stop(struct agent *a, int keep_dir)
{
	char line[1024];
	FILE *f;
	int st;

	if (a->pid > 0) {
		kill(a->pid, SIGTERM);
		waitpid(a->pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "agent exit status %#x", st);
		a->pid = 0;
	}
	f = fopen(a->log, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (strstr(line, "error") || strstr(line, "Sanitizer") ||
		    strstr(line, "SUMMARY:")) {
			fprintf(stderr, "unexpected agent log line: %s", line);
			failed++;
		}
	}
	if (f)
		fclose(f);
	if (!keep_dir) {
		if (failed && getenv("BCF_KEEP"))
			fprintf(stderr, "keeping %s\n", a->dir);
		else
			nftw(a->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		a->dir[0] = '\0';
	} else {
		/* a fresh log for the next run on the same dir */
		unlink(a->log);
	}
}

/* ---- the client ------------------------------------------------------ */

static int client_connect(const struct agent *a, struct bcp_client **out,
			  int timeout_ms)
{
	struct bcp_client_opts o;
	char err[512];
	int ret;

	bcp_client_opts_init(&o);
	o.addr = a->addr;
	o.secret = "rdma-test-secret";
	o.secret_len = 16;
	o.transport = BCP_XFER_RDMA;
	o.pool_size = POOL_SIZE;
	o.timeout_ms = timeout_ms;
	ret = bcp_client_connect(&o, out, err, sizeof(err));
	if (ret < 0)
		fprintf(stderr, "connect to %s: %s\n", a->addr, err);
	return ret;
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int pending;
};

static void io_done(struct bcp_io *io, int32_t result)
{
	struct waiter *w = io->priv;

	io->offset = (uint64_t)(int64_t)result;
	pthread_mutex_lock(&w->lock);
	if (--w->pending == 0)
		pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Wait for every I/O; 0, or -ETIMEDOUT after secs. */
static int waiter_wait(struct waiter *w, int secs)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	pthread_mutex_lock(&w->lock);
	while (w->pending && ret == 0)
		ret = pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	pthread_mutex_unlock(&w->lock);
	return ret ? -ETIMEDOUT : 0;
}

static int file_create(struct bcp_client *c, const char *name,
		       uint64_t *fh)
{
	struct bcp_msg req, rep;
	static uint8_t rbuf[BCP_FRAME_MAX];
	int ret;

	bcp_msg_init(&req, BCP_OP_CREATE, 0);
	req.u.create_req.parent = bcp_client_root(c);
	req.u.create_req.mode = 0100644;
	req.u.create_req.umask = 022;
	req.u.create_req.flags = O_RDWR;
	req.u.create_req.uid = getuid();
	req.u.create_req.gid = getgid();
	req.u.create_req.name_len = (uint16_t)strlen(name);
	req.name = name;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	if (ret == 0)
		*fh = rep.u.create_rep.fh;
	return ret;
}

/*
 * Move [0, size) of the file in I/Os of varying length, several in flight.
 * push: from ref; pull: compared with ref.  Returns the I/Os that failed.
 */
static int whole_file(struct bcp_client *c, uint64_t fh, uint16_t op,
		      const uint8_t *ref, uint32_t size, int secs)
{
	static const uint32_t lens[] = { 4096, 100, IO_MAX, 65536, 65537,
					 300000, 1 };
	struct bcp_io *ios[64];
	struct waiter w = { PTHREAD_MUTEX_INITIALIZER,
			    PTHREAD_COND_INITIALIZER, 0 };
	uint32_t off = 0, k = 0, i, n = 0;
	int bad = 0;

	while (off < size) {
		uint32_t len = lens[k++ % (sizeof(lens) / sizeof(lens[0]))];
		struct bcp_io *io;

		if (len > size - off)
			len = size - off;
		io = bcp_client_io_get(c, len);
		if (!io)
			return -ENOMEM;
		io->op = op;
		io->fh = fh;
		io->offset = off;
		io->length = len;
		io->done = io_done;
		io->priv = &w;
		if (op == BCP_OP_BATCH_PUSH)
			memcpy(io->buf, ref + off, len);
		else
			memset(io->buf, 0xee, len);
		ios[n] = io;
		/* the length rides in cap, the offset returns the result */
		io->cap = off;
		n++;
		off += len;
		if (n == 64 || off >= size) {
			pthread_mutex_lock(&w.lock);
			w.pending = (int)n;
			pthread_mutex_unlock(&w.lock);
			for (i = 0; i < n; i++)
				bcp_client_submit(c, ios[i]);
			if (waiter_wait(&w, secs) < 0)
				return -ETIMEDOUT;
			for (i = 0; i < n; i++) {
				int32_t r = (int32_t)(int64_t)ios[i]->offset;

				if (r != (int32_t)ios[i]->length) {
					if (!quiet)
						fprintf(stderr,
							"%s at %zu: %d of %u\n",
							bcp_op_name(op),
							ios[i]->cap, r,
							ios[i]->length);
					bad++;
				} else if (op == BCP_OP_BATCH_PULL &&
					   memcmp(ios[i]->buf,
						  ref + ios[i]->cap,
						  ios[i]->length)) {
					fprintf(stderr, "PULL at %zu: bytes "
						"differ\n", ios[i]->cap);
					bad++;
				}
				bcp_client_io_put(c, ios[i]);
			}
			n = 0;
		}
	}
	return bad;
}

static uint8_t *ref_data(uint32_t size, uint32_t seed)
{
	uint8_t *p = malloc(size);
	uint32_t i, x = seed | 1;

	for (i = 0; p && i < size; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
	return p;
}

static int disk_same(const struct agent *a, const char *name,
		     const uint8_t *ref, uint32_t size)
{
	char path[600];
	uint8_t *d = malloc(size + 1);
	ssize_t n;
	int fd, same;

	snprintf(path, sizeof(path), "%s/%s", a->root, name);
	fd = open(path, O_RDONLY);
	n = fd >= 0 ? read(fd, d, size + 1) : -1;
	same = n == (ssize_t)size && !memcmp(d, ref, size);
	if (fd >= 0)
		close(fd);
	free(d);
	return same;
}

/* ---- cases ----------------------------------------------------------- */

static void case_modes(void)
{
	static const char *const modes[] = { "poll", "event", "adaptive" };
	struct agent a = { 0 };
	unsigned int m;

	for (m = 0; m < 3; m++) {
		struct bcp_client *c = NULL;
		struct bcp_client_stats st;
		uint8_t *ref = ref_data(FILE_SIZE, 7 + m);
		char name[32];
		uint64_t fh = 0;

		if (agent_start(&a, modes[m])) {
			failed++;
			free(ref);
			return;
		}
		CHECK(log_count(&a, "staging area(s) registered") == 1,
		      "%s: staging registered once at start-up", modes[m]);
		if (client_connect(&a, &c, 20000) < 0) {
			failed++;
			agent_stop(&a, m < 2);
			free(ref);
			continue;
		}
		CHECK(bcp_client_transport(c) == BCP_XFER_RDMA,
		      "%s: transport %s", modes[m],
		      bcp_transport_name(bcp_client_transport(c)));
		snprintf(name, sizeof(name), "f-%s", modes[m]);
		CHECK(file_create(c, name, &fh) == 0, "CREATE %s", name);
		CHECK(whole_file(c, fh, BCP_OP_BATCH_PUSH, ref, FILE_SIZE,
				 120) == 0, "%s: push", modes[m]);
		CHECK(disk_same(&a, name, ref, FILE_SIZE),
		      "%s: the file on disk holds what was pushed", modes[m]);
		CHECK(whole_file(c, fh, BCP_OP_BATCH_PULL, ref, FILE_SIZE,
				 120) == 0, "%s: pull", modes[m]);
		bcp_client_stats(c, &st);
		CHECK(st.bytes_pulled == FILE_SIZE &&
		      st.bytes_pushed == FILE_SIZE,
		      "%s: moved %llu/%llu bytes", modes[m],
		      (unsigned long long)st.bytes_pulled,
		      (unsigned long long)st.bytes_pushed);
		bcp_client_destroy(c);
		/* the second log check of the session: the agent saw it */
		agent_stop(&a, m < 2);
		printf("modes: %s ok\n", modes[m]);
		free(ref);
	}
}

static void case_badseg(void)
{
	struct agent a = { 0 };
	struct bcp_client *c = NULL;
	struct bcp_seg segs[3];
	struct bcp_msg req, rep;
	static uint8_t rbuf[BCP_FRAME_MAX];
	uint8_t *ref = ref_data(1u << 20, 99);
	uint64_t fh = 0;
	int ret;

	if (agent_start(&a, "adaptive") || client_connect(&a, &c, 20000)) {
		failed++;
		goto out;
	}
	CHECK(file_create(c, "badseg", &fh) == 0, "CREATE");
	CHECK(whole_file(c, fh, BCP_OP_BATCH_PUSH, ref, 1u << 20, 60) == 0,
	      "fill");
	memset(segs, 0, sizeof(segs));
	/* past the end of the 16 MiB region */
	segs[0] = (struct bcp_seg){ .fh = fh, .offset = 0, .length = 8192,
				    .region_id = 1,
				    .region_off = POOL_SIZE - 4096 };
	/* inside it */
	segs[1] = (struct bcp_seg){ .fh = fh, .offset = 4096,
				    .length = 65536, .region_id = 1,
				    .region_off = POOL_SIZE - 65536 };
	/* a region that was never registered */
	segs[2] = (struct bcp_seg){ .fh = fh, .offset = 0, .length = 4096,
				    .region_id = 7, .region_off = 0 };
	bcp_msg_init(&req, BCP_OP_BATCH_PULL, 0);
	req.u.batch_req.count = 3;
	req.segs = segs;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	CHECK(ret == 0, "BATCH_PULL call: %d", ret);
	if (ret == 0) {
		CHECK(rep.u.batch_rep.count == 3, "count %u",
		      rep.u.batch_rep.count);
		CHECK(bcp_msg_status(&rep, 0) < 0,
		      "out-of-region segment: %d", bcp_msg_status(&rep, 0));
		CHECK(bcp_msg_status(&rep, 1) == 65536,
		      "its neighbour: %d", bcp_msg_status(&rep, 1));
		CHECK(bcp_msg_status(&rep, 2) < 0, "unknown region: %d",
		      bcp_msg_status(&rep, 2));
	}
	/* the queue pair is not in error: normal transfers go on */
	CHECK(whole_file(c, fh, BCP_OP_BATCH_PULL, ref, 1u << 20, 60) == 0,
	      "pull after the refused segments");
	CHECK(log_count(&a, "closing the session") == 0,
	      "no session was torn down");
	printf("badseg: ok\n");
out:
	bcp_client_destroy(c);
	agent_stop(&a, 0);
	free(ref);
}

/* A raw rdma_connect() with the given private data: 0 when rejected. */
static int raw_connect_rejected(const struct agent *a, unsigned short rport,
				const void *priv, uint8_t len)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id = NULL;
	struct ibv_cq *cq = NULL;
	int got = -1, step;

	inet_pton(AF_INET, rdma_ip, &sin.sin_addr);
	sin.sin_port = htons(rport);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 5000))
		goto out;
	for (step = 0; step < 3; step++) {
		if (rdma_get_cm_event(ch, &ev))
			goto out;
		got = ev->event;
		rdma_ack_cm_event(ev);
		if (got == RDMA_CM_EVENT_ADDR_RESOLVED) {
			if (rdma_resolve_route(id, 5000))
				goto out;
		} else if (got == RDMA_CM_EVENT_ROUTE_RESOLVED) {
			cq = ibv_create_cq(id->verbs, 2, NULL, NULL, 0);
			qa.send_cq = qa.recv_cq = cq;
			qa.qp_type = IBV_QPT_RC;
			qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
			qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
			if (!cq || rdma_create_qp(id, NULL, &qa))
				goto out;
			cp.private_data = priv;
			cp.private_data_len = len;
			cp.responder_resources = 1;
			cp.initiator_depth = 1;
			cp.retry_count = 7;
			if (rdma_connect(id, &cp))
				goto out;
		} else {
			break;
		}
	}
out:
	if (id && id->qp)
		rdma_destroy_qp(id);
	if (cq)
		ibv_destroy_cq(cq);
	if (id)
		rdma_destroy_id(id);
	if (ch)
		rdma_destroy_event_channel(ch);
	return got == RDMA_CM_EVENT_REJECTED ? 0 : -1;
}

static void case_badpriv(void)
{
	struct agent a = { 0 };
	struct bcp_client *c = NULL;
	const struct bcp_hello_rep *h;
	uint8_t priv[48] = { 0x42, 0x43, 0x52, 0x31, 1 };
	uint64_t fh;

	if (agent_start(&a, "event") || client_connect(&a, &c, 20000)) {
		failed++;
		goto out;
	}
	h = bcp_client_hello(c);
	/* garbage, then a live session's id with a wrong MAC */
	CHECK(raw_connect_rejected(&a, h->rdma_port, "nonsense", 8) == 0,
	      "garbage private data rejected");
	memcpy(priv + 8, &h->session, 8);
	CHECK(raw_connect_rejected(&a, h->rdma_port, priv, 48) == 0,
	      "a wrong MAC rejected");
	CHECK(log_count(&a, "refused") >= 2 &&
	      log_count(&a, "warning: rdma connection from") >= 2,
	      "the agent warned about both");
	/* the real session is unharmed */
	CHECK(file_create(c, "after", &fh) == 0, "CREATE after");
	printf("badpriv: ok\n");
out:
	bcp_client_destroy(c);
	agent_stop(&a, 0);
}

/* Push forever until killed (a child process). */
static void busy_host(const struct agent *a, int ready_fd)
{
	struct bcp_client *c = NULL;
	uint8_t *ref = ref_data(FILE_SIZE, 5);
	uint64_t fh;

	if (client_connect(a, &c, 20000) || file_create(c, "busy", &fh))
		_exit(2);
	if (write(ready_fd, "x", 1) != 1)
		_exit(3);
	for (;;)
		whole_file(c, fh, BCP_OP_BATCH_PUSH, ref, FILE_SIZE, 60);
}

static void case_hostdrop(void)
{
	struct agent a = { 0 };
	struct bcp_client *c = NULL;
	struct pollfd pfd;
	int p[2], st, i;
	pid_t kid;
	char x;

	if (agent_start(&a, "adaptive") || pipe(p)) {
		failed++;
		goto out;
	}
	kid = fork();
	if (kid == 0) {
		close(p[0]);
		busy_host(&a, p[1]);
	}
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 30000) == 1 && read(p[0], &x, 1) == 1,
	      "the busy host started");
	close(p[0]);
	usleep(300000);		/* transfers are in flight */
	kill(kid, SIGKILL);
	waitpid(kid, &st, 0);
	/* the agent notices and closes the session, within bounds */
	for (i = 0; i < 200 && log_count(&a, " closed") +
			       log_count(&a, "closing the session") == 0; i++)
		usleep(100000);
	CHECK(i < 200, "the agent closed the dead host's session");
	CHECK(client_connect(&a, &c, 20000) == 0,
	      "a new host connects after the drop");
	if (c) {
		uint8_t *ref = ref_data(1u << 20, 3);
		uint64_t fh = 0;

		CHECK(file_create(c, "next", &fh) == 0, "CREATE next");
		CHECK(whole_file(c, fh, BCP_OP_BATCH_PUSH, ref, 1u << 20,
				 60) == 0, "the next host pushes");
		CHECK(whole_file(c, fh, BCP_OP_BATCH_PULL, ref, 1u << 20,
				 60) == 0, "and pulls");
		free(ref);
	}
	printf("hostdrop: ok\n");
out:
	bcp_client_destroy(c);
	agent_stop(&a, 0);
}

struct killer {
	pid_t pid;
};

static void *kill_later(void *arg)
{
	struct killer *k = arg;

	usleep(400000);
	kill(k->pid, SIGKILL);
	return NULL;
}

static void case_agentkill(void)
{
	struct agent a = { 0 };
	struct bcp_client *c = NULL;
	struct bcp_msg req, rep;
	static uint8_t rbuf[BCP_FRAME_MAX];
	uint8_t *ref = ref_data(FILE_SIZE, 11);
	struct killer k;
	pthread_t t;
	time_t t0;
	uint64_t fh = 0;
	int r, st, round;

	if (agent_start(&a, "poll") || client_connect(&a, &c, 5000)) {
		failed++;
		goto out;
	}
	CHECK(file_create(c, "victim", &fh) == 0, "CREATE");
	k.pid = a.pid;
	pthread_create(&t, NULL, kill_later, &k);
	t0 = time(NULL);
	quiet = 1;
	/* push until the I/O fails: it must fail, not hang */
	for (round = 0; round < 1000; round++) {
		r = whole_file(c, fh, BCP_OP_BATCH_PUSH, ref, FILE_SIZE, 30);
		if (r)
			break;
	}
	pthread_join(t, NULL);
	quiet = 0;
	CHECK(r > 0, "I/O failed once the agent died (%d)", r);
	CHECK(time(NULL) - t0 < 30, "and promptly (%ld s)",
	      (long)(time(NULL) - t0));
	bcp_msg_init(&req, BCP_OP_PING, 0);
	r = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	CHECK(r == -ENOTCONN, "a call after the agent died: %d", r);
	waitpid(a.pid, &st, 0);
	CHECK(WIFSIGNALED(st), "the agent was killed");
	a.pid = 0;
	printf("agentkill: ok\n");
out:
	bcp_client_destroy(c);
	agent_stop(&a, 0);
	free(ref);
}

int main(int argc, char **argv)
{
	struct ibv_device **l;
	const char *only = argc > 1 ? argv[1] : NULL;
	int n = 0;

	rdma_ip = getenv("RDMA_IP");
	if (!rdma_ip || !*rdma_ip) {
		printf("SKIP: RDMA_IP is not set (run inside the RDMA test "
		       "VM: tests/rdma/check-rdma.sh)\n");
		return T_SKIP;
	}
	l = ibv_get_device_list(&n);
	if (l)
		ibv_free_device_list(l);
	if (n <= 0) {
		printf("SKIP: no RDMA device\n");
		return T_SKIP;
	}
	signal(SIGPIPE, SIG_IGN);
	bcp_client_set_log(NULL, 4 /* LOG_WARNING */);
	if (!only || !strcmp(only, "modes"))
		case_modes();
	if (!only || !strcmp(only, "badseg"))
		case_badseg();
	if (!only || !strcmp(only, "badpriv"))
		case_badpriv();
	if (!only || !strcmp(only, "hostdrop"))
		case_hostdrop();
	if (!only || !strcmp(only, "agentkill"))
		case_agentkill();
	if (failed)
		fprintf(stderr, "%d check(s) failed\n", failed);
	return failed ? 1 : 0;
}
