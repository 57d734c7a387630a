/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_io.c - data I/O through the client library against a real agent,
 * over unix + shm and over tcp + the tcp data connection: a file is made
 * with CREATE, filled with BATCH_PUSH, then several threads push and pull
 * random ranges (1 byte .. 1 MiB) with several I/Os in flight each; every
 * pull is compared byte for byte with a reference copy, the whole file is
 * checked through the client and in the agent's root directory, EOF gives
 * short and empty pulls, and the stats show batches of several segments
 * and, over tcp, small batches with their bytes in their frames.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "bcp_client.h"
#include "harness.h"

#define NTHREADS	6
#define LANES		4		/* I/Os in flight per thread */
#define LANE_SIZE	(1u << 20)
#define REGION_SIZE	(LANES * LANE_SIZE)
#define FILE_SIZE	((size_t)NTHREADS * REGION_SIZE)
#define ROUNDS		40

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int pending;
};

struct ctx {
	struct bcp_client *c;
	uint64_t fh;
	uint8_t *ref;			/* what the file must hold */
	uint64_t seed;
	int idx;
};

static void io_done(struct bcp_io *io, int32_t result)
{
	struct waiter *w = io->priv;

	/* the offset is not needed once done: it carries the result */
	io->offset = (uint64_t)(int64_t)result;
	pthread_mutex_lock(&w->lock);
	if (--w->pending == 0)
		pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void waiter_init(struct waiter *w)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->pending = 0;
}

static void waiter_wait(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->pending)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static int32_t io_result(const struct bcp_io *io)
{
	return (int32_t)(int64_t)io->offset;
}

static struct bcp_io *io_prep(struct ctx *x, struct waiter *w, uint16_t op,
			      uint64_t off, uint32_t len)
{
	struct bcp_io *io = bcp_client_io_get(x->c, len);

	if (!io)
		return NULL;
	io->op = op;
	io->fh = x->fh;
	io->offset = off;
	io->length = len;
	io->done = io_done;
	io->priv = w;
	return io;
}

static uint32_t rand_len(uint64_t *s, uint32_t max)
{
	switch (th_rand(s) % 4) {
	case 0:
		return 1 + (uint32_t)(th_rand(s) % 64);
	case 1:
		return 1 + (uint32_t)(th_rand(s) % 8192);
	case 2:
		return 1 + (uint32_t)(th_rand(s) % 131072);
	default:
		return 1 + (uint32_t)(th_rand(s) % max);
	}
}

/* Each thread owns REGION_SIZE bytes: LANES lanes, one I/O per lane. */
static void *worker(void *arg)
{
	struct ctx *x = arg;
	struct bcp_io *io[LANES];
	uint64_t off[LANES], s = x->seed;
	uint32_t len[LANES];
	struct waiter w;
	int r, l, push[LANES];

	waiter_init(&w);
	for (r = 0; r < ROUNDS; r++) {
		pthread_mutex_lock(&w.lock);
		w.pending = LANES;
		pthread_mutex_unlock(&w.lock);
		for (l = 0; l < LANES; l++) {
			len[l] = rand_len(&s, LANE_SIZE);
			off[l] = (uint64_t)x->idx * REGION_SIZE +
				 (uint64_t)l * LANE_SIZE +
				 th_rand(&s) % (LANE_SIZE - len[l] + 1);
			push[l] = th_rand(&s) % 2;
			io[l] = io_prep(x, &w, push[l] ? BCP_OP_BATCH_PUSH :
					BCP_OP_BATCH_PULL, off[l], len[l]);
			if (!io[l]) {
				TH_CHECK(0, "io_get(%u) failed", len[l]);
				return NULL;
			}
			if (push[l]) {
				for (uint32_t i = 0; i < len[l]; i++)
					((uint8_t *)io[l]->buf)[i] =
						(uint8_t)th_rand(&s);
				memcpy(x->ref + off[l], io[l]->buf, len[l]);
			} else {
				memset(io[l]->buf, 0xa5, len[l]);
			}
		}
		for (l = 0; l < LANES; l++)
			bcp_client_submit(x->c, io[l]);
		waiter_wait(&w);
		for (l = 0; l < LANES; l++) {
			TH_CHECK(io_result(io[l]) == (int32_t)len[l],
				 "%s of %u at %llu: %d",
				 push[l] ? "push" : "pull", len[l],
				 (unsigned long long)off[l], io_result(io[l]));
			if (!push[l])
				TH_CHECK(!memcmp(io[l]->buf, x->ref + off[l],
						 len[l]),
					 "pull of %u at %llu: wrong bytes",
					 len[l], (unsigned long long)off[l]);
			bcp_client_io_put(x->c, io[l]);
		}
	}
	return NULL;
}

