/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * notify.c - the agent's notifications turned into the kernel's cache
 * invalidations, so that entries, attributes, negative entries and pages
 * can be cached for long and still change when another mount, or a
 * process on the agent's machine, changes them.
 *
 * The client library hands each NOTIFY to bcfs_notify_cb() on its receiver
 * thread, which must not wait: the callback only queues it in a bounded
 * ring.  A thread of its own, the notifier, empties the ring and calls
 * fuse_lowlevel_notify_inval_inode / _inval_entry / _delete.  Those write
 * to /dev/fuse and may wait for the kernel's inode and directory locks,
 * held by requests in flight; a request handler calling them could
 * deadlock with its own request, the notifier never does (it answers no
 * request, and the requests it may wait for are answered by the receiver
 * thread, which never waits for it).
 *
 * A ring that overflows, or a RESET from the agent or from the library
 * after a reconnect, drops everything the kernel caches: every inode the
 * table knows, every name it remembers, and every negative entry this
 * mount handed out.  The kernel cannot be asked to drop negative entries
 * it holds without naming them, so each ENOENT answered with a timeout is
 * remembered here (BCFS_NEG_MAX of them; when all are still live, a
 * further ENOENT is not cached at all rather than forgotten).  What the
 * daemon itself knows (the directories it knows in full, dirs.c; their
 * attributes, dattr.c; which replies out may be older than a change)
 * follows every notification as it comes, queued or not: an overflow of
 * the ring costs it nothing, a RESET everything.
 *
 * A reply the agent computed before a change can arrive after the
 * notification of it.  The callback moves a generation on with every
 * notification and remembers what the last BCFS_NOTIFY_RECENT were about
 * (kind, handle, child); a reply to a request sent before a move is given
 * to the kernel with a timeout of 0 when a notification since may have
 * been about what it tells: one naming its node or directory, a RESET, or
 * one no longer remembered (bcfs_notify_timeout()).  News of other
 * objects, which a busy directory elsewhere sends by the thousand, leaves
 * it cached.
 *
 * Locks: bcfs_notify.lock (the ring, the generation, what was recent),
 * then bcfs_dirs.lock (dirs.c) or bcfs_dattr_lock (dattr.c), then
 * bcfs_neg.lock (negative entries); none is held across a call into the
 * table, only bcfs_dirs.lock across a reply to the kernel.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bcfs_i.h"

/* ~300 bytes each: 1024 notifications queued are 300 KiB */
#define BCFS_NOTIFY_QUEUE	1024
/*
 * An open waits at most this long for the kernel to be told what came
 * before it (the wait is bounded so that a kernel lock the notifier waits
 * for can never hold the open forever).
 */
#define BCFS_NOTIFY_SYNC_S	1
/* negative entries remembered for a RESET */
#define BCFS_NEG_MAX		4096
/* notifications remembered for the replies out meanwhile; a power of 2 */
#define BCFS_NOTIFY_RECENT	256

struct bcfs_note {
	uint64_t gen;		/* bcfs_notify_generation it moved to */
	uint32_t kind;
	uint16_t len;
	uint64_t handle;
	uint64_t child;
	int64_t offset;
	int64_t length;
	char name[BCP_NAME_MAX + 1];
};

/* What a notification was about, for a reply out when it came. */
struct bcfs_recent {
	uint64_t gen;		/* bcfs_notify_generation it moved to */
	uint64_t handle;
	uint64_t child;
	uint32_t kind;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* work for the notifier */
	pthread_cond_t done_cond;	/* done_gen moved (bcfs_notify_sync) */
	pthread_t thread;
	/* protected by lock */
	int started;
	struct bcfs_note *ring;
	unsigned int head;	/* oldest */
	unsigned int count;
	int reset;		/* drop everything before the ring */
	uint64_t reset_gen;	/* the last notification the reset covers */
	int busy;		/* the notifier is telling the kernel */
	uint64_t done_gen;	/* told the kernel up to here (atomic) */
	int stop;
	uint64_t overflows;
	struct bcfs_recent recent[BCFS_NOTIFY_RECENT];	/* by gen */
} bcfs_notify = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.done_cond = PTHREAD_COND_INITIALIZER,
};

/*
 * Moved on by every notification received; written under bcfs_notify.lock,
 * read without it (atomic).
 */
static uint64_t bcfs_notify_generation;

struct bcfs_neg {
	fuse_ino_t parent;
	uint64_t until;		/* monotonic ns */
	char *name;
};

static struct {
	pthread_mutex_t lock;
	/* protected by lock */
	struct bcfs_neg v[BCFS_NEG_MAX];
	unsigned int next;	/* the oldest, replaced next */
} bcfs_neg = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

uint64_t bcfs_notify_gen(void)
{
	return __atomic_load_n(&bcfs_notify_generation, __ATOMIC_ACQUIRE);
}

