/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_reconnect.c - the agent is SIGKILLed under load and started again
 * on the same address: with reconnect_timeout_ms, every synchronous call,
 * asynchronous call and batch I/O in flight or queued completes exactly
 * once with its correct result (reads return the file's bytes), none with
 * ENOTCONN or EIO.  With reconnect_timeout_ms = 500 and no agent, what
 * waits fails with EIO after about 0.5 s and not before, new requests
 * fail with EIO at once, and an agent that comes back later ends the
 * outage.  Run over unix + shm and tcp + tcp data.
 *
 * A request whose reply is lost is answered once: through a proxy that
 * passes a MKDIR to the agent and cuts every connection when the reply
 * comes back, the client connects again and replays the MKDIR, which the
 * agent answers from its reply cache (success, the same handle), not with
 * EEXIST.
 *
 * The resume callback puts the test file back: REBIND + REOPEN when the
 * agent offers BCP_FEAT_RESUME, otherwise LOOKUP + OPEN of the same name
 * in a fresh agent, which hands out the same handle and fh values as the
 * first session did (the test checks that it did).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bcp_client.h"
#include "harness.h"

#define FILE_LEN	(4u << 20)
#define IO_LEN		(64u * 1024)
#define NIO		8
#define ACALLS		8

static struct th_agent agent;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pattern(uint64_t off)
{
	return (uint8_t)(off * 7 + (off >> 12));
}

/* The agent again, same root, socket and port.  0 or TH_HARD. */
static int agent_restart(struct th_agent *a)
{
	const char *bin = th_agent_path();
	char fd_arg[16], buf[16];
	struct pollfd pfd;
	int p[2], logfd, n = 0, r, st;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return TH_HARD;
	logfd = open(a->log, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (logfd < 0)
		return TH_HARD;
	pid = fork();
	if (pid < 0)
		return TH_HARD;
	if (pid == 0) {
		const char *argv[20];
		int i = 0, wfd = dup(p[1]);

		dup2(logfd, 1);
		dup2(logfd, 2);
		snprintf(fd_arg, sizeof(fd_arg), "%d", wfd);
		argv[i++] = bin;
		argv[i++] = "--root";
		argv[i++] = a->root;
		argv[i++] = "--listen";
		argv[i++] = a->unix_addr;
		argv[i++] = "--listen";
		argv[i++] = a->tcp_addr;
		argv[i++] = "--foreground";
		argv[i++] = "--ready-fd";
		argv[i++] = fd_arg;
		argv[i++] = "--log-level";
		argv[i++] = "info";
		argv[i] = NULL;
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(logfd);
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (n < 6) {
		r = poll(&pfd, 1, 15000);
		if (r <= 0)
			break;
		r = (int)read(p[0], buf + n, sizeof(buf) - 1 - (size_t)n);
		if (r <= 0)
			break;
		n += r;
	}
	close(p[0]);
	buf[n] = '\0';
	if (strcmp(buf, "ready\n")) {
		fprintf(stderr, "the agent did not start again\n");
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return TH_HARD;
	}
	a->pid = pid;
	return 0;
}

/* ---- the test file and its resume ------------------------------------- */

struct tfile {
	char name[32];
	uint64_t handle, fh;
	uint8_t fid[BCP_FID_LEN];
	int resumes;
	int resume_bad;
};

static int tfile_resume(struct bcp_client *c, void *arg)
{
	struct tfile *t = arg;
	static uint8_t rbuf[BCP_FRAME_MAX];
	struct bcp_rebind_one one;
	struct bcp_msg req, rep;
	int ret;

	t->resumes++;
	if (bcp_client_hello(c)->features & BCP_FEAT_RESUME) {
		bcp_msg_init(&req, BCP_OP_REBIND, 0);
		req.u.rebind_req.count = 1;
		one.handle = t->handle;
		one.nlookup = 1;
		memcpy(one.fid, t->fid, BCP_FID_LEN);
		req.rebinds = &one;
		ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
		if (ret < 0)
			return ret;
		if (bcp_msg_status(&rep, 0) < 0)
			t->resume_bad++;
		bcp_msg_init(&req, BCP_OP_REOPEN, 0);
		req.u.reopen_req.handle = t->handle;
		req.u.reopen_req.fh = t->fh;
		req.u.reopen_req.flags = O_RDWR;
		ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
		if (ret < 0)
			t->resume_bad++;
		bcp_client_resumed(c, 1, 1);
		return 0;
	}
	bcp_msg_init(&req, BCP_OP_LOOKUP, 0);
	req.u.named_req.parent = bcp_client_root(c);
	req.u.named_req.name_len = (uint32_t)strlen(t->name);
	req.name = t->name;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	if (ret < 0)
		return ret;
	if (rep.u.entry_rep.entry.handle != t->handle)
		t->resume_bad++;
	bcp_msg_init(&req, BCP_OP_OPEN, 0);
	req.u.open_req.handle = t->handle;
	req.u.open_req.flags = O_RDWR;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	if (ret < 0)
		return ret;
	if (rep.u.open_rep.fh != t->fh)
		t->resume_bad++;
	bcp_client_resumed(c, 1, 1);
	return 0;
}

/* ---- load: I/O, calls, asynchronous calls ------------------------------ */

struct load {
	struct bcp_client *c;
	struct tfile *t;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop;
	int io_inflight;
	long io_ok, io_bad, io_enotconn, io_eio;
	long call_ok, call_bad;
	long acall_sent, acall_ok, acall_bad, acall_twice;
	int afree[ACALLS], nafree;
	struct {
		struct bcp_call call;
		int done;
		uint8_t rbuf[512];
	} acalls[ACALLS];
};

static void io_done(struct bcp_io *io, int32_t result)
{
	struct load *l = io->priv;
	const uint8_t *p = io->buf;
	uint32_t i;
	int bad = 0;

	if (result == (int32_t)io->length && io->op == BCP_OP_BATCH_PULL)
		for (i = 0; i < io->length; i++)
			if (p[i] != pattern(io->offset + i)) {
				bad = 1;
				break;
			}
	pthread_mutex_lock(&l->lock);
	if (result == (int32_t)io->length && !bad)
		l->io_ok++;
	else if (result == -ENOTCONN)
		l->io_enotconn++;
	else if (result == -EIO)
		l->io_eio++;
	else
		l->io_bad++;
	if (result != (int32_t)io->length || bad)
		fprintf(stderr, "io %s at %llu: %d%s\n",
			io->op == BCP_OP_BATCH_PULL ? "read" : "write",
			(unsigned long long)io->offset, result,
			bad ? " (wrong bytes)" : "");
	l->io_inflight--;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	bcp_client_io_put(l->c, io);
}

static void *io_thread(void *arg)
{
	struct load *l = arg;
	uint64_t seed = th_seed() ^ (uint64_t)(uintptr_t)&seed, off;
	struct bcp_io *io;
	uint32_t i;

	for (;;) {
		pthread_mutex_lock(&l->lock);
		while (!l->stop && l->io_inflight >= NIO)
			pthread_cond_wait(&l->cond, &l->lock);
		if (l->stop) {
			pthread_mutex_unlock(&l->lock);
			break;
		}
		l->io_inflight++;
		pthread_mutex_unlock(&l->lock);
		io = bcp_client_io_get(l->c, IO_LEN);
		if (!io) {
			pthread_mutex_lock(&l->lock);
			l->io_inflight--;
			l->io_bad++;
			pthread_mutex_unlock(&l->lock);
			break;
		}
		off = (th_rand(&seed) % (FILE_LEN / IO_LEN)) * IO_LEN;
		io->op = th_rand(&seed) & 3 ? BCP_OP_BATCH_PULL :
					      BCP_OP_BATCH_PUSH;
		io->fh = l->t->fh;
		io->offset = off;
		io->length = IO_LEN;
		if (io->op == BCP_OP_BATCH_PUSH)
			for (i = 0; i < IO_LEN; i++)
				((uint8_t *)io->buf)[i] = pattern(off + i);
		io->done = io_done;
		io->priv = l;
		bcp_client_submit(l->c, io);
	}
	pthread_mutex_lock(&l->lock);
	while (l->io_inflight)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

static void *call_thread(void *arg)
{
	struct load *l = arg;
	uint8_t rbuf[512];
	struct bcp_msg req, rep;
	int ret, stop, i = 0;

	do {
		if (i++ & 1) {
			bcp_msg_init(&req, BCP_OP_PING, 0);
		} else {
			bcp_msg_init(&req, BCP_OP_GETATTR, 0);
			req.u.node_req.handle = l->t->handle;
		}
		ret = bcp_client_call(l->c, &req, &rep, rbuf, sizeof(rbuf));
		pthread_mutex_lock(&l->lock);
		if (ret == 0 && (req.hdr.opcode == BCP_OP_PING ||
				 rep.u.attr_rep.attr.size == FILE_LEN))
			l->call_ok++;
		else {
			fprintf(stderr, "%s: %d\n",
				bcp_op_name(req.hdr.opcode), ret);
			l->call_bad++;
		}
		stop = l->stop;
		pthread_mutex_unlock(&l->lock);
	} while (!stop);
	return NULL;
}

static void acall_done(struct bcp_call *call, int result)
{
	struct load *l = call->priv;
	int i = (int)(((uint8_t *)call - (uint8_t *)l->acalls) /
		      (long)sizeof(l->acalls[0]));

	pthread_mutex_lock(&l->lock);
	if (l->acalls[i].done)
		l->acall_twice++;
	l->acalls[i].done = 1;
	if (result == 0 && call->rep.u.attr_rep.attr.mode & 040000)
		l->acall_ok++;
	else {
		fprintf(stderr, "async GETATTR: %d\n", result);
		l->acall_bad++;
	}
	l->afree[l->nafree++] = i;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static void *acall_thread(void *arg)
{
	struct load *l = arg;
	struct bcp_msg req;
	int i, ret;

	for (;;) {
		pthread_mutex_lock(&l->lock);
		while (!l->nafree && !l->stop)
			pthread_cond_wait(&l->cond, &l->lock);
		if (l->stop) {
			pthread_mutex_unlock(&l->lock);
			break;
		}
		i = l->afree[--l->nafree];
		l->acalls[i].done = 0;
		l->acall_sent++;
		pthread_mutex_unlock(&l->lock);
		bcp_msg_init(&req, BCP_OP_GETATTR, 0);
		req.u.node_req.handle = bcp_client_root(l->c);
		l->acalls[i].call.rbuf = l->acalls[i].rbuf;
		l->acalls[i].call.rcap = sizeof(l->acalls[i].rbuf);
		l->acalls[i].call.done = acall_done;
		l->acalls[i].call.priv = l;
		ret = bcp_client_call_async(l->c, &req, &l->acalls[i].call);
		if (ret < 0) {
			fprintf(stderr, "async call refused: %d\n", ret);
			pthread_mutex_lock(&l->lock);
			l->acall_bad++;
			l->afree[l->nafree++] = i;
			pthread_mutex_unlock(&l->lock);
		}
	}
	pthread_mutex_lock(&l->lock);
	while (l->nafree < ACALLS)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

/* ---- helpers ---------------------------------------------------------- */

static int tfile_create(struct bcp_client *c, struct tfile *t)
{
	static uint8_t rbuf[BCP_FRAME_MAX];
	struct bcp_msg req, rep;
	int ret;

	bcp_msg_init(&req, BCP_OP_CREATE, 0);
	req.u.create_req.parent = bcp_client_root(c);
	req.u.create_req.flags = O_RDWR | O_TRUNC;
	req.u.create_req.mode = 0644;
	req.u.create_req.name_len = (uint32_t)strlen(t->name);
	req.name = t->name;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	if (ret < 0)
		return ret;
	t->handle = rep.u.create_rep.entry.handle;
	t->fh = rep.u.create_rep.fh;
	memcpy(t->fid, rep.u.create_rep.entry.fid, BCP_FID_LEN);
	return 0;
}

/* Write the whole file through a load's I/O path, waiting for each. */
static int tfile_fill(struct load *l)
{
	struct bcp_io *io;
	uint64_t off;
	uint32_t i;
	long bad;

	for (off = 0; off < FILE_LEN; off += IO_LEN) {
		io = bcp_client_io_get(l->c, IO_LEN);
		if (!io)
			return -ENOMEM;
		io->op = BCP_OP_BATCH_PUSH;
		io->fh = l->t->fh;
		io->offset = off;
		io->length = IO_LEN;
		for (i = 0; i < IO_LEN; i++)
			((uint8_t *)io->buf)[i] = pattern(off + i);
		io->done = io_done;
		io->priv = l;
		pthread_mutex_lock(&l->lock);
		l->io_inflight++;
		pthread_mutex_unlock(&l->lock);
		bcp_client_submit(l->c, io);
	}
	pthread_mutex_lock(&l->lock);
	while (l->io_inflight)
		pthread_cond_wait(&l->cond, &l->lock);
	bad = l->io_bad + l->io_eio + l->io_enotconn;
	l->io_ok = 0;
	pthread_mutex_unlock(&l->lock);
	return bad ? -EIO : 0;
}

static int client_open(const char *addr, enum bcp_transport t,
		       int reconnect_ms, struct tfile *tf,
		       struct bcp_client **out)
{
	struct bcp_client_opts o;
	char err[512];
	int ret;

	bcp_client_opts_init(&o);
	o.addr = addr;
	o.transport = t;
	o.pool_size = 16u << 20;
	o.timeout_ms = 5000;
	o.reconnect_timeout_ms = reconnect_ms;
	o.resume = tfile_resume;
	o.resume_arg = tf;
	ret = bcp_client_connect(&o, out, err, sizeof(err));
	if (ret < 0)
		fprintf(stderr, "connect %s: %s\n", addr, err);
	return ret;
}

/* ---- the runs --------------------------------------------------------- */

/* Load, SIGKILL, restart after a delay, more load: all correct. */
static void run_restart(const char *addr, enum bcp_transport t)
{
	pthread_t io, call, acall;
	struct tfile tf = { 0 };
	struct bcp_client *c;
	struct load l;
	long before_io, before_call;
	int i;

	memset(&l, 0, sizeof(l));
	snprintf(tf.name, sizeof(tf.name), "data-%s", bcp_transport_name(t));
	/* a fresh agent: its handle and fh values are the first ones */
	th_agent_kill(&agent);
	if (agent_restart(&agent))
		exit(TH_HARD);
	if (client_open(addr, t, 30000, &tf, &c) < 0) {
		th_failed++;
		return;
	}
	pthread_mutex_init(&l.lock, NULL);
	pthread_cond_init(&l.cond, NULL);
	l.c = c;
	l.t = &tf;
	for (i = 0; i < ACALLS; i++)
		l.afree[l.nafree++] = i;
	TH_CHECK(tfile_create(c, &tf) == 0, "create %s", tf.name);
	TH_CHECK(tfile_fill(&l) == 0, "fill %s", tf.name);

	pthread_create(&io, NULL, io_thread, &l);
	pthread_create(&call, NULL, call_thread, &l);
	pthread_create(&acall, NULL, acall_thread, &l);
	usleep(200000);
	th_agent_kill(&agent);
	usleep(300000);
	pthread_mutex_lock(&l.lock);
	before_io = l.io_ok;
	before_call = l.call_ok;
	pthread_mutex_unlock(&l.lock);
	if (agent_restart(&agent)) {
		th_failed++;
		exit(TH_HARD);
	}
	/* load goes on until a good part of it ran on the new agent */
	for (i = 0; i < 100; i++) {
		usleep(50000);
		pthread_mutex_lock(&l.lock);
		if (l.io_ok > before_io + 50 && l.call_ok > before_call + 20)
			i = 100;
		pthread_mutex_unlock(&l.lock);
	}
	pthread_mutex_lock(&l.lock);
	l.stop = 1;
	pthread_cond_broadcast(&l.cond);
	pthread_mutex_unlock(&l.lock);
	pthread_join(io, NULL);
	pthread_join(call, NULL);
	pthread_join(acall, NULL);

	printf("%s: io ok %ld, calls ok %ld, async calls ok %ld/%ld, resumes %d\n",
	       bcp_transport_name(t), l.io_ok, l.call_ok, l.acall_ok,
	       l.acall_sent, tf.resumes);
	TH_CHECK(tf.resumes >= 1, "no resume ran");
	TH_CHECK(!tf.resume_bad, "the restarted agent gave the file other "
		 "handle or fh values (%d)", tf.resume_bad);
	TH_CHECK(l.io_enotconn == 0 && l.io_eio == 0 && l.io_bad == 0,
		 "I/O failed: %ld ENOTCONN, %ld EIO, %ld other",
		 l.io_enotconn, l.io_eio, l.io_bad);
	TH_CHECK(l.call_bad == 0, "%ld calls failed", l.call_bad);
	TH_CHECK(l.acall_bad == 0, "%ld async calls failed", l.acall_bad);
	TH_CHECK(l.acall_twice == 0, "%ld async calls completed twice",
		 l.acall_twice);
	TH_CHECK(l.acall_ok == l.acall_sent, "%ld of %ld async calls done",
		 l.acall_ok, l.acall_sent);
	TH_CHECK(l.io_ok > before_io, "no I/O after the restart");
	TH_CHECK(l.call_ok > before_call, "no call after the restart");
	bcp_client_destroy(c);
}

static int getattr_root(struct bcp_client *c)
{
	uint8_t rbuf[512];
	struct bcp_msg req, rep;

	bcp_msg_init(&req, BCP_OP_GETATTR, 0);
	req.u.node_req.handle = bcp_client_root(c);
	return bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
}

/* No agent for longer than reconnect_timeout_ms: EIO, then back. */
static void run_timeout(const char *addr, enum bcp_transport t)
{
	struct tfile tf = { 0 };
	struct bcp_client *c;
	uint64_t t0, dt;
	int ret, i;

	snprintf(tf.name, sizeof(tf.name), "data-%s", bcp_transport_name(t));
	/* the resume finds the file of run_restart again */
	if (client_open(addr, t, 500, &tf, &c) < 0) {
		th_failed++;
		return;
	}
	TH_CHECK(tfile_create(c, &tf) == 0, "create %s", tf.name);
	/* the pause begins after the kill, so 500 ms after t0 at the least */
	t0 = now_ms();
	th_agent_kill(&agent);
	ret = getattr_root(c);
	dt = now_ms() - t0;
	TH_CHECK(ret == -EIO, "a call without agent: %d, expected -EIO", ret);
	TH_CHECK(dt >= 500 && dt < 3000,
		 "a call without agent failed after %llu ms, expected ~500",
		 (unsigned long long)dt);
	t0 = now_ms();
	ret = getattr_root(c);
	dt = now_ms() - t0;
	TH_CHECK(ret == -EIO && dt < 200,
		 "after the timeout: %d after %llu ms, expected -EIO at once",
		 ret, (unsigned long long)dt);
	if (agent_restart(&agent))
		exit(TH_HARD);
	for (i = 0; i < 100; i++) {
		ret = getattr_root(c);
		if (ret == 0)
			break;
		usleep(50000);
	}
	TH_CHECK(ret == 0, "the agent is back, a call still fails: %d", ret);
	bcp_client_destroy(c);
}


/* ---- a proxy that loses one reply --------------------------------------- */

#define PX_MAX		8

struct proxy {
	int lfd;
	unsigned short port, to_port;
	pthread_t th;
	pthread_mutex_t lock;
	int cut;		/* lock: drop the next reply, close all */
	int cuts;		/* lock: how many times it did */
	int stop;
	int cfd[PX_MAX], afd[PX_MAX];
	int n;
};

static void px_close_all(struct proxy *p)
{
	int i;

	for (i = 0; i < p->n; i++) {
		close(p->cfd[i]);
		close(p->afd[i]);
	}
	p->n = 0;
}

static void *px_main(void *arg)
{
	struct proxy *p = arg;
	struct pollfd pf[1 + 2 * PX_MAX];
	struct sockaddr_in sa;
	char buf[65536];
	int i, n, fd, afd, cut;
	ssize_t r;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		if (p->stop) {
			pthread_mutex_unlock(&p->lock);
			break;
		}
		pthread_mutex_unlock(&p->lock);
		pf[0].fd = p->lfd;
		pf[0].events = POLLIN;
		for (i = 0; i < p->n; i++) {
			pf[1 + 2 * i].fd = p->cfd[i];
			pf[1 + 2 * i].events = POLLIN;
			pf[2 + 2 * i].fd = p->afd[i];
			pf[2 + 2 * i].events = POLLIN;
		}
		n = poll(pf, (nfds_t)(1 + 2 * p->n), 50);
		if (n <= 0)
			continue;
		if (pf[0].revents & POLLIN) {
			fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
			afd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			memset(&sa, 0, sizeof(sa));
			sa.sin_family = AF_INET;
			sa.sin_port = htons(p->to_port);
			sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			if (fd < 0 || afd < 0 || p->n == PX_MAX ||
			    connect(afd, (struct sockaddr *)&sa,
				    sizeof(sa)) < 0) {
				if (fd >= 0)
					close(fd);
				if (afd >= 0)
					close(afd);
			} else {
				p->cfd[p->n] = fd;
				p->afd[p->n] = afd;
				p->n++;
			}
			continue;
		}
		for (i = 0; i < p->n; i++) {
			if (pf[1 + 2 * i].revents) {
				r = read(p->cfd[i], buf, sizeof(buf));
				if (r <= 0 || write(p->afd[i], buf,
						    (size_t)r) != r) {
					px_close_all(p);
					break;
				}
			}
			if (pf[2 + 2 * i].revents) {
				r = read(p->afd[i], buf, sizeof(buf));
				pthread_mutex_lock(&p->lock);
				cut = p->cut && r > 0;
				if (cut) {
					p->cut = 0;
					p->cuts++;
				}
				pthread_mutex_unlock(&p->lock);
				if (cut || r <= 0 ||
				    write(p->cfd[i], buf, (size_t)r) != r) {
					/* the reply read here is lost */
					px_close_all(p);
					break;
				}
			}
		}
	}
	px_close_all(p);
	return NULL;
}

static int px_start(struct proxy *p, unsigned short to_port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	p->to_port = to_port;
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(p->lfd, 16) ||
	    getsockname(p->lfd, (struct sockaddr *)&sa, &len))
		return TH_HARD;
	p->port = ntohs(sa.sin_port);
	return pthread_create(&p->th, NULL, px_main, p) ? TH_HARD : 0;
}

static void px_stop(struct proxy *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->th, NULL);
	close(p->lfd);
}

static int mkdir_root(struct bcp_client *c, const char *name,
		      uint64_t *handle)
{
	uint8_t rbuf[1024];
	struct bcp_msg req, rep;
	int ret;

	bcp_msg_init(&req, BCP_OP_MKDIR, 0);
	req.u.mkdir_req.parent = bcp_client_root(c);
	req.u.mkdir_req.mode = 0755;
	req.u.mkdir_req.name_len = (uint32_t)strlen(name);
	req.name = name;
	ret = bcp_client_call(c, &req, &rep, rbuf, sizeof(rbuf));
	if (ret == 0)
		*handle = rep.u.entry_rep.entry.handle;
	return ret;
}

/* A MKDIR whose reply is lost is replayed and answered once. */
static void run_replay(void)
{
	struct tfile tf = { 0 };
	struct bcp_client *c;
	struct proxy px;
	uint64_t h = 0, h2 = 0;
	char addr[64], name[32];
	int ret;

	th_agent_kill(&agent);
	if (agent_restart(&agent) || px_start(&px, agent.port))
		exit(TH_HARD);
	snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%u", px.port);
	snprintf(tf.name, sizeof(tf.name), "data-replay");
	if (client_open(addr, BCP_XFER_TCP, 30000, &tf, &c) < 0) {
		th_failed++;
		px_stop(&px);
		return;
	}
	TH_CHECK(tfile_create(c, &tf) == 0, "create %s", tf.name);
	if (!(bcp_client_hello(c)->features & BCP_FEAT_RESUME)) {
		printf("replay: the agent has no reply cache; not tested\n");
		goto out;
	}
	snprintf(name, sizeof(name), "replayed-%d", (int)getpid());
	pthread_mutex_lock(&px.lock);
	px.cut = 1;
	pthread_mutex_unlock(&px.lock);
	ret = mkdir_root(c, name, &h);
	TH_CHECK(px.cuts == 1, "the proxy cut %d times", px.cuts);
	TH_CHECK(ret == 0, "MKDIR whose reply was lost: %d, expected 0", ret);
	TH_CHECK(tf.resumes >= 1, "no resume ran");
	ret = mkdir_root(c, name, &h2);
	TH_CHECK(ret == -EEXIST, "a second MKDIR: %d, expected -EEXIST", ret);
	printf("replay: MKDIR answered once (handle %llu)\n",
	       (unsigned long long)h);
out:
	bcp_client_destroy(c);
	px_stop(&px);
}

int main(void)
{
	int ret;

	signal(SIGPIPE, SIG_IGN);
	ret = th_agent_start(&agent, NULL);
	if (ret)
		return ret;
	printf("agent %s %s\n", agent.unix_addr, agent.tcp_addr);
	run_restart(agent.unix_addr, BCP_XFER_SHM);
	run_restart(agent.tcp_addr, BCP_XFER_TCP);
	run_timeout(agent.unix_addr, BCP_XFER_SHM);
	run_timeout(agent.tcp_addr, BCP_XFER_TCP);
	run_replay();
	if (th_agent_stop(&agent))
		th_failed++;
	if (th_failed) {
		fprintf(stderr, "%d checks failed\n", th_failed);
		return 1;
	}
	return 0;
}
