/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_watch.c - what other processes on the agent's machine change
 * beneath the root reaches the sessions that hold it.  A real agent with
 * --watch yes; a session holds the root, a file and a directory; echo >>,
 * chmod, touch, rm and mv run by the shell in the root: the session
 * receives the matching NOTIFY frames.  A second session writes the file
 * and changes its mode through the agent, with every operation through
 * io_uring (--inline-max 0, --meta-io uring), so that the io_uring worker
 * threads act too: the watcher reports none of it (the agent's own
 * changes reach the holders from the session that made them).  Then
 * --watch no reports nothing, and an agent without CAP_SYS_ADMIN refuses
 * --watch yes in one line and starts with --watch auto.
 *
 * Skipped (77) without CAP_SYS_ADMIN or where the kernel or the file
 * system of $TMPDIR cannot be watched with a fanotify filesystem mark.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#include "harness.h"

#define T_WAIT_MS	5000		/* for one NOTIFY */
#define T_QUIET_MS	1000		/* for the absence of one */

static uint8_t buf[BCP_FRAME_MAX];

static int has_cap(int cap)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d) < 0)
		return 0;
	return !!(d[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap));
}

/* Why this machine cannot run the test, or NULL. */
static const char *cannot_watch(const char *dir)
{
	static char why[512];
	int fd;

	if (!has_cap(CAP_SYS_ADMIN))
		return "no CAP_SYS_ADMIN: fanotify filesystem marks need it";
	fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_REPORT_FID |
			   FAN_REPORT_DFID_NAME, O_RDONLY);
	if (fd < 0) {
		snprintf(why, sizeof(why), "fanotify_init with names: %s",
			 strerror(errno));
		return why;
	}
	if (fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
			  FAN_MODIFY, AT_FDCWD, dir) < 0) {
		snprintf(why, sizeof(why), "a filesystem mark on %s: %s", dir,
			 strerror(errno));
		close(fd);
		return why;
	}
	close(fd);
	return NULL;
}

static void __attribute__((format(printf, 1, 2))) sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		t_hard("'%s' failed", cmd);
}

/*
 * Send m and wait for its reply; NOTIFY frames that come first are
 * counted in *notifies and dropped.  The reply's status.
 */
static int call(int fd, struct bcp_msg *m, struct bcp_msg *rep,
		unsigned int *notifies)
{
	T_EQ(t_raw_send(fd, m), 0);
	for (;;) {
		T_EQ(t_raw_recv(fd, rep, buf, sizeof(buf), T_WAIT_MS), 0);
		if (rep->hdr.opcode != BCP_OP_NOTIFY)
			break;
		(*notifies)++;
	}
	T_EQ(rep->hdr.req_id, m->hdr.req_id);
	return rep->hdr.status;
}

static uint64_t lookup(int fd, uint64_t req, uint64_t parent,
		       const char *name)
{
	struct bcp_msg m, rep;
	unsigned int skipped = 0;

	bcp_msg_init(&m, BCP_OP_LOOKUP, req);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	T_EQ(call(fd, &m, &rep, &skipped), 0);
	return rep.u.entry_rep.entry.handle;
}

/* The next NOTIFY within timeout_ms: 0, or -ETIMEDOUT. */
static int next_notify(int fd, int timeout_ms, struct bcp_notify_req *n,
		       char *name)
{
	struct bcp_msg m;
	int ret;

	ret = t_raw_recv(fd, &m, buf, sizeof(buf), timeout_ms);
	if (ret == -ETIMEDOUT || ret == -EAGAIN)
		return -ETIMEDOUT;
	if (ret < 0)
		t_fail("the holding session: %s", strerror(-ret));
	if (m.hdr.opcode != BCP_OP_NOTIFY)
		t_fail("the holding session got %s, expected only NOTIFY",
		       bcp_op_name(m.hdr.opcode));
	*n = m.u.notify_req;
	memcpy(name, m.name ? m.name : "", n->name_len);
	name[n->name_len] = '\0';
	return 0;
}

/*
 * Wait for a NOTIFY of kind about handle (named name when not NULL, of
 * child when not 0; for INODE, about the data when data, the attributes
 * only otherwise); other NOTIFYs on the way are skipped.
 */
