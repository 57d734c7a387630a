/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_pull_gap.c - a BATCH_PULL segment's status counts only the data
 * delivered without a gap.  A file is cut short and grown back over and
 * over while a host pulls a segment of many chunks from it: a chunk in the
 * middle that comes up short must end the segment there, even when a
 * later chunk read data, or the host takes the stale bytes of its own
 * buffer between them for file data.  The staging path (--inline-max 0)
 * and the inline path are both checked.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"

#define SEG_LEN		(1u << 20)	/* 16 chunks of the harness's 64K */
#define CUT		(100u << 10)	/* the short size: mid-chunk 2 */
#define ROUNDS		3000
#define SECONDS		20

static uint8_t pat[SEG_LEN];
static atomic_int stop;

/* Cut the file to CUT bytes and write the rest back, the same bytes. */
static void *grower(void *arg)
{
	int fd = *(int *)arg;

	while (!atomic_load(&stop)) {
		if (ftruncate(fd, CUT) < 0 ||
		    pwrite(fd, pat + CUT, SEG_LEN - CUT, CUT) !=
			    (ssize_t)(SEG_LEN - CUT))
			t_hard("grower: %s", strerror(errno));
	}
	return NULL;
}

static void pull_rounds(struct t_agent *a, const char *path)
{
	uint8_t buf[4096], *region;
	struct bcp_msg m, rep;
	struct bcp_seg seg;
	time_t t_end = time(NULL) + SECONDS;
	int fd, ffd, round, shorts = 0;
	pthread_t th;
	uint64_t fh;

	fd = t_raw_shm_session(a, "grow", SEG_LEN, &region, &fh);
	ffd = open(path, O_RDWR);
	if (ffd < 0)
		t_hard("open %s: %s", path, strerror(errno));
	atomic_store(&stop, 0);
	pthread_create(&th, NULL, grower, &ffd);
	for (round = 0; round < ROUNDS && time(NULL) < t_end; round++) {
		int32_t st;

		memset(region, 0xee, SEG_LEN);
		seg = (struct bcp_seg){ fh, 0, SEG_LEN, 7, 0 };
		bcp_msg_init(&m, BCP_OP_BATCH_PULL, 100 + (uint64_t)round);
		m.u.batch_req.count = 1;
		m.segs = &seg;
		T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
		st = bcp_msg_status(&rep, 0);
		T_CHECK(st >= 0 && st <= (int32_t)SEG_LEN);
		if (st < (int32_t)SEG_LEN)
			shorts++;
		/*
		 * A read racing the extension may see zeros where the
		 * writer has not copied its bytes yet (read(2) on the file
		 * itself may too); the poison of the host's own buffer it
		 * must never see.
		 */
		if (memcmp(region, pat, (size_t)st)) {
			size_t i = 0;

			while (i < (size_t)st &&
			       (region[i] == pat[i] || region[i] == 0))
				i++;
			if (i < (size_t)st)
				t_fail("round %d: status %d, but byte %zu of "
				       "the region is %#x, not the file's %#x",
				       round, st, i, region[i], pat[i]);
		}
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	printf("%d rounds, %d short\n", round, shorts);
	close(ffd);
	close(fd);
}

int main(void)
{
	struct t_agent a;
	char path[600];
	unsigned int i;
	int fd;

	for (i = 0; i < SEG_LEN; i++)
		pat[i] = (uint8_t)(i * 7 + i / 4099 + 1);
	t_agent_init(&a, "agent_pull_gap");
	snprintf(path, sizeof(path), "%s/grow", a.root);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || pwrite(fd, pat, SEG_LEN, 0) != (ssize_t)SEG_LEN)
		t_hard("create %s: %s", path, strerror(errno));
	close(fd);
	a.extra[0] = "--inline-max";
	a.extra[1] = "0";
	t_agent_start(&a);
	pull_rounds(&a, path);
	T_EQ(t_agent_stop(&a), 0);

	/* the inline path first, the rest of a segment through staging */
	a.extra[1] = "1M";
	t_agent_start(&a);
	pull_rounds(&a, path);
	T_EQ(t_agent_stop(&a), 0);
	t_agent_cleanup(&a);
	return 0;
}
