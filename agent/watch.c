/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * watch.c - the watcher of the data root (see watch.h).
 *
 * Sessions report their own changes to the registry; what a process on
 * the agent's machine changes beneath the root, the agent learns from
 * fanotify: one FAN_MARK_FILESYSTEM mark on the root's file system,
 * events that name objects by file handle (FAN_REPORT_FID) and entries
 * by directory handle and name (FAN_REPORT_DFID_NAME, with the target's
 * handle where the kernel has FAN_REPORT_TARGET_FID).  An event of the
 * agent's own process (its workers, their io_uring threads and the pool
 * all report the agent's pid) is dropped: the session that made the
 * change already told the others.  The rest become agent_notify_external()
 * calls; an overflowed queue becomes agent_notify_reset_all().
 *
 * A file system mark sees the whole file system, so most events may be
 * about objects outside the root: they are dropped after one look in a
 * cache of directory handles that says, for each directory seen, whether
 * it lies beneath the root and what its (dev, ino) is.  A directory not
 * in the cache is opened by handle and walked up with ".." until the root,
 * the top of the file system, or a directory already in the cache; every
 * directory on the way is cached.  A directory moved anywhere may move a
 * whole tree in or out of the root, so such a move empties the cache of
 * its directories.
 * The cache is direct-mapped with WATCH_CACHE_SLOTS entries (about
 * 300 KiB), whatever the file system holds; it also keeps the (dev, ino)
 * of the files events named, so that the DELETE of a file's last name,
 * which comes after FAN_DELETE_SELF, still names the file while it is
 * open somewhere.  A file's (dev, ino) outlives it: once the file is gone
 * the number may already be another object's (a directory a session just
 * made), so a cached file is opened by its handle first, which carries
 * the generation; when that fails with ESTALE the file is gone and its
 * late events name no object (watch_live()).
 *
 * What is not seen: a change made through a hard link whose directory is
 * outside the root, and a link count changed from outside the root of a
 * file the watcher has not seen beneath it; the hosts see those at their
 * next open or when their attribute timeout ends.
 *
 * Threads: the watcher thread owns everything below but the start/stop
 * fields, which only the main thread touches, before the thread starts
 * and after it was joined.  No locks.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/stat.h>

#include "agent.h"
#include "bcp_wire.h"
#include "notify.h"
#include "watch.h"

#define WATCH_MASK	(FAN_MODIFY | FAN_ATTRIB | FAN_CREATE | FAN_DELETE | \
			 FAN_MOVED_FROM | FAN_MOVED_TO | FAN_DELETE_SELF | \
			 FAN_ONDIR)
#define WATCH_CACHE_SLOTS	4096	/* a power of two */
#define WATCH_FH_MAX		48	/* handle bytes an entry keeps */
#define WATCH_DEPTH_MAX		1024	/* ".." steps of one walk */
#define WATCH_WALK_KEEP		32	/* directories a walk caches */
#define WATCH_BUF		(64 * 1024)
#define WATCH_GATHER_NS		1000000	/* events gather, after a read */

#ifndef FAN_REPORT_TARGET_FID
#define FAN_REPORT_TARGET_FID	0x00001000
#endif

enum watch_where {
	WATCH_EMPTY = 0,
	WATCH_IN,			/* a directory beneath the root */
	WATCH_OUT,			/* a directory elsewhere */
	WATCH_OBJ,			/* not a directory: (dev, ino) only */
};

struct watch_ent {
	uint8_t where;			/* enum watch_where */
	uint8_t len;			/* handle_bytes */
	int32_t type;			/* handle_type */
	uint8_t fh[WATCH_FH_MAX];
	struct agent_obj obj;
};

