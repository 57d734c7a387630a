/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log_i.h - where the agent's log lines go, for main.c: stderr (the
 * default, and always in the foreground), syslog (a detached agent with no
 * --log-file) or a file reopened on SIGHUP so that logrotate can move it.
 */
#ifndef AGENT_LOG_I_H
#define AGENT_LOG_I_H

/*
 * Open FILE for appending (mode 0640) and keep its descriptor; lines still
 * go to stderr until agent_log_use().  0 or -errno.
 */
int agent_log_file_open(const char *file);
/*
 * From now on send lines to the file opened above, or to syslog (facility
 * daemon) when none was: called once the agent has detached.
 */
void agent_log_use(void);
/*
 * SIGHUP: open the log file again by its name and put it in place of the
 * old one (other threads keep writing to the same descriptor number).
 * 0, or -errno with the old file kept.  A no-op without a log file.
 */
int agent_log_reopen(void);

#endif /* AGENT_LOG_I_H */
