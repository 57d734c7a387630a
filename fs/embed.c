/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * embed.c - the private agent behind "local:DIR".
 *
 * The daemon makes a private directory (mode 0700, under $XDG_RUNTIME_DIR
 * or /tmp), starts bluecache-agent on DIR listening on a unix socket in it
 * and waits for the agent to write "ready" to a pipe (--ready-fd).  The
 * agent gets PR_SET_PDEATHSIG so that it never outlives the daemon; on
 * unmount the daemon stops it with SIGTERM and removes the directory.  The
 * directory also holds the agent's --state-dir (its handle key and reply
 * cache), kept for the life of the mount: when the agent dies while the
 * mount is up, a watcher thread logs how and starts it again with the
 * same arguments on the same socket (at most BCFS_EMBED_RESTARTS starts
 * in BCFS_EMBED_RESTART_WINDOW, then it waits), and the client library
 * reconnects and resumes the mount's handles and open files there.  The
 * agent's stderr is a pipe the daemon forwards line by line to its own log,
 * so that it follows the daemon to syslog once detached and never holds
 * the caller's terminal or pipe open.
 *
 * The agent binary is $BLUECACHE_AGENT; else, for a daemon run from its
 * build tree, the agent built beside it; else SBINDIR/bluecache-agent.
 *
 * The agent pins its staging slots with io_uring, which counts them
 * against RLIMIT_MEMLOCK unless the process holds CAP_IPC_LOCK; a login's
 * limit (8 MiB on Debian) is far below the agent's default staging (64
 * slots of 1 MiB per worker).  So unless the agent may lock any amount,
 * the daemon asks for one worker and a staging that takes at most a
 * quarter of the limit: the count is per user (a second mount of the same
 * user, and anything else it locks, share it), and pinning a transparent
 * huge page counts all of it, so staging that straddles one counts up to
 * 2 MiB more than its size.  Until the agent is ready its lines
 * are held back, so that a failed start is told in one line.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "bcfs_i.h"

#ifndef SBINDIR
#define SBINDIR "/usr/local/sbin"
#endif

#define BCFS_EMBED_READY_MS	15000
#define BCFS_EMBED_STOP_MS	3000
#define BCFS_EMBED_KILL_MS	1000
#define BCFS_EMBED_WATCH_MS	20	/* how often the watcher looks */
#define BCFS_EMBED_RESTARTS	5	/* starts within ... */
#define BCFS_EMBED_RESTART_WINDOW 10000000000ull /* ... 10 s, in ns */

#define BCFS_EMBED_QD_MAX	64		/* the agent's default */
#define BCFS_EMBED_SLOT		(1u << 20)	/* the agent's default */
#define BCFS_EMBED_SLOT_MIN	(64u << 10)	/* smallest chosen slot */
#define BCFS_EMBED_QD_MIN	2		/* one to fill, one to drain */
#define BCFS_EMBED_QD_WANT	4		/* before slots shrink */
#define CAP_IPC_LOCK_BIT	14

/*
 * Run from a build tree (fs/bluecachefs), the agent built beside it is the
 * one that matches; an installed daemon uses the installed agent.
 */
static const char *bcfs_embed_binary(void)
{
	static char built[PATH_MAX];
	const char *p = getenv("BLUECACHE_AGENT");
	char *slash;
	ssize_t n;

	if (p && *p)
		return p;
	n = readlink("/proc/self/exe", built, sizeof(built) - 32);
	if (n > 0) {
		built[n] = '\0';
		slash = strrchr(built, '/');
		if (slash && slash - built >= 3 && !strncmp(slash - 3, "/fs", 3)) {
			strcpy(slash, "/../agent/bluecache-agent");
			if (!access(built, X_OK))
				return built;
		}
	}
	return SBINDIR "/bluecache-agent";
}

