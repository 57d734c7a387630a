/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * codec-malformed.c - frames that break one rule each.  Every case starts
 * from a valid frame, breaks it in one place and asserts the specific
 * enum bcp_err and errno bcp_decode() gives; the encoder's refusals and
 * bcp_seg_check() are checked the same way.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bcp_codec.h"
#include "check.h"

#define BODY BCP_HDR_SIZE
#define WOFF(name, field) (BODY + offsetof(struct bcp_w_##name, field))
#define H_VERSION 4
#define H_OPCODE 6
#define H_FLAGS 8
#define H_PLEN 12
#define H_STATUS 24
#define H_PAD 28

static uint8_t f[BCP_DATA_FRAME_MAX + 4096];
static size_t flen;

static void p16(size_t off, uint16_t v)
{
	f[off] = (uint8_t)v;
	f[off + 1] = (uint8_t)(v >> 8);
}

static void p32(size_t off, uint32_t v)
{
	p16(off, (uint16_t)v);
	p16(off + 2, (uint16_t)(v >> 16));
}

static void p64(size_t off, uint64_t v)
{
	p32(off, (uint32_t)v);
	p32(off + 4, (uint32_t)(v >> 32));
}

/* Grow or shrink the payload by delta bytes (zeros appended). */
static void resize(long delta)
{
	size_t plen = flen - BCP_HDR_SIZE;

	if (delta > 0)
		memset(f + flen, 0, (size_t)delta);
	flen = (size_t)((long)flen + delta);
	p32(H_PLEN, (uint32_t)((long)plen + delta));
}

static void build(struct bcp_msg *m)
{
	int n = bcp_encode(f, sizeof(f), m);

	REQUIRE(n > 0, "encoding the valid base frame of %s: %d",
		bcp_op_name(m->hdr.opcode), n);
	flen = (size_t)n;
}

static void expect_at(int line, const char *what, size_t len,
		      enum bcp_err want_why, int want_err)
{
	struct bcp_msg m;
	enum bcp_err why = BCP_E__MAX;
	int ret = bcp_decode(f, len, &m, &why);

	check_count++;
	if (ret != want_err || why != want_why) {
		check_failures++;
		fprintf(stderr,
			"line %d: %s: got %d/%s (%s), want %d/%s (%s)\n",
			line, what, ret, strerror(-ret), bcp_err_str(why),
			want_err, strerror(-want_err), bcp_err_str(want_why));
	}
}
#define EXPECT(what, why, err) expect_at(__LINE__, what, flen, why, err)

/* A LOOKUP of name, built valid and then patched: name may be invalid. */
static void base_lookup(const char *name)
{
	char ok[BCP_NAME_MAX];
	size_t len = strlen(name);
	struct bcp_msg m;

	memset(ok, 'x', sizeof(ok));
	bcp_msg_init(&m, BCP_OP_LOOKUP, 1);
	m.u.named_req.parent = 2;
	m.u.named_req.name_len = len > BCP_NAME_MAX ? BCP_NAME_MAX :
						      (uint16_t)len;
	m.name = ok;
	build(&m);
	if (len > BCP_NAME_MAX) {
		resize((long)(len - BCP_NAME_MAX));
		p16(WOFF(named_req, name_len), (uint16_t)len);
	}
	memcpy(f + WOFF(named_req, pad1) + 4, name, len);
}

