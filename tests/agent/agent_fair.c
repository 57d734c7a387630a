/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_fair.c - sessions share a worker's staging slots fairly.  On one
 * worker with 8 slots of 64 KiB (so at most 2 per session):
 *
 *  - a session with 32 large batches queued must not make another
 *    session's small batch wait for all of them: sessions take turns;
 *  - a host that stops reading its tcp data connection (SIGSTOP) stalls
 *    only its own transfers, holding at most its share of the slots, and
 *    another host's read still completes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"

#define BIG		(16u << 20)
#define A_BATCHES	32
#define A_SEGS		4
#define CHILD_THREADS	4
#define CHILD_IO	(8u << 20)

static struct t_agent a;
static pid_t child = -1;

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: a read waited for a stalled or "
				  "busier session for 60 s\n";

	(void)sig;
	if (child > 0)
		kill(child, SIGKILL);
	if (a.pid > 0)
		kill(a.pid, SIGKILL);
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void turns(void)
{
	static uint8_t buf[A_BATCHES][4096];
	uint8_t bbuf[4096], *ra, *rb;
	struct bcp_seg segs[A_SEGS], bseg;
	struct bcp_msg m, rep;
	uint64_t fha, fhb;
	int fa, fb, i, a_done = 0, b_done = 0, a_before_b = -1;

	fa = t_raw_shm_session(&a, "big", BIG, &ra, &fha);
	fb = t_raw_shm_session(&a, "big", 1u << 20, &rb, &fhb);
	for (i = 0; i < A_SEGS; i++)
		segs[i] = (struct bcp_seg){ fha, (uint64_t)i << 20, 1u << 20,
					    7, (uint64_t)i << 20 };
	for (i = 0; i < A_BATCHES; i++) {
		bcp_msg_init(&m, BCP_OP_BATCH_PULL, 100 + (uint64_t)i);
		m.u.batch_req.count = A_SEGS;
		m.segs = segs;
		T_EQ(t_raw_send(fa, &m), 0);
	}
	bseg = (struct bcp_seg){ fhb, 0, 65536, 7, 0 };
	bcp_msg_init(&m, BCP_OP_BATCH_PULL, 7);
	m.u.batch_req.count = 1;
	m.segs = &bseg;
	T_EQ(t_raw_send(fb, &m), 0);
	while (a_done < A_BATCHES || !b_done) {
		struct pollfd p[2] = { { fb, POLLIN, 0 }, { fa, POLLIN, 0 } };

		T_CHECK(poll(p, 2, 30000) > 0);
		/* the small batch's reply first when both are there */
		if (!b_done && (p[0].revents & POLLIN)) {
			T_EQ(t_raw_recv(fb, &rep, bbuf, sizeof(bbuf), 5000), 0);
			T_EQ(bcp_msg_status(&rep, 0), 65536);
			b_done = 1;
			a_before_b = a_done;
			continue;
		}
		if (p[1].revents & POLLIN) {
			T_EQ(t_raw_recv(fa, &rep, buf[a_done], 4096, 5000), 0);
			for (i = 0; i < A_SEGS; i++)
				T_EQ(bcp_msg_status(&rep, (uint32_t)i),
				     1u << 20);
			a_done++;
		}
	}
	printf("the small batch was answered after %d of %d large ones\n",
	       a_before_b, A_BATCHES);
	if (a_before_b >= A_BATCHES / 2)
		t_fail("a small batch waited for %d of %d large batches of "
		       "another session", a_before_b, A_BATCHES);
	close(fa);
	close(fb);
}

static void *child_pull(void *arg)
{
	struct bcp_client *c = arg;
	static uint8_t data[CHILD_THREADS][CHILD_IO];
	static int n;
	int me = __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED);
	uint64_t root = bcp_client_root(c), fh;
	struct bcp_entry e;

	if (t_lookup(c, root, "big", &e) < 0 || t_open(c, e.handle, O_RDONLY,
						       &fh) < 0)
		_exit(3);
	for (;;)
		if (t_io(c, BCP_OP_BATCH_PULL, fh, 0, data[me], CHILD_IO) < 0)
			_exit(4);
	return NULL;
}

static void stalled_host(void)
{
	struct bcp_client *c;
	uint64_t root, fh;
	struct bcp_entry e;
	static uint8_t small[65536];
	pthread_t th;
	int p[2], i;
	char ok;

	/* the host that keeps working, connected first */
	c = t_client(&a, 0, BCP_XFER_SHM, 1u << 20);
	root = bcp_client_root(c);
	T_EQ(t_lookup(c, root, "big", &e), 0);
	T_EQ(t_open(c, e.handle, O_RDONLY, &fh), 0);
	if (pipe(p) < 0)
		t_hard("pipe: %s", strerror(errno));
	child = fork();
	if (child < 0)
		t_hard("fork: %s", strerror(errno));
	if (child == 0) {
		struct bcp_client *cc;

		a.pid = -1;	/* not ours to stop */
		cc = t_client(&a, 1, BCP_XFER_TCP,
			      (size_t)CHILD_THREADS * CHILD_IO * 2);
		if (bcp_client_transport(cc) != BCP_XFER_TCP)
			_exit(2);
		for (i = 0; i < CHILD_THREADS; i++)
			pthread_create(&th, NULL, child_pull, cc);
		if (write(p[1], "x", 1) != 1)
			_exit(5);
		for (;;)
			pause();
	}
	close(p[1]);
	if (read(p[0], &ok, 1) != 1)
		t_hard("the pulling host did not start");
	close(p[0]);
	usleep(300000);
	kill(child, SIGSTOP);
	/* let its transfers fill the socket buffers and stall */
	usleep(1000000);
	for (i = 0; i < 20; i++)
		T_EQ(t_io(c, BCP_OP_BATCH_PULL, fh, (uint64_t)i << 16, small,
			  sizeof(small)), (int)sizeof(small));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	child = -1;
	bcp_client_destroy(c);
}

int main(void)
{
	static uint8_t chunk[1u << 20];
	char path[600];
	unsigned int i;
	int fd;

	signal(SIGALRM, on_alarm);
	t_agent_init(&a, "agent_fair");
	snprintf(path, sizeof(path), "%s/big", a.root);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	for (i = 0; i < sizeof(chunk); i++)
		chunk[i] = (uint8_t)(i * 3 + 1);
	for (i = 0; fd >= 0 && i < BIG / sizeof(chunk); i++)
		if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			t_hard("write %s: %s", path, strerror(errno));
	if (fd < 0)
		t_hard("create %s: %s", path, strerror(errno));
	close(fd);
	a.extra[0] = "--workers";
	a.extra[1] = "1";
	a.extra[2] = "--queue-depth";
	a.extra[3] = "8";
	a.extra[4] = "--inline-max";
	a.extra[5] = "0";
	t_agent_start(&a);
	alarm(60);
	turns();
	stalled_host();
	alarm(0);
	T_EQ(t_agent_stop(&a), 0);
	t_agent_cleanup(&a);
	return 0;
}
