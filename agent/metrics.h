/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics.h - private to the agent: the figures each worker keeps for the
 * Prometheus endpoint (--metrics-listen, metrics.c; doc/metrics.md).
 *
 * A worker owns its counters: it alone writes them, with relaxed atomic
 * stores of naturally aligned 64-bit words (a plain add on x86-64 and
 * arm64, no lock and no read-modify-write bus cycle), and the endpoint's
 * thread reads them with relaxed atomic loads and sums them over the
 * workers at scrape time.  A scrape may see one counter a request ahead
 * of another; each counter on its own only grows.
 */
#ifndef AGENT_METRICS_H
#define AGENT_METRICS_H

#include <stdint.h>

struct agent_worker;
struct agent_slot;
struct agent_batch;

/* The data transport of a session's regions (BCP_REGION_*). */
enum agent_xport {
	AGENT_XPORT_SHM = 0,
	AGENT_XPORT_TCP,
	AGENT_XPORT_RDMA,
	AGENT_XPORT_MAX,
};

/* Direction of the bytes, seen from the host. */
enum agent_mdir {
	AGENT_MDIR_READ = 0,		/* BATCH_PULL: object -> host */
	AGENT_MDIR_WRITE,		/* BATCH_PUSH: host -> object */
	AGENT_MDIR_MAX,
};

/* The stages of a request (doc/metrics.md says what each one covers). */
enum agent_stage {
	AGENT_STAGE_DISPATCH = 0,	/* frame decoded and dispatched */
	AGENT_STAGE_STORAGE,		/* the store's call or chunk I/O */
	AGENT_STAGE_TRANSFER,		/* a chunk to or from the host */
	AGENT_STAGE_MAX,
};

/* Operation families the stage histograms are kept for. */
enum agent_family {
	AGENT_FAM_META = 0,		/* lookups, attributes, namespace */
	AGENT_FAM_SYNC,			/* blocking pool: fsync ... */
	AGENT_FAM_READ,			/* BATCH_PULL */
	AGENT_FAM_WRITE,		/* BATCH_PUSH */
	AGENT_FAM_SESSION,		/* handshake, regions, ping */
	AGENT_FAM_MAX,
};

/* Buckets: <= 2^i microseconds for i < AGENT_MHIST - 1, then +Inf. */
#define AGENT_MHIST		26

struct agent_mhist {
	uint64_t b[AGENT_MHIST];
	uint64_t sum_ns;
};

struct agent_wmetrics {
	uint64_t bytes[AGENT_XPORT_MAX][AGENT_MDIR_MAX];
	struct agent_mhist stage[AGENT_FAM_MAX][AGENT_STAGE_MAX];
	/* published by the worker (agent_metrics_publish) */
	uint64_t sessions;		/* on this worker now */
	uint64_t handles;		/* handles its sessions hold */
	uint64_t files;			/* open fhs its sessions hold */
	uint64_t slots_used;		/* staging slots not free */
	uint64_t batches_queued;	/* sessions waiting for slots */
	uint64_t sessions_total, bad_frames, auth_failed;
	uint64_t t_pub;			/* last publication */
};

/* Worker only: add to a counter the worker owns. */
static inline void agent_ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

static inline void agent_ctr_set(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

/* Any thread. */
static inline uint64_t agent_ctr_get(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* The family of a BCP opcode. */
unsigned int agent_metrics_family(uint16_t op);
/* Worker: one sample of ns nanoseconds for fam's stage. */
void agent_metrics_stage(struct agent_worker *w, unsigned int fam,
			 unsigned int stage, uint64_t ns);
/*
 * Worker: a request whose frame arrived at t0 and whose store call began
 * at t1 is answered now: t1 - t0 goes to the dispatch stage, now - t1 to
 * the storage stage.  t1 == 0: dispatched now, no storage sample (a batch,
 * whose chunks record their own); t0 == 0: a storage sample only.
 */
void agent_metrics_req(struct agent_worker *w, uint16_t op, uint64_t t0,
		       uint64_t t1);
/*
 * Worker: a staging slot changes state: its time in the state it leaves
 * goes to the storage or transfer stage; the clock restarts.
 */
void agent_metrics_slot(struct agent_slot *sl);
/* Worker: the bytes a finished batch moved, by transport and direction. */
void agent_metrics_batch(const struct agent_batch *b);
/* Worker: refresh the gauges (at most every few milliseconds). */
void agent_metrics_publish(struct agent_worker *w);
/* A region kind (BCP_REGION_*) as the transport of its session. */
unsigned int agent_metrics_xport(uint32_t kind);

/*
 * The endpoint.  start: parse ADDR:PORT, refuse a non-loopback address
 * without a secret, serve on libmicrohttpd's thread.  0 or -errno (said).
 * stop: /healthz fails from now, the thread ends; before the workers go.
 */
int agent_metrics_start(const char *addr);
void agent_metrics_stop(void);

#endif /* AGENT_METRICS_H */
