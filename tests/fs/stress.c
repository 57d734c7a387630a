// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * stress.c - many threads, many open files, one mount.
 *
 * Usage: stress [-t THREADS] [-f FILES] [-s SEED] [-e EXPECTDIR] DIR SECONDS
 *
 * THREADS threads (8) each own FILES files (100) under DIR/d0 and DIR/d1
 * and keep more than 64 of them open at every moment, so that a session
 * holds several hundred open files while transfers are in flight.  For
 * SECONDS seconds each thread picks random operations on its own files:
 * pread, pwrite at a random offset (holes included), appends (pwrite at the
 * end, or write on a descriptor opened O_APPEND), ftruncate, fstat, rename
 * within and across the two directories while the file is open, close,
 * open (sometimes O_TRUNC or O_APPEND), and unlink + create.  Each thread
 * keeps the exact content of its files in memory (no other thread touches
 * them), compares every read with it, checks every file whole before it
 * is closed, and at the end checks every file through its descriptor and
 * again through a fresh open by name.  With -e the expected contents are
 * written under EXPECTDIR/d0 and EXPECTDIR/d1 so that the caller can
 * compare them with the agent's backing directory.
 *
 * Any mismatch or unexpected errno ends the run: the failing thread prints
 * the operation, the file, the errno and its last operations.  The seed is
 * printed first; -s replays a run (thread scheduling aside).  A thread
 * stuck in a system call for 120 s past the end is reported too.
 * Exit 0 when all matched, 1 on a failure, 99 on a bad invocation.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ST_SMALL_MAX	(64u << 10)	/* most files stay below this */
#define ST_BIG_MAX	(1u << 20)	/* every 25th file: below this */
#define ST_IO_MAX	(256u << 10)	/* one read or write */
#define ST_MIN_OPEN	72		/* never close below this many */
#define ST_HIST		16		/* history kept per thread */
#define ST_STUCK_S	120		/* later than this: stuck */

enum st_op {
	ST_READ,
	ST_PWRITE,
	ST_APPEND,
	ST_FSTAT,
	ST_TRUNC,
	ST_RENAME,
	ST_CLOSE,
	ST_OPEN,
	ST_RECREATE,
	ST_CHECK,
	ST_NOPS
};

static const char *const st_op_name[ST_NOPS] = {
	"read", "pwrite", "append", "fstat", "truncate", "rename",
	"close", "open", "recreate", "check",
};

/* out of 100: the mix of operations */
static const int st_op_weight[ST_NOPS] = {
	24, 20, 10, 10, 5, 10, 7, 7, 3, 4,
};

struct st_file {
	int dir;		/* 0 or 1: DIR/d0 or DIR/d1 */
	unsigned int gen;	/* bumped by every rename and recreate */
	int fd;			/* -1 while closed */
	int append;		/* fd was opened O_APPEND */
	size_t size;
	size_t max;
	unsigned char *data;	/* the exact content, size bytes */
};

struct st_hist {
	enum st_op op;
	int file;
	uint64_t off;
	uint64_t len;
};

struct st_thread {
	int id;
	pthread_t tid;
	uint64_t rng;
	struct st_file *files;
	int nopen;
	unsigned char *buf;
	unsigned long count[ST_NOPS];
	struct st_hist hist[ST_HIST];
	unsigned long nhist;
	atomic_int done;
};

static const char *st_dir;
static const char *st_expect;
static int st_nthreads = 8;
static int st_nfiles = 100;
static atomic_int st_stop;
static atomic_int st_failed;
static pthread_mutex_t st_print_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t st_rand(struct st_thread *t)
{
	/* xorshift64* */
	t->rng ^= t->rng >> 12;
	t->rng ^= t->rng << 25;
	t->rng ^= t->rng >> 27;
	return t->rng * 0x2545F4914F6CDD1Dull;
}

static uint64_t st_below(struct st_thread *t, uint64_t n)
{
	return n ? st_rand(t) % n : 0;
}

/* a length: mostly small, sometimes a page or two, sometimes large */
static size_t st_len(struct st_thread *t)
{
	switch (st_below(t, 4)) {
	case 0:
		return 1 + st_below(t, 512);
	case 1:
		return 1 + st_below(t, 8192);
	case 2:
		return 1 + st_below(t, 65536);
	default:
		return 1 + st_below(t, ST_IO_MAX);
	}
}

static void st_fill(struct st_thread *t, unsigned char *p, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!(i & 7))
			v = st_rand(t);
		p[i] = (unsigned char)(v >> ((i & 7) * 8));
	}
}

