/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics.h - private to bluecachefs: what the daemon counts of the
 * requests it sends the agent, the stats socket that `bluecachefs --stats`
 * reads, and the Prometheus endpoint of -o metrics (doc/metrics.md).
 *
 * Counters are updated by any FUSE thread and by the client library's
 * receiver thread with relaxed atomic adds; a reader may see one counter
 * a request ahead of another, each on its own only grows.
 */
#ifndef BCFS_METRICS_H
#define BCFS_METRICS_H

#include <stdint.h>
#include <sys/types.h>

#include "bcp_wire.h"

/* Buckets: <= 2^i microseconds for i < BCFS_MHIST - 1, then +Inf. */
#define BCFS_MHIST		26
/* notification kinds counted: BCP_NOTIFY_INODE .. BCP_NOTIFY_RESET */
#define BCFS_MNOTICE_KINDS	4
/* "BCFSTAT1": the stats socket's snapshot, as this build lays it out */
#define BCFS_STATS_MAGIC	0x3154415453464342ull

/* One agent operation (read and write: the data path's batches). */
struct bcfs_mop {
	uint64_t count;
	uint64_t errors;
	uint64_t sum_ns;
	uint64_t hist[BCFS_MHIST];
};

/* What the stats socket sends: this whole struct, native byte order. */
struct bcfs_msnap {
	uint64_t magic;
	uint64_t size;			/* sizeof(struct bcfs_msnap) */
	uint64_t uptime_ns;		/* since the mount */
	uint64_t bytes_read;		/* answered to read(2)s */
	uint64_t bytes_written;		/* acknowledged write(2)s */
	uint64_t reconnects;		/* sessions re-established */
	/* the agent's notifications of changes, by BCP_NOTIFY_* kind - 1 */
	uint64_t notices[BCFS_MNOTICE_KINDS];
	struct bcfs_mop op[BCP_OP_MAX];
};

/* A request in flight: when it went out, and its opcode. */
struct bcfs_mtimer {
	uint64_t t0;
	uint16_t op;
};

void bcfs_metrics_begin(struct bcfs_mtimer *t, uint16_t op);
/* The request's answer: status < 0 counts as an error. */
void bcfs_metrics_end(const struct bcfs_mtimer *t, int status);
/* A read or write of the data path sent at t0 answered total (or -errno). */
void bcfs_metrics_rw(int write, ssize_t total, uint64_t t0);
/* The agent session was re-established after a loss. */
void bcfs_metrics_reconnected(void);
/* A notification of kind (BCP_NOTIFY_*) came from the agent. */
void bcfs_metrics_notice(uint16_t kind);
/* The op's name in metrics and in --stats: "lookup", "read" ... or NULL. */
const char *bcfs_metrics_op_name(uint16_t op, char *buf, size_t len);
/* Bytes acknowledged to write(2)s and write-backs since the mount. */
uint64_t bcfs_metrics_written(void);
/* A consistent-enough copy of the counters (relaxed loads). */
void bcfs_metrics_snap(struct bcfs_msnap *s);

/*
 * After the mount: the stats socket for mnt (a failure is only warned
 * about) and, with -o metrics, the endpoint (a failure is fatal: -errno,
 * said).  stop: before the unmount; a no-op when nothing was started.
 */
int bcfs_metrics_start(const char *mnt);
void bcfs_metrics_stop(void);

/*
 * The stats socket of the mount with device dev: candidate i (0, 1, ...)
 * of the directories it may be in, into buf.  0, or -ENOENT past the last
 * candidate.
 */
int bcfs_stats_path(dev_t dev, unsigned int i, char *buf, size_t len);

/* stats.c: bluecachefs --stats MOUNTPOINT [--interval N] [--count N] */
int bcfs_stats_main(int argc, char **argv);

#endif /* BCFS_METRICS_H */
