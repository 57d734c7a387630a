/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_resume.c - a host goes on after its agent was killed: a real
 * agent is SIGKILLed while a session holds handles, an open file and a
 * directory stream; a new agent on the same root and state directory takes
 * the handles back (REBIND), the open file and the stream (REOPEN, READDIR
 * from the old cookie), and answers replayed requests from its reply
 * cache.  Forged fids and fids of another state directory are refused.
 * Then the descriptor bound: with --fd-cache 64, 20,000 looked-up files
 * leave the agent far below 20,000 descriptors, and every handle works.
 * Last, a removed file a host had open when its connection was cut: the
 * host's new session opens it again (REOPEN) before the agent noticed the
 * old session was gone; once the host closes it, the agent holds no
 * descriptor of it (the old session's one is not kept for a reopen that
 * already happened).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"

#define NFILES_DIR	40		/* entries of the directory stream */
#define NLOOKUPS	20000
#define FD_BOUND	200

static uint8_t buf[BCP_FRAME_MAX];
static const uint8_t client[BCP_CLIENT_ID_LEN] = {
	0xb1, 0x0e, 0xca, 0xc4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
};

static int call(int fd, struct bcp_msg *m, struct bcp_msg *rep)
{
	return t_raw_call(fd, m, rep, buf, sizeof(buf));
}

static int named_msg(int fd, uint16_t op, uint64_t req, uint32_t flags,
		     uint64_t parent, const char *name, struct bcp_msg *rep)
{
	struct bcp_msg m;

	bcp_msg_init(&m, op, req);
	m.hdr.flags = flags;
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	return call(fd, &m, rep);
}

static int do_mkdir(int fd, uint64_t req, uint32_t flags, uint64_t parent,
		    const char *name, struct bcp_entry *e)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_MKDIR, req);
	m.hdr.flags = flags;
	m.u.mkdir_req.parent = parent;
	m.u.mkdir_req.mode = 0755;
	m.u.mkdir_req.uid = getuid();
	m.u.mkdir_req.gid = getgid();
	m.u.mkdir_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	ret = call(fd, &m, &rep);
	if (ret == 0)
		*e = rep.u.entry_rep.entry;
	return ret;
}

static int do_create(int fd, uint64_t req, uint32_t hflags, uint64_t parent,
		     const char *name, uint32_t flags, struct bcp_entry *e,
		     uint64_t *fh)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_CREATE, req);
	m.hdr.flags = hflags;
	m.u.create_req.parent = parent;
	m.u.create_req.mode = 0644;
	m.u.create_req.flags = flags;
	m.u.create_req.uid = getuid();
	m.u.create_req.gid = getgid();
	m.u.create_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	ret = call(fd, &m, &rep);
	if (ret == 0) {
		*e = rep.u.create_rep.entry;
		*fh = rep.u.create_rep.fh;
	}
	return ret;
}

static int getattr(int fd, uint64_t h, struct bcp_attr *a)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_GETATTR, 50);
	m.u.node_req.handle = h;
	ret = call(fd, &m, &rep);
	if (ret == 0 && a)
		*a = rep.u.attr_rep.attr;
	return ret;
}

static int do_open(int fd, uint16_t op, uint64_t h, uint32_t flags,
		   uint64_t *fh)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, op, 51);
	m.u.open_req.handle = h;
	m.u.open_req.flags = flags;
	ret = call(fd, &m, &rep);
	if (ret == 0)
		*fh = rep.u.open_rep.fh;
	return ret;
}

static int do_release(int fd, uint16_t op, uint64_t h, uint64_t fh)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, op, 52);
	m.u.node_req.handle = h;
	m.u.node_req.fh = fh;
	return call(fd, &m, &rep);
}

static int do_reopen(int fd, uint64_t h, uint64_t fh, uint32_t flags,
		     uint32_t dir, uint64_t *out)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_REOPEN, 53);
	m.u.reopen_req.handle = h;
	m.u.reopen_req.fh = fh;
	m.u.reopen_req.flags = flags;
	m.u.reopen_req.dir = dir;
	ret = call(fd, &m, &rep);
	if (ret == 0)
		*out = rep.u.open_rep.fh;
	return ret;
}

/*
 * READDIR of dfh from cookie, small pages; names land in seen[] (by the
 * number in "eNN"), the last cookie in *last.  Stops after max entries.
 */
