/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_kill.c - the agent dies (SIGKILL) while threads keep many I/Os in
 * flight: every I/O completes (with -ENOTCONN once the connection is
 * gone), no thread hangs, and afterwards calls and submissions fail fast
 * with -ENOTCONN.  Asynchronous calls are checked on the way: answered
 * with the agent's status or -EMSGSIZE while it lives, every one in flight
 * at the kill completed with -ENOTCONN, refused at once afterwards.  Run
 * over unix + shm and tcp + tcp data.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bcp_client.h"
#include "harness.h"

#define NTHREADS	4
#define DEPTH		8
#define IO_LEN		(256u * 1024)

struct ctx {
	struct bcp_client *c;
	uint64_t fh;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int inflight;
	long done_ok, done_enotconn, done_other;
	int stop;
};

static void io_done(struct bcp_io *io, int32_t result)
{
	struct ctx *x = io->priv;
	uint32_t len = io->length;

	bcp_client_io_put(x->c, io);
	pthread_mutex_lock(&x->lock);
	if (result == (int32_t)len || result == 0)
		x->done_ok++;
	else if (result == -ENOTCONN)
		x->done_enotconn++;
	else
		x->done_other++;
	if (result == -ENOTCONN)
		x->stop = 1;
	x->inflight--;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

/* Asynchronous calls: a GETATTR of the root kept ACALLS deep. */
#define ACALLS		8

struct acall {
	struct bcp_call call;
	uint8_t rbuf[512];
};

struct actx {
	struct bcp_client *c;
	struct acall calls[ACALLS];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int free[ACALLS], nfree;
	long sent, ok, enotconn, other;
	int stop;
};

static void acall_done(struct bcp_call *call, int result)
{
	struct actx *x = call->priv;

	pthread_mutex_lock(&x->lock);
	if (result == 0 && call->rep.u.attr_rep.attr.mode & 040000)
		x->ok++;
	else if (result == -ENOTCONN)
		x->enotconn++;
	else
		x->other++;
	if (result == -ENOTCONN)
		x->stop = 1;
	x->free[x->nfree++] = (int)((struct acall *)call - x->calls);
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

static void *acaller(void *arg)
{
	struct actx *x = arg;
	struct bcp_msg req;
	int i, ret;

	for (;;) {
		pthread_mutex_lock(&x->lock);
		while (!x->nfree && !x->stop)
			pthread_cond_wait(&x->cond, &x->lock);
		if (x->stop) {
			pthread_mutex_unlock(&x->lock);
			break;
		}
		i = x->free[--x->nfree];
		x->sent++;
		pthread_mutex_unlock(&x->lock);
		bcp_msg_init(&req, BCP_OP_GETATTR, 0);
		req.u.node_req.handle = bcp_client_root(x->c);
		x->calls[i].call.rbuf = x->calls[i].rbuf;
		x->calls[i].call.rcap = sizeof(x->calls[i].rbuf);
		x->calls[i].call.done = acall_done;
		x->calls[i].call.priv = x;
		ret = bcp_client_call_async(x->c, &req, &x->calls[i].call);
		if (ret < 0) {
			/* refused: nothing was sent, done does not run */
			pthread_mutex_lock(&x->lock);
			x->sent--;
			x->free[x->nfree++] = i;
			x->stop = 1;
			pthread_mutex_unlock(&x->lock);
			TH_CHECK(ret == -ENOTCONN, "async call refused: %d", ret);
			break;
		}
	}
	/* Every call of ours completes. */
	pthread_mutex_lock(&x->lock);
	while (x->nfree < ACALLS)
		pthread_cond_wait(&x->cond, &x->lock);
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

/* One asynchronous call, waited for: its result. */
struct await {
	struct bcp_call call;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, result;
	uint8_t rbuf[64];
};

static void await_done(struct bcp_call *call, int result)
{
	struct await *w = (struct await *)call;

	pthread_mutex_lock(&w->lock);
	w->result = result;
	w->done = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static int await_call(struct bcp_client *c, struct bcp_msg *req, size_t rcap)
{
	struct await w = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
	};
	int ret;

	w.call.rbuf = w.rbuf;
	w.call.rcap = rcap;
	w.call.done = await_done;
	ret = bcp_client_call_async(c, req, &w.call);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	return w.result;
}

static void *worker(void *arg)
{
	struct ctx *x = arg;
	struct bcp_io *io;
	uint64_t n = 0;

	for (;;) {
		pthread_mutex_lock(&x->lock);
		while (x->inflight >= DEPTH && !x->stop)
			pthread_cond_wait(&x->cond, &x->lock);
		if (x->stop) {
			pthread_mutex_unlock(&x->lock);
			break;
		}
		x->inflight++;
		pthread_mutex_unlock(&x->lock);
		io = bcp_client_io_get(x->c, IO_LEN);
		if (!io) {
			pthread_mutex_lock(&x->lock);
			x->inflight--;
			x->done_other++;
			pthread_mutex_unlock(&x->lock);
			break;
		}
		io->op = n % 2 ? BCP_OP_BATCH_PULL : BCP_OP_BATCH_PUSH;
		io->fh = x->fh;
		io->offset = (n % 64) * IO_LEN;
		io->length = IO_LEN;
		io->done = io_done;
		io->priv = x;
		memset(io->buf, (int)n, IO_LEN);
		bcp_client_submit(x->c, io);
		n++;
	}
	/* Every I/O of ours completes. */
	pthread_mutex_lock(&x->lock);
	while (x->inflight)
		pthread_cond_wait(&x->cond, &x->lock);
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

static void sync_done(struct bcp_io *io, int32_t result)
{
	*(int32_t *)io->priv = result;
}

static void run(const char *addr, const char *name)
{
	struct bcp_client_opts o;
	struct bcp_client *c;
	struct bcp_msg req, rep;
	struct th_agent a;
	struct ctx x;
	struct actx ax;
	struct timespec t0, t1;
	pthread_t tid[NTHREADS], atid;
	struct bcp_io *io;
	char err[512], real_addr[PATH_MAX + 64];
	uint8_t *rbuf = malloc(BCP_FRAME_MAX);
	int32_t res;
	int ret, i;

	if (th_agent_start(&a, NULL)) {
		th_failed++;
		free(rbuf);
		return;
	}
	snprintf(real_addr, sizeof(real_addr), "%s",
		 !strcmp(addr, "unix") ? a.unix_addr : a.tcp_addr);
	printf("== %s\n", real_addr);
	bcp_client_opts_init(&o);
	o.addr = real_addr;
	o.pool_size = 32u << 20;
	o.timeout_ms = 20000;
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	TH_CHECK(ret == 0, "connect: %d %s", ret, err);
	if (ret)
		goto out_stop;

	bcp_msg_init(&req, BCP_OP_CREATE, 0);
	req.u.create_req.parent = bcp_client_root(c);
	req.u.create_req.mode = 0100600;
	req.u.create_req.flags = O_RDWR;
	req.u.create_req.uid = getuid();
	req.u.create_req.gid = getgid();
	req.u.create_req.name_len = (uint16_t)strlen(name);
	req.name = name;
	ret = bcp_client_call(c, &req, &rep, rbuf, BCP_FRAME_MAX);
	TH_CHECK(ret == 0, "CREATE: %d", ret);
	if (ret)
		goto out_destroy;

	/* asynchronous calls: the agent's status, and a reply too long */
	bcp_msg_init(&req, BCP_OP_LOOKUP, 0);
	req.u.named_req.parent = bcp_client_root(c);
	req.u.named_req.name_len = 7;
	req.name = "missing";
	ret = await_call(c, &req, 64);
	TH_CHECK(ret == -ENOENT, "async LOOKUP of a missing name: %d", ret);
	req.name = name;
	req.u.named_req.name_len = (uint16_t)strlen(name);
	ret = await_call(c, &req, 16);
	TH_CHECK(ret == -EMSGSIZE, "async LOOKUP into 16 bytes: %d", ret);

	memset(&ax, 0, sizeof(ax));
	ax.c = c;
	pthread_mutex_init(&ax.lock, NULL);
	pthread_cond_init(&ax.cond, NULL);
	for (i = 0; i < ACALLS; i++)
		ax.free[ax.nfree++] = i;
	pthread_create(&atid, NULL, acaller, &ax);

	memset(&x, 0, sizeof(x));
	x.c = c;
	x.fh = rep.u.create_rep.fh;
	pthread_mutex_init(&x.lock, NULL);
	pthread_cond_init(&x.cond, NULL);
	for (i = 0; i < NTHREADS; i++)
		pthread_create(&tid[i], NULL, worker, &x);
	usleep(300000);
	th_agent_kill(&a);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(tid[i], NULL);
	pthread_join(atid, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("ok %ld enotconn %ld other %ld, drained in %ld ms\n",
	       x.done_ok, x.done_enotconn, x.done_other,
	       (long)((t1.tv_sec - t0.tv_sec) * 1000 +
		      (t1.tv_nsec - t0.tv_nsec) / 1000000));
	TH_CHECK(x.done_ok > 0, "no I/O succeeded before the kill");
	TH_CHECK(x.done_enotconn > 0, "no I/O saw -ENOTCONN");
	TH_CHECK(x.done_other == 0, "%ld I/Os with other results",
		 x.done_other);
	TH_CHECK(t1.tv_sec - t0.tv_sec < 10, "draining took too long");
	printf("async calls: sent %ld, ok %ld, enotconn %ld, other %ld\n",
	       ax.sent, ax.ok, ax.enotconn, ax.other);
	TH_CHECK(ax.ok > 0, "no async call succeeded before the kill");
	TH_CHECK(ax.ok + ax.enotconn == ax.sent && ax.other == 0,
		 "async calls: %ld sent, %ld ok, %ld enotconn, %ld other",
		 ax.sent, ax.ok, ax.enotconn, ax.other);

	/* Later calls and I/Os fail fast. */
	bcp_msg_init(&req, BCP_OP_GETATTR, 0);
	req.u.node_req.handle = bcp_client_root(c);
	ret = bcp_client_call(c, &req, &rep, rbuf, BCP_FRAME_MAX);
	TH_CHECK(ret == -ENOTCONN, "GETATTR after the kill: %d", ret);
	ret = await_call(c, &req, 64);
	TH_CHECK(ret == -ENOTCONN, "async GETATTR after the kill: %d", ret);
	io = bcp_client_io_get(c, 4096);
	TH_CHECK(io != NULL, "io_get after the kill");
	if (io) {
		res = 1;
		io->op = BCP_OP_BATCH_PULL;
		io->fh = x.fh;
		io->length = 4096;
		io->done = sync_done;
		io->priv = &res;
		bcp_client_submit(c, io);
		TH_CHECK(res == -ENOTCONN, "submit after the kill: %d", res);
		bcp_client_io_put(c, io);
	}
	bcp_client_forget(c, 12345, 1);
out_destroy:
	bcp_client_destroy(c);
out_stop:
	if (th_agent_stop(&a))
		th_failed++;
	free(rbuf);
}

int main(void)
{
	alarm(120);
	if (!th_agent_path()) {
		printf("SKIP: no agent binary at $top_builddir/agent/bluecache-agent\n");
		return TH_SKIP;
	}
	run("unix", "kill-shm");
	run("tcp", "kill-tcp");
	if (th_failed) {
		fprintf(stderr, "%d check(s) failed\n", th_failed);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