static void header_cases(void)
{
	base_lookup("abc");
	EXPECT("valid LOOKUP", BCP_E_OK, 0);
	expect_at(__LINE__, "frame cut by one byte", flen - 1,
		  BCP_E_TRUNCATED, -EBADMSG);
	expect_at(__LINE__, "frame shorter than a header", 10,
		  BCP_E_TRUNCATED, -EBADMSG);
	expect_at(__LINE__, "extra bytes after the frame", flen + 1,
		  BCP_E_TRAILING, -EBADMSG);

	base_lookup("abc");
	p32(0, 0x32464342);
	EXPECT("wrong magic", BCP_E_BAD_MAGIC, -EPROTO);
	base_lookup("abc");
	p16(H_VERSION, 1);
	EXPECT("version 1", BCP_E_BAD_VERSION, -EPROTO);
	base_lookup("abc");
	p16(H_VERSION, 2);
	EXPECT("version 2", BCP_E_BAD_VERSION, -EPROTO);
	base_lookup("abc");
	p16(H_VERSION, 4);
	EXPECT("version 4", BCP_E_BAD_VERSION, -EPROTO);
	base_lookup("abc");
	p16(H_VERSION, 0);
	EXPECT("version 0", BCP_E_BAD_VERSION, -EPROTO);
	base_lookup("abc");
	p16(H_OPCODE, 99);
	EXPECT("opcode 99", BCP_E_BAD_OPCODE, -EBADMSG);
	base_lookup("abc");
	p16(H_OPCODE, 5);
	EXPECT("opcode 5 (a gap)", BCP_E_BAD_OPCODE, -EBADMSG);
	base_lookup("abc");
	p32(H_FLAGS, 0x8);
	EXPECT("unknown flag", BCP_E_BAD_FLAGS, -EBADMSG);
	base_lookup("abc");
	p32(H_FLAGS, BCP_HF_REPLAY);
	EXPECT("replayed request", BCP_E_OK, 0);
	base_lookup("abc");
	p32(H_FLAGS, BCP_HF_REPLY | BCP_HF_REPLAY);
	EXPECT("replay flag on a reply", BCP_E_BAD_FLAGS, -EBADMSG);
	base_lookup("abc");
	p32(H_FLAGS, BCP_HF_FD);
	EXPECT("fd flag on LOOKUP", BCP_E_BAD_FLAGS, -EBADMSG);
	base_lookup("abc");
	f[H_PAD + 3] = 1;
	EXPECT("header padding", BCP_E_BAD_PADDING, -EBADMSG);
	base_lookup("abc");
	p32(H_PLEN, BCP_FRAME_MAX);
	EXPECT("payload_len over the limit", BCP_E_FRAME_TOO_LONG, -EMSGSIZE);
	base_lookup("abc");
	p32(H_STATUS, (uint32_t)-1);
	EXPECT("request with a status", BCP_E_BAD_STATUS, -EBADMSG);

	/* header-only validation with a small limit */
	{
		struct bcp_hdr h;
		enum bcp_err why;

		base_lookup("abc");
		CHECK(bcp_hdr_check(f, 40, &h, &why) == -EMSGSIZE &&
		      why == BCP_E_FRAME_TOO_LONG, "hdr_check limit");
		CHECK(bcp_hdr_check(f, flen, &h, &why) == 0 &&
		      h.payload_len == flen - BCP_HDR_SIZE, "hdr_check ok");
	}
}

static void reply_cases(void)
{
	struct bcp_msg req, m;

	bcp_msg_init(&req, BCP_OP_GETATTR, 5);
	bcp_msg_init_reply(&m, &req, -ENOENT);
	build(&m);
	EXPECT("error reply", BCP_E_OK, 0);
	resize(8);
	EXPECT("error reply with a body", BCP_E_ERROR_WITH_BODY, -EBADMSG);

	bcp_msg_init_reply(&m, &req, 0);
	m.u.attr_rep.attr.ino = 1;
	build(&m);
	p32(H_STATUS, 5);
	EXPECT("reply with status > 0", BCP_E_BAD_STATUS, -EBADMSG);

	build(&m);
	resize(-8);
	EXPECT("attr reply 8 bytes short", BCP_E_BODY_SHORT, -EBADMSG);

	build(&m);
	resize(1);
	EXPECT("attr reply with a trailing byte", BCP_E_TRAILING, -EBADMSG);

	/* a PING may not be large even on a data connection */
	bcp_msg_init(&m, BCP_OP_PING, 1);
	build(&m);
	p32(H_PLEN, 1u << 20);
	EXPECT("1 MiB PING", BCP_E_FRAME_TOO_LONG, -EMSGSIZE);

	/* error replies of no message may carry a positive errno */
	bcp_msg_init(&req, BCP_OP_UNLINK, 5);
	bcp_msg_init_reply(&m, &req, -5000);
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses status -5000");
}

static void body_cases(void)
{
	struct bcp_msg m;

	base_lookup("abc");
	f[WOFF(named_req, pad0)] = 1;
	EXPECT("named_req padding", BCP_E_BAD_PADDING, -EBADMSG);

	bcp_msg_init(&m, BCP_OP_GETATTR, 1);
	m.u.node_req.handle = 2;
	build(&m);
	resize(-8);
	EXPECT("GETATTR body short", BCP_E_BODY_SHORT, -EBADMSG);

	bcp_msg_init(&m, BCP_OP_UNLINK, 1);
	m.u.named_req.parent = 2;
	m.u.named_req.name_len = 1;
	m.name = "x";
	build(&m);
	resize(1);
	EXPECT("UNLINK with a byte after the name", BCP_E_TRAILING, -EBADMSG);
	build(&m);
	p16(WOFF(named_req, name_len), 2);
	EXPECT("name_len past the payload", BCP_E_TRUNCATED, -EBADMSG);
}

static void name_cases(void)
{
	char long_name[300];

	base_lookup("a/c");
	EXPECT("name with '/'", BCP_E_NAME_SLASH, -EINVAL);
	base_lookup(".");
	EXPECT("name \".\"", BCP_E_NAME_DOT, -EINVAL);
	base_lookup("..");
	EXPECT("name \"..\"", BCP_E_NAME_DOT, -EINVAL);
	base_lookup("abc");
	f[flen - 2] = '\0';
	EXPECT("name with NUL", BCP_E_NAME_NUL, -EINVAL);
	base_lookup("abc");
	p16(WOFF(named_req, name_len), 0);
	resize(-3);
	EXPECT("empty name", BCP_E_NAME_EMPTY, -EINVAL);
	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	base_lookup(long_name);
	EXPECT("256-byte name", BCP_E_NAME_TOO_LONG, -ENAMETOOLONG);
	long_name[255] = '\0';
	base_lookup(long_name);
	EXPECT("255-byte name", BCP_E_OK, 0);
	base_lookup("...");
	EXPECT("name \"...\"", BCP_E_OK, 0);
}

