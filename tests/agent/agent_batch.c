/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_batch.c - BATCH_PUSH / BATCH_PULL against a real agent with four
 * 64 KiB slots: random sizes and offsets verified byte for byte over both
 * transports (shm on the unix socket, tcp on 127.0.0.1), then raw batches
 * over shm: one bad segment of each kind fails only itself, and a batch
 * larger than all slots together completes.  Inline batches
 * (BCP_BATCH_INLINE): a push's bytes come from its frame and a pull's in
 * its reply, never through the region, with the fast path and through the
 * staging slots (--inline-max 0); a pull asking more than the frame may
 * carry moves through the region, as do those the agent's output has no
 * room for (a host that does not read its replies); a session that did
 * not negotiate the feature gets -EINVAL.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "bcp_frame.h"
#include "harness.h"

#define FILE_MAX	(2u << 20)
#define LANES		8
#define LANE		(FILE_MAX / LANES)

static uint8_t shadow[FILE_MAX];

struct lane_io {
	struct bcp_client *c;
	uint16_t op;
	uint64_t fh, off;
	uint32_t len;
	uint8_t *data;
	int res;
};

static void *lane_run(void *arg)
{
	struct lane_io *l = arg;

	l->res = t_io(l->c, l->op, l->fh, l->off, l->data, l->len);
	return NULL;
}

static void random_rw(struct t_agent *a, int tcp)
{
	enum bcp_transport tr = tcp ? BCP_XFER_TCP : BCP_XFER_SHM;
	struct bcp_client *c = t_client(a, tcp, tr, 8u << 20);
	static uint8_t data[LANES][LANE], back[LANE];
	uint64_t root = bcp_client_root(c), fh, size = 0;
	char name[32], path[600];
	struct bcp_entry e;
	int round, i, fd;

	T_EQ(bcp_client_transport(c), tr);
	snprintf(name, sizeof(name), "rand-%s", tcp ? "tcp" : "shm");
	T_EQ(t_create(c, root, name, 0644, O_RDWR, &e, &fh), 0);
	memset(shadow, 0, sizeof(shadow));
	for (round = 0; round < 30; round++) {
		struct lane_io io[LANES];
		pthread_t th[LANES];

		/* eight concurrent writes in disjoint lanes: many-seg batches */
		for (i = 0; i < LANES; i++) {
			uint32_t len = 1 + (uint32_t)(random() % (LANE - 1));
			uint32_t off = (uint32_t)(random() % (LANE - len + 1));
			uint32_t j;

			for (j = 0; j < len; j++)
				data[i][j] = (uint8_t)random();
			io[i] = (struct lane_io){ c, BCP_OP_BATCH_PUSH, fh,
						  (uint64_t)i * LANE + off,
						  len, data[i], 0 };
			memcpy(shadow + io[i].off, data[i], len);
			if (io[i].off + len > size)
				size = io[i].off + len;
			pthread_create(&th[i], NULL, lane_run, &io[i]);
		}
		for (i = 0; i < LANES; i++) {
			pthread_join(th[i], NULL);
			T_EQ(io[i].res, io[i].len);
		}
		/* random reads, compared with what was written */
		for (i = 0; i < 4; i++) {
			uint32_t len = 1 + (uint32_t)(random() % LANE);
			uint64_t off = (uint64_t)random() % FILE_MAX;
			int want = off >= size ? 0 : (int)(size - off < len ?
							   size - off : len);

			T_EQ(t_io(c, BCP_OP_BATCH_PULL, fh, off, back, len),
			     want);
			T_CHECK(!memcmp(back, shadow + off, (size_t)want));
		}
	}
	/* the file on disk has exactly the bytes written */
	snprintf(path, sizeof(path), "%s/%s", a->root, name);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0);
	{
		static uint8_t disk[FILE_MAX];
		ssize_t n = pread(fd, disk, sizeof(disk), 0);

		close(fd);
		T_EQ(n, size);
		T_EQ(t_fnv(disk, (size_t)n), t_fnv(shadow, size));
	}
	T_EQ(t_release(c, e.handle, fh), 0);
	bcp_client_destroy(c);
}