static void st_path(const struct st_thread *t, int i, char *out, size_t n)
{
	const struct st_file *f = &t->files[i];

	snprintf(out, n, "%s/d%d/t%d-f%d-g%u", st_dir, f->dir, t->id, i,
		 f->gen);
}

static void st_note(struct st_thread *t, enum st_op op, int file,
		    uint64_t off, uint64_t len)
{
	struct st_hist *h = &t->hist[t->nhist++ % ST_HIST];

	h->op = op;
	h->file = file;
	h->off = off;
	h->len = len;
	t->count[op]++;
}

/* Report a failure of thread t (err: an errno, or 0) and stop every thread. */
static int __attribute__((format(printf, 3, 4)))
st_fail(struct st_thread *t, int err, const char *fmt, ...)
{
	char path[PATH_MAX];
	unsigned long i, first;
	va_list ap;

	pthread_mutex_lock(&st_print_lock);
	fprintf(stderr, "stress: thread %d: ", t->id);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s (errno %d)", strerror(err), err);
	fputc('\n', stderr);
	first = t->nhist > ST_HIST ? t->nhist - ST_HIST : 0;
	fprintf(stderr, "stress: thread %d: last operations, oldest first:\n",
		t->id);
	for (i = first; i < t->nhist; i++) {
		const struct st_hist *h = &t->hist[i % ST_HIST];

		st_path(t, h->file, path, sizeof(path));
		fprintf(stderr, "  #%lu %s file %d (now %s, size %zu) off %"
			PRIu64 " len %" PRIu64 "\n", i, st_op_name[h->op],
			h->file, path, t->files[h->file].size, h->off, h->len);
	}
	pthread_mutex_unlock(&st_print_lock);
	atomic_store(&st_failed, 1);
	atomic_store(&st_stop, 1);
	return -1;
}

/* Compare n bytes read at off with the model; say where they differ. */
static int st_compare(struct st_thread *t, int i, const unsigned char *got,
		      size_t off, size_t n, const char *what)
{
	const struct st_file *f = &t->files[i];
	char path[PATH_MAX];
	size_t k;

	if (!memcmp(got, f->data + off, n))
		return 0;
	for (k = 0; k < n && got[k] == f->data[off + k]; k++)
		;
	st_path(t, i, path, sizeof(path));
	return st_fail(t, 0, "%s of %s: %zu bytes at %zu differ from byte %zu "
		       "on (file size %zu): expected 0x%02x, got 0x%02x", what,
		       path, n, off, off + k, f->size, f->data[off + k],
		       got[k]);
}

