/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_kill.c - the agent dies (SIGKILL) while threads keep many I/Os in
 * flight: every I/O completes (with -ENOTCONN once the connection is
 * gone), no thread hangs, and afterwards calls and submissions fail fast
 * with -ENOTCONN.  Run over unix + shm and tcp + tcp data.
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
	struct timespec t0, t1;
	pthread_t tid[NTHREADS];
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

	/* Later calls and I/Os fail fast. */
	bcp_msg_init(&req, BCP_OP_GETATTR, 0);
	req.u.node_req.handle = bcp_client_root(c);
	ret = bcp_client_call(c, &req, &rep, rbuf, BCP_FRAME_MAX);
	TH_CHECK(ret == -ENOTCONN, "GETATTR after the kill: %d", ret);
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
