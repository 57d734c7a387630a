/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * notify.h - who holds what, and telling them when it changes.
 *
 * The agent keeps one registry, shared by every worker, of the objects the
 * sessions that negotiated BCP_FEAT_NOTIFY hold: for each object (its
 * (dev, ino) on the agent's machine) the sessions holding a handle on it,
 * and that handle.  When a session changes an object, or the watcher of
 * the root (watch.c) sees a process on the agent's machine change one,
 * every other holder is sent a NOTIFY frame (doc/protocol.md), through
 * its own worker, so that its host drops what its kernel cached.
 *
 * Threads: agent_notify_* may be called from any worker thread and from
 * the watcher; the registry has its own locks.
 */
#ifndef AGENT_NOTIFY_H
#define AGENT_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

/* An object on the agent's machine, as its stores name it. */
struct agent_obj {
	uint64_t dev, ino;
};

/*
 * A change, as the watcher reports one (origin: no session).  kind is a
 * BCP_NOTIFY_* value: INODE names obj (offset, length as in NOTIFY);
 * ENTRY and DELETE name parent and name[len] (and obj for DELETE, when
 * known: dev 0 otherwise).
 */
struct agent_change {
	uint32_t kind;
	struct agent_obj obj;
	struct agent_obj parent;
	const char *name;
	size_t len;
	int64_t offset, length;
};

/* Start and end of the agent; 0 or -errno. */
int agent_notify_init(void);
void agent_notify_fini(void);

/* A change made outside every session (the watcher). */
void agent_notify_external(const struct agent_change *c);
/* Changes were missed (the watcher's queue overflowed): every session
 * drops everything it cached. */
void agent_notify_reset_all(void);

#endif /* AGENT_NOTIFY_H */
