// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * syscall-check.c - assert exact results and errno values of file system
 * calls in a directory (a bluecachefs mount, or a plain directory as the
 * reference that validates the checker itself).
 *
 * Usage: syscall-check DIR
 * With SYSCALL_CHECK_NO_EXCHANGE set in the environment, RENAME_EXCHANGE
 * must fail with EINVAL (a store that has no atomic exchange).
 * Every case works in a fresh subdirectory of DIR, prints "ok NAME" or
 * "FAIL NAME: what happened", and the exit status is 0 when every case
 * passed, 1 otherwise, 99 when DIR cannot be used at all.  Cases that need
 * an unprivileged caller run in a child that switches to uid/gid 65534 when
 * started as root (the mount then needs allow_other).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define NOBODY	65534

static const char *top;
static char cwd_case[PATH_MAX];
static int failures;
static int case_failed;
static const char *case_name;

static void fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL %s: ", case_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	case_failed = 1;
}

/* ret must be -1 with errno == want */
#define EXPECT_ERR(call, want) do {					\
	errno = 0;							\
	long _r = (long)(call);						\
	int _e = errno;							\
	if (_r != -1)							\
		fail("%s returned %ld, expected -1 %s", #call, _r,	\
		     strerrorname_np(want));				\
	else if (_e != (want))						\
		fail("%s: errno %s (%s), expected %s", #call,		\
		     strerrorname_np(_e) ? strerrorname_np(_e) : "?",	\
		     strerror(_e), strerrorname_np(want));		\
} while (0)

/* ret must be >= 0; stores it in *out if out != NULL */
#define EXPECT_OK(call) ({						\
	errno = 0;							\
	long _r = (long)(call);						\
	if (_r < 0)							\
		fail("%s failed: %s", #call, strerror(errno));		\
	_r;								\
})

#define EXPECT_EQ(what, got, want) do {					\
	long long _g = (long long)(got), _w = (long long)(want);	\
	if (_g != _w)							\
		fail("%s: got %lld, expected %lld", what, _g, _w);	\
} while (0)

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = seed >> 16;
	}
}