/* A file handle with room for the largest the kernel makes. */
union watch_fh {
	struct file_handle fh;
	uint8_t buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

/* A directory a walk went through, cached once the walk ends. */
struct watch_seen {
	union watch_fh h;
	struct agent_obj obj;
};

static struct {
	/* set by agent_watch_start(), read-only while the thread runs */
	int fan_fd;
	int stop_fd;			/* eventfd: stop the thread */
	int mount_fd;			/* the root, to open by handle */
	int root_mnt;			/* its mount id */
	int target_fid;			/* dirent events carry the target */
	pid_t pid;
	struct agent_obj root;
	union watch_fh root_fh;
	pthread_t thread;
	int running;
	/* the watcher thread's own */
	struct watch_ent cache[WATCH_CACHE_SLOTS];
	struct watch_seen seen[WATCH_WALK_KEEP];	/* one walk's */
	uint64_t events, own, outside, sent, resets, gone;
} watch = { .fan_fd = -1, .stop_fd = -1, .mount_fd = -1 };

static uint32_t watch_hash(const struct file_handle *fh)
{
	uint32_t h = 2166136261u ^ (uint32_t)fh->handle_type;
	unsigned int i;

	for (i = 0; i < fh->handle_bytes; i++)
		h = (h ^ fh->f_handle[i]) * 16777619u;
	return h & (WATCH_CACHE_SLOTS - 1);
}

static int watch_fh_equal(const struct file_handle *a,
			  const struct file_handle *b)
{
	return a->handle_type == b->handle_type &&
	       a->handle_bytes == b->handle_bytes &&
	       !memcmp(a->f_handle, b->f_handle, a->handle_bytes);
}

static struct watch_ent *watch_find(const struct file_handle *fh)
{
	struct watch_ent *e = &watch.cache[watch_hash(fh)];

	if (e->where == WATCH_EMPTY || e->type != fh->handle_type ||
	    e->len != fh->handle_bytes ||
	    memcmp(e->fh, fh->f_handle, e->len))
		return NULL;
	return e;
}

/* Keep what fh names; a handle too long to keep is looked up each time. */
static void watch_put(const struct file_handle *fh, int where,
		      const struct agent_obj *obj)
{
	struct watch_ent *e = &watch.cache[watch_hash(fh)];

	if (fh->handle_bytes > WATCH_FH_MAX)
		return;
	e->where = (uint8_t)where;
	e->len = (uint8_t)fh->handle_bytes;
	e->type = fh->handle_type;
	memcpy(e->fh, fh->f_handle, fh->handle_bytes);
	e->obj = *obj;
}

static int watch_is_root(const struct stat *st)
{
	return (uint64_t)st->st_dev == watch.root.dev &&
	       (uint64_t)st->st_ino == watch.root.ino;
}

/*
 * Whether the directory fh names lies beneath the root (or is it): 1 with
 * *obj set, 0 when it lies elsewhere or is gone.  Bounded: at most
 * WATCH_DEPTH_MAX steps up, each a few system calls, and only for a
 * directory not yet cached; a tree deeper than that counts as beneath
 * the root (the registry ignores what nobody holds).
 */
static int watch_dir_in(const struct file_handle *fh, struct agent_obj *obj)
{
	struct watch_ent *e = watch_find(fh);
	unsigned int nseen = 0, depth, i;
	struct watch_seen *s;
	struct stat st, up;
	int fd, ufd, where = WATCH_IN, mnt;

	if (e && e->where != WATCH_OBJ) {
		*obj = e->obj;
		return e->where == WATCH_IN;
	}
	fd = open_by_handle_at(watch.mount_fd, (struct file_handle *)fh,
			       O_PATH | O_CLOEXEC);
	if (fd < 0)
		return 0;	/* gone: nobody can hold what is in it */
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		close(fd);
		return 0;
	}
	obj->dev = (uint64_t)st.st_dev;
	obj->ino = (uint64_t)st.st_ino;
	for (depth = 0; depth < WATCH_DEPTH_MAX; depth++) {
		if (watch_is_root(&st))
			break;
		if (depth > 0) {
			/* an ancestor already known ends the walk */
			union watch_fh h;

			h.fh.handle_bytes = MAX_HANDLE_SZ;
			if (name_to_handle_at(fd, "", &h.fh, &mnt,
					      AT_EMPTY_PATH) < 0 ||
			    mnt != watch.root_mnt) {
				where = WATCH_OUT;	/* another mount */
				break;
			}
			e = watch_find(&h.fh);
			if (e && e->where != WATCH_OBJ) {
				where = e->where;
				break;
			}
			if (nseen < WATCH_WALK_KEEP) {
				s = &watch.seen[nseen++];
				s->h = h;
				s->obj.dev = (uint64_t)st.st_dev;
				s->obj.ino = (uint64_t)st.st_ino;
			}
		}
		ufd = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (ufd < 0 || fstat(ufd, &up) < 0) {
			if (ufd >= 0)
				close(ufd);
			close(fd);
			return 0;	/* removed while we walked */
		}
		close(fd);
		fd = ufd;
		if (up.st_dev == st.st_dev && up.st_ino == st.st_ino) {
			where = WATCH_OUT;	/* the file system's top */
			break;
		}
		st = up;
	}
	close(fd);
	watch_put(fh, where, obj);
	for (i = 0; i < nseen; i++)
		watch_put(&watch.seen[i].h.fh, where, &watch.seen[i].obj);
	return where == WATCH_IN;
}