/* 1 when the capability set named (CapEff, CapAmb) holds CAP_IPC_LOCK. */
static int bcfs_embed_cap(const char *set)
{
	unsigned long long caps = 0;
	size_t len = strlen(set);
	char line[256];
	int found = 0;
	FILE *f;

	f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, set, len) && line[len] == ':' &&
		    sscanf(line + len + 1, "%llx", &caps) == 1) {
			found = 1;
			break;
		}
	}
	fclose(f);
	return found && (caps >> CAP_IPC_LOCK_BIT) & 1;
}

/*
 * RLIMIT_MEMLOCK as it applies to the agent about to be started, in
 * bytes; 0 when none applies: no limit, or CAP_IPC_LOCK, which root keeps
 * across exec and anyone else only as an ambient capability.
 */
static unsigned long long bcfs_embed_memlock(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	if ((geteuid() == 0 && bcfs_embed_cap("CapEff")) ||
	    bcfs_embed_cap("CapAmb"))
		return 0;
	return rl.rlim_cur;
}

/*
 * Choose the staging of e (queue_depth and slot_size given or 0) for the
 * limit e->memlock: a quarter of it at most, the larger slots first, as
 * the daemon moves up to 1 MiB in one piece.  0 or -ENOMEM (said).
 */
static int bcfs_embed_size(struct bcfs_embed *e)
{
	unsigned long long budget = e->memlock / 4, need;
	unsigned int qd = e->queue_depth, slot = e->slot_size;

	if (!e->memlock)
		return 0;
	if (qd && slot) {
		/* asked for: only what cannot fit at all is refused here */
		if ((unsigned long long)qd * slot <= e->memlock)
			return 0;
		goto out_nomem;
	}
	if (slot) {
		qd = budget / slot;
		if (qd > BCFS_EMBED_QD_MAX)
			qd = BCFS_EMBED_QD_MAX;
		if (qd < 1)
			goto out_nomem;
	} else if (qd) {
		slot = budget / qd > BCFS_EMBED_SLOT ? BCFS_EMBED_SLOT :
			(unsigned int)(budget / qd) & ~4095u;
		if (slot < 4096)
			goto out_nomem;
	} else {
		for (slot = BCFS_EMBED_SLOT;; slot /= 2) {
			qd = budget / slot > BCFS_EMBED_QD_MAX ?
			     BCFS_EMBED_QD_MAX : (unsigned int)(budget / slot);
			if (qd >= BCFS_EMBED_QD_WANT ||
			    slot <= BCFS_EMBED_SLOT_MIN)
				break;
		}
		if (qd < BCFS_EMBED_QD_MIN)
			goto out_nomem;
	}
	e->queue_depth = qd;
	e->slot_size = slot;
	return 0;

out_nomem:
	/* the limit that staging needs: all of it when asked for whole */
	if (e->queue_depth && e->slot_size)
		need = (unsigned long long)e->queue_depth * e->slot_size;
	else if (e->queue_depth || e->slot_size)
		need = 4ull * (e->queue_depth ? e->queue_depth : 1) *
		       (e->slot_size ? e->slot_size : 4096);
	else
		need = 4ull * BCFS_EMBED_QD_MIN * BCFS_EMBED_SLOT_MIN;
	bcfs_err("RLIMIT_MEMLOCK is %llu KiB: the private agent needs %llu "
		 "KiB or more for its staging; raise it (ulimit -l)%s",
		 e->memlock >> 10, need >> 10,
		 e->queue_depth || e->slot_size ?
		 " or ask for less with -o queue_depth=,slot_size=" : "");
	return -ENOMEM;
}

