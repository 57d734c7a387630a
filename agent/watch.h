/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * watch.h - the watcher of the data root: changes that processes on the
 * agent's machine make beneath the root, outside every session, reported
 * to the notify registry (notify.h) so that hosts holding the objects
 * drop what their kernels cached.
 *
 * Threads: agent_watch_start() and agent_watch_stop() are called by the
 * main thread only; the watcher runs on a thread of its own
 * ("bca-watch") and never touches a worker.
 */
#ifndef AGENT_WATCH_H
#define AGENT_WATCH_H

/* --watch */
enum agent_watch_mode {
	AGENT_WATCH_AUTO = 0,		/* on when the agent can watch */
	AGENT_WATCH_YES,		/* on, or the agent does not start */
	AGENT_WATCH_NO,			/* off */
};

/*
 * Start watching the data root root_fd (an O_PATH descriptor of the
 * directory root names; root is the store's description, for log lines)
 * after the registry is up.  root_fd -1 is a store without a local
 * directory (cephfs), which cannot be watched: AUTO is NO then, and YES
 * -EOPNOTSUPP.  Returns 1 when watching; 0 when not (mode NO, or AUTO and
 * the agent cannot watch: one info line says why and what hosts are
 * guaranteed then); -errno when mode is YES and the agent cannot watch
 * (one error line says why).
 */
int agent_watch_start(int root_fd, const char *root,
		      enum agent_watch_mode mode);

/* Stop the watcher and wait for its thread; a no-op when not watching. */
void agent_watch_stop(void);

#endif /* AGENT_WATCH_H */