static int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n;

	if (fd < 0) {
		fail("open %s: %s", path, strerror(errno));
		return -1;
	}
	n = write(fd, buf, len);
	if (n != (ssize_t)len) {
		fail("write %s: %zd of %zu (%s)", path, n, len,
		     strerror(errno));
		close(fd);
		return -1;
	}
	if (close(fd) < 0) {
		fail("close %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* read all of path into buf (at most cap bytes); returns the count or -1 */
static ssize_t read_file(const char *path, void *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	size_t got = 0;
	ssize_t n;

	if (fd < 0) {
		fail("open %s: %s", path, strerror(errno));
		return -1;
	}
	while (got < cap) {
		n = read(fd, (char *)buf + got, cap - got);
		if (n < 0) {
			fail("read %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		if (n == 0)
			break;
		got += n;
	}
	close(fd);
	return got;
}

static void expect_content(const char *path, const void *want, size_t len)
{
	unsigned char *buf = malloc(len + 16);
	ssize_t n;

	if (!buf) {
		fail("out of memory");
		return;
	}
	n = read_file(path, buf, len + 16);
	if (n >= 0 && (size_t)n != len)
		fail("%s holds %zd bytes, expected %zu", path, n, len);
	else if (n >= 0 && memcmp(buf, want, len) != 0)
		fail("%s holds other bytes than written", path);
	free(buf);
}

static void case_enoent(void)
{
	struct stat st;

	EXPECT_ERR(open("missing", O_RDONLY), ENOENT);
	EXPECT_ERR(stat("missing", &st), ENOENT);
	EXPECT_ERR(unlink("missing"), ENOENT);
	EXPECT_ERR(rmdir("missing"), ENOENT);
	EXPECT_ERR(rename("missing", "other"), ENOENT);
	EXPECT_ERR(open("nodir/file", O_WRONLY | O_CREAT, 0644), ENOENT);
}

static void case_eexist(void)
{
	int fd;

	fd = EXPECT_OK(open("f", O_WRONLY | O_CREAT | O_EXCL, 0644));
	if (fd >= 0)
		close(fd);
	EXPECT_ERR(open("f", O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST);
	EXPECT_OK(mkdir("d", 0755));
	EXPECT_ERR(mkdir("d", 0755), EEXIST);
	EXPECT_ERR(mkdir("f", 0755), EEXIST);
	EXPECT_ERR(symlink("target", "f"), EEXIST);
	EXPECT_ERR(link("f", "d"), EEXIST);
	EXPECT_ERR(mknod("f", S_IFIFO | 0644, 0), EEXIST);
}

static void case_dirs(void)
{
	int fd;

	EXPECT_OK(mkdir("d", 0755));
	fd = EXPECT_OK(open("d/x", O_WRONLY | O_CREAT, 0644));
	if (fd >= 0)
		close(fd);
	fd = EXPECT_OK(open("f", O_WRONLY | O_CREAT, 0644));
	if (fd >= 0)
		close(fd);
	EXPECT_ERR(rmdir("d"), ENOTEMPTY);
	EXPECT_ERR(rmdir("f"), ENOTDIR);
	EXPECT_ERR(unlink("d"), EISDIR);
	EXPECT_ERR(open("d", O_WRONLY), EISDIR);
	EXPECT_ERR(open("d", O_RDWR), EISDIR);
	EXPECT_ERR(truncate("d", 0), EISDIR);
	EXPECT_ERR(open("f/x", O_RDONLY), ENOTDIR);
	EXPECT_ERR(open("f/x", O_WRONLY | O_CREAT, 0644), ENOTDIR);
	EXPECT_ERR(mkdir("f/x", 0755), ENOTDIR);
	EXPECT_ERR(open("f", O_RDONLY | O_DIRECTORY), ENOTDIR);
	EXPECT_ERR(rename("f", "d"), EISDIR);
	EXPECT_ERR(rename("d", "f"), ENOTDIR);
	EXPECT_ERR(rmdir("d/."), EINVAL);
	EXPECT_OK(unlink("d/x"));
	EXPECT_OK(rmdir("d"));
	EXPECT_ERR(access("d", F_OK), ENOENT);
}

static void case_nametoolong(void)
{
	char name[300];
	struct stat st;

	memset(name, 'n', 256);
	name[256] = '\0';
	EXPECT_ERR(open(name, O_WRONLY | O_CREAT, 0644), ENAMETOOLONG);
	EXPECT_ERR(stat(name, &st), ENAMETOOLONG);
	EXPECT_ERR(mkdir(name, 0755), ENAMETOOLONG);
	EXPECT_ERR(symlink("t", name), ENAMETOOLONG);
	/* 255 bytes is a valid name */
	name[255] = '\0';
	EXPECT_OK(mkdir(name, 0755));
	EXPECT_OK(stat(name, &st));
	EXPECT_OK(rmdir(name));
}

static void case_rename(void)
{
	static const char a[] = "contents of a", b[] = "b's bytes, longer";
	struct stat st;

	if (write_file("a", a, sizeof(a)) || write_file("b", b, sizeof(b)))
		return;
	EXPECT_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE),
		   EEXIST);
	expect_content("b", b, sizeof(b));
	if (getenv("SYSCALL_CHECK_NO_EXCHANGE")) {
		/* a store without an atomic exchange refuses it whole */
		EXPECT_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "b",
				     RENAME_EXCHANGE), EINVAL);
		expect_content("a", a, sizeof(a));
		expect_content("b", b, sizeof(b));
		EXPECT_OK(rename("a", "t"));
		EXPECT_OK(rename("b", "a"));
		EXPECT_OK(rename("t", "b"));
	} else {
		EXPECT_OK(renameat2(AT_FDCWD, "a", AT_FDCWD, "b",
				    RENAME_EXCHANGE));
	}
	expect_content("a", b, sizeof(b));
	expect_content("b", a, sizeof(a));
	EXPECT_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "none",
			     RENAME_EXCHANGE), ENOENT);
	EXPECT_OK(renameat2(AT_FDCWD, "a", AT_FDCWD, "c", RENAME_NOREPLACE));
	EXPECT_ERR(stat("a", &st), ENOENT);
	expect_content("c", b, sizeof(b));
	/* plain rename replaces */
	EXPECT_OK(rename("c", "b"));
	expect_content("b", b, sizeof(b));
	EXPECT_ERR(stat("c", &st), ENOENT);

	EXPECT_OK(mkdir("d1", 0755));
	EXPECT_OK(mkdir("d2", 0755));
	EXPECT_OK(mkdir("d2/sub", 0755));
	EXPECT_ERR(rename("d1", "d2"), ENOTEMPTY);
	EXPECT_OK(rename("d2", "d1"));	/* onto an empty dir */
	EXPECT_OK(stat("d1/sub", &st));
	EXPECT_ERR(stat("d2", &st), ENOENT);
	EXPECT_ERR(rename("d1", "d1/sub/x"), EINVAL);
	/* across directories */
	EXPECT_OK(rename("b", "d1/sub/b"));
	expect_content("d1/sub/b", b, sizeof(b));
}

