// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * random-check.c - randomized file I/O compared against a reference.
 *
 * Usage: random-check TESTDIR REFDIR [OPS]
 * Keeps a few files open in both directories and applies the same random
 * operations to both: pwrite, pread, ftruncate, reads and writes through
 * shared mappings, fsync, close and reopen, and files unlinked and made
 * anew (then written by the mount's write-behind until another
 * descriptor opens them).  Each file of TESTDIR is also open a second
 * time with O_DIRECT (read-only or read-write, chosen anew at each
 * reopen; after a new file, at its first direct read or write), and some
 * reads and writes go through that one.  fallocate (allocate, with and
 * without KEEP_SIZE, punch a hole, zero a range with and without
 * KEEP_SIZE) goes to the mount first: a mode its store refuses
 * (EOPNOTSUPP) is left out of the reference too.  copy_file_range copies
 * from one file to another, looped over short copies.  Every
 * read is compared with the reference byte for byte, and so is every
 * whole file at the end.  The seed
 * is printed first; BCF_SEED=N replays a run.  Exit 0 when all matched,
 * 1 on the first difference (with the operation that showed it), 99 when
 * the reference directory itself misbehaves.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NFILES		4
#define MAX_SIZE	(6u << 20)	/* files stay below this */
#define MAX_IO		(1u << 20)	/* one read or write */

struct rc_file {
	char test_path[PATH_MAX];
	char ref_path[PATH_MAX];
	int test_fd;
	int ref_fd;
	int dio_fd;		/* TESTDIR's file again, with O_DIRECT, or
				 * -1 until used after a new file */
	int dio_rw;		/* dio_fd may write */
};

static struct rc_file files[NFILES];
static uint64_t rng_state;
static unsigned char *wbuf, *tbuf, *rbuf;
static long op_index;

