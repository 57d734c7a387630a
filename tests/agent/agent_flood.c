/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_flood.c - connections that never authenticate cannot lock hosts
 * out.
 *  - The table of connections waiting for their first frame is full and
 *    more arrive while the agent is stopped: the oldest one, whose HELLO
 *    is waiting unread, is served, not dropped to make room.
 *  - A flood from another process of 200 unix connections that send a
 *    valid HELLO and never AUTH, and 300 that send nothing at all, each
 *    reopened as soon as the agent drops it, runs while hosts mount:
 *    every mount must succeed (the agent drops the oldest connection of
 *    the source holding the most, and a real host is another source).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "bcp_frame.h"
#include "harness.h"

#define N_HELLO		200
#define N_SILENT	300
#define N_CONN		(N_HELLO + N_SILENT)
#define MOUNTS		5
#define TRIES		20
#define FULL		256	/* the agent's table of first frames */
#define LATE		100	/* arriving while it is stopped (< backlog) */

static struct t_agent a;
static long reopened;

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

/* The flood, in a child process, until stop_fd reads end of file. */
static void flood(int stop_fd)
{
	static struct pollfd p[N_CONN + 1];
	char buf[4096];
	int i;

	for (i = 0; i < N_CONN; i++) {
		p[i].fd = flood_open(i < N_HELLO);
		p[i].events = POLLIN;
	}
	p[N_CONN].fd = stop_fd;
	p[N_CONN].events = POLLIN;
	for (;;) {
		if (poll(p, N_CONN + 1, 100) <= 0)
			continue;
		if (p[N_CONN].revents)
			break;
		for (i = 0; i < N_CONN; i++) {
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0 || (n < 0 && errno == EAGAIN))
				continue;
			close(p[i].fd);
			p[i].fd = flood_open(i < N_HELLO);
			reopened++;
		}
	}
	for (i = 0; i < N_CONN; i++)
		close(p[i].fd);
}

/* Start the flood in a child; *stop_fd closed ends it. */
static pid_t flood_start(int *stop_fd, int *count_fd)
{
	int sp[2], cp[2];
	pid_t pid;

	T_CHECK(pipe(sp) == 0 && pipe(cp) == 0);
	pid = fork();
	T_CHECK(pid >= 0);
	if (pid == 0) {
		close(sp[1]);
		close(cp[0]);
		flood(sp[0]);
		if (write(cp[1], &reopened, sizeof(reopened)) < 0)
			_exit(1);
		_exit(0);
	}
	close(sp[0]);
	close(cp[1]);
	*stop_fd = sp[1];
	*count_fd = cp[0];
	return pid;
}

static long flood_stop(pid_t pid, int stop_fd, int count_fd)
{
	long n = 0;
	int st;

	close(stop_fd);
	if (read(count_fd, &n, sizeof(n)) != sizeof(n))
		n = -1;
	close(count_fd);
	T_CHECK(waitpid(pid, &st, 0) == pid);
	return n;
}

/*
 * FULL connections wait for their first frame, the oldest first; the
 * agent stops; LATE more connect, then the oldest sends its HELLO; the
 * agent goes on.  Its listener is ready before the HELLO is, so the LATE
 * ones are accepted first and need room: the HELLO waiting unread must
 * be answered, not dropped.
 */
static void full_table(void)
{
	static int fds[FULL + LATE];
	static uint8_t buf[4096];
	struct bcp_msg m, rep;
	enum bcp_err why;
	int i, n;

	for (i = 0; i < FULL; i++)
		fds[i] = t_raw_connect(&a, 0);
	usleep(300000);		/* accepted: the listener's backlog is less */
	T_CHECK(kill(a.pid, SIGSTOP) == 0);
	for (i = FULL; i < FULL + LATE; i++)
		fds[i] = t_raw_connect(&a, 0);
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = BCP_VERSION_MIN;
	m.u.hello_req.ver_max = BCP_VERSION_MAX;
	n = bcp_encode(buf, sizeof(buf), &m);
	T_CHECK(n > 0);
	T_CHECK(bcp_frame_send(fds[0], buf, (size_t)n, -1) == 0);
	usleep(10000);
	T_CHECK(kill(a.pid, SIGCONT) == 0);
	n = bcp_frame_recv(fds[0], buf, sizeof(buf), NULL, 10000, &why);
	if (n <= 0)
		t_fail("the oldest waiting connection's HELLO was not "
		       "answered: %s", n == 0 ? "closed" : strerror(-n));
	T_CHECK(bcp_decode(buf, (size_t)n, &rep, &why) == 0);
	T_EQ(rep.hdr.opcode, BCP_OP_HELLO);
	T_EQ(rep.hdr.status, 0);
	for (i = 0; i < FULL + LATE; i++)
		close(fds[i]);
	printf("full table: the waiting HELLO was answered\n");
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
	int i, tries, total = 0, stop_fd, count_fd;
	pid_t pid;
	long n;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur < N_CONN + FULL + LATE + 64) {
		fprintf(stderr, "SKIP: %d descriptors needed\n",
			N_CONN + FULL + LATE + 64);
		return T_SKIP;
	}
	t_agent_init(&a, "agent_flood");
	t_agent_start(&a);
	full_table();
	pid = flood_start(&stop_fd, &count_fd);
	/* until the flood has filled what it can */
	usleep(1000000);
	for (i = 0; i < MOUNTS; i++) {
		if (mount_once(&tries) < 0) {
			flood_stop(pid, stop_fd, count_fd);
			t_fail("mount %d failed %d times under the flood", i,
			       TRIES);
		}
		total += tries;
	}
	n = flood_stop(pid, stop_fd, count_fd);
	printf("%d mounts in %d tries; the flood reopened %ld connections\n",
	       MOUNTS, total, n);
	T_CHECK(n > 0);
	T_EQ(t_agent_stop(&a), 0);
	t_agent_cleanup(&a);
	return 0;
}