static void expect(int fd, const char *what, uint32_t kind, uint64_t handle,
		   const char *name, uint64_t child, int data)
{
	struct bcp_notify_req n;
	char got[BCP_NAME_MAX + 1];

	for (;;) {
		if (next_notify(fd, T_WAIT_MS, &n, got) < 0)
			t_fail("%s: no NOTIFY (kind %u, handle %llu, '%s') "
			       "within %d ms", what, kind,
			       (unsigned long long)handle, name ? name : "",
			       T_WAIT_MS);
		if (n.kind != kind || n.handle != handle)
			continue;
		if (name && strcmp(name, got))
			continue;
		if (child && n.child != child)
			continue;
		if (kind == BCP_NOTIFY_INODE && data != (n.offset >= 0))
			continue;
		return;
	}
}

/* NOTIFYs about handle (0: any) within T_QUIET_MS. */
static int count_about(int fd, uint64_t handle)
{
	struct bcp_notify_req n;
	char got[BCP_NAME_MAX + 1];
	int count = 0;

	while (next_notify(fd, T_QUIET_MS, &n, got) == 0)
		if (!handle || n.handle == handle || n.child == handle)
			count++;
	return count;
}

/* Each agent's log on its own: the harness appends. */
static void fresh_log(struct t_agent *a)
{
	if (truncate(a->log, 0) < 0 && errno != ENOENT)
		t_hard("truncate %s: %s", a->log, strerror(errno));
}

/*
 * Writes and a chmod through a session: the agent's own changes.  That
 * session is their origin, so nothing may come back to it: a NOTIFY
 * there is the watcher reporting the agent's own change.
 */