static void case_links(void)
{
	static const char data[] = "linked";
	char buf[PATH_MAX];
	struct stat st, st2;
	ssize_t n;

	if (write_file("f", data, sizeof(data)))
		return;
	EXPECT_OK(mkdir("d", 0755));
	EXPECT_ERR(link("d", "dlink"), EPERM);
	EXPECT_OK(link("f", "g"));
	if (EXPECT_OK(stat("f", &st)) == 0 && EXPECT_OK(stat("g", &st2)) == 0) {
		EXPECT_EQ("nlink after link", st.st_nlink, 2);
		EXPECT_EQ("same inode", st.st_ino, st2.st_ino);
	}
	EXPECT_OK(unlink("f"));
	if (EXPECT_OK(stat("g", &st)) == 0)
		EXPECT_EQ("nlink after unlink", st.st_nlink, 1);
	expect_content("g", data, sizeof(data));

	EXPECT_OK(symlink("g", "s"));
	n = EXPECT_OK(readlink("s", buf, sizeof(buf)));
	if (n >= 0 && (n != 1 || buf[0] != 'g'))
		fail("readlink s: got '%.*s', expected 'g'", (int)n, buf);
	if (EXPECT_OK(lstat("s", &st)) == 0 && !S_ISLNK(st.st_mode))
		fail("lstat s: mode %o is not a symlink", st.st_mode);
	expect_content("s", data, sizeof(data));
	EXPECT_ERR(readlink("g", buf, sizeof(buf)), EINVAL);
	EXPECT_ERR(readlink("d", buf, sizeof(buf)), EINVAL);
	EXPECT_OK(symlink("missing", "dangling"));
	EXPECT_ERR(open("dangling", O_RDONLY), ENOENT);
	EXPECT_ERR(open("s", O_RDONLY | O_NOFOLLOW), ELOOP);
	/* long symlink target */
	memset(buf, 'x', 4000);
	buf[4000] = '\0';
	EXPECT_OK(symlink(buf, "long"));
	n = EXPECT_OK(readlink("long", buf, sizeof(buf)));
	EXPECT_EQ("readlink length of a 4000-byte target", n, 4000);
	EXPECT_OK(mknod("fifo", S_IFIFO | 0640, 0));
	if (EXPECT_OK(lstat("fifo", &st)) == 0 && !S_ISFIFO(st.st_mode))
		fail("mknod fifo: mode %o", st.st_mode);
}

static void case_xattr(void)
{
	char buf[256], list[1024];
	ssize_t n;
	int found = 0;
	char *p;

	if (write_file("f", "x", 1))
		return;
	EXPECT_ERR(getxattr("f", "user.missing", buf, sizeof(buf)), ENODATA);
	EXPECT_OK(setxattr("f", "user.k", "value1", 6, XATTR_CREATE));
	EXPECT_ERR(setxattr("f", "user.k", "v", 1, XATTR_CREATE), EEXIST);
	EXPECT_ERR(setxattr("f", "user.n", "v", 1, XATTR_REPLACE), ENODATA);
	n = EXPECT_OK(getxattr("f", "user.k", buf, sizeof(buf)));
	if (n >= 0 && (n != 6 || memcmp(buf, "value1", 6)))
		fail("getxattr user.k: got %zd bytes '%.*s'", n, (int)n, buf);
	EXPECT_EQ("getxattr size probe", getxattr("f", "user.k", NULL, 0), 6);
	EXPECT_ERR(getxattr("f", "user.k", buf, 2), ERANGE);
	EXPECT_OK(setxattr("f", "user.k", "v2", 2, XATTR_REPLACE));
	n = EXPECT_OK(getxattr("f", "user.k", buf, sizeof(buf)));
	if (n >= 0 && (n != 2 || memcmp(buf, "v2", 2)))
		fail("getxattr after replace: '%.*s'", (int)n, buf);
	n = EXPECT_OK(listxattr("f", list, sizeof(list)));
	for (p = list; n > 0 && p < list + n; p += strlen(p) + 1)
		if (!strcmp(p, "user.k"))
			found = 1;
	if (n >= 0 && !found)
		fail("listxattr does not name user.k");
	EXPECT_OK(removexattr("f", "user.k"));
	EXPECT_ERR(removexattr("f", "user.k"), ENODATA);
	EXPECT_ERR(getxattr("f", "user.k", buf, sizeof(buf)), ENODATA);
}

/*
 * A directory's ctime moves when it is renamed or its extended attributes
 * change, also when something was just made in it (the mount may keep
 * the attributes of a directory it changed); a file's at every utimensat.
 */