static uint64_t rng_next(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t rng_below(uint64_t n)
{
	return n ? rng_next() % n : 0;
}

/* a length: mostly small, sometimes page-sized, sometimes large */
static size_t rng_len(void)
{
	switch (rng_below(8)) {
	case 0:
		return 1 + rng_below(16);
	case 1:
		return 4096;
	case 2:
		return 4096 * (1 + rng_below(8)) + rng_below(3) - 1;
	case 3:
		return 1 + rng_below(MAX_IO);
	default:
		return 1 + rng_below(70000);
	}
}

static off_t rng_off(off_t size)
{
	/* mostly inside or near the current size */
	switch (rng_below(4)) {
	case 0:
		return rng_below(MAX_SIZE - MAX_IO);
	case 1:
		return size;
	default:
		return rng_below(size + 8192);
	}
}

static void fill(unsigned char *buf, size_t len)
{
	size_t i;
	uint64_t v = 0;

	for (i = 0; i < len; i++) {
		if (!(i & 7))
			v = rng_next();
		buf[i] = v >> ((i & 7) * 8);
	}
}

static void die_ref(const char *what) __attribute__((noreturn));

static void die_ref(const char *what)
{
	fprintf(stderr, "reference directory failed: %s: %s\n", what,
		strerror(errno));
	exit(99);
}

static void mismatch(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void mismatch(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL at op %ld: ", op_index);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

static off_t ref_size(struct rc_file *f)
{
	struct stat st;

	if (fstat(f->ref_fd, &st) < 0)
		die_ref("fstat");
	return st.st_size;
}

static void compare_bytes(const char *what, const unsigned char *t,
			  const unsigned char *r, size_t len, off_t off)
{
	size_t i;

	if (!memcmp(t, r, len))
		return;
	for (i = 0; i < len && t[i] == r[i]; i++)
		;
	mismatch("%s: byte %lld differs: got 0x%02x, expected 0x%02x",
		 what, (long long)(off + i), t[i], r[i]);
}

/* the O_DIRECT descriptor, opened at the first direct operation */
static void open_dio(struct rc_file *f)
{
	if (f->dio_fd >= 0)
		return;
	f->dio_rw = (int)rng_below(2);
	f->dio_fd = open(f->test_path,
			 (f->dio_rw ? O_RDWR : O_RDONLY) | O_DIRECT);
	if (f->dio_fd < 0)
		mismatch("open %s with O_DIRECT: %s", f->test_path,
			 strerror(errno));
}

/*
 * how: 0 reopen, 1 truncate, 2 a new file (unlinked first, made with
 * O_EXCL: its writes may be gathered until another descriptor opens it).
 */
static void open_pair(struct rc_file *f, int how)
{
	int flags = O_RDWR | O_CREAT;

	if (how == 1)
		flags |= O_TRUNC;
	if (how == 2) {
		if (unlink(f->ref_path) < 0 && errno != ENOENT)
			die_ref("unlink");
		if (unlink(f->test_path) < 0 && errno != ENOENT)
			mismatch("unlink %s: %s", f->test_path,
				 strerror(errno));
		flags |= O_EXCL;
	}
	f->ref_fd = open(f->ref_path, flags, 0644);
	if (f->ref_fd < 0)
		die_ref("open");
	f->test_fd = open(f->test_path, flags, 0644);
	if (f->test_fd < 0)
		mismatch("open %s: %s", f->test_path, strerror(errno));
	f->dio_fd = -1;
	if (how != 2)
		open_dio(f);
}

static void op_write(struct rc_file *f, int direct)
{
	/* a third of them append, as a file is written from start to end */
	off_t off = rng_below(3) ? rng_off(ref_size(f)) : ref_size(f);
	size_t len = rng_len();
	ssize_t n;
	int fd;

	if (direct)
		open_dio(f);
	fd = direct && f->dio_rw ? f->dio_fd : f->test_fd;

	if (off + len > MAX_SIZE)
		off = MAX_SIZE - len;
	fill(wbuf, len);
	if (pwrite(f->ref_fd, wbuf, len, off) != (ssize_t)len)
		die_ref("pwrite");
	n = pwrite(fd, wbuf, len, off);
	if (n != (ssize_t)len)
		mismatch("pwrite(%s%s, %zu, %lld) = %zd (%s)", f->test_path,
			 fd == f->dio_fd ? " O_DIRECT" : "", len,
			 (long long)off, n, strerror(errno));
}

static void op_read(struct rc_file *f, int direct)
{
	off_t off = rng_off(ref_size(f));
	size_t len = rng_len();
	ssize_t nt, nr;
	char what[64];
	int fd;

	if (direct)
		open_dio(f);
	fd = direct ? f->dio_fd : f->test_fd;

	nr = pread(f->ref_fd, rbuf, len, off);
	if (nr < 0)
		die_ref("pread");
	nt = pread(fd, tbuf, len, off);
	if (nt != nr)
		mismatch("pread(%s%s, %zu, %lld) = %zd (%s), expected %zd",
			 f->test_path, direct ? " O_DIRECT" : "", len,
			 (long long)off, nt,
			 nt < 0 ? strerror(errno) : "short", nr);
	snprintf(what, sizeof(what), "pread(%s%zu, %lld)",
		 direct ? "O_DIRECT, " : "", len, (long long)off);
	compare_bytes(what, tbuf, rbuf, nr, off);
}

static void op_truncate(struct rc_file *f)
{
	off_t size = ref_size(f), len;

	switch (rng_below(3)) {
	case 0:
		len = rng_below(size + 1);
		break;
	case 1:
		len = size + rng_below(100000);
		if (len > MAX_SIZE)
			len = MAX_SIZE;
		break;
	default:
		len = rng_below(MAX_SIZE);
		break;
	}
	if (ftruncate(f->ref_fd, len) < 0)
		die_ref("ftruncate");
	if (ftruncate(f->test_fd, len) < 0)
		mismatch("ftruncate(%s, %lld): %s", f->test_path,
			 (long long)len, strerror(errno));
}

static void op_stat(struct rc_file *f)
{
	struct stat st;

	if (fstat(f->test_fd, &st) < 0)
		mismatch("fstat %s: %s", f->test_path, strerror(errno));
	if (st.st_size != ref_size(f))
		mismatch("size of %s is %lld, expected %lld", f->test_path,
			 (long long)st.st_size, (long long)ref_size(f));
}

/* map a page-aligned window of both files; read, maybe write, compare */
static void op_mmap(struct rc_file *f, int write)
{
	long pg = sysconf(_SC_PAGESIZE);
	off_t size = ref_size(f), start;
	size_t len, i, off, n;
	unsigned char *mt, *mr;

	if (size == 0)
		return;
	start = rng_below(size) & ~(off_t)(pg - 1);
	len = 1 + rng_below(size - start);
	if (len > MAX_IO)
		len = MAX_IO;
	mr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f->ref_fd,
		  start);
	if (mr == MAP_FAILED)
		die_ref("mmap");
	mt = mmap(NULL, len, PROT_READ | (write ? PROT_WRITE : 0), MAP_SHARED,
		  f->test_fd, start);
	if (mt == MAP_FAILED)
		mismatch("mmap(%s, %zu, %lld): %s", f->test_path, len,
			 (long long)start, strerror(errno));
	compare_bytes("mmap read", mt, mr, len, start);
	if (write) {
		for (i = 0; i < 1 + rng_below(8); i++) {
			off = rng_below(len);
			n = 1 + rng_below(len - off < 20000 ? len - off : 20000);
			fill(wbuf, n);
			memcpy(mr + off, wbuf, n);
			memcpy(mt + off, wbuf, n);
		}
		if (rng_below(2) && msync(mt, len, MS_SYNC) < 0)
			mismatch("msync %s: %s", f->test_path, strerror(errno));
	}
	munmap(mt, len);
	munmap(mr, len);
}

static void op_reopen(struct rc_file *f, int anew)
{
	if (rng_below(2) && fsync(f->test_fd) < 0)
		mismatch("fsync %s: %s", f->test_path, strerror(errno));
	if (close(f->test_fd) < 0)
		mismatch("close %s: %s", f->test_path, strerror(errno));
	if (f->dio_fd >= 0 && close(f->dio_fd) < 0)
		mismatch("close %s (O_DIRECT): %s", f->test_path,
			 strerror(errno));
	close(f->ref_fd);
	open_pair(f, anew ? 2 : 0);
}

static const int falloc_modes[] = {
	0,
	FALLOC_FL_KEEP_SIZE,
	FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	FALLOC_FL_ZERO_RANGE,
	FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
};

/* a reference directory without ZERO_RANGE gets zeros written instead */
static void ref_zero(struct rc_file *f, off_t off, off_t len, int keep)
{
	off_t size = ref_size(f), n;

	if (keep && off + len > size)
		len = off < size ? size - off : 0;
	memset(wbuf, 0, len < MAX_IO ? len : MAX_IO);
	for (; len > 0; off += n, len -= n) {
		n = len < MAX_IO ? len : MAX_IO;
		if (pwrite(f->ref_fd, wbuf, n, off) != n)
			die_ref("pwrite of zeros");
	}
}

static void op_fallocate(struct rc_file *f)
{
	int mode = falloc_modes[rng_below(sizeof(falloc_modes) /
					   sizeof(falloc_modes[0]))];
	off_t off = rng_off(ref_size(f)), len = (off_t)rng_len();

	if (off >= (off_t)MAX_SIZE)
		off = MAX_SIZE - 1;
	if (off + len > (off_t)MAX_SIZE)
		len = MAX_SIZE - off;
	if (fallocate(f->test_fd, mode, off, len) < 0) {
		if (errno == EOPNOTSUPP)
			return;
		mismatch("fallocate(%s, %#x, %lld, %lld): %s", f->test_path,
			 mode, (long long)off, (long long)len,
			 strerror(errno));
	}
	if (fallocate(f->ref_fd, mode, off, len) < 0) {
		if (errno != EOPNOTSUPP || !(mode & FALLOC_FL_ZERO_RANGE))
			die_ref("fallocate");
		ref_zero(f, off, len, mode & FALLOC_FL_KEEP_SIZE);
	}
}

/* copy_file_range until len bytes or the end of the source */
static ssize_t copy_all(int in_fd, off_t in, int out_fd, off_t out,
			size_t len)
{
	ssize_t n, done = 0;

	while ((size_t)done < len) {
		n = copy_file_range(in_fd, &in, out_fd, &out, len - done, 0);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

static void op_copy(struct rc_file *f, struct rc_file *g)
{
	off_t in = rng_off(ref_size(f));
	off_t out = rng_below(3) ? rng_off(ref_size(g)) : ref_size(g);
	size_t len = rng_len();
	ssize_t nt, nr;

	if (out + len > MAX_SIZE)
		out = MAX_SIZE - len;
	nr = copy_all(f->ref_fd, in, g->ref_fd, out, len);
	if (nr < 0)
		die_ref("copy_file_range");
	nt = copy_all(f->test_fd, in, g->test_fd, out, len);
	if (nt != nr)
		mismatch("copy_file_range(%s, %lld, %s, %lld, %zu) = %zd (%s), "
			 "expected %zd", f->test_path, (long long)in,
			 g->test_path, (long long)out, len, nt,
			 nt < 0 ? strerror(errno) : "short", nr);
}

static void compare_whole(struct rc_file *f)
{
	off_t size = ref_size(f), off;
	ssize_t nt, nr;
	char what[PATH_MAX + 32];

	op_stat(f);
	for (off = 0; off < size; off += nr) {
		nr = pread(f->ref_fd, rbuf, MAX_IO, off);
		if (nr <= 0)
			die_ref("pread");
		nt = pread(f->test_fd, tbuf, nr, off);
		if (nt != nr)
			mismatch("final pread(%s, %zd, %lld) = %zd",
				 f->test_path, nr, (long long)off, nt);
		snprintf(what, sizeof(what), "final read of %s", f->test_path);
		compare_bytes(what, tbuf, rbuf, nr, off);
	}
}

int main(int argc, char **argv)
{
	long ops = 5000, i;
	const char *s = getenv("BCF_SEED");
	uint64_t seed;
	struct rc_file *f;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s TESTDIR REFDIR [OPS]\n", argv[0]);
		return 99;
	}
	if (argc == 4)
		ops = atol(argv[3]);
	if (s && *s) {
		seed = strtoull(s, NULL, 0);
	} else {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000000007ull ^ ts.tv_nsec ^
		       ((uint64_t)getpid() << 32);
	}
	if (!seed)
		seed = 1;
	printf("random-check: BCF_SEED=%" PRIu64 " ops=%ld\n", seed, ops);
	fflush(stdout);
	rng_state = seed;
	wbuf = malloc(MAX_IO);
	tbuf = malloc(MAX_IO);
	rbuf = malloc(MAX_IO);
	if (!wbuf || !tbuf || !rbuf)
		return 99;
	for (i = 0; i < NFILES; i++) {
		f = &files[i];
		snprintf(f->test_path, sizeof(f->test_path), "%s/file%ld",
			 argv[1], i);
		snprintf(f->ref_path, sizeof(f->ref_path), "%s/file%ld",
			 argv[2], i);
		open_pair(f, 1);
	}
	for (op_index = 0; op_index < ops; op_index++) {
		f = &files[rng_below(NFILES)];
		switch (rng_below(24)) {
		case 0 ... 6:
			op_write(f, 0);
			break;
		case 7 ... 12:
			op_read(f, 0);
			break;
		case 13:
		case 14:
			op_truncate(f);
			break;
		case 15:
			op_stat(f);
			break;
		case 16:
			op_mmap(f, 0);
			break;
		case 17:
			op_mmap(f, 1);
			break;
		case 20:
			op_write(f, 1);
			break;
		case 21:
			op_read(f, 1);
			break;
		case 22:
			op_fallocate(f);
			break;
		case 23:
			op_copy(f, &files[(f - files + 1 +
					   rng_below(NFILES - 1)) % NFILES]);
			break;
		case 18:
			op_reopen(f, 0);
			break;
		default:
			op_reopen(f, 1);
			break;
		}
	}
	for (i = 0; i < NFILES; i++) {
		op_reopen(&files[i], 0);
		compare_whole(&files[i]);
		close(files[i].test_fd);
		if (files[i].dio_fd >= 0)
			close(files[i].dio_fd);
		close(files[i].ref_fd);
	}
	printf("random-check: %ld operations on %d files matched\n", ops,
	       NFILES);
	free(wbuf);
	free(tbuf);
	free(rbuf);
	return 0;
}
