/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * codec-roundtrip.c - every opcode in both directions (and its error
 * reply) survives encode -> decode with every field intact; re-encoding
 * the decoded message gives the same bytes; bcp_encode_head() plus the data
 * equals bcp_encode(); one frame is checked byte by byte against the
 * documented layout, so encoder and decoder cannot agree on a wrong one.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "bcp_codec.h"
#include "check.h"
#include "samples.h"

#define BUF_SIZE (BCP_DATA_FRAME_MAX + 64)

static uint8_t buf1[BUF_SIZE], buf2[BUF_SIZE], buf3[BUF_SIZE];

static void roundtrip_one(struct sample *s)
{
	struct bcp_msg d, d2;
	enum bcp_err why = BCP_E__MAX;
	int n, n2, h, ret, bsz;
	const int reply = !!(s->m.hdr.flags & BCP_HF_REPLY);

	n = bcp_encode(buf1, sizeof(buf1), &s->m);
	CHECK(n >= BCP_HDR_SIZE, "%s: encode returned %d", s->what, n);
	if (n < BCP_HDR_SIZE)
		return;
	bsz = sample_body_size(s->m.hdr.opcode, reply);
	if (s->m.hdr.status < 0)
		CHECK(n == BCP_HDR_SIZE, "%s: error reply of %d bytes",
		      s->what, n);
	else
		CHECK(n >= BCP_HDR_SIZE + bsz, "%s: %d bytes, body is %d",
		      s->what, n, bsz);

	ret = bcp_decode(buf1, (size_t)n, &d, &why);
	CHECK(ret == 0 && why == BCP_E_OK, "%s: decode %d (%s)", s->what,
	      ret, bcp_err_str(why));
	if (ret)
		return;
	CHECK(d.hdr.magic == BCP_MAGIC, "%s: magic", s->what);
	CHECK(d.hdr.payload_len == (uint32_t)n - BCP_HDR_SIZE,
	      "%s: payload_len %u", s->what, d.hdr.payload_len);
	CHECK(sample_msg_cmp(&s->m, &d, s->plus, s->what) == 0,
	      "%s: decoded message differs", s->what);

	/* decoded -> encoded again: the same bytes */
	n2 = bcp_encode(buf2, sizeof(buf2), &d);
	CHECK(n2 == n && !memcmp(buf1, buf2, (size_t)n),
	      "%s: re-encoding gives %d bytes, differing", s->what, n2);
	ret = bcp_decode(buf2, (size_t)n, &d2, &why);
	CHECK(ret == 0 && sample_msg_cmp(&d, &d2, s->plus, s->what) == 0,
	      "%s: second decode differs", s->what);

	/* head + data == whole frame */
	h = bcp_encode_head(buf3, sizeof(buf3), &s->m);
	CHECK(h > 0 && (size_t)h + s->m.data_len == (size_t)n,
	      "%s: head %d + data %u != %d", s->what, h, s->m.data_len, n);
	if (h > 0 && (size_t)h + s->m.data_len == (size_t)n) {
		if (s->m.data_len)
			memcpy(buf3 + h, s->m.data, s->m.data_len);
		CHECK(!memcmp(buf1, buf3, (size_t)n), "%s: head bytes differ",
		      s->what);
	}

	/* one byte short of room: -EMSGSIZE, and truncations are caught */
	CHECK(bcp_encode(buf2, (size_t)n - 1, &s->m) == -EMSGSIZE,
	      "%s: small buffer", s->what);
	ret = bcp_decode(buf1, (size_t)n - 1, &d2, &why);
	CHECK(ret == -EBADMSG && why == BCP_E_TRUNCATED,
	      "%s: truncated decode %d (%s)", s->what, ret, bcp_err_str(why));
}

/* LOOKUP request, byte by byte as doc/protocol.md lays it out. */
static void golden_lookup(void)
{
	static const uint8_t want[] = {
		0x42, 0x43, 0x46, 0x31,		/* magic "BCF1" */
		0x03, 0x00,			/* version 3 */
		0x0a, 0x00,			/* opcode LOOKUP */
		0x00, 0x00, 0x00, 0x00,		/* flags */
		0x12, 0x00, 0x00, 0x00,		/* payload_len 18 */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* req_id */
		0x00, 0x00, 0x00, 0x00,		/* status */
		0x00, 0x00, 0x00, 0x00,		/* pad */
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, /* parent */
		0x02, 0x00,			/* name_len */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* pad */
		'a', 'b',
	};
	struct bcp_msg m, d;
	enum bcp_err why;
	int n;

	bcp_msg_init(&m, BCP_OP_LOOKUP, 0x0102030405060708ull);
	m.u.named_req.parent = 0x8877665544332211ull;
	m.u.named_req.name_len = 2;
	m.name = "ab";
	n = bcp_encode(buf1, sizeof(buf1), &m);
	CHECK(n == (int)sizeof(want) && !memcmp(buf1, want, sizeof(want)),
	      "LOOKUP golden bytes (%d)", n);
	CHECK(bcp_decode(want, sizeof(want), &d, &why) == 0 &&
	      d.u.named_req.parent == 0x8877665544332211ull &&
	      d.hdr.req_id == 0x0102030405060708ull &&
	      d.name == (const char *)want + 48, "LOOKUP golden decode");

	/* a BATCH_PULL reply of 3 statuses: padded to 8 with zeros */
	{
		static const int32_t st[3] = { 4096, 0, -2 };
		static const uint8_t tail[] = {
			0x03, 0, 0, 0, 0, 0, 0, 0,		/* count */
			0x00, 0x10, 0, 0, 0, 0, 0, 0,		/* 4096, 0 */
			0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0,	/* -2, pad */
		};
		struct bcp_msg req;

		bcp_msg_init(&req, BCP_OP_BATCH_PULL, 9);
		bcp_msg_init_reply(&m, &req, 0);
		m.u.batch_rep.count = 3;
		m.statuses = st;
		n = bcp_encode(buf1, sizeof(buf1), &m);
		CHECK(n == BCP_HDR_SIZE + (int)sizeof(tail) &&
		      !memcmp(buf1 + BCP_HDR_SIZE, tail, sizeof(tail)) &&
		      buf1[8] == BCP_HF_REPLY,
		      "BATCH reply golden bytes (%d)", n);
	}
}

static void misc(void)
{
	unsigned int op, known = 0;
	int e;

	for (op = 0; op < 0x10000; op++)
		if (strcmp(bcp_op_name((uint16_t)op), "?"))
			known++;
	CHECK(known == 41, "%u opcodes have names", known);
	CHECK(!strcmp(bcp_op_name(BCP_OP_BATCH_PULL), "BATCH_PULL"),
	      "op name");
	for (e = 0; e < BCP_E__MAX; e++)
		CHECK(strcmp(bcp_err_str((enum bcp_err)e), "unknown reason"),
		      "reason %d has a phrase", e);
	CHECK(!strcmp(bcp_err_str((enum bcp_err)1000), "unknown reason"),
	      "out of range reason");
	CHECK(bcp_dirent_size(0, 1) == 32 && bcp_dirent_size(1, 8) == 200 &&
	      bcp_dirent_size(0, 0) == 24, "dirent sizes");
}

int main(void)
{
	static struct sample s;
	unsigned int i;

	for (i = 0; sample_make(i, &s) == 0; i++)
		roundtrip_one(&s);
	CHECK(i >= 38 * 3, "only %u samples", i);
	printf("%u samples\n", i);
	golden_lookup();
	misc();
	return check_exit("codec-roundtrip");
}