static void time_moved(const char *what, const char *path,
		       const struct stat *before, int mtime)
{
	const struct timespec *a, *b;
	struct stat st;

	if (EXPECT_OK(lstat(path, &st)) < 0)
		return;
	a = mtime ? &st.st_mtim : &st.st_ctim;
	b = mtime ? &before->st_mtim : &before->st_ctim;
	if (a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec)
		fail("%s: %s of %s did not change", what,
		     mtime ? "mtime" : "ctime", path);
}

static void ctime_moved(const char *what, const char *path,
			const struct stat *before)
{
	time_moved(what, path, before, 0);
}

static void mtime_moved(const char *what, const char *path,
			const struct stat *before)
{
	time_moved(what, path, before, 1);
}

static void ctime_touch(const char *dir)
{
	char path[PATH_MAX];
	struct timespec pause = { 0, 20 * 1000 * 1000 };

	snprintf(path, sizeof(path), "%s/made", dir);
	unlink(path);
	write_file(path, "x", 1);
	nanosleep(&pause, NULL);
}

static void case_ctime(void)
{
	struct timespec ts[2] = { { 1000000000, 0 }, { 1100000000, 0 } };
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	struct stat st, st2;

	/* utimensat marks ctime even when the times it sets are the same */
	if (!write_file("t", "x", 1) &&
	    EXPECT_OK(utimensat(AT_FDCWD, "t", ts, 0)) == 0 &&
	    EXPECT_OK(lstat("t", &st)) == 0) {
		nanosleep(&pause, NULL);
		EXPECT_OK(utimensat(AT_FDCWD, "t", ts, 0));
		ctime_moved("utimensat to the same times", "t", &st);
	}
	/*
	 * open(O_TRUNC) of a file that is there marks mtime and ctime for
	 * update, an empty one too (POSIX); so does ftruncate(2) to the
	 * size it has.  (truncate(2) to the same size needn't.)
	 */
	if (!write_file("e", "", 0) && EXPECT_OK(lstat("e", &st)) == 0) {
		int fd;

		nanosleep(&pause, NULL);
		fd = EXPECT_OK(open("e", O_WRONLY | O_TRUNC));
		if (fd >= 0)
			close(fd);
		ctime_moved("open(O_TRUNC) of an empty file", "e", &st);
		mtime_moved("open(O_TRUNC) of an empty file", "e", &st);
	}
	/* a chown to the owner and group a file has marks its ctime */
	if (EXPECT_OK(lstat("t", &st)) == 0) {
		nanosleep(&pause, NULL);
		EXPECT_OK(chown("t", st.st_uid, st.st_gid));
		ctime_moved("chown to the same owner and group", "t", &st);
	}
	/* fallocate(2) inside the size marks mtime and ctime (Linux) */
	if (!write_file("a", "0123456789", 10) &&
	    EXPECT_OK(lstat("a", &st)) == 0) {
		int fd;

		nanosleep(&pause, NULL);
		fd = EXPECT_OK(open("a", O_WRONLY));
		if (fd >= 0) {
			EXPECT_OK(fallocate(fd, 0, 0, 4));
			close(fd);
		}
		ctime_moved("fallocate inside the size", "a", &st);
		mtime_moved("fallocate inside the size", "a", &st);
		expect_content("a", "0123456789", 10);
	}
	/*
	 * A fallocate(2) the file system refuses changes nothing: zeroing a
	 * range past the end (a CephFS has no FALLOC_FL_ZERO_RANGE) either
	 * grows the file or leaves its size alone.
	 */
	if (!write_file("z", "0123456789", 10)) {
		int fd = EXPECT_OK(open("z", O_WRONLY)), r = -1;

		if (fd >= 0) {
			r = fallocate(fd, FALLOC_FL_ZERO_RANGE, 65536, 4096);
			if (r < 0 && errno != EOPNOTSUPP)
				fail("fallocate(FALLOC_FL_ZERO_RANGE): %s",
				     strerror(errno));
			close(fd);
		}
		if (EXPECT_OK(lstat("z", &st)) == 0)
			EXPECT_EQ(r < 0 ? "size after a refused zero range" :
				  "size after a zero range past the end",
				  st.st_size, r < 0 ? 10 : 69632);
		if (r < 0)
			expect_content("z", "0123456789", 10);
	}
	if (EXPECT_OK(lstat("e", &st)) == 0) {
		int fd;

		nanosleep(&pause, NULL);
		fd = EXPECT_OK(open("e", O_WRONLY));
		if (fd >= 0) {
			EXPECT_OK(ftruncate(fd, 0));
			close(fd);
		}
		ctime_moved("ftruncate(2) to the same size", "e", &st);
		mtime_moved("ftruncate(2) to the same size", "e", &st);
	}

	EXPECT_OK(mkdir("p", 0755));
	EXPECT_OK(mkdir("q", 0755));
	EXPECT_OK(mkdir("p/d", 0755));
	EXPECT_OK(mkdir("q/e", 0755));
	ctime_touch("p/d");
	if (EXPECT_OK(lstat("p/d", &st)) == 0) {
		EXPECT_OK(rename("p/d", "q/d"));
		ctime_moved("rename to another directory", "q/d", &st);
		expect_content("q/d/made", "x", 1);
	}
	ctime_touch("q/d");
	if (EXPECT_OK(lstat("q/d", &st)) == 0) {
		EXPECT_OK(rename("q/d", "q/d2"));
		ctime_moved("rename in its directory", "q/d2", &st);
	}
	if (!getenv("SYSCALL_CHECK_NO_EXCHANGE")) {
		ctime_touch("q/d2");
		ctime_touch("q/e");
		if (EXPECT_OK(lstat("q/d2", &st)) == 0 &&
		    EXPECT_OK(lstat("q/e", &st2)) == 0) {
			EXPECT_OK(renameat2(AT_FDCWD, "q/d2", AT_FDCWD, "q/e",
					    RENAME_EXCHANGE));
			ctime_moved("exchange", "q/e", &st);
			ctime_moved("exchange", "q/d2", &st2);
		}
	}
	ctime_touch("q/e");
	if (EXPECT_OK(lstat("q/e", &st)) == 0) {
		EXPECT_OK(setxattr("q/e", "user.k", "v", 1, 0));
		ctime_moved("setxattr", "q/e", &st);
	}
	ctime_touch("q/e");
	if (EXPECT_OK(lstat("q/e", &st)) == 0) {
		EXPECT_OK(removexattr("q/e", "user.k"));
		ctime_moved("removexattr", "q/e", &st);
	}
}

