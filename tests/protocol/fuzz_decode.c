/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_decode.c - libFuzzer target for the BCP decoder.
 *
 * Decodes the input; when that succeeds, walks every item and directory
 * entry through the accessors, re-encodes the decoded message and decodes
 * that again: both decodes must agree byte for byte on the encoding, which
 * catches any asymmetry between encoder and decoder.  Header-only checks
 * run on every input too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bcp_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out1[BCP_DATA_FRAME_MAX], out2[BCP_DATA_FRAME_MAX];

/* Touch every byte a reader may read, so ASan sees any overrun. */
static unsigned int walk(const struct bcp_msg *m)
{
	const uint16_t op = m->hdr.opcode;
	const int reply = !!(m->hdr.flags & BCP_HF_REPLY);
	unsigned int sum = 0;
	uint32_t i;

	if (m->hdr.status < 0)
		return 0;
	if (m->data)
		for (i = 0; i < m->data_len; i++)
			sum += ((const uint8_t *)m->data)[i];
	if (op == BCP_OP_BATCH_PULL || op == BCP_OP_BATCH_PUSH) {
		uint32_t n = reply ? m->u.batch_rep.count :
				     m->u.batch_req.count;

		for (i = 0; i < n; i++) {
			if (reply) {
				sum += (unsigned int)bcp_msg_status(m, i);
			} else {
				struct bcp_seg s;
				enum bcp_err why;

				bcp_msg_seg(m, i, &s);
				sum += (unsigned int)s.length;
				sum += (unsigned int)bcp_seg_check(&s, 1u << 20,
								   &why);
			}
		}
	}
	if (op == BCP_OP_FORGET && !reply) {
		for (i = 0; i < m->u.forget_req.count; i++) {
			struct bcp_forget_one f;

			bcp_msg_forget(m, i, &f);
			sum += (unsigned int)f.nlookup;
		}
	}
	if (op == BCP_OP_REBIND && !reply) {
		for (i = 0; i < m->u.rebind_req.count; i++) {
			struct bcp_rebind_one r;

			bcp_msg_rebind(m, i, &r);
			sum += (unsigned int)r.nlookup + r.fid[63];
		}
	}
	if (op == BCP_OP_READDIR && reply) {
		int plus;

		for (plus = 0; plus < 2; plus++) {
			struct bcp_dirent_iter it = { 0 };
			struct bcp_dirent_view v;

			while (bcp_dirent_next(m, plus, &it, &v)) {
				for (i = 0; i < v.d.name_len; i++)
					sum += (unsigned char)v.name[i];
				if (v.d.name_len == 0 || v.d.name_len > 255)
					abort();
			}
		}
	}
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bcp_msg m, m2;
	struct bcp_hdr h;
	enum bcp_err why, why2;
	volatile unsigned int sink;
	int n1, n2, ret;

	if (size >= BCP_HDR_SIZE)
		(void)bcp_hdr_check(data, BCP_FRAME_MAX, &h, &why);
	ret = bcp_decode(data, size, &m, &why);
	if (ret) {
		if (why == BCP_E_OK || ret >= 0)
			abort();	/* a rejection names its reason */
		(void)bcp_err_str(why);
		return 0;
	}
	sink = walk(&m);
	(void)sink;
	(void)bcp_op_name(m.hdr.opcode);

	n1 = bcp_encode(out1, sizeof(out1), &m);
	if (n1 < 0)
		abort();	/* decoded, so it must encode */
	if ((size_t)n1 != size || memcmp(out1, data, size))
		abort();	/* decode is lossless: same bytes again */
	ret = bcp_decode(out1, (size_t)n1, &m2, &why2);
	if (ret)
		abort();
	n2 = bcp_encode(out2, sizeof(out2), &m2);
	if (n2 != n1 || memcmp(out1, out2, (size_t)n1))
		abort();
	return 0;
}