static int bcfs_embed_mkdir(struct bcfs_embed *e)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int n;

	if (!base || !*base || stat(base, &st) || !S_ISDIR(st.st_mode) ||
	    access(base, W_OK | X_OK))
		base = getenv("TMPDIR");
	if (!base || !*base || access(base, W_OK | X_OK))
		base = "/tmp";
	/* the socket path must fit in sun_path (108) */
	n = snprintf(e->dir, sizeof(e->dir), "%s/bluecachefs.XXXXXX", base);
	if (n < 0 || n + sizeof("/agent.sock") > 100)
		snprintf(e->dir, sizeof(e->dir), "/tmp/bluecachefs.XXXXXX");
	if (!mkdtemp(e->dir)) {
		n = -errno;
		bcfs_err("cannot create a private directory %s: %s", e->dir,
			 strerror(-n));
		e->dir[0] = '\0';
		return n;
	}
	snprintf(e->addr, sizeof(e->addr), "unix:%s/agent.sock", e->dir);
	snprintf(e->state, sizeof(e->state), "%s/state", e->dir);
	if (mkdir(e->state, 0700)) {
		n = -errno;
		bcfs_err("cannot create %s: %s", e->state, strerror(-n));
		rmdir(e->dir);
		e->dir[0] = '\0';
		return n;
	}
	return 0;
}

/* Remove what the agent left in its state directory (no subdirectories). */
static void bcfs_embed_state_remove(struct bcfs_embed *e)
{
	char path[sizeof(e->state) + 256 + 2];
	struct dirent *d;
	DIR *dir;

	if (!e->state[0])
		return;
	dir = opendir(e->state);
	if (dir) {
		while ((d = readdir(dir))) {
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
				continue;
			snprintf(path, sizeof(path), "%s/%s", e->state,
				 d->d_name);
			if (unlink(path))
				bcfs_warn("cannot remove %s: %s", path,
					  strerror(errno));
		}
		closedir(dir);
	}
	if (rmdir(e->state) && errno != ENOENT)
		bcfs_warn("cannot remove %s: %s", e->state, strerror(errno));
	e->state[0] = '\0';
}

void bcfs_embed_dir_remove(struct bcfs_embed *e)
{
	char path[sizeof(e->dir) + 16];

	if (!e->dir[0])
		return;
	bcfs_embed_state_remove(e);
	snprintf(path, sizeof(path), "%s/agent.sock", e->dir);
	unlink(path);
	if (rmdir(e->dir))
		bcfs_warn("cannot remove %s: %s", e->dir, strerror(errno));
	e->dir[0] = '\0';
}

/*
 * One line of the agent's: held back until the agent is ready (what does
 * not fit is dropped), passed on after.
 */
static void bcfs_embed_line(struct bcfs_embed *e, const char *line,
			    size_t len)
{
	pthread_mutex_lock(&e->log_lock);
	if (e->log_live) {
		bcfs_log_line(line, len);
	} else if (e->backlog_len + len + 1 <= sizeof(e->backlog)) {
		memcpy(e->backlog + e->backlog_len, line, len);
		e->backlog_len += len;
		e->backlog[e->backlog_len++] = '\n';
	}
	pthread_mutex_unlock(&e->log_lock);
}

/* Pass on the lines held back (under log_lock). */
static void bcfs_embed_backlog_flush(struct bcfs_embed *e)
{
	const char *p = e->backlog, *end = e->backlog + e->backlog_len, *nl;

	while (p < end && (nl = memchr(p, '\n', end - p))) {
		bcfs_log_line(p, nl - p);
		p = nl + 1;
	}
	e->backlog_len = 0;
}

/* The agent is ready: its lines go to the daemon's log from now on. */
static void bcfs_embed_log_live(struct bcfs_embed *e)
{
	pthread_mutex_lock(&e->log_lock);
	bcfs_embed_backlog_flush(e);
	e->log_live = 1;
	pthread_mutex_unlock(&e->log_lock);
}

/*
 * The message of the first error line the agent wrote, without its
 * "bluecache-agent: error: " prefix, into buf; 0 when there was none.
 * The log thread has ended.
 */
static int bcfs_embed_first_error(struct bcfs_embed *e, char *buf,
				  size_t size)
{
	const char *p = e->backlog, *end = e->backlog + e->backlog_len;
	const char *nl, *m;
	static const char tag[] = "error: ";

	for (; p < end; p = nl + 1) {
		nl = memchr(p, '\n', end - p);
		if (!nl)
			nl = end;
		m = memmem(p, nl - p, tag, sizeof(tag) - 1);
		if (!m)
			continue;
		m += sizeof(tag) - 1;
		snprintf(buf, size, "%.*s", (int)(nl - m), m);
		return 1;
	}
	return 0;
}

