/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_shutdown.c - SIGTERM while writes are in flight (tcp transport):
 * the agent exits 0, prints its summary, and every write it acknowledged
 * is on disk with the right bytes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NIO	256
#define IOLEN	(64u * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int32_t result[NIO];
static int ndone, nacked;

static void io_done(struct bcp_io *io, int32_t res)
{
	pthread_mutex_lock(&lock);
	result[(uintptr_t)io->priv] = res;
	ndone++;
	if (res > 0)
		nacked++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

int main(void)
{
	static uint8_t disk[IOLEN];
	struct bcp_io *ios[NIO];
	struct bcp_client *c;
	struct t_agent a;
	struct bcp_entry e;
	char path[600];
	uint64_t fh;
	int i, fd, checked = 0;

	t_agent_init(&a, "agent_shutdown");
	t_agent_start(&a);
	c = t_client(&a, 1, BCP_XFER_TCP, 32u << 20);
	T_EQ(t_create(c, bcp_client_root(c), "log", 0644, O_RDWR, &e, &fh), 0);
	for (i = 0; i < NIO; i++) {
		struct bcp_io *io = bcp_client_io_get(c, IOLEN);

		if (!io)
			t_hard("pool too small");
		io->op = BCP_OP_BATCH_PUSH;
		io->fh = fh;
		io->offset = (uint64_t)i * IOLEN;
		io->length = IOLEN;
		io->done = io_done;
		io->priv = (void *)(uintptr_t)i;
		memset(io->buf, (uint8_t)(i + 1), IOLEN);
		ios[i] = io;
		result[i] = 1;
	}
	for (i = 0; i < NIO; i++) {
		bcp_client_submit(c, ios[i]);
		if (i == NIO / 8) {
			pthread_mutex_lock(&lock);
			while (nacked < 4)
				pthread_cond_wait(&cond, &lock);
			pthread_mutex_unlock(&lock);
			kill(a.pid, SIGTERM);
		}
	}
	pthread_mutex_lock(&lock);
	while (ndone < NIO)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	T_EQ(t_agent_stop(&a), 0);
	T_CHECK(t_log_has(&a, "summary: BATCH_PUSH"));
	T_CHECK(t_log_has(&a, "bytes pushed"));

	snprintf(path, sizeof(path), "%s/log", a.root);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0);
	for (i = 0; i < NIO; i++) {
		uint32_t j;

		if (result[i] < 0)
			continue;
		T_EQ(result[i], IOLEN);
		T_EQ(pread(fd, disk, IOLEN, (off_t)i * IOLEN), IOLEN);
		for (j = 0; j < IOLEN; j++)
			if (disk[j] != (uint8_t)(i + 1))
				t_fail("acknowledged write %d lost at %u", i,
				       j);
		checked++;
	}
	close(fd);
	T_CHECK(checked >= 4);
	fprintf(stderr, "%d of %d writes acknowledged and verified\n",
		checked, NIO);
	for (i = 0; i < NIO; i++)
		bcp_client_io_put(c, ios[i]);
	bcp_client_destroy(c);
	t_agent_cleanup(&a);
	return 0;
}