/*
 * Every change of a name in a directory moves its mtime and ctime: also a
 * name renamed out of it, and the changes after that one.
 */
static void dir_moved(const char *what, const char *dir,
		      const struct stat *before)
{
	struct stat st;

	if (EXPECT_OK(lstat(dir, &st)) < 0)
		return;
	if (st.st_mtim.tv_sec == before->st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == before->st_mtim.tv_nsec)
		fail("%s: mtime of %s did not change", what, dir);
	ctime_moved(what, dir, before);
}

/* Step i of case_dirtimes(), in a round's directory: s is watched. */
static const char *const dirtimes_what[] = {
	"create", "rename out", "mkdir", "rename in", "symlink", "link",
	"unlink", "rmdir", "rename within",
};

static int dirtimes_step(int i)
{
	switch (i) {
	case 0: return write_file("s/f", "x", 1);
	case 1: return rename("s/f", "o/f");
	case 2: return mkdir("s/sub", 0755);
	case 3: return rename("o/f", "s/g");
	case 4: return symlink("g", "s/l");
	case 5: return link("s/g", "s/h");
	case 6: return unlink("s/h");
	case 7: return rmdir("s/sub");
	default: return rename("s/g", "s/g2");
	}
}

static void case_dirtimes(void)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	char r[16];
	struct stat st;
	int round, step;

	/* a cephfs store showed it from the second round on */
	for (round = 0; round < 3; round++) {
		snprintf(r, sizeof(r), "r%d", round);
		if (EXPECT_OK(mkdir(r, 0755)) < 0 || EXPECT_OK(chdir(r)) < 0)
			return;
		EXPECT_OK(mkdir("s", 0755));
		EXPECT_OK(mkdir("o", 0755));
		for (step = 0; step < 9; step++) {
			if (EXPECT_OK(lstat("s", &st)) < 0)
				break;
			nanosleep(&pause, NULL);
			EXPECT_OK(dirtimes_step(step));
			dir_moved(dirtimes_what[step], "s", &st);
		}
		if (EXPECT_OK(chdir("..")) < 0)
			return;
	}
}

/*
 * A rename over one of two hard links leaves the other one whole (a
 * CephFS client once forgot every name of the replaced inode when the MDS
 * committed the rename; the sleep lets that commit come first).
 */
static void case_relink(void)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	char a[32], b[32], c[32];
	int i;

	EXPECT_OK(mkdir("x", 0755));
	EXPECT_OK(mkdir("y", 0755));
	for (i = 0; i < 8; i++) {
		snprintf(a, sizeof(a), "x/a%d", i);
		snprintf(b, sizeof(b), "y/b%d", i);
		snprintf(c, sizeof(c), "c%d", i);
		if (write_file(a, "aa", 2) || write_file(c, "c", 1))
			return;
		EXPECT_OK(link(a, b));
		EXPECT_OK(rename(c, b));
		nanosleep(&pause, NULL);
		expect_content(a, "aa", 2);
		expect_content(b, "c", 1);
		EXPECT_OK(unlink(a));
		EXPECT_OK(unlink(b));
	}
	EXPECT_OK(rmdir("x"));
	EXPECT_OK(rmdir("y"));
}