void bcfs_notify_lock(void)
{
	pthread_mutex_lock(&bcfs_notify.lock);
}

void bcfs_notify_unlock(void)
{
	pthread_mutex_unlock(&bcfs_notify.lock);
}

static int bcfs_recent_names(const struct bcfs_recent *r, uint64_t h)
{
	return h && (r->handle == h || r->child == h);
}

int bcfs_notify_touched_locked(uint64_t gen, uint64_t a, uint64_t b)
{
	uint64_t now = bcfs_notify_gen(), g;
	const struct bcfs_recent *r;

	if (now - gen > BCFS_NOTIFY_RECENT)
		return 1;
	for (g = gen + 1; g <= now; g++) {
		r = &bcfs_notify.recent[g & (BCFS_NOTIFY_RECENT - 1)];
		if (r->gen != g || r->kind == BCP_NOTIFY_RESET ||
		    bcfs_recent_names(r, a) || bcfs_recent_names(r, b))
			return 1;
	}
	return 0;
}

int bcfs_notify_touched(uint64_t gen, uint64_t a, uint64_t b)
{
	int ret;

	if (bcfs_notify_gen() == gen)
		return 0;
	pthread_mutex_lock(&bcfs_notify.lock);
	ret = bcfs_notify_touched_locked(gen, a, b);
	pthread_mutex_unlock(&bcfs_notify.lock);
	return ret;
}

double bcfs_notify_timeout(double timeout, uint64_t gen, uint64_t a,
			   uint64_t b)
{
	return bcfs_notify_touched(gen, a, b) ? 0 : timeout;
}

static void bcfs_notify_queue(const struct bcp_notify_req *n,
			      const char *name)
{
	struct bcfs_recent *r;
	struct bcfs_note *e;
	uint64_t gen;
	int overflow;

	pthread_mutex_lock(&bcfs_notify.lock);
	gen = __atomic_add_fetch(&bcfs_notify_generation, 1,
				 __ATOMIC_ACQ_REL);
	overflow = !bcfs_notify.stop && !bcfs_notify.reset &&
		   n->kind != BCP_NOTIFY_RESET &&
		   (bcfs_notify.count == BCFS_NOTIFY_QUEUE ||
		    !bcfs_notify.ring);
	/*
	 * What this daemon knows follows each notification here, queued
	 * or not: an overflow loses only what the kernel had to be told,
	 * and the RESET below drops what the kernel caches.
	 */
	r = &bcfs_notify.recent[gen & (BCFS_NOTIFY_RECENT - 1)];
	r->gen = gen;
	r->kind = n->kind;
	r->handle = n->handle;
	r->child = n->child;
	/* before the kernel can be told: see dirs.c */
	bcfs_dirs_noted(r->kind, n->handle);
	bcfs_dattr_notified(r->kind, n->handle);
	if (bcfs_notify.stop)
		goto out_unlock;
	if (bcfs_notify.reset) {
		/* the RESET to come covers this one too */
		bcfs_notify.reset_gen = gen;
		goto out_unlock;
	}
	if (n->kind == BCP_NOTIFY_RESET || overflow) {
		if (overflow)
			bcfs_notify.overflows++;
		bcfs_notify.reset = 1;
		bcfs_notify.reset_gen = gen;
		bcfs_notify.count = 0;
		pthread_cond_signal(&bcfs_notify.cond);
		goto out_unlock;
	}
	e = &bcfs_notify.ring[(bcfs_notify.head + bcfs_notify.count) %
			      BCFS_NOTIFY_QUEUE];
	e->gen = gen;
	e->kind = n->kind;
	e->handle = n->handle;
	e->child = n->child;
	e->offset = n->offset;
	e->length = n->length;
	e->len = name ? n->name_len : 0;
	if (name)
		memcpy(e->name, name, e->len + 1);
	bcfs_notify.count++;
	pthread_cond_signal(&bcfs_notify.cond);
out_unlock:
	pthread_mutex_unlock(&bcfs_notify.lock);
}

void bcfs_notify_cb(void *arg, const struct bcp_notify_req *n,
		    const char *name)
{
	(void)arg;
	bcfs_metrics_notice(n->kind);
	bcfs_notify_queue(n, name);
}

void bcfs_notify_self(uint64_t handle, int64_t offset)
{
	struct bcp_notify_req n;

	memset(&n, 0, sizeof(n));
	n.kind = BCP_NOTIFY_INODE;
	n.handle = handle;
	n.offset = offset;
	bcfs_notify_queue(&n, NULL);
}

double bcfs_notify_negative(fuse_ino_t parent, const char *name,
			    uint64_t gen)
{
	return bcfs_notify_negative_for(parent, name,
					bcfs_notify_timeout(bcfs_g.neg_timeout,
							    gen,
							    bcfs_handle(parent),
							    0));
}

