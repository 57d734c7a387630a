/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_notify.c - NOTIFY (doc/protocol.md section 6.10) on a real agent
 * with two workers and raw sessions that read the frames themselves.
 *
 * Session A changes things; B (on the other worker) and C (on A's worker)
 * hold the file, the directories and the root, and negotiated
 * BCP_FEAT_NOTIFY; N holds the same without the feature.  After each
 * change B and C must get exactly the events the change owes them, with
 * their own handles and the names; A never gets its own, N nothing.  Then
 * a session that never reads is flooded with events: the agent's memory
 * stays bounded, the publisher is never held up, and the session finds a
 * RESET when it reads at last.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "harness.h"

#define EV_MAX		64
#define FLOOD		40000	/* renames: two events each */

struct ev {
	uint32_t kind;
	uint64_t handle, child;
	int64_t offset, length;
	char name[256];
};

struct sess {
	const char *tag;
	int fd;
	uint64_t root;
	uint64_t req;
	struct ev ev[EV_MAX];
	unsigned int nev;
	unsigned long frames;		/* NOTIFY frames seen */
	unsigned long resets;
};

static struct t_agent a;
static uint8_t fbuf[BCP_FRAME_MAX];

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: agent_notify took over 120 s\n";

	(void)sig;
	if (a.pid > 0)
		kill(a.pid, SIGKILL);
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void record(struct sess *s, const struct bcp_msg *m)
{
	const struct bcp_notify_req *n = &m->u.notify_req;
	struct ev *e;

	if (m->hdr.flags & BCP_HF_REPLY || m->hdr.req_id != 0)
		t_fail("%s: unexpected frame %s req %llu", s->tag,
		       bcp_op_name(m->hdr.opcode),
		       (unsigned long long)m->hdr.req_id);
	s->frames++;
	if (n->kind == BCP_NOTIFY_RESET)
		s->resets++;
	if (s->nev == EV_MAX)
		return;
	e = &s->ev[s->nev++];
	memset(e, 0, sizeof(*e));
	e->kind = n->kind;
	e->handle = n->handle;
	e->child = n->child;
	e->offset = n->offset;
	e->length = n->length;
	if (n->name_len)
		memcpy(e->name, m->name, n->name_len);
}

/* Send m; keep the NOTIFY frames that come before its reply. */
static int call(struct sess *s, struct bcp_msg *m, struct bcp_msg *rep)
{
	int ret;

	m->hdr.req_id = ++s->req;
	if (t_raw_send(s->fd, m) < 0)
		t_fail("%s: send %s", s->tag, bcp_op_name(m->hdr.opcode));
	for (;;) {
		ret = t_raw_recv(s->fd, rep, fbuf, sizeof(fbuf), 10000);
		if (ret < 0)
			t_fail("%s: no reply to %s: %s", s->tag,
			       bcp_op_name(m->hdr.opcode), strerror(-ret));
		if (rep->hdr.opcode != BCP_OP_NOTIFY)
			break;
		record(s, rep);
	}
	T_EQ(rep->hdr.req_id, s->req);
	return rep->hdr.status;
}

/* Read NOTIFY frames until none came for quiet_ms. */
static void collect(struct sess *s, int quiet_ms)
{
	struct bcp_msg m;
	struct pollfd p = { .fd = s->fd, .events = POLLIN };

	while (poll(&p, 1, quiet_ms) == 1) {
		if (t_raw_recv(s->fd, &m, fbuf, sizeof(fbuf), 5000) < 0)
			t_fail("%s: connection lost", s->tag);
		if (m.hdr.opcode != BCP_OP_NOTIFY)
			t_fail("%s: unexpected %s", s->tag,
			       bcp_op_name(m.hdr.opcode));
		record(s, &m);
	}
}

static void sess_open(struct sess *s, const char *tag, int notify)
{
	static const uint8_t none[BCP_CLIENT_ID_LEN];
	struct bcp_hello_rep h;
	uint64_t want = BCP_FEAT_ALL & ~BCP_FEAT_BUSY &
			~(notify ? 0 : BCP_FEAT_NOTIFY);

	memset(s, 0, sizeof(*s));
	s->tag = tag;
	s->req = 100;
	s->fd = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake_features(s->fd, a.secret, none, want, &s->root,
				      &h), 0);
	T_EQ(!!(h.features & BCP_FEAT_NOTIFY), notify);
}

