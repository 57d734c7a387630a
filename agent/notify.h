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

/*
 * The rest is the registry's side facing the sessions (session.c,
 * store.c, batch.c).
 *
 * A session that negotiated BCP_FEAT_NOTIFY has one agent_notify_sess:
 * its queue of events not yet sent, owned by its session and destroyed
 * on its worker after its store (which unregisters every hold) is gone,
 * so no publisher can reach it any more.  Publishers, on any thread,
 * reach it only through a hold, under the hold's stripe lock, or through
 * the list of all sessions (agent_notify_reset_all()), under that list's
 * lock; they never wait for its worker.
 *
 * Lock order: the list's lock, or a stripe lock (two stripes: the lower
 * index first), then a session's queue lock.
 */
#define AGENT_NOTIFY_QUEUE_MAX	8192	/* events queued for one session */

struct agent_notify_sess;

/*
 * One handle of a session on an object: embedded in the store's node, so
 * registering costs no allocation.  next is under the stripe lock of obj;
 * the other fields are set by agent_notify_hold() and then only read.
 */
struct agent_notify_hold {
	struct agent_notify_hold *next;
	struct agent_notify_sess *ns;	/* NULL: not registered */
	struct agent_obj obj;
	uint64_t handle;
};

/* One event as the session's worker encodes it (agent_notify_take()). */
struct agent_notify_ev {
	uint32_t kind;			/* BCP_NOTIFY_* */
	uint16_t name_len;
	uint64_t handle, child;
	int64_t offset, length;
	uint64_t t_queued;		/* agent_now_ns() when queued */
	char name[256];
};

/*
 * A session's queue; id names it in logs, wake_fd (an eventfd of its
 * worker, which outlives it) is written when events arrive.  NULL when
 * out of memory.  destroy(NULL) is a no-op.
 */
struct agent_notify_sess *agent_notify_sess_create(uint64_t id, int wake_fd);
void agent_notify_sess_destroy(struct agent_notify_sess *ns);

/* Register h: ns holds obj under handle.  Unregister it (a no-op when h
 * is not registered).  Any thread; the stripe lock of obj. */
void agent_notify_hold(struct agent_notify_hold *h,
		       struct agent_notify_sess *ns, struct agent_obj obj,
		       uint64_t handle);
void agent_notify_unhold(struct agent_notify_hold *h);

/*
 * May a change made by origin (NULL: no session, or one without the
 * feature) concern anybody?  0 when no other session negotiated
 * BCP_FEAT_NOTIFY: the caller may then skip finding out what changed.
 */
int agent_notify_wanted(const struct agent_notify_sess *origin);

/*
 * A change made by origin, after it succeeded: queue events for every
 * other holder (origin's own holds are skipped), with their handles.
 *   INODE   obj's attributes, and its data [offset, offset + length).
 *   ENTRY   name in parent changed: ENTRY to parent's holders; when obj
 *           is known (not {0, 0}), also INODE (attributes) to its holders
 *           (LINK: nlink; RENAME: the moved object).
 *   DELETE  name in parent that named obj is gone: DELETE to sessions
 *           holding both, ENTRY to those holding only parent, INODE
 *           (attributes) to obj's holders.
 */
void agent_notify_publish(const struct agent_notify_sess *origin,
			  const struct agent_change *c);

/* Are events (or a RESET) queued?  No lock: a hint for the worker. */
int agent_notify_pending(const struct agent_notify_sess *ns);
/*
 * Take up to max events, oldest first (an owed RESET before them);
 * returns how many.  *dropped: events dropped by overflows since the last
 * call.  The session's worker only.
 */
unsigned int agent_notify_take(struct agent_notify_sess *ns,
			       struct agent_notify_ev *out, unsigned int max,
			       uint64_t *dropped);

#endif /* AGENT_NOTIFY_H */
