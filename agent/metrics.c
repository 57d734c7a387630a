/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics.c - the figures each worker keeps for the metrics endpoint
 * (metrics.h, metrics_http.c, doc/metrics.md): stage histograms, bytes by
 * transport, gauges.  Everything here runs on the worker that owns the
 * counters and takes no lock.
 */
#include "config.h"

#include "worker_i.h"

/* gauges: published at most every 5 ms */
#define METRICS_PUB_NS		5000000ull

unsigned int agent_metrics_family(uint16_t op)
{
	switch (op) {
	case BCP_OP_BATCH_PULL:
		return AGENT_FAM_READ;
	case BCP_OP_BATCH_PUSH:
		return AGENT_FAM_WRITE;
	case BCP_OP_FSYNC: case BCP_OP_FSYNCDIR: case BCP_OP_FALLOCATE:
	case BCP_OP_COPY_FILE_RANGE: case BCP_OP_READDIR:
		return AGENT_FAM_SYNC;
	case BCP_OP_HELLO: case BCP_OP_AUTH: case BCP_OP_DATA_ATTACH:
	case BCP_OP_PING: case BCP_OP_REGISTER_REGION:
	case BCP_OP_UNREGISTER_REGION:
		return AGENT_FAM_SESSION;
	default:
		return AGENT_FAM_META;
	}
}

unsigned int agent_metrics_xport(uint32_t kind)
{
	switch (kind) {
	case BCP_REGION_TCP:
		return AGENT_XPORT_TCP;
	case BCP_REGION_RDMA:
		return AGENT_XPORT_RDMA;
	default:
		return AGENT_XPORT_SHM;
	}
}

void agent_metrics_stage(struct agent_worker *w, unsigned int fam,
			 unsigned int stage, uint64_t ns)
{
	struct agent_mhist *h = &w->metrics.stage[fam][stage];
	uint64_t us = ns / 1000;
	unsigned int b = 0;

	/* bucket b holds (2^(b-1), 2^b] microseconds */
	if (us > 1)
		b = 64 - (unsigned int)__builtin_clzll(us - 1);
	if (b > AGENT_MHIST - 1)
		b = AGENT_MHIST - 1;
	agent_ctr_add(&h->b[b], 1);
	agent_ctr_add(&h->sum_ns, ns);
}

void agent_metrics_req(struct agent_worker *w, uint16_t op, uint64_t t0,
		       uint64_t t1)
{
	unsigned int fam = agent_metrics_family(op);
	uint64_t now = agent_now_ns();

	if (t0)
		agent_metrics_stage(w, fam, AGENT_STAGE_DISPATCH,
				    (t1 ? t1 : now) - t0);
	if (t1)
		agent_metrics_stage(w, fam, AGENT_STAGE_STORAGE, now - t1);
}

void agent_metrics_slot(struct agent_slot *sl)
{
	uint64_t now = agent_now_ns();
	unsigned int stage;

	switch (sl->state) {
	case SLOT_READING:
	case SLOT_WRITING:
		stage = AGENT_STAGE_STORAGE;
		break;
	case SLOT_XFER:
		stage = AGENT_STAGE_TRANSFER;
		break;
	default:
		/* a slot just taken: the clock starts */
		sl->t_state = now;
		return;
	}
	agent_metrics_stage(sl->w, agent_metrics_family(sl->b->op), stage,
			    now - sl->t_state);
	sl->t_state = now;
}

void agent_metrics_batch(const struct agent_batch *b)
{
	struct agent_session *s = b->s;
	uint64_t bytes = 0;
	uint32_t i;

	for (i = 0; i < b->count; i++)
		if (b->st[i] > 0)
			bytes += (uint64_t)b->st[i];
	agent_ctr_add(&s->w->metrics.bytes[s->xport]
		      [b->op == BCP_OP_BATCH_PULL ? AGENT_MDIR_READ :
		       AGENT_MDIR_WRITE], bytes);
}

void agent_metrics_publish(struct agent_worker *w)
{
	struct agent_wmetrics *m = &w->metrics;
	uint64_t now = agent_now_ns(), handles = 0, files = 0, h, f;
	struct agent_session *s;

	if (now - m->t_pub < METRICS_PUB_NS)
		return;
	for (s = w->sessions; s; s = s->next) {
		agent_store_counts(s->store, &h, &f);
		handles += h;
		files += f;
	}
	agent_ctr_set(&m->sessions, w->nsessions);
	agent_ctr_set(&m->handles, handles);
	agent_ctr_set(&m->files, files);
	agent_ctr_set(&m->slots_used, agent_cfg.queue_depth - w->nfree);
	agent_ctr_set(&m->batches_queued, w->bq_len);
	agent_ctr_set(&m->sessions_total, w->stats.sessions);
	agent_ctr_set(&m->bad_frames, w->stats.bad_frames);
	agent_ctr_set(&m->auth_failed, w->stats.auth_failed);
	agent_ctr_set(&m->t_pub, now);
}
