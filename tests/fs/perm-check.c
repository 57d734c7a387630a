// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * perm-check.c - a differential checker of POSIX modes, ownership,
 * permission checks and timestamp updates: every case runs the same
 * sequence of operations in a fresh subdirectory of a reference directory
 * (a plain local file system) and of the directory under test, records a
 * trace, and compares the two traces step by step.  Nothing is asserted
 * against a written expectation: the local file system is the expectation,
 * so the checker stays honest about what Linux really does (which set-ID
 * bits a write clears, which errno wins when two checks fail ...).
 *
 * Usage: perm-check REFDIR MNTDIR [REFRO MNTRO]
 * REFRO and MNTRO are optional read-only views of a prepared directory (a
 * file "f" 0644 holding "data", an empty dir "d" 0755, a symlink "l" -> f)
 * for the EROFS case; without them that case is skipped.
 *
 * A step records the call's result and errno and, when it names an object,
 * that object's lstat fields (type and mode with set-ID and sticky bits,
 * uid, gid, nlink, size; not a directory's size, which differs between
 * file systems).  A step may watch up to three paths: for each it records
 * whether ctime and mtime changed, never their values.  The checker must
 * start as root; cases switch to other users (65534 and 65533, with
 * supplementary group 65532 for the first) in forked children that append
 * to the same trace, which lives in shared memory.
 *
 * PERM_CHECK_VERBOSE=1 prints both traces in full, as "# ..." lines.
 *
 * Output: "ok CASE", or one "FAIL CASE STEP: ref=... mnt=..." line per
 * differing step.  Exit 0 when the traces agree, 1 when they do not, 99
 * when a directory cannot be used or a user switch fails.
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
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define UA	65534	/* user A, primary group GA, also in G2 */
#define GA	65534
#define UB	65533	/* user B, primary group GB, in no other group */
#define GB	65533
#define G2	65532	/* a supplementary group of A only */

#define MAX_STEPS	2048
#define LABEL_LEN	128
#define NWATCH		3

/* a watched path: how its ctime ('c') and mtime ('m') fared */
enum {
	W_NONE = 0,	/* not watched */
	W_SAME = '=',
	W_CHANGED = 'C',
	W_NEW = 'n',	/* absent before, present after */
	W_GONE = 'g',	/* present before, absent after */
	W_ABSENT = 'x',	/* absent before and after */
};

struct step {
	char what[LABEL_LEN];
	long ret;
	int err;		/* errno when ret < 0, else 0 */
	int has_st;		/* the step names an object */
	int st_err;		/* its lstat errno, 0 when it exists */
	unsigned int mode;
	unsigned int uid;
	unsigned int gid;
	unsigned long nlink;
	long long size;		/* -1 for a directory */
	char tc[NWATCH];	/* W_* per watched path */
	char tm[NWATCH];
};

struct trace {
	int n;
	int lost;		/* steps past MAX_STEPS */
	struct step s[MAX_STEPS];
};

struct cred {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[1];
};

static const struct cred user_a = { UA, GA, 1, { G2 } };
static const struct cred user_b = { UB, GB, 0, { 0 } };

/* traces are MAP_SHARED so that forked children append to them */
static struct trace *tr_ref, *tr_mnt, *tr;
static unsigned int cur_umask;
static char other_dir[PATH_MAX];	/* the other side's case dir */
static int hard_error;

static const char *errname(int e)
{
	const char *n = e ? strerrorname_np(e) : "0";

	return n ? n : "E?";
}

static void set_umask(unsigned int m)
{
	umask(m);
	cur_umask = m;
}

static struct step *step_new(void)
{
	if (tr->n >= MAX_STEPS) {
		tr->lost++;
		return NULL;
	}
	memset(&tr->s[tr->n], 0, sizeof(tr->s[0]));
	return &tr->s[tr->n++];
}

static void step_stat(struct step *s, const char *obj)
{
	struct stat st;

	s->has_st = 1;
	if (lstat(obj, &st) < 0) {
		s->st_err = errno;
		return;
	}
	s->mode = st.st_mode;
	s->uid = st.st_uid;
	s->gid = st.st_gid;
	s->nlink = st.st_nlink;
	s->size = S_ISDIR(st.st_mode) ? -1 : (long long)st.st_size;
}

static void record(const char *obj, long r, int e, int isfd,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * Append a step.  An fd's number says nothing about the file system, so
 * isfd folds every success to 0.
 */
static void record(const char *obj, long r, int e, int isfd,
		   const char *fmt, ...)
{
	struct step *s = step_new();
	va_list ap;
	int n;

	if (!s)
		return;
	va_start(ap, fmt);
	n = vsnprintf(s->what, sizeof(s->what), fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(s->what))
		n = sizeof(s->what) - 1;
	snprintf(s->what + n, sizeof(s->what) - n, " [uid %u umask %03o]",
		 (unsigned int)geteuid(), cur_umask);
	s->ret = r < 0 ? -1 : (isfd ? 0 : r);
	s->err = r < 0 ? e : 0;
	if (obj)
		step_stat(s, obj);
}

/* STEP(OBJ, CALL, FMT, ...): run CALL, record it, lstat OBJ (or NULL) */
#define STEP(obj, call, ...) ({						\
	errno = 0;							\
	long _r = (long)(call);						\
	int _e = errno;							\
	record(obj, _r, _e, 0, __VA_ARGS__);				\
	_r;								\
})

/* FSTEP: as STEP for a call that returns a file descriptor */
#define FSTEP(obj, call, ...) ({					\
	errno = 0;							\
	long _r = (long)(call);						\
	int _e = errno;							\
	record(obj, _r, _e, 1, __VA_ARGS__);				\
	(int)_r;							\
})

/*
 * Timestamps: watch() takes the "before" of up to three paths and sleeps
 * long enough for the kernel's coarse clock to tick; watched() takes the
 * "after" of the same slots (a slot may name the object's new path after
 * a rename) and stores the verdicts in the last recorded step.
 */
static struct {
	int exists[NWATCH];
	struct timespec c[NWATCH], m[NWATCH];
} wpre;

static void watch(const char *a, const char *b, const char *c)
{
	const char *p[NWATCH] = { a, b, c };
	struct stat st;
	int i;

	for (i = 0; i < NWATCH; i++) {
		wpre.exists[i] = p[i] && lstat(p[i], &st) == 0;
		if (wpre.exists[i]) {
			wpre.c[i] = st.st_ctim;
			wpre.m[i] = st.st_mtim;
		}
	}
	usleep(30000);
}

static char wcmp(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec ?
		W_SAME : W_CHANGED;
}

static void watched(const char *a, const char *b, const char *c)
{
	const char *p[NWATCH] = { a, b, c };
	struct step *s;
	struct stat st;
	int i, post;

	if (!tr->n || tr->lost)
		return;
	s = &tr->s[tr->n - 1];
	for (i = 0; i < NWATCH; i++) {
		if (!p[i])
			continue;
		post = lstat(p[i], &st) == 0;
		if (wpre.exists[i] && post) {
			s->tc[i] = wcmp(&wpre.c[i], &st.st_ctim);
			s->tm[i] = wcmp(&wpre.m[i], &st.st_mtim);
		} else {
			s->tc[i] = s->tm[i] = wpre.exists[i] ? W_GONE :
				post ? W_NEW : W_ABSENT;
		}
	}
}

