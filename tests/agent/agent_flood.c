/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_flood.c - connections that never authenticate cannot lock hosts
 * out.  A flood of 200 unix connections that send a valid HELLO and never
 * AUTH, and 300 that send nothing at all, each reopened as soon as the
 * agent drops it, runs while hosts mount: every mount must succeed (a
 * real host finishes HELLO..AUTH at once, so the agent drops the oldest
 * waiting connections, not the newest).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "bcp_frame.h"
#include "harness.h"

#define N_HELLO		200
#define N_SILENT	300
#define N_CONN		(N_HELLO + N_SILENT)
#define MOUNTS		5
#define TRIES		20

static struct t_agent a;
static atomic_int stop;
static atomic_long reopened;

static int flood_open(int hello)
{
	static _Thread_local uint8_t buf[256];
	struct bcp_msg m;
	int fd, n;

	fd = t_raw_connect(&a, 0);
	if (!hello)
		return fd;
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = BCP_VERSION_MIN;
	m.u.hello_req.ver_max = BCP_VERSION_MAX;
	n = bcp_encode(buf, sizeof(buf), &m);
	T_CHECK(n > 0);
	if (bcp_frame_send(fd, buf, (size_t)n, -1) < 0) {
		close(fd);
		return t_raw_connect(&a, 0);
	}
	return fd;
}

static void *flood(void *arg)
{
	static struct pollfd p[N_CONN];
	char buf[4096];
	int i;

	(void)arg;
	for (i = 0; i < N_CONN; i++) {
		p[i].fd = flood_open(i < N_HELLO);
		p[i].events = POLLIN;
	}
	while (!atomic_load(&stop)) {
		if (poll(p, N_CONN, 100) <= 0)
			continue;
		for (i = 0; i < N_CONN; i++) {
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0 || (n < 0 && errno == EAGAIN))
				continue;
			close(p[i].fd);
			p[i].fd = flood_open(i < N_HELLO);
			atomic_fetch_add(&reopened, 1);
		}
	}
	for (i = 0; i < N_CONN; i++)
		close(p[i].fd);
	return NULL;
}

/* One mount; a real host retries a refused one a few times. */
static int mount_once(int *tries)
{
	struct bcp_client_opts o;
	struct bcp_client *c;
	char err[256];
	int ret = -1;

	for (*tries = 1; *tries <= TRIES; (*tries)++) {
		bcp_client_opts_init(&o);
		o.addr = a.unix_addr;
		o.transport = BCP_XFER_SHM;
		o.pool_size = 1u << 20;
		o.timeout_ms = 5000;
		ret = bcp_client_connect(&o, &c, err, sizeof(err));
		if (ret == 0) {
			struct bcp_entry e;

			ret = t_lookup(c, bcp_client_root(c), ".", &e);
			bcp_client_destroy(c);
			if (ret == 0 || ret == -ENOENT || ret == -EINVAL)
				return 0;
		}
		fprintf(stderr, "mount try %d: %s (%s)\n", *tries,
			strerror(-ret), err);
		usleep(100000);
	}
	return ret;
}

int main(void)
{
	struct rlimit rl;
	pthread_t th;
	int i, tries, total = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < N_CONN + 64) {
		fprintf(stderr, "SKIP: %d descriptors needed\n", N_CONN + 64);
		return T_SKIP;
	}
	t_agent_init(&a, "agent_flood");
	t_agent_start(&a);
	pthread_create(&th, NULL, flood, NULL);
	/* until the flood has filled what it can */
	usleep(1000000);
	for (i = 0; i < MOUNTS; i++) {
		if (mount_once(&tries) < 0) {
			atomic_store(&stop, 1);
			pthread_join(th, NULL);
			t_fail("mount %d failed %d times under the flood", i,
			       TRIES);
		}
		total += tries;
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	printf("%d mounts in %d tries; the flood reopened %ld connections\n",
	       MOUNTS, total, atomic_load(&reopened));
	T_CHECK(atomic_load(&reopened) > 0);
	T_EQ(t_agent_stop(&a), 0);
	t_agent_cleanup(&a);
	return 0;
}