/*
 * Whether the file a cached entry names still exists: its number may be
 * another object's once it is gone.  One open by handle; only ESTALE or
 * ENOENT (the handle names nothing any more) says gone, and empties e.
 * The descriptor is the caller's (-1 when the open failed otherwise).
 */
static int watch_live(struct watch_ent *e, const struct file_handle *fh,
		      int *pin)
{
	int fd = open_by_handle_at(watch.mount_fd, (struct file_handle *)fh,
				   O_PATH | O_CLOEXEC);

	*pin = fd;
	if (fd >= 0)
		return 1;
	if (errno != ESTALE && errno != ENOENT)
		return 1;
	e->where = WATCH_EMPTY;
	watch.gone++;
	return 0;
}

/*
 * The (dev, ino) of the object fh names: 0, or -ENOENT.  in: the event
 * named its directory, which lies beneath the root, so the object is
 * looked up if need be (and a directory it names lies beneath the root
 * too); otherwise only an object seen beneath the root before is known.
 * *pin: a descriptor of the file, or -1, which the caller closes once
 * the change is sent: while it is open the file's number cannot be given
 * to another object (ext4 does so at once), so a file removed in the
 * meantime is never told about under the number of one a session just
 * made (a directory a host then forgets it knew empty).
 */
static int watch_obj(const struct file_handle *fh, int in,
		     struct agent_obj *obj, int *pin)
{
	struct watch_ent *e = watch_find(fh);
	struct stat st;
	int fd;

	*pin = -1;
	if (e) {
		if (e->where == WATCH_OUT)
			return -ENOENT;
		if (e->where == WATCH_OBJ && !watch_live(e, fh, pin))
			return -ENOENT;
		*obj = e->obj;
		return 0;
	}
	if (!in)
		return -ENOENT;
	fd = open_by_handle_at(watch.mount_fd, (struct file_handle *)fh,
			       O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -ENOENT;
	}
	*pin = fd;
	obj->dev = (uint64_t)st.st_dev;
	obj->ino = (uint64_t)st.st_ino;
	watch_put(fh, S_ISDIR(st.st_mode) ? WATCH_IN : WATCH_OBJ, obj);
	return 0;
}

/* A directory moved: whole trees may have entered or left the root. */
static void watch_forget_dirs(void)
{
	unsigned int i;

	for (i = 0; i < WATCH_CACHE_SLOTS; i++)
		if (watch.cache[i].where != WATCH_OBJ)
			watch.cache[i].where = WATCH_EMPTY;
}

/* One change to the registry; pid made it (for the debug line). */
static void watch_send(uint32_t kind, const struct agent_obj *obj,
		       const struct agent_obj *parent, const char *name,
		       int64_t offset, int pid)
{
	static const char *const kinds[] = {
		[BCP_NOTIFY_INODE] = "inode", [BCP_NOTIFY_ENTRY] = "entry",
		[BCP_NOTIFY_DELETE] = "delete",
	};
	struct agent_change c = {
		.kind = kind,
		.offset = offset,
	};

	if (obj)
		c.obj = *obj;
	if (parent)
		c.parent = *parent;
	if (name) {
		c.name = name;
		c.len = strlen(name);
	}
	agent_dbg("watch: %s %llu:%llu in %llu:%llu '%s' offset %lld by pid "
		  "%d", kinds[kind], (unsigned long long)c.obj.dev,
		  (unsigned long long)c.obj.ino,
		  (unsigned long long)c.parent.dev,
		  (unsigned long long)c.parent.ino, name ? name : "",
		  (long long)offset, pid);
	agent_notify_external(&c);
	watch.sent++;
}

