/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * notify.c - the registry of who holds what, and the queues of the events
 * owed to each session (notify.h, doc/protocol.md section 6.10).
 *
 * The registry is a hash of holds keyed by (dev, ino), split into
 * NOTIFY_STRIPES stripes, each with its own lock and its own table (which
 * doubles as its holds outnumber its buckets twice).  A hold lives in the
 * store's node, so registering allocates nothing.  A change costs one
 * lookup under one stripe lock per object it names; a session that is the
 * only holder of what it changes finds nobody else in the chain and pays
 * nothing more.
 *
 * Each session that negotiated BCP_FEAT_NOTIFY has a queue (a ring that
 * grows to AGENT_NOTIFY_QUEUE_MAX events).  A new INODE event for a handle
 * whose INODE event still waits is merged into it (the union of the
 * ranges), so a file written again and again costs one event.  A full
 * queue is dropped and a RESET is owed instead; events queued while a
 * RESET is owed are covered by it (the host drops everything when it
 * arrives, after they happened) and are dropped too.  So a session that
 * never reads costs at most its bounded queue, and a publisher only ever
 * waits for a queue lock, never for a session's worker or socket.
 *
 * Locks (order): notify_list_lock, or one or two stripe locks (the lower
 * index first), then a queue's lock.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "notify.h"

#define NOTIFY_STRIPES		64	/* a power of two */
#define NOTIFY_BUCKETS_MIN	64	/* per stripe, at first */
#define NOTIFY_QUEUE_MIN	64	/* a queue's first ring */
#define NOTIFY_RECENT		256	/* INODE events found to merge into */

struct notify_stripe {
	pthread_mutex_t lock;
	/* under lock */
	struct agent_notify_hold **b;	/* nb buckets */
	size_t nb;
	size_t nholds;
	struct agent_notify_hold *b0[NOTIFY_BUCKETS_MIN];
};

static struct notify_stripe notify_stripes[NOTIFY_STRIPES];
static pthread_once_t notify_once = PTHREAD_ONCE_INIT;

/* A queued event; its name is allocated (metadata changes only). */
struct notify_qev {
	uint32_t kind;
	uint16_t name_len;
	uint64_t handle, child;
	int64_t offset, length;
	uint64_t t;
	char *name;
};

struct agent_notify_sess {
	uint64_t id;
	int wake_fd;
	atomic_int pending;		/* events or a RESET queued */
	pthread_mutex_t lock;
	/* under lock */
	struct notify_qev *q;		/* a ring of cap */
	unsigned int cap, head, len;
	uint64_t seq0;			/* the number of q[head] */
	struct {
		uint64_t handle, seq;	/* a queued INODE event's number */
	} recent[NOTIFY_RECENT];
	int reset;			/* a RESET is owed */
	uint64_t dropped;
	/* under notify_list_lock */
	struct agent_notify_sess *next, **pprev;
};

static pthread_mutex_t notify_list_lock = PTHREAD_MUTEX_INITIALIZER;
/* under notify_list_lock */
static struct agent_notify_sess *notify_list;
/* sessions on the list: read without a lock by agent_notify_wanted() */
static atomic_uint notify_nsess;

static void notify_setup(void)
{
	unsigned int i;

	for (i = 0; i < NOTIFY_STRIPES; i++) {
		struct notify_stripe *st = &notify_stripes[i];

		pthread_mutex_init(&st->lock, NULL);
		st->b = st->b0;
		st->nb = NOTIFY_BUCKETS_MIN;
	}
}

int agent_notify_init(void)
{
	pthread_once(&notify_once, notify_setup);
	return 0;
}

/*
 * Every session is gone by now (the workers stopped): only the tables the
 * stripes grew are left.
 */