static void symlink_base(const char *target, uint16_t tlen)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_SYMLINK, 1);
	m.u.symlink_req.parent = 2;
	m.u.symlink_req.name_len = 4;
	m.u.symlink_req.target_len = tlen;
	m.name = "link";
	m.name2 = target;
	build(&m);
}

static void target_cases(void)
{
	static char t[5000];

	memset(t, 't', sizeof(t));
	symlink_base(t, 4095);
	EXPECT("4095-byte target", BCP_E_OK, 0);
	symlink_base(t, 4);
	p16(WOFF(symlink_req, target_len), 0);
	resize(-4);
	EXPECT("empty target", BCP_E_TARGET_EMPTY, -EINVAL);
	symlink_base(t, 4095);
	p16(WOFF(symlink_req, target_len), 4096);
	resize(1);
	EXPECT("4096-byte target", BCP_E_TARGET_TOO_LONG, -ENAMETOOLONG);
	symlink_base("ab/cd", 5);
	f[flen - 3] = '\0';
	EXPECT("target with NUL", BCP_E_TARGET_NUL, -EINVAL);
	symlink_base("/abs/ok", 7);
	EXPECT("absolute target", BCP_E_OK, 0);

	/* READLINK reply: len vs tail */
	{
		struct bcp_msg req, m;

		bcp_msg_init(&req, BCP_OP_READLINK, 3);
		bcp_msg_init_reply(&m, &req, 0);
		m.u.readlink_rep.len = 3;
		m.data = "abc";
		m.data_len = 3;
		build(&m);
		EXPECT("readlink reply", BCP_E_OK, 0);
		p32(WOFF(readlink_rep, len), 4);
		EXPECT("readlink len past the tail", BCP_E_TRUNCATED,
		       -EBADMSG);
		build(&m);
		p32(WOFF(readlink_rep, len), 2);
		EXPECT("readlink tail past len", BCP_E_TRAILING, -EBADMSG);
	}
}