/* Move [0, size) between the file and ref (or check it) in 1 MiB I/Os. */
static int whole_file(struct ctx *x, uint16_t op, size_t size)
{
	size_t n = (size + LANE_SIZE - 1) / LANE_SIZE, i, len;
	struct bcp_io **io = calloc(n, sizeof(*io));
	struct waiter w;
	int bad = 0;

	waiter_init(&w);
	w.pending = (int)n;
	for (i = 0; i < n; i++) {
		len = size - i * LANE_SIZE < LANE_SIZE ? size - i * LANE_SIZE :
		      LANE_SIZE;
		io[i] = io_prep(x, &w, op, i * LANE_SIZE, (uint32_t)len);
		if (!io[i])
			return -1;
		if (op == BCP_OP_BATCH_PUSH)
			memcpy(io[i]->buf, x->ref + i * LANE_SIZE, len);
		bcp_client_submit(x->c, io[i]);
	}
	waiter_wait(&w);
	for (i = 0; i < n; i++) {
		len = size - i * LANE_SIZE < LANE_SIZE ? size - i * LANE_SIZE :
		      LANE_SIZE;
		if (io_result(io[i]) != (int32_t)len ||
		    (op == BCP_OP_BATCH_PULL &&
		     memcmp(io[i]->buf, x->ref + i * LANE_SIZE, len)))
			bad = 1;
		bcp_client_io_put(x->c, io[i]);
	}
	free(io);
	return bad ? -1 : 0;
}

static int32_t pull_one(struct ctx *x, uint64_t off, uint32_t len,
			const uint8_t *expect)
{
	struct waiter w;
	struct bcp_io *io;
	int32_t r;

	waiter_init(&w);
	w.pending = 1;
	io = io_prep(x, &w, BCP_OP_BATCH_PULL, off, len);
	if (!io)
		return -ENOMEM;
	bcp_client_submit(x->c, io);
	waiter_wait(&w);
	r = io_result(io);
	if (r > 0 && expect && memcmp(io->buf, expect, (size_t)r))
		r = -EILSEQ;
	bcp_client_io_put(x->c, io);
	return r;
}