/*
 * AS(CRED, UMASK) { ... }: run the block in a child with CRED's ids and
 * groups and UMASK; the parent waits for it.  The block must not return.
 */
static int as_begin(const struct cred *c, unsigned int um)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		printf("HARD fork: %s\n", strerror(errno));
		hard_error = 1;
		return 1;
	}
	if (pid == 0) {
		if (setgroups(c->ngroups, c->groups) < 0 ||
		    setresgid(c->gid, c->gid, c->gid) < 0 ||
		    setresuid(c->uid, c->uid, c->uid) < 0) {
			printf("HARD cannot become uid %u: %s\n",
			       (unsigned int)c->uid, strerror(errno));
			_exit(99);
		}
		set_umask(um);
		return 0;
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("HARD child as uid %u ended badly (status %#x)\n",
		       (unsigned int)c->uid, st);
		hard_error = 1;
	}
	return 1;
}

static void as_end(void)
{
	fflush(stdout);
	_exit(0);
}

#define AS(c, um) for (int _as = as_begin(c, um); !_as; _as = (as_end(), 1))

/* ---- step helpers: one call each, the object lstat-ed afterwards ---- */

static int s_creat(const char *p, unsigned int mode)
{
	int fd = FSTEP(p, open(p, O_WRONLY | O_CREAT | O_EXCL, mode),
		       "creat %s %04o", p, mode);

	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : 0;
}

static void s_mkdir(const char *p, unsigned int mode)
{
	STEP(p, mkdir(p, mode), "mkdir %s %04o", p, mode);
}

static void s_mkfifo(const char *p, unsigned int mode)
{
	STEP(p, mknod(p, S_IFIFO | mode, 0), "mknod fifo %s %04o", p, mode);
}

static void s_symlink(const char *target, const char *p)
{
	STEP(p, symlink(target, p), "symlink %s -> %s", p, target);
}

static void s_chmod(const char *p, unsigned int mode)
{
	STEP(p, chmod(p, mode), "chmod %s %04o", p, mode);
}

static void s_chown(const char *p, int uid, int gid)
{
	STEP(p, chown(p, uid, gid), "chown %s %d:%d", p, uid, gid);
}

static void s_unlink(const char *p)
{
	STEP(p, unlink(p), "unlink %s", p);
}

static void s_rmdir(const char *p)
{
	STEP(p, rmdir(p), "rmdir %s", p);
}

static void s_rename(const char *a, const char *b)
{
	STEP(b, rename(a, b), "rename %s %s", a, b);
}

static void s_link(const char *a, const char *b)
{
	STEP(b, link(a, b), "link %s %s", a, b);
}

static void s_truncate(const char *p, off_t len)
{
	STEP(p, truncate(p, len), "truncate %s %lld", p, (long long)len);
}

static void s_stat(const char *p)
{
	STEP(p, 0, "lstat %s", p);
}

/*
 * open with FLAGS (named by FN), write LEN bytes, close: three steps
 * (LEN at most 4096; O_DIRECT: 4096)
 */
static void s_write(const char *p, int flags, const char *fn, size_t len)
{
	static const char data[4096] __attribute__((aligned(4096))) =
		"0123456789abcdef0123456789abcdef";
	int fd;

	fd = FSTEP(p, open(p, flags), "open %s %s", p, fn);
	if (fd < 0)
		return;
	STEP(p, write(fd, data, len), "write %s %zu", p, len);
	STEP(p, close(fd), "close %s", p);
}

/* an existing file of LEN bytes, owned by UID:GID, with MODE (as root) */
static void s_file_owned(const char *p, size_t len, int uid, int gid,
			 unsigned int mode)
{
	if (s_creat(p, 0644) < 0)
		return;
	if (len)
		s_write(p, O_WRONLY, "O_WRONLY", len);
	s_chown(p, uid, gid);
	s_chmod(p, mode);
}

static void s_open(const char *p, int flags, const char *fn)
{
	int fd = FSTEP(p, open(p, flags, 0644), "open %s %s", p, fn);

	if (fd >= 0)
		close(fd);
}

/* ---- cases ---- */

static const unsigned int modes[] = { 0777, 0620, 04777, 02755, 01777 };
static const unsigned int umasks[] = { 0, 022, 077 };

static void create_all(const char *who, unsigned int um)
{
	char p[64];
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(p, sizeof(p), "f-%s-%03o-%04o", who, um, modes[i]);
		s_creat(p, modes[i]);
		snprintf(p, sizeof(p), "d-%s-%03o-%04o", who, um, modes[i]);
		s_mkdir(p, modes[i]);
		snprintf(p, sizeof(p), "p-%s-%03o-%04o", who, um, modes[i]);
		s_mkfifo(p, modes[i]);
		snprintf(p, sizeof(p), "l-%s-%03o-%04o", who, um, modes[i]);
		s_symlink("target", p);
	}
}

/* creation modes under each umask, as root and as another user */
static void case_create_modes(void)
{
	size_t u;

	s_chmod(".", 0777);
	for (u = 0; u < sizeof(umasks) / sizeof(umasks[0]); u++) {
		set_umask(umasks[u]);
		create_all("root", umasks[u]);
		AS(&user_a, umasks[u])
			create_all("a", umasks[u]);
	}
}

/* set-ID bits at creation */
static void case_setid_create(void)
{
	s_chmod(".", 0777);
	set_umask(0);
	s_creat("r4777", 04777);
	s_creat("r2777", 02777);
	s_creat("r6777", 06777);
	s_creat("r7777", 07777);
	s_mkdir("rd2777", 02777);
	s_mkdir("rd4777", 04777);
	s_mkdir("rd7777", 07777);
	s_mkfifo("rp6777", 06777);
	AS(&user_a, 0) {
		s_creat("a6777", 06777);
		s_mkdir("ad7777", 07777);
	}
	set_umask(022);
	s_creat("r6777u", 06777);
}

/* set-ID bits when a file is written */
static void case_setid_write(void)
{
	s_chmod(".", 0777);
	s_file_owned("w1", 0, UA, GA, 06777);
	AS(&user_b, 022)
		s_write("w1", O_WRONLY, "O_WRONLY", 1);
	s_file_owned("w2", 0, UA, GA, 02767);
	AS(&user_b, 022)
		s_write("w2", O_WRONLY, "O_WRONLY", 1);
	s_file_owned("w3", 4, UA, GA, 06777);
	AS(&user_b, 022)
		s_write("w3", O_WRONLY | O_APPEND, "O_WRONLY|O_APPEND", 1);
	s_file_owned("w4", 0, UA, GA, 06777);
	AS(&user_a, 022)
		s_write("w4", O_WRONLY, "O_WRONLY", 1);
	s_file_owned("w5", 0, UA, GA, 06777);
	s_write("w5", O_WRONLY, "O_WRONLY", 1);
	s_file_owned("w6", 0, UA, GA, 04777);
	AS(&user_b, 022)
		s_write("w6", O_WRONLY, "O_WRONLY", 0);
	s_file_owned("w7", 0, UA, G2, 06777);
	AS(&user_a, 022)
		s_write("w7", O_WRONLY, "O_WRONLY", 1);
	/* past the page cache, the same */
	s_file_owned("w8", 0, UA, GA, 06777);
	AS(&user_b, 022)
		s_write("w8", O_WRONLY | O_DIRECT, "O_WRONLY|O_DIRECT", 4096);
	s_file_owned("w9", 0, UA, GA, 02767);
	AS(&user_b, 022)
		s_write("w9", O_RDWR | O_DIRECT, "O_RDWR|O_DIRECT", 4096);
}

