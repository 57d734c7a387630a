// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_cephfs.c - the cephfs store (agent/store_ceph.c) against a real,
 * throwaway Ceph cluster (tests/ceph/ceph-up.sh: one monitor, one
 * memstore OSD, an MDS).  The store is driven in-process through the
 * store interface (agent_ceph_open(), a session's store, the
 * agent_store_*() dispatchers), which is thread-safe for a blocking store:
 * metadata, open/release, file_rw, READDIR through the call interface,
 * the entries' "no xattrs" hint,
 * fids (fid_entry, REBIND in a second session), Ceph's debug levels
 * (0/0 in the store's client but where the configuration sets one), and
 * the start-up failures: a conf file that is not there and a monitor nobody answers
 * for fail with -errno, the latter within the timeout, and so does an MDS
 * that does not answer (stopped) when a previous run's session is to be
 * reset.  The write log: a
 * process writes through the store, sets a file's owner, mode and times,
 * and dies (no flush, its Ceph session left behind); the next open of
 * the store, in another process as after an agent's restart, replays
 * what it acknowledged, and nothing a truncate since removed; a log of
 * the first kind is taken and marked as of the second.
 *
 * Skips (77) without libcephfs, without the Ceph daemons, or when the
 * cluster does not come up.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "resume.h"
#include "store.h"

/* main.c's, which this test does not link: the defaults */
struct agent_config agent_cfg;

static char cdir[256];
static char src[512];

static void teardown(void)
{
	char cmd[1024];

	if (!cdir[0])
		return;
	snprintf(cmd, sizeof(cmd), "%s/tests/ceph/ceph-down.sh %s", src,
		 cdir);
	if (system(cmd) != 0)
		fprintf(stderr, "ceph-down.sh failed\n");
	cdir[0] = '\0';
}

static void on_signal(int sig)
{
	teardown();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

#define CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)
#define OK(expr) do { long r_ = (long)(expr); \
	CHECK(r_ >= 0, "%s: %ld (%s)", #expr, r_, strerror((int)-r_)); \
} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Open spec; with a write log in run_dir and as the agent named uuid
 * when they are not NULL.
 */
static int open_as(const char *spec, unsigned int ms, const char *run_dir,
		   const char *uuid, struct agent_backend **b)
{
	struct agent_store_spec sp;
	char err[256];
	int ret;

	ret = agent_store_spec_parse(spec, &sp, err, sizeof(err));
	if (ret < 0)
		fail("spec %s: %s", spec, err);
	sp.run_dir = run_dir ? strdup(run_dir) : NULL;
	sp.uuid = uuid ? strdup(uuid) : NULL;
	ret = agent_backend_open(&sp, ms, b);
	agent_store_spec_free(&sp);
	return ret;
}

static int open_spec(const char *spec, unsigned int ms,
		     struct agent_backend **b)
{
	return open_as(spec, ms, NULL, NULL, b);
}

static int open_state(const char *spec, const char *state, const char *uuid,
		      struct agent_backend **b)
{
	return open_as(spec, 30000, state, uuid, b);
}


/*
 * The MDS stopped (SIGSTOP): opening the store as an agent that ran
 * before (a uuid, whose session is reset first) fails within the
 * timeout, as an unreachable monitor does; the open runs in a child,
 * which is killed if it hangs.
 */
static void check_mds_stopped(const char *spec)
{
	char path[512];
	struct agent_backend *b = NULL;
	double t0;
	pid_t mds = 0, child;
	int st = 0, ret;
	long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/run/mds.a.pid", cdir);
	f = fopen(path, "r");
	CHECK(f && fscanf(f, "%ld", &v) == 1 && v > 1, "%s: no pid", path);
	fclose(f);
	mds = (pid_t)v;
	CHECK(kill(mds, SIGSTOP) == 0, "SIGSTOP mds: %s", strerror(errno));
	t0 = now_s();
	child = fork();
	CHECK(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		ret = open_as(spec, 3000, NULL, "agent_cephfs-stopped-mds", &b);
		printf("open with the MDS stopped: %d (%s) in %.1f s\n", ret,
		       strerror(-ret), now_s() - t0);
		_exit(ret < 0 ? 0 : 1);
	}
	while (waitpid(child, &st, WNOHANG) == 0 && now_s() - t0 < 30.0)
		usleep(100 * 1000);
	if (now_s() - t0 >= 30.0) {
		kill(child, SIGKILL);
		waitpid(child, &st, 0);
		kill(mds, SIGCONT);
		fail("open with the MDS stopped: no answer in 30 s for a "
		     "3 s timeout");
	}
	kill(mds, SIGCONT);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "open with the MDS stopped did not fail (status %#x)", st);
	CHECK(now_s() - t0 < 12.0, "open with the MDS stopped: %.1f s for "
	      "a 3 s timeout", now_s() - t0);
	printf("ok MDS stopped: the open failed in %.1f s\n", now_s() - t0);
}

/* A conf that names a monitor nobody listens for. */
static void check_failures(void)
{
	struct agent_backend *b = NULL;
	char conf[512], spec[600];
	double t0;
	FILE *f;
	int ret;

	ret = open_spec("cephfs:/,conf=/nonexistent/ceph.conf", 2000, &b);
	CHECK(ret == -ENOENT, "missing conf: %d, want -ENOENT", ret);

	snprintf(conf, sizeof(conf), "/tmp/agent_cephfs-%d.conf",
		 (int)getpid());
	f = fopen(conf, "w");
	CHECK(f, "%s: %s", conf, strerror(errno));
	fprintf(f, "[global]\nmon host = v2:127.0.0.1:9\n"
		"auth client required = none\nkeyring = /dev/null\n"
		"log file = /dev/null\n");
	fclose(f);
	snprintf(spec, sizeof(spec), "cephfs:/,conf=%s", conf);
	t0 = now_s();
	ret = open_spec(spec, 2000, &b);
	unlink(conf);
	CHECK(ret < 0 && ret != -EINVAL, "unreachable monitor: %d", ret);
	CHECK(now_s() - t0 < 8.0, "unreachable monitor: %.1f s for a 2 s "
	      "timeout", now_s() - t0);
	printf("ok unreachable monitor: %d (%s) in %.1f s\n", ret,
	       strerror(-ret), now_s() - t0);
}

static const struct agent_ident ident = { .squash = AGENT_SQUASH_NONE };

static uint64_t mk(struct agent_store *s, uint64_t parent, const char *name,
		   struct bcp_entry *e)
{
	struct bcp_mkdir_req r = {
		.parent = parent, .mode = 0755,
		.name_len = (uint32_t)strlen(name),
	};

	OK(agent_store_mkdir(s, &r, name, e));
	return e->handle;
}

static uint64_t create(struct agent_store *s, uint64_t parent,
		       const char *name, uint32_t flags,
		       struct bcp_create_rep *rep)
{
	struct bcp_create_req r = {
		.parent = parent, .mode = 0644, .flags = flags | O_RDWR,
		.uid = 1234, .gid = 4321,
		.name_len = (uint32_t)strlen(name),
	};

	return (uint64_t)agent_store_create_file(s, &r, name, rep);
}

/* READDIR through the call interface; the names joined by ' '. */
static int list(struct agent_store *s, uint64_t dir, int plus, char *out,
		size_t cap)
{
	struct bcp_open_rep o;
	struct agent_store_call c;
	struct bcp_msg m;
	uint8_t tail[BCP_READDIR_MAX];
	size_t len, pos;
	uint32_t count, eof = 0;
	uint64_t cookie = 0;
	int n = 0;

	OK(agent_store_open(s, dir, 0, 1, &o));
	out[0] = '\0';
	memset(&c, 0, sizeof(c));
	c.buf = malloc(AGENT_STORE_DENTS_BUF);
	c.cap = AGENT_STORE_DENTS_BUF;
	while (!eof) {
		memset(&m, 0, sizeof(m));
		m.hdr.opcode = BCP_OP_READDIR;
		m.u.readdir_req.handle = dir;
		m.u.readdir_req.fh = o.fh;
		m.u.readdir_req.cookie = cookie;
		/* small: several calls, each resuming at a cookie */
		m.u.readdir_req.max_bytes = plus ? 1024 : 128;
		m.u.readdir_req.flags = plus ? BCP_READDIR_PLUS : 0;
		OK(agent_store_call_begin(s, &m, &c));
		agent_store_call_run(&c);
		OK(agent_store_readdir_fill(s, &c, tail, sizeof(tail), &len,
					    &count, &eof));
		agent_store_call_end(s, &c);
		for (pos = 0; pos < len;) {
			const uint8_t *p = tail + pos;
			uint64_t ck, handle = 0;
			uint16_t nl;
			size_t hdr = plus ? 192 : 24;

			memcpy(&ck, p, 8);
			memcpy(&nl, p + 20, 2);
			if (plus)
				memcpy(&handle, p + 24, 8);
			if (handle)
				agent_store_forget(s, handle, 1);
			strncat(out, (const char *)p + hdr, nl);
			strncat(out, " ", cap - strlen(out) - 1);
			cookie = ck;
			pos += (hdr + nl + 7) & ~(size_t)7;
			n++;
		}
		CHECK(count > 0 || eof, "READDIR: nothing and no eof");
	}
	free(c.buf);
	OK(agent_store_release(s, dir, o.fh, 1));
	return n;
}

static void check_store(struct agent_backend *b)
{
	struct agent_store *s, *s2;
	struct bcp_entry e, d, l, fe;
	struct bcp_create_rep cr;
	struct bcp_open_rep o;
	struct bcp_attr a;
	struct bcp_statfs_rep sf;
	struct agent_file *f;
	uint64_t root, dir, h, nh, files;
	uint8_t fid[BCP_FID_LEN];
	char buf[4096], names[4096], top[64];
	int fd, ret;

	s = agent_store_new(b, NULL, &ident);
	CHECK(s, "session store");
	CHECK(agent_store_blocking(s), "a cephfs store blocks");
	root = agent_store_root(s);
	OK(agent_store_getattr(s, root, 0, &a));
	CHECK(S_ISDIR(a.mode), "root mode %o", a.mode);

	snprintf(top, sizeof(top), "t%d", (int)getpid());
	dir = mk(s, root, top, &d);
	CHECK(S_ISDIR(d.attr.mode), "mkdir mode %o", d.attr.mode);
	OK(agent_store_lookup(s, root, top, strlen(top), &e));
	CHECK(e.handle == dir, "lookup: handle %llu, mkdir gave %llu",
	      (unsigned long long)e.handle, (unsigned long long)dir);

	/* create: O_EXCL, CREATED, the owner given to the caller */
	ret = (int)create(s, dir, "f", O_EXCL, &cr);
	OK(ret);
	CHECK(cr.open_flags & BCP_OPEN_CREATED, "CREATED not set");
	CHECK(cr.entry.attr.uid == 1234 && cr.entry.attr.gid == 4321,
	      "owner %u:%u", cr.entry.attr.uid, cr.entry.attr.gid);
	h = cr.entry.handle;
	OK(agent_store_release(s, h, cr.fh, 0));
	ret = (int)create(s, dir, "f", O_EXCL, &cr);
	CHECK(ret == -EEXIST, "O_EXCL again: %d", ret);
	memset(&cr, 0, sizeof(cr));
	ret = (int)create(s, dir, "f", 0, &cr);
	OK(ret);
	CHECK(!(cr.open_flags & BCP_OPEN_CREATED), "CREATED on an open");
	CHECK(cr.entry.handle == h, "two handles for one inode");
	OK(agent_store_release(s, h, cr.fh, 0));
	agent_store_forget(s, h, 2);

	/* write and read back through file_rw (the pool's path) */
	OK(agent_store_lookup(s, dir, "f", 1, &e));
	h = e.handle;
	OK(agent_store_open(s, h, O_RDWR, 0, &o));
	OK(agent_store_file_get(s, o.fh, &f, &fd));
	CHECK(fd == -1, "fd %d: cephfs files have none", fd);
	CHECK(agent_store_file_rw(s, f, 1, "hello, ceph", 11, 100) == 11,
	      "write");
	memset(buf, 0, sizeof(buf));
	CHECK(agent_store_file_rw(s, f, 0, buf, sizeof(buf), 100) == 11,
	      "read back");
	CHECK(!memcmp(buf, "hello, ceph", 11), "read back '%s'", buf);
	/* RELEASE while the transfer holds its reference */
	OK(agent_store_release(s, h, o.fh, 0));
	CHECK(agent_store_file_rw(s, f, 0, buf, 5, 100) == 5,
	      "read after RELEASE with a reference");
	agent_store_file_put(s, f);
	CHECK(agent_store_file_get(s, o.fh, &f, &fd) == -EBADF,
	      "fh alive after RELEASE");
	CHECK(agent_store_release(s, h, o.fh, 0) == -EBADF,
	      "RELEASE twice");
	OK(agent_store_getattr(s, h, 0, &a));
	CHECK(a.size == 111, "size %llu", (unsigned long long)a.size);

	/* setattr: size, mode, times */
	{
		struct bcp_setattr_req r = {
			.handle = h, .valid = BCP_SETATTR_SIZE |
			BCP_SETATTR_MODE | BCP_SETATTR_MTIME,
			.size = 5, .mode = 0600, .mtime = 1000000000,
		};

		OK(agent_store_setattr(s, &r, &a));
		CHECK(a.size == 5 && (a.mode & 07777) == 0600 &&
		      a.mtime == 1000000000, "setattr: size %llu mode %o "
		      "mtime %llu", (unsigned long long)a.size, a.mode,
		      (unsigned long long)a.mtime);
	}

	/* symlink, readlink, link, mknod */
	{
		struct bcp_symlink_req r = {
			.parent = dir, .name_len = 1, .target_len = 6,
		};
		struct bcp_link_req lr = {
			.handle = h, .newparent = dir, .name_len = 2,
		};
		struct bcp_mknod_req nr = {
			.parent = dir, .mode = S_IFIFO | 0644, .name_len = 4,
		};

		OK(agent_store_symlink(s, &r, "l", "target", &l));
		ret = agent_store_readlink(s, l.handle, buf, sizeof(buf));
		CHECK(ret == 6 && !memcmp(buf, "target", 6), "readlink %d",
		      ret);
		OK(agent_store_link(s, &lr, "f2", &e));
		CHECK(e.handle == h && e.attr.nlink == 2, "link: handle %llu "
		      "nlink %u", (unsigned long long)e.handle, e.attr.nlink);
		OK(agent_store_mknod(s, &nr, "fifo", &e));
		CHECK(S_ISFIFO(e.attr.mode), "mknod mode %o", e.attr.mode);
		nr.mode = S_IFCHR | 0644;
		nr.name_len = 3;
		CHECK(agent_store_mknod(s, &nr, "chr", &e) == -EPERM,
		      "a device without allow_devices");
	}

	/* rename: NOREPLACE refuses, EXCHANGE is not supported */
	{
		struct bcp_rename_req r = {
			.parent = dir, .newparent = dir, .name_len = 2,
			.newname_len = 1, .flags = BCP_RENAME_NOREPLACE,
		};

		CHECK(agent_store_rename(s, &r, "f2", "l") == -EEXIST,
		      "RENAME_NOREPLACE over a name");
		r.flags = BCP_RENAME_EXCHANGE;
		CHECK(agent_store_rename(s, &r, "f2", "l") == -EINVAL,
		      "RENAME_EXCHANGE");
		r.flags = 0;
		r.newname_len = 2;
		OK(agent_store_rename(s, &r, "f2", "f3"));
		CHECK(agent_store_lookup(s, dir, "f2", 2, &e) == -ENOENT,
		      "old name after rename");
	}

	/* xattrs */
	OK(agent_store_setxattr(s, h, 0, "user.k", 6, "v1", 2));
	ret = agent_store_getxattr(s, h, "user.k", 6, buf, sizeof(buf));
	CHECK(ret == 2 && !memcmp(buf, "v1", 2), "getxattr %d", ret);
	CHECK(agent_store_getxattr(s, h, "user.k", 6, NULL, 0) == 2,
	      "getxattr size");
	ret = agent_store_listxattr(s, h, buf, sizeof(buf));
	CHECK(ret > 0 && memmem(buf, (size_t)ret, "user.k", 7),
	      "listxattr %d", ret);
	/* entries say "no xattrs" only to a host that asked, only when true */
	OK(agent_store_lookup(s, dir, "f", 1, &e));
	CHECK(!(e.attr.mode & BCP_MODE_NO_XATTRS), "hint not asked for");
	agent_store_forget(s, e.handle, 1);
	s->flags |= AGENT_STORE_XATTR_HINT;
	OK(agent_store_lookup(s, dir, "f", 1, &e));
	CHECK(!(e.attr.mode & BCP_MODE_NO_XATTRS), "hint with user.k set");
	agent_store_forget(s, e.handle, 1);
	OK(agent_store_removexattr(s, h, "user.k", 6));
	CHECK(agent_store_getxattr(s, h, "user.k", 6, buf, sizeof(buf)) ==
	      -ENODATA, "removed xattr");
	OK(agent_store_lookup(s, dir, "f", 1, &e));
	CHECK(e.attr.mode & BCP_MODE_NO_XATTRS, "no hint with no xattrs");
	agent_store_forget(s, e.handle, 1);
	OK(agent_store_lookup(s, dir, "l", 1, &e));
	CHECK(e.attr.mode & BCP_MODE_NO_XATTRS, "no hint for a symlink");
	agent_store_forget(s, e.handle, 1);
	s->flags &= ~AGENT_STORE_XATTR_HINT;

	/* READDIR, plain and PLUS, in small pieces */
	ret = list(s, dir, 0, names, sizeof(names));
	CHECK(strstr(names, "f ") && strstr(names, "f3 ") &&
	      strstr(names, "l ") && strstr(names, "fifo "),
	      "READDIR: '%s'", names);
	ret = list(s, dir, 1, names, sizeof(names));
	CHECK(strstr(names, "f ") && strstr(names, "fifo "),
	      "READDIRPLUS: '%s'", names);

	/* fids: the entry's, again in this and in a new session */
	memcpy(fid, cr.entry.fid, BCP_FID_LEN);
	OK(agent_store_fid_entry(s, fid, &fe));
	CHECK(fe.handle == h, "fid_entry: handle %llu",
	      (unsigned long long)fe.handle);
	s2 = agent_store_new(b, NULL, &ident);
	CHECK(s2, "second session");
	OK(agent_store_rebind(s2, 77, 3, fid));
	OK(agent_store_getattr(s2, 77, 0, &a));
	CHECK(a.size == 5, "rebound handle: size %llu",
	      (unsigned long long)a.size);
	CHECK(agent_store_rebind(s2, 77, 1, d.fid) == -EEXIST,
	      "REBIND of a value naming another object");
	fid[8] ^= 1;	/* the tag of the CephFS */
	CHECK(agent_store_rebind(s2, 78, 1, fid) == -ESTALE,
	      "a fid of another store");
	CHECK(agent_store_fid_entry(s2, fid, &fe) == -ESTALE,
	      "fid_entry of another store");
	CHECK(agent_store_getattr(s2, 78, 0, &a) == -ESTALE,
	      "a buried handle");
	/* the right tag but another inode number: the MAC fails */
	memcpy(fid, cr.entry.fid, BCP_FID_LEN);
	fid[24] = 1;	/* the inode number: 1 is the CephFS's root */
	memset(fid + 25, 0, 7);
	CHECK(agent_store_fid_entry(s2, fid, &fe) == -ESTALE,
	      "a forged fid of inode 1");
	agent_store_forget(s2, 77, 3);
	agent_store_counts(s2, &nh, &files);
	CHECK(files == 0, "files in the second session: %llu",
	      (unsigned long long)files);
	agent_store_destroy(s2);

	/* statfs; unlink, rmdir; handles dropped by forget */
	OK(agent_store_statfs(s, root, &sf));
	CHECK(sf.bsize > 0 && sf.namemax == BCP_NAME_MAX, "statfs: bsize %u "
	      "blocks %llu", sf.bsize, (unsigned long long)sf.blocks);
	OK(agent_store_unlink(s, dir, "f", 1, 0));
	OK(agent_store_unlink(s, dir, "f3", 2, 0));
	OK(agent_store_unlink(s, dir, "l", 1, 0));
	OK(agent_store_unlink(s, dir, "fifo", 4, 0));
	CHECK(agent_store_unlink(s, root, top, strlen(top), 0) != 0,
	      "unlink of a directory");
	OK(agent_store_unlink(s, root, top, strlen(top), 1));
	CHECK(agent_store_lookup(s, root, top, strlen(top), &e) == -ENOENT,
	      "lookup after rmdir");
	/* a fid of a removed file: ESTALE */
	CHECK(agent_store_fid_entry(s, cr.entry.fid, &fe) == -ESTALE,
	      "fid of a removed file");
	agent_store_counts(s, &nh, &files);
	CHECK(files == 0, "open files left: %llu",
	      (unsigned long long)files);
	agent_store_destroy(s);
	printf("ok cephfs store: metadata, data, READDIR, fids\n");
}

#ifdef HAVE_CEPHFS
#define WL_FILES	8
#define WL_LEN		(3 * 4096 + 100)
#define WL_ATIME	1500000000
#define WL_MTIME	1400000000

/* Run this test's own binary as "wlog-ROLE SPEC STATE UUID TOP". */
static void wlog_run(const char *role, const char *spec, const char *state,
		     const char *uuid, const char *top)
{
	int st;
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		execl("/proc/self/exe", "agent_cephfs", role, spec, state,
		      uuid, top, (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	      WEXITSTATUS(st) == 0, "%s failed: %#x", role, st);
}

/*
 * The writer: write WL_FILES files through the store (an ordinary open for
 * writing, so through the client's cache and the log; each made as
 * 1234:4321, an owner that is not the agent's), truncate the last
 * one to 0 after its write, set a new file's owner, mode and times and a
 * symlink's owner, make a directory and a symlink as 1234:4321, then die
 * without a flush or a close, as a SIGKILL would leave it.
 */
static void wlog_write(const char *spec, const char *state, const char *uuid,
		       const char *top)
{
	struct agent_backend *b = NULL;
	struct bcp_create_rep cr;
	struct bcp_setattr_req sr;
	struct bcp_entry d;
	struct bcp_attr a;
	struct agent_store *s;
	struct agent_file *f;
	char name[32], buf[WL_LEN];
	uint64_t dir;
	int i, fd;

	/* the flusher must not beat the exit */
	setenv("BLUECACHE_CEPH_FLUSH_MS", "600000", 1);
	OK(open_state(spec, state, uuid, &b));
	s = agent_store_new(b, NULL, &ident);
	CHECK(s, "session store");
	dir = mk(s, agent_store_root(s), top, &d);
	for (i = 0; i < WL_FILES; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		OK(create(s, dir, name, O_EXCL, &cr));
		OK(agent_store_file_get(s, cr.fh, &f, &fd));
		memset(buf, 'a' + i, sizeof(buf));
		/* two writes: the second one logged after the first */
		CHECK(agent_store_file_rw(s, f, 1, buf, 4096, 0) == 4096,
		      "write 1 of %s", name);
		memset(buf, 'A' + i, sizeof(buf));
		CHECK(agent_store_file_rw(s, f, 1, buf, WL_LEN - 100, 100) ==
		      WL_LEN - 100, "write 2 of %s", name);
		agent_store_file_put(s, f);
	}
	memset(&sr, 0, sizeof(sr));
	sr.handle = cr.entry.handle;
	sr.valid = BCP_SETATTR_SIZE;
	OK(agent_store_setattr(s, &sr, &a));
	/* an owner, a mode and times, acknowledged as tar sets them */
	OK(create(s, dir, "attrs", O_EXCL, &cr));
	memset(&sr, 0, sizeof(sr));
	sr.handle = cr.entry.handle;
	sr.valid = BCP_SETATTR_UID | BCP_SETATTR_GID;
	sr.uid = 2345;
	sr.gid = 5432;
	OK(agent_store_setattr(s, &sr, &a));
	sr.valid = BCP_SETATTR_MODE;
	sr.mode = 0604;
	OK(agent_store_setattr(s, &sr, &a));
	sr.valid = BCP_SETATTR_ATIME | BCP_SETATTR_MTIME;
	sr.atime = WL_ATIME;
	sr.mtime = WL_MTIME;
	sr.mtime_nsec = 5000;
	OK(agent_store_setattr(s, &sr, &a));
	/* a symlink's owner: made durable at once, not logged */
	{
		struct bcp_symlink_req lr = {
			.parent = dir, .name_len = 4, .target_len = 5,
		};
		struct bcp_entry l;

		OK(agent_store_symlink(s, &lr, "link", "attrs", &l));
		memset(&sr, 0, sizeof(sr));
		sr.handle = l.handle;
		sr.valid = BCP_SETATTR_UID;
		sr.uid = 3456;
		OK(agent_store_setattr(s, &sr, &a));
	}
	/* a directory and a symlink a host user made: their owner logged */
	{
		struct bcp_mkdir_req mr = {
			.parent = dir, .mode = 02750, .uid = 1234,
			.gid = 4321, .name_len = 3,
		};
		struct bcp_symlink_req lr = {
			.parent = dir, .uid = 1234, .gid = 4321,
			.name_len = 5, .target_len = 3,
		};
		struct bcp_entry l;

		OK(agent_store_mkdir(s, &mr, "dir", &l));
		OK(agent_store_symlink(s, &lr, "link2", "dir", &l));
	}
	_exit(0);
}

/*
 * Set the header of every write log in state from magic from to magic to;
 * how many had it.
 */
static int wlog_magic(const char *state, const char *from, const char *to)
{
	char path[600], cur[8];
	struct dirent *de;
	int n = 0, fd;
	DIR *d;

	d = opendir(state);
	CHECK(d, "%s: %s", state, strerror(errno));
	while ((de = readdir(d))) {
		if (!strstr(de->d_name, ".wlog"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", state, de->d_name);
		fd = open(path, O_RDWR);
		CHECK(fd >= 0, "%s: %s", path, strerror(errno));
		if (pread(fd, cur, 8, 0) == 8 && !memcmp(cur, from, 8)) {
			CHECK(!to || pwrite(fd, to, 8, 0) == 8, "%s", path);
			n++;
		}
		close(fd);
	}
	closedir(d);
	return n;
}

/* What the writer acknowledged is there after the reader's replay. */
static void wlog_read(const char *spec, const char *state, const char *uuid,
		      const char *top)
{
	struct agent_backend *b = NULL;
	struct agent_store *s;
	struct bcp_entry e, fe;
	struct bcp_open_rep o;
	struct agent_file *f;
	char name[32], buf[WL_LEN + 10];
	char want[WL_LEN], logf[96];
	int i, fd, saved, lfd, ret;
	FILE *lf;

	/* the replay says what it did: at info level, on stderr */
	snprintf(logf, sizeof(logf), "%s.log", state);
	lfd = open(logf, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(lfd >= 0, "%s: %s", logf, strerror(errno));
	fflush(stderr);
	saved = dup(2);
	dup2(lfd, 2);
	agent_cfg.log_level = AGENT_LOG_INFO;
	ret = open_state(spec, state, uuid, &b);
	agent_cfg.log_level = 0;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(lfd);
	CHECK(ret == 0, "open after the writer died: %d", ret);
	CHECK(wlog_magic(state, "BCCWLOG2", NULL) == 1 &&
	      wlog_magic(state, "BCCWLOG1", NULL) == 0,
	      "the write log was not marked as of the second kind");
	lf = fopen(logf, "r");
	CHECK(lf, "%s", logf);
	memset(buf, 0, sizeof(buf));
	if (fread(buf, 1, sizeof(buf) - 1, lf) == 0)
		buf[0] = '\0';
	fclose(lf);
	unlink(logf);
	fputs(buf, stdout);
	CHECK(strstr(buf, "replayed 14 writes"), "no replay of the 14 writes "
	      "not truncated since");
	/*
	 * each file's owner at its create (1234:4321), 3 SETATTRs, the new
	 * directory's and symlink's owners
	 */
	CHECK(strstr(buf, "and 13 changes of attributes"), "no replay of the "
	      "owners of 8 new files, of 3 SETATTRs of a file's owner, "
	      "mode and times, and of a new directory's and symlink's "
	      "owners");
	s = agent_store_new(b, NULL, &ident);
	CHECK(s, "session store");
	OK(agent_store_lookup(s, agent_store_root(s), top, strlen(top), &e));
	for (i = 0; i < WL_FILES; i++) {
		size_t len = i == WL_FILES - 1 ? 0 : WL_LEN;

		snprintf(name, sizeof(name), "w%d", i);
		OK(agent_store_lookup(s, e.handle, name, strlen(name), &fe));
		CHECK(fe.attr.size == len, "%s: size %llu after the replay, "
		      "want %zu", name, (unsigned long long)fe.attr.size, len);
		CHECK(fe.attr.uid == 1234 && fe.attr.gid == 4321,
		      "%s: owner %u:%u after the replay, want 1234:4321", name,
		      fe.attr.uid, fe.attr.gid);
		OK(agent_store_open(s, fe.handle, O_RDONLY, 0, &o));
		OK(agent_store_file_get(s, o.fh, &f, &fd));
		memset(want, 'a' + i, 100);
		memset(want + 100, 'A' + i, WL_LEN - 100);
		CHECK(agent_store_file_rw(s, f, 0, buf, sizeof(buf), 0) ==
		      (ssize_t)len, "%s: read", name);
		CHECK(!memcmp(buf, want, len), "%s: other bytes after the "
		      "replay", name);
		agent_store_file_put(s, f);
		OK(agent_store_release(s, fe.handle, o.fh, 0));
		OK(agent_store_unlink(s, e.handle, name, strlen(name), 0));
	}
	OK(agent_store_lookup(s, e.handle, "attrs", 5, &fe));
	CHECK(fe.attr.uid == 2345 && fe.attr.gid == 5432 &&
	      (fe.attr.mode & 07777) == 0604 && fe.attr.atime == WL_ATIME &&
	      fe.attr.mtime == WL_MTIME && fe.attr.mtime_nsec == 5000,
	      "attrs after the replay: uid %u gid %u mode %o atime %lld "
	      "mtime %lld.%09u", fe.attr.uid, fe.attr.gid, fe.attr.mode,
	      (long long)fe.attr.atime, (long long)fe.attr.mtime,
	      fe.attr.mtime_nsec);
	OK(agent_store_unlink(s, e.handle, "attrs", 5, 0));
	OK(agent_store_lookup(s, e.handle, "link", 4, &fe));
	CHECK(fe.attr.uid == 3456 && S_ISLNK(fe.attr.mode),
	      "link after the replay: uid %u mode %o", fe.attr.uid,
	      fe.attr.mode);
	OK(agent_store_unlink(s, e.handle, "link", 4, 0));
	OK(agent_store_lookup(s, e.handle, "dir", 3, &fe));
	CHECK(fe.attr.uid == 1234 && fe.attr.gid == 4321 &&
	      S_ISDIR(fe.attr.mode) && (fe.attr.mode & 07777) == 02750,
	      "dir after the replay: owner %u:%u mode %o", fe.attr.uid,
	      fe.attr.gid, fe.attr.mode);
	OK(agent_store_unlink(s, e.handle, "dir", 3, 1));
	OK(agent_store_lookup(s, e.handle, "link2", 5, &fe));
	CHECK(fe.attr.uid == 1234 && fe.attr.gid == 4321 &&
	      S_ISLNK(fe.attr.mode),
	      "link2 after the replay: owner %u:%u mode %o", fe.attr.uid,
	      fe.attr.gid, fe.attr.mode);
	OK(agent_store_unlink(s, e.handle, "link2", 5, 0));
	OK(agent_store_unlink(s, agent_store_root(s), top, strlen(top), 1));
	agent_store_destroy(s);
	agent_backend_close(b);
}

static void check_wlog(const char *spec)
{
	char state[64], uuid[64], top[64], cmd[128];

	snprintf(state, sizeof(state), "/tmp/agent_cephfs-wlog-XXXXXX");
	CHECK(mkdtemp(state), "mkdtemp: %s", strerror(errno));
	snprintf(uuid, sizeof(uuid), "agent_cephfs:%d", (int)getpid());
	snprintf(top, sizeof(top), "wl%d", (int)getpid());
	wlog_run("wlog-write", spec, state, uuid, top);
	/*
	 * a log of the first kind (an agent before attribute entries) is
	 * replayed, and marked as the second kind, which such an agent
	 * refuses
	 */
	CHECK(wlog_magic(state, "BCCWLOG2", "BCCWLOG1") == 1,
	      "no write log of the second kind in %s", state);
	wlog_run("wlog-read", spec, state, uuid, top);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
	if (system(cmd) != 0)
		fail("%s", cmd);
	printf("ok write log: %d files a dead writer acknowledged are "
	       "there, a truncate is not undone\n", WL_FILES);
}
#endif

/* opt's value in the store's Ceph client, through its admin socket. */
static void asok_get(const char *opt, char *out, size_t len)
{
	char cmd[600], line[256];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "timeout 30 ceph --admin-daemon "
		 "%s/run/client.admin.asok config get %s", cdir, opt);
	f = popen(cmd, "r");
	CHECK(f, "popen %s", cmd);
	out[0] = '\0';
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " \"%*[^\"]\": \"%63[^\"]\"", out) == 1)
			break;
	pclose(f);
	CHECK(out[0], "%s: no value", cmd);
}

/* Ceph's debug levels of a store's client: 0/0 but where conf sets them. */
static void check_quiet(const char *conf)
{
	struct agent_backend *b = NULL;
	char spec[1600], conf2[300], v[64];
	int ret;

	snprintf(conf2, sizeof(conf2), "%s/ceph-debug.conf", cdir);
	snprintf(spec, sizeof(spec), "cp %s %s && printf '[client]\\n"
		 "debug_objectcacher = 1/3\\n' >> %s", conf, conf2, conf2);
	CHECK(system(spec) == 0, "%s", spec);
	snprintf(spec, sizeof(spec), "cephfs:/,conf=%s", conf2);
	ret = open_spec(spec, 30000, &b);
	CHECK(ret == 0, "open %s: %d (%s)", spec, ret, strerror(-ret));
	asok_get("debug_objectcacher", v, sizeof(v));
	CHECK(!strcmp(v, "1/3"), "debug_objectcacher %s, not the 1/3 set",
	      v);
	asok_get("debug_client", v, sizeof(v));
	CHECK(!strcmp(v, "0/0"), "debug_client %s, not 0/0", v);
	agent_backend_close(b);
	printf("ok Ceph's debug levels\n");
}

int main(int argc, char **argv)
{
#ifndef HAVE_CEPHFS
	(void)argc;
	(void)argv;
	printf("SKIP: built without libcephfs (configure --with-cephfs)\n");
	return 77;
#else
	struct agent_backend *b = NULL;
	char cmd[1024], spec[600], conf[300];
	const char *sd = getenv("srcdir");
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 6 && !strncmp(argv[1], "wlog-", 5)) {
		if (agent_resume_init("none", -1) < 0)
			return 99;
		if (!strcmp(argv[1], "wlog-write"))
			wlog_write(argv[2], argv[3], argv[4], argv[5]);
		wlog_read(argv[2], argv[3], argv[4], argv[5]);
		return 0;
	}
	if (system("command -v ceph-mon ceph-osd ceph-mds >/dev/null 2>&1")) {
		printf("SKIP: ceph-mon, ceph-osd or ceph-mds not installed\n");
		return 77;
	}
	if (!realpath(sd ? sd : ".", src))
		return 99;
	check_failures();
	/* fids are sealed with the handle key: a fresh one */
	if (agent_resume_init("none", -1) < 0)
		return 99;

	snprintf(cdir, sizeof(cdir), "/tmp/agent_cephfs-%d", (int)getpid());
	atexit(teardown);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	snprintf(cmd, sizeof(cmd), "WITH_MDS=1 WITH_MGR=0 timeout 120 "
		 "%s/tests/ceph/ceph-up.sh %s >/dev/null", src, cdir);
	if (system(cmd) != 0) {
		printf("SKIP: the throwaway Ceph cluster did not start\n");
		return 77;
	}
	snprintf(conf, sizeof(conf), "%s/ceph.conf", cdir);
	snprintf(spec, sizeof(spec), "cephfs:/,conf=%s,fs=cephfs", conf);
	ret = open_spec(spec, 30000, &b);
	CHECK(ret == 0, "open %s: %d (%s)", spec, ret, strerror(-ret));
	CHECK(b->root_fd == -1 && (b->flags & AGENT_STORE_BLOCKING),
	      "backend: root_fd %d flags %x", b->root_fd, b->flags);
	check_store(b);
	OK(b->ops->sync(b));
	/* Ceph's in-memory debug messages are off (store_ceph.c) */
	{
		char v[64];

		asok_get("debug_client", v, sizeof(v));
		CHECK(!strcmp(v, "0/0"), "debug_client %s, not 0/0", v);
		asok_get("debug_monc", v, sizeof(v));
		CHECK(!strcmp(v, "0/0"), "debug_monc %s, not 0/0", v);
	}
	agent_backend_close(b);
	check_quiet(conf);
	check_wlog(spec);

	/* a file system and a path that are not there */
	snprintf(spec, sizeof(spec), "cephfs:/,conf=%s,fs=nosuchfs", conf);
	ret = open_spec(spec, 10000, &b);
	CHECK(ret < 0, "fs=nosuchfs opened");
	snprintf(spec, sizeof(spec), "cephfs:/no/such/dir,conf=%s", conf);
	ret = open_spec(spec, 10000, &b);
	CHECK(ret == -ENOENT, "a path not there: %d", ret);
	printf("ok missing file system and path\n");
	snprintf(spec, sizeof(spec), "cephfs:/,conf=%s", conf);
	check_mds_stopped(spec);
	return 0;
#endif
}