/* pread exactly n bytes at off, or fewer at EOF; -1 after st_fail */
static ssize_t st_pread(struct st_thread *t, int fd, int i, void *p,
			size_t n, size_t off)
{
	char path[PATH_MAX];
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = pread(fd, (char *)p + got, n - got, off + got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st_path(t, i, path, sizeof(path));
			return st_fail(t, errno, "pread %s off %zu len %zu",
				       path, off + got, n - got);
		}
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

/* Read the whole file through fd and compare it with the model. */
static int st_check_fd(struct st_thread *t, int i, int fd, const char *what)
{
	struct st_file *f = &t->files[i];
	char path[PATH_MAX];
	size_t off = 0, n;
	ssize_t r;

	while (off < f->size) {
		n = f->size - off < ST_IO_MAX ? f->size - off : ST_IO_MAX;
		r = st_pread(t, fd, i, t->buf, n, off);
		if (r < 0)
			return -1;
		if ((size_t)r != n) {
			st_path(t, i, path, sizeof(path));
			return st_fail(t, 0, "%s of %s: short read at %zu: "
				       "file ends at %zu, expected size %zu",
				       what, path, off, off + r, f->size);
		}
		if (st_compare(t, i, t->buf, off, n, what))
			return -1;
		off += n;
	}
	/* the file must end where the model does */
	r = st_pread(t, fd, i, t->buf, 1, off);
	if (r < 0)
		return -1;
	if (r) {
		st_path(t, i, path, sizeof(path));
		return st_fail(t, 0, "%s of %s: file is longer than the "
			       "expected %zu bytes", what, path, f->size);
	}
	return 0;
}

static int st_pwrite(struct st_thread *t, int i, const void *p, size_t n,
		     size_t off, int use_write)
{
	struct st_file *f = &t->files[i];
	char path[PATH_MAX];
	size_t done = 0;
	ssize_t r;

	while (done < n) {
		if (use_write)
			r = write(f->fd, (const char *)p + done, n - done);
		else
			r = pwrite(f->fd, (const char *)p + done, n - done,
				   off + done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			st_path(t, i, path, sizeof(path));
			return st_fail(t, r < 0 ? errno : 0, "%s %s off %zu "
				       "len %zu%s", use_write ? "write" :
				       "pwrite", path, off + done, n - done,
				       r == 0 ? ": wrote nothing" : "");
		}
		done += r;
	}
	return 0;
}

/* Apply a write of n bytes at off to the model (zeros fill a hole). */
static void st_model_write(struct st_file *f, const void *p, size_t n,
			   size_t off)
{
	if (off > f->size)
		memset(f->data + f->size, 0, off - f->size);
	memcpy(f->data + off, p, n);
	if (off + n > f->size)
		f->size = off + n;
}

static void st_model_truncate(struct st_file *f, size_t size)
{
	if (size > f->size)
		memset(f->data + f->size, 0, size - f->size);
	f->size = size;
}

static int st_open(struct st_thread *t, int i, int flags)
{
	struct st_file *f = &t->files[i];
	char path[PATH_MAX];
	int fd;

	st_path(t, i, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC | flags, 0644);
	if (fd < 0)
		return st_fail(t, errno, "open %s (flags 0x%x)", path, flags);
	f->fd = fd;
	f->append = !!(flags & O_APPEND);
	if (flags & O_TRUNC)
		f->size = 0;
	t->nopen++;
	return 0;
}

static int st_close(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	char path[PATH_MAX];
	int ret;

	if (st_check_fd(t, i, f->fd, "check before close"))
		return -1;
	ret = close(f->fd);
	f->fd = -1;
	t->nopen--;
	if (ret) {
		st_path(t, i, path, sizeof(path));
		return st_fail(t, errno, "close %s", path);
	}
	return 0;
}

static int st_do_read(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	size_t off = st_below(t, f->size + 1), n = st_len(t), want;
	ssize_t r;

	st_note(t, ST_READ, i, off, n);
	want = off + n > f->size ? f->size - off : n;
	r = st_pread(t, f->fd, i, t->buf, n, off);
	if (r < 0)
		return -1;
	if ((size_t)r != want) {
		char path[PATH_MAX];

		st_path(t, i, path, sizeof(path));
		return st_fail(t, 0, "pread %s off %zu len %zu: got %zd bytes, "
			       "expected %zu (size %zu)", path, off, n, r,
			       want, f->size);
	}
	return st_compare(t, i, t->buf, off, want, "pread");
}

static int st_do_pwrite(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	size_t n = st_len(t), off;

	if (n > f->max)
		n = f->max;
	/* holes too: up to 8 KiB past the end */
	off = st_below(t, (f->size + 8192 < f->max - n ? f->size + 8192 :
			   f->max - n) + 1);
	if (f->append) {
		/* an O_APPEND descriptor appends whatever the offset */
		if (f->size + n > f->max)
			return 0;
		off = f->size;
	}
	st_note(t, ST_PWRITE, i, off, n);
	st_fill(t, t->buf, n);
	if (st_pwrite(t, i, t->buf, n, off, 0))
		return -1;
	st_model_write(f, t->buf, n, off);
	return 0;
}

static int st_do_append(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	size_t n = st_len(t);

	if (f->size + n > f->max) {
		/* full: start again small */
		if (ftruncate(f->fd, 0)) {
			char path[PATH_MAX];

			st_path(t, i, path, sizeof(path));
			return st_fail(t, errno, "ftruncate %s to 0", path);
		}
		f->size = 0;
		if (n > f->max)
			n = f->max;
	}
	st_note(t, ST_APPEND, i, f->size, n);
	st_fill(t, t->buf, n);
	if (st_pwrite(t, i, t->buf, n, f->size, f->append))
		return -1;
	st_model_write(f, t->buf, n, f->size);
	return 0;
}

static int st_do_fstat(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	char path[PATH_MAX];
	struct stat st;

	st_note(t, ST_FSTAT, i, 0, f->size);
	if (fstat(f->fd, &st)) {
		st_path(t, i, path, sizeof(path));
		return st_fail(t, errno, "fstat %s", path);
	}
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size != f->size) {
		st_path(t, i, path, sizeof(path));
		return st_fail(t, 0, "fstat %s: mode 0%o size %lld, expected "
			       "a regular file of %zu bytes", path,
			       (unsigned int)st.st_mode,
			       (long long)st.st_size, f->size);
	}
	return 0;
}

static int st_do_truncate(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	size_t size = st_below(t, 2) ? st_below(t, f->size + 1) :
		      st_below(t, f->max + 1);

	st_note(t, ST_TRUNC, i, size, f->size);
	if (ftruncate(f->fd, size)) {
		char path[PATH_MAX];

		st_path(t, i, path, sizeof(path));
		return st_fail(t, errno, "ftruncate %s to %zu", path, size);
	}
	st_model_truncate(f, size);
	return 0;
}