static void xattr_cases(void)
{
	static uint8_t val[BCP_XATTR_VALUE_MAX + 1];
	struct bcp_msg m, req;

	bcp_msg_init(&m, BCP_OP_SETXATTR, 1);
	m.u.setxattr_req.handle = 2;
	m.u.setxattr_req.name_len = 6;
	m.u.setxattr_req.value_len = BCP_XATTR_VALUE_MAX;
	m.name = "user.x";
	m.data = val;
	m.data_len = BCP_XATTR_VALUE_MAX;
	build(&m);
	EXPECT("64 KiB xattr value", BCP_E_OK, 0);
	p32(WOFF(setxattr_req, value_len), BCP_XATTR_VALUE_MAX + 1);
	resize(1);
	EXPECT("xattr value too long", BCP_E_XATTR_VALUE_TOO_LONG, -E2BIG);
	m.u.setxattr_req.value_len = BCP_XATTR_VALUE_MAX + 1;
	m.data_len = BCP_XATTR_VALUE_MAX + 1;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses a long xattr value");

	m.u.setxattr_req.value_len = 1;
	m.data_len = 1;
	build(&m);
	f[BODY + sizeof(struct bcp_w_setxattr_req) + 1] = 0; /* in the name */
	EXPECT("xattr name with NUL", BCP_E_XATTR_NAME, -EINVAL);
	build(&m);
	p32(WOFF(setxattr_req, flags), 4);
	EXPECT("setxattr flags 4", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p16(WOFF(setxattr_req, name_len), 0);
	EXPECT("empty xattr name", BCP_E_XATTR_NAME, -EINVAL);

	/* GETXATTR reply: the tail is either empty or size bytes */
	bcp_msg_init(&req, BCP_OP_GETXATTR, 4);
	bcp_msg_init_reply(&m, &req, 0);
	m.u.xattr_rep.size = 10;
	m.data = val;
	m.data_len = 10;
	build(&m);
	EXPECT("xattr reply with value", BCP_E_OK, 0);
	resize(-3);
	EXPECT("xattr reply tail short", BCP_E_TRUNCATED, -EBADMSG);
	build(&m);
	resize(-10);
	EXPECT("xattr reply size only", BCP_E_OK, 0);
	build(&m);
	resize(1);
	EXPECT("xattr reply tail long", BCP_E_TRAILING, -EBADMSG);
	m.data_len = 5;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses a data_len that is neither 0 nor size");
}

static void batch_base(uint32_t count, uint32_t length, uint64_t offset)
{
	static struct bcp_seg segs[BCP_SEGS_MAX];
	struct bcp_msg m;
	uint32_t i;

	for (i = 0; i < count && i < BCP_SEGS_MAX; i++) {
		segs[i].fh = 7;
		segs[i].offset = 0;
		segs[i].length = length;
		segs[i].region_id = 1;
		segs[i].region_off = (uint64_t)i * 4096;
	}
	bcp_msg_init(&m, BCP_OP_BATCH_PULL, 1);
	m.u.batch_req.count = count;
	m.segs = segs;
	build(&m);
	/* patched in, so that the base may break the offset rule */
	for (i = 0; i < count && i < BCP_SEGS_MAX; i++)
		p64(BODY + 8 + i * 32 + offsetof(struct bcp_w_seg, offset),
		    offset);
}

/* A reply of op with two statuses and 5 bytes after them. */
static void inline_reply(struct bcp_msg *m, uint16_t op, const int32_t *st,
			 const uint8_t *data)
{
	struct bcp_msg req;

	bcp_msg_init(&req, op, 9);
	bcp_msg_init_reply(m, &req, 0);
	m->u.batch_rep.count = 2;
	m->u.batch_rep.data_len = 5;
	m->statuses = st;
	m->data = data;
	m->data_len = 5;
}

/* BCP_BATCH_INLINE: a push's bytes after its segments, a pull's reply's */
static void inline_cases(void)
{
	static uint8_t data[2 * 40000];
	struct bcp_seg segs[2];
	struct bcp_msg m;
	int32_t st[2] = { 3, 2 };

	segs[0] = (struct bcp_seg){ 7, 0, 3, 1, 0 };
	segs[1] = (struct bcp_seg){ 7, 100, 2, 1, 4096 };
	bcp_msg_init(&m, BCP_OP_BATCH_PUSH, 1);
	m.u.batch_req.count = 2;
	m.u.batch_req.flags = BCP_BATCH_INLINE;
	m.segs = segs;
	m.data = data;
	m.data_len = 5;
	build(&m);
	EXPECT("inline push of 5 bytes", BCP_E_OK, 0);
	resize(-1);
	EXPECT("inline push a byte short", BCP_E_COUNT_MISMATCH, -EBADMSG);
	resize(2);
	EXPECT("inline push a byte over", BCP_E_COUNT_MISMATCH, -EBADMSG);
	segs[0].length = 40000;
	segs[1].length = 40000;
	m.data_len = 80000;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "an inline push over BCP_BATCH_INLINE_MAX is not encoded");
	segs[1].length = BCP_BATCH_INLINE_MAX - 40000;
	m.data_len = BCP_BATCH_INLINE_MAX;
	build(&m);
	EXPECT("inline push of BCP_BATCH_INLINE_MAX", BCP_E_OK, 0);
	p32(BODY + 8 + 32 + offsetof(struct bcp_w_seg, length),
	    BCP_BATCH_INLINE_MAX - 40000 + 1);
	resize(1);
	EXPECT("inline push over BCP_BATCH_INLINE_MAX", BCP_E_SEG_LENGTH,
	       -E2BIG);

	inline_reply(&m, BCP_OP_BATCH_PULL, st, data);
	build(&m);
	EXPECT("inline pull reply", BCP_E_OK, 0);
	resize(-1);
	EXPECT("inline pull reply a byte short", BCP_E_COUNT_MISMATCH,
	       -EBADMSG);
	build(&m);
	p32(WOFF(batch_rep, data_len), BCP_BATCH_INLINE_MAX + 1);
	EXPECT("inline pull reply over BCP_BATCH_INLINE_MAX",
	       BCP_E_BAD_FIELD, -E2BIG);
	inline_reply(&m, BCP_OP_BATCH_PUSH, st, data);
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "a push reply with data is not encoded");
	m.u.batch_rep.data_len = 0;
	m.data_len = 0;
	build(&m);
	p32(WOFF(batch_rep, data_len), 5);
	resize(5);
	EXPECT("push reply with data", BCP_E_BAD_FIELD, -EINVAL);
}

