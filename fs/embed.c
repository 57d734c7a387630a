/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * embed.c - the private agent behind "local:DIR".
 *
 * The daemon makes a private directory (mode 0700, under $XDG_RUNTIME_DIR
 * or /tmp), starts bluecache-agent on DIR listening on a unix socket in it
 * and waits for the agent to write "ready" to a pipe (--ready-fd).  The
 * agent gets PR_SET_PDEATHSIG so that it never outlives the daemon; on
 * unmount the daemon stops it with SIGTERM and removes the directory (the
 * socket and the directory already go once the daemon is connected).  The
 * agent's stderr is a pipe the daemon forwards line by line to its own log,
 * so that it follows the daemon to syslog once detached and never holds
 * the caller's terminal or pipe open.
 *
 * The agent binary is $BLUECACHE_AGENT; else, for a daemon run from its
 * build tree, the agent built beside it; else SBINDIR/bluecache-agent.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bcfs_i.h"

#ifndef SBINDIR
#define SBINDIR "/usr/local/sbin"
#endif

#define BCFS_EMBED_READY_MS	15000
#define BCFS_EMBED_STOP_MS	3000
#define BCFS_EMBED_KILL_MS	1000

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
	return 0;
}

void bcfs_embed_dir_remove(struct bcfs_embed *e)
{
	char path[sizeof(e->dir) + 16];

	if (!e->dir[0])
		return;
	snprintf(path, sizeof(path), "%s/agent.sock", e->dir);
	unlink(path);
	if (rmdir(e->dir))
		bcfs_warn("cannot remove %s: %s", e->dir, strerror(errno));
	e->dir[0] = '\0';
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
			bcfs_log_line(buf + start, nl - (buf + start));
			start = nl - buf + 1;
		}
		if (start == 0 && have == sizeof(buf)) {
			bcfs_log_line(buf, have);	/* an overlong line */
			start = have;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
	}
	if (have)
		bcfs_log_line(buf, have);
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

/* In the child, between fork and exec: only async-signal-safe calls. */
static void bcfs_embed_exec(const char *bin, const char *root,
			    const char *listen, int ready_fd, pid_t parent,
			    const char *level)
{
	char fdstr[16];
	char *argv[] = {
		(char *)bin, "--root", (char *)root, "--listen", (char *)listen,
		"--foreground", "--ready-fd", fdstr, "--log-level",
		(char *)level, NULL
	};
	int i = 0, n = ready_fd;
	char tmp[16];

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	/* no snprintf here: format the fd by hand */
	do {
		tmp[i++] = '0' + n % 10;
		n /= 10;
	} while (n && i < (int)sizeof(tmp));
	for (n = 0; n < i; n++)
		fdstr[n] = tmp[i - 1 - n];
	fdstr[i] = '\0';
	execv(bin, argv);
	_exit(127);
}

static void bcfs_embed_explain(pid_t pid, const char *bin)
{
	int status;

	if (waitpid(pid, &status, 0) < 0) {
		bcfs_err("the agent %s did not start", bin);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		bcfs_err("cannot run the agent %s (set BLUECACHE_AGENT)", bin);
	} else if (WIFEXITED(status)) {
		bcfs_err("the agent %s exited with status %d before it was "
			 "ready", bin, WEXITSTATUS(status));
	} else if (WIFSIGNALED(status)) {
		bcfs_err("the agent %s was killed by signal %d before it was "
			 "ready", bin, WTERMSIG(status));
	}
}

int bcfs_embed_start(const char *dir, struct bcfs_embed *e)
{
	const char *bin = bcfs_embed_binary();
	struct pollfd pfd;
	char buf[16];
	struct stat st;
	pid_t pid, self = getpid();
	int pfds[2], errp[2], ret;
	ssize_t n;

	memset(e, 0, sizeof(*e));
	e->log_fd = -1;
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
	ret = bcfs_embed_mkdir(e);
	if (ret)
		return ret;
	if (pipe2(pfds, O_CLOEXEC)) {
		ret = -errno;
		bcfs_err("pipe: %s", strerror(-ret));
		goto out_rmdir;
	}
	if (pipe2(errp, O_CLOEXEC)) {
		ret = -errno;
		bcfs_err("pipe: %s", strerror(-ret));
		goto out_close_pipe;
	}
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
		bcfs_embed_exec(bin, dir, e->addr, pfds[1], self,
				bcfs_log_level >= BCFS_DEBUG ? "debug" :
				"warning");
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
		bcfs_embed_explain(pid, bin);
		ret = -ECHILD;
		goto out_close_read;
	}
	buf[n] = '\0';
	if (strncmp(buf, "ready", 5)) {
		bcfs_err("the agent %s said '%s' instead of ready", bin, buf);
		ret = -EPROTO;
		goto out_stop;
	}
	close(pfds[0]);
	bcfs_dbg("agent %d serves %s on %s", (int)pid, dir, e->addr);
	return 0;

out_stop:
	bcfs_embed_stop(e);
	close(pfds[0]);
	return ret;
out_close_read:
	close(pfds[0]);
	goto out_rmdir;
out_close_pipe:
	close(pfds[0]);
	close(pfds[1]);
out_rmdir:
	bcfs_embed_dir_remove(e);
	return ret;
}

void bcfs_embed_stop(struct bcfs_embed *e)
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
	bcfs_embed_dir_remove(e);
}