static void case_sparse(void)
{
	unsigned char buf[4096], zero[4096];
	off_t hole, data;
	int fd;

	fill(buf, sizeof(buf), 7);
	memset(zero, 0, sizeof(zero));
	fd = EXPECT_OK(open("sparse", O_RDWR | O_CREAT | O_TRUNC, 0644));
	if (fd < 0)
		return;
	EXPECT_EQ("pwrite at 0", pwrite(fd, buf, 4096, 0), 4096);
	EXPECT_EQ("pwrite at 2 MiB", pwrite(fd, buf, 4096, 2 << 20), 4096);
	EXPECT_OK(fsync(fd));
	EXPECT_EQ("SEEK_DATA 0", lseek(fd, 0, SEEK_DATA), 0);
	hole = EXPECT_OK(lseek(fd, 0, SEEK_HOLE));
	if (hole >= 0 && hole != (2 << 20) + 4096) {
		/* holes supported: the hole is between the two extents */
		if (hole < 4096 || hole > (2 << 20))
			fail("SEEK_HOLE 0 = %lld, not in [4096, 2 MiB]",
			     (long long)hole);
		data = EXPECT_OK(lseek(fd, hole, SEEK_DATA));
		if (data >= 0 && (data < hole || data > (2 << 20)))
			fail("SEEK_DATA %lld = %lld, not in [hole, 2 MiB]",
			     (long long)hole, (long long)data);
	}
	EXPECT_ERR(lseek(fd, (2 << 20) + 4096, SEEK_DATA), ENXIO);
	EXPECT_ERR(lseek(fd, (3 << 20), SEEK_HOLE), ENXIO);
	/* the hole reads as zeros */
	EXPECT_EQ("pread in the hole", pread(fd, buf, 4096, 1 << 20), 4096);
	if (memcmp(buf, zero, 4096))
		fail("the hole at 1 MiB does not read as zeros");
	close(fd);
}

static void case_copy_range(void)
{
	enum { LEN = 300000 };
	unsigned char *src = malloc(LEN), *got = malloc(LEN);
	int in = -1, out = -1;
	ssize_t n;
	off_t ioff = 1000, ooff = 5;
	size_t done = 0;

	if (!src || !got) {
		fail("out of memory");
		goto out;
	}
	fill(src, LEN, 11);
	if (write_file("src", src, LEN))
		goto out;
	in = EXPECT_OK(open("src", O_RDONLY));
	out = EXPECT_OK(open("dst", O_RDWR | O_CREAT | O_TRUNC, 0644));
	if (in < 0 || out < 0)
		goto out;
	while (done < LEN - 1000) {
		n = copy_file_range(in, &ioff, out, &ooff,
				    LEN - 1000 - done, 0);
		if (n <= 0) {
			fail("copy_file_range: %zd (%s)", n, strerror(errno));
			goto out;
		}
		done += n;
	}
	EXPECT_EQ("in offset after copy", ioff, LEN);
	EXPECT_EQ("out offset after copy", ooff, LEN - 1000 + 5);
	n = pread(out, got, LEN, 0);
	EXPECT_EQ("dst size", n, LEN - 1000 + 5);
	if (n == LEN - 1000 + 5 && memcmp(got + 5, src + 1000, LEN - 1000))
		fail("copy_file_range copied other bytes");
	if (n == LEN - 1000 + 5 && memcmp(got, "\0\0\0\0\0", 5))
		fail("copy_file_range: bytes before the out offset not 0");
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	free(src);
	free(got);
}