static int st_do_rename(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	char from[PATH_MAX], to[PATH_MAX];

	st_path(t, i, from, sizeof(from));
	f->dir = (int)st_below(t, 2);
	f->gen++;
	st_path(t, i, to, sizeof(to));
	st_note(t, ST_RENAME, i, 0, f->size);
	if (rename(from, to))
		return st_fail(t, errno, "rename %s -> %s", from, to);
	return 0;
}

static int st_do_recreate(struct st_thread *t, int i)
{
	struct st_file *f = &t->files[i];
	char path[PATH_MAX];
	int was_open = f->fd >= 0;

	st_note(t, ST_RECREATE, i, 0, f->size);
	if (was_open && st_close(t, i))
		return -1;
	st_path(t, i, path, sizeof(path));
	if (unlink(path))
		return st_fail(t, errno, "unlink %s", path);
	f->dir = (int)st_below(t, 2);
	f->gen++;
	f->size = 0;
	if (st_open(t, i, O_CREAT | O_EXCL))
		return -1;
	if (!was_open) {
		/* keep the number of open files as it was */
		if (close(f->fd))
			return st_fail(t, errno, "close of a new file");
		f->fd = -1;
		t->nopen--;
	}
	return 0;
}

static int st_pick(struct st_thread *t, int want_open)
{
	int i, k;

	i = (int)st_below(t, st_nfiles);
	for (k = 0; k < st_nfiles; k++, i = (i + 1) % st_nfiles)
		if ((t->files[i].fd >= 0) == want_open)
			return i;
	return -1;
}

static int st_step(struct st_thread *t)
{
	int r = (int)st_below(t, 100), op = 0, i;

	while (r >= st_op_weight[op]) {
		r -= st_op_weight[op];
		op++;
	}
	if (op == ST_OPEN) {
		i = st_pick(t, 0);
		if (i < 0)
			return 0;
		st_note(t, ST_OPEN, i, 0, t->files[i].size);
		switch (st_below(t, 8)) {
		case 0:
			return st_open(t, i, O_TRUNC);
		case 1:
		case 2:
			return st_open(t, i, O_APPEND);
		default:
			return st_open(t, i, 0);
		}
	}
	if (op == ST_RECREATE)
		return st_do_recreate(t, (int)st_below(t, st_nfiles));
	i = st_pick(t, 1);
	if (i < 0)
		return 0;
	switch (op) {
	case ST_READ:
		return st_do_read(t, i);
	case ST_PWRITE:
		return st_do_pwrite(t, i);
	case ST_APPEND:
		return st_do_append(t, i);
	case ST_FSTAT:
		return st_do_fstat(t, i);
	case ST_TRUNC:
		return st_do_truncate(t, i);
	case ST_RENAME:
		return st_do_rename(t, i);
	case ST_CLOSE:
		if (t->nopen <= ST_MIN_OPEN)
			return 0;
		st_note(t, ST_CLOSE, i, 0, t->files[i].size);
		return st_close(t, i);
	case ST_CHECK:
		st_note(t, ST_CHECK, i, 0, t->files[i].size);
		return st_check_fd(t, i, t->files[i].fd, "check");
	}
	return 0;
}

/* Every file through its descriptor, then closed, then by a fresh open. */
static int st_final(struct st_thread *t)
{
	char path[PATH_MAX];
	int i, fd, ret;

	for (i = 0; i < st_nfiles; i++)
		if (t->files[i].fd >= 0 && st_close(t, i))
			return -1;
	for (i = 0; i < st_nfiles; i++) {
		st_path(t, i, path, sizeof(path));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return st_fail(t, errno, "final open of %s", path);
		ret = st_check_fd(t, i, fd, "final check");
		close(fd);
		if (ret)
			return -1;
	}
	return 0;
}

