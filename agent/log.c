/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.c - log lines on stderr, "bluecache-agent: LEVEL: message", one
 * write(2) per line so lines from several threads never interleave.
 * "error" is kept for faults of the agent itself; a misbehaving peer is a
 * warning, and data-path warnings are rate-limited.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

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
	char line[1024];
	int n;

	n = snprintf(line, sizeof(line), "%s: %s: ", AGENT_NAME,
		     log_names[level]);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
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
