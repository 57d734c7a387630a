/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats.c - per-operation counters and latency histograms (log2 buckets of
 * microseconds, fixed size: nothing is allocated while counting), kept per
 * worker and merged for the summary printed at shutdown.
 *
 * An answer that only says "no such thing" (a LOOKUP of a name that does
 * not exist, a GETXATTR of an absent attribute) is how a host probes: it
 * is counted as a miss, not as a failure, so that "failed" keeps meaning
 * something went wrong.
 */
#include "config.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "agent.h"
#include "metrics.h"

/*
 * Misses per opcode, agent-wide: the per-worker counters have no field for
 * them.  Relaxed atomic adds, merged only at shutdown.
 */
static atomic_uint_least64_t stats_missed[BCP_OP_MAX];

static int stats_is_miss(uint16_t op, int status)
{
	return (op == BCP_OP_LOOKUP && status == -ENOENT) ||
	       (op == BCP_OP_GETXATTR && status == -ENODATA);
}

void agent_stats_op(struct agent_stats *st, uint16_t op, int status,
		    uint64_t start_ns)
{
	uint64_t us = (agent_now_ns() - start_ns) / 1000;
	unsigned int b = 0;

	if (op >= BCP_OP_MAX)
		return;
	while (us && b < AGENT_HIST_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	/* one writer, read by the metrics endpoint (metrics.h) */
	agent_ctr_add(&st->op[op].count, 1);
	if (stats_is_miss(op, status))
		atomic_fetch_add_explicit(&stats_missed[op], 1,
					  memory_order_relaxed);
	else if (status < 0)
		agent_ctr_add(&st->op[op].failed, 1);
	agent_ctr_add(&st->op[op].hist[b], 1);
}

void agent_stats_add(struct agent_stats *to, const struct agent_stats *from)
{
	unsigned int i, b;

	for (i = 0; i < BCP_OP_MAX; i++) {
		to->op[i].count += from->op[i].count;
		to->op[i].failed += from->op[i].failed;
		for (b = 0; b < AGENT_HIST_BUCKETS; b++)
			to->op[i].hist[b] += from->op[i].hist[b];
	}
	to->bytes_pulled += from->bytes_pulled;
	to->bytes_pushed += from->bytes_pushed;
	to->segs += from->segs;
	to->seg_failed += from->seg_failed;
	to->inline_segs += from->inline_segs;
	to->inline_missed += from->inline_missed;
	to->pool_batches += from->pool_batches;
	to->pool_sent += from->pool_sent;
	to->pool_part += from->pool_part;
	to->sessions += from->sessions;
	to->bad_frames += from->bad_frames;
	to->auth_failed += from->auth_failed;
}

/* Upper bound in microseconds of the bucket holding quantile q (of 1000). */
static uint64_t stats_pct(const struct agent_op_stats *o, unsigned int q)
{
	uint64_t want = (o->count * q + 999) / 1000, seen = 0;
	unsigned int b;

	for (b = 0; b < AGENT_HIST_BUCKETS; b++) {
		seen += o->hist[b];
		if (seen >= want && seen)
			return b ? (1ull << b) : 1;
	}
	return 0;
}

void agent_stats_print(const struct agent_stats *st)
{
	unsigned int i;

	agent_log(AGENT_LOG_INFO, "summary: %" PRIu64 " sessions, %" PRIu64
		  " bytes pulled (to hosts), %" PRIu64
		  " bytes pushed (from hosts), %" PRIu64 " segments (%" PRIu64
		  " failed), %" PRIu64 " bad frames, %" PRIu64
		  " failed authentications", st->sessions, st->bytes_pulled,
		  st->bytes_pushed, st->segs, st->seg_failed, st->bad_frames,
		  st->auth_failed);
	if (st->inline_segs || st->inline_missed)
		agent_log(AGENT_LOG_INFO, "summary: %" PRIu64 " segments "
			  "moved inline, %" PRIu64 " left to staging",
			  st->inline_segs, st->inline_missed);
	if (st->pool_batches || st->pool_sent)
		agent_log(AGENT_LOG_INFO, "summary: %" PRIu64 " batches moved "
			  "whole on the blocking pool, %" PRIu64 " replies "
			  "sent from it (%" PRIu64 " in part)",
			  st->pool_batches, st->pool_sent, st->pool_part);
	for (i = 0; i < BCP_OP_MAX; i++) {
		const struct agent_op_stats *o = &st->op[i];

		if (!o->count)
			continue;
		agent_log(AGENT_LOG_INFO, "summary: %-17s %10" PRIu64
			  " ops %8" PRIu64 " failed %8" PRIu64 " missed  "
			  "latency us p50<=%" PRIu64 " p90<=%" PRIu64
			  " p99<=%" PRIu64 " max<=%" PRIu64,
			  bcp_op_name((uint16_t)i), o->count, o->failed,
			  (uint64_t)atomic_load_explicit(&stats_missed[i],
						 memory_order_relaxed),
			  stats_pct(o, 500), stats_pct(o, 900),
			  stats_pct(o, 990), stats_pct(o, 1000));
	}
}