static uint64_t lookup(struct sess *s, uint64_t parent, const char *name)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_LOOKUP, 0);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	if (call(s, &m, &rep) != 0)
		t_fail("%s: lookup %s: %d", s->tag, name, rep.hdr.status);
	return rep.u.entry_rep.entry.handle;
}

/* Take the event that matches (name NULL: none) off s's list; fail if
 * there is none. */
static void expect(struct sess *s, uint32_t kind, uint64_t handle,
		   uint64_t child, const char *name, int64_t off,
		   int64_t len, int line)
{
	unsigned int i;

	for (i = 0; i < s->nev; i++) {
		struct ev *e = &s->ev[i];

		if (e->kind != kind || e->handle != handle ||
		    e->child != child || strcmp(e->name, name ? name : ""))
			continue;
		if (kind == BCP_NOTIFY_INODE &&
		    (e->offset != off || e->length != len))
			continue;
		s->ev[i] = s->ev[--s->nev];
		return;
	}
	fprintf(stderr, "%s has %u events:\n", s->tag, s->nev);
	for (i = 0; i < s->nev; i++)
		fprintf(stderr, "  kind %u handle %llu child %llu '%s' "
			"[%lld +%lld]\n", s->ev[i].kind,
			(unsigned long long)s->ev[i].handle,
			(unsigned long long)s->ev[i].child, s->ev[i].name,
			(long long)s->ev[i].offset,
			(long long)s->ev[i].length);
	t_fail("line %d: %s did not get kind %u for handle %llu '%s' "
	       "[%lld +%lld]", line, s->tag, kind,
	       (unsigned long long)handle, name ? name : "",
	       (long long)off, (long long)len);
}

#define EXPECT(s, k, h, c, n, o, l) expect(s, k, h, c, n, o, l, __LINE__)

static void expect_no_more(struct sess *s, int line)
{
	if (s->nev)
		t_fail("line %d: %s got %u more events (first: kind %u "
		       "handle %llu '%s')", line, s->tag, s->nev,
		       s->ev[0].kind, (unsigned long long)s->ev[0].handle,
		       s->ev[0].name);
}

#define NO_MORE(s) expect_no_more(s, __LINE__)

/* The handles each holder has. */
struct held {
	uint64_t root, f, d, g, h;
};

static long agent_rss_kb(void)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)a.pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void name_op(struct sess *s, uint16_t op, uint64_t parent,
		    const char *name)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, op, 0);
	m.name = name;
	switch (op) {
	case BCP_OP_CREATE:
		m.u.create_req.parent = parent;
		m.u.create_req.name_len = (uint16_t)strlen(name);
		m.u.create_req.mode = S_IFREG | 0644;
		m.u.create_req.flags = O_RDWR | O_EXCL;
		break;
	case BCP_OP_MKDIR:
		m.u.mkdir_req.parent = parent;
		m.u.mkdir_req.name_len = (uint16_t)strlen(name);
		m.u.mkdir_req.mode = 0755;
		break;
	default:
		m.u.named_req.parent = parent;
		m.u.named_req.name_len = (uint16_t)strlen(name);
		break;
	}
	if (call(s, &m, &rep) != 0)
		t_fail("%s: %s %s: %d", s->tag, bcp_op_name(op), name,
		       rep.hdr.status);
}

static int rename_op(struct sess *s, uint64_t p, const char *name,
		     uint64_t np, const char *newname)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_RENAME, 0);
	m.u.rename_req.parent = p;
	m.u.rename_req.name_len = (uint16_t)strlen(name);
	m.u.rename_req.newparent = np;
	m.u.rename_req.newname_len = (uint16_t)strlen(newname);
	m.name = name;
	m.name2 = newname;
	return call(s, &m, &rep);
}