void agent_notify_fini(void)
{
	unsigned int i;

	pthread_once(&notify_once, notify_setup);
	for (i = 0; i < NOTIFY_STRIPES; i++) {
		struct notify_stripe *st = &notify_stripes[i];

		pthread_mutex_lock(&st->lock);
		if (st->nholds)
			agent_warn("notify: %zu holds left at shutdown",
				   st->nholds);
		if (st->b != st->b0)
			free(st->b);
		st->b = st->b0;
		st->nb = NOTIFY_BUCKETS_MIN;
		memset(st->b0, 0, sizeof(st->b0));
		st->nholds = 0;
		pthread_mutex_unlock(&st->lock);
	}
}

static uint64_t notify_hash(struct agent_obj o)
{
	uint64_t v = o.ino ^ (o.dev * 0x9e3779b97f4a7c15ull);

	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	return v;
}

static unsigned int notify_stripe_of(struct agent_obj o)
{
	return (unsigned int)(notify_hash(o) & (NOTIFY_STRIPES - 1));
}

static struct agent_notify_hold **notify_bucket(struct notify_stripe *st,
						struct agent_obj o)
{
	return &st->b[(notify_hash(o) / NOTIFY_STRIPES) & (st->nb - 1)];
}

static int notify_same(struct agent_obj a, struct agent_obj b)
{
	return a.dev == b.dev && a.ino == b.ino;
}

/* Under st->lock.  Failing to grow only costs speed. */
static void notify_grow(struct notify_stripe *st)
{
	struct agent_notify_hold **nb, **old = st->b, *h, *next;
	size_t n = st->nb, i;

	if (st->nholds < 2 * n || n >= ((size_t)1 << 26))
		return;
	nb = calloc(n * 2, sizeof(*nb));
	if (!nb)
		return;
	st->b = nb;
	st->nb = n * 2;
	for (i = 0; i < n; i++) {
		for (h = old[i]; h; h = next) {
			struct agent_notify_hold **pb = notify_bucket(st,
								      h->obj);

			next = h->next;
			h->next = *pb;
			*pb = h;
		}
	}
	if (old != st->b0)
		free(old);
}

void agent_notify_hold(struct agent_notify_hold *h,
		       struct agent_notify_sess *ns, struct agent_obj obj,
		       uint64_t handle)
{
	struct notify_stripe *st;
	struct agent_notify_hold **pb;

	pthread_once(&notify_once, notify_setup);
	st = &notify_stripes[notify_stripe_of(obj)];
	h->ns = ns;
	h->obj = obj;
	h->handle = handle;
	pthread_mutex_lock(&st->lock);
	pb = notify_bucket(st, obj);
	h->next = *pb;
	*pb = h;
	st->nholds++;
	notify_grow(st);
	pthread_mutex_unlock(&st->lock);
}

void agent_notify_unhold(struct agent_notify_hold *h)
{
	struct notify_stripe *st;
	struct agent_notify_hold **pp;

	if (!h->ns)
		return;
	st = &notify_stripes[notify_stripe_of(h->obj)];
	pthread_mutex_lock(&st->lock);
	for (pp = notify_bucket(st, h->obj); *pp; pp = &(*pp)->next) {
		if (*pp == h) {
			*pp = h->next;
			st->nholds--;
			break;
		}
	}
	pthread_mutex_unlock(&st->lock);
	h->ns = NULL;
	h->next = NULL;
}

struct agent_notify_sess *agent_notify_sess_create(uint64_t id, int wake_fd)
{
	struct agent_notify_sess *ns;

	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return NULL;
	ns->q = calloc(NOTIFY_QUEUE_MIN, sizeof(*ns->q));
	if (!ns->q) {
		free(ns);
		return NULL;
	}
	ns->cap = NOTIFY_QUEUE_MIN;
	ns->id = id;
	ns->wake_fd = wake_fd;
	pthread_mutex_init(&ns->lock, NULL);
	pthread_mutex_lock(&notify_list_lock);
	ns->next = notify_list;
	if (notify_list)
		notify_list->pprev = &ns->next;
	ns->pprev = &notify_list;
	notify_list = ns;
	atomic_fetch_add(&notify_nsess, 1);
	pthread_mutex_unlock(&notify_list_lock);
	return ns;
}