static void run(const struct th_agent *a, const char *addr,
		enum bcp_transport want_t, enum bcp_transport expect_t,
		uint64_t seed, int n)
{
	struct bcp_client_opts o;
	struct bcp_client_stats st;
	struct bcp_client *c;
	struct bcp_msg req, rep;
	struct ctx x[NTHREADS];
	pthread_t tid[NTHREADS];
	char err[512], path[PATH_MAX + 64], name[32];
	uint8_t *rbuf, *ref, *disk;
	uint64_t s = seed;
	size_t i;
	int ret, fd;

	printf("== %s transport %s\n", addr, bcp_transport_name(want_t));
	bcp_client_opts_init(&o);
	o.addr = addr;
	o.transport = want_t;
	o.pool_size = 48u << 20;
	ret = bcp_client_connect(&o, &c, err, sizeof(err));
	TH_CHECK(ret == 0, "connect %s: %d %s", addr, ret, err);
	if (ret)
		return;
	TH_CHECK(bcp_client_transport(c) == expect_t, "transport %s",
		 bcp_transport_name(bcp_client_transport(c)));
	TH_CHECK(bcp_client_root(c) > 1, "root handle %llu",
		 (unsigned long long)bcp_client_root(c));

	rbuf = malloc(BCP_FRAME_MAX);
	ref = malloc(FILE_SIZE);
	disk = malloc(FILE_SIZE);
	for (i = 0; i < FILE_SIZE; i++)
		ref[i] = (uint8_t)th_rand(&s);

	snprintf(name, sizeof(name), "data-%d-%s", n,
		 bcp_transport_name(expect_t));
	bcp_msg_init(&req, BCP_OP_CREATE, 0);
	req.u.create_req.parent = bcp_client_root(c);
	req.u.create_req.mode = 0100644;
	req.u.create_req.umask = 022;
	req.u.create_req.flags = O_RDWR;
	req.u.create_req.uid = getuid();
	req.u.create_req.gid = getgid();
	req.u.create_req.name_len = (uint16_t)strlen(name);
	req.name = name;
	ret = bcp_client_call(c, &req, &rep, rbuf, BCP_FRAME_MAX);
	TH_CHECK(ret == 0, "CREATE %s: %d", name, ret);
	if (ret)
		goto out;
	for (i = 0; i < NTHREADS; i++) {
		x[i].c = c;
		x[i].fh = rep.u.create_rep.fh;
		x[i].ref = ref;
		x[i].seed = th_rand(&s) | 1;
		x[i].idx = (int)i;
	}
	TH_CHECK(whole_file(&x[0], BCP_OP_BATCH_PUSH, FILE_SIZE) == 0,
		 "filling the file");

	for (i = 0; i < NTHREADS; i++)
		pthread_create(&tid[i], NULL, worker, &x[i]);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(tid[i], NULL);

	TH_CHECK(whole_file(&x[0], BCP_OP_BATCH_PULL, FILE_SIZE) == 0,
		 "the file read back differs from the reference");
	TH_CHECK(pull_one(&x[0], FILE_SIZE - 100, 1000,
			  ref + FILE_SIZE - 100) == 100, "short pull at EOF");
	TH_CHECK(pull_one(&x[0], FILE_SIZE + 10, 1000, NULL) == 0,
		 "pull past EOF");
	TH_CHECK(pull_one(&x[0], 0, 0, NULL) == 0, "empty pull");

	bcp_msg_init(&req, BCP_OP_FSYNC, 0);
	req.u.fsync_req.handle = rep.u.create_rep.entry.handle;
	req.u.fsync_req.fh = x[0].fh;
	ret = bcp_client_call(c, &req, &rep, rbuf, BCP_FRAME_MAX);
	TH_CHECK(ret == 0, "FSYNC: %d", ret);

	/* What the agent stored, read behind its back. */
	snprintf(path, sizeof(path), "%s/%s", a->root, name);
	fd = open(path, O_RDONLY);
	TH_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	if (fd >= 0) {
		TH_CHECK(pread(fd, disk, FILE_SIZE, 0) == (ssize_t)FILE_SIZE,
			 "size of %s", path);
		TH_CHECK(!memcmp(disk, ref, FILE_SIZE),
			 "%s differs from the reference", path);
		close(fd);
	}

	bcp_client_stats(c, &st);
	printf("calls %llu batches %llu (inline %llu) segments %llu pulled %llu pushed %llu\n",
	       (unsigned long long)st.calls, (unsigned long long)st.batches,
	       (unsigned long long)st.batches_inline,
	       (unsigned long long)st.segments,
	       (unsigned long long)st.bytes_pulled,
	       (unsigned long long)st.bytes_pushed);
	/* tcp: the small batches carry their bytes in their frames */
	if (expect_t == BCP_XFER_TCP)
		TH_CHECK(st.batches_inline > 0 &&
			 st.batches_inline < st.batches,
			 "%llu of %llu batches inline over tcp",
			 (unsigned long long)st.batches_inline,
			 (unsigned long long)st.batches);
	else
		TH_CHECK(st.batches_inline == 0,
			 "%llu batches inline over %s",
			 (unsigned long long)st.batches_inline,
			 bcp_transport_name(expect_t));
	TH_CHECK(st.segments > st.batches,
		 "no coalescing: %llu segments in %llu batches",
		 (unsigned long long)st.segments,
		 (unsigned long long)st.batches);
	TH_CHECK(st.bytes_pushed >= FILE_SIZE && st.bytes_pulled >= FILE_SIZE,
		 "byte counters");
	TH_CHECK(st.calls >= 2, "call counter %llu",
		 (unsigned long long)st.calls);
out:
	bcp_client_destroy(c);
	free(disk);
	free(ref);
	free(rbuf);
}

int main(void)
{
	struct th_agent a;
	uint64_t seed;
	int ret;

	alarm(300);
	ret = th_agent_start(&a, NULL);
	if (ret)
		return ret;
	seed = th_seed();
	run(&a, a.unix_addr, BCP_XFER_AUTO, BCP_XFER_SHM, seed, 1);
	run(&a, a.tcp_addr, BCP_XFER_AUTO, BCP_XFER_TCP, seed + 1, 2);
	run(&a, a.unix_addr, BCP_XFER_TCP, BCP_XFER_TCP, seed + 2, 3);
	if (th_agent_stop(&a))
		th_failed++;
	if (th_failed) {
		fprintf(stderr, "%d check(s) failed\n", th_failed);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