static void batch_cases(void)
{
	struct bcp_msg req, m;
	struct bcp_seg s;
	enum bcp_err why;
	int32_t st[3] = { 1, 2, 3 };

	batch_base(BCP_SEGS_MAX, 4096, 0);
	EXPECT("1024 segments", BCP_E_OK, 0);
	batch_base(1, 4096, 0);
	p32(WOFF(batch_req, count), 0);
	resize(-32);
	EXPECT("0 segments", BCP_E_SEG_COUNT, -EINVAL);
	batch_base(BCP_SEGS_MAX, 4096, 0);
	p32(WOFF(batch_req, count), BCP_SEGS_MAX + 1);
	resize(32);
	EXPECT("1025 segments", BCP_E_SEG_COUNT, -E2BIG);
	batch_base(2, 4096, 0);
	p32(WOFF(batch_req, count), 3);
	EXPECT("count 3, 2 segments", BCP_E_COUNT_MISMATCH, -EBADMSG);
	batch_base(2, 4096, 0);
	p32(WOFF(batch_req, flags), 2);
	EXPECT("batch flags", BCP_E_BAD_FIELD, -EINVAL);
	batch_base(2, 4096, 0);
	p32(WOFF(batch_req, flags), BCP_BATCH_INLINE);
	EXPECT("inline pull", BCP_E_OK, 0);
	inline_cases();
	batch_base(1, 4096, 0);
	p32(BODY + 8 + offsetof(struct bcp_w_seg, length), 0);
	EXPECT("segment length 0", BCP_E_SEG_LENGTH, -EINVAL);
	batch_base(1, BCP_SEG_LEN_MAX, 0);
	EXPECT("segment of 8 MiB", BCP_E_OK, 0);
	p32(BODY + 8 + offsetof(struct bcp_w_seg, length),
	    BCP_SEG_LEN_MAX + 1);
	EXPECT("segment length over 8 MiB", BCP_E_SEG_LENGTH, -EINVAL);
	batch_base(1, 4096, (uint64_t)INT64_MAX - 4096);
	EXPECT("segment ending at 2^63-1", BCP_E_OK, 0);
	batch_base(1, 4096, (uint64_t)INT64_MAX - 4095);
	EXPECT("offset + length past 2^63-1", BCP_E_OFFSET_OVERFLOW,
	       -EOVERFLOW);
	batch_base(1, 4096, 0);
	p64(BODY + 8 + offsetof(struct bcp_w_seg, region_off), UINT64_MAX);
	EXPECT("region_off + length wraps", BCP_E_OFFSET_OVERFLOW, -EOVERFLOW);

	/* region bounds */
	s = (struct bcp_seg){ .fh = 1, .offset = 0, .length = 4096,
			      .region_id = 1, .region_off = 4096 };
	CHECK(bcp_seg_check(&s, 8192, &why) == 0 && why == BCP_E_OK,
	      "segment at the end of its region");
	s.region_off = 4097;
	CHECK(bcp_seg_check(&s, 8192, &why) == -EFAULT &&
	      why == BCP_E_REGION_RANGE, "segment past its region");
	s.region_off = 9000;
	CHECK(bcp_seg_check(&s, 8192, &why) == -EFAULT &&
	      why == BCP_E_REGION_RANGE, "region_off past its region");
	s.region_off = 0;
	s.length = 0;
	CHECK(bcp_seg_check(&s, 8192, &why) == -EINVAL &&
	      why == BCP_E_SEG_LENGTH, "seg_check length 0");
	s.length = 1;
	s.offset = UINT64_MAX;
	CHECK(bcp_seg_check(&s, 8192, &why) == -EOVERFLOW &&
	      why == BCP_E_OFFSET_OVERFLOW, "seg_check offset overflow");

	/* replies: count vs statuses */
	bcp_msg_init(&req, BCP_OP_BATCH_PUSH, 9);
	bcp_msg_init_reply(&m, &req, 0);
	m.u.batch_rep.count = 3;
	m.statuses = st;
	build(&m);
	EXPECT("batch reply", BCP_E_OK, 0);
	p32(WOFF(batch_rep, count), 5);
	EXPECT("batch reply count 5, 3 statuses", BCP_E_COUNT_MISMATCH,
	       -EBADMSG);
	build(&m);
	f[flen - 1] = 1;
	EXPECT("batch reply status padding", BCP_E_BAD_PADDING, -EBADMSG);
	build(&m);
	p32(BODY + 8, (uint32_t)-100000);
	EXPECT("batch status below -4095", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p32(WOFF(batch_rep, count), 0);
	resize(-16);
	EXPECT("batch reply count 0", BCP_E_SEG_COUNT, -EINVAL);
}

static void forget_cases(void)
{
	static struct bcp_forget_one fo[BCP_FORGETS_MAX];
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_FORGET, 1);
	m.u.forget_req.count = BCP_FORGETS_MAX;
	m.forgets = fo;
	build(&m);
	EXPECT("4096 forgets", BCP_E_OK, 0);
	p32(WOFF(forget_req, count), BCP_FORGETS_MAX + 1);
	resize(16);
	EXPECT("4097 forgets", BCP_E_FORGET_COUNT, -E2BIG);
	m.u.forget_req.count = 1;
	build(&m);
	p32(WOFF(forget_req, count), 0);
	resize(-16);
	EXPECT("0 forgets", BCP_E_FORGET_COUNT, -EINVAL);
	m.u.forget_req.count = 0;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses 0 forgets");
}

