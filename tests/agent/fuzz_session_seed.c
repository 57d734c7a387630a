/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_session_seed.c - write the session fuzzer's seed corpus into DIR:
 * sequences of frames (fuzz_session.h) that a host really sends (lookup,
 * open, register a region, pull, push, release; create and write; mkdir
 * and readdir; xattrs; links and renames; forget), each once with
 * payload lengths left to the harness and once as sent, plus every sample
 * request of tests/protocol/samples.c as a one-frame sequence.  No binary
 * seeds live in the tree.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcp_codec.h"
#include "fuzz_session.h"
#include "samples.h"

#define SEQ_CAP		(256u << 10)

struct seq {
	uint8_t buf[SEQ_CAP];
	size_t len;
	uint64_t req_id;
	uint8_t ctl;			/* added to every record */
};

static const char *seed_dir;
static unsigned int nseeds;

/* Append m as one record. */
static void rec(struct seq *q, uint8_t ctl, struct bcp_msg *m)
{
	int n;

	/* a NOTIFY (agent -> host only, refused from a host) has none */
	m->hdr.req_id = m->hdr.opcode == BCP_OP_NOTIFY ? 0 : ++q->req_id;
	n = bcp_encode(q->buf + q->len + FZS_REC_HDR,
		       sizeof(q->buf) - q->len - FZS_REC_HDR, m);
	if (n < 0 || n > 0xffff) {
		fprintf(stderr, "encode %s: %s\n", bcp_op_name(m->hdr.opcode),
			n < 0 ? strerror(-n) : "too long");
		exit(99);
	}
	q->buf[q->len] = ctl | q->ctl;
	q->buf[q->len + 1] = (uint8_t)n;
	q->buf[q->len + 2] = (uint8_t)(n >> 8);
	q->len += FZS_REC_HDR + (size_t)n;
}

static void seq_write(const struct seq *q, const char *what)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%03u-%s", seed_dir, nseeds,
		 what);
	f = fopen(path, "wb");
	if (!f || fwrite(q->buf, 1, q->len, f) != q->len || fclose(f)) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(99);
	}
	nseeds++;
}

/* ---- one message each ---- */

static void named(struct seq *q, uint16_t op, uint64_t parent,
		  const char *name)
{
	struct bcp_msg m;

	bcp_msg_init(&m, op, 0);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	rec(q, 0, &m);
}

static void node(struct seq *q, uint16_t op, uint64_t handle, uint64_t fh)
{
	struct bcp_msg m;

	bcp_msg_init(&m, op, 0);
	m.u.node_req.handle = handle;
	m.u.node_req.fh = fh;
	rec(q, 0, &m);
}

static void handle_op(struct seq *q, uint16_t op, uint64_t handle)
{
	struct bcp_msg m;

	bcp_msg_init(&m, op, 0);
	m.u.handle_req.handle = handle;
	rec(q, 0, &m);
}

static void create(struct seq *q, uint64_t parent, const char *name)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_CREATE, 0);
	m.u.create_req.parent = parent;
	m.u.create_req.mode = 0100644;
	m.u.create_req.umask = 022;
	m.u.create_req.flags = O_RDWR | O_CREAT;
	m.u.create_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	rec(q, 0, &m);
}

static void mkdir_op(struct seq *q, uint64_t parent, const char *name)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_MKDIR, 0);
	m.u.mkdir_req.parent = parent;
	m.u.mkdir_req.mode = 040755;
	m.u.mkdir_req.umask = 022;
	m.u.mkdir_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	rec(q, 0, &m);
}

static void open_op(struct seq *q, uint16_t op, uint64_t handle,
		    uint32_t flags)
{
	struct bcp_msg m;

	bcp_msg_init(&m, op, 0);
	m.u.open_req.handle = handle;
	m.u.open_req.flags = flags;
	rec(q, 0, &m);
}