static int st_write_expected(struct st_thread *t)
{
	char path[PATH_MAX];
	FILE *fp;
	int i;

	for (i = 0; i < st_nfiles; i++) {
		const struct st_file *f = &t->files[i];

		snprintf(path, sizeof(path), "%s/d%d/t%d-f%d-g%u", st_expect,
			 f->dir, t->id, i, f->gen);
		fp = fopen(path, "w");
		if (!fp || fwrite(f->data, 1, f->size, fp) != f->size ||
		    fclose(fp)) {
			fprintf(stderr, "stress: cannot write %s: %s\n", path,
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void *st_main(void *arg)
{
	struct st_thread *t = arg;
	int i;

	for (i = 0; i < st_nfiles; i++) {
		struct st_file *f = &t->files[i];

		f->dir = i & 1;
		f->fd = -1;
		f->max = i % 25 ? ST_SMALL_MAX : ST_BIG_MAX;
		f->data = malloc(f->max);
		if (!f->data) {
			st_fail(t, ENOMEM, "model of file %d", i);
			goto out;
		}
		st_note(t, ST_OPEN, i, 0, 0);
		if (st_open(t, i, O_CREAT | O_EXCL))
			goto out;
	}
	while (!atomic_load(&st_stop))
		if (st_step(t))
			goto out;
	if (!atomic_load(&st_failed))
		st_final(t);
out:
	atomic_store(&t->done, 1);
	return NULL;
}

static void st_usage(void)
{
	fprintf(stderr, "usage: stress [-t THREADS] [-f FILES] [-s SEED] "
		"[-e EXPECTDIR] DIR SECONDS\n");
	exit(99);
}

static int st_mkdirs(const char *top)
{
	char path[PATH_MAX];
	int d;

	for (d = 0; d < 2; d++) {
		snprintf(path, sizeof(path), "%s/d%d", top, d);
		if (mkdir(path, 0755)) {
			fprintf(stderr, "stress: mkdir %s: %s\n", path,
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	struct st_thread *threads;
	unsigned long total[ST_NOPS] = { 0 };
	struct timespec until;
	struct rlimit rl;
	int c, i, k, seconds, stuck = 0;

	while ((c = getopt(argc, argv, "t:f:s:e:")) != -1) {
		switch (c) {
		case 't':
			st_nthreads = atoi(optarg);
			break;
		case 'f':
			st_nfiles = atoi(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'e':
			st_expect = optarg;
			break;
		default:
			st_usage();
		}
	}
	if (argc - optind != 2 || st_nthreads < 1 ||
	    st_nfiles < ST_MIN_OPEN + 1)
		st_usage();
	st_dir = argv[optind];
	seconds = atoi(argv[optind + 1]);
	printf("stress: seed %" PRIu64 ", %d threads x %d files, %d s\n", seed,
	       st_nthreads, st_nfiles, seconds);
	fflush(stdout);

	/* several hundred descriptors at once */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (st_mkdirs(st_dir) || (st_expect && st_mkdirs(st_expect)))
		return 99;

	threads = calloc(st_nthreads, sizeof(*threads));
	if (!threads)
		return 99;
	for (i = 0; i < st_nthreads; i++) {
		struct st_thread *t = &threads[i];

		t->id = i;
		t->rng = seed * 0x9E3779B97F4A7C15ull + i + 1;
		t->files = calloc(st_nfiles, sizeof(*t->files));
		t->buf = malloc(ST_IO_MAX);
		if (!t->files || !t->buf)
			return 99;
		if (pthread_create(&t->tid, NULL, st_main, t)) {
			fprintf(stderr, "stress: pthread_create failed\n");
			return 99;
		}
	}

	for (k = 0; k < seconds * 10 && !atomic_load(&st_stop); k++)
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	atomic_store(&st_stop, 1);

	/* a thread blocked in the file system would hang a plain join */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ST_STUCK_S;
	for (i = 0; i < st_nthreads; i++) {
		if (pthread_timedjoin_np(threads[i].tid, NULL, &until)) {
			struct st_thread *t = &threads[i];
			const struct st_hist *h =
				&t->hist[(t->nhist - 1) % ST_HIST];

			fprintf(stderr, "stress: thread %d stuck for %d s in "
				"%s of file %d (off %" PRIu64 " len %" PRIu64
				")\n", i, ST_STUCK_S, st_op_name[h->op],
				h->file, h->off, h->len);
			stuck = 1;
		}
	}
	if (stuck) {
		fflush(NULL);
		_exit(1);
	}
	for (i = 0; i < st_nthreads; i++)
		for (c = 0; c < ST_NOPS; c++)
			total[c] += threads[i].count[c];
	printf("stress: operations:");
	for (c = 0; c < ST_NOPS; c++)
		printf(" %s %lu", st_op_name[c], total[c]);
	printf("\n");
	if (atomic_load(&st_failed))
		return 1;
	for (i = 0; st_expect && i < st_nthreads; i++)
		if (st_write_expected(&threads[i]))
			return 99;
	for (i = 0; i < st_nthreads; i++) {
		for (k = 0; k < st_nfiles; k++)
			free(threads[i].files[k].data);
		free(threads[i].files);
		free(threads[i].buf);
	}
	free(threads);
	printf("stress: all files matched\n");
	return 0;
}