static void rebind_cases(void)
{
	static struct bcp_rebind_one rb[BCP_REBINDS_MAX];
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_REBIND, 1);
	m.u.rebind_req.count = BCP_REBINDS_MAX;
	m.rebinds = rb;
	build(&m);
	EXPECT("2048 rebinds", BCP_E_OK, 0);
	p32(WOFF(rebind_req, count), BCP_REBINDS_MAX + 1);
	resize(80);
	EXPECT("2049 rebinds", BCP_E_FORGET_COUNT, -E2BIG);
	m.u.rebind_req.count = 2;
	build(&m);
	p32(WOFF(rebind_req, count), 3);
	EXPECT("3 rebinds, 2 in the tail", BCP_E_COUNT_MISMATCH, -EBADMSG);
	build(&m);
	p32(WOFF(rebind_req, flags), 1);
	EXPECT("rebind flags", BCP_E_BAD_FIELD, -EINVAL);
	m.u.rebind_req.count = 0;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses 0 rebinds");

	bcp_msg_init(&m, BCP_OP_REOPEN, 1);
	m.u.reopen_req.fh = 7;
	build(&m);
	EXPECT("reopen", BCP_E_OK, 0);
	p32(WOFF(reopen_req, dir), 2);
	EXPECT("reopen dir 2", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p64(WOFF(reopen_req, fh), 0);
	EXPECT("reopen fh 0", BCP_E_BAD_FIELD, -EINVAL);

	bcp_msg_init(&m, BCP_OP_NOTIFY, 0);
	m.u.notify_req.kind = BCP_NOTIFY_INODE;
	m.u.notify_req.handle = 9;
	m.u.notify_req.offset = -1;
	build(&m);
	EXPECT("notify inode", BCP_E_OK, 0);
	p32(WOFF(notify_req, kind), BCP_NOTIFY_BUSY);
	EXPECT("notify busy", BCP_E_OK, 0);
	p32(WOFF(notify_req, kind), 6);
	EXPECT("notify kind 6", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p64(WOFF(notify_req, offset), (uint64_t)-2);
	EXPECT("notify offset -2", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p64(WOFF(notify_req, length), (uint64_t)-1);
	EXPECT("notify length -1", BCP_E_BAD_FIELD, -EINVAL);
	m.u.notify_req.kind = BCP_NOTIFY_ENTRY;
	m.u.notify_req.offset = 0;
	m.name = "x";
	m.u.notify_req.name_len = 1;
	build(&m);
	EXPECT("notify entry", BCP_E_OK, 0);
	p32(WOFF(notify_req, kind), BCP_NOTIFY_RESET);
	EXPECT("notify reset with a name", BCP_E_BAD_FIELD, -EINVAL);
	p32(WOFF(notify_req, kind), BCP_NOTIFY_BUSY);
	EXPECT("notify busy with a name", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p64(offsetof(struct bcp_w_hdr, req_id), 3);
	EXPECT("notify with a req_id", BCP_E_BAD_FIELD, -EINVAL);
}

static void readdir_base(int plus, const char *n2)
{
	static uint8_t ents[1024];
	struct bcp_dirent d = { .cookie = 1, .ino = 5, .type = 4 };
	struct bcp_entry e = { .handle = 9 };
	struct bcp_msg req, m;
	size_t off = 0;

	d.name_len = 1;
	REQUIRE(bcp_dirent_put(ents, sizeof(ents), &off, plus, &d, &e, ".") ==
		0, "dirent_put");
	d.name_len = (uint16_t)strlen(n2);
	REQUIRE(bcp_dirent_put(ents, sizeof(ents), &off, plus, &d, &e,
			       "xxxxxxxx") == 0, "dirent_put");
	bcp_msg_init(&req, BCP_OP_READDIR, 3);
	bcp_msg_init_reply(&m, &req, 0);
	m.u.readdir_rep.count = 2;
	m.dirents = ents;
	m.dirents_len = (uint32_t)off;
	build(&m);
	/* patched in, so that the base may hold a bad name */
	memcpy(f + BODY + 8 + bcp_dirent_size(plus, 1) +
	       bcp_dirent_size(plus, 0), n2, d.name_len);
}

static void readdir_cases(void)
{
	struct bcp_msg m;
	size_t e2 = BODY + 8 + 24 + 8;	/* 2nd non-plus entry */

	readdir_base(0, "name");
	EXPECT("readdir reply", BCP_E_OK, 0);
	p16(e2 + offsetof(struct bcp_w_dirent, name_len), 9);
	EXPECT("dirent name past the frame", BCP_E_DIRENT, -EBADMSG);
	readdir_base(0, "name");
	p32(WOFF(readdir_rep, count), 3);
	EXPECT("count 3, 2 entries", BCP_E_DIRENT, -EBADMSG);
	readdir_base(0, "name");
	p32(WOFF(readdir_rep, count), 1);
	EXPECT("count 1, 2 entries", BCP_E_COUNT_MISMATCH, -EBADMSG);
	readdir_base(0, "name");
	f[flen - 1] = 'x';
	EXPECT("dirent name padding", BCP_E_BAD_PADDING, -EBADMSG);
	readdir_base(0, "a/bc");
	EXPECT("dirent name with '/'", BCP_E_NAME_SLASH, -EINVAL);
	readdir_base(1, "name");
	EXPECT("plus reply", BCP_E_OK, 0);
	resize(-8);
	EXPECT("plus entry cut", BCP_E_DIRENT, -EBADMSG);
	readdir_base(0, "name");
	p32(WOFF(readdir_rep, eof), 2);
	EXPECT("eof 2", BCP_E_BAD_FIELD, -EINVAL);

	bcp_msg_init(&m, BCP_OP_READDIR, 1);
	m.u.readdir_req.handle = 2;
	m.u.readdir_req.fh = 3;
	m.u.readdir_req.max_bytes = BCP_READDIR_MAX;
	build(&m);
	EXPECT("readdir request", BCP_E_OK, 0);
	p32(WOFF(readdir_req, flags), 2);
	EXPECT("readdir flags 2", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p32(WOFF(readdir_req, max_bytes), BCP_READDIR_MAX + 1);
	EXPECT("readdir max_bytes over the limit", BCP_E_BAD_FIELD, -EINVAL);
}

/* OPEN's peek, and a reply's bytes of a small file (version 3) */
static void open_cases(void)
{
	static const uint8_t bytes[16] = "0123456789abcdef";
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_OPEN, 1);
	m.u.open_req.handle = 5;
	m.u.open_req.peek = BCP_OPEN_PEEK_MAX;
	build(&m);
	EXPECT("open peek at the limit", BCP_E_OK, 0);
	p32(WOFF(open_req, peek), BCP_OPEN_PEEK_MAX + 1);
	EXPECT("open peek over the limit", BCP_E_BAD_FIELD, -EINVAL);
	m.hdr.opcode = BCP_OP_OPENDIR;
	m.u.open_req.peek = 0;
	build(&m);
	EXPECT("opendir", BCP_E_OK, 0);
	p32(WOFF(open_req, peek), 1);
	EXPECT("opendir with peek", BCP_E_BAD_FIELD, -EINVAL);

	bcp_msg_init(&m, BCP_OP_OPEN, 1);
	m.hdr.flags = BCP_HF_REPLY;
	m.u.open_rep.fh = 3;
	m.u.open_rep.open_flags = BCP_OPEN_DATA;
	m.u.open_rep.data_len = sizeof(bytes);
	m.data = bytes;
	m.data_len = sizeof(bytes);
	build(&m);
	EXPECT("open reply with data", BCP_E_OK, 0);
	p32(WOFF(open_rep, open_flags), 0);
	EXPECT("open reply: data without BCP_OPEN_DATA", BCP_E_BAD_FIELD,
	       -EINVAL);
	build(&m);
	p32(WOFF(open_rep, data_len), sizeof(bytes) + 1);
	EXPECT("open reply: data_len past the frame", BCP_E_TRUNCATED,
	       -EBADMSG);
	build(&m);
	p32(WOFF(open_rep, data_len), sizeof(bytes) - 1);
	EXPECT("open reply: bytes past data_len", BCP_E_TRAILING, -EBADMSG);
	build(&m);
	p32(WOFF(open_rep, data_len), BCP_OPEN_PEEK_MAX + 1);
	EXPECT("open reply: data_len over the limit", BCP_E_BAD_FIELD, -E2BIG);
	m.u.open_rep.data_len = 0;
	m.data = NULL;
	m.data_len = 0;
	build(&m);
	EXPECT("open reply: an empty file", BCP_E_OK, 0);
	p16(H_OPCODE, BCP_OP_OPENDIR);
	EXPECT("opendir reply with BCP_OPEN_DATA", BCP_E_BAD_FIELD, -EINVAL);
}

static void field_cases(void)
{
	struct bcp_msg m;

	bcp_msg_init(&m, BCP_OP_REGISTER_REGION, 1);
	m.u.region_req.region_id = 1;
	m.u.region_req.kind = BCP_REGION_TCP;
	m.u.region_req.length = 4096;
	build(&m);
	EXPECT("tcp region", BCP_E_OK, 0);
	p32(WOFF(region_req, kind), 7);
	EXPECT("region kind 7", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p32(WOFF(region_req, kind), BCP_REGION_SHM);
	EXPECT("shm region without a descriptor", BCP_E_BAD_FLAGS, -EBADMSG);
	p32(H_FLAGS, BCP_HF_FD);
	EXPECT("shm region with a descriptor", BCP_E_OK, 0);
	build(&m);
	p64(WOFF(region_req, length), 0);
	EXPECT("empty region", BCP_E_BAD_FIELD, -EINVAL);

	bcp_msg_init(&m, BCP_OP_RENAME, 1);
	m.u.rename_req.parent = 2;
	m.u.rename_req.newparent = 3;
	m.u.rename_req.name_len = 1;
	m.u.rename_req.newname_len = 1;
	m.name = "a";
	m.name2 = "b";
	build(&m);
	EXPECT("rename", BCP_E_OK, 0);
	p32(WOFF(rename_req, flags), 4);
	EXPECT("rename flags 4", BCP_E_BAD_FIELD, -EINVAL);
	p32(WOFF(rename_req, flags), 3);
	EXPECT("rename NOREPLACE|EXCHANGE", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	f[flen - 1] = '/';
	EXPECT("rename new name \"/\"", BCP_E_NAME_SLASH, -EINVAL);
	m.u.rename_req.flags = 8;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses rename flags 8");

	bcp_msg_init(&m, BCP_OP_SETATTR, 1);
	m.u.setattr_req.handle = 2;
	m.u.setattr_req.valid = BCP_SETATTR_SIZE;
	m.u.setattr_req.size = 10;
	build(&m);
	p32(WOFF(setattr_req, valid), BCP_SETATTR_ALL + 1);
	EXPECT("setattr valid past BCP_SETATTR_ALL", BCP_E_BAD_FIELD, -EINVAL);
	build(&m);
	p64(WOFF(setattr_req, size), UINT64_MAX);
	EXPECT("setattr size 2^64-1", BCP_E_BAD_FIELD, -EINVAL);

	bcp_msg_init(&m, BCP_OP_LSEEK, 1);
	m.u.lseek_req.fh = 3;
	m.u.lseek_req.whence = 4;
	build(&m);
	EXPECT("lseek SEEK_HOLE", BCP_E_OK, 0);
	p32(WOFF(lseek_req, whence), 9);
	EXPECT("lseek whence 9", BCP_E_BAD_FIELD, -EINVAL);

	bcp_msg_init(&m, BCP_OP_FALLOCATE, 1);
	m.u.fallocate_req.fh = 3;
	m.u.fallocate_req.offset = 0;
	m.u.fallocate_req.length = 10;
	build(&m);
	p64(WOFF(fallocate_req, offset), (uint64_t)INT64_MAX);
	EXPECT("fallocate past 2^63", BCP_E_OFFSET_OVERFLOW, -EOVERFLOW);

	bcp_msg_init(&m, BCP_OP_COPY_FILE_RANGE, 1);
	m.u.copy_req.length = 10;
	build(&m);
	p64(WOFF(copy_req, off_out), UINT64_MAX - 5);
	EXPECT("copy_file_range off_out overflow", BCP_E_OFFSET_OVERFLOW,
	       -EOVERFLOW);

	bcp_msg_init(&m, BCP_OP_DATA_WRITE, 1);
	{
		static uint8_t data[BCP_SEG_LEN_MAX];

		m.u.data_req.length = BCP_SEG_LEN_MAX;
		m.data = data;
		m.data_len = BCP_SEG_LEN_MAX;
		build(&m);
		EXPECT("8 MiB DATA_WRITE", BCP_E_OK, 0);
		resize(-1);
		EXPECT("DATA_WRITE a byte short", BCP_E_TRUNCATED, -EBADMSG);
		m.data_len = 5;
		CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
		      "encoder refuses data_len != length");
	}
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = 2;
	m.u.hello_req.ver_max = 1;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses ver_min > ver_max");
	m.u.hello_req.ver_min = 1;
	build(&m);
	p16(WOFF(hello_req, ver_min), 0);
	EXPECT("HELLO ver_min 0", BCP_E_BAD_FIELD, -EINVAL);
}

static void encoder_cases(void)
{
	struct bcp_msg m;
	uint8_t small[40];

	bcp_msg_init(&m, BCP_OP_LOOKUP, 1);
	m.u.named_req.name_len = 3;
	m.name = "a/b";
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses a name with '/'");
	m.name = "abc";
	CHECK(bcp_encode(small, sizeof(small), &m) == -EMSGSIZE,
	      "encoder: no room");
	m.name = NULL;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses a missing name");
	m.name = "abc";
	m.hdr.flags = 0x10;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses unknown flags");
	m.hdr.flags = 0;
	m.hdr.opcode = 200;
	CHECK(bcp_encode(f, sizeof(f), &m) == -EINVAL,
	      "encoder refuses unknown opcodes");
}

static void name_check_cases(void)
{
	enum bcp_err why;

	CHECK(bcp_name_check("ok", 2, &why) == 0 && why == BCP_E_OK, "ok");
	CHECK(bcp_name_check("", 0, &why) == -EINVAL &&
	      why == BCP_E_NAME_EMPTY, "empty");
	CHECK(bcp_name_check("a\0b", 3, &why) == -EINVAL &&
	      why == BCP_E_NAME_NUL, "NUL");
	CHECK(bcp_xattr_name_check("user.a", 6, &why) == 0, "xattr ok");
	CHECK(bcp_xattr_name_check("", 0, &why) == -EINVAL &&
	      why == BCP_E_XATTR_NAME, "xattr empty");
}

int main(void)
{
	header_cases();
	reply_cases();
	body_cases();
	name_cases();
	target_cases();
	xattr_cases();
	batch_cases();
	forget_cases();
	rebind_cases();
	readdir_cases();
	open_cases();
	field_cases();
	encoder_cases();
	name_check_cases();
	return check_exit("codec-malformed");
}
