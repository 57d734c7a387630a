/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_spin.c - the receiver's adaptive spinning against a real agent:
 * calls are answered while it spins, it stops spinning the spin time
 * after the last frame (an idle client burns no CPU), a bad
 * BLUECACHE_SPIN_USEC turns spinning off without failing the connection,
 * submitters that overlap all send their own I/O while the receiver
 * spins, and a receiver that does not spin sleeps once per answer (not
 * once more each time the agent reads a request: a sleeping recv() would
 * be woken by that too).
 */
#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bcp_client.h"
#include "harness.h"

#define SPIN_USEC	"10000"		/* 10 ms, the most allowed */
#define NTHREADS	4
#define NIOS		2000

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int getattr_root(struct bcp_client *c, uint8_t *rbuf)
{
	struct bcp_msg req, rep;

	bcp_msg_init(&req, BCP_OP_GETATTR, 0);
	req.u.node_req.handle = bcp_client_root(c);
	return bcp_client_call(c, &req, &rep, rbuf, BCP_FRAME_MAX);
}

/* Voluntary context switches of this process's receiver thread, or -1. */
static long receiver_switches(void)
{
	char path[300], line[256];
	struct dirent *d;
	long n = -1;
	DIR *dir;
	FILE *f;

	dir = opendir("/proc/self/task");
	if (!dir)
		return -1;
	while ((d = readdir(dir)) && n < 0) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f) ||
		    strcmp(line, "bcp-recv\n")) {
			fclose(f);
			continue;
		}
		fclose(f);
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "voluntary_ctxt_switches: %ld",
				   &n) == 1)
				break;
		fclose(f);
	}
	closedir(dir);
	return n;
}

struct io_wait {
	struct bcp_io *io;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
	int result;
};

