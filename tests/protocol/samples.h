/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * samples.h - one valid message of every opcode and direction (requests,
 * replies, error replies and a few variants), with every body field set to
 * a distinct value, for the round-trip test and the fuzzer's seed corpus.
 * The opcode table here is written independently of the codec's.
 */
#ifndef BCP_TEST_SAMPLES_H
#define BCP_TEST_SAMPLES_H

#include "bcp_codec.h"

#define SAMPLE_DIRENTS 4

struct sample_dirent {
	struct bcp_dirent d;
	struct bcp_entry entry;
	const char *name;
};

struct sample {
	struct bcp_msg m;
	char what[64];
	int plus;		/* READDIR reply: entries are plus entries */
	struct bcp_seg segs[3];
	int32_t statuses[3];
	struct bcp_forget_one forgets[3];
	struct bcp_rebind_one rebinds[3];
	struct sample_dirent ents[SAMPLE_DIRENTS];
	uint8_t dirents[2048];
	uint8_t data[512];
};

/* Build sample i into s: 0, or -1 when i is past the last sample. */
int sample_make(unsigned int i, struct sample *s);

/*
 * Compare two messages of the same opcode and direction field by field,
 * tails included, printing every difference after prefix.  0 when equal.
 */
int sample_msg_cmp(const struct bcp_msg *a, const struct bcp_msg *b,
		   int plus, const char *prefix);

/* Wire size of the body of (opcode, reply), or -1 for an unknown opcode. */
int sample_body_size(uint16_t opcode, int reply);

#endif /* BCP_TEST_SAMPLES_H */