static void readdir_names(int fd, uint64_t dh, uint64_t dfh, uint64_t cookie,
			  unsigned int max, int seen[NFILES_DIR],
			  uint64_t *last)
{
	unsigned int got = 0;
	struct bcp_msg m, rep;

	for (;;) {
		struct bcp_dirent_iter it = { 0, 0 };
		struct bcp_dirent_view v;

		bcp_msg_init(&m, BCP_OP_READDIR, 54);
		m.u.readdir_req.handle = dh;
		m.u.readdir_req.fh = dfh;
		m.u.readdir_req.cookie = cookie;
		m.u.readdir_req.max_bytes = 256;
		T_EQ(call(fd, &m, &rep), 0);
		while (got < max && bcp_dirent_next(&rep, 0, &it, &v)) {
			int i;

			cookie = v.d.cookie;
			got++;
			if (v.d.name_len == 3 && v.name[0] == 'e') {
				i = (v.name[1] - '0') * 10 + v.name[2] - '0';
				T_CHECK(i >= 0 && i < NFILES_DIR);
				seen[i]++;
			}
		}
		if (got >= max || rep.u.readdir_rep.eof)
			break;
	}
	*last = cookie;
}

/* Start a's agent with extra; skip when it cannot open files by handle. */
static void start_by_handle(struct t_agent *a, const char *const *extra)
{
	if (t_agent_start_args(a, extra, 0) < 0)
		t_hard("agent did not start (see %s)", a->log);
	if (t_log_has(a, "cannot open by handle") ||
	    t_log_has(a, "makes no file handles")) {
		t_agent_cleanup(a);
		fprintf(stderr, "SKIP: no open_by_handle_at here "
			"(CAP_DAC_READ_SEARCH or file system)\n");
		exit(T_SKIP);
	}
}

static void kill9(struct t_agent *a)
{
	int st;

	kill(a->pid, SIGKILL);
	waitpid(a->pid, &st, 0);
	a->pid = -1;
}

/*
 * How many descriptors pid holds; removed: only those of a removed file
 * of that name (NULL: all).
 */
static int count_fds(pid_t pid, const char *removed)
{
	char path[64], fdp[400], link[600], want[300];
	struct dirent *d;
	size_t w;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "/%s (deleted)", removed ? removed : "");
	w = strlen(want);
	dir = opendir(path);
	if (!dir)
		t_hard("%s: %s", path, strerror(errno));
	while ((d = readdir(dir))) {
		ssize_t k;

		if (d->d_name[0] == '.')
			continue;
		if (!removed) {
			n++;
			continue;
		}
		snprintf(fdp, sizeof(fdp), "%s/%s", path, d->d_name);
		k = readlink(fdp, link, sizeof(link) - 1);
		if (k < 0)
			continue;
		link[k] = 0;
		if ((size_t)k >= w && !strcmp(link + k - w, want))
			n++;
	}
	closedir(dir);
	return n;
}

/* The fid the agent of another state directory gives "d" (same root). */
static void foreign_fid(struct t_agent *a, uint8_t fid[BCP_FID_LEN])
{
	static struct t_agent b;
	const char *root = a->root;
	char state[400];
	const char *extra[3] = { "--state-dir", state, NULL };
	struct bcp_msg rep;
	uint64_t broot;
	int fd;

	t_agent_init(&b, "agent_resume_b");
	snprintf(state, sizeof(state), "%s/state", b.dir);
	snprintf(b.root, sizeof(b.root), "%s", root);
	if (t_agent_start_args(&b, extra, 0) < 0)
		t_hard("second agent did not start (see %s)", b.log);
	fd = t_raw_connect(&b, 0);
	T_EQ(t_raw_handshake_client(fd, NULL, client, &broot, NULL), 0);
	T_EQ(named_msg(fd, BCP_OP_LOOKUP, 3, 0, broot, "d", &rep), 0);
	memcpy(fid, rep.u.entry_rep.entry.fid, BCP_FID_LEN);
	close(fd);
	T_EQ(t_agent_stop(&b), 0);
	/* its root is ours: only its own temp dir goes */
	snprintf(b.root, sizeof(b.root), "%s/root", b.dir);
	t_agent_cleanup(&b);
	t_agent_current(a);
}

