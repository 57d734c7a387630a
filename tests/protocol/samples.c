/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * samples.c - valid sample messages and a field-by-field comparison, both
 * generated from the field lists of bcp_wire.h.  Every field gets its own
 * value, so a field written at the wrong offset or swapped with another
 * shows up as a difference after encode -> decode.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "samples.h"

static uint64_t mix(uint64_t *seed)
{
	uint64_t z = (*seed += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- fill every field with a distinct value ---- */

#define FILL_U16(n)	o->n = (uint16_t)mix(seed);
#define FILL_U32(n)	o->n = (uint32_t)mix(seed);
#define FILL_U64(n)	o->n = mix(seed);
#define FILL_S32(n)	o->n = (int32_t)mix(seed);
#define FILL_S64(n)	o->n = (int64_t)mix(seed);
#define FILL_PAD16(n)
#define FILL_PAD32(n)
#define FILL_B16(n)	fill_bytes(o->n, 16, seed);
#define FILL_B32(n)	fill_bytes(o->n, 32, seed);
#define FILL_B64(n)	fill_bytes(o->n, 64, seed);
#define FILL_ATTR(n)	fill_attr(&o->n, seed);
#define FILL_ENTRY(n)	fill_entry(&o->n, seed);
#define FILL_FIELD(k, n) FILL_##k(n)

static void fill_bytes(uint8_t *p, size_t n, uint64_t *seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)mix(seed);
}

#define GEN_FILL_DECL(name, FIELDS, size)				\
	static void fill_##name(struct bcp_##name *o, uint64_t *seed);
BCP_MSGS(GEN_FILL_DECL)

#define GEN_FILL(name, FIELDS, size)					\
static void fill_##name(struct bcp_##name *o, uint64_t *seed)		\
{									\
	FIELDS(FILL_FIELD)						\
}									\
static __attribute__((unused)) void fill_any_##name(void *o,	\
						    uint64_t *seed)	\
{									\
	fill_##name(o, seed);						\
}
BCP_MSGS(GEN_FILL)

/* ---- compare every field ---- */

