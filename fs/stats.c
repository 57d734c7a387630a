/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats.c - `bluecachefs --stats PATH [--interval N] [--count N]`: what the
 * daemon of the mount holding PATH is doing, as a table for a terminal.
 *
 * The daemon is found by the device number of PATH (any path in the
 * mount): its stats socket is named for it (bcfs_stats_path(), metrics.c).
 * Like iostat, the first report covers the time since the mount and each
 * later one the last interval.  A path on another file system, or on a
 * FUSE mount with no bluecachefs daemon behind it, is refused in one line.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/vfs.h>

#include "bcfs_i.h"

#define STATS_FUSE_MAGIC	0x65735546	/* FUSE_SUPER_MAGIC */

/* Read the snapshot from the socket at path.  0 or -errno. */
static int stats_read(const char *path, struct bcfs_msnap *s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	size_t got = 0;
	ssize_t n;
	int fd, ret = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto out_close;
	}
	while (got < sizeof(*s)) {
		n = read(fd, (char *)s + got, sizeof(*s) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EPROTO;
			goto out_close;
		}
		got += (size_t)n;
	}
	if (s->magic != BCFS_STATS_MAGIC || s->size != sizeof(*s))
		ret = -EPROTO;
out_close:
	close(fd);
	return ret;
}

/* Find the daemon of dev: the first candidate socket that answers. */
static int stats_fetch(dev_t dev, struct bcfs_msnap *s, char *path,
		       size_t len)
{
	unsigned int i;
	int ret = -ENOENT;

	for (i = 0; bcfs_stats_path(dev, i, path, len) == 0; i++) {
		ret = stats_read(path, s);
		if (ret == 0 || ret == -EPROTO)
			return ret;
	}
	return ret;
}

/* Upper bound in microseconds of the bucket holding quantile q of 1000. */
static uint64_t stats_pct(const uint64_t *hist, uint64_t count,
			  unsigned int q)
{
	uint64_t want = (count * q + 999) / 1000, seen = 0;
	unsigned int b;

	for (b = 0; b < BCFS_MHIST; b++) {
		seen += hist[b];
		if (seen >= want && seen)
			return b == BCFS_MHIST - 1 ? UINT64_MAX : 1ull << b;
	}
	return 0;
}

static void stats_us(uint64_t us, char *buf, size_t len)
{
	if (us == UINT64_MAX)
		snprintf(buf, len, ">%llu", 1ull << (BCFS_MHIST - 2));
	else
		snprintf(buf, len, "%" PRIu64, us);
}

/* One report: now minus was (was zeroed for the first). */
static void stats_print(const char *mnt, const struct bcfs_msnap *now,
			const struct bcfs_msnap *was, int first)
{
	double secs = (double)(now->uptime_ns - was->uptime_ns) / 1e9;
	uint64_t hist[BCFS_MHIST];
	char tbuf[32], name[32], p[3][24];
	unsigned int op, b, i, rows = 0;
	uint64_t notices = 0;
	time_t t = time(NULL);

	if (secs <= 0)
		secs = 1e-9;
	strftime(tbuf, sizeof(tbuf), "%F %T", localtime(&t));
	printf("%s  %s  %s %.1f s\n", mnt, tbuf,
	       first ? "since mount," : "last", secs);
	printf("%-18s %10s %8s %9s %9s %9s\n", "op", "ops/s", "err/s",
	       "p50 us", "p90 us", "p99 us");
	for (op = 1; op < BCP_OP_MAX; op++) {
		uint64_t n = now->op[op].count - was->op[op].count;
		uint64_t e = now->op[op].errors - was->op[op].errors;

		if (!n || !bcfs_metrics_op_name((uint16_t)op, name,
						 sizeof(name)))
			continue;
		for (b = 0; b < BCFS_MHIST; b++)
			hist[b] = now->op[op].hist[b] - was->op[op].hist[b];
		stats_us(stats_pct(hist, n, 500), p[0], sizeof(p[0]));
		stats_us(stats_pct(hist, n, 900), p[1], sizeof(p[1]));
		stats_us(stats_pct(hist, n, 990), p[2], sizeof(p[2]));
		printf("%-18s %10.1f %8.1f %9s %9s %9s\n", name,
		       (double)n / secs, (double)e / secs, p[0], p[1], p[2]);
		rows++;
	}
	if (!rows)
		printf("%-18s\n", "(no requests)");
	for (i = 0; i < BCFS_MNOTICE_KINDS; i++)
		notices += now->notices[i] - was->notices[i];
	printf("read %.2f MiB/s  write %.2f MiB/s  reconnects %" PRIu64
	       "  notices %" PRIu64 "\n\n",
	       (double)(now->bytes_read - was->bytes_read) / secs / 1048576,
	       (double)(now->bytes_written - was->bytes_written) / secs /
	       1048576, now->reconnects - was->reconnects, notices);
	fflush(stdout);
}