/* The handles an event carries; NULL when absent. */
struct watch_rec {
	const struct file_handle *dir;	/* the directory of name */
	const char *name;
	const struct file_handle *obj;	/* the object (or the target) */
};

static int watch_parse(const struct fanotify_event_metadata *m,
		       const uint8_t *raw, struct watch_rec *r)
{
	const uint8_t *p = raw + m->metadata_len;
	const uint8_t *end = raw + m->event_len;

	memset(r, 0, sizeof(*r));
	while (p + sizeof(struct fanotify_event_info_header) <= end) {
		const struct fanotify_event_info_fid *f = (const void *)p;
		const struct file_handle *fh;
		size_t len = f->hdr.len, min;

		if (len < sizeof(f->hdr) || len > (size_t)(end - p))
			return -EINVAL;
		p += len;
		if (f->hdr.info_type != FAN_EVENT_INFO_TYPE_FID &&
		    f->hdr.info_type != FAN_EVENT_INFO_TYPE_DFID_NAME &&
		    f->hdr.info_type != FAN_EVENT_INFO_TYPE_DFID)
			continue;
		min = sizeof(*f) + sizeof(struct file_handle);
		if (len < min)
			return -EINVAL;
		fh = (const struct file_handle *)f->handle;
		if (fh->handle_bytes > len - min)
			return -EINVAL;
		if (f->hdr.info_type == FAN_EVENT_INFO_TYPE_FID) {
			r->obj = fh;
			continue;
		}
		r->dir = fh;
		if (f->hdr.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
			const char *name = (const char *)fh->f_handle +
					   fh->handle_bytes;
			size_t room = len - min - fh->handle_bytes;

			if (!room || !memchr(name, '\0', room))
				return -EINVAL;
			r->name = name;
		}
	}
	return 0;
}

/* One event: m, a copy of its header, and raw, the event itself. */
static void watch_event(const struct fanotify_event_metadata *m,
			const uint8_t *raw)
{
	const uint64_t dirent = FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM |
				FAN_MOVED_TO;
	struct agent_obj parent, obj;
	struct watch_rec r;
	int in = 0, have_obj, pin = -1;

	watch.events++;
	if (m->mask & FAN_Q_OVERFLOW) {
		agent_warn_rl("watch: the event queue overflowed; every host "
			      "drops what it cached");
		memset(watch.cache, 0, sizeof(watch.cache));
		agent_notify_reset_all();
		watch.resets++;
		return;
	}
	if (m->pid == watch.pid) {
		watch.own++;
		return;
	}
	if (watch_parse(m, raw, &r) < 0) {
		agent_warn_rl("watch: malformed event (mask %#llx) dropped",
			      (unsigned long long)m->mask);
		return;
	}
	/* rmdir: the directory itself, named "." in itself */
	if (r.dir && !r.obj && r.name && !strcmp(r.name, ".")) {
		r.obj = r.dir;
		r.dir = NULL;
		r.name = NULL;
	}
	/* without FAN_REPORT_TARGET_FID the "object" is the directory */
	if (r.obj && r.dir && (m->mask & dirent) &&
	    (!watch.target_fid || watch_fh_equal(r.obj, r.dir)))
		r.obj = NULL;
	if (r.dir) {
		in = watch_dir_in(r.dir, &parent);
		if (!in && r.obj && watch_fh_equal(r.obj, &watch.root_fh.fh) &&
		    (m->mask & FAN_ATTRIB)) {
			/* the root itself, as its parent sees it */
			watch_send(BCP_NOTIFY_INODE, &watch.root, NULL, NULL,
				   -1, m->pid);
		} else if (!in) {
			watch.outside++;
		}
		if (!in)
			goto out;
	}
	/*
	 * Without a directory (a link count changed, the last link went)
	 * only an object seen beneath the root is known: looking up every
	 * such object of the file system would cost system calls for
	 * files elsewhere, and a file's last link going is followed by the
	 * DELETE of its name anyway.
	 */
	have_obj = r.obj && watch_obj(r.obj, in, &obj, &pin) == 0;
	if (!have_obj)
		memset(&obj, 0, sizeof(obj));
	/*
	 * The object of a name added or removed goes with it (dev 0 when
	 * gone and never seen): its link count, or its parent, changed,
	 * and the registry tells its holders so.
	 */
	if (r.name && (m->mask & (FAN_DELETE | FAN_MOVED_FROM)))
		watch_send(BCP_NOTIFY_DELETE, &obj, &parent, r.name, 0,
			   m->pid);
	if (r.name && (m->mask & (FAN_CREATE | FAN_MOVED_TO)))
		watch_send(BCP_NOTIFY_ENTRY, &obj, &parent, r.name, 0,
			   m->pid);
	if (have_obj && (m->mask & (FAN_MODIFY | FAN_ATTRIB)))
		watch_send(BCP_NOTIFY_INODE, &obj, NULL, NULL,
			   m->mask & FAN_MODIFY ? 0 : -1, m->pid);
	if (pin >= 0)
		close(pin);
out:
	if ((m->mask & (FAN_MOVED_FROM | FAN_MOVED_TO)) &&
	    (m->mask & FAN_ONDIR))
		watch_forget_dirs();
}

