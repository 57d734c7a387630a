/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * harness.c - a real bluecache-agent for the client library tests: started
 * with --ready-fd so the test knows when it listens, on a unix socket in a
 * private temporary directory and a free loopback TCP port; stopped with
 * its log scanned for unexpected "error" lines and sanitizer reports.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

int th_failed;

const char *th_agent_path(void)
{
	static char path[PATH_MAX];
	const char *b = getenv("top_builddir");

	snprintf(path, sizeof(path), "%s/agent/bluecache-agent",
		 b ? b : "..");
	if (access(path, X_OK))
		return NULL;
	return path;
}

int th_tmpdir(char *buf, size_t len, const char *tag)
{
	const char *t = getenv("TMPDIR");

	snprintf(buf, len, "%s/bcp-%s.XXXXXX", t && *t ? t : "/tmp", tag);
	if (!mkdtemp(buf))
		return -errno;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *f)
{
	remove(p);
	return 0;
}

void th_rmtree(const char *dir)
{
	if (dir[0])
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

unsigned short th_free_port(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	unsigned short port = 0;
	int s;

	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return 0;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!bind(s, (struct sockaddr *)&sin, sizeof(sin)) &&
	    !getsockname(s, (struct sockaddr *)&sin, &sl))
		port = ntohs(sin.sin_port);
	close(s);
	return port;
}

static void print_log(const struct th_agent *a)
{
	char line[1024];
	FILE *f = fopen(a->log, "r");

	if (!f)
		return;
	fprintf(stderr, "---- agent log %s ----\n", a->log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fprintf(stderr, "---- end of agent log ----\n");
	fclose(f);
}

/* One attempt.  0, 1 to retry (the port was taken), TH_HARD. */
static int agent_try(struct th_agent *a, const char *bin)
{
	char port_arg[80], fd_arg[16], buf[16];
	struct pollfd pfd;
	int p[2], logfd, st, n = 0, r;
	pid_t pid;

	a->port = th_free_port();
	if (!a->port)
		return TH_HARD;
	snprintf(a->tcp_addr, sizeof(a->tcp_addr), "tcp://127.0.0.1:%u",
		 a->port);
	snprintf(port_arg, sizeof(port_arg), "%s", a->tcp_addr);
	if (pipe2(p, O_CLOEXEC))
		return TH_HARD;
	logfd = open(a->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (logfd < 0)
		return TH_HARD;
	pid = fork();
	if (pid < 0)
		return TH_HARD;
	if (pid == 0) {
		const char *argv[20];
		int i = 0, wfd;

		wfd = dup(p[1]);	/* without O_CLOEXEC */
		dup2(logfd, 1);
		dup2(logfd, 2);
		snprintf(fd_arg, sizeof(fd_arg), "%d", wfd);
		argv[i++] = bin;
		argv[i++] = "--root";
		argv[i++] = a->root;
		argv[i++] = "--listen";
		argv[i++] = a->unix_addr;
		argv[i++] = "--listen";
		argv[i++] = port_arg;
		argv[i++] = "--foreground";
		argv[i++] = "--ready-fd";
		argv[i++] = fd_arg;
		argv[i++] = "--log-level";
		argv[i++] = "info";
		if (a->secret_file[0]) {
			argv[i++] = "--secret-file";
			argv[i++] = a->secret_file;
		}
		argv[i] = NULL;
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(logfd);
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (n < 6) {
		r = poll(&pfd, 1, 15000);
		if (r <= 0)
			break;
		r = (int)read(p[0], buf + n, sizeof(buf) - 1 - (size_t)n);
		if (r <= 0)
			break;
		n += r;
	}
	close(p[0]);
	buf[n] = '\0';
	if (!strcmp(buf, "ready\n")) {
		a->pid = pid;
		return 0;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) != 127)
		return 1;	/* maybe the port: try another */
	return TH_HARD;
}

int th_agent_start(struct th_agent *a, const char *secret)
{
	const char *bin = th_agent_path();
	int ret, tries, fd;

	memset(a, 0, sizeof(*a));
	if (!bin) {
		printf("SKIP: no agent binary at $top_builddir/agent/bluecache-agent\n");
		return TH_SKIP;
	}
	if (th_tmpdir(a->dir, sizeof(a->dir), "client"))
		return TH_HARD;
	snprintf(a->root, sizeof(a->root), "%s/root", a->dir);
	snprintf(a->unix_addr, sizeof(a->unix_addr), "unix:%s/agent.sock",
		 a->dir);
	snprintf(a->log, sizeof(a->log), "%s/agent.log", a->dir);
	if (mkdir(a->root, 0755))
		return TH_HARD;
	if (secret) {
		snprintf(a->secret_file, sizeof(a->secret_file), "%s/secret",
			 a->dir);
		fd = open(a->secret_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, secret, strlen(secret)) < 0)
			return TH_HARD;
		close(fd);
	}
	for (tries = 0; tries < 3; tries++) {
		ret = agent_try(a, bin);
		if (ret != 1)
			break;
	}
	if (ret) {
		fprintf(stderr, "the agent did not start\n");
		print_log(a);
		th_rmtree(a->dir);
		return TH_HARD;
	}
	return 0;
}

static void agent_reap(struct th_agent *a, int sig)
{
	int st, i;

	if (a->pid <= 0)
		return;
	kill(a->pid, sig);
	for (i = 0; i < 1000; i++) {
		if (waitpid(a->pid, &st, WNOHANG) == a->pid)
			break;
		usleep(10000);
	}
	if (i == 1000) {
		fprintf(stderr, "agent did not exit on signal %d\n", sig);
		kill(a->pid, SIGKILL);
		waitpid(a->pid, &st, 0);
		th_failed++;
	}
	a->pid = 0;
}

void th_agent_kill(struct th_agent *a)
{
	agent_reap(a, SIGKILL);
}

/* Lines that fail a test: "error" anywhere, or a sanitizer report. */
static int log_bad_line(const char *l)
{
	return strcasestr(l, "error") || strstr(l, "Sanitizer") ||
	       strstr(l, "runtime error");
}

int th_agent_stop(struct th_agent *a)
{
	char line[1024];
	int bad = 0;
	FILE *f;

	agent_reap(a, SIGTERM);
	f = fopen(a->log, "r");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (log_bad_line(line))
				bad = 1;
		fclose(f);
	}
	if (bad) {
		fprintf(stderr, "unexpected error lines in the agent log\n");
		print_log(a);
	}
	th_rmtree(a->dir);
	return bad;
}

uint64_t th_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

uint64_t th_seed(void)
{
	const char *e = getenv("TH_SEED");
	uint64_t s;

	s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^
		((uint64_t)getpid() << 32);
	if (!s)
		s = 1;
	printf("seed %llu (set TH_SEED to repeat)\n", (unsigned long long)s);
	return s;
}