static void io_done(struct bcp_io *io, int result)
{
	struct io_wait *w = io->priv;

	pthread_mutex_lock(&w->lock);
	w->done = 1;
	w->result = result;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

struct pusher {
	struct bcp_client *c;
	uint64_t fh;
	int idx;
	int failed;
};

/* NIOS 4 KiB pushes then pulls of this thread's own block, checked. */
static void *pusher_main(void *arg)
{
	struct pusher *p = arg;
	struct io_wait w = { .lock = PTHREAD_MUTEX_INITIALIZER,
			     .cond = PTHREAD_COND_INITIALIZER };
	int i, op;

	w.io = bcp_client_io_get(p->c, 4096);
	if (!w.io) {
		p->failed++;
		return NULL;
	}
	for (i = 0; i < NIOS; i++) {
		op = i & 1 ? BCP_OP_BATCH_PULL : BCP_OP_BATCH_PUSH;
		if (op == BCP_OP_BATCH_PUSH)
			memset(w.io->buf, (p->idx << 4) | (i & 15), 4096);
		w.io->op = op;
		w.io->fh = p->fh;
		w.io->offset = (uint64_t)p->idx * 4096;
		w.io->length = 4096;
		w.io->done = io_done;
		w.io->priv = &w;
		w.done = 0;
		bcp_client_submit(p->c, w.io);
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		if (w.result != 4096 ||
		    (op == BCP_OP_BATCH_PULL &&
		     ((uint8_t *)w.io->buf)[4095] !=
		     (uint8_t)((p->idx << 4) | ((i - 1) & 15)))) {
			fprintf(stderr, "thread %d, I/O %d: %d\n", p->idx, i,
				w.result);
			p->failed++;
			break;
		}
	}
	bcp_client_io_put(p->c, w.io);
	return NULL;
}

static struct bcp_client *connect_unix(struct th_agent *a)
{
	struct bcp_client_opts o;
	struct bcp_client *c = NULL;
	char err[512];
	int ret;

	bcp_client_opts_init(&o);
	o.addr = a->unix_addr;
	o.pool_size = 4u << 20;
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	TH_CHECK(ret == 0, "connect %s: %d %s", a->unix_addr, ret, err);
	return ret ? NULL : c;
}

int main(void)
{
	struct pusher p[NTHREADS];
	pthread_t tid[NTHREADS];
	struct bcp_msg req, rep;
	struct bcp_client *c;
	struct th_agent a;
	struct timespec ts = { 0, 500000000 };
	uint8_t *rbuf;
	double t0, spent;
	int i, ret;

	alarm(120);
	rbuf = malloc(BCP_FRAME_MAX);
	if (!rbuf)
		return TH_HARD;
	ret = th_agent_start(&a, NULL);
	if (ret)
		return ret;

	/* A bad setting turns spinning off, and nothing else. */
	setenv("BLUECACHE_SPIN_USEC", "lots", 1);
	c = connect_unix(&a);
	if (c) {
		TH_CHECK(getattr_root(c, rbuf) == 0, "GETATTR, no spin");
		bcp_client_destroy(c);
	}

	/*
	 * Without spinning the receiver sleeps between answers: once per
	 * call, woken by the answer.  Sleeping in recv() it was woken a
	 * second time by the agent's read of each request (a stream
	 * socket's readers and writers share one wait queue).
	 */
	setenv("BLUECACHE_SPIN_USEC", "0", 1);
	c = connect_unix(&a);
	if (c) {
		long s0, s1;

		struct timespec gap = { 0, 200000 };

		ret = getattr_root(c, rbuf);
		s0 = receiver_switches();
		/* the gap: the receiver is asleep when the next one goes */
		for (i = 0; i < 2000 && !ret; i++) {
			nanosleep(&gap, NULL);
			ret = getattr_root(c, rbuf);
		}
		s1 = receiver_switches();
		TH_CHECK(ret == 0, "GETATTR without spin: %d", ret);
		TH_CHECK(s0 >= 0 && s1 >= 0, "no receiver thread found");
		printf("receiver: %.2f sleeps per call without spinning\n",
		       (double)(s1 - s0) / 2000);
		TH_CHECK(s1 - s0 < 2500,
			 "receiver slept %ld times in 2000 calls", s1 - s0);
		bcp_client_destroy(c);
	}

	setenv("BLUECACHE_SPIN_USEC", SPIN_USEC, 1);
	c = connect_unix(&a);
	if (!c)
		goto out_stop;
	for (i = 0; i < 1000; i++) {
		ret = getattr_root(c, rbuf);
		if (ret) {
			TH_CHECK(ret == 0, "GETATTR %d: %d", i, ret);
			break;
		}
	}

	/*
	 * Idle: the receiver spins at most 10 ms after the last frame,
	 * then sleeps.  Half a second of it costs the process far less
	 * than the half CPU-second a spinner that never stops would.
	 */
	t0 = cpu_seconds();
	nanosleep(&ts, NULL);
	spent = cpu_seconds() - t0;
	printf("idle 0.5 s after 1000 calls: %.3f CPU seconds\n", spent);
	TH_CHECK(spent < 0.1, "idle for 0.5 s, spent %.3f CPU seconds",
		 spent);

	/* Overlapping submitters, each its own block of one file. */
	bcp_msg_init(&req, BCP_OP_CREATE, 0);
	req.u.create_req.parent = bcp_client_root(c);
	req.u.create_req.mode = 0100644;
	req.u.create_req.umask = 022;
	req.u.create_req.flags = O_RDWR;
	req.u.create_req.uid = getuid();
	req.u.create_req.gid = getgid();
	req.u.create_req.name_len = 4;
	req.name = "spin";
	ret = bcp_client_call(c, &req, &rep, rbuf, BCP_FRAME_MAX);
	TH_CHECK(ret == 0, "CREATE: %d", ret);
	if (!ret) {
		for (i = 0; i < NTHREADS; i++) {
			p[i] = (struct pusher){ .c = c, .idx = i,
				.fh = rep.u.create_rep.fh };
			pthread_create(&tid[i], NULL, pusher_main, &p[i]);
		}
		for (i = 0; i < NTHREADS; i++) {
			pthread_join(tid[i], NULL);
			TH_CHECK(!p[i].failed, "thread %d failed", i);
		}
	}
	bcp_client_destroy(c);
out_stop:
	if (th_agent_stop(&a))
		th_failed++;
	free(rbuf);
	if (th_failed) {
		fprintf(stderr, "%d check(s) failed\n", th_failed);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