static void *watch_main(void *arg)
{
	static uint8_t buf[WATCH_BUF];
	struct pollfd pfd[2] = {
		{ .fd = watch.fan_fd, .events = POLLIN },
		{ .fd = watch.stop_fd, .events = POLLIN },
	};
	const struct timespec gather = { .tv_nsec = WATCH_GATHER_NS };
	struct fanotify_event_metadata md;
	size_t got, off;
	ssize_t n;

	(void)arg;
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			agent_err("watch: poll: %s; no longer watching",
				  strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		n = read(watch.fan_fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			agent_err("watch: read: %s; no longer watching",
				  strerror(errno));
			agent_notify_reset_all();
			break;
		}
		got = (size_t)n;
		/* events are 4-byte aligned: each header is copied */
		for (off = 0; off + sizeof(md) <= got; off += md.event_len) {
			memcpy(&md, buf + off, sizeof(md));
			if (md.event_len < sizeof(md) ||
			    md.event_len > got - off ||
			    md.metadata_len < sizeof(md) ||
			    md.metadata_len > md.event_len)
				break;
			if (md.vers != FANOTIFY_METADATA_VERSION) {
				agent_err("watch: fanotify event version %u, "
					  "expected %u; no longer watching",
					  md.vers, FANOTIFY_METADATA_VERSION);
				return NULL;
			}
			watch_event(&md, buf + off);
		}
		/*
		 * A process writing files one by one makes one event at a
		 * time: waking for each would cost the watcher a context
		 * switch per event.  Let them gather for a moment unless
		 * the buffer came back full.
		 */
		if (got < WATCH_BUF / 2)
			nanosleep(&gather, NULL);
	}
	return NULL;
}

/* Why the agent cannot watch, for the line that says so. */
static const char *watch_why(const char *what, int err)
{
	static char buf[256];

	if (err == EPERM || err == EACCES)
		snprintf(buf, sizeof(buf), "%s: the agent lacks CAP_SYS_ADMIN "
			 "(fanotify) or CAP_DAC_READ_SEARCH (open by handle)",
			 what);
	else if (err == EINVAL || err == ENOSYS)
		snprintf(buf, sizeof(buf), "%s: the kernel has no fanotify "
			 "with file handles and names (Linux 5.9 or later)",
			 what);
	else if (err == ENODEV || err == EXDEV || err == EOPNOTSUPP)
		snprintf(buf, sizeof(buf), "%s: the root's file system cannot "
			 "be watched as a whole (%s)", what, strerror(err));
	else
		snprintf(buf, sizeof(buf), "%s: %s", what, strerror(err));
	return buf;
}

static void watch_close(void)
{
	if (watch.fan_fd >= 0)
		close(watch.fan_fd);
	if (watch.stop_fd >= 0)
		close(watch.stop_fd);
	if (watch.mount_fd >= 0)
		close(watch.mount_fd);
	watch.fan_fd = watch.stop_fd = watch.mount_fd = -1;
}

int agent_watch_start(int root_fd, const char *root,
		      enum agent_watch_mode mode)
{
	const unsigned int base = FAN_CLASS_NOTIF | FAN_CLOEXEC |
				  FAN_NONBLOCK | FAN_REPORT_FID |
				  FAN_REPORT_DFID_NAME;
	const char *why;
	struct stat st;
	int fd, ret;