/* Forward the agent's stderr lines to the daemon's log until EOF. */
static void *bcfs_embed_log_thread(void *arg)
{
	struct bcfs_embed *e = arg;
	char buf[4096];
	size_t have = 0, start;
	ssize_t n;
	char *nl;

	for (;;) {
		n = read(e->log_fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += n;
		start = 0;
		while ((nl = memchr(buf + start, '\n', have - start))) {
			bcfs_embed_line(e, buf + start, nl - (buf + start));
			start = nl - buf + 1;
		}
		if (start == 0 && have == sizeof(buf)) {
			bcfs_embed_line(e, buf, have);	/* an overlong line */
			start = have;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
	}
	if (have)
		bcfs_embed_line(e, buf, have);
	return NULL;
}

/* Once the agent is gone its stderr ends: wait for the last lines. */
static void bcfs_embed_log_stop(struct bcfs_embed *e)
{
	if (e->log_started) {
		pthread_join(e->log_thread, NULL);
		e->log_started = 0;
	}
	if (e->log_fd >= 0) {
		close(e->log_fd);
		e->log_fd = -1;
	}
}

/*
 * The agent's command line, made before fork (the child may not allocate):
 * the staging options only when the daemon sized it or was asked to.
 */
struct bcfs_embed_argv {
	char fd[16];
	char qd[16];
	char slot[16];
	char *argv[28];
};

static void bcfs_embed_argv_make(struct bcfs_embed_argv *a,
				 const struct bcfs_embed *e, const char *bin,
				 const char *root, int ready_fd)
{
	int n = 0;

	snprintf(a->fd, sizeof(a->fd), "%d", ready_fd);
	a->argv[n++] = (char *)bin;
	a->argv[n++] = "--root";
	a->argv[n++] = (char *)root;
	a->argv[n++] = "--listen";
	a->argv[n++] = (char *)e->addr;
	a->argv[n++] = "--foreground";
	a->argv[n++] = "--ready-fd";
	a->argv[n++] = a->fd;
	a->argv[n++] = "--log-level";
	a->argv[n++] = bcfs_log_level >= BCFS_DEBUG ? "debug" : "warning";
	a->argv[n++] = "--state-dir";
	a->argv[n++] = (char *)e->state;
	/*
	 * One machine, the daemon's own user: device nodes as a local file
	 * system makes them (the kernel asks CAP_MKNOD of the caller first,
	 * and of the agent's user at mknodat()).
	 */
	a->argv[n++] = "--allow-devices";
	/*
	 * The daemon's session and, across a reconnect, the one it leaves:
	 * descriptors are not kept for 128, and the files and handles this
	 * host may hold are shared by two (bluecache-agent(8), --max-files)
	 */
	a->argv[n++] = "--max-sessions";
	a->argv[n++] = "2";
	if (e->queue_depth) {
		snprintf(a->qd, sizeof(a->qd), "%u", e->queue_depth);
		a->argv[n++] = "--queue-depth";
		a->argv[n++] = a->qd;
		/* one session, the daemon's: let it use every slot */
		a->argv[n++] = "--max-slots";
		a->argv[n++] = a->qd;
	}
	if (e->slot_size) {
		snprintf(a->slot, sizeof(a->slot), "%u", e->slot_size);
		a->argv[n++] = "--slot-size";
		a->argv[n++] = a->slot;
	}
	if (e->memlock) {
		/* a session stays on one worker: more only lock more */
		a->argv[n++] = "--workers";
		a->argv[n++] = "1";
	}
	a->argv[n] = NULL;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void bcfs_embed_exec(struct bcfs_embed_argv *a, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	execv(a->argv[0], a->argv);
	_exit(127);
}

/*
 * One line for an agent that ended before it was ready: its own error
 * when it gave one, and what RLIMIT_MEMLOCK has to do with it.
 */
static void bcfs_embed_explain(struct bcfs_embed *e, pid_t pid,
			       const char *bin)
{
	char why[512];
	int status, said;

	said = bcfs_embed_first_error(e, why, sizeof(why));
	if (bcfs_log_level >= BCFS_DEBUG) {
		pthread_mutex_lock(&e->log_lock);
		bcfs_embed_backlog_flush(e);
		pthread_mutex_unlock(&e->log_lock);
	}
	if (waitpid(pid, &status, 0) < 0) {
		bcfs_err("the agent %s did not start", bin);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		bcfs_err("cannot run the agent %s (set BLUECACHE_AGENT)", bin);
	} else if (said && e->memlock &&
		   (strstr(why, "RLIMIT_MEMLOCK") ||
		    strstr(why, strerror(ENOMEM)))) {
		bcfs_err("the private agent cannot lock its staging of %llu "
			 "KiB: RLIMIT_MEMLOCK is %llu KiB and counts all "
			 "this user's locked memory; raise it (ulimit -l) or "
			 "ask for less with -o queue_depth=,slot_size=",
			 (unsigned long long)e->queue_depth * e->slot_size
				 >> 10, e->memlock >> 10);
	} else if (said) {
		bcfs_err("the agent %s did not start: %s", bin, why);
	} else if (WIFEXITED(status)) {
		bcfs_err("the agent %s exited with status %d before it was "
			 "ready", bin, WEXITSTATUS(status));
	} else if (WIFSIGNALED(status)) {
		bcfs_err("the agent %s was killed by signal %d before it was "
			 "ready", bin, WTERMSIG(status));
	}
}

static void bcfs_embed_kill(struct bcfs_embed *e);

/*
 * Start the agent on e->root and wait until it is ready.  0, or -errno
 * (said) with no agent left running.
 */
static int bcfs_embed_spawn(struct bcfs_embed *e)
{
	const char *bin = e->bin, *dir = e->root;
	struct bcfs_embed_argv args;
	struct pollfd pfd;
	char buf[16];
	pid_t pid, self = getpid();
	int pfds[2], errp[2], ret;
	ssize_t n;

	pthread_mutex_lock(&e->log_lock);
	e->log_live = 0;
	e->backlog_len = 0;
	pthread_mutex_unlock(&e->log_lock);
	if (pipe2(pfds, O_CLOEXEC)) {
		ret = -errno;
		bcfs_err("pipe: %s", strerror(-ret));
		return ret;
	}
	if (pipe2(errp, O_CLOEXEC)) {
		ret = -errno;
		bcfs_err("pipe: %s", strerror(-ret));
		goto out_close_pipe;
	}
	bcfs_embed_argv_make(&args, e, bin, dir, pfds[1]);
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		bcfs_err("fork: %s", strerror(-ret));
		close(errp[0]);
		close(errp[1]);
		goto out_close_pipe;
	}
	if (!pid) {
		/* the write end must survive exec; dup2 clears CLOEXEC */
		int null = open("/dev/null", O_RDONLY);

		/* nothing of the caller's: its pipes must see their end */
		if (fcntl(pfds[1], F_SETFD, 0) < 0 || null < 0 ||
		    dup2(null, STDIN_FILENO) < 0 ||
		    dup2(errp[1], STDOUT_FILENO) < 0 ||
		    dup2(errp[1], STDERR_FILENO) < 0)
			_exit(127);
		bcfs_embed_exec(&args, self);
	}
	e->pid = pid;
	close(pfds[1]);
	pfds[1] = -1;
	close(errp[1]);
	e->log_fd = errp[0];
	if (!pthread_create(&e->log_thread, NULL, bcfs_embed_log_thread, e))
		e->log_started = 1;
	pfd.fd = pfds[0];
	pfd.events = POLLIN;
	for (;;) {
		ret = poll(&pfd, 1, BCFS_EMBED_READY_MS);
		if (ret < 0 && errno == EINTR)
			continue;
		break;
	}
	if (ret == 0) {
		bcfs_err("the agent %s was not ready within %d s", bin,
			 BCFS_EMBED_READY_MS / 1000);
		ret = -ETIMEDOUT;
		goto out_stop;
	}
	n = read(pfds[0], buf, sizeof(buf) - 1);
	if (n <= 0) {
		e->pid = 0;
		bcfs_embed_log_stop(e);	/* its last words first */
		bcfs_embed_explain(e, pid, bin);
		ret = -ECHILD;
		close(pfds[0]);
		return ret;
	}
	buf[n] = '\0';
	if (strncmp(buf, "ready", 5)) {
		bcfs_err("the agent %s said '%s' instead of ready", bin, buf);
		ret = -EPROTO;
		goto out_stop;
	}
	close(pfds[0]);
	bcfs_embed_log_live(e);
	bcfs_dbg("agent %d serves %s on %s", (int)pid, dir, e->addr);
	return 0;

out_stop:
	if (bcfs_log_level >= BCFS_DEBUG)
		bcfs_embed_log_live(e);
	bcfs_embed_kill(e);
	close(pfds[0]);
	return ret;
out_close_pipe:
	close(pfds[0]);
	close(pfds[1]);
	return ret;
}

int bcfs_embed_start(const char *dir, unsigned int queue_depth,
		     unsigned int slot_size, struct bcfs_embed *e)
{
	const char *bin = bcfs_embed_binary();
	struct stat st;
	int ret;

	memset(e, 0, sizeof(*e));
	e->log_fd = -1;
	pthread_mutex_init(&e->log_lock, NULL);
	e->queue_depth = queue_depth;
	e->slot_size = slot_size;
	e->memlock = bcfs_embed_memlock();
	e->bin = bin;
	e->root = dir;
	if (stat(dir, &st)) {
		ret = -errno;
		bcfs_err("local:%s: %s", dir, strerror(-ret));
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		bcfs_err("local:%s: not a directory", dir);
		return -ENOTDIR;
	}
	if (access(bin, X_OK)) {
		ret = -errno;
		bcfs_err("cannot run the agent %s: %s (set BLUECACHE_AGENT)",
			 bin, strerror(-ret));
		return ret;
	}
	ret = bcfs_embed_size(e);
	if (ret)
		return ret;
	ret = bcfs_embed_mkdir(e);
	if (ret)
		return ret;
	ret = bcfs_embed_spawn(e);
	if (ret) {
		bcfs_embed_dir_remove(e);
		return ret;
	}
	if (e->memlock)
		bcfs_dbg("RLIMIT_MEMLOCK %llu KiB: agent staging %u slots of "
			 "%u KiB", e->memlock >> 10, e->queue_depth,
			 e->slot_size >> 10);
	return 0;
}

/* How an agent ended, for the log. */
static void bcfs_embed_how(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d",
			 WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "ended (status %#x)", status);
}

static int bcfs_embed_stopping(struct bcfs_embed *e)
{
	return __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE);
}