double bcfs_notify_negative_for(fuse_ino_t parent, const char *name,
				double t)
{
	uint64_t now = bcfs_now_ns();
	struct bcfs_neg *n;
	char *nm;

	if (t <= 0)
		return 0;
	nm = strdup(name);
	if (!nm)
		return 0;
	pthread_mutex_lock(&bcfs_neg.lock);
	n = &bcfs_neg.v[bcfs_neg.next];
	if (n->name && n->until > now) {
		/* all live: not cached beats cached and forgotten */
		pthread_mutex_unlock(&bcfs_neg.lock);
		free(nm);
		return 0;
	}
	free(n->name);
	n->parent = parent;
	n->name = nm;
	n->until = now + (uint64_t)(t * 1e9) + 1000000000ull;
	bcfs_neg.next = (bcfs_neg.next + 1) % BCFS_NEG_MAX;
	pthread_mutex_unlock(&bcfs_neg.lock);
	return t;
}

/* The kernel forgot what it is told about: that is no error. */
static void bcfs_notify_said(const char *what, int ret)
{
	static int unsupported;

	if (ret >= 0 || ret == -ENOENT || ret == -ENOTDIR)
		return;
	if (ret == -ENOSYS) {
		if (!__atomic_exchange_n(&unsupported, 1, __ATOMIC_ACQ_REL))
			bcfs_warn("the kernel takes no cache invalidations: "
				  "changes made elsewhere show when the "
				  "cache times out");
		return;
	}
	bcfs_dbg("%s: %s", what, strerror(-ret));
}

static void bcfs_inval_inode(fuse_ino_t ino, off_t off, off_t len)
{
	bcfs_notify_said("inval_inode",
			 fuse_lowlevel_notify_inval_inode(bcfs_g.se, ino, off,
							  len));
}

static void bcfs_inval_entry(fuse_ino_t parent, const char *name, size_t len)
{
	bcfs_notify_said("inval_entry",
			 fuse_lowlevel_notify_inval_entry(bcfs_g.se, parent,
							  name, len));
}

/* Every negative entry still live; the records go. */
static void bcfs_neg_drop_all(void)
{
	struct bcfs_neg *v;
	unsigned int i, n = 0;
	uint64_t now = bcfs_now_ns();

	v = malloc(sizeof(*v) * BCFS_NEG_MAX);
	pthread_mutex_lock(&bcfs_neg.lock);
	for (i = 0; i < BCFS_NEG_MAX; i++) {
		if (!bcfs_neg.v[i].name)
			continue;
		if (v && bcfs_neg.v[i].until > now)
			v[n++] = bcfs_neg.v[i];
		else
			free(bcfs_neg.v[i].name);
		bcfs_neg.v[i].name = NULL;
	}
	bcfs_neg.next = 0;
	pthread_mutex_unlock(&bcfs_neg.lock);
	if (!v)
		return;
	for (i = 0; i < n; i++) {
		bcfs_inval_entry(v[i].parent, v[i].name, strlen(v[i].name));
		free(v[i].name);
	}
	free(v);
}

static void bcfs_notify_reset(void)
{
	struct bcfs_iname *v = NULL;
	size_t i, n = 0;

	bcfs_inval_inode(FUSE_ROOT_ID, 0, 0);
	if (bcfs_inode_names(&v, &n) < 0)
		bcfs_warn("out of memory: cached inodes stay until they time "
			  "out");
	for (i = 0; i < n; i++) {
		bcfs_inval_inode(bcfs_nodeid(v[i].handle), 0, 0);
		bcfs_inode_data_news(v[i].handle);
		if (v[i].name)
			bcfs_inval_entry(bcfs_nodeid(v[i].parent), v[i].name,
					 strlen(v[i].name));
	}
	bcfs_inode_names_free(v, n);
	bcfs_neg_drop_all();
}

static void bcfs_notify_one(const struct bcfs_note *e)
{
	fuse_ino_t ino = bcfs_nodeid(e->handle);
	int ret;

	switch (e->kind) {
	case BCP_NOTIFY_INODE:
		/* xattrs are attributes: the capability answer may be old */
		bcfs_inode_xattr_forget(e->handle);
		bcfs_inval_inode(ino, e->offset, e->length);
		/* an append here asks where the file ends now */
		if (e->offset >= 0)
			bcfs_inode_data_news(e->handle);
		break;
	case BCP_NOTIFY_ENTRY:
		bcfs_inval_entry(ino, e->name, e->len);
		/* the directory's attributes, and its cached listing */
		bcfs_inval_inode(ino, 0, 0);
		break;
	case BCP_NOTIFY_DELETE:
		ret = fuse_lowlevel_notify_delete(bcfs_g.se, ino,
						  bcfs_nodeid(e->child),
						  e->name, e->len);
		/* not the child the kernel has there, or none: the name */
		if (ret < 0)
			bcfs_inval_entry(ino, e->name, e->len);
		bcfs_inval_inode(ino, 0, 0);
		break;
	}
}