static void region(struct seq *q, uint32_t id, uint64_t len)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_REGISTER_REGION, 0);
	m.hdr.flags |= BCP_HF_FD;
	m.u.region_req.region_id = id;
	m.u.region_req.kind = BCP_REGION_SHM;
	m.u.region_req.length = len;
	rec(q, FZS_FD, &m);
}

static void unregion(struct seq *q, uint32_t id)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_UNREGISTER_REGION, 0);
	m.u.unregion_req.region_id = id;
	rec(q, 0, &m);
}

/* count segments of len bytes of fh, back to back in file and region */
/* data: BCP_BATCH_INLINE, a push's count * len bytes (a pull: non-NULL) */
static void batch_data(struct seq *q, uint16_t op, uint64_t fh,
		       uint32_t count, uint32_t len, uint32_t region_id,
		       const uint8_t *data)
{
	struct bcp_seg segs[16];
	struct bcp_msg m;
	uint32_t i;

	for (i = 0; i < count && i < 16; i++) {
		segs[i].fh = fh;
		segs[i].offset = (uint64_t)i * len;
		segs[i].length = len;
		segs[i].region_id = region_id;
		segs[i].region_off = (uint64_t)i * len;
	}
	bcp_msg_init(&m, op, 0);
	m.u.batch_req.count = i;
	m.segs = segs;
	if (data) {
		m.u.batch_req.flags = BCP_BATCH_INLINE;
		if (op == BCP_OP_BATCH_PUSH) {
			m.data = data;
			m.data_len = i * len;
		}
	}
	rec(q, 0, &m);
}

static void batch(struct seq *q, uint16_t op, uint64_t fh, uint32_t count,
		  uint32_t len, uint32_t region_id)
{
	batch_data(q, op, fh, count, len, region_id, NULL);
}

static void setxattr_op(struct seq *q, uint64_t h, const char *name,
			const char *value)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_SETXATTR, 0);
	m.u.setxattr_req.handle = h;
	m.u.setxattr_req.name_len = (uint16_t)strlen(name);
	m.u.setxattr_req.value_len = (uint32_t)strlen(value);
	m.name = name;
	m.data = value;
	m.data_len = (uint32_t)strlen(value);
	rec(q, 0, &m);
}

static void getxattr_op(struct seq *q, uint64_t h, const char *name,
			uint32_t size)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_GETXATTR, 0);
	m.u.getxattr_req.handle = h;
	m.u.getxattr_req.size = size;
	m.u.getxattr_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	rec(q, 0, &m);
}

static void listxattr_op(struct seq *q, uint64_t h, uint32_t size)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_LISTXATTR, 0);
	m.u.listxattr_req.handle = h;
	m.u.listxattr_req.size = size;
	rec(q, 0, &m);
}

static void removexattr_op(struct seq *q, uint64_t h, const char *name)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_REMOVEXATTR, 0);
	m.u.removexattr_req.handle = h;
	m.u.removexattr_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	rec(q, 0, &m);
}

static void forget(struct seq *q, const uint64_t *handles, uint32_t n,
		   uint64_t nlookup)
{
	struct bcp_forget_one f[8];
	struct bcp_msg m;
	uint32_t i;

	for (i = 0; i < n && i < 8; i++) {
		f[i].handle = handles[i];
		f[i].nlookup = nlookup;
	}
	bcp_msg_init(&m, BCP_OP_FORGET, 0);
	m.u.forget_req.count = i;
	m.forgets = f;
	rec(q, 0, &m);
}

static void readdir_op(struct seq *q, uint64_t h, uint64_t fh, uint32_t max,
		       uint32_t flags)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_READDIR, 0);
	m.u.readdir_req.handle = h;
	m.u.readdir_req.fh = fh;
	m.u.readdir_req.max_bytes = max;
	m.u.readdir_req.flags = flags;
	rec(q, 0, &m);
}

static void ping(struct seq *q, uint8_t ctl)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_PING, 0);
	rec(q, ctl, &m);
}