/* Under ns->lock: forget every queued event. */
static void notify_q_clear(struct agent_notify_sess *ns)
{
	unsigned int i;

	for (i = 0; i < ns->len; i++)
		free(ns->q[(ns->head + i) % ns->cap].name);
	ns->seq0 += ns->len;
	ns->head = 0;
	ns->len = 0;
}

/* The caller's store has unregistered every hold of ns. */
void agent_notify_sess_destroy(struct agent_notify_sess *ns)
{
	if (!ns)
		return;
	pthread_mutex_lock(&notify_list_lock);
	*ns->pprev = ns->next;
	if (ns->next)
		ns->next->pprev = ns->pprev;
	atomic_fetch_sub(&notify_nsess, 1);
	pthread_mutex_unlock(&notify_list_lock);
	notify_q_clear(ns);
	pthread_mutex_destroy(&ns->lock);
	free(ns->q);
	free(ns);
}

int agent_notify_wanted(const struct agent_notify_sess *origin)
{
	unsigned int n = atomic_load_explicit(&notify_nsess,
					      memory_order_relaxed);

	return n > (origin ? 1u : 0u);
}

int agent_notify_pending(const struct agent_notify_sess *ns)
{
	return atomic_load_explicit(&ns->pending, memory_order_relaxed);
}

/* Wake the sessions' workers once each, after the locks are dropped. */
struct notify_wake {
	int fd[8];
	unsigned int n;
};

static void notify_wake_fd(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0)
		agent_dbg("notify: wake-up: %s", strerror(errno));
}

static void notify_wake_add(struct notify_wake *wk, int fd)
{
	unsigned int i;

	for (i = 0; i < wk->n; i++)
		if (wk->fd[i] == fd)
			return;
	if (wk->n == sizeof(wk->fd) / sizeof(wk->fd[0])) {
		notify_wake_fd(fd);
		return;
	}
	wk->fd[wk->n++] = fd;
}

static void notify_wake_all(struct notify_wake *wk)
{
	unsigned int i;

	for (i = 0; i < wk->n; i++)
		notify_wake_fd(wk->fd[i]);
	wk->n = 0;
}

/* Under ns->lock: the queue overflowed (or could not grow). */
static void notify_q_overflow(struct agent_notify_sess *ns)
{
	ns->dropped += ns->len + 1;
	notify_q_clear(ns);
	if (!ns->reset)
		agent_warn_rl("notify: session %016llx does not keep up; its "
			      "queue of %u events is dropped for a RESET",
			      (unsigned long long)ns->id,
			      AGENT_NOTIFY_QUEUE_MAX);
	ns->reset = 1;
}

/* Under ns->lock: room for one more event, the ring grown if need be. */
static int notify_q_room(struct agent_notify_sess *ns)
{
	struct notify_qev *nq;
	unsigned int ncap, i;

	if (ns->len < ns->cap)
		return 0;
	if (ns->cap >= AGENT_NOTIFY_QUEUE_MAX)
		return -ENOBUFS;
	ncap = ns->cap * 2;
	nq = malloc(ncap * sizeof(*nq));
	if (!nq)
		return -ENOMEM;
	for (i = 0; i < ns->len; i++)
		nq[i] = ns->q[(ns->head + i) % ns->cap];
	free(ns->q);
	ns->q = nq;
	ns->cap = ncap;
	ns->head = 0;
	return 0;
}

/* The hull of two INODE ranges (offset -1: attributes only). */
static void notify_merge(struct notify_qev *e, int64_t off, int64_t len)
{
	int64_t end, oend;

	if (off < 0)
		return;
	if (e->offset < 0) {
		e->offset = off;
		e->length = len;
		return;
	}
	end = e->length ? e->offset + e->length : INT64_MAX;
	oend = len ? off + len : INT64_MAX;
	if (off < e->offset)
		e->offset = off;
	if (oend > end)
		end = oend;
	e->length = end == INT64_MAX ? 0 : end - e->offset;
}