static void test_resume(void)
{
	static struct t_agent a;
	char state[400], path[600];
	const char *extra[3] = { "--state-dir", state, NULL };
	struct bcp_entry d, f, u, e2;
	struct bcp_hello_rep hello;
	struct bcp_msg m, rep;
	struct bcp_rebind_one rb[4];
	struct bcp_attr at;
	uint8_t other[BCP_FID_LEN];
	uint64_t root, fh, dfh, cookie, fh2, dh;
	int seen[NFILES_DIR] = { 0 };
	static const char data[] = "resumed bytes, still here";
	struct bcp_seg seg;
	uint8_t *region;
	int fd, mfd, i, zero;

	t_agent_init(&a, "agent_resume");
	snprintf(state, sizeof(state), "%s/state", a.dir);
	start_by_handle(&a, extra);

	/* session 1 */
	fd = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake_client(fd, NULL, client, &root, &hello), 0);
	T_CHECK(hello.features & BCP_FEAT_RESUME);
	T_EQ(do_mkdir(fd, 10, 0, root, "d", &d), 0);
	for (zero = 1, i = 0; i < BCP_FID_LEN; i++)
		zero &= d.fid[i] == 0;
	T_CHECK(!zero);
	T_EQ(do_create(fd, 11, 0, d.handle, "f",
		       O_RDWR | O_CREAT | O_EXCL | O_TRUNC, &f, &fh), 0);
	snprintf(path, sizeof(path), "%s/d/f", a.root);
	{
		int wfd = open(path, O_WRONLY);

		T_CHECK(wfd >= 0);
		T_EQ(write(wfd, data, sizeof(data)), (long)sizeof(data));
		close(wfd);
	}
	T_EQ(do_create(fd, 12, 0, d.handle, "u", O_RDWR | O_CREAT, &u, &fh2),
	     0);
	T_EQ(do_release(fd, BCP_OP_RELEASE, u.handle, fh2), 0);
	T_EQ(named_msg(fd, BCP_OP_UNLINK, 13, 0, d.handle, "u", &rep), 0);
	for (i = 0; i < NFILES_DIR; i++) {
		char n[8];

		snprintf(n, sizeof(n), "e%02d", i);
		T_EQ(do_create(fd, 100 + (uint64_t)i, 0, d.handle, n,
			       O_RDWR | O_CREAT, &e2, &fh2), 0);
		T_EQ(do_release(fd, BCP_OP_RELEASE, e2.handle, fh2), 0);
	}
	T_EQ(do_open(fd, BCP_OP_OPENDIR, d.handle, 0, &dfh), 0);
	readdir_names(fd, d.handle, dfh, 0, 15, seen, &cookie);
	T_CHECK(cookie != 0);

	/* the agent dies with all of that held */
	kill9(&a);
	close(fd);
	foreign_fid(&a, other);
	if (t_agent_start_args(&a, extra, 0) < 0)
		t_hard("agent did not start again (see %s)", a.log);

	/* session 2: the same client */
	fd = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake_client(fd, NULL, client, &root, &hello), 0);
	T_CHECK(hello.features & BCP_FEAT_RESUME);
	rb[0] = (struct bcp_rebind_one){ .handle = d.handle, .nlookup = 1 };
	memcpy(rb[0].fid, d.fid, BCP_FID_LEN);
	rb[1] = (struct bcp_rebind_one){ .handle = f.handle, .nlookup = 2 };
	memcpy(rb[1].fid, f.fid, BCP_FID_LEN);
	rb[2] = (struct bcp_rebind_one){ .handle = 9000, .nlookup = 1 };
	memcpy(rb[2].fid, f.fid, BCP_FID_LEN);
	rb[2].fid[9] ^= 0x01;		/* forged: one bit of the handle */
	rb[3] = (struct bcp_rebind_one){ .handle = 9001, .nlookup = 1 };
	memcpy(rb[3].fid, other, BCP_FID_LEN);
	bcp_msg_init(&m, BCP_OP_REBIND, 20);
	m.u.rebind_req.count = 4;
	m.rebinds = rb;
	T_EQ(call(fd, &m, &rep), 0);
	T_EQ(rep.u.batch_rep.count, 4);
	T_EQ(bcp_msg_status(&rep, 0), 0);
	T_EQ(bcp_msg_status(&rep, 1), 0);
	T_EQ(bcp_msg_status(&rep, 2), -ESTALE);
	T_EQ(bcp_msg_status(&rep, 3), -ESTALE);
	T_EQ(getattr(fd, 9000, NULL), -ESTALE);
	/*
	 * u was unlinked: its handle is refused, and stays taken so that
	 * no new object is handed out under the value the host still holds
	 * for the old one.
	 */
	rb[0] = (struct bcp_rebind_one){ .handle = u.handle, .nlookup = 1 };
	memcpy(rb[0].fid, u.fid, BCP_FID_LEN);
	m.u.rebind_req.count = 1;
	T_EQ(call(fd, &m, &rep), 0);
	T_EQ(bcp_msg_status(&rep, 0), -ESTALE);
	for (i = 0; i < 8; i++) {
		char n[8];

		snprintf(n, sizeof(n), "n%d", i);
		T_EQ(do_mkdir(fd, 300 + (uint64_t)i, 0, root, n, &e2), 0);
		T_CHECK(e2.handle != u.handle && e2.handle != 9000);
	}
	T_EQ(getattr(fd, u.handle, NULL), -ESTALE);
	/* the same handle for another object: taken */
	rb[0].handle = f.handle;
	memcpy(rb[0].fid, d.fid, BCP_FID_LEN);
	m.u.rebind_req.count = 1;
	T_EQ(call(fd, &m, &rep), 0);
	T_EQ(bcp_msg_status(&rep, 0), -EEXIST);

	T_EQ(getattr(fd, d.handle, &at), 0);
	T_EQ(at.ino, d.attr.ino);
	T_CHECK(S_ISDIR(at.mode));
	T_EQ(getattr(fd, f.handle, &at), 0);
	T_EQ(at.ino, f.attr.ino);
	T_EQ(at.size, sizeof(data));

	/* the open file and the directory stream, under their old fhs */
	T_EQ(do_reopen(fd, f.handle, fh, O_RDWR, 0, &fh2), 0);
	T_EQ(fh2, fh);
	T_EQ(do_reopen(fd, f.handle, fh, O_RDWR, 0, &fh2), -EEXIST);
	T_EQ(do_reopen(fd, d.handle, dfh, 0, 1, &fh2), 0);
	T_EQ(fh2, dfh);
	readdir_names(fd, d.handle, dfh, cookie, 1000, seen, &cookie);
	for (i = 0; i < NFILES_DIR; i++)
		if (seen[i] != 1)
			t_fail("e%02d listed %d times across the restart", i,
			       seen[i]);

	/* READ through the reopened fh */
	mfd = memfd_create("t-resume", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	T_CHECK(mfd >= 0 && ftruncate(mfd, 65536) == 0);
	region = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, mfd,
		      0);
	T_CHECK(region != MAP_FAILED);
	T_EQ(t_raw_register_shm(fd, 21, 7, mfd, 65536), 0);
	close(mfd);
	seg = (struct bcp_seg){ fh, 0, 4096, 7, 0 };
	bcp_msg_init(&m, BCP_OP_BATCH_PULL, 22);
	m.u.batch_req.count = 1;
	m.segs = &seg;
	T_EQ(call(fd, &m, &rep), 0);
	T_EQ(bcp_msg_status(&rep, 0), (long)sizeof(data));
	T_CHECK(!memcmp(region, data, sizeof(data)));

	/* replays: answered as the first execution was */
	T_EQ(do_mkdir(fd, 10, BCP_HF_REPLAY, root, "d", &e2), 0);
	T_EQ(e2.attr.ino, d.attr.ino);
	T_EQ(getattr(fd, e2.handle, &at), 0);
	T_EQ(do_create(fd, 11, BCP_HF_REPLAY, d.handle, "f",
		       O_RDWR | O_CREAT | O_EXCL | O_TRUNC, &e2, &fh2), 0);
	T_EQ(e2.attr.ino, f.attr.ino);
	T_CHECK(fh2 != fh);
	T_EQ(e2.attr.size, sizeof(data));	/* not truncated again */
	T_EQ(do_release(fd, BCP_OP_RELEASE, e2.handle, fh2), 0);
	T_EQ(named_msg(fd, BCP_OP_UNLINK, 13, BCP_HF_REPLAY, d.handle, "u",
		       &rep), 0);
	/* not a replay: executed, and the name is taken */
	T_EQ(do_mkdir(fd, 10, 0, root, "d", &e2), -EEXIST);
	/* a replay whose first execution never happened just runs */
	T_EQ(do_mkdir(fd, 777, BCP_HF_REPLAY, root, "fresh", &e2), 0);
	snprintf(path, sizeof(path), "%s/fresh", a.root);
	{
		struct stat st;

		T_EQ(stat(path, &st), 0);
		T_CHECK(S_ISDIR(st.st_mode));
	}
	T_EQ(named_msg(fd, BCP_OP_UNLINK, 778, BCP_HF_REPLAY, d.handle, "u",
		       &rep), -ENOENT);
	dh = d.handle;
	T_EQ(do_release(fd, BCP_OP_RELEASEDIR, dh, dfh), 0);
	T_EQ(do_release(fd, BCP_OP_RELEASE, f.handle, fh), 0);
	close(fd);
	munmap(region, 65536);
	T_EQ(t_agent_stop(&a), 0);
	t_agent_cleanup(&a);
}