static void case_rw(void)
{
	unsigned char buf[20000], want[20000];
	struct stat st;
	int fd;

	/* O_APPEND */
	fd = EXPECT_OK(open("log", O_WRONLY | O_CREAT | O_APPEND, 0644));
	if (fd < 0)
		return;
	EXPECT_EQ("append 1", write(fd, "one\n", 4), 4);
	EXPECT_EQ("lseek 0", lseek(fd, 0, SEEK_SET), 0);
	EXPECT_EQ("append 2", write(fd, "two\n", 4), 4);
	close(fd);
	fd = EXPECT_OK(open("log", O_WRONLY | O_APPEND));
	if (fd >= 0) {
		EXPECT_EQ("append 3", write(fd, "three\n", 6), 6);
		close(fd);
	}
	expect_content("log", "one\ntwo\nthree\n", 14);

	/* pwrite past EOF leaves a zero-filled hole */
	fd = EXPECT_OK(open("hole", O_RDWR | O_CREAT | O_TRUNC, 0644));
	if (fd < 0)
		return;
	EXPECT_EQ("pwrite head", pwrite(fd, "head", 4, 0), 4);
	EXPECT_EQ("pwrite tail", pwrite(fd, "tail", 4, 10000), 4);
	close(fd);
	memset(want, 0, sizeof(want));
	memcpy(want, "head", 4);
	memcpy(want + 10000, "tail", 4);
	expect_content("hole", want, 10004);

	/* read after truncate down and up */
	fill(want, sizeof(want), 3);
	if (write_file("t", want, 20000))
		return;
	fd = EXPECT_OK(open("t", O_RDWR));
	if (fd < 0)
		return;
	EXPECT_OK(ftruncate(fd, 100));
	EXPECT_EQ("read after truncate to 100", pread(fd, buf, 20000, 0), 100);
	if (memcmp(buf, want, 100))
		fail("first 100 bytes changed by truncate");
	EXPECT_OK(ftruncate(fd, 5000));
	EXPECT_EQ("read after truncate to 5000",
		  pread(fd, buf, 20000, 0), 5000);
	memset(want + 100, 0, 4900);
	if (memcmp(buf, want, 5000))
		fail("truncate up does not read as zeros past the old size");
	if (EXPECT_OK(fstat(fd, &st)) == 0)
		EXPECT_EQ("st_size after truncate", st.st_size, 5000);
	EXPECT_OK(truncate("t", 0));
	EXPECT_EQ("read after truncate to 0", pread(fd, buf, 100, 0), 0);
	EXPECT_OK(fsync(fd));
	EXPECT_OK(fdatasync(fd));
	close(fd);

	/* O_TRUNC */
	if (write_file("t", "abc", 3) == 0)
		expect_content("t", "abc", 3);
}

static void case_mmap(void)
{
	unsigned char want[3 * 4096];
	unsigned char *p;
	int fd;

	fill(want, sizeof(want), 5);
	if (write_file("m", want, sizeof(want)))
		return;
	fd = EXPECT_OK(open("m", O_RDWR));
	if (fd < 0)
		return;
	p = mmap(NULL, sizeof(want), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		fail("mmap MAP_SHARED: %s", strerror(errno));
		close(fd);
		return;
	}
	if (memcmp(p, want, sizeof(want)))
		fail("mapping shows other bytes than the file");
	memset(p + 4000, 0xab, 300);
	memset(want + 4000, 0xab, 300);
	EXPECT_OK(msync(p, sizeof(want), MS_SYNC));
	munmap(p, sizeof(want));
	close(fd);
	expect_content("m", want, sizeof(want));
}

static void case_times(void)
{
	struct timespec ts[2] = { { 1000000000, 123456789 },
				  { 1100000000, 987654321 } };
	struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
	struct stat st;
	time_t t0;

	if (write_file("f", "x", 1))
		return;
	EXPECT_OK(utimensat(AT_FDCWD, "f", ts, 0));
	if (EXPECT_OK(stat("f", &st)) == 0) {
		EXPECT_EQ("atime sec", st.st_atim.tv_sec, 1000000000);
		EXPECT_EQ("mtime sec", st.st_mtim.tv_sec, 1100000000);
		EXPECT_EQ("mtime nsec", st.st_mtim.tv_nsec, 987654321);
	}
	t0 = time(NULL);
	EXPECT_OK(utimensat(AT_FDCWD, "f", now, 0));
	if (EXPECT_OK(stat("f", &st)) == 0 &&
	    (st.st_mtim.tv_sec < t0 - 2 || st.st_mtim.tv_sec > t0 + 5))
		fail("UTIME_NOW: mtime %lld, now %lld",
		     (long long)st.st_mtim.tv_sec, (long long)t0);
	EXPECT_OK(chmod("f", 0640));
	if (EXPECT_OK(stat("f", &st)) == 0)
		EXPECT_EQ("mode after chmod 0640", st.st_mode & 07777, 0640);
	if (geteuid() == 0) {
		EXPECT_OK(chown("f", 1234, 5678));
		if (EXPECT_OK(stat("f", &st)) == 0) {
			EXPECT_EQ("uid after chown", st.st_uid, 1234);
			EXPECT_EQ("gid after chown", st.st_gid, 5678);
		}
	}
}