/* Raw session over shm with a 4 MiB memfd region 7. */
static void raw_batches(struct t_agent *a)
{
	static uint8_t buf[BCP_FRAME_MAX], pat[3u << 20];
	struct bcp_seg segs[40];
	struct bcp_msg m, rep;
	uint64_t root, fh;
	size_t rlen = 4u << 20;
	uint8_t *region;
	int fd, mfd, i;
	char path[600];

	for (i = 0; i < (int)sizeof(pat); i++)
		pat[i] = (uint8_t)(i * 7 + (i >> 12));
	snprintf(path, sizeof(path), "%s/big", a->root);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	T_EQ(write(fd, pat, sizeof(pat)), sizeof(pat));
	close(fd);

	fd = t_raw_connect(a, 0);
	T_EQ(t_raw_handshake(fd, a->secret, &root, NULL), 0);
	/* A memfd that cannot be sealed against shrinking is refused. */
	mfd = memfd_create("t-unsealable", MFD_CLOEXEC);
	T_EQ(ftruncate(mfd, (off_t)rlen), 0);
	T_EQ(t_raw_register_shm(fd, 9, 6, mfd, rlen), -EPERM);
	close(mfd);

	mfd = memfd_create("t-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	T_EQ(ftruncate(mfd, (off_t)rlen), 0);
	region = mmap(NULL, rlen, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	T_CHECK(region != MAP_FAILED);
	T_EQ(t_raw_register_shm(fd, 10, 7, mfd, rlen), 0);

	bcp_msg_init(&m, BCP_OP_LOOKUP, 11);
	m.u.named_req.parent = root;
	m.u.named_req.name_len = 3;
	m.name = "big";
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
	bcp_msg_init(&m, BCP_OP_OPEN, 12);
	m.u.open_req.handle = rep.u.entry_rep.entry.handle;
	m.u.open_req.flags = O_RDWR;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
	fh = rep.u.open_rep.fh;

	/* PULL: 1 MiB (16 chunks), bad fh, bad region, out of bounds,
	 * past EOF, short at EOF, then 32 x 64 KiB: far more than 4 slots */
	memset(segs, 0, sizeof(segs));
	segs[0] = (struct bcp_seg){ fh, 12345, 1u << 20, 7, 0 };
	segs[1] = (struct bcp_seg){ fh + 999, 0, 4096, 7, 1u << 20 };
	segs[2] = (struct bcp_seg){ fh, 0, 4096, 8, 0 };
	segs[3] = (struct bcp_seg){ fh, 0, 8192, 7, rlen - 4096 };
	segs[4] = (struct bcp_seg){ fh, 5u << 20, 4096, 7, 7u << 19 };
	segs[5] = (struct bcp_seg){ fh, sizeof(pat) - 100, 4096, 7,
				    (7u << 19) + 8192 };
	for (i = 6; i < 38; i++)
		segs[i] = (struct bcp_seg){ fh, (uint64_t)(i - 6) * 65536,
					    65536, 7,
					    (uint64_t)(i - 6) * 65536 +
						    (1u << 20) + 65536 };
	memset(region, 0xee, rlen);
	bcp_msg_init(&m, BCP_OP_BATCH_PULL, 13);
	m.u.batch_req.count = 38;
	m.segs = segs;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
	T_EQ(rep.u.batch_rep.count, 38);
	T_EQ(bcp_msg_status(&rep, 0), 1u << 20);
	T_CHECK(!memcmp(region, pat + 12345, 1u << 20));
	T_EQ(bcp_msg_status(&rep, 1), -EBADF);
	T_CHECK(bcp_msg_status(&rep, 2) < 0);
	T_CHECK(bcp_msg_status(&rep, 3) < 0);
	T_EQ(bcp_msg_status(&rep, 4), 0);
	T_EQ(bcp_msg_status(&rep, 5), 100);
	T_CHECK(!memcmp(region + (7u << 19) + 8192, pat + sizeof(pat) - 100,
			100));
	for (i = 6; i < 38; i++) {
		T_EQ(bcp_msg_status(&rep, (uint32_t)i), 65536);
	}
	T_CHECK(!memcmp(region + (1u << 20) + 65536, pat, 32 * 65536));

	/* PUSH: 1.5 MiB from the region, one bad segment beside it */
	for (i = 0; i < (int)(3u << 19); i++)
		region[i] = (uint8_t)(i * 13 + 1);
	segs[0] = (struct bcp_seg){ fh, 100, 3u << 19, 7, 0 };
	segs[1] = (struct bcp_seg){ 0, 0, 4096, 7, 0 };
	bcp_msg_init(&m, BCP_OP_BATCH_PUSH, 14);
	m.u.batch_req.count = 2;
	m.segs = segs;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
	T_EQ(bcp_msg_status(&rep, 0), 3u << 19);
	T_EQ(bcp_msg_status(&rep, 1), -EBADF);
	fd = open(path, O_RDONLY);
	{
		static uint8_t disk[3u << 19];

		T_EQ(pread(fd, disk, sizeof(disk), 100), sizeof(disk));
		T_CHECK(!memcmp(disk, region, sizeof(disk)));
	}
	close(fd);
	munmap(region, rlen);
	close(mfd);
}

#define INL_FILE	(200u * 1024)

/* A BATCH_PULL of count segs asking BCP_BATCH_INLINE; its status. */
static int inline_pull(int fd, uint64_t id, const struct bcp_seg *segs,
		       uint32_t count, struct bcp_msg *rep, uint8_t *buf)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_BATCH_PULL, id);
	m.u.batch_req.count = count;
	m.u.batch_req.flags = BCP_BATCH_INLINE;
	m.segs = segs;
	return t_raw_call(fd, &m, rep, buf, BCP_FRAME_MAX);
}

