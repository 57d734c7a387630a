// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsync-writer.c - appends numbered, checksummed records and remembers,
 * outside the file system under test, the last one fsync made durable.
 *
 * Usage: fsync-writer write FILE PROGRESS STOPFILE [EVERY [MAX]]
 *        fsync-writer check FILE PROGRESS
 *
 * write truncates FILE, then appends records 1, 2, 3 ... through one
 * O_APPEND descriptor, calling fsync after every 1..EVERY (4) records, a
 * random count.  After each fsync that succeeds it replaces PROGRESS (a
 * file that should lie outside the mount) with the number of the last
 * record written, so that PROGRESS never claims more than was fsynced.
 * It stops once STOPFILE exists or MAX (1000000) records are written,
 * fsyncs, closes and records the final count.  Any error, or a short
 * write that makes no progress, ends it with status 1 and names the
 * record, the offset and the call.  It pauses FW_PACE_US between records
 * so that a run of minutes beside other workloads stays some tens of MB.
 * It also prints how long the slowest write and the slowest fsync took:
 * the pauses applications saw.
 *
 * check reads FILE from the start and requires records 1, 2 ... N in
 * order, each intact (magic, length and checksum), with N at least the
 * number in PROGRESS and nothing after the last whole record: a record
 * lost, duplicated (a write applied twice), reordered or torn is a
 * failure that names it.  Records past PROGRESS are accepted (written
 * but not yet fsynced when a writer was stopped).
 *
 * Record layout (little-endian): "BCFR", u32 payload length, u64 record
 * number, u64 FNV-1a of number and payload, then the payload, bytes of a
 * generator seeded by the number.  Lengths vary from 1 byte to 64 KiB so
 * that records straddle pages and write-back chunks.
 *
 * Exit 0 success, 1 failure, 99 bad invocation or a local file error.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FW_MAGIC	"BCFR"
#define FW_HDR		24
#define FW_MAX_PAYLOAD	(64u << 10)
#define FW_PACE_US	2000

static uint64_t fw_rng(uint64_t *s)
{
	/* xorshift64*; a zero state would stay zero */
	if (!*s)
		*s = 0x9E3779B97F4A7C15ull;
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static uint32_t fw_len(uint64_t seq)
{
	uint64_t s = seq * 0x9E3779B97F4A7C15ull;
	uint64_t r = fw_rng(&s);

	/* mostly small, one in 32 large */
	if (!(r & 31))
		return 1 + (r >> 8) % FW_MAX_PAYLOAD;
	return 1 + (r >> 8) % 3000;
}

static void fw_payload(uint64_t seq, unsigned char *p, uint32_t len)
{
	uint64_t s = seq ^ 0xB5AD4ECEDA1CE2A9ull, v = 0;
	uint32_t i;

	for (i = 0; i < len; i++) {
		if (!(i & 7))
			v = fw_rng(&s);
		p[i] = v >> ((i & 7) * 8);
	}
}

static uint64_t fw_sum(uint64_t seq, const unsigned char *p, uint32_t len)
{
	uint64_t h = 0xCBF29CE484222325ull;
	uint32_t i;

	for (i = 0; i < 8; i++) {
		h ^= (seq >> (i * 8)) & 0xff;
		h *= 0x100000001B3ull;
	}
	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001B3ull;
	}
	return h;
}

static void fw_put32(unsigned char *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = v >> (i * 8);
}

static void fw_put64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = v >> (i * 8);
}

static uint32_t fw_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t fw_get64(const unsigned char *p)
{
	return (uint64_t)fw_get32(p) | (uint64_t)fw_get32(p + 4) << 32;
}

/* Build record SEQ in REC; returns its whole length. */
static size_t fw_record(uint64_t seq, unsigned char *rec)
{
	uint32_t len = fw_len(seq);

	memcpy(rec, FW_MAGIC, 4);
	fw_put32(rec + 4, len);
	fw_put64(rec + 8, seq);
	fw_payload(seq, rec + FW_HDR, len);
	fw_put64(rec + 16, fw_sum(seq, rec + FW_HDR, len));
	return FW_HDR + len;
}