/* runs in a child as uid/gid NOBODY; returns normally, failures counted */
static void unprivileged_body(void)
{
	char buf[8];
	int fd;

	EXPECT_ERR(open("secret", O_RDONLY), EACCES);
	EXPECT_ERR(open("ro/new", O_WRONLY | O_CREAT, 0644), EACCES);
	EXPECT_ERR(mkdir("ro/newdir", 0755), EACCES);
	EXPECT_ERR(unlink("ro/file"), EACCES);
	EXPECT_ERR(chmod("ro/file", 0777), EPERM);
	EXPECT_ERR(chown("ro/file", NOBODY, NOBODY), EPERM);
	fd = EXPECT_OK(open("ro/file", O_RDONLY));
	if (fd >= 0) {
		EXPECT_ERR(fchmod(fd, 0777), EPERM);
		EXPECT_EQ("read as nobody", read(fd, buf, sizeof(buf)), 4);
		close(fd);
	}
	EXPECT_ERR(open("ro/file", O_WRONLY), EACCES);
	/* a file created by nobody belongs to nobody */
	fd = EXPECT_OK(open("rw/mine", O_WRONLY | O_CREAT, 0600));
	if (fd >= 0) {
		struct stat st;

		if (EXPECT_OK(fstat(fd, &st)) == 0) {
			EXPECT_EQ("owner of created file", st.st_uid, NOBODY);
			EXPECT_EQ("group of created file", st.st_gid, NOBODY);
		}
		EXPECT_OK(fchmod(fd, 0644));
		close(fd);
	}
	EXPECT_OK(mkdir("rw/d", 0700));
}

static void case_unprivileged(void)
{
	pid_t pid;
	int status;

	if (geteuid() != 0) {
		printf("skip %s: needs root to switch users\n", case_name);
		return;
	}
	if (write_file("secret", "hide", 4) || write_file("pub", "show", 4))
		return;
	EXPECT_OK(chmod("secret", 0600));
	EXPECT_OK(mkdir("ro", 0755));
	if (write_file("ro/file", "data", 4))
		return;
	EXPECT_OK(mkdir("rw", 0777));
	EXPECT_OK(chmod("rw", 0777));
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		fail("fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
		    setresuid(NOBODY, NOBODY, NOBODY)) {
			fail("cannot switch to uid %d: %s", NOBODY,
			     strerror(errno));
			_exit(1);
		}
		unprivileged_body();
		fflush(stdout);
		_exit(case_failed);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		case_failed = 1;
}

static void case_statfs_readdir(void)
{
	char name[64];
	int i, fd;
	struct stat st;

	EXPECT_OK(mkdir("many", 0755));
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "many/entry-%03d", i);
		fd = EXPECT_OK(open(name, O_WRONLY | O_CREAT, 0644));
		if (fd < 0) {
			/* which one, and what the directories look like */
			fail("%s: lstat many: %s", name,
			     lstat("many", &st) < 0 ? strerror(errno) : "ok");
			return;
		}
		close(fd);
	}
	for (i = 0; i < 300; i += 37) {
		snprintf(name, sizeof(name), "many/entry-%03d", i);
		EXPECT_OK(stat(name, &st));
		EXPECT_OK(unlink(name));
		EXPECT_ERR(stat(name, &st), ENOENT);
	}
}

struct check_case {
	const char *name;
	void (*fn)(void);
};

static const struct check_case cases[] = {
	{ "enoent", case_enoent },
	{ "eexist", case_eexist },
	{ "dirs", case_dirs },
	{ "nametoolong", case_nametoolong },
	{ "rename", case_rename },
	{ "links", case_links },
	{ "xattr", case_xattr },
	{ "ctime", case_ctime },
	{ "dirtimes", case_dirtimes },
	{ "relink", case_relink },
	{ "sparse", case_sparse },
	{ "copy_range", case_copy_range },
	{ "rw", case_rw },
	{ "mmap", case_mmap },
	{ "times", case_times },
	{ "unprivileged", case_unprivileged },
	{ "many", case_statfs_readdir },
};

int main(int argc, char **argv)
{
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 99;
	}
	top = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		case_name = cases[i].name;
		case_failed = 0;
		snprintf(cwd_case, sizeof(cwd_case), "%s/%s", top, case_name);
		if (mkdir(cwd_case, 0755) < 0 || chmod(cwd_case, 0755) < 0 ||
		    chdir(cwd_case) < 0) {
			printf("FAIL %s: cannot use %s: %s\n", case_name,
			       cwd_case, strerror(errno));
			return 99;
		}
		cases[i].fn();
		if (chdir("/") < 0)
			return 99;
		if (case_failed)
			failures++;
		else
			printf("ok %s\n", case_name);
	}
	printf("%d of %zu cases failed\n", failures,
	       sizeof(cases) / sizeof(cases[0]));
	return failures ? 1 : 0;
}