/* security.capability (v2: cap_net_raw, effective), set as root */
static void s_cap_set(const char *p)
{
	static const unsigned char v[20] = { 0x01, 0, 0, 0x02, 0, 0x20 };

	STEP(p, setxattr(p, "security.capability", v, sizeof(v), 0),
	     "setxattr %s security.capability", p);
}

static void s_cap_get(const char *p)
{
	char v[64];

	STEP(p, getxattr(p, "security.capability", v, sizeof(v)),
	     "getxattr %s security.capability", p);
}

/*
 * security.capability when a file is written: any write takes it away,
 * root's too, and so does one past the page cache (the mount may serve
 * O_DIRECT as direct I/O, where the kernel leaves that to the server)
 */
static void case_cap_write(void)
{
	s_chmod(".", 0777);
	s_file_owned("c1", 4096, UA, GA, 0666);
	s_cap_set("c1");
	AS(&user_b, 022)
		s_write("c1", O_WRONLY, "O_WRONLY", 1);
	s_cap_get("c1");
	s_file_owned("c2", 4096, UA, GA, 0666);
	s_cap_set("c2");
	AS(&user_b, 022)
		s_write("c2", O_WRONLY | O_DIRECT, "O_WRONLY|O_DIRECT", 4096);
	s_cap_get("c2");
	s_file_owned("c3", 4096, UA, GA, 0666);
	s_cap_set("c3");
	s_write("c3", O_RDWR | O_DIRECT, "O_RDWR|O_DIRECT", 4096);
	s_cap_get("c3");
	/* read only: it stays */
	s_file_owned("c4", 4096, UA, GA, 0666);
	s_cap_set("c4");
	s_open("c4", O_RDONLY | O_DIRECT, "O_RDONLY|O_DIRECT");
	s_cap_get("c4");
}

/* set-ID bits when a file is truncated */
static void case_setid_truncate(void)
{
	int fd;

	s_chmod(".", 0777);
	s_file_owned("t1", 8, UA, GA, 06777);
	AS(&user_b, 022)
		s_truncate("t1", 2);
	s_file_owned("t2", 8, UA, GA, 06777);
	AS(&user_b, 022)
		s_open("t2", O_WRONLY | O_TRUNC, "O_WRONLY|O_TRUNC");
	s_file_owned("t3", 8, UA, GA, 06777);
	AS(&user_b, 022) {
		fd = FSTEP("t3", open("t3", O_WRONLY), "open t3 O_WRONLY");
		if (fd >= 0) {
			STEP("t3", ftruncate(fd, 0), "ftruncate t3 0");
			close(fd);
		}
	}
	s_file_owned("t4", 8, UA, GA, 06777);
	s_truncate("t4", 2);
	s_file_owned("t5", 8, UA, GA, 04755);
	AS(&user_a, 022)
		s_truncate("t5", 20);
	s_file_owned("t6", 0, UA, GA, 06777);
	AS(&user_b, 022)
		s_truncate("t6", 0);
}

/* set-ID bits on chown and chgrp, by root and by the owner */
static void case_setid_chown(void)
{
	s_chmod(".", 0777);
	s_file_owned("c1", 0, UA, GA, 06777);
	s_chown("c1", UB, GB);
	s_file_owned("c2", 0, UA, GA, 06777);
	s_chown("c2", -1, -1);
	s_file_owned("c3", 0, UA, GA, 06777);
	AS(&user_a, 022)
		s_chown("c3", -1, G2);
	s_file_owned("c4", 0, UA, GA, 06777);
	AS(&user_a, 022) {
		s_chown("c4", -1, GB);
		s_chown("c4", UB, -1);
		s_chown("c4", UA, GA);
	}
	s_file_owned("c5", 0, UA, GA, 04755);
	AS(&user_a, 022)
		s_chown("c5", -1, G2);
	s_file_owned("c6", 0, UA, GA, 02745);
	s_chown("c6", UB, -1);
	s_mkdir("c7", 0755);
	s_chown("c7", UA, GA);
	s_chmod("c7", 06755);
	s_chown("c7", UB, GB);
	AS(&user_b, 022)
		s_chown("c7", -1, GB);
	/* the owner, not in the file's group, sets S_ISGID: silently lost */
	s_file_owned("c8", 0, UA, GB, 0644);
	AS(&user_a, 022) {
		s_chmod("c8", 02755);
		s_chmod("c8", 04755);
	}
	s_file_owned("c9", 0, UA, GA, 0644);
	AS(&user_b, 022)
		s_chmod("c9", 0777);
}

/* the sticky bit on directories */
static void case_sticky(void)
{
	s_mkdir("s", 0777);
	s_chmod("s", 01777);
	AS(&user_a, 022) {
		s_creat("s/fa", 0666);
		s_creat("s/fa2", 0644);
		s_mkdir("s/da", 0777);
	}
	AS(&user_b, 022) {
		s_creat("s/fb", 0644);
		s_creat("s/fb2", 0644);
		s_unlink("s/fa");
		s_rename("s/fa", "s/fx");
		s_rename("s/fb", "s/fa");
		s_rmdir("s/da");
		s_link("s/fa2", "s/lb");
		s_link("s/fa", "s/lb2");
		s_chmod("s/fa", 0600);
		s_creat("s/da/inside", 0644);
		s_rename("s/da/inside", "s/fa");
	}
	AS(&user_a, 022) {
		s_unlink("s/fa2");
		s_rename("s/fa", "s/fa3");
		s_unlink("s/fb");
		s_rename("s/fa3", "s/fb2");
	}
	s_unlink("s/fb");
	s_rename("s/fb2", "s/r");
	s_unlink("s/da/inside");
	s_rmdir("s/da");
	/* a sticky dir owned by B: B may remove A's entries */
	s_mkdir("t", 0777);
	s_chown("t", UB, GB);
	s_chmod("t", 01777);
	AS(&user_a, 022)
		s_creat("t/fa", 0644);
	AS(&user_b, 022)
		s_unlink("t/fa");
}

/* renaming a directory between parents as another user */
static void case_rename_dir(void)
{
	s_chmod(".", 0777);
	s_mkdir("p1", 0777);
	s_chmod("p1", 0777);
	s_mkdir("p2", 0777);
	s_chmod("p2", 0777);
	s_mkdir("p3", 0755);
	AS(&user_a, 022) {
		s_mkdir("p1/da", 0755);
		s_creat("p1/fa", 0644);
	}
	s_mkdir("p1/dr", 0755);
	s_mkdir("p1/dw", 0777);
	s_chmod("p1/dw", 0777);
	s_creat("p1/fr", 0644);
	s_mkdir("p2/empty", 0755);
	AS(&user_a, 022) {
		s_rename("p1/da", "p2/da");
		s_stat("p1");
		s_stat("p2");
		s_rename("p2/da", "p3/da");
		s_rename("p1/dr", "p2/dr");
		s_rename("p1/dr", "p1/dr2");
		s_rename("p1/dw", "p2/dw");
		s_rename("p1/fr", "p2/fr");
		s_rename("p2/da", "p2/da/sub");
		s_rename("p2/da", "p2/empty");
		s_rename("p2/empty", "p1/da");
	}
	s_chmod("p1", 01777);
	AS(&user_a, 022) {
		s_rename("p1/dr2", "p2/dr2");
		s_rename("p1/da", "p2/da");
	}
	s_stat("p1");
	s_stat("p2");
}