/* ---- sequences ---- */

/* LOOKUP -> OPEN -> REGISTER_REGION -> BATCH_PULL -> RELEASE -> FORGET */
static void seq_pull(struct seq *q)
{
	uint64_t h = FZS_NODE(0);

	create(q, FZS_ROOT, "f");			/* node 0, fh 0 */
	region(q, 1, FZS_SHM_LEN);
	batch(q, BCP_OP_BATCH_PUSH, FZS_FH(0), 4, 16384, 1);
	ping(q, FZS_SYNC);	/* the push done, RELEASE frees the fh */
	node(q, BCP_OP_RELEASE, h, FZS_FH(0));
	named(q, BCP_OP_LOOKUP, FZS_ROOT, "f");
	open_op(q, BCP_OP_OPEN, h, O_RDONLY);		/* fh 0 again, gen 2 */
	batch(q, BCP_OP_BATCH_PULL, (2ull << 32) | 1, 4, 16384, 1);
	batch(q, BCP_OP_BATCH_PULL, (2ull << 32) | 1, 16, 65536, 1);
	node(q, BCP_OP_RELEASE, h, (2ull << 32) | 1);
	unregion(q, 1);
	forget(q, &h, 1, 2);
}

/* CREATE -> BATCH_PUSH -> FSYNC -> FALLOCATE -> LSEEK -> COPY -> SETATTR */
static void seq_push(struct seq *q)
{
	struct bcp_msg m;

	create(q, FZS_ROOT, "a");
	create(q, FZS_ROOT, "b");
	region(q, 7, 65536);
	batch(q, BCP_OP_BATCH_PUSH, FZS_FH(0), 2, 4096, 7);
	batch(q, BCP_OP_BATCH_PUSH, FZS_FH(1), 1, 65536, 7);

	bcp_msg_init(&m, BCP_OP_FSYNC, 0);
	m.u.fsync_req.handle = FZS_NODE(0);
	m.u.fsync_req.fh = FZS_FH(0);
	m.u.fsync_req.datasync = 1;
	rec(q, 0, &m);

	bcp_msg_init(&m, BCP_OP_FALLOCATE, 0);
	m.u.fallocate_req.handle = FZS_NODE(0);
	m.u.fallocate_req.fh = FZS_FH(0);
	m.u.fallocate_req.offset = 8192;
	m.u.fallocate_req.length = 65536;
	rec(q, 0, &m);

	bcp_msg_init(&m, BCP_OP_LSEEK, 0);
	m.u.lseek_req.fh = FZS_FH(0);
	m.u.lseek_req.offset = 0;
	m.u.lseek_req.whence = 3;			/* SEEK_DATA */
	rec(q, 0, &m);

	bcp_msg_init(&m, BCP_OP_COPY_FILE_RANGE, 0);
	m.u.copy_req.fh_in = FZS_FH(1);
	m.u.copy_req.fh_out = FZS_FH(0);
	m.u.copy_req.off_out = 4096;
	m.u.copy_req.length = 32768;
	rec(q, 0, &m);

	bcp_msg_init(&m, BCP_OP_SETATTR, 0);
	m.u.setattr_req.handle = FZS_NODE(0);
	m.u.setattr_req.fh = FZS_FH(0);
	m.u.setattr_req.valid = BCP_SETATTR_SIZE | BCP_SETATTR_MODE |
				BCP_SETATTR_MTIME_NOW;
	m.u.setattr_req.size = 1000;
	m.u.setattr_req.mode = 0600;
	rec(q, 0, &m);

	node(q, BCP_OP_GETATTR, FZS_NODE(0), 0);
	batch(q, BCP_OP_BATCH_PULL, FZS_FH(0), 2, 4096, 7);
	node(q, BCP_OP_RELEASE, FZS_NODE(0), FZS_FH(0));
	node(q, BCP_OP_RELEASE, FZS_NODE(1), FZS_FH(1));
}

