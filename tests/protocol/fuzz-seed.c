/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-seed.c - write one valid frame of every sample message (every
 * opcode, both directions, error replies, variants) into DIR, one file
 * each, as the fuzzer's seed corpus.  No binary seeds live in the tree.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bcp_codec.h"
#include "samples.h"

int main(int argc, char **argv)
{
	static uint8_t buf[BCP_DATA_FRAME_MAX];
	static struct sample s;
	char path[4096];
	unsigned int i, written = 0;
	FILE *f;
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 99;
	}
	for (i = 0; sample_make(i, &s) == 0; i++) {
		n = bcp_encode(buf, sizeof(buf), &s.m);
		if (n < 0) {
			fprintf(stderr, "%s: encode failed: %s\n", s.what,
				strerror(-n));
			return 1;
		}
		snprintf(path, sizeof(path), "%s/seed-%03u", argv[1], i);
		f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, (size_t)n, f) != (size_t)n ||
		    fclose(f)) {
			fprintf(stderr, "%s: %s\n", path, strerror(errno));
			return 99;
		}
		written++;
	}
	printf("%u seed frames written to %s\n", written, argv[1]);
	return 0;
}