static void raw_inline(struct t_agent *a)
{
	static uint8_t pat[INL_FILE], back[INL_FILE], data[BCP_FRAME_MAX],
		buf[BCP_FRAME_MAX];
	static const uint8_t none[BCP_CLIENT_ID_LEN];
	struct bcp_seg segs[6];
	struct bcp_msg m, rep;
	uint64_t fh, root;
	size_t rlen = 1u << 20;
	uint8_t *region;
	char path[600];
	uint32_t i;
	int fd;

	for (i = 0; i < INL_FILE; i++)
		pat[i] = (uint8_t)(i * 11 + (i >> 9) + 3);
	snprintf(path, sizeof(path), "%s/inl", a->root);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	T_EQ(write(fd, pat, INL_FILE), INL_FILE);
	close(fd);
	fd = t_raw_shm_session(a, "inl", rlen, &region, &fh);
	memset(region, 0, rlen);

	/* PUSH: the bytes are the frame's (the region holds zeros) */
	segs[0] = (struct bcp_seg){ fh, 0, 5000, 7, 0 };
	segs[1] = (struct bcp_seg){ fh + 999, 0, 100, 7, 8192 };
	segs[2] = (struct bcp_seg){ fh, 10000, 3000, 7, 16384 };
	for (i = 0; i < 8100; i++)
		data[i] = (uint8_t)(i * 5 + 1);
	bcp_msg_init(&m, BCP_OP_BATCH_PUSH, 20);
	m.u.batch_req.count = 3;
	m.u.batch_req.flags = BCP_BATCH_INLINE;
	m.segs = segs;
	m.data = data;
	m.data_len = 8100;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
	T_EQ(bcp_msg_status(&rep, 0), 5000);
	T_EQ(bcp_msg_status(&rep, 1), -EBADF);
	T_EQ(bcp_msg_status(&rep, 2), 3000);
	T_EQ(rep.u.batch_rep.data_len, 0);
	memcpy(pat, data, 5000);
	memcpy(pat + 10000, data + 5100, 3000);
	{
		int dfd = open(path, O_RDONLY);

		T_EQ(pread(dfd, back, INL_FILE, 0), INL_FILE);
		close(dfd);
		T_CHECK(!memcmp(back, pat, INL_FILE));
	}

	/* PULL: the bytes delivered, in turn, in the reply */
	memset(region, 0xee, rlen);
	segs[0] = (struct bcp_seg){ fh, 1, 5000, 7, 0 };
	segs[1] = (struct bcp_seg){ fh, INL_FILE - 100, 4096, 7, 8192 };
	segs[2] = (struct bcp_seg){ fh, INL_FILE + 10, 10, 7, 16384 };
	segs[3] = (struct bcp_seg){ fh + 999, 0, 100, 7, 20480 };
	segs[4] = (struct bcp_seg){ fh, 9000, 3000, 7, 24576 };
	T_EQ(inline_pull(fd, 21, segs, 5, &rep, buf), 0);
	T_EQ(bcp_msg_status(&rep, 0), 5000);
	T_EQ(bcp_msg_status(&rep, 1), 100);
	T_EQ(bcp_msg_status(&rep, 2), 0);
	T_EQ(bcp_msg_status(&rep, 3), -EBADF);
	T_EQ(bcp_msg_status(&rep, 4), 3000);
	T_EQ(rep.u.batch_rep.data_len, 8100);
	T_EQ(rep.data_len, 8100);
	T_CHECK(!memcmp(rep.data, pat + 1, 5000));
	T_CHECK(!memcmp((const uint8_t *)rep.data + 5000,
			pat + INL_FILE - 100, 100));
	T_CHECK(!memcmp((const uint8_t *)rep.data + 5100, pat + 9000, 3000));
	for (i = 0; i < 32768; i++)
		if (region[i] != 0xee)
			break;
	T_EQ(i, 32768);		/* the region was left alone */

	/* more than a frame carries: through the region as usual */
	segs[0] = (struct bcp_seg){ fh, 0, 40000, 7, 0 };
	segs[1] = (struct bcp_seg){ fh, 50000, 40000, 7, 65536 };
	T_EQ(inline_pull(fd, 22, segs, 2, &rep, buf), 0);
	T_EQ(bcp_msg_status(&rep, 0), 40000);
	T_EQ(bcp_msg_status(&rep, 1), 40000);
	T_EQ(rep.u.batch_rep.data_len, 0);
	T_CHECK(!memcmp(region, pat, 40000));
	T_CHECK(!memcmp(region + 65536, pat + 50000, 40000));
	close(fd);
	munmap(region, rlen);

	/* not negotiated: refused */
	fd = t_raw_connect(a, 0);
	T_EQ(t_raw_handshake_features(fd, a->secret, none,
				      BCP_FEAT_ALL &
				      ~(BCP_FEAT_BATCH_INLINE | BCP_FEAT_BUSY),
				      &root, NULL), 0);
	segs[0] = (struct bcp_seg){ fh, 0, 10, 7, 0 };
	T_EQ(inline_pull(fd, 23, segs, 1, &rep, buf), -EINVAL);
	close(fd);
}