static double fw_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Replace PATH with "N\n" in one rename, so a reader never sees half. */
static int fw_progress_put(const char *path, uint64_t n)
{
	char tmp[PATH_MAX];
	FILE *f;
	int ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%" PRIu64 "\n", n);
	if (fclose(f) == EOF)
		ret = -errno;
	else if (rename(tmp, path) < 0)
		ret = -errno;
	return ret;
}

static int fw_progress_get(const char *path, uint64_t *n)
{
	FILE *f = fopen(path, "r");
	int ret = 0;

	if (!f)
		return -errno;
	if (fscanf(f, "%" SCNu64, n) != 1)
		ret = -EINVAL;
	fclose(f);
	return ret;
}

static int fw_write(const char *file, const char *progress, const char *stop,
		    unsigned int every, uint64_t max)
{
	static unsigned char rec[FW_HDR + FW_MAX_PAYLOAD];
	double t, slow_write = 0, slow_fsync = 0;
	uint64_t seq, off = 0, nsync = 0, rng = (uint64_t)getpid() << 16;
	unsigned int until_sync;
	size_t len, done;
	ssize_t n;
	int fd, ret;

	ret = fw_progress_put(progress, 0);
	if (ret < 0) {
		fprintf(stderr, "fsync-writer: %s: %s\n", progress,
			strerror(-ret));
		return 99;
	}
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0) {
		fprintf(stderr, "fsync-writer: open %s: %s\n", file,
			strerror(errno));
		return 1;
	}
	until_sync = 1 + fw_rng(&rng) % every;
	for (seq = 1; seq <= max; seq++) {
		len = fw_record(seq, rec);
		t = fw_now();
		for (done = 0; done < len; done += n) {
			n = write(fd, rec + done, len - done);
			if (n <= 0) {
				fprintf(stderr, "fsync-writer: write of record "
					"%" PRIu64 " at offset %" PRIu64
					" (%zu of %zu bytes done): %s\n", seq,
					off, done, len,
					n < 0 ? strerror(errno) :
						"no progress");
				close(fd);
				return 1;
			}
		}
		t = fw_now() - t;
		if (t > slow_write)
			slow_write = t;
		off += len;
		if (--until_sync && seq < max && access(stop, F_OK) < 0) {
			usleep(FW_PACE_US);
			continue;
		}
		t = fw_now();
		if (fsync(fd) < 0) {
			fprintf(stderr, "fsync-writer: fsync after record "
				"%" PRIu64 " (offset %" PRIu64 "): %s\n", seq,
				off, strerror(errno));
			close(fd);
			return 1;
		}
		t = fw_now() - t;
		if (t > slow_fsync)
			slow_fsync = t;
		nsync++;
		ret = fw_progress_put(progress, seq);
		if (ret < 0) {
			fprintf(stderr, "fsync-writer: %s: %s\n", progress,
				strerror(-ret));
			close(fd);
			return 99;
		}
		if (access(stop, F_OK) == 0)
			break;
		until_sync = 1 + fw_rng(&rng) % every;
		usleep(FW_PACE_US);
	}
	if (seq > max)
		seq = max;
	if (close(fd) < 0) {
		fprintf(stderr, "fsync-writer: close %s: %s\n", file,
			strerror(errno));
		return 1;
	}
	printf("fsync-writer: %" PRIu64 " records (%" PRIu64 " bytes), %"
	       PRIu64 " fsyncs; slowest write %.3f s, slowest fsync %.3f s\n",
	       seq, off, nsync, slow_write, slow_fsync);
	return 0;
}

