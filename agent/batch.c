/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * batch.c - the batch engine: BATCH_PULL and BATCH_PUSH split into
 * slot-sized chunks and pipelined through the worker's staging slots.
 *
 *   PULL chunk: storage read (read_fixed) -> transfer WRITE into the host
 *               region -> slot free.
 *   PUSH chunk: transfer READ from the host region -> storage write
 *               (write_fixed, resumed on short writes) -> slot free.
 *
 * Many chunks are in flight at once, so the storage I/O of one overlaps the
 * transfer of another.  The staging memory is allocated once at start-up
 * (huge pages when the system has them) and registered with io_uring as
 * fixed buffers.  A batch is answered only after every chunk of it
 * completed.
 *
 * Slots are shared fairly: a session holds at most max_slots of a worker's
 * slots, so one whose transfers stall (a stopped host) cannot take them
 * all, and sessions with waiting batches take turns, one chunk each, in a
 * ring (w->bq_head); a session's own batches are served in order.  So a
 * session with many large batches queued delays another's small one by a
 * few chunks, not by all of its batches.
 *
 * A PULL segment's status is the length of the data delivered without a
 * gap: a chunk that comes up short (end of file, a file shrinking while it
 * is read) ends it there, even if a later chunk read data (the file grew
 * again), since the bytes in between were never written to the host.  A
 * PUSH segment's is all of its bytes, or, when a chunk failed (a full
 * store), the bytes written without a gap before the failure, as a short
 * write(2) says; the error only when it wrote none.  The host's next push
 * of the rest then gets the error, as a local file system's next write
 * does.
 *
 * Inline fast path (shm regions): the host's memory is mapped here, so a
 * segment of up to inline_max bytes is first tried with preadv2/pwritev2
 * and RWF_NOWAIT straight between the file and the region, on the worker
 * thread.  Data in the page cache moves at once, with no staging copy and
 * no io-wq hand-off (io_uring punts buffered reads of files without
 * IOCB_NOWAIT support, tmpfs among them, to a worker thread, which costs
 * two context switches and an eventfd wake-up per chunk).  -EAGAIN (the
 * data is not cached, or the write would block) or any other failure
 * leaves the segment to the staging path, which gives the authoritative
 * result; a short transfer leaves the rest of it there (skip[]).  tmpfs
 * and ramfs take no RWF_NOWAIT (-EOPNOTSUPP) but never wait for a device:
 * their files are moved inline with plain calls (store.c decides, per
 * open file).
 *
 * Inline batches (BCP_BATCH_INLINE, a tcp host's small batches): the
 * bytes ride in the control frames, a push's in its request, a pull's in
 * its reply, so no transfer crosses the data connection and no DATA_WRITE
 * waits for its answer.  They move through the batch's ibuf, which takes
 * the place of the region everywhere below: the fast path reads and
 * writes it as it would an shm mapping, the staging path copies a chunk
 * to or from it where it would post a transfer.
 *
 * Files without a descriptor (a cephfs store's: file_get() gives fd -1)
 * take the same path, with the storage stage done by file_rw() on the
 * blocking pool instead of an io_uring read or write: the job's result
 * comes back to the worker as a CQE's would, through
 * agent_batch_ring_done(), so short reads and writes mean the same.  Many
 * chunks are out at once, so the store's calls overlap each other and
 * the transfers.  They are never moved inline.  A small batch of such
 * files, with its bytes in shm regions or inline, is instead moved whole
 * by one pool thread straight between the store and the host's memory,
 * and answered from there (batch_pool_take()).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <stdlib.h>

#include "notify.h"
#include "worker_i.h"

static void *batch_staging_alloc(size_t len, int *huge)
{
	size_t hlen = (len + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	void *p;

	p = mmap(NULL, hlen, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE,
		 -1, 0);
	if (p != MAP_FAILED) {
		*huge = 1;
		return p;
	}
	*huge = 0;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int agent_batch_slots_init(struct agent_worker *w)
{
	unsigned int n = agent_cfg.queue_depth, i;
	size_t len = (size_t)n * agent_cfg.slot_size;
	struct iovec *iov;
	int huge, ret;

	w->staging = batch_staging_alloc(len, &huge);
	if (!w->staging)
		return -ENOMEM;
	w->staging_len = huge ? (len + (2u << 20) - 1) &
				~(size_t)((2u << 20) - 1) : len;
	w->slots = calloc(n, sizeof(*w->slots));
	iov = calloc(n, sizeof(*iov));
	if (!w->slots || !iov) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (i = 0; i < n; i++) {
		struct agent_slot *sl = &w->slots[i];

		sl->w = w;
		sl->buf = w->staging + (size_t)i * agent_cfg.slot_size;
		sl->idx = i;
		iov[i].iov_base = sl->buf;
		iov[i].iov_len = agent_cfg.slot_size;
	}
	for (i = n; i-- > 0;) {
		w->slots[i].next = w->free_slots;
		w->free_slots = &w->slots[i];
	}
	w->nfree = n;
	ret = io_uring_register_buffers(&w->ring.ring, iov, n);
	free(iov);
	iov = NULL;
	if (ret < 0) {
		if (ret == -ENOMEM)
			agent_err("cannot register %u staging slots with "
				  "io_uring: RLIMIT_MEMLOCK too small (each "
				  "worker locks %u x %u bytes)", n, n,
				  agent_cfg.slot_size);
		else
			agent_err("cannot register %u staging slots with "
				  "io_uring: %s", n, strerror(-ret));
		goto out_free;
	}
	/* the rdma transport registers it with each device, once */
	ret = bcp_xrdma_staging_add(w->staging, w->staging_len);
	if (ret < 0) {
		agent_err("cannot record the staging memory for rdma: %s",
			  strerror(-ret));
		io_uring_unregister_buffers(&w->ring.ring);
		goto out_free;
	}
	agent_dbg("worker %u: %u slots of %u bytes%s", w->idx, n,
		  agent_cfg.slot_size, huge ? " in huge pages" : "");
	return 0;

out_free:
	free(iov);
	free(w->slots);
	w->slots = NULL;
	munmap(w->staging, w->staging_len);
	w->staging = NULL;
	return ret;
}

void agent_batch_slots_fini(struct agent_worker *w)
{
	if (!w->staging)
		return;
	io_uring_unregister_buffers(&w->ring.ring);
	free(w->slots);
	munmap(w->staging, w->staging_len);
	w->staging = NULL;
}

/*
 * A PUSH wrote: one INODE event per file, with the hull of the ranges its
 * segments wrote, before the reply goes out (doc/protocol.md 6.10).  The
 * segments of one file usually follow each other, so the scan for a
 * file's later segments is short; it runs only when another session may
 * care.
 */
static void batch_publish(struct agent_batch *b)
{
	struct agent_store *st = b->s->store;
	uint32_t i, j;

	if (!agent_notify_wanted(b->s->ns))
		return;
	for (i = 0; i < b->count; i++) {
		struct agent_file *f = b->files[i];
		uint64_t lo, hi;

		if (!f || b->st[i] <= 0 || b->lim[i] == UINT32_MAX)
			continue;
		lo = b->segs[i].offset;
		hi = lo + (uint32_t)b->st[i];
		for (j = i + 1; j < b->count; j++) {
			if (b->files[j] != f || b->st[j] <= 0)
				continue;
			if (b->segs[j].offset < lo)
				lo = b->segs[j].offset;
			if (b->segs[j].offset + (uint32_t)b->st[j] > hi)
				hi = b->segs[j].offset + (uint32_t)b->st[j];
			b->lim[j] = UINT32_MAX;	/* counted in i's */
		}
		agent_store_file_wrote(st, f, lo, hi - lo);
	}
}

/*
 * An inline pull's reply data: each segment's delivered bytes in turn,
 * moved down over what its predecessors did not fill.  Returns the length.
 */
static uint32_t batch_inline_pack(struct agent_batch *b)
{
	uint32_t i, n = 0;

	for (i = 0; i < b->count; i++) {
		if (b->st[i] <= 0)
			continue;
		if (b->ipos[i] != n)
			memmove(b->ibuf + n, b->ibuf + b->ipos[i],
				(uint32_t)b->st[i]);
		n += (uint32_t)b->st[i];
	}
	return n;
}

/*
 * The reply to b: each segment's status, an inline pull's bytes (packed
 * once: a pool thread may have made this reply before the worker).
 */
static void batch_reply_init(struct agent_batch *b, struct bcp_msg *rep)
{
	uint32_t i;

	/* every chunk below lim[i] was delivered whole */
	for (i = 0; i < b->count; i++)
		if (b->op == BCP_OP_BATCH_PULL && b->st[i] >= 0)
			b->st[i] = (int32_t)b->lim[i];
	memset(rep, 0, sizeof(*rep));
	rep->hdr.magic = BCP_MAGIC;
	rep->hdr.version = BCP_VERSION_MAX;
	rep->hdr.opcode = b->op;
	rep->hdr.flags = BCP_HF_REPLY;
	rep->hdr.req_id = b->req_id;
	rep->u.batch_rep.count = b->count;
	rep->statuses = b->st;
	if (b->inl && b->op == BCP_OP_BATCH_PULL) {
		if (!b->ipacked)
			b->plen = batch_inline_pack(b);
		b->ipacked = 1;
		rep->data = b->ibuf;
		rep->data_len = b->plen;
		rep->u.batch_rep.data_len = b->plen;
	}
}

static void batch_pool_unhold(struct agent_batch *b, uint32_t n);

/*
 * A PUSH segment a chunk failed in wrote the bytes below lim[i] (the
 * failed chunk's own first bytes, an inline prefix, the chunks before):
 * that is its status, unless it is none (lim[i] is the segment's length
 * until a chunk fails, so an error found before any chunk stays).
 */
static void batch_push_settle(struct agent_batch *b)
{
	uint32_t i;

	for (i = 0; i < b->count; i++)
		if (b->st[i] < 0 && b->lim[i] > 0 &&
		    b->lim[i] < b->segs[i].length)
			b->st[i] = (int32_t)b->lim[i];
}

static void batch_finish(struct agent_batch *b)
{
	struct agent_session *s = b->s;
	struct agent_worker *w = s->w;
	struct bcp_msg rep;
	uint32_t i;

	/* a pooled batch's pool thread published before its reply */
	if (b->op == BCP_OP_BATCH_PUSH && !b->pooled) {
		batch_push_settle(b);
		batch_publish(b);
	}
	batch_reply_init(b, &rep);
	for (i = 0; i < b->count; i++) {
		if (b->files[i])
			agent_store_file_put(s->store, b->files[i]);
		b->files[i] = NULL;
		w->stats.segs++;
		if (b->st[i] < 0)
			w->stats.seg_failed++;
		else if (b->op == BCP_OP_BATCH_PULL)
			w->stats.bytes_pulled += (uint64_t)b->st[i];
		else
			w->stats.bytes_pushed += (uint64_t)b->st[i];
	}
	agent_stats_op(&w->stats, b->op, 0, b->t0);
	agent_metrics_batch(b);
	if (b->sent) {
		agent_session_pool_rest(s, &b->rest);
	} else if (!s->peer_gone) {
		agent_session_reply(s, &rep);
	}
	if (b->pooled) {
		batch_pool_unhold(b, b->count);
		w->stats.pool_batches++;
	}
	b->pooled = b->sent = b->ipacked = 0;
	if (b->inl && b->op == BCP_OP_BATCH_PULL)
		s->inl_rsv -= b->ilen;
	b->inl = 0;
	b->next = s->batch_pool;
	s->batch_pool = b;
	s->batches_live--;
	s->kick = 1;
}

/*
 * A chunk moved data up to off only, a pull's read reaching the end of
 * the file or a push's write failing there: the segment ends at off.
 */
static void batch_seg_short(struct agent_batch *b, uint32_t seg,
			    uint64_t off)
{
	if (off < b->lim[seg])
		b->lim[seg] = (uint32_t)off;
}

static void batch_chunk_end(struct agent_slot *sl, int res)
{
	struct agent_worker *w = sl->w;
	struct agent_batch *b = sl->b;

	if (res < 0) {
		if (b->st[sl->seg] >= 0)
			b->st[sl->seg] = res;
		/* a push's bytes up to here, less what the chunk missed */
		if (b->op == BCP_OP_BATCH_PUSH)
			batch_seg_short(b, sl->seg, sl->off + sl->done);
	} else if (b->st[sl->seg] >= 0) {
		b->st[sl->seg] += res;
	}
	sl->state = SLOT_FREE;
	sl->b = NULL;
	sl->next = w->free_slots;
	w->free_slots = sl;
	w->nfree++;
	b->chunks_out--;
	b->s->slots_held--;
	if (!b->chunks_out && !b->queued)
		batch_finish(b);
	agent_batch_schedule(w);
}

static struct agent_slot *batch_job_slot(struct agent_job *j)
{
	return (struct agent_slot *)((char *)j -
				     offsetof(struct agent_slot, job));
}

/* Pool thread: the storage stage of a chunk of a file without an fd. */
static void batch_job_run(struct agent_job *j)
{
	struct agent_slot *sl = batch_job_slot(j);
	struct agent_batch *b = sl->b;
	uint64_t off = b->segs[sl->seg].offset + sl->off;

	if (sl->state == SLOT_READING)
		sl->res = agent_store_file_rw(b->s->store, b->files[sl->seg],
					      0, sl->buf, sl->len, off);
	else
		sl->res = agent_store_file_rw(b->s->store, b->files[sl->seg],
					      1, sl->buf + sl->done,
					      sl->len - sl->done,
					      off + sl->done);
}

/* Back on the worker: on as a ring completion would go. */
static void batch_job_done(struct agent_job *j)
{
	struct agent_slot *sl = batch_job_slot(j);

	agent_batch_ring_done(sl->w, (uint64_t)(uintptr_t)sl | 1,
			      (int32_t)sl->res);
}

static void batch_submit_rw(struct agent_slot *sl)
{
	struct agent_batch *b = sl->b;
	const struct bcp_seg *sg = &b->segs[sl->seg];
	struct io_uring_sqe *sqe;

	if (b->fds[sl->seg] < 0) {
		/* the file's owner is the batch: it outlives the job */
		agent_pool_submit(&sl->job, batch_job_run, batch_job_done,
				  sl->w);
		return;
	}
	sqe = agent_ring_sqe(&sl->w->ring);
	if (sl->state == SLOT_READING)
		io_uring_prep_read_fixed(sqe, b->fds[sl->seg], sl->buf,
					 sl->len, sg->offset + sl->off,
					 (int)sl->idx);
	else
		io_uring_prep_write_fixed(sqe, b->fds[sl->seg],
					  sl->buf + sl->done,
					  sl->len - sl->done,
					  sg->offset + sl->off + sl->done,
					  (int)sl->idx);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)sl | 1);
}

static void batch_post(struct agent_slot *sl, enum bcp_xsrv_dir dir)
{
	struct agent_batch *b = sl->b;
	int ret;

	if (b->s->peer_gone) {
		batch_chunk_end(sl, -ECONNABORTED);
		return;
	}
	agent_metrics_slot(sl);
	sl->state = SLOT_XFER;
	sl->op.dir = dir;
	sl->op.region_id = b->segs[sl->seg].region_id;
	sl->op.region_off = b->segs[sl->seg].region_off + sl->off;
	sl->op.local = sl->buf;
	sl->op.len = sl->len;
	if (b->inl) {
		/* the frame is the region: done at once, as shm's posts */
		uint8_t *p = b->ibuf + b->ipos[sl->seg] + sl->off;

		if (dir == BCP_XSRV_WRITE)
			memcpy(p, sl->buf, sl->len);
		else
			memcpy(sl->buf, p, sl->len);
		agent_batch_xfer_done(NULL, &sl->op, (int)sl->len);
		return;
	}
	ret = bcp_xsrv_post(b->s->xsrv, &sl->op);
	if (ret < 0)
		batch_chunk_end(sl, ret);
}

void agent_batch_xfer_done(void *ctx, struct bcp_xsrv_op *op, int status)
{
	struct agent_slot *sl = (struct agent_slot *)op;

	(void)ctx;
	agent_metrics_slot(sl);
	if (status < 0) {
		batch_chunk_end(sl, status);
		return;
	}
	if (sl->op.dir == BCP_XSRV_WRITE) {
		batch_chunk_end(sl, (int)sl->len);
		return;
	}
	if (sl->b->s->peer_gone) {
		batch_chunk_end(sl, -ECONNABORTED);
		return;
	}
	sl->state = SLOT_WRITING;
	sl->done = 0;
	batch_submit_rw(sl);
}

void agent_batch_ring_done(struct agent_worker *w, uint64_t user_data,
			   int32_t res)
{
	struct agent_slot *sl = (struct agent_slot *)(uintptr_t)(user_data &
								 ~1ull);

	(void)w;
	agent_metrics_slot(sl);
	res = agent_store_ret(res);
	if (sl->state == SLOT_READING) {
		if (res >= 0 && (uint32_t)res < sl->len)
			batch_seg_short(sl->b, sl->seg,
					sl->off + (uint32_t)res);
		if (res <= 0) {
			batch_chunk_end(sl, res);
			return;
		}
		sl->len = (uint32_t)res;
		batch_post(sl, BCP_XSRV_WRITE);
	} else if (sl->state == SLOT_WRITING) {
		if (res < 0) {
			batch_chunk_end(sl, res);
			return;
		}
		if (res == 0) {
			batch_chunk_end(sl, -EIO);
			return;
		}
		sl->done += (uint32_t)res;
		if (sl->done < sl->len)
			batch_submit_rw(sl);
		else
			batch_chunk_end(sl, (int)sl->len);
	}
}

/* Slots the session's chunks hold on its worker. */
/* Queue b behind its session's waiting batches, or on the ring. */
static void batch_enqueue(struct agent_worker *w, struct agent_batch *b)
{
	struct agent_session *s = b->s;
	unsigned int i;

	b->queued = 1;
	b->next = NULL;
	b->snext = NULL;
	for (i = 0; i < AGENT_INFLIGHT_MAX; i++) {
		struct agent_batch *t = &s->batches[i];

		/* the last of the session's waiting batches */
		if (t != b && t->queued && !t->snext) {
			t->snext = b;
			return;
		}
	}
	if (w->bq_tail)
		w->bq_tail->next = b;
	else
		w->bq_head = b;
	w->bq_tail = b;
	w->bq_len++;
}

/* Move the ring's head to its tail: the next session's turn. */
static void batch_ring_rotate(struct agent_worker *w)
{
	struct agent_batch *b = w->bq_head;

	if (!b->next)
		return;
	w->bq_head = b->next;
	b->next = NULL;
	w->bq_tail->next = b;
	w->bq_tail = b;
}

/* Skip what needs no chunk; 1 when b has a chunk left to start. */
static int batch_more(struct agent_batch *b)
{
	if (b->s->peer_gone)
		b->cur_seg = b->count;
	while (b->cur_seg < b->count &&
	       (b->st[b->cur_seg] < 0 ||
		b->skip[b->cur_seg] >= b->segs[b->cur_seg].length)) {
		b->cur_seg++;
		b->cur_off = 0;
	}
	return b->cur_seg < b->count;
}

/*
 * The ring's head has started all of its chunks: take it off; the
 * session's next waiting batch, if any, queues at the ring's tail.
 */
static void batch_dequeue(struct agent_worker *w)
{
	struct agent_batch *b = w->bq_head, *n = b->snext;

	w->bq_head = b->next;
	if (!w->bq_head)
		w->bq_tail = NULL;
	if (n) {
		if (w->bq_tail)
			w->bq_tail->next = n;
		else
			w->bq_head = n;
		w->bq_tail = n;
	} else {
		w->bq_len--;
	}
	b->next = NULL;
	b->snext = NULL;
	b->queued = 0;
	if (!b->chunks_out)
		batch_finish(b);
}

/*
 * Start chunks while slots are free, one per session in turn, skipping
 * sessions at max_slots; re-entry is turned into a loop.
 */
void agent_batch_schedule(struct agent_worker *w)
{
	unsigned int skipped;

	if (w->in_sched) {
		w->resched = 1;
		return;
	}
	w->in_sched = 1;
	do {
		w->resched = 0;
		skipped = 0;
		while (w->bq_head && w->free_slots && skipped < w->bq_len) {
			struct agent_batch *b = w->bq_head;
			struct agent_slot *sl;
			const struct bcp_seg *sg;

			if (!batch_more(b)) {
				batch_dequeue(w);
				skipped = 0;
				continue;
			}
			if (b->s->slots_held >= agent_cfg.max_slots) {
				batch_ring_rotate(w);
				skipped++;
				continue;
			}
			skipped = 0;
			if (b->cur_off < b->skip[b->cur_seg])
				b->cur_off = b->skip[b->cur_seg];
			sg = &b->segs[b->cur_seg];
			sl = w->free_slots;
			w->free_slots = sl->next;
			w->nfree--;
			sl->next = NULL;
			sl->b = b;
			sl->seg = b->cur_seg;
			sl->off = b->cur_off;
			sl->len = sg->length - (uint32_t)b->cur_off;
			if (sl->len > agent_cfg.slot_size)
				sl->len = agent_cfg.slot_size;
			sl->done = 0;
			b->cur_off += sl->len;
			if (b->cur_off >= sg->length) {
				b->cur_seg++;
				b->cur_off = 0;
			}
			b->chunks_out++;
			b->s->slots_held++;
			/* the next session's turn before this one's next */
			if (batch_more(b))
				batch_ring_rotate(w);
			else
				batch_dequeue(w);
			if (b->op == BCP_OP_BATCH_PULL) {
				agent_metrics_slot(sl);
				sl->state = SLOT_READING;
				batch_submit_rw(sl);
			} else {
				batch_post(sl, BCP_XSRV_READ);
			}
		}
	} while (w->resched);
	w->in_sched = 0;
	if (!w->bq_head || w->free_slots)
		return;
	agent_dbg("worker %u: all %u slots busy, batches wait", w->idx,
		  agent_cfg.queue_depth);
}

/*
 * Try segment i inline (see the top of the file).  Sets st[i] and skip[i]
 * to what moved; a segment the staging path must finish keeps skip[i] <
 * its length.
 */
static void batch_inline(struct agent_batch *b, uint32_t i)
{
	const struct bcp_seg *sg = &b->segs[i];
	struct agent_worker *w = b->s->w;
	struct iovec iov;
	int mode, flags;
	uint64_t t;
	ssize_t n;

	if (sg->length > agent_cfg.inline_max)
		return;
	if (b->inl)
		iov.iov_base = b->ibuf + b->ipos[i];
	else if (bcp_xsrv_region_map(b->s->xsrv, sg->region_id,
				     sg->region_off, sg->length,
				     &iov.iov_base) < 0)
		return;
	mode = agent_store_file_inline(b->s->store, b->files[i],
				       b->fds[i]);
	if (mode == AGENT_INLINE_NEVER)
		return;
	flags = mode == AGENT_INLINE_NOWAIT ? RWF_NOWAIT : 0;
	iov.iov_len = sg->length;
	t = agent_now_ns();	/* the storage stage of an inline segment */
	if (b->op == BCP_OP_BATCH_PULL)
		n = preadv2(b->fds[i], &iov, 1, (off_t)sg->offset, flags);
	else
		n = pwritev2(b->fds[i], &iov, 1, (off_t)sg->offset, flags);
	agent_metrics_stage(w, agent_metrics_family(b->op), AGENT_STAGE_STORAGE,
			    agent_now_ns() - t);
	if (n < 0) {
		/* a file that takes no RWF_NOWAIT: stop trying */
		if (errno == EOPNOTSUPP)
			agent_store_file_inline_set(b->s->store, b->files[i],
						    AGENT_INLINE_NEVER);
		w->stats.inline_missed++;
		return;
	}
	w->stats.inline_segs++;
	b->st[i] = (int32_t)n;
	if (n == 0 && b->op == BCP_OP_BATCH_PULL)
		batch_seg_short(b, i, 0);
	/* a pull that read nothing hit the end of the file: done */
	b->skip[i] = n == 0 && b->op == BCP_OP_BATCH_PULL ? sg->length :
		     (uint32_t)n;
}

/*
 * ibuf for b->ilen bytes: grown to a power of two from 4 KiB up, and
 * kept, so that a session of small I/Os holds small buffers.  0 or
 * -ENOMEM (the batch then moves its bytes through the region).
 */
static int batch_inline_room(struct agent_batch *b)
{
	uint32_t cap = b->icap ? b->icap : 4096;
	uint8_t *p;

	while (cap < b->ilen)
		cap *= 2;
	if (cap == b->icap)
		return 0;
	p = realloc(b->ibuf, cap);
	if (!p)
		return -ENOMEM;
	b->ibuf = p;
	b->icap = cap;
	return 0;
}

/*
 * BCP_BATCH_INLINE asked (the decoder checked the lengths: at most
 * BCP_BATCH_INLINE_MAX in all, a push's bytes all there): take it when
 * ibuf can be had and, for a pull, the output has room for the bytes;
 * otherwise the batch moves them through the region as usual, which the
 * host allows (a push's bytes are in its region too).
 */
static void batch_inline_take(struct agent_batch *b, const struct bcp_msg *m)
{
	struct bcp_seg sg;
	uint64_t len = 0;
	uint32_t i;

	b->inl = 0;
	if (!(m->u.batch_req.flags & BCP_BATCH_INLINE))
		return;
	for (i = 0; i < b->count; i++) {
		bcp_msg_seg(m, i, &sg);
		b->ipos[i] = (uint32_t)len;
		len += sg.length;
		if (len > BCP_BATCH_INLINE_MAX)
			return;		/* a pull asking too much */
	}
	b->ilen = (uint32_t)len;
	if (b->op == BCP_OP_BATCH_PUSH && m->data_len != b->ilen)
		return;
	if (batch_inline_room(b) < 0)
		return;
	if (b->op == BCP_OP_BATCH_PULL) {
		if (agent_session_inline_hold(b->s, b->ilen) < 0)
			return;
	} else {
		memcpy(b->ibuf, m->data, b->ilen);
	}
	b->inl = 1;
}

static struct agent_batch *batch_of_job(struct agent_job *j)
{
	return (struct agent_batch *)((char *)j -
				      offsetof(struct agent_batch, job));
}

/* Let go of the regions of b's first n segments (batch_pool_take()). */
static void batch_pool_unhold(struct agent_batch *b, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (!b->inl && b->pmap[i])
			bcp_xsrv_region_put(b->s->xsrv, b->segs[i].region_id);
}

/*
 * Pool thread: every segment of b moved straight between its file and
 * the host's memory, the PUSH's holders told, and the reply sent from
 * here when the stream lets it (agent_session_pool_send()).  Statuses
 * mean what the staging path's do: a pull's is the bytes read (a short
 * read is the end of the file), a push's the bytes written before the
 * store failed, or the error when it wrote none.
 */
static void batch_pool_run(struct agent_job *j)
{
	struct agent_batch *b = batch_of_job(j);
	struct agent_store *st = b->s->store;
	uint64_t t = agent_now_ns();
	struct bcp_msg rep;
	ssize_t n = 0;
	uint32_t i, done;
	int len;

	for (i = 0; i < b->count; i++) {
		const struct bcp_seg *sg = &b->segs[i];
		uint8_t *p = b->pmap[i];

		if (b->st[i] < 0)
			continue;
		if (b->op == BCP_OP_BATCH_PULL) {
			n = agent_store_file_rw(st, b->files[i], 0, p,
						sg->length, sg->offset);
			b->st[i] = n < 0 ? (int32_t)n : 0;
			b->lim[i] = n < 0 ? 0 : (uint32_t)n;
			continue;
		}
		for (done = 0; done < sg->length; done += (uint32_t)n) {
			n = agent_store_file_rw(st, b->files[i], 1, p + done,
						sg->length - done,
						sg->offset + done);
			if (n <= 0)
				break;
		}
		b->st[i] = done ? (int32_t)done : n < 0 ? (int32_t)n : -EIO;
	}
	b->t_store = agent_now_ns() - t;
	if (b->op == BCP_OP_BATCH_PUSH)
		batch_publish(b);
	batch_reply_init(b, &rep);
	len = bcp_encode(b->obuf, b->ocap, &rep);
	b->sent = len > 0 && agent_session_pool_send(b->s, b->obuf,
						     (uint32_t)len, &b->rest);
}

/* Back on the worker: the files, the stats, the batch's release. */
static void batch_pool_done(struct agent_job *j)
{
	struct agent_batch *b = batch_of_job(j);

	agent_metrics_stage(b->s->w, agent_metrics_family(b->op),
			    AGENT_STAGE_STORAGE, b->t_store);
	batch_finish(b);
}

/*
 * A blocking store's small batch (one segment of up to a slot, or up to
 * AGENT_POOL_SEGS segments of BCP_BATCH_INLINE_MAX bytes in all, each in
 * an shm region or inline) is moved whole by one pool thread, straight
 * between the file and the host's memory, and answered from there: no
 * staging copy on the worker, and no wake-up of the worker before the
 * reply goes (a 4 KiB read at queue depth 1 waited for two).  Larger
 * batches keep the staging path, whose chunks run on many pool threads
 * at once.  1 when b went to the pool.
 */
static int batch_pool_take(struct agent_batch *b)
{
	struct agent_session *s = b->s;
	uint32_t i, need;
	uint64_t total = 0;

	if (!agent_store_blocking(s->store) || b->count > AGENT_POOL_SEGS)
		return 0;
	for (i = 0; i < b->count; i++) {
		if (b->st[i] < 0)
			continue;
		if (b->fds[i] >= 0)
			return 0;
		total += b->segs[i].length;
	}
	if (!total || total > agent_cfg.slot_size ||
	    (b->count > 1 && total > BCP_BATCH_INLINE_MAX))
		return 0;
	need = SESS_BATCH_REP_MAX +
	       (b->inl && b->op == BCP_OP_BATCH_PULL ? b->ilen : 0);
	if (b->ocap < need) {
		uint8_t *p = realloc(b->obuf, need);

		if (!p)
			return 0;
		b->obuf = p;
		b->ocap = need;
	}
	for (i = 0; i < b->count; i++) {
		const struct bcp_seg *sg = &b->segs[i];

		b->pmap[i] = NULL;
		if (b->st[i] < 0)
			continue;
		if (b->inl) {
			b->pmap[i] = b->ibuf + b->ipos[i];
		} else if (bcp_xsrv_region_hold(s->xsrv, sg->region_id,
						sg->region_off, sg->length,
						&b->pmap[i]) < 0) {
			batch_pool_unhold(b, i);
			return 0;
		}
	}
	b->pooled = 1;
	agent_pool_submit(&b->job, batch_pool_run, batch_pool_done, s->w);
	return 1;
}

int agent_batch_start(struct agent_session *s, const struct bcp_msg *m)
{
	struct agent_worker *w = s->w;
	struct agent_batch *b = s->batch_pool;
	uint32_t i;

	if (!b)
		return -EAGAIN;
	s->batch_pool = b->next;
	s->batches_live++;
	b->next = NULL;
	b->s = s;
	b->op = m->hdr.opcode;
	b->req_id = m->hdr.req_id;
	b->t0 = agent_now_ns();
	b->count = m->u.batch_req.count;
	b->cur_seg = 0;
	b->cur_off = 0;
	b->chunks_out = 0;
	b->pooled = b->sent = b->ipacked = 0;
	batch_inline_take(b, m);
	for (i = 0; i < b->count; i++) {
		struct bcp_seg *sg = &b->segs[i];
		uint64_t rlen;
		enum bcp_err why;
		int ret;

		bcp_msg_seg(m, i, sg);
		b->files[i] = NULL;
		b->fds[i] = -1;
		b->st[i] = 0;
		b->skip[i] = 0;
		b->lim[i] = sg->length;
		ret = bcp_xsrv_region_len(s->xsrv, sg->region_id, &rlen);
		if (ret == 0)
			ret = bcp_seg_check(sg, rlen, &why);
		else
			ret = -EINVAL;
		if (ret == 0 && sg->length == 0)
			ret = -EINVAL;
		if (ret == 0)
			ret = agent_store_file_get(s->store, sg->fh,
						   &b->files[i], &b->fds[i]);
		if (ret < 0)
			b->st[i] = ret;
		else if (agent_cfg.inline_max)
			batch_inline(b, i);
	}
	if (batch_pool_take(b))
		return 0;
	batch_enqueue(w, b);
	agent_batch_schedule(w);
	return 0;
}