static void settle(struct sess **all, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		collect(all[i], 300);
}

static void changes(void)
{
	static struct sess A, B, C, N;
	struct sess *holders[] = { &B, &C };
	struct sess *all[] = { &A, &B, &C, &N };
	struct held hb, hc;
	struct bcp_msg m, rep;
	struct bcp_seg seg[3];
	uint64_t fa, da, fh, sub;
	uint8_t *region;
	unsigned int i;
	int mfd, xattr;

	/* round robin over two workers: A, C on one, B, N on the other */
	sess_open(&A, "A", 1);
	sess_open(&B, "B", 1);
	sess_open(&C, "C", 1);
	sess_open(&N, "N", 0);
	hb.root = B.root;
	hc.root = C.root;
	hb.f = lookup(&B, B.root, "f");
	hb.d = lookup(&B, B.root, "d");
	hc.f = lookup(&C, C.root, "f");
	hc.d = lookup(&C, C.root, "d");
	lookup(&N, N.root, "f");
	lookup(&N, N.root, "d");

	mfd = memfd_create("t-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, 1 << 20) < 0)
		t_hard("memfd: %s", strerror(errno));
	region = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED,
		      mfd, 0);
	if (region == MAP_FAILED)
		t_hard("mmap: %s", strerror(errno));
	memset(region, 'x', 1 << 20);
	T_EQ(t_raw_register_shm(A.fd, 3, 7, mfd, 1 << 20), 0);
	close(mfd);
	fa = lookup(&A, A.root, "f");
	da = lookup(&A, A.root, "d");
	bcp_msg_init(&m, BCP_OP_OPEN, 0);
	m.u.open_req.handle = fa;
	m.u.open_req.flags = O_RDWR;
	T_EQ(call(&A, &m, &rep), 0);
	fh = rep.u.open_rep.fh;

	/* one write of three segments: one event per holder, the hull */
	seg[0] = (struct bcp_seg){ fh, 0, 4096, 7, 0 };
	seg[1] = (struct bcp_seg){ fh, 8192, 4096, 7, 8192 };
	seg[2] = (struct bcp_seg){ fh, 4096, 100, 7, 4096 };
	bcp_msg_init(&m, BCP_OP_BATCH_PUSH, 0);
	m.u.batch_req.count = 3;
	m.segs = seg;
	T_EQ(call(&A, &m, &rep), 0);
	T_EQ(rep.u.batch_rep.count, 3);
	T_EQ(bcp_msg_status(&rep, 1), 4096);
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.f, 0, NULL, 0, 12288);
	EXPECT(&C, BCP_NOTIFY_INODE, hc.f, 0, NULL, 0, 12288);
	for (i = 0; i < 2; i++)
		NO_MORE(holders[i]);
	printf("ok 1 - a write: one INODE with the range, to B and C\n");

	/* SETATTR size, then an xattr */
	bcp_msg_init(&m, BCP_OP_SETATTR, 0);
	m.u.setattr_req.handle = fa;
	m.u.setattr_req.valid = BCP_SETATTR_SIZE;
	m.u.setattr_req.size = 100;
	T_EQ(call(&A, &m, &rep), 0);
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.f, 0, NULL, 100, 0);
	EXPECT(&C, BCP_NOTIFY_INODE, hc.f, 0, NULL, 100, 0);
	bcp_msg_init(&m, BCP_OP_SETXATTR, 0);
	m.u.setxattr_req.handle = fa;
	m.u.setxattr_req.name_len = 6;
	m.name = "user.k";
	m.u.setxattr_req.value_len = 1;
	m.data = "v";
	m.data_len = 1;
	xattr = call(&A, &m, &rep);
	settle(all, 4);
	if (xattr == 0) {
		EXPECT(&B, BCP_NOTIFY_INODE, hb.f, 0, NULL, -1, 0);
		EXPECT(&C, BCP_NOTIFY_INODE, hc.f, 0, NULL, -1, 0);
	}
	/* FALLOCATE runs on the blocking pool; OPEN with O_TRUNC */
	bcp_msg_init(&m, BCP_OP_FALLOCATE, 0);
	m.u.fallocate_req.handle = fa;
	m.u.fallocate_req.fh = fh;
	m.u.fallocate_req.offset = 4096;
	m.u.fallocate_req.length = 8192;
	T_EQ(call(&A, &m, &rep), 0);
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.f, 0, NULL, 4096, 8192);
	EXPECT(&C, BCP_NOTIFY_INODE, hc.f, 0, NULL, 4096, 8192);
	bcp_msg_init(&m, BCP_OP_OPEN, 0);
	m.u.open_req.handle = fa;
	m.u.open_req.flags = O_RDWR | O_TRUNC;
	T_EQ(call(&A, &m, &rep), 0);
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.f, 0, NULL, 0, 0);
	EXPECT(&C, BCP_NOTIFY_INODE, hc.f, 0, NULL, 0, 0);
	for (i = 0; i < 2; i++)
		NO_MORE(holders[i]);
	printf("ok 2 - SETATTR, SETXATTR%s, FALLOCATE, OPEN O_TRUNC: "
	       "INODE\n", xattr ? " (no user xattrs here)" : "");

	/* new names */
	name_op(&A, BCP_OP_CREATE, A.root, "g");
	name_op(&A, BCP_OP_MKDIR, da, "sub");
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_ENTRY, hb.root, 0, "g", 0, 0);
	EXPECT(&B, BCP_NOTIFY_ENTRY, hb.d, 0, "sub", 0, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.root, 0, "g", 0, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.d, 0, "sub", 0, 0);
	for (i = 0; i < 2; i++)
		NO_MORE(holders[i]);
	printf("ok 3 - CREATE and MKDIR: ENTRY in the parent\n");

	/* a move between directories: both names, and the moved object */
	sub = lookup(&B, hb.d, "sub");
	T_EQ(rename_op(&A, da, "sub", A.root, "sub2"), 0);
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_ENTRY, hb.d, 0, "sub", 0, 0);
	EXPECT(&B, BCP_NOTIFY_ENTRY, hb.root, 0, "sub2", 0, 0);
	EXPECT(&B, BCP_NOTIFY_INODE, sub, 0, NULL, -1, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.d, 0, "sub", 0, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.root, 0, "sub2", 0, 0);
	for (i = 0; i < 2; i++)
		NO_MORE(holders[i]);
	printf("ok 4 - RENAME: ENTRY for both names, INODE of the moved\n");

	/* a rename over f: f is gone for who holds it */
	hb.g = lookup(&B, hb.root, "g");
	T_EQ(rename_op(&A, A.root, "g", A.root, "f"), 0);
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_ENTRY, hb.root, 0, "g", 0, 0);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.g, 0, NULL, -1, 0);
	EXPECT(&B, BCP_NOTIFY_DELETE, hb.root, hb.f, "f", 0, 0);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.f, 0, NULL, -1, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.root, 0, "g", 0, 0);
	EXPECT(&C, BCP_NOTIFY_DELETE, hc.root, hc.f, "f", 0, 0);
	EXPECT(&C, BCP_NOTIFY_INODE, hc.f, 0, NULL, -1, 0);
	for (i = 0; i < 2; i++)
		NO_MORE(holders[i]);
	printf("ok 5 - RENAME over a name: DELETE of the replaced\n");

	/* a hard link, then the unlink of one of its names: not the end */
	bcp_msg_init(&m, BCP_OP_LINK, 0);
	m.u.link_req.handle = lookup(&A, A.root, "f");
	m.u.link_req.newparent = da;
	m.u.link_req.name_len = 2;
	m.name = "f2";
	T_EQ(call(&A, &m, &rep), 0);
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_ENTRY, hb.d, 0, "f2", 0, 0);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.g, 0, NULL, -1, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.d, 0, "f2", 0, 0);
	name_op(&A, BCP_OP_UNLINK, A.root, "f");
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_ENTRY, hb.root, 0, "f", 0, 0);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.g, 0, NULL, -1, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.root, 0, "f", 0, 0);
	for (i = 0; i < 2; i++)
		NO_MORE(holders[i]);
	printf("ok 6 - LINK, and UNLINK of a name with another: ENTRY\n");

	/* the last name: DELETE to B (holds d and the file), ENTRY to C */
	name_op(&A, BCP_OP_UNLINK, da, "f2");
	settle(all, 4);
	EXPECT(&B, BCP_NOTIFY_DELETE, hb.d, hb.g, "f2", 0, 0);
	EXPECT(&B, BCP_NOTIFY_INODE, hb.g, 0, NULL, -1, 0);
	EXPECT(&C, BCP_NOTIFY_ENTRY, hc.d, 0, "f2", 0, 0);
	for (i = 0; i < 2; i++)
		NO_MORE(holders[i]);
	printf("ok 7 - UNLINK of the last name: DELETE, ENTRY\n");

	/* the changer and the session without the feature: nothing */
	T_EQ(A.frames, 0);
	T_EQ(N.frames, 0);
	printf("ok 8 - nothing to the changer nor to a session without "
	       "the feature\n");
	for (i = 0; i < 4; i++)
		close(all[i]->fd);
	munmap(region, 1 << 20);
}