static int stats_usage(void)
{
	fprintf(stderr, "usage: " BCFS_PROG " --stats PATH [--interval N] "
		"[--count N]\n");
	return 2;
}

int bcfs_stats_main(int argc, char **argv)
{
	struct bcfs_msnap *now, *was;
	unsigned long interval = 0, count = 0, i;
	const char *mnt = NULL;
	char path[4096];
	struct statfs sf;
	struct stat st;
	int a, ret;

	for (a = 2; a < argc; a++) {
		char *end;

		if (!strcmp(argv[a], "--interval") && a + 1 < argc) {
			interval = strtoul(argv[++a], &end, 10);
			if (*end || !interval)
				return stats_usage();
		} else if (!strcmp(argv[a], "--count") && a + 1 < argc) {
			count = strtoul(argv[++a], &end, 10);
			if (*end || !count)
				return stats_usage();
		} else if (!mnt && argv[a][0] != '-') {
			mnt = argv[a];
		} else {
			return stats_usage();
		}
	}
	if (!mnt)
		return stats_usage();
	if (statfs(mnt, &sf) < 0 || stat(mnt, &st) < 0) {
		fprintf(stderr, BCFS_PROG ": %s: %s\n", mnt, strerror(errno));
		return 1;
	}
	if (sf.f_type != STATS_FUSE_MAGIC) {
		fprintf(stderr, BCFS_PROG ": %s: not a bluecachefs mount\n",
			mnt);
		return 1;
	}
	now = calloc(1, sizeof(*now));
	was = calloc(1, sizeof(*was));
	if (!now || !was) {
		fprintf(stderr, BCFS_PROG ": out of memory\n");
		ret = 1;
		goto out_free;
	}
	ret = stats_fetch(st.st_dev, now, path, sizeof(path));
	if (ret == -EPROTO) {
		fprintf(stderr, BCFS_PROG ": %s: the daemon at %s speaks "
			"another version\n", mnt, path);
		ret = 1;
		goto out_free;
	}
	if (ret < 0) {
		fprintf(stderr, BCFS_PROG ": %s: not a bluecachefs mount "
			"(no daemon answers for device %u:%u)\n", mnt,
			major(st.st_dev), minor(st.st_dev));
		ret = 1;
		goto out_free;
	}
	if (!count)
		count = interval ? ~0ul : 1;
	for (i = 0; i < count; i++) {
		if (i) {
			struct bcfs_msnap *tmp = was;

			sleep((unsigned int)interval);
			was = now;
			now = tmp;
			ret = stats_read(path, now);
			if (ret < 0) {
				fprintf(stderr, BCFS_PROG ": %s: the daemon "
					"went away: %s\n", mnt,
					strerror(-ret));
				ret = 1;
				goto out_free;
			}
		}
		stats_print(mnt, now, was, i == 0);
	}
	ret = 0;
out_free:
	free(now);
	free(was);
	return ret;
}