/* Sleep ms unless the mount stops meanwhile; 1 when it does. */
static int bcfs_embed_nap(struct bcfs_embed *e, unsigned int ms)
{
	struct timespec ts = { 0, BCFS_EMBED_WATCH_MS * 1000000L };
	unsigned int t;

	for (t = 0; t < ms; t += BCFS_EMBED_WATCH_MS) {
		if (bcfs_embed_stopping(e))
			return 1;
		nanosleep(&ts, NULL);
	}
	return bcfs_embed_stopping(e);
}

/*
 * The watcher: the only thread that waits for the agent while the mount
 * is up (bcfs_embed_stop joins it before it waits itself).
 */
static void *bcfs_embed_watch_thread(void *arg)
{
	struct bcfs_embed *e = arg;
	uint64_t now, oldest;
	char how[96];
	int status;
	pid_t r;

	while (!bcfs_embed_stopping(e)) {
		if (e->pid <= 0) {
			r = 0;
		} else {
			r = waitpid(e->pid, &status, WNOHANG);
			if (r == 0 || (r < 0 && errno == EINTR)) {
				bcfs_embed_nap(e, BCFS_EMBED_WATCH_MS);
				continue;
			}
		}
		if (bcfs_embed_stopping(e))
			break;
		if (r > 0) {
			bcfs_embed_how(status, how, sizeof(how));
			bcfs_warn("the agent %d %s; starting it again",
				  (int)e->pid, how);
			e->pid = 0;
			bcfs_embed_log_stop(e);
		}
		/* at most BCFS_EMBED_RESTARTS starts in the window */
		now = bcfs_now_ns();
		oldest = e->restarts_ns[e->nrestarts % BCFS_EMBED_RESTARTS];
		if (e->nrestarts >= BCFS_EMBED_RESTARTS &&
		    now - oldest < BCFS_EMBED_RESTART_WINDOW) {
			bcfs_warn("the agent died %d times within %llu s: "
				  "waiting before the next start",
				  BCFS_EMBED_RESTARTS,
				  BCFS_EMBED_RESTART_WINDOW / 1000000000ull);
			if (bcfs_embed_nap(e, (unsigned int)
					   ((BCFS_EMBED_RESTART_WINDOW -
					     (now - oldest)) / 1000000)))
				break;
			now = bcfs_now_ns();
		}
		e->restarts_ns[e->nrestarts++ % BCFS_EMBED_RESTARTS] = now;
		if (bcfs_embed_spawn(e) < 0)
			bcfs_embed_nap(e, 1000);	/* said; try again */
	}
	return NULL;
}