#define CMP_INT(n, fmt, cast)						\
	if (a->n != b->n) {						\
		fprintf(stderr, "%s.%s: %" fmt " != %" fmt "\n", ctx,	\
			#n, (cast)a->n, (cast)b->n);			\
		diff++;							\
	}
#define CMP_U16(n)	CMP_INT(n, "llx", unsigned long long)
#define CMP_U32(n)	CMP_INT(n, "llx", unsigned long long)
#define CMP_U64(n)	CMP_INT(n, "llx", unsigned long long)
#define CMP_S32(n)	CMP_INT(n, "lld", long long)
#define CMP_S64(n)	CMP_INT(n, "lld", long long)
#define CMP_PAD16(n)
#define CMP_PAD32(n)
#define CMP_BYTES(n)							\
	if (memcmp(a->n, b->n, sizeof(a->n))) {				\
		fprintf(stderr, "%s.%s differs\n", ctx, #n);		\
		diff++;							\
	}
#define CMP_B16(n)	CMP_BYTES(n)
#define CMP_B32(n)	CMP_BYTES(n)
#define CMP_B64(n)	CMP_BYTES(n)
#define CMP_ATTR(n)	diff += cmp_attr(&a->n, &b->n, ctx);
#define CMP_ENTRY(n)	diff += cmp_entry(&a->n, &b->n, ctx);
#define CMP_FIELD(k, n)	CMP_##k(n)

#define GEN_CMP_DECL(name, FIELDS, size)				\
	static int cmp_##name(const struct bcp_##name *a,		\
			      const struct bcp_##name *b, const char *ctx);
BCP_MSGS(GEN_CMP_DECL)

#define GEN_CMP(name, FIELDS, size)					\
static int cmp_##name(const struct bcp_##name *a,			\
		      const struct bcp_##name *b, const char *ctx)	\
{									\
	int diff = 0;							\
									\
	FIELDS(CMP_FIELD)						\
	return diff;							\
}									\
static __attribute__((unused)) int cmp_any_##name(const void *a,	\
						  const void *b,	\
						  const char *ctx)	\
{									\
	return cmp_##name(a, b, ctx);					\
}
BCP_MSGS(GEN_CMP)

/* ---- the opcode table, written out again ---- */

#define fill_any_none	NULL
#define cmp_any_none	NULL

struct op_spec {
	void (*fill[2])(void *, uint64_t *);
	int (*cmp[2])(const void *, const void *, const char *);
	int size[2];
	int known;
};

#define OPS(op, rq, rp)							\
	[BCP_OP_##op] = { { fill_any_##rq, fill_any_##rp },		\
			  { cmp_any_##rq, cmp_any_##rp },		\
			  { SZ_##rq, SZ_##rp }, 1 }
#define SZ_none 0
#define SZ_hello_req 64
#define SZ_hello_rep 96
#define SZ_auth_req 32
#define SZ_auth_rep 40
#define SZ_attach_req 40
#define SZ_named_req 16
#define SZ_entry_rep 256
#define SZ_dir_rep 88
#define SZ_rename_rep 176
#define SZ_node_req 16
#define SZ_attr_rep 88
#define SZ_setattr_req 64
#define SZ_create_req 32
#define SZ_create_rep 272
#define SZ_mkdir_req 32
#define SZ_mknod_req 40
#define SZ_symlink_req 24
#define SZ_handle_req 8
#define SZ_readlink_rep 8
#define SZ_link_req 24
#define SZ_rename_req 24
#define SZ_open_req 16
#define SZ_open_rep 104
#define SZ_readdir_req 32
#define SZ_readdir_rep 8
#define SZ_statfs_rep 56
#define SZ_fsync_req 24
#define SZ_fallocate_req 40
#define SZ_setxattr_req 24
#define SZ_getxattr_req 16
#define SZ_listxattr_req 16
#define SZ_xattr_rep 8
#define SZ_removexattr_req 16
#define SZ_forget_req 8
#define SZ_copy_req 48
#define SZ_copy_rep 8
#define SZ_lseek_req 24
#define SZ_lseek_rep 8
#define SZ_region_req 32
#define SZ_unregion_req 8
#define SZ_batch_req 8
#define SZ_batch_rep 8
#define SZ_data_req 16
#define SZ_rebind_req 8
#define SZ_reopen_req 24
#define SZ_notify_req 40

static const struct op_spec ops[BCP_OP_MAX] = {
	OPS(HELLO, hello_req, hello_rep),
	OPS(AUTH, auth_req, auth_rep),
	OPS(DATA_ATTACH, attach_req, none),
	OPS(PING, none, none),
	OPS(LOOKUP, named_req, entry_rep),
	OPS(GETATTR, node_req, attr_rep),
	OPS(SETATTR, setattr_req, attr_rep),
	OPS(CREATE, create_req, create_rep),
	OPS(MKDIR, mkdir_req, entry_rep),
	OPS(MKNOD, mknod_req, entry_rep),
	OPS(SYMLINK, symlink_req, entry_rep),
	OPS(READLINK, handle_req, readlink_rep),
	OPS(LINK, link_req, entry_rep),
	OPS(UNLINK, named_req, dir_rep),
	OPS(RMDIR, named_req, dir_rep),
	OPS(RENAME, rename_req, rename_rep),
	OPS(OPEN, open_req, open_rep),
	OPS(RELEASE, node_req, none),
	OPS(OPENDIR, open_req, open_rep),
	OPS(RELEASEDIR, node_req, none),
	OPS(READDIR, readdir_req, readdir_rep),
	OPS(STATFS, handle_req, statfs_rep),
	OPS(FSYNC, fsync_req, none),
	OPS(FSYNCDIR, fsync_req, none),
	OPS(FALLOCATE, fallocate_req, none),
	OPS(SETXATTR, setxattr_req, none),
	OPS(GETXATTR, getxattr_req, xattr_rep),
	OPS(LISTXATTR, listxattr_req, xattr_rep),
	OPS(REMOVEXATTR, removexattr_req, none),
	OPS(FORGET, forget_req, none),
	OPS(COPY_FILE_RANGE, copy_req, copy_rep),
	OPS(LSEEK, lseek_req, lseek_rep),
	OPS(REBIND, rebind_req, batch_rep),
	OPS(REOPEN, reopen_req, open_rep),
	OPS(NOTIFY, notify_req, none),
	OPS(REGISTER_REGION, region_req, none),
	OPS(UNREGISTER_REGION, unregion_req, none),
	OPS(BATCH_PULL, batch_req, batch_rep),
	OPS(BATCH_PUSH, batch_req, batch_rep),
	OPS(DATA_WRITE, data_req, none),
	OPS(DATA_READ, data_req, none),
};

int sample_body_size(uint16_t opcode, int reply)
{
	if (opcode >= BCP_OP_MAX || !ops[opcode].known)
		return -1;
	return ops[opcode].size[!!reply];
}

/* ---- samples ---- */

enum { K_REQ, K_REP, K_ERR, K_VARIANT, K__MAX };

static const char NAME1[] = "file.txt";
static const char NAME2[] = "new name with spaces";
static const char TARGET[] = "../some/target path";
static const char XNAME[] = "user.bluecache.test";

static void set_data(struct sample *s, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < len && i < sizeof(s->data); i++)
		s->data[i] = (uint8_t)(i * 7 + 3);
	s->m.data = s->data;
	s->m.data_len = len;
}

static void build_dirents(struct sample *s, int plus, uint64_t *seed)
{
	static const char *const names[SAMPLE_DIRENTS] = {
		".", "..", "alpha", "a-longer-name-needing-padding-x",
	};
	size_t off = 0;
	int i, ret;

	s->plus = plus;
	for (i = 0; i < SAMPLE_DIRENTS; i++) {
		struct sample_dirent *e = &s->ents[i];

		memset(e, 0, sizeof(*e));
		e->name = names[i];
		e->d.cookie = mix(seed);
		e->d.ino = mix(seed);
		e->d.type = (uint32_t)(mix(seed) % 16);
		e->d.name_len = (uint16_t)strlen(names[i]);
		if (plus && i >= 2) {
			fill_entry(&e->entry, seed);
			e->entry.handle |= 2;
		}
		ret = bcp_dirent_put(s->dirents, sizeof(s->dirents), &off,
				     plus, &e->d, plus ? &e->entry : NULL,
				     e->name);
		if (ret)
			fprintf(stderr, "bcp_dirent_put: %d\n", ret);
	}
	s->m.dirents = s->dirents;
	s->m.dirents_len = (uint32_t)off;
	s->m.u.readdir_rep.count = SAMPLE_DIRENTS;
	s->m.u.readdir_rep.eof = 1;
}

static void fix_request(struct sample *s, uint64_t *seed)
{
	struct bcp_msg *m = &s->m;
	int i;

	switch (m->hdr.opcode) {
	case BCP_OP_HELLO:
		m->u.hello_req.ver_min = BCP_VERSION_MIN;
		m->u.hello_req.ver_max = BCP_VERSION_MAX;
		break;
	case BCP_OP_LOOKUP:
	case BCP_OP_UNLINK:
	case BCP_OP_RMDIR:
		m->u.named_req.name_len = sizeof(NAME1) - 1;
		m->name = NAME1;
		break;
	case BCP_OP_SETATTR:
		m->u.setattr_req.valid = BCP_SETATTR_ALL;
		m->u.setattr_req.size &= INT64_MAX;
		m->u.setattr_req.atime_nsec %= 1000000000u;
		m->u.setattr_req.mtime_nsec %= 1000000000u;
		break;
	case BCP_OP_CREATE:
		m->u.create_req.name_len = sizeof(NAME1) - 1;
		m->name = NAME1;
		break;
	case BCP_OP_MKDIR:
		m->u.mkdir_req.name_len = sizeof(NAME1) - 1;
		m->name = NAME1;
		break;
	case BCP_OP_MKNOD:
		m->u.mknod_req.name_len = sizeof(NAME1) - 1;
		m->name = NAME1;
		break;
	case BCP_OP_SYMLINK:
		m->u.symlink_req.name_len = sizeof(NAME1) - 1;
		m->u.symlink_req.target_len = sizeof(TARGET) - 1;
		m->name = NAME1;
		m->name2 = TARGET;
		break;
	case BCP_OP_LINK:
		m->u.link_req.name_len = sizeof(NAME2) - 1;
		m->name = NAME2;
		break;
	case BCP_OP_RENAME:
		m->u.rename_req.flags = BCP_RENAME_NOREPLACE;
		m->u.rename_req.name_len = sizeof(NAME1) - 1;
		m->u.rename_req.newname_len = sizeof(NAME2) - 1;
		m->name = NAME1;
		m->name2 = NAME2;
		break;
	case BCP_OP_READDIR:
		m->u.readdir_req.max_bytes = 4096;
		m->u.readdir_req.flags = BCP_READDIR_PLUS;
		break;
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
		m->u.fsync_req.datasync = 1;
		break;
	case BCP_OP_FALLOCATE:
		m->u.fallocate_req.offset = 1ull << 40;
		m->u.fallocate_req.length = 8192;
		m->u.fallocate_req.mode = 1;
		break;
	case BCP_OP_SETXATTR:
		m->u.setxattr_req.flags = 1;
		m->u.setxattr_req.name_len = sizeof(XNAME) - 1;
		m->u.setxattr_req.value_len = 100;
		m->name = XNAME;
		set_data(s, 100);
		break;
	case BCP_OP_GETXATTR:
		m->u.getxattr_req.size = 300;
		m->u.getxattr_req.name_len = sizeof(XNAME) - 1;
		m->name = XNAME;
		break;
	case BCP_OP_LISTXATTR:
		m->u.listxattr_req.size = 65536;
		break;
	case BCP_OP_REMOVEXATTR:
		m->u.removexattr_req.name_len = sizeof(XNAME) - 1;
		m->name = XNAME;
		break;
	case BCP_OP_FORGET:
		m->u.forget_req.count = 3;
		for (i = 0; i < 3; i++)
			fill_forget_one(&s->forgets[i], seed);
		m->forgets = s->forgets;
		break;
	case BCP_OP_REBIND:
		m->u.rebind_req.count = 3;
		m->u.rebind_req.flags = 0;
		for (i = 0; i < 3; i++)
			fill_rebind_one(&s->rebinds[i], seed);
		m->rebinds = s->rebinds;
		break;
	case BCP_OP_REOPEN:
		m->u.reopen_req.fh |= 1;
		m->u.reopen_req.dir = 1;
		break;
	case BCP_OP_OPEN:
		m->u.open_req.peek = BCP_OPEN_PEEK_MAX;
		break;
	case BCP_OP_OPENDIR:
		m->u.open_req.peek = 0;
		break;
	case BCP_OP_NOTIFY:
		m->hdr.req_id = 0;
		m->u.notify_req.kind = BCP_NOTIFY_DELETE;
		m->u.notify_req.name_len = sizeof(NAME1) - 1;
		m->u.notify_req.offset &= INT64_MAX;
		m->u.notify_req.length &= INT64_MAX;
		m->name = NAME1;
		break;
	case BCP_OP_COPY_FILE_RANGE:
		m->u.copy_req.off_in = 12345;
		m->u.copy_req.off_out = 1ull << 50;
		m->u.copy_req.length = 1ull << 30;
		m->u.copy_req.flags = 0;
		break;
	case BCP_OP_LSEEK:
		m->u.lseek_req.whence = 3;
		break;
	case BCP_OP_REGISTER_REGION:
		m->u.region_req.kind = BCP_REGION_RDMA;
		m->u.region_req.length = 64ull << 20;
		break;
	case BCP_OP_BATCH_PULL:
	case BCP_OP_BATCH_PUSH:
		m->u.batch_req.count = 3;
		m->u.batch_req.flags = 0;
		for (i = 0; i < 3; i++) {
			fill_seg(&s->segs[i], seed);
			s->segs[i].offset &= (1ull << 62) - 1;
			s->segs[i].length =
				1 + s->segs[i].length % BCP_SEG_LEN_MAX;
			s->segs[i].region_off &= (1ull << 62) - 1;
		}
		m->segs = s->segs;
		break;
	case BCP_OP_DATA_WRITE:
	case BCP_OP_DATA_READ:
		m->u.data_req.length = 200;
		m->u.data_req.region_off &= (1ull << 62) - 1;
		if (m->hdr.opcode == BCP_OP_DATA_WRITE)
			set_data(s, 200);
		break;
	default:
		break;
	}
}

static void fix_reply(struct sample *s, uint64_t *seed)
{
	struct bcp_msg *m = &s->m;

	switch (m->hdr.opcode) {
	case BCP_OP_HELLO:
		m->u.hello_rep.version = BCP_VERSION_MAX;
		m->u.hello_rep.max_segs = BCP_SEGS_MAX;
		m->u.hello_rep.max_frame = BCP_FRAME_MAX;
		m->u.hello_rep.max_inflight = 64;
		break;
	case BCP_OP_AUTH:
		m->u.auth_rep.root |= 2;
		break;
	case BCP_OP_LOOKUP:
	case BCP_OP_MKDIR:
	case BCP_OP_MKNOD:
	case BCP_OP_SYMLINK:
	case BCP_OP_LINK:
		m->u.entry_rep.entry.handle |= 2;
		break;
	case BCP_OP_CREATE:
		m->u.create_rep.entry.handle |= 2;
		m->u.create_rep.open_flags = BCP_OPEN_KEEP_CACHE |
					     BCP_OPEN_CREATED;
		break;
	case BCP_OP_OPEN:		/* a small file's bytes along */
		m->u.open_rep.open_flags = BCP_OPEN_DATA;
		m->u.open_rep.data_len = 77;
		set_data(s, 77);
		break;
	case BCP_OP_OPENDIR:
	case BCP_OP_REOPEN:
		m->u.open_rep.open_flags = BCP_OPEN_DIRECT_IO;
		m->u.open_rep.data_len = 0;
		break;
	case BCP_OP_READLINK:
		m->u.readlink_rep.len = sizeof(TARGET) - 1;
		m->data = TARGET;
		m->data_len = sizeof(TARGET) - 1;
		break;
	case BCP_OP_READDIR:
		build_dirents(s, 0, seed);
		break;
	case BCP_OP_GETXATTR:
	case BCP_OP_LISTXATTR:
		m->u.xattr_rep.size = 77;
		set_data(s, 77);
		break;
	case BCP_OP_LSEEK:
		m->u.lseek_rep.offset &= INT64_MAX;
		break;
	case BCP_OP_BATCH_PULL:
	case BCP_OP_BATCH_PUSH:
	case BCP_OP_REBIND:
		m->u.batch_rep.count = 3;
		m->u.batch_rep.data_len = 0;
		s->statuses[0] = 4096;
		s->statuses[1] = 0;
		s->statuses[2] = -ENOENT;
		m->statuses = s->statuses;
		break;
	case BCP_OP_DATA_READ:
		set_data(s, 300);
		break;
	default:
		break;
	}
}

/* A second form of some messages; 0 when the opcode has none. */
static int make_variant(struct sample *s, uint64_t *seed)
{
	struct bcp_msg *m = &s->m;

	switch (m->hdr.opcode) {
	case BCP_OP_READDIR:		/* plus entries */
		m->hdr.flags = BCP_HF_REPLY;
		ops[BCP_OP_READDIR].fill[1](&m->u, seed);
		build_dirents(s, 1, seed);
		return 1;
	case BCP_OP_GETXATTR:		/* size only */
		m->hdr.flags = BCP_HF_REPLY;
		m->u.xattr_rep.size = 4000;
		return 1;
	case BCP_OP_REGISTER_REGION:	/* shm: a descriptor rides along */
		m->hdr.flags = BCP_HF_FD;
		ops[BCP_OP_REGISTER_REGION].fill[0](&m->u, seed);
		m->u.region_req.kind = BCP_REGION_SHM;
		m->u.region_req.length = 1 << 20;
		return 1;
	case BCP_OP_SYMLINK:		/* longest name and target */
		ops[BCP_OP_SYMLINK].fill[0](&m->u, seed);
		memset(s->data, 'n', 255);
		m->u.symlink_req.name_len = 255;
		m->u.symlink_req.target_len = 255;
		m->name = (const char *)s->data;
		m->name2 = (const char *)s->data;
		return 1;
	case BCP_OP_MKDIR:		/* sent again after a reconnect */
		ops[BCP_OP_MKDIR].fill[0](&m->u, seed);
		m->hdr.flags = BCP_HF_REPLAY;
		m->u.mkdir_req.name_len = sizeof(NAME1) - 1;
		m->name = NAME1;
		return 1;
	case BCP_OP_OPENDIR:		/* readdir reply without entries */
		m->hdr.opcode = BCP_OP_READDIR;
		m->hdr.flags = BCP_HF_REPLY;
		m->u.readdir_rep.count = 0;
		m->u.readdir_rep.eof = 1;
		return 1;
	default:
		return 0;
	}
}

int sample_make(unsigned int idx, struct sample *s)
{
	unsigned int n = 0;
	uint16_t op;
	int k;

	for (op = 0; op < BCP_OP_MAX; op++) {
		if (!ops[op].known)
			continue;
		for (k = 0; k < K__MAX; k++) {
			uint64_t seed = (uint64_t)op * 131 + (uint64_t)k;

			memset(s, 0, sizeof(*s));
			bcp_msg_init(&s->m, op, mix(&seed));
			switch (k) {
			case K_REQ:
				if (ops[op].fill[0])
					ops[op].fill[0](&s->m.u, &seed);
				fix_request(s, &seed);
				break;
			case K_REP:
				s->m.hdr.flags = BCP_HF_REPLY;
				if (ops[op].fill[1])
					ops[op].fill[1](&s->m.u, &seed);
				fix_reply(s, &seed);
				break;
			case K_ERR:
				s->m.hdr.flags = BCP_HF_REPLY;
				s->m.hdr.status = -(int32_t)(1 + op % 120);
				break;
			default:
				if (!make_variant(s, &seed))
					continue;
				break;
			}
			if (n++ == idx) {
				snprintf(s->what, sizeof(s->what), "%s %s",
					 bcp_op_name(s->m.hdr.opcode),
					 k == K_REQ ? "request" :
					 k == K_REP ? "reply" :
					 k == K_ERR ? "error reply" :
						      "variant");
				return 0;
			}
		}
	}
	return -1;
}

/* ---- whole-message comparison ---- */

/* Lengths of name and name2 as the body says (requests only). */
static void name_lens(const struct bcp_msg *m, size_t *n1, size_t *n2)
{
	*n1 = *n2 = 0;
	switch (m->hdr.opcode) {
	case BCP_OP_LOOKUP:
	case BCP_OP_UNLINK:
	case BCP_OP_RMDIR:
		*n1 = m->u.named_req.name_len;
		break;
	case BCP_OP_CREATE:
		*n1 = m->u.create_req.name_len;
		break;
	case BCP_OP_MKDIR:
		*n1 = m->u.mkdir_req.name_len;
		break;
	case BCP_OP_MKNOD:
		*n1 = m->u.mknod_req.name_len;
		break;
	case BCP_OP_SYMLINK:
		*n1 = m->u.symlink_req.name_len;
		*n2 = m->u.symlink_req.target_len;
		break;
	case BCP_OP_LINK:
		*n1 = m->u.link_req.name_len;
		break;
	case BCP_OP_RENAME:
		*n1 = m->u.rename_req.name_len;
		*n2 = m->u.rename_req.newname_len;
		break;
	case BCP_OP_SETXATTR:
		*n1 = m->u.setxattr_req.name_len;
		break;
	case BCP_OP_GETXATTR:
		*n1 = m->u.getxattr_req.name_len;
		break;
	case BCP_OP_REMOVEXATTR:
		*n1 = m->u.removexattr_req.name_len;
		break;
	default:
		break;
	}
}

static int cmp_dirents(const struct bcp_msg *a, const struct bcp_msg *b,
		       int plus, const char *ctx)
{
	struct bcp_dirent_iter ia = { 0 }, ib = { 0 };
	struct bcp_dirent_view va, vb;
	int ra, rb, diff = 0;
	char sub[96];

	for (;;) {
		ra = bcp_dirent_next(a, plus, &ia, &va);
		rb = bcp_dirent_next(b, plus, &ib, &vb);
		if (ra != rb) {
			fprintf(stderr, "%s: entry count differs at %u\n",
				ctx, ia.idx);
			return diff + 1;
		}
		if (!ra)
			break;
		snprintf(sub, sizeof(sub), "%s.dirent[%u]", ctx, ib.idx - 1);
		diff += cmp_dirent(&va.d, &vb.d, sub);
		if (plus)
			diff += cmp_entry(&va.entry, &vb.entry, sub);
		if (va.d.name_len == vb.d.name_len &&
		    memcmp(va.name, vb.name, va.d.name_len)) {
			fprintf(stderr, "%s.name differs\n", sub);
			diff++;
		}
	}
	if (ia.idx != a->u.readdir_rep.count) {
		fprintf(stderr, "%s: iterated %u of %u entries\n", ctx,
			ia.idx, a->u.readdir_rep.count);
		diff++;
	}
	return diff;
}

int sample_msg_cmp(const struct bcp_msg *a, const struct bcp_msg *b,
		   int plus, const char *prefix)
{
	const int reply = !!(a->hdr.flags & BCP_HF_REPLY);
	const uint16_t op = a->hdr.opcode;
	char ctx[128];
	size_t n1, n2;
	uint32_t i, count = 0;
	int diff = 0;

	snprintf(ctx, sizeof(ctx), "%s hdr", prefix);
	if (a->hdr.opcode != b->hdr.opcode || a->hdr.flags != b->hdr.flags ||
	    a->hdr.req_id != b->hdr.req_id || a->hdr.status != b->hdr.status ||
	    a->hdr.version != b->hdr.version) {
		fprintf(stderr, "%s differs\n", ctx);
		return 1;
	}
	if (a->hdr.status < 0 || op >= BCP_OP_MAX || !ops[op].known)
		return 0;
	snprintf(ctx, sizeof(ctx), "%s body", prefix);
	if (ops[op].cmp[reply])
		diff += ops[op].cmp[reply](&a->u, &b->u, ctx);

	if (!reply) {
		name_lens(a, &n1, &n2);
		if (n1 && (!a->name || !b->name ||
			   memcmp(a->name, b->name, n1))) {
			fprintf(stderr, "%s name differs\n", prefix);
			diff++;
		}
		if (n2 && (!a->name2 || !b->name2 ||
			   memcmp(a->name2, b->name2, n2))) {
			fprintf(stderr, "%s name2 differs\n", prefix);
			diff++;
		}
	}
	if (a->data_len != b->data_len ||
	    (a->data_len && memcmp(a->data, b->data, a->data_len))) {
		fprintf(stderr, "%s data differs (%u vs %u bytes)\n", prefix,
			a->data_len, b->data_len);
		diff++;
	}
	if (!reply && op == BCP_OP_FORGET) {
		for (i = 0; i < a->u.forget_req.count; i++) {
			struct bcp_forget_one fa, fb;

			bcp_msg_forget(a, i, &fa);
			bcp_msg_forget(b, i, &fb);
			snprintf(ctx, sizeof(ctx), "%s forget[%u]", prefix, i);
			diff += cmp_forget_one(&fa, &fb, ctx);
		}
	}
	if (op == BCP_OP_BATCH_PULL || op == BCP_OP_BATCH_PUSH) {
		count = reply ? a->u.batch_rep.count : a->u.batch_req.count;
		for (i = 0; i < count; i++) {
			struct bcp_seg sa, sb;

			if (reply) {
				if (bcp_msg_status(a, i) !=
				    bcp_msg_status(b, i)) {
					fprintf(stderr,
						"%s status[%u] differs\n",
						prefix, i);
					diff++;
				}
				continue;
			}
			bcp_msg_seg(a, i, &sa);
			bcp_msg_seg(b, i, &sb);
			snprintf(ctx, sizeof(ctx), "%s seg[%u]", prefix, i);
			diff += cmp_seg(&sa, &sb, ctx);
		}
	}
	if (reply && op == BCP_OP_READDIR)
		diff += cmp_dirents(a, b, plus, prefix);
	return diff;
}