static void through_the_agent(struct t_agent *a)
{
	const size_t rlen = 1 << 16;
	struct bcp_msg m, rep;
	struct bcp_seg seg;
	unsigned int notifies = 0;
	uint64_t root, fh, h;
	uint8_t *region;
	int fd, mfd, i;

	fd = t_raw_connect(a, 0);
	T_EQ(t_raw_handshake(fd, a->secret, &root, NULL), 0);
	mfd = memfd_create("t-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, (off_t)rlen) < 0)
		t_hard("memfd: %s", strerror(errno));
	region = mmap(NULL, rlen, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (region == MAP_FAILED)
		t_hard("mmap: %s", strerror(errno));
	T_EQ(t_raw_register_shm(fd, 3, 7, mfd, rlen), 0);
	close(mfd);
	h = lookup(fd, 4, root, "f");
	bcp_msg_init(&m, BCP_OP_OPEN, 5);
	m.u.open_req.handle = h;
	m.u.open_req.flags = O_RDWR;
	T_EQ(call(fd, &m, &rep, &notifies), 0);
	fh = rep.u.open_rep.fh;
	for (i = 0; i < 4; i++) {
		memset(region, 'a' + i, 4096);
		seg = (struct bcp_seg){ fh, (uint64_t)i * 4096, 4096, 7, 0 };
		bcp_msg_init(&m, BCP_OP_BATCH_PUSH, (uint64_t)(20 + i));
		m.u.batch_req.count = 1;
		m.segs = &seg;
		T_EQ(call(fd, &m, &rep, &notifies), 0);
		T_EQ(rep.u.batch_rep.count, 1);
		T_EQ(bcp_msg_status(&rep, 0), 4096);
	}
	bcp_msg_init(&m, BCP_OP_SETATTR, 30);
	m.u.setattr_req.handle = h;
	m.u.setattr_req.valid = BCP_SETATTR_MODE;
	m.u.setattr_req.mode = 0640;
	T_EQ(call(fd, &m, &rep, &notifies), 0);
	notifies += (unsigned int)count_about(fd, 0);
	if (notifies)
		t_fail("the session that wrote and chmodded f got %u NOTIFY "
		       "frames about its own changes", notifies);
	close(fd);
	munmap(region, rlen);
}

int main(void)
{
	const char *watch_yes[] = { "--watch", "yes", "--inline-max", "0",
				    "--meta-io", "uring", "--log-level",
				    "debug", NULL };
	const char *watch_no[] = { "--watch", "no", NULL };
	const char *why;
	struct t_agent a;
	uint64_t root, hf, hd, hnew;
	char line[128];
	int fd;

	t_agent_init(&a, "agent_watch");
	why = cannot_watch(a.root);
	if (why) {
		fprintf(stderr, "SKIP: %s\n", why);
		t_agent_cleanup(&a);
		return T_SKIP;
	}
	sh("echo hello > %s/f && mkdir %s/d", a.root, a.root);
	if (t_agent_start_args(&a, watch_yes, 0) < 0)
		t_fail("the agent did not start with --watch yes (see %s)",
		       a.log);
	T_CHECK(t_log_has(&a, "watching "));

	/* the holder: the root, f and d */
	fd = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake(fd, a.secret, &root, NULL), 0);
	hf = lookup(fd, 2, root, "f");
	hd = lookup(fd, 3, root, "d");

	/* the agent's own changes: the watcher reports none */
	through_the_agent(&a);
	T_CHECK(count_about(fd, hf) <= 5);
	snprintf(line, sizeof(line), "by pid %d\n", (int)a.pid);
	if (t_log_has(&a, line))
		t_fail("the watcher reported a change the agent made itself "
		       "(see %s)", a.log);

	/* other processes */
	sh("echo more >> %s/f", a.root);
	expect(fd, "echo >> f", BCP_NOTIFY_INODE, hf, NULL, 0, 1);
	sh("chmod 600 %s/f", a.root);
	expect(fd, "chmod f", BCP_NOTIFY_INODE, hf, NULL, 0, 0);
	sh("touch %s/d/new", a.root);
	expect(fd, "touch d/new", BCP_NOTIFY_ENTRY, hd, "new", 0, 0);
	hnew = lookup(fd, 4, hd, "new");
	sh("rm %s/d/new", a.root);
	expect(fd, "rm d/new", BCP_NOTIFY_DELETE, hd, "new", hnew, 0);
	sh("mv %s/f %s/d/g", a.root, a.root);
	expect(fd, "mv f d/g (from)", BCP_NOTIFY_DELETE, root, "f", hf, 0);
	expect(fd, "mv f d/g (to)", BCP_NOTIFY_ENTRY, hd, "g", 0, 0);
	close(fd);
	T_EQ(t_agent_stop(&a), 0);

	/* --watch no: nothing */
	fresh_log(&a);
	if (t_agent_start_args(&a, watch_no, 0) < 0)
		t_fail("the agent did not start with --watch no (see %s)",
		       a.log);
	T_CHECK(t_log_has(&a, "not watching"));
	fd = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake(fd, a.secret, &root, NULL), 0);
	hd = lookup(fd, 2, root, "d");
	sh("touch %s/d/other", a.root);
	T_EQ(count_about(fd, hd), 0);
	close(fd);
	T_EQ(t_agent_stop(&a), 0);

	/*
	 * Without CAP_SYS_ADMIN (dropped from the bounding set, so the
	 * agent the harness executes does not get it): --watch yes is one
	 * clear line and no agent, --watch auto an agent that says what
	 * hosts are guaranteed.
	 */
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) < 0) {
		fprintf(stderr, "not checked without CAP_SYS_ADMIN: "
			"PR_CAPBSET_DROP: %s\n", strerror(errno));
	} else {
		const char *yes[] = { "--watch", "yes", NULL };
		const char *au[] = { "--watch", "auto", NULL };

		fresh_log(&a);
		T_EQ(t_agent_start_args(&a, yes, 0), -EINVAL);
		T_CHECK(t_log_has(&a, "cannot watch"));
		T_CHECK(t_log_has(&a, "CAP_SYS_ADMIN"));
		fresh_log(&a);
		T_EQ(t_agent_start_args(&a, au, 0), 0);
		T_CHECK(t_log_has(&a, "not watching"));
		T_CHECK(t_log_has(&a, "attribute timeout"));
		T_EQ(t_agent_stop(&a), 0);
	}

	t_agent_cleanup(&a);
	return 0;
}