#define FLOOD_N		48
#define FLOOD_STEP	65536u

/*
 * A host that sends many inline pulls before it reads a reply: the
 * agent's output fills, and the pulls it can no longer hold room for
 * move through the region instead; every one is answered, right.
 */
static void raw_inline_flood(struct t_agent *a)
{
	static uint8_t pat[FLOOD_N * FLOOD_STEP], buf[BCP_FRAME_MAX];
	size_t rlen = FLOOD_N * FLOOD_STEP;
	unsigned int inl = 0, region_path = 0;
	struct bcp_msg m, rep;
	struct bcp_seg sg;
	uint8_t *region;
	char path[600];
	uint64_t fh;
	uint32_t i;
	int fd;

	for (i = 0; i < sizeof(pat); i++)
		pat[i] = (uint8_t)(i * 29 + (i >> 16));
	snprintf(path, sizeof(path), "%s/flood", a->root);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	T_EQ(write(fd, pat, sizeof(pat)), sizeof(pat));
	close(fd);
	fd = t_raw_shm_session(a, "flood", rlen, &region, &fh);
	memset(region, 0xee, rlen);
	for (i = 0; i < FLOOD_N; i++) {
		/* lengths that do not divide the output's room evenly */
		sg = (struct bcp_seg){ fh, (uint64_t)i * FLOOD_STEP,
				       FLOOD_STEP - i * 13, 7,
				       (uint64_t)i * FLOOD_STEP };
		bcp_msg_init(&m, BCP_OP_BATCH_PULL, 100 + i);
		m.u.batch_req.count = 1;
		m.u.batch_req.flags = BCP_BATCH_INLINE;
		m.segs = &sg;
		T_EQ(t_raw_send(fd, &m), 0);
	}
	for (i = 0; i < FLOOD_N; i++) {
		uint32_t k, len;
		uint64_t off;

		do {	/* a NOTIFY (the file written beside it) is no reply */
			T_EQ(t_raw_recv(fd, &rep, buf, sizeof(buf), 10000), 0);
		} while (rep.hdr.opcode == BCP_OP_NOTIFY &&
			 !(rep.hdr.flags & BCP_HF_REPLY));
		k = (uint32_t)rep.hdr.req_id - 100;
		T_CHECK(k < FLOOD_N);
		off = (uint64_t)k * FLOOD_STEP;
		len = FLOOD_STEP - k * 13;
		T_EQ(bcp_msg_status(&rep, 0), len);
		if (rep.u.batch_rep.data_len) {
			T_EQ(rep.data_len, len);
			T_CHECK(!memcmp(rep.data, pat + off, len));
			inl++;
		} else {
			T_CHECK(!memcmp(region + off, pat + off, len));
			region_path++;
		}
	}
	printf("flood: %u pulls inline, %u through the region\n", inl,
	       region_path);
	T_CHECK(inl > 0 && region_path > 0);
	close(fd);
	munmap(region, rlen);
}

int main(void)
{
	struct t_agent a;

	srandom(4242);
	t_agent_init(&a, "agent_batch");
	t_agent_start(&a);
	random_rw(&a, 0);
	random_rw(&a, 1);
	raw_batches(&a);
	raw_inline(&a);
	raw_inline_flood(&a);
	T_EQ(t_agent_stop(&a), 0);

	/* inline batches through the staging slots */
	a.extra[0] = "--inline-max";
	a.extra[1] = "0";
	t_agent_start(&a);
	raw_inline(&a);
	T_EQ(t_agent_stop(&a), 0);
	t_agent_cleanup(&a);
	return 0;
}