static int fw_check(const char *file, const char *progress)
{
	static unsigned char rec[FW_HDR + FW_MAX_PAYLOAD];
	uint64_t want, seq, off = 0, got_seq, sum;
	uint32_t len;
	size_t n;
	FILE *f;
	int ret;

	ret = fw_progress_get(progress, &want);
	if (ret < 0) {
		fprintf(stderr, "fsync-writer: %s: %s\n", progress,
			strerror(-ret));
		return 99;
	}
	f = fopen(file, "r");
	if (!f) {
		fprintf(stderr, "fsync-writer: open %s: %s\n", file,
			strerror(errno));
		return 1;
	}
	for (seq = 1;; seq++) {
		n = fread(rec, 1, FW_HDR, f);
		if (n == 0 && !ferror(f))
			break;
		if (n != FW_HDR) {
			fprintf(stderr, "fsync-writer: record %" PRIu64
				" at offset %" PRIu64 ": %s after %zu header "
				"bytes\n", seq, off,
				ferror(f) ? strerror(errno) : "end of file",
				n);
			goto out_fail;
		}
		len = fw_get32(rec + 4);
		got_seq = fw_get64(rec + 8);
		if (memcmp(rec, FW_MAGIC, 4) || !len ||
		    len > FW_MAX_PAYLOAD) {
			fprintf(stderr, "fsync-writer: record %" PRIu64
				" at offset %" PRIu64 ": no record header "
				"(magic %02x%02x%02x%02x, length %" PRIu32
				")\n", seq, off, rec[0], rec[1], rec[2],
				rec[3], len);
			goto out_fail;
		}
		if (got_seq != seq) {
			fprintf(stderr, "fsync-writer: offset %" PRIu64
				": record %" PRIu64 " where record %" PRIu64
				" belongs (%s)\n", off, got_seq, seq,
				got_seq < seq ? "written twice" :
						"records lost");
			goto out_fail;
		}
		n = fread(rec + FW_HDR, 1, len, f);
		if (n != len) {
			fprintf(stderr, "fsync-writer: record %" PRIu64
				" at offset %" PRIu64 ": %zu of %" PRIu32
				" payload bytes, then %s\n", seq, off, n, len,
				ferror(f) ? strerror(errno) : "end of file");
			goto out_fail;
		}
		sum = fw_sum(seq, rec + FW_HDR, len);
		if (len != fw_len(seq) || sum != fw_get64(rec + 16)) {
			fprintf(stderr, "fsync-writer: record %" PRIu64
				" at offset %" PRIu64 " is damaged (length %"
				PRIu32 ", expected %" PRIu32 "; checksum %s)\n",
				seq, off, len, fw_len(seq),
				sum == fw_get64(rec + 16) ? "right" : "wrong");
			goto out_fail;
		}
		off += FW_HDR + len;
	}
	fclose(f);
	if (seq - 1 < want) {
		fprintf(stderr, "fsync-writer: %" PRIu64 " records fsynced, "
			"but the file ends after record %" PRIu64 " (%" PRIu64
			" bytes)\n", want, seq - 1, off);
		return 1;
	}
	printf("fsync-writer: %" PRIu64 " records intact (%" PRIu64
	       " fsynced)\n", seq - 1, want);
	return 0;

out_fail:
	fclose(f);
	if (seq <= want)
		fprintf(stderr, "fsync-writer: record %" PRIu64 " had been "
			"fsynced (%" PRIu64 " were)\n", seq, want);
	return 1;
}

int main(int argc, char **argv)
{
	unsigned long every = 4;
	unsigned long long max = 1000000;
	char *end;

	if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "write")) {
		if (argc >= 6) {
			every = strtoul(argv[5], &end, 10);
			if (*end || !every || every > 1000000)
				goto usage;
		}
		if (argc == 7) {
			max = strtoull(argv[6], &end, 10);
			if (*end || !max)
				goto usage;
		}
		return fw_write(argv[2], argv[3], argv[4], every, max);
	}
	if (argc == 4 && !strcmp(argv[1], "check"))
		return fw_check(argv[2], argv[3]);
usage:
	fprintf(stderr,
		"usage: %s write FILE PROGRESS STOPFILE [EVERY [MAX]]\n"
		"       %s check FILE PROGRESS\n", argv[0], argv[0]);
	return 99;
}