static void test_fd_bound(void)
{
	static uint64_t handles[NLOOKUPS];
	const char *extra[] = { "--state-dir", "none", "--fd-cache", "64",
				"--max-handles", "65536", NULL };
	static struct t_agent a;
	struct bcp_msg rep;
	char path[600], n[32];
	uint64_t root;
	int fd, i, nfd;

	t_agent_init(&a, "agent_resume_fds");
	for (i = 0; i < NLOOKUPS; i++) {
		int cfd;

		snprintf(path, sizeof(path), "%s/f%05d", a.root, i);
		cfd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (cfd < 0)
			t_hard("%s: %s", path, strerror(errno));
		close(cfd);
	}
	start_by_handle(&a, extra);
	fd = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake_client(fd, NULL, client, &root, NULL), 0);
	for (i = 0; i < NLOOKUPS; i++) {
		snprintf(n, sizeof(n), "f%05d", i);
		T_EQ(named_msg(fd, BCP_OP_LOOKUP, 1000 + (uint64_t)i, 0, root,
			       n, &rep), 0);
		handles[i] = rep.u.entry_rep.entry.handle;
	}
	nfd = count_fds(a.pid, NULL);
	if (nfd >= FD_BOUND)
		t_fail("%d descriptors after %d lookups with --fd-cache 64",
		       nfd, NLOOKUPS);
	for (i = 0; i < NLOOKUPS; i++)
		T_EQ(getattr(fd, handles[i], NULL), 0);
	nfd = count_fds(a.pid, NULL);
	if (nfd >= FD_BOUND)
		t_fail("%d descriptors after GETATTR of every handle", nfd);
	close(fd);
	T_EQ(t_agent_stop(&a), 0);
	t_agent_cleanup(&a);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_reopen_first(void)
{
	static struct t_agent a;
	char state[400];
	const char *extra[3] = { "--state-dir", state, NULL };
	struct bcp_rebind_one rb;
	struct bcp_entry g;
	struct bcp_msg m, rep;
	uint64_t root1, root2, fh, fh2, t0;
	int s1, s2, n;

	t_agent_init(&a, "agent_resume_reopen");
	snprintf(state, sizeof(state), "%s/state", a.dir);
	start_by_handle(&a, extra);
	/* session 1 opens a file, which is then removed */
	s1 = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake_client(s1, NULL, client, &root1, NULL), 0);
	T_EQ(do_create(s1, 10, 0, root1, "gone-while-open", O_RDWR | O_CREAT,
		       &g, &fh), 0);
	T_EQ(named_msg(s1, BCP_OP_UNLINK, 11, 0, root1, "gone-while-open",
		       &rep), 0);
	T_EQ(count_fds(a.pid, "gone-while-open"), 1);

	/* the same host, reconnected, while session 1 still stands */
	s2 = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake_client(s2, NULL, client, &root2, NULL), 0);
	rb = (struct bcp_rebind_one){ .handle = g.handle, .nlookup = 1 };
	memcpy(rb.fid, g.fid, BCP_FID_LEN);
	bcp_msg_init(&m, BCP_OP_REBIND, 20);
	m.u.rebind_req.count = 1;
	m.rebinds = &rb;
	T_EQ(call(s2, &m, &rep), 0);
	T_EQ(bcp_msg_status(&rep, 0), 0);
	T_EQ(do_reopen(s2, g.handle, fh, O_RDWR, 0, &fh2), 0);
	T_EQ(fh2, fh);

	/* only now does the agent see session 1 go */
	close(s1);
	usleep(300000);
	T_EQ(do_release(s2, BCP_OP_RELEASE, g.handle, fh2), 0);
	{
		/* and forgets it, as the kernel does after the last close */
		struct bcp_forget_one fo = { g.handle, 1 };

		bcp_msg_init(&m, BCP_OP_FORGET, 21);
		m.u.forget_req.count = 1;
		m.forgets = &fo;
		T_EQ(call(s2, &m, &rep), 0);
	}
	t0 = now_ms();
	while ((n = count_fds(a.pid, "gone-while-open")) > 0 &&
	       now_ms() - t0 < 3000)
		usleep(20000);
	if (n)
		t_fail("the agent holds %d descriptor(s) of a removed file "
		       "after its host closed it (reopened before the old "
		       "session ended)", n);
	close(s2);
	T_EQ(t_agent_stop(&a), 0);
	T_CHECK(!t_log_has(&a, "closed unclaimed") ||
		t_log_has(&a, " 0 closed unclaimed"));
	t_agent_cleanup(&a);
}

int main(void)
{
	test_resume();
	test_fd_bound();
	test_reopen_first();
	return 0;
}