static void *bcfs_notify_main(void *arg)
{
	struct bcfs_note *e;
	uint64_t overflows, gen;
	int reset;

	(void)arg;
	e = malloc(sizeof(*e));
	pthread_mutex_lock(&bcfs_notify.lock);
	for (;;) {
		while (!bcfs_notify.stop && !bcfs_notify.reset &&
		       !bcfs_notify.count)
			pthread_cond_wait(&bcfs_notify.cond,
					  &bcfs_notify.lock);
		if (bcfs_notify.stop)
			break;
		reset = bcfs_notify.reset || !e;
		if (reset) {
			bcfs_notify.reset = 0;
			bcfs_notify.count = 0;
			gen = bcfs_notify_gen();
			overflows = bcfs_notify.overflows;
			bcfs_notify.overflows = 0;
		} else {
			*e = bcfs_notify.ring[bcfs_notify.head];
			gen = e->gen;
			bcfs_notify.head = (bcfs_notify.head + 1) %
					   BCFS_NOTIFY_QUEUE;
			bcfs_notify.count--;
		}
		bcfs_notify.busy = 1;
		pthread_mutex_unlock(&bcfs_notify.lock);
		if (reset) {
			if (overflows)
				bcfs_info("%llu notifications over the queue: "
					  "the kernel's caches dropped",
					  (unsigned long long)overflows);
			bcfs_notify_reset();
		} else {
			bcfs_notify_one(e);
		}
		pthread_mutex_lock(&bcfs_notify.lock);
		bcfs_notify.busy = 0;
		if (gen > bcfs_notify.done_gen)
			__atomic_store_n(&bcfs_notify.done_gen, gen,
					 __ATOMIC_RELEASE);
		pthread_cond_broadcast(&bcfs_notify.done_cond);
	}
	bcfs_notify.busy = 0;
	pthread_cond_broadcast(&bcfs_notify.done_cond);
	pthread_mutex_unlock(&bcfs_notify.lock);
	free(e);
	return NULL;
}

void bcfs_notify_sync(void)
{
	uint64_t target = bcfs_notify_gen();
	struct timespec ts;

	/* written under the lock, peeked at without it */
	if (__atomic_load_n(&bcfs_notify.done_gen, __ATOMIC_ACQUIRE) >= target)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += BCFS_NOTIFY_SYNC_S;
	pthread_mutex_lock(&bcfs_notify.lock);
	while (bcfs_notify.started && !bcfs_notify.stop &&
	       bcfs_notify.done_gen < target &&
	       (bcfs_notify.count || bcfs_notify.reset || bcfs_notify.busy)) {
		if (pthread_cond_timedwait(&bcfs_notify.done_cond,
					   &bcfs_notify.lock, &ts) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&bcfs_notify.lock);
}

int bcfs_notify_init(void)
{
	bcfs_notify.ring = calloc(BCFS_NOTIFY_QUEUE, sizeof(*bcfs_notify.ring));
	return bcfs_notify.ring ? 0 : -ENOMEM;
}

int bcfs_notify_start(void)
{
	int ret;

	ret = -pthread_create(&bcfs_notify.thread, NULL, bcfs_notify_main,
			      NULL);
	if (ret) {
		bcfs_err("cannot start the notifier thread: %s",
			 strerror(-ret));
		return ret;
	}
	pthread_setname_np(bcfs_notify.thread, "bcfs-notify");
	pthread_mutex_lock(&bcfs_notify.lock);
	bcfs_notify.started = 1;
	pthread_mutex_unlock(&bcfs_notify.lock);
	return 0;
}

void bcfs_notify_fini(void)
{
	unsigned int i;
	int started;

	pthread_mutex_lock(&bcfs_notify.lock);
	bcfs_notify.stop = 1;
	started = bcfs_notify.started;
	pthread_cond_signal(&bcfs_notify.cond);
	pthread_cond_broadcast(&bcfs_notify.done_cond);
	pthread_mutex_unlock(&bcfs_notify.lock);
	if (started)
		pthread_join(bcfs_notify.thread, NULL);
	pthread_mutex_lock(&bcfs_notify.lock);
	bcfs_notify.started = 0;
	free(bcfs_notify.ring);
	bcfs_notify.ring = NULL;
	pthread_mutex_unlock(&bcfs_notify.lock);
	pthread_mutex_lock(&bcfs_neg.lock);
	for (i = 0; i < BCFS_NEG_MAX; i++) {
		free(bcfs_neg.v[i].name);
		bcfs_neg.v[i].name = NULL;
	}
	pthread_mutex_unlock(&bcfs_neg.lock);
}