/* group inheritance in set-group-ID directories */
static void case_setgid_dir(void)
{
	s_mkdir("g", 0777);
	s_chown("g", 0, G2);
	s_chmod("g", 02777);
	set_umask(0);
	s_creat("g/fr", 0644);
	s_creat("g/fr2", 02755);
	s_mkdir("g/sd", 0755);
	s_mkdir("g/sd/sub", 0700);
	s_mkfifo("g/pr", 0644);
	s_symlink("x", "g/lr");
	AS(&user_a, 0) {
		s_creat("g/fa", 02755);
		s_mkdir("g/da", 0755);
	}
	AS(&user_b, 0) {
		s_creat("g/fb", 02755);
		s_creat("g/fb2", 0644);
		s_mkdir("g/db", 0755);
		s_mkdir("g/db2", 02700);
		s_mkfifo("g/pb", 02755);
		s_symlink("x", "g/lb");
		s_creat("g/sd/sub/deny", 0644);
		s_chmod("g/fb2", 02755);
	}
	s_chmod("g/sd", 02777);
	AS(&user_b, 0) {
		s_creat("g/sd/fb", 02755);
		s_mkdir("g/sd/db", 0755);
	}
	/* clearing S_ISGID on the dir stops the inheritance */
	s_chmod("g", 0777);
	AS(&user_b, 0)
		s_creat("g/after", 0644);
	set_umask(022);
}