/*
 * Queue one event for ns; the caller holds a lock that keeps ns alive (a
 * stripe's or the list's).  Adds ns's worker to wk when it must wake.
 */
static void notify_queue(struct agent_notify_sess *ns, uint32_t kind,
			 uint64_t handle, uint64_t child, const char *name,
			 size_t nlen, int64_t off, int64_t len,
			 struct notify_wake *wk)
{
	unsigned int r = (unsigned int)(handle % NOTIFY_RECENT);
	struct notify_qev *e;
	char *copy = NULL;

	pthread_mutex_lock(&ns->lock);
	if (ns->reset) {
		/* the RESET still owed covers it */
		ns->dropped++;
		goto out_unlock;
	}
	if (kind == BCP_NOTIFY_INODE && ns->recent[r].handle == handle &&
	    ns->recent[r].seq >= ns->seq0 &&
	    ns->recent[r].seq < ns->seq0 + ns->len) {
		e = &ns->q[(ns->head + (ns->recent[r].seq - ns->seq0)) %
			   ns->cap];
		if (e->kind == BCP_NOTIFY_INODE && e->handle == handle) {
			notify_merge(e, off, len);
			goto out_unlock;
		}
	}
	if (nlen) {
		copy = malloc(nlen);
		if (!copy) {
			notify_q_overflow(ns);
			goto out_wake;
		}
		memcpy(copy, name, nlen);
	}
	if (notify_q_room(ns) < 0) {
		free(copy);
		notify_q_overflow(ns);
		goto out_wake;
	}
	e = &ns->q[(ns->head + ns->len) % ns->cap];
	e->kind = kind;
	e->name_len = (uint16_t)nlen;
	e->handle = handle;
	e->child = child;
	e->offset = off;
	e->length = len;
	e->t = agent_now_ns();
	e->name = copy;
	if (kind == BCP_NOTIFY_INODE) {
		ns->recent[r].handle = handle;
		ns->recent[r].seq = ns->seq0 + ns->len;
	}
	ns->len++;
out_wake:
	if (!atomic_exchange(&ns->pending, 1))
		notify_wake_add(wk, ns->wake_fd);
out_unlock:
	pthread_mutex_unlock(&ns->lock);
}

unsigned int agent_notify_take(struct agent_notify_sess *ns,
			       struct agent_notify_ev *out, unsigned int max,
			       uint64_t *dropped)
{
	unsigned int n = 0;

	pthread_mutex_lock(&ns->lock);
	*dropped = ns->dropped;
	ns->dropped = 0;
	if (ns->reset && max) {
		memset(&out[0], 0, sizeof(out[0]));
		out[0].kind = BCP_NOTIFY_RESET;
		out[0].t_queued = agent_now_ns();
		ns->reset = 0;
		n = 1;
	}
	while (n < max && ns->len) {
		struct notify_qev *e = &ns->q[ns->head];
		struct agent_notify_ev *o = &out[n++];

		o->kind = e->kind;
		o->name_len = e->name_len;
		o->handle = e->handle;
		o->child = e->child;
		o->offset = e->offset;
		o->length = e->length;
		o->t_queued = e->t;
		if (e->name_len)
			memcpy(o->name, e->name, e->name_len);
		free(e->name);
		e->name = NULL;
		ns->head = (ns->head + 1) % ns->cap;
		ns->len--;
		ns->seq0++;
	}
	if (!ns->len && !ns->reset)
		atomic_store(&ns->pending, 0);
	pthread_mutex_unlock(&ns->lock);
	return n;
}

/* Lock the stripes of a and b (one lock when they share it). */
static void notify_lock2(unsigned int a, unsigned int b)
{
	if (a > b) {
		unsigned int t = a;

		a = b;
		b = t;
	}
	pthread_mutex_lock(&notify_stripes[a].lock);
	if (b != a)
		pthread_mutex_lock(&notify_stripes[b].lock);
}

static void notify_unlock2(unsigned int a, unsigned int b)
{
	pthread_mutex_unlock(&notify_stripes[a].lock);
	if (b != a)
		pthread_mutex_unlock(&notify_stripes[b].lock);
}

