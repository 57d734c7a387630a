/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ceph_wlog.h - the cephfs store's log of acknowledged writes.
 *
 * A write the Ceph client holds in its cache dies with the agent.  Rather
 * than wait for the OSDs before answering (O_DSYNC), the store copies the
 * write into a log in the agent's runtime directory first (a tmpfs: the
 * DPU's memory keeps it if the agent is killed, as its page cache keeps
 * the posix store's data),
 * writes it through the cache, and answers; a flusher thread makes the
 * cluster have it (ceph_sync_fs) a moment later and retires the entries.
 * A SETATTR's outcome (owner, mode, times) is logged the same way, after
 * the Ceph client made it.  The next start replays what was never
 * retired, in order, before any host is served.  See doc/design.md,
 * "Writes to a CephFS are logged, not waited for".
 */
#ifndef AGENT_CEPH_WLOG_H
#define AGENT_CEPH_WLOG_H

#include <stddef.h>
#include <stdint.h>

struct ceph_mount_info;
struct UserPerm;
struct cs_wlog;

/*
 * Open (or make) a log of the CephFS named by tag in directory dir,
 * replay what it and the logs of dead agents there hold into cm, and
 * start the flusher.  NULL and *err 0 when there is no log (dir NULL or
 * "none"); writes then wait for the cluster.  A log that cannot be used
 * or replayed fails the start: *err < 0, with one line logged.
 */
struct cs_wlog *cs_wlog_open(const char *dir, const uint8_t tag[16],
			     struct ceph_mount_info *cm, struct UserPerm *perms,
			     int *err);
/* Make the cluster have everything, retire it all, stop the flusher. */
void cs_wlog_close(struct cs_wlog *w);

/*
 * Log len bytes at off of ino before writing them through the cache.
 * 0 and *slot: logged, cs_wlog_done() follows the write.  < 0: not
 * logged (too large, or the log is full), the caller makes the write
 * durable itself.
 */
int cs_wlog_add(struct cs_wlog *w, uint64_t ino, uint64_t off,
		const void *buf, size_t len, uint32_t *slot);
/*
 * What a SETATTR left of an inode, as cs_wlog_add_attr() logs it: mask
 * says which fields (CEPH_SETATTR_UID, _GID, _MODE, _ATIME, _MTIME).
 */
struct cs_wlog_attr {
	uint32_t mask;
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	int64_t atime;
	int64_t mtime;
	uint32_t atime_nsec;
	uint32_t mtime_nsec;
};

/*
 * Log a SETATTR the Ceph client made (made already: no cs_wlog_done()
 * follows).  0: logged, the flusher makes the cluster have it.  < 0: not
 * logged, the caller makes it durable itself.
 */
int cs_wlog_add_attr(struct cs_wlog *w, uint64_t ino,
		     const struct cs_wlog_attr *a);
/* The write of a logged entry was made (ok) or failed (nothing to keep). */
void cs_wlog_done(struct cs_wlog *w, uint32_t slot, int ok);
/* A point in time for cs_wlog_synced(). */
uint64_t cs_wlog_mark(struct cs_wlog *w);
/* The cluster has what ino's writes (0: every file's) made before mark. */
void cs_wlog_synced(struct cs_wlog *w, uint64_t ino, uint64_t mark);
/* Entries of ino not yet retired (none: a sync can be skipped). */
int cs_wlog_holds(struct cs_wlog *w, uint64_t ino);

#endif