/* A session that never reads, and a publisher that must not wait. */
static void flood(void)
{
	static struct sess A, S;
	long rss0, rss1;
	unsigned int i;

	sess_open(&A, "A", 1);
	sess_open(&S, "S", 1);
	name_op(&A, BCP_OP_CREATE, A.root, "r0");
	rss0 = agent_rss_kb();
	for (i = 0; i < FLOOD; i++)
		T_EQ(rename_op(&A, A.root, i % 2 ? "r1" : "r0", A.root,
			       i % 2 ? "r0" : "r1"), 0);
	rss1 = agent_rss_kb();
	printf("# agent RSS %ld kB before, %ld kB after %u events\n", rss0,
	       rss1, 2 * FLOOD);
	if (rss0 > 0 && rss1 > 0 && rss1 - rss0 > 6 * 1024)
		t_fail("the agent grew by %ld kB for a session that does "
		       "not read", rss1 - rss0);
	collect(&S, 500);
	printf("# S read %lu frames, %lu RESET\n", S.frames, S.resets);
	T_CHECK(S.resets >= 1);
	T_CHECK(S.frames < 2 * FLOOD);
	T_EQ(A.frames, 0);
	/* S reads again: events flow again after the RESET */
	S.nev = 0;
	name_op(&A, BCP_OP_MKDIR, A.root, "after");
	collect(&S, 300);
	EXPECT(&S, BCP_NOTIFY_ENTRY, S.root, 0, "after", 0, 0);
	NO_MORE(&S);
	printf("ok 9 - a session that does not read: bounded, then RESET\n");
	close(A.fd);
	close(S.fd);
}

int main(void)
{
	char path[600];
	int fd;

	signal(SIGALRM, on_alarm);
	t_agent_init(&a, "agent_notify");
	snprintf(path, sizeof(path), "%s/f", a.root);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, 65536) < 0)
		t_hard("create %s: %s", path, strerror(errno));
	close(fd);
	snprintf(path, sizeof(path), "%s/d", a.root);
	if (mkdir(path, 0755) < 0)
		t_hard("mkdir %s: %s", path, strerror(errno));
	a.extra[0] = "--workers";
	a.extra[1] = "2";
	t_agent_start(&a);
	alarm(120);
	printf("1..9\n");
	changes();
	flood();
	alarm(0);
	T_EQ(t_agent_stop(&a), 0);
	T_CHECK(t_log_has(&a, "NOTIFY"));
	t_agent_cleanup(&a);
	return 0;
}