/* Under obj's stripe lock: ns's hold of obj, or NULL. */
static struct agent_notify_hold *notify_find(struct agent_obj obj,
					     const struct agent_notify_sess *ns)
{
	struct notify_stripe *st = &notify_stripes[notify_stripe_of(obj)];
	struct agent_notify_hold *h;

	for (h = *notify_bucket(st, obj); h; h = h->next)
		if (h->ns == ns && notify_same(h->obj, obj))
			return h;
	return NULL;
}

/* Under obj's stripe lock: INODE to every holder of obj but origin. */
static void notify_inode(const struct agent_notify_sess *origin,
			 struct agent_obj obj, int64_t off, int64_t len,
			 struct notify_wake *wk)
{
	struct notify_stripe *st = &notify_stripes[notify_stripe_of(obj)];
	struct agent_notify_hold *h;

	for (h = *notify_bucket(st, obj); h; h = h->next)
		if (h->ns != origin && notify_same(h->obj, obj))
			notify_queue(h->ns, BCP_NOTIFY_INODE, h->handle, 0,
				     NULL, 0, off, len, wk);
}

void agent_notify_publish(const struct agent_notify_sess *origin,
			  const struct agent_change *c)
{
	struct notify_wake wk = { .n = 0 };
	struct agent_notify_hold *h, *ch;
	struct notify_stripe *st;
	struct agent_obj none = { 0, 0 };
	int known = !notify_same(c->obj, none);
	unsigned int sp, so;

	if (!agent_notify_wanted(origin))
		return;
	pthread_once(&notify_once, notify_setup);
	if (c->kind == BCP_NOTIFY_INODE) {
		so = notify_stripe_of(c->obj);
		pthread_mutex_lock(&notify_stripes[so].lock);
		notify_inode(origin, c->obj, c->offset, c->length, &wk);
		pthread_mutex_unlock(&notify_stripes[so].lock);
		notify_wake_all(&wk);
		return;
	}
	if ((c->kind != BCP_NOTIFY_ENTRY && c->kind != BCP_NOTIFY_DELETE) ||
	    !c->len || c->len > BCP_NAME_MAX)
		return;
	sp = notify_stripe_of(c->parent);
	so = known ? notify_stripe_of(c->obj) : sp;
	notify_lock2(sp, so);
	st = &notify_stripes[sp];
	for (h = *notify_bucket(st, c->parent); h; h = h->next) {
		if (h->ns == origin || !notify_same(h->obj, c->parent))
			continue;
		ch = c->kind == BCP_NOTIFY_DELETE && known ?
		     notify_find(c->obj, h->ns) : NULL;
		if (ch)
			notify_queue(h->ns, BCP_NOTIFY_DELETE, h->handle,
				     ch->handle, c->name, c->len, 0, 0, &wk);
		else
			notify_queue(h->ns, BCP_NOTIFY_ENTRY, h->handle, 0,
				     c->name, c->len, 0, 0, &wk);
	}
	if (known)
		notify_inode(origin, c->obj, -1, 0, &wk);
	notify_unlock2(sp, so);
	notify_wake_all(&wk);
}

void agent_notify_external(const struct agent_change *c)
{
	agent_notify_publish(NULL, c);
}

void agent_notify_reset_all(void)
{
	struct notify_wake wk = { .n = 0 };
	struct agent_notify_sess *ns;

	pthread_mutex_lock(&notify_list_lock);
	for (ns = notify_list; ns; ns = ns->next) {
		pthread_mutex_lock(&ns->lock);
		ns->dropped += ns->len;
		notify_q_clear(ns);
		ns->reset = 1;
		if (!atomic_exchange(&ns->pending, 1))
			notify_wake_add(&wk, ns->wake_fd);
		pthread_mutex_unlock(&ns->lock);
	}
	pthread_mutex_unlock(&notify_list_lock);
	notify_wake_all(&wk);
}