/* ctime and mtime of the object and its parents, per operation */
static void case_times(void)
{
	struct timespec ts[2] = { { 1000, 0 }, { 2000, 0 } };
	struct timespec omit[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
	char buf[8];
	int fd;

	s_mkdir("p1", 0777);
	s_mkdir("p2", 0777);

	watch("p1", NULL, NULL);
	s_creat("p1/f", 0644);
	watched("p1", NULL, NULL);

	watch("p1/f", "p1", NULL);
	s_write("p1/f", O_WRONLY, "O_WRONLY", 4);
	watched("p1/f", "p1", NULL);

	watch("p1/f", NULL, NULL);
	s_write("p1/f", O_WRONLY, "O_WRONLY", 0);
	watched("p1/f", NULL, NULL);

	watch("p1/f", "p1", NULL);
	s_truncate("p1/f", 2);
	watched("p1/f", "p1", NULL);

	watch("p1/f", NULL, NULL);
	s_truncate("p1/f", 2);
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	s_open("p1/f", O_WRONLY | O_TRUNC, "O_WRONLY|O_TRUNC");
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	s_open("p1/f", O_WRONLY | O_TRUNC, "O_WRONLY|O_TRUNC (empty)");
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	s_open("p1/f", O_RDONLY, "O_RDONLY");
	watched("p1/f", NULL, NULL);

	fd = open("p1/f", O_WRONLY);
	watch("p1/f", NULL, NULL);
	STEP("p1/f", fd < 0 ? -1 : posix_fallocate(fd, 0, 100) ? -1 : 0,
	     "posix_fallocate p1/f 0 100");
	watched("p1/f", NULL, NULL);
	if (fd >= 0)
		close(fd);

	fd = open("p1/f", O_RDONLY);
	watch("p1/f", NULL, NULL);
	STEP("p1/f", fd < 0 ? -1 : read(fd, buf, sizeof(buf)), "read p1/f 8");
	watched("p1/f", NULL, NULL);
	if (fd >= 0)
		close(fd);

	watch("p1/f", "p1", NULL);
	s_chmod("p1/f", 0600);
	watched("p1/f", "p1", NULL);

	watch("p1/f", NULL, NULL);
	s_chmod("p1/f", 0600);
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	s_chown("p1/f", UA, GA);
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	s_chown("p1/f", -1, -1);
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	STEP("p1/f", utimensat(AT_FDCWD, "p1/f", NULL, 0),
	     "utimensat p1/f now");
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	STEP("p1/f", utimensat(AT_FDCWD, "p1/f", ts, 0),
	     "utimensat p1/f 1000 2000");
	watched("p1/f", NULL, NULL);

	watch("p1/f", NULL, NULL);
	STEP("p1/f", utimensat(AT_FDCWD, "p1/f", omit, 0),
	     "utimensat p1/f omit omit");
	watched("p1/f", NULL, NULL);

	s_chmod("p1/f", 0666);
	AS(&user_b, 022) {
		watch("p1/f", NULL, NULL);
		STEP("p1/f", utimensat(AT_FDCWD, "p1/f", NULL, 0),
		     "utimensat p1/f now (writable, not owner)");
		watched("p1/f", NULL, NULL);
	}

	watch("p1/f", "p1", NULL);
	STEP("p1/f", setxattr("p1/f", "user.t", "v", 1, 0),
	     "setxattr p1/f user.t");
	watched("p1/f", "p1", NULL);

	watch("p1/f", NULL, NULL);
	STEP("p1/f", removexattr("p1/f", "user.t"), "removexattr p1/f user.t");
	watched("p1/f", NULL, NULL);

	watch("p1/f", "p2", "p1");
	s_link("p1/f", "p2/h");
	watched("p1/f", "p2", "p1");

	watch("p1/f", "p2", NULL);
	s_unlink("p2/h");
	watched("p1/f", "p2", NULL);

	watch("p1", NULL, NULL);
	s_symlink("f", "p1/s");
	watched("p1", NULL, NULL);

	watch("p1", NULL, NULL);
	s_mkfifo("p1/q", 0644);
	watched("p1", NULL, NULL);

	watch("p1", NULL, NULL);
	s_mkdir("p1/d", 0755);
	watched("p1", NULL, NULL);
	s_stat("p1");

	watch("p1/f", "p1", NULL);
	s_rename("p1/f", "p1/g");
	watched("p1/g", "p1", NULL);

	watch("p1/g", "p1", "p2");
	s_rename("p1/g", "p2/g");
	watched("p2/g", "p1", "p2");

	watch("p1/d", "p1", "p2");
	s_rename("p1/d", "p2/d");
	watched("p2/d", "p1", "p2");
	s_stat("p1");
	s_stat("p2");

	s_creat("p2/t", 0644);
	s_link("p2/t", "p1/tl");
	watch("p1/tl", "p2", "p2/g");
	s_rename("p2/g", "p2/t");
	watched("p1/tl", "p2", "p2/t");
	s_stat("p1/tl");

	s_creat("p2/x", 0644);
	watch("p1/tl", "p2/x", "p2");
	STEP("p1/tl", renameat2(AT_FDCWD, "p1/tl", AT_FDCWD, "p2/x",
				RENAME_EXCHANGE),
	     "renameat2 p1/tl p2/x RENAME_EXCHANGE");
	watched("p2/x", "p1/tl", "p2");

	watch("p1", NULL, NULL);
	STEP("p2/x", renameat2(AT_FDCWD, "p1/tl", AT_FDCWD, "p2/x",
			       RENAME_NOREPLACE),
	     "renameat2 p1/tl p2/x RENAME_NOREPLACE");
	watched("p1", NULL, NULL);

	watch("p2", NULL, NULL);
	s_unlink("p2/t");
	watched("p2", NULL, NULL);

	watch("p2", NULL, NULL);
	s_rmdir("p2/d");
	watched("p2", NULL, NULL);
	s_stat("p2");

	watch("p1", NULL, NULL);
	s_chmod("p1", 0755);
	watched("p1", NULL, NULL);

	watch("p1", NULL, NULL);
	s_unlink("p1/nonexistent");
	watched("p1", NULL, NULL);
}

static void fill_name(char *buf, char c, size_t len)
{
	memset(buf, c, len);
	buf[len] = '\0';
}

/* ENAMETOOLONG at NAME_MAX + 1 and at PATH_MAX */
static void case_nametoolong(void)
{
	static char n255[NAME_MAX + 1], m255[NAME_MAX + 1];
	static char n256[NAME_MAX + 2], x255[NAME_MAX + 1];
	static char deep[PATH_MAX + 64], target[PATH_MAX + 2];
	char xname[NAME_MAX + 8];
	size_t len;
	int i, fd;

	fill_name(n255, 'a', NAME_MAX);
	fill_name(m255, 'b', NAME_MAX);
	fill_name(x255, 'c', NAME_MAX);
	fill_name(n256, 'z', NAME_MAX + 1);

	fd = FSTEP(n255, open(n255, O_WRONLY | O_CREAT | O_EXCL, 0644),
		   "creat a*255");
	if (fd >= 0)
		close(fd);
	STEP(m255, mkdir(m255, 0755), "mkdir b*255");
	STEP(x255, symlink(n255, x255), "symlink c*255 -> a*255");
	STEP(n256, rename(x255, n256), "rename c*255 z*256");
	STEP(n256, link(n255, n256), "link a*255 z*256");
	STEP(n256, symlink("t", n256), "symlink z*256 -> t");
	fd = FSTEP(n256, open(n256, O_WRONLY | O_CREAT, 0644), "creat z*256");
	if (fd >= 0)
		close(fd);
	STEP(n256, mkdir(n256, 0755), "mkdir z*256");
	STEP(n256, mknod(n256, S_IFIFO | 0644, 0), "mknod z*256");
	STEP(n256, unlink(n256), "unlink z*256");
	STEP(n256, rmdir(n256), "rmdir z*256");
	STEP(n256, chmod(n256, 0644), "chmod z*256");

	memcpy(xname, "user.", 5);
	fill_name(xname + 5, 'k', XATTR_NAME_MAX - 5);
	STEP(n255, setxattr(n255, xname, "v", 1, 0), "setxattr name 255");
	fill_name(xname + 5, 'k', XATTR_NAME_MAX - 4);
	STEP(n255, setxattr(n255, xname, "v", 1, 0), "setxattr name 256");

	/* 16 levels of 250-byte names: a path of 4016 bytes, then a name */
	len = 0;
	for (i = 0; i < 16; i++) {
		if (i)
			deep[len++] = '/';
		memset(deep + len, 'd', 250);
		len += 250;
		deep[len] = '\0';
		STEP(deep, mkdir(deep, 0755), "mkdir deep level %d (%zu)", i,
		     len);
	}
	deep[len++] = '/';
	fill_name(deep + len, 'e', PATH_MAX - 1 - len);
	fd = FSTEP(deep, open(deep, O_WRONLY | O_CREAT, 0644),
		   "creat deep path of %d bytes", PATH_MAX - 1);
	if (fd >= 0)
		close(fd);
	STEP(deep, 0, "lstat deep path of %d bytes", PATH_MAX - 1);
	STEP(deep, unlink(deep), "unlink deep path of %d bytes", PATH_MAX - 1);
	STEP(deep, mkdir(deep, 0755), "mkdir deep path of %d bytes",
	     PATH_MAX - 1);
	STEP(deep, rmdir(deep), "rmdir deep path of %d bytes", PATH_MAX - 1);
	fill_name(deep + len, 'e', PATH_MAX - len);
	fd = FSTEP(NULL, open(deep, O_WRONLY | O_CREAT, 0644),
		   "creat deep path of %d bytes", PATH_MAX);
	if (fd >= 0)
		close(fd);
	STEP(NULL, mkdir(deep, 0755), "mkdir deep path of %d bytes", PATH_MAX);

	/* a short path whose target is as long as a symlink may be */
	fill_name(target, 't', PATH_MAX - 1);
	STEP("lmax", symlink(target, "lmax"), "symlink lmax -> t*%d",
	     PATH_MAX - 1);
	STEP("lmax", readlink("lmax", deep, PATH_MAX), "readlink lmax");
	fill_name(target, 't', PATH_MAX);
	STEP("lover", symlink(target, "lover"), "symlink lover -> t*%d",
	     PATH_MAX);
}

/* EACCES: search, write and open permission */
static void case_eacces(void)
{
	s_chmod(".", 0777);
	s_mkdir("ns", 0755);
	s_creat("ns/f", 0644);
	s_chmod("ns", 0666);
	s_mkdir("nw", 0755);
	s_creat("nw/f", 0666);
	s_mkdir("nw/d", 0777);
	s_chmod("nw", 0555);
	s_file_owned("ro", 4, UA, GA, 0444);
	s_file_owned("wo", 4, 0, 0, 0200);
	s_creat("r444", 0444);
	AS(&user_a, 022) {
		s_stat("ns/f");
		s_open("ns/f", O_RDONLY, "O_RDONLY");
		s_creat("ns/new", 0644);
		if (STEP(NULL, chdir("ns"), "chdir ns") == 0 &&
		    chdir("..") < 0)
			_exit(99);
		s_creat("nw/new", 0644);
		s_mkdir("nw/newd", 0755);
		s_mkfifo("nw/newp", 0644);
		s_symlink("x", "nw/newl");
		s_link("ro", "nw/newh");
		s_unlink("nw/f");
		s_rmdir("nw/d");
		s_rename("nw/f", "nw/g");
		s_rename("nw/f", "moved");
		s_rename("ro", "nw/ro");
		s_creat("nw/d/ok", 0644);
		s_open("nw/f", O_WRONLY, "O_WRONLY");
		s_open("ro", O_WRONLY, "O_WRONLY");
		s_open("ro", O_RDWR, "O_RDWR");
		s_open("ro", O_RDONLY | O_TRUNC, "O_RDONLY|O_TRUNC");
		s_truncate("ro", 0);
		STEP("ro", access("ro", W_OK), "access ro W_OK");
		STEP("ro", access("ro", R_OK), "access ro R_OK");
		s_open("wo", O_RDONLY, "O_RDONLY");
		s_open("wo", O_WRONLY, "O_WRONLY");
		s_open("r444", O_RDONLY, "O_RDONLY");
		s_open("r444", O_WRONLY, "O_WRONLY");
		STEP("r444", utimensat(AT_FDCWD, "r444", NULL, 0),
		     "utimensat r444 now (not owner, not writable)");
	}
	/* root passes every one of these */
	s_open("ro", O_WRONLY, "O_WRONLY");
	s_open("r444", O_RDWR, "O_RDWR");
	s_stat("ns/f");
	s_creat("nw/rootnew", 0644);
	s_chmod("ns", 0000);
	s_stat("ns/f");
	STEP("ro", access("ro", W_OK), "access ro W_OK");
	STEP("ro", access("ro", X_OK), "access ro X_OK");
}

/* EPERM: what only the owner (or root) may do */
static void case_eperm(void)
{
	struct timespec ts[2] = { { 1000, 0 }, { 2000, 0 } };

	s_chmod(".", 0777);
	s_creat("rootf", 0644);
	s_creat("rootw", 0666);
	s_chmod("rootw", 0666);
	s_creat("secret", 0600);
	AS(&user_a, 022) {
		s_creat("af", 0644);
		s_chown("rootf", UA, -1);
		s_chown("rootf", -1, GA);
		s_chmod("rootf", 0777);
		s_chown("af", UB, -1);
		s_chown("af", -1, GB);
		s_chown("af", -1, G2);
		s_chown("af", UA, GA);
		STEP("rootw", utimensat(AT_FDCWD, "rootw", ts, 0),
		     "utimensat rootw 1000 2000 (not owner)");
		STEP("rootw", utimensat(AT_FDCWD, "rootw", NULL, 0),
		     "utimensat rootw now (not owner, writable)");
		s_link("secret", "hsecret");
		s_link("rootf", "hrootf");
		s_link("rootw", "hrootw");
		STEP("rootw", setxattr("rootw", "trusted.t", "v", 1, 0),
		     "setxattr rootw trusted.t");
		STEP("af", setxattr("af", "trusted.t", "v", 1, 0),
		     "setxattr af trusted.t");
		STEP("rootf", setxattr("rootf", "user.t", "v", 1, 0),
		     "setxattr rootf user.t (not writable)");
		STEP("rootw", setxattr("rootw", "user.t", "v", 1, 0),
		     "setxattr rootw user.t (writable)");
		s_mkfifo("afifo", 0644);
		STEP("achr", mknod("achr", S_IFCHR | 0644, makedev(1, 3)),
		     "mknod achr c 1 3");
	}
	AS(&user_b, 022) {
		s_chmod("af", 0777);
		s_chown("af", UB, GB);
		s_unlink("af");
	}
	s_chown("af", UB, GB);
	s_chmod("af", 0700);
}

/* EROFS in a read-only view: runs in REFRO and MNTRO directly */
static void case_erofs(void)
{
	struct statvfs sv;
	int r;

	r = statvfs(".", &sv);
	STEP(NULL, r < 0 ? -1 : !!(sv.f_flag & ST_RDONLY), "statvfs ST_RDONLY");
	s_stat("f");
	s_stat("d");
	s_stat("l");
	s_open("f", O_RDONLY, "O_RDONLY");
	s_open("f", O_RDONLY | O_CREAT, "O_RDONLY|O_CREAT");
	s_open("f", O_RDONLY | O_CREAT | O_EXCL, "O_RDONLY|O_CREAT|O_EXCL");
	s_open("f", O_WRONLY, "O_WRONLY");
	s_open("f", O_RDWR, "O_RDWR");
	s_open("f", O_RDONLY | O_TRUNC, "O_RDONLY|O_TRUNC");
	s_open("new", O_WRONLY | O_CREAT, "O_WRONLY|O_CREAT");
	s_open("new", O_RDONLY | O_CREAT, "O_RDONLY|O_CREAT");
	s_mkdir("newd", 0755);
	s_mkdir("d", 0755);
	s_mkfifo("newp", 0644);
	s_symlink("f", "newl");
	s_link("f", "newh");
	s_unlink("f");
	s_unlink("nonexistent");
	s_rmdir("d");
	s_rename("f", "g");
	s_rename("f", "d/f");
	s_chmod("f", 0600);
	s_chown("f", UA, GA);
	s_truncate("f", 0);
	STEP("f", utimensat(AT_FDCWD, "f", NULL, 0), "utimensat f now");
	STEP("f", setxattr("f", "user.t", "v", 1, 0), "setxattr f user.t");
	STEP("f", access("f", W_OK), "access f W_OK");
	STEP("f", access("f", R_OK), "access f R_OK");
	AS(&user_a, 022) {
		s_open("f", O_WRONLY, "O_WRONLY");
		s_open("new", O_WRONLY | O_CREAT, "O_WRONLY|O_CREAT");
		STEP("f", access("f", W_OK), "access f W_OK");
	}
}

/* ENOTEMPTY and its neighbours */
static void case_enotempty(void)
{
	s_mkdir("full", 0755);
	s_creat("full/f", 0644);
	s_mkdir("full2", 0755);
	s_mkdir("full2/sub", 0755);
	s_mkdir("empty", 0755);
	s_mkdir("empty2", 0755);
	s_creat("file", 0644);
	s_rmdir("full");
	s_rmdir("full2");
	s_rename("empty", "full");
	s_rename("empty", "full2");
	s_rename("full", "empty2");
	s_rename("file", "empty");
	s_rename("empty", "file");
	s_rmdir("file");
	s_rmdir(".");
	s_rmdir("empty/.");
	s_rmdir("empty/..");
	s_unlink("empty");
	s_rename("empty", "empty/sub");
	s_rename("empty", "empty");
	s_rename("file", "file");
	s_rmdir("empty");
	s_stat("empty2");
	s_stat(".");
}

static void prep_exdev(void)
{
	close(open("xsrc", O_WRONLY | O_CREAT, 0644));
}

/*
 * EXDEV between this side and the other, in both directions.  When both
 * are one file system (the self-check of two plain directories) the calls
 * succeed: each is undone at once, unrecorded, so that neither run sees
 * the other's files move.
 */
static void case_exdev(void)
{
	char o_src[PATH_MAX + 16], o_dst[PATH_MAX + 16];

	snprintf(o_src, sizeof(o_src), "%s/xsrc", other_dir);
	snprintf(o_dst, sizeof(o_dst), "%s/xdst", other_dir);
	s_creat("own", 0644);
	if (STEP("own", rename("own", o_dst), "rename own OTHER/xdst") == 0 &&
	    rename(o_dst, "own") < 0)
		_exit(99);
	if (STEP("own", link("own", o_dst), "link own OTHER/xdst") == 0 &&
	    unlink(o_dst) < 0)
		_exit(99);
	if (STEP("own", renameat2(AT_FDCWD, "own", AT_FDCWD, o_src,
				  RENAME_EXCHANGE),
		 "renameat2 own OTHER/xsrc RENAME_EXCHANGE") == 0 &&
	    renameat2(AT_FDCWD, "own", AT_FDCWD, o_src, RENAME_EXCHANGE) < 0)
		_exit(99);
	if (STEP("xdst", rename(o_src, "xdst"), "rename OTHER/xsrc xdst") == 0 &&
	    rename("xdst", o_src) < 0)
		_exit(99);
	if (STEP("xdst", link(o_src, "xdst"), "link OTHER/xsrc xdst") == 0 &&
	    unlink("xdst") < 0)
		_exit(99);
	s_stat("xsrc");
	s_stat("own");
}

/* ELOOP: O_NOFOLLOW on a symlink, loops, and the 40-link limit */
static void case_eloop(void)
{
	char a[16], b[16];
	int i, fd;

	s_creat("f", 0644);
	s_symlink("f", "l");
	s_open("l", O_RDONLY | O_NOFOLLOW, "O_RDONLY|O_NOFOLLOW");
	s_open("l", O_WRONLY | O_CREAT | O_NOFOLLOW,
	       "O_WRONLY|O_CREAT|O_NOFOLLOW");
	fd = FSTEP("l", open("l", O_PATH | O_NOFOLLOW), "open l O_PATH|O_NOFOLLOW");
	if (fd >= 0)
		close(fd);
	s_open("l", O_RDONLY, "O_RDONLY");
	s_open("l", O_WRONLY | O_CREAT | O_EXCL, "O_WRONLY|O_CREAT|O_EXCL");
	s_symlink("b", "a");
	s_symlink("a", "b");
	s_symlink("self", "self");
	s_open("a", O_RDONLY, "O_RDONLY");
	s_open("self", O_RDONLY, "O_RDONLY");
	s_open("a", O_WRONLY | O_CREAT, "O_WRONLY|O_CREAT");
	STEP("a", stat("a", &(struct stat){ 0 }), "stat a");
	STEP("a", chmod("a", 0600), "chmod a");
	s_mkdir("a", 0755);
	STEP("a/x", mkdir("a/x", 0755), "mkdir a/x");
	s_symlink("missing", "dangling");
	s_open("dangling", O_WRONLY | O_CREAT, "O_WRONLY|O_CREAT");
	s_stat("missing");
	s_mkdir("dangling", 0755);
	s_stat("l/");
	STEP("l", stat("l/", &(struct stat){ 0 }), "stat l/");
	/* c0 -> f, ci -> c(i-1): opening c39 follows 40 links, c40 41 */
	s_symlink("f", "c0");
	for (i = 1; i <= 40; i++) {
		snprintf(a, sizeof(a), "c%d", i);
		snprintf(b, sizeof(b), "c%d", i - 1);
		STEP(a, symlink(b, a), "symlink %s -> %s", a, b);
	}
	s_open("c39", O_RDONLY, "O_RDONLY");
	s_open("c40", O_RDONLY, "O_RDONLY");
	s_stat("c40");
}

/*
 * POSIX ACLs, set as the raw system.posix_acl_* xattrs (the kernel's
 * format: a version, then sorted {tag, perm, id} entries): an entry
 * grants a named user what the mode does not, or denies what "other"
 * would allow; a directory's default ACL is inherited by what is made in
 * it, with the umask ignored there; chmod moves the mask; removing the
 * ACL leaves the mode.
 */
#define ACL_UOBJ	0x01
#define ACL_U		0x02
#define ACL_GOBJ	0x04
#define ACL_MASKT	0x10
#define ACL_OTH		0x20

static int s_acl(const char *p, const char *which, const unsigned int *e,
		 int n)
{
	unsigned char buf[4 + 8 * 8];
	int i;

	buf[0] = 2;
	buf[1] = buf[2] = buf[3] = 0;
	for (i = 0; i < n && i < 8; i++) {
		unsigned char *q = buf + 4 + 8 * i;
		unsigned int id = e[3 * i + 2];

		q[0] = (unsigned char)e[3 * i];
		q[1] = (unsigned char)(e[3 * i] >> 8);
		q[2] = (unsigned char)e[3 * i + 1];
		q[3] = 0;
		q[4] = (unsigned char)id;
		q[5] = (unsigned char)(id >> 8);
		q[6] = (unsigned char)(id >> 16);
		q[7] = (unsigned char)(id >> 24);
	}
	return STEP(p, setxattr(p, which, buf, 4 + 8 * (size_t)i, 0),
		    "setxattr %s %s", p, which);
}

static void case_acl(void)
{
	const unsigned int none = 0xffffffffu;
	const unsigned int grant[] = {
		ACL_UOBJ, 6, none, ACL_U, 4, UA, ACL_GOBJ, 0, none,
		ACL_MASKT, 4, none, ACL_OTH, 0, none,
	};
	const unsigned int deny[] = {
		ACL_UOBJ, 6, none, ACL_U, 0, UA, ACL_GOBJ, 4, none,
		ACL_MASKT, 4, none, ACL_OTH, 4, none,
	};
	const unsigned int dflt[] = {
		ACL_UOBJ, 7, none, ACL_U, 7, UB, ACL_GOBJ, 5, none,
		ACL_MASKT, 7, none, ACL_OTH, 5, none,
	};

	s_chmod(".", 0777);
	s_file_owned("grant", 4, 0, 0, 0600);
	s_file_owned("deny", 4, 0, 0, 0644);
	s_mkdir("dacl", 0777);
	s_chmod("dacl", 0777);
	/* no ACLs here: the rest is moot, and the same on both sides */
	if (s_acl("grant", "system.posix_acl_access", grant, 5) < 0)
		return;
	s_acl("deny", "system.posix_acl_access", deny, 5);
	s_acl("dacl", "system.posix_acl_default", dflt, 5);
	AS(&user_a, 022) {
		s_open("grant", O_RDONLY, "O_RDONLY");
		s_open("grant", O_WRONLY, "O_WRONLY");
		s_open("deny", O_RDONLY, "O_RDONLY");
		s_creat("dacl/fa", 0666);
		s_mkdir("dacl/da", 0777);
		s_creat("dacl/da/inner", 0666);
	}
	AS(&user_b, 077) {
		s_open("grant", O_RDONLY, "O_RDONLY");
		s_open("deny", O_RDONLY, "O_RDONLY");
		s_creat("dacl/fb", 0666);
		s_mkdir("dacl/db", 0777);
		s_open("dacl/fa", O_RDWR, "O_RDWR");
	}
	s_chmod("grant", 0600);
	AS(&user_a, 022) {
		s_open("grant", O_RDONLY, "O_RDONLY (mask ---)");
	}
	s_chmod("grant", 0640);
	STEP("grant", removexattr("grant", "system.posix_acl_access"),
	     "removexattr grant system.posix_acl_access");
	AS(&user_a, 022) {
		s_open("grant", O_RDONLY, "O_RDONLY (no ACL)");
	}
}

struct check_case {
	const char *name;
	void (*fn)(void);
	void (*prep)(void);	/* in both case dirs before either run */
	int ro;			/* runs in the read-only views */
};

static const struct check_case cases[] = {
	{ "create_modes", case_create_modes, NULL, 0 },
	{ "setid_create", case_setid_create, NULL, 0 },
	{ "setid_write", case_setid_write, NULL, 0 },
	{ "cap_write", case_cap_write, NULL, 0 },
	{ "setid_truncate", case_setid_truncate, NULL, 0 },
	{ "setid_chown", case_setid_chown, NULL, 0 },
	{ "sticky", case_sticky, NULL, 0 },
	{ "rename_dir", case_rename_dir, NULL, 0 },
	{ "setgid_dir", case_setgid_dir, NULL, 0 },
	{ "times", case_times, NULL, 0 },
	{ "nametoolong", case_nametoolong, NULL, 0 },
	{ "eacces", case_eacces, NULL, 0 },
	{ "eperm", case_eperm, NULL, 0 },
	{ "erofs", case_erofs, NULL, 1 },
	{ "enotempty", case_enotempty, NULL, 0 },
	{ "exdev", case_exdev, prep_exdev, 0 },
	{ "eloop", case_eloop, NULL, 0 },
	{ "acl", case_acl, NULL, 0 },
};

/* ---- comparison ---- */

static void step_fmt(const struct step *s, char *buf, size_t len)
{
	size_t n;
	int i;

	if (!s) {
		snprintf(buf, len, "(no such step)");
		return;
	}
	if (s->ret < 0)
		n = snprintf(buf, len, "-1 %s", errname(s->err));
	else
		n = snprintf(buf, len, "%ld", s->ret);
	if (s->has_st && n < len) {
		if (s->st_err)
			n += snprintf(buf + n, len - n, " lstat %s",
				      errname(s->st_err));
		else
			n += snprintf(buf + n, len - n,
				      " mode %07o uid %u gid %u nlink %lu "
				      "size %lld", s->mode, s->uid, s->gid,
				      s->nlink, s->size);
	}
	for (i = 0; i < NWATCH && n < len; i++) {
		if (s->tc[i] == W_NONE)
			continue;
		n += snprintf(buf + n, len - n, " w%d c%c m%c", i, s->tc[i],
			      s->tm[i]);
	}
}

static int step_same(const struct step *a, const struct step *b)
{
	if (a->ret != b->ret || a->err != b->err)
		return 0;
	if (a->has_st != b->has_st || a->st_err != b->st_err)
		return 0;
	if (a->has_st && !a->st_err &&
	    (a->mode != b->mode || a->uid != b->uid || a->gid != b->gid ||
	     a->nlink != b->nlink || a->size != b->size))
		return 0;
	return !memcmp(a->tc, b->tc, sizeof(a->tc)) &&
	       !memcmp(a->tm, b->tm, sizeof(a->tm));
}

/*
 * PERM_CHECK_KNOWN="case:step ...": differences known and explained where
 * the list is set.  Such a step is printed as KNOWN and not counted; a
 * known step that no longer differs counts, so the list cannot go stale.
 */
static int known(const char *name, int step)
{
	const char *k = getenv("PERM_CHECK_KNOWN");
	char want[128];
	size_t n;

	if (!k)
		return 0;
	n = (size_t)snprintf(want, sizeof(want), "%s:%d", name, step);
	while ((k = strstr(k, want))) {
		if ((k == getenv("PERM_CHECK_KNOWN") || k[-1] == ' ') &&
		    (k[n] == ' ' || k[n] == '\0'))
			return 1;
		k += n;
	}
	return 0;
}

/* print a FAIL line per differing step; returns the count */
static int compare(const char *name)
{
	char fr[256], fm[256];
	const struct step *r, *m;
	int i, n, diffs = 0;

	if (tr_ref->lost || tr_mnt->lost) {
		printf("FAIL %s: more than %d steps\n", name, MAX_STEPS);
		return 1;
	}
	n = tr_ref->n > tr_mnt->n ? tr_ref->n : tr_mnt->n;
	for (i = 0; i < n; i++) {
		r = i < tr_ref->n ? &tr_ref->s[i] : NULL;
		m = i < tr_mnt->n ? &tr_mnt->s[i] : NULL;
		if (r && m && strcmp(r->what, m->what)) {
			printf("FAIL %s %d: traces out of step: ref \"%s\", "
			       "mnt \"%s\"\n", name, i, r->what, m->what);
			return diffs + 1;
		}
		if (r && m && step_same(r, m)) {
			if (known(name, i)) {
				printf("FAIL %s %d %s: listed as a known "
				       "difference, but it agrees now\n",
				       name, i, r->what);
				diffs++;
			}
			continue;
		}
		step_fmt(r, fr, sizeof(fr));
		step_fmt(m, fm, sizeof(fm));
		if (known(name, i)) {
			printf("KNOWN %s %d %s: ref=%s mnt=%s\n", name, i,
			       (r ? r : m)->what, fr, fm);
			continue;
		}
		printf("FAIL %s %d %s: ref=%s mnt=%s\n", name, i,
		       (r ? r : m)->what, fr, fm);
		diffs++;
	}
	return diffs;
}

/* PERM_CHECK_VERBOSE: both traces, to read what the reference does */
static void dump(const char *name)
{
	char fr[256], fm[256];
	int i;

	for (i = 0; i < tr_ref->n || i < tr_mnt->n; i++) {
		step_fmt(i < tr_ref->n ? &tr_ref->s[i] : NULL, fr, sizeof(fr));
		step_fmt(i < tr_mnt->n ? &tr_mnt->s[i] : NULL, fm, sizeof(fm));
		printf("# %s %d %s: ref=%s mnt=%s\n", name, i,
		       i < tr_ref->n ? tr_ref->s[i].what : tr_mnt->s[i].what,
		       fr, fm);
	}
}

static int case_dir(char *out, size_t len, const char *top, const char *name)
{
	if (snprintf(out, len, "%s/%s", top, name) >= (int)len)
		return -ENAMETOOLONG;
	set_umask(022);
	if (mkdir(out, 0755) < 0 || chmod(out, 0755) < 0) {
		printf("HARD cannot make %s: %s\n", out, strerror(errno));
		return -1;
	}
	return 0;
}

static int run_side(const struct check_case *c, struct trace *t,
		    const char *dir, const char *other)
{
	memset(t, 0, sizeof(*t));
	tr = t;
	snprintf(other_dir, sizeof(other_dir), "%s", other);
	if (chdir(dir) < 0) {
		printf("HARD cannot enter %s: %s\n", dir, strerror(errno));
		return -1;
	}
	set_umask(022);
	c->fn();
	set_umask(022);
	if (chdir("/") < 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	char ref[PATH_MAX], mnt[PATH_MAX], refro[PATH_MAX], mntro[PATH_MAX];
	char rc[PATH_MAX + 64], mc[PATH_MAX + 64];
	const struct check_case *c;
	int failures = 0, ncases = 0;
	size_t i;

	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: %s REFDIR MNTDIR [REFRO MNTRO]\n",
			argv[0]);
		return 99;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "%s: must start as root\n", argv[0]);
		return 99;
	}
	if (!realpath(argv[1], ref) || !realpath(argv[2], mnt) ||
	    (argc == 5 && (!realpath(argv[3], refro) ||
			   !realpath(argv[4], mntro)))) {
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		return 99;
	}
	tr_ref = mmap(NULL, sizeof(struct trace), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	tr_mnt = mmap(NULL, sizeof(struct trace), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tr_ref == MAP_FAILED || tr_mnt == MAP_FAILED) {
		perror("mmap");
		return 99;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c = &cases[i];
		if (c->ro) {
			if (argc != 5) {
				printf("skip %s: no read-only views given\n",
				       c->name);
				continue;
			}
			snprintf(rc, sizeof(rc), "%s", refro);
			snprintf(mc, sizeof(mc), "%s", mntro);
		} else if (case_dir(rc, sizeof(rc), ref, c->name) ||
			   case_dir(mc, sizeof(mc), mnt, c->name)) {
			return 99;
		}
		if (c->prep) {
			if (chdir(rc) < 0)
				return 99;
			c->prep();
			if (chdir(mc) < 0)
				return 99;
			c->prep();
		}
		ncases++;
		if (run_side(c, tr_ref, rc, mc) || run_side(c, tr_mnt, mc, rc))
			return 99;
		if (hard_error)
			return 99;
		if (getenv("PERM_CHECK_VERBOSE"))
			dump(c->name);
		if (compare(c->name))
			failures++;
		else
			printf("ok %s (%d steps)\n", c->name, tr_ref->n);
	}
	printf("%d of %d cases differ\n", failures, ncases);
	return failures ? 1 : 0;
}