	if (mode == AGENT_WATCH_NO) {
		agent_info("not watching %s (--watch no): changes made by "
			   "other processes on this machine are seen by hosts "
			   "at their next open or when their attribute "
			   "timeout ends", root);
		return 0;
	}
	/* fanotify sees one machine's file system, not a cluster's */
	if (root_fd < 0 && mode == AGENT_WATCH_YES) {
		agent_err("cannot watch %s (--watch yes): only a posix store "
			  "can be watched; use --watch auto or no", root);
		return -EOPNOTSUPP;
	}
	if (root_fd < 0) {
		agent_info("not watching %s: not a posix store", root);
		return 0;
	}
	watch.pid = getpid();
	watch.target_fid = 1;
	watch.fan_fd = fanotify_init(base | FAN_REPORT_TARGET_FID,
				     O_RDONLY | O_LARGEFILE | O_CLOEXEC);
	if (watch.fan_fd < 0 && errno == EINVAL) {
		watch.target_fid = 0;
		watch.fan_fd = fanotify_init(base, O_RDONLY | O_LARGEFILE |
					     O_CLOEXEC);
	}
	if (watch.fan_fd < 0) {
		ret = -errno;
		why = watch_why("fanotify_init", -ret);
		goto out_close;
	}
	/* open_by_handle_at() wants a descriptor that is not O_PATH */
	watch.mount_fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY |
				O_CLOEXEC);
	if (watch.mount_fd < 0 || fstat(watch.mount_fd, &st) < 0) {
		ret = -errno;
		why = watch_why("the data root", -ret);
		goto out_close;
	}
	watch.root.dev = (uint64_t)st.st_dev;
	watch.root.ino = (uint64_t)st.st_ino;
	watch.root_fh.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(root_fd, "", &watch.root_fh.fh, &watch.root_mnt,
			      AT_EMPTY_PATH) < 0) {
		ret = -errno;
		why = watch_why("name_to_handle_at", -ret);
		goto out_close;
	}
	fd = open_by_handle_at(watch.mount_fd, &watch.root_fh.fh,
			       O_PATH | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		why = watch_why("open_by_handle_at", -ret);
		goto out_close;
	}
	close(fd);
	if (fanotify_mark(watch.fan_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
			  WATCH_MASK, watch.mount_fd, NULL) < 0) {
		ret = -errno;
		why = watch_why("fanotify_mark", -ret);
		goto out_close;
	}
	watch.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (watch.stop_fd < 0) {
		ret = -errno;
		why = watch_why("eventfd", -ret);
		goto out_close;
	}
	ret = -pthread_create(&watch.thread, NULL, watch_main, NULL);
	if (ret < 0) {
		why = watch_why("pthread_create", -ret);
		goto out_close;
	}
	pthread_setname_np(watch.thread, "bca-watch");
	watch.running = 1;
	agent_info("watching %s for changes made by other processes on this "
		   "machine", root);
	return 1;

out_close:
	watch_close();
	if (mode == AGENT_WATCH_YES) {
		agent_err("cannot watch %s (--watch yes): %s", root, why);
		return ret;
	}
	agent_info("not watching %s (%s): changes made by other processes on "
		   "this machine are seen by hosts at their next open or when "
		   "their attribute timeout ends", root, why);
	return 0;
}

void agent_watch_stop(void)
{
	uint64_t one = 1;

	if (!watch.running)
		return;
	if (write(watch.stop_fd, &one, sizeof(one)) != sizeof(one))
		agent_err("watch: cannot stop the watcher: %s",
			  strerror(errno));
	pthread_join(watch.thread, NULL);
	watch.running = 0;
	agent_dbg("watch: %llu events, %llu of the agent, %llu outside the "
		  "root, %llu changes reported, %llu resets, %llu of objects "
		  "gone", (unsigned long long)watch.events,
		  (unsigned long long)watch.own,
		  (unsigned long long)watch.outside,
		  (unsigned long long)watch.sent,
		  (unsigned long long)watch.resets,
		  (unsigned long long)watch.gone);
	watch_close();
}