/* MKDIR -> CREATE inside -> OPENDIR -> READDIR(+) -> UNLINK -> RMDIR */
static void seq_dir(struct seq *q)
{
	mkdir_op(q, FZS_ROOT, "d");			/* node 0 */
	create(q, FZS_NODE(0), "x");			/* node 1, fh 0 */
	mkdir_op(q, FZS_NODE(0), "e");			/* node 2 */
	open_op(q, BCP_OP_OPENDIR, FZS_NODE(0), O_RDONLY);	/* fh 1 */
	readdir_op(q, FZS_NODE(0), FZS_FH(1), 4096, 0);
	readdir_op(q, FZS_NODE(0), FZS_FH(1), 4096, BCP_READDIR_PLUS);
	readdir_op(q, FZS_NODE(0), FZS_FH(1), 64, BCP_READDIR_PLUS);
	node(q, BCP_OP_RELEASEDIR, FZS_NODE(0), FZS_FH(1));
	node(q, BCP_OP_RELEASE, FZS_NODE(1), FZS_FH(0));
	named(q, BCP_OP_UNLINK, FZS_NODE(0), "x");
	named(q, BCP_OP_RMDIR, FZS_NODE(0), "e");
	named(q, BCP_OP_RMDIR, FZS_ROOT, "d");
	handle_op(q, BCP_OP_STATFS, FZS_ROOT);
}

/* SETXATTR -> GETXATTR (size, value) -> LISTXATTR -> REMOVEXATTR */
static void seq_xattr(struct seq *q)
{
	create(q, FZS_ROOT, "x");
	setxattr_op(q, FZS_NODE(0), "user.a", "value-a");
	setxattr_op(q, FZS_NODE(0), "user.bb", "");
	getxattr_op(q, FZS_NODE(0), "user.a", 0);
	getxattr_op(q, FZS_NODE(0), "user.a", 64);
	getxattr_op(q, FZS_NODE(0), "user.a", 2);
	listxattr_op(q, FZS_NODE(0), 0);
	listxattr_op(q, FZS_NODE(0), 256);
	removexattr_op(q, FZS_NODE(0), "user.a");
	removexattr_op(q, FZS_NODE(0), "user.a");
	listxattr_op(q, FZS_ROOT, 256);
}

/* SYMLINK -> READLINK -> LINK -> RENAME -> MKNOD -> UNLINK -> FORGET */
static void seq_names(struct seq *q)
{
	static const uint64_t all[4] = {
		FZS_NODE(0), FZS_NODE(1), FZS_NODE(2), FZS_NODE(3)
	};
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_SYMLINK, 0);
	m.u.symlink_req.parent = FZS_ROOT;
	m.u.symlink_req.name_len = 1;
	m.u.symlink_req.target_len = 9;
	m.name = "s";
	m.name2 = "../../etc";
	rec(q, 0, &m);					/* node 0 */
	handle_op(q, BCP_OP_READLINK, FZS_NODE(0));
	create(q, FZS_ROOT, "f");			/* node 1 */

	bcp_msg_init(&m, BCP_OP_LINK, 0);
	m.u.link_req.handle = FZS_NODE(1);
	m.u.link_req.newparent = FZS_ROOT;
	m.u.link_req.name_len = 1;
	m.name = "g";
	rec(q, 0, &m);

	mkdir_op(q, FZS_ROOT, "d");			/* node 2 */
	bcp_msg_init(&m, BCP_OP_RENAME, 0);
	m.u.rename_req.parent = FZS_ROOT;
	m.u.rename_req.newparent = FZS_NODE(2);
	m.u.rename_req.name_len = 1;
	m.u.rename_req.newname_len = 1;
	m.name = "g";
	m.name2 = "h";
	rec(q, 0, &m);

	bcp_msg_init(&m, BCP_OP_MKNOD, 0);
	m.u.mknod_req.parent = FZS_NODE(2);
	m.u.mknod_req.mode = 010644;			/* a fifo */
	m.u.mknod_req.name_len = 1;
	m.name = "p";
	rec(q, 0, &m);					/* node 3 */
	named(q, BCP_OP_LOOKUP, FZS_NODE(2), "h");
	named(q, BCP_OP_UNLINK, FZS_NODE(2), "h");
	named(q, BCP_OP_LOOKUP, FZS_ROOT, "s");
	forget(q, all, 4, 1);
	handle_op(q, BCP_OP_READLINK, FZS_NODE(0));
}