int bcfs_embed_watch(struct bcfs_embed *e)
{
	int ret;

	ret = -pthread_create(&e->watch_thread, NULL, bcfs_embed_watch_thread,
			      e);
	if (ret) {
		bcfs_err("cannot start the agent watcher: %s", strerror(-ret));
		return ret;
	}
	e->watch_started = 1;
	return 0;
}

/* SIGTERM the agent and wait for it (SIGKILL after a while). */
static void bcfs_embed_kill(struct bcfs_embed *e)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int status, waited;
	pid_t r;

	if (e->pid > 0) {
		kill(e->pid, SIGTERM);
		for (waited = 0;; waited += 10) {
			r = waitpid(e->pid, &status, WNOHANG);
			if (r == e->pid || (r < 0 && errno != EINTR))
				break;
			if (waited == BCFS_EMBED_STOP_MS) {
				bcfs_warn("the agent %d did not stop within "
					  "%d s: killing it", (int)e->pid,
					  BCFS_EMBED_STOP_MS / 1000);
				kill(e->pid, SIGKILL);
			}
			if (waited >= BCFS_EMBED_STOP_MS + BCFS_EMBED_KILL_MS) {
				/*
				 * Stuck in the kernel (a long sync): it dies
				 * when that returns; no need to wait for it.
				 */
				r = 0;
				break;
			}
			nanosleep(&ts, NULL);
		}
		if (r == e->pid && WIFSIGNALED(status) &&
		    WTERMSIG(status) != SIGTERM)
			bcfs_warn("the agent was killed by signal %d",
				  WTERMSIG(status));
		e->pid = 0;
		if (r == 0 && e->log_started) {
			/* its stderr stays open: let the thread go with it */
			pthread_detach(e->log_thread);
			e->log_started = 0;
			e->log_fd = -1;
		}
	}
	bcfs_embed_log_stop(e);
}

void bcfs_embed_stop(struct bcfs_embed *e)
{
	__atomic_store_n(&e->stopping, 1, __ATOMIC_RELEASE);
	if (e->watch_started) {
		pthread_join(e->watch_thread, NULL);
		e->watch_started = 0;
	}
	bcfs_embed_kill(e);
	bcfs_embed_dir_remove(e);
}
