/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.c - the daemon's log lines: "bluecachefs: LEVEL: message" on stderr,
 * or syslog(3) once the daemon has detached from a terminal.  -d raises the
 * level to debug.  A line is written with one call so that lines of
 * concurrent threads never interleave.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <unistd.h>

#include "bcfs_i.h"

int bcfs_log_level = BCFS_INFO;
static int bcfs_use_syslog;

static const char *const bcfs_level_name[] = {
	[BCFS_ERR] = "error",
	[BCFS_WARN] = "warning",
	[BCFS_INFO] = "info",
	[BCFS_DEBUG] = "debug",
};

static const int bcfs_level_prio[] = {
	[BCFS_ERR] = LOG_ERR,
	[BCFS_WARN] = LOG_WARNING,
	[BCFS_INFO] = LOG_INFO,
	[BCFS_DEBUG] = LOG_DEBUG,
};

void bcfs_log_to_syslog(void)
{
	openlog(BCFS_PROG, LOG_PID, LOG_DAEMON);
	bcfs_use_syslog = 1;
}

void bcfs_log(enum bcfs_level lvl, const char *fmt, ...)
{
	char msg[1024];
	char line[1100];
	va_list ap;
	int n;

	if ((int)lvl > bcfs_log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (bcfs_use_syslog) {
		syslog(bcfs_level_prio[lvl], "%s", msg);
		return;
	}
	n = snprintf(line, sizeof(line), BCFS_PROG ": %s: %s\n",
		     bcfs_level_name[lvl], msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

/* A whole line from another program (the embedded agent), as it is. */
void bcfs_log_line(const char *line, size_t len)
{
	if (bcfs_use_syslog) {
		syslog(LOG_NOTICE, "%.*s", (int)len, line);
		return;
	}
	if (write(STDERR_FILENO, line, len) < 0 ||
	    write(STDERR_FILENO, "\n", 1) < 0)
		return;
}