/* A tcp host's small batches: the bytes in the frames (BCP_BATCH_INLINE) */
static void seq_inline(struct seq *q)
{
	static uint8_t data[3 * 4096];
	uint32_t i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 3 + 1);
	create(q, FZS_ROOT, "i");
	region(q, 3, 1u << 20);
	batch_data(q, BCP_OP_BATCH_PUSH, FZS_FH(0), 3, 4096, 3, data);
	batch_data(q, BCP_OP_BATCH_PULL, FZS_FH(0), 3, 4096, 3, data);
	/* more than an inline batch may hold: through the region */
	batch_data(q, BCP_OP_BATCH_PULL, FZS_FH(0), 16, 8192, 3, data);
}

/* Frames cut between records and waits between them. */
static void seq_sync(struct seq *q)
{
	create(q, FZS_ROOT, "f");
	ping(q, FZS_SYNC);
	region(q, 2, 8192);
	batch(q, BCP_OP_BATCH_PUSH, FZS_FH(0), 2, 4096, 2);
	batch(q, BCP_OP_BATCH_PULL, FZS_FH(0), 2, 4096, 2);
	ping(q, FZS_SYNC);
	node(q, BCP_OP_GETATTR, FZS_NODE(0), FZS_FH(0));
}

int main(int argc, char **argv)
{
	static void (*const seqs[])(struct seq *) = {
		seq_pull, seq_push, seq_dir, seq_xattr, seq_names, seq_sync,
		seq_inline,
	};
	static const char *const names[] = {
		"pull", "push", "dir", "xattr", "names", "sync", "inline",
	};
	static struct sample s;
	static struct seq q;
	unsigned int i, fix;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 99;
	}
	seed_dir = argv[1];
	for (i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
		for (fix = 0; fix < 2; fix++) {
			memset(&q, 0, sizeof(q));
			q.ctl = fix ? FZS_FIX : 0;
			seqs[i](&q);
			seq_write(&q, names[i]);
		}
	}
	/* metadata through the ring; a tcp session (no shm) */
	memset(&q, 0, sizeof(q));
	q.ctl = FZS_URING | FZS_FIX;
	seq_dir(&q);
	seq_write(&q, "dir-uring");
	memset(&q, 0, sizeof(q));
	q.ctl = FZS_URING | FZS_FIX;
	seq_names(&q);
	seq_write(&q, "names-uring");
	memset(&q, 0, sizeof(q));
	q.ctl = FZS_TCP | FZS_FIX;
	seq_pull(&q);
	seq_write(&q, "pull-tcp");
	/* without AUTH: only AUTH itself may come */
	memset(&q, 0, sizeof(q));
	q.ctl = FZS_NOAUTH;
	ping(&q, 0);
	seq_write(&q, "noauth");
	/* every sample request on its own, after a CREATE */
	for (i = 0; sample_make(i, &s) == 0; i++) {
		if (s.m.hdr.flags & BCP_HF_REPLY)
			continue;
		memset(&q, 0, sizeof(q));
		q.ctl = FZS_FIX;
		create(&q, FZS_ROOT, "f");
		rec(&q, 0, &s.m);
		seq_write(&q, "sample");
	}
	printf("%u seed sequences written to %s\n", nseeds, seed_dir);
	return 0;
}
