/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.c - log lines on stderr, "bluecache-agent: LEVEL: message", one
 * write(2) per line so lines from several threads never interleave.  A
 * detached agent logs to syslog instead, or to a --log-file (lines there
 * start with the local time, and it gets the lines from before detaching
 * too); SIGHUP reopens that file in place.
 * "error" is kept for faults of the agent itself; a misbehaving peer is a
 * warning, and data-path warnings are rate-limited.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>

#include "agent.h"
#include "log_i.h"

enum log_sink {
	LOG_SINK_STDERR,
	LOG_SINK_FILE,
	LOG_SINK_SYSLOG,
};

/*
 * Switched once by the main thread (agent_log_use) when the detached agent
 * is ready, while workers may be logging: atomic.  A reopen replaces the
 * file behind log_fd with dup3(), so a writer never sees it closed.
 */
static _Atomic int log_sink = LOG_SINK_STDERR;
static int log_fd = -1;			/* the --log-file, or -1 */
static char *log_path;

static const int log_prio[] = {
	[AGENT_LOG_ERROR] = LOG_ERR,
	[AGENT_LOG_WARNING] = LOG_WARNING,
	[AGENT_LOG_INFO] = LOG_INFO,
	[AGENT_LOG_DEBUG] = LOG_DEBUG,
};

static int log_open(const char *file)
{
	int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
		      O_NOCTTY, 0640);

	if (fd < 0)
		return -errno;
	return fd;
}

int agent_log_file_open(const char *file)
{
	int fd = log_open(file);

	if (fd < 0)
		return fd;
	log_path = strdup(file);
	if (!log_path) {
		close(fd);
		return -ENOMEM;
	}
	log_fd = fd;
	return 0;
}

void agent_log_use(void)
{
	if (log_fd >= 0) {
		atomic_store(&log_sink, LOG_SINK_FILE);
		return;
	}
	openlog(AGENT_NAME, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	atomic_store(&log_sink, LOG_SINK_SYSLOG);
}

int agent_log_reopen(void)
{
	int fd, ret = 0;

	if (log_fd < 0)
		return 0;
	fd = log_open(log_path);
	if (fd < 0)
		return fd;
	if (dup3(fd, log_fd, O_CLOEXEC) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static const char *const log_names[] = {
	[AGENT_LOG_ERROR] = "error",
	[AGENT_LOG_WARNING] = "warning",
	[AGENT_LOG_INFO] = "info",
	[AGENT_LOG_DEBUG] = "debug",
};

uint64_t agent_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int agent_log_level_parse(const char *s)
{
	int i;

	for (i = AGENT_LOG_ERROR; i <= AGENT_LOG_DEBUG; i++)
		if (!strcasecmp(s, log_names[i]))
			return i;
	return -1;
}

static void log_vline(int level, const char *fmt, va_list ap)
{
	int n, t = 0, sink = atomic_load(&log_sink);
	char line[1024], stamp[48];

	if (sink == LOG_SINK_SYSLOG) {
		vsnprintf(line, sizeof(line), fmt, ap);
		syslog(log_prio[level], "%s: %s", log_names[level], line);
		return;
	}
	n = snprintf(line, sizeof(line), "%s: %s: ", AGENT_NAME,
		     log_names[level]);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (sink == LOG_SINK_STDERR &&
	    write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
	/* the log file has every line, those before detaching too */
	if (log_fd >= 0) {
		struct timespec ts;
		struct iovec iov[2];
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		t = (int)strftime(stamp, 32, "%Y-%m-%dT%H:%M:%S", &tm);
		t += snprintf(stamp + t, sizeof(stamp) - (size_t)t, ".%03ld ",
			      ts.tv_nsec / 1000000);
		iov[0].iov_base = stamp;
		iov[0].iov_len = (size_t)t;
		iov[1].iov_base = line;
		iov[1].iov_len = (size_t)n;
		if (writev(log_fd, iov, 2) < 0)
			return;
	}
}

void agent_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > agent_cfg.log_level)
		return;
	va_start(ap, fmt);
	log_vline(level, fmt, ap);
	va_end(ap);
}

/* Protects the rate limiter's window. */
static pthread_mutex_t log_rl_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t log_rl_window;		/* under log_rl_lock */
static unsigned int log_rl_count;	/* under log_rl_lock */
static unsigned int log_rl_dropped;	/* under log_rl_lock */

void agent_warn_rl(const char *fmt, ...)
{
	uint64_t now = agent_now_ns() / 1000000000ull;
	unsigned int dropped = 0;
	int emit;
	va_list ap;

	pthread_mutex_lock(&log_rl_lock);
	if (now != log_rl_window) {
		dropped = log_rl_dropped;
		log_rl_window = now;
		log_rl_count = 0;
		log_rl_dropped = 0;
	}
	emit = log_rl_count++ < 5;
	if (!emit)
		log_rl_dropped++;
	pthread_mutex_unlock(&log_rl_lock);
	if (dropped)
		agent_warn("%u similar warnings suppressed", dropped);
	if (!emit || agent_cfg.log_level < AGENT_LOG_WARNING)
		return;
	va_start(ap, fmt);
	log_vline(AGENT_LOG_WARNING, fmt, ap);
	va_end(ap);
}
