/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * linger.c - files removed while a lost session held them open, kept a
 * while (see agent.h).
 *
 * A file whose last name is gone lives only while a descriptor holds it.
 * The host that opened it still has it open when its connection is cut
 * (a network blip, a data connection reset): it reconnects within
 * milliseconds and takes its open files back by handle (REBIND, REOPEN),
 * which reaches the inode only while it lives.  The lost session's store
 * closes its descriptors when it is freed, often before the new session's
 * REOPEN arrives, so such a file was gone after every cut (EIO on the
 * host), where a local file system keeps it until its last close.  The
 * store hands such a descriptor (posix) or open file (a cephfs store's
 * Fh, let go of through its closer) here instead of closing it; it stays
 * AGENT_LINGER_S seconds, or until a session opens the same file again
 * (agent_linger_claim(): the new descriptor keeps it then, and the space
 * is freed at the host's last close, not a minute later).
 *
 * The new session's REOPEN may also come first: the agent notices a cut
 * connection later than the host does (a reset it never saw, a dead peer
 * found by its keepalive), so the host's new session can open the file
 * again while the old session still holds it.  Nothing lingers then to be
 * claimed, and the old descriptor, handed here only when the old session
 * ends, would stay the whole AGENT_LINGER_S with nobody to claim it: the
 * file's space outlived the host's last close by a minute.  So a claim
 * that finds nothing leaves a mark, (dev, ino) and the session that opened
 * it (its store); a descriptor of a marked file that another session
 * hands over is closed at once, as if claimed.  A session's marks go
 * with it (agent_linger_forget()); at most AGENT_LINGER_MAX of them, the
 * oldest replaced first.
 *
 * At most AGENT_LINGER_MAX files linger, for all sessions: a host
 * that makes many end with removed files open only shortens how long the
 * others' stay (the oldest goes first), which is how it was without this.
 * A descriptor keeps its unit of the descriptor budget (agent_fd_take())
 * until it is closed.
 *
 * Threads: any worker (store teardown, REOPEN, the periodic expiry), the
 * cephfs store's closer; one mutex, taken before the closer's lock (a
 * close callback runs under it, and must not block).
 * agent_linger_expire() looks at an atomic count first, so it costs
 * nothing while nothing lingers.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/stat.h>

#include "agent.h"

struct linger_ent {
	agent_linger_close_fn close;	/* NULL: free */
	void *obj;
	uint64_t dev, ino;
	uint64_t until;		/* agent_now_ns() */
};

/* a removed file opened again before its old holder ended: claimed early */
struct linger_mark {
	const void *owner;	/* NULL: free */
	uint64_t dev, ino;
	uint64_t seq;		/* age: the smallest is replaced first */
};

static pthread_mutex_t linger_lock = PTHREAD_MUTEX_INITIALIZER;
/* under linger_lock */
static struct linger_ent linger[AGENT_LINGER_MAX];
static int linger_done;		/* agent_linger_fini() ran: keep nothing */
/* entries in use; written under linger_lock */
static atomic_uint linger_count;
static uint64_t linger_kept, linger_claimed, linger_expired;
static struct linger_mark marks[AGENT_LINGER_MAX];
static uint64_t mark_seq;
/* marks in use; written under linger_lock */
static atomic_uint mark_count;

/* Called with the lock held. */
static void linger_close(struct linger_ent *e)
{
	e->close(e->obj);
	e->close = NULL;
	atomic_fetch_sub(&linger_count, 1);
}

/* Whether a session other than owner opened (dev, ino) again; locked. */
static int linger_marked(uint64_t dev, uint64_t ino, const void *owner)
{
	unsigned int i;

	if (!atomic_load_explicit(&mark_count, memory_order_relaxed))
		return 0;
	for (i = 0; i < AGENT_LINGER_MAX; i++)
		if (marks[i].owner && marks[i].owner != owner &&
		    marks[i].dev == dev && marks[i].ino == ino)
			return 1;
	return 0;
}

/* Mark (dev, ino) opened again by owner; locked. */
static void linger_mark(uint64_t dev, uint64_t ino, const void *owner)
{
	struct linger_mark *k = NULL, *old = NULL;
	unsigned int i;

	for (i = 0; i < AGENT_LINGER_MAX; i++) {
		if (marks[i].owner == owner && marks[i].dev == dev &&
		    marks[i].ino == ino)
			return;		/* marked already */
		if (!marks[i].owner) {
			if (!k)
				k = &marks[i];
		} else if (!old || marks[i].seq < old->seq) {
			old = &marks[i];
		}
	}
	if (k)
		atomic_fetch_add(&mark_count, 1);
	else
		k = old;
	k->owner = owner;
	k->dev = dev;
	k->ino = ino;
	k->seq = ++mark_seq;
}

int agent_linger_keep_obj(uint64_t dev, uint64_t ino, const void *owner,
			  agent_linger_close_fn close_fn, void *obj)
{
	struct linger_ent *e = NULL, *old = NULL;
	unsigned int i;

	pthread_mutex_lock(&linger_lock);
	if (linger_done) {
		pthread_mutex_unlock(&linger_lock);
		return 0;
	}
	if (linger_marked(dev, ino, owner)) {
		/* its host has it open again through a newer session */
		linger_claimed++;
		pthread_mutex_unlock(&linger_lock);
		agent_dbg("linger: a removed file still open (%llu:%llu) "
			  "was opened again already: not kept",
			  (unsigned long long)dev, (unsigned long long)ino);
		return 0;
	}
	for (i = 0; i < AGENT_LINGER_MAX && !e; i++) {
		if (!linger[i].close)
			e = &linger[i];
		else if (!old || linger[i].until < old->until)
			old = &linger[i];
	}
	if (!e) {
		e = old;
		linger_close(e);
		linger_expired++;
	}
	e->close = close_fn;
	e->obj = obj;
	e->dev = dev;
	e->ino = ino;
	e->until = agent_now_ns() + AGENT_LINGER_S * 1000000000ull;
	atomic_fetch_add(&linger_count, 1);
	linger_kept++;
	pthread_mutex_unlock(&linger_lock);
	agent_dbg("linger: a removed file still open (%llu:%llu) kept %d s "
		  "for its host to reopen", (unsigned long long)dev,
		  (unsigned long long)ino, AGENT_LINGER_S);
	return 1;
}

static void linger_close_fd(void *obj)
{
	close((int)(intptr_t)obj);
	agent_fd_give();
}

int agent_linger_keep(int fd, const void *owner)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink)
		return 0;
	return agent_linger_keep_obj((uint64_t)st.st_dev, (uint64_t)st.st_ino,
				     owner, linger_close_fd,
				     (void *)(intptr_t)fd);
}

void agent_linger_claim_obj(uint64_t dev, uint64_t ino, const void *owner)
{
	unsigned int i;
	int found = 0;

	/* nothing to claim, and no mark asked for */
	if (!owner &&
	    !atomic_load_explicit(&linger_count, memory_order_relaxed))
		return;
	pthread_mutex_lock(&linger_lock);
	for (i = 0; i < AGENT_LINGER_MAX &&
	     atomic_load_explicit(&linger_count, memory_order_relaxed); i++) {
		if (linger[i].close && linger[i].dev == dev &&
		    linger[i].ino == ino) {
			linger_close(&linger[i]);
			linger_claimed++;
			found = 1;
		}
	}
	/* its old holder may not have ended yet: what it hands over later
	 * is claimed already */
	if (!found && owner && !linger_done)
		linger_mark(dev, ino, owner);
	pthread_mutex_unlock(&linger_lock);
}

void agent_linger_claim(int fd, const void *owner)
{
	struct stat st;

	/* only a file with no name left can linger */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink)
		return;
	agent_linger_claim_obj((uint64_t)st.st_dev, (uint64_t)st.st_ino,
			       owner);
}

void agent_linger_forget(const void *owner)
{
	unsigned int i;

	if (!atomic_load_explicit(&mark_count, memory_order_relaxed))
		return;
	pthread_mutex_lock(&linger_lock);
	for (i = 0; i < AGENT_LINGER_MAX; i++) {
		if (marks[i].owner == owner) {
			marks[i].owner = NULL;
			atomic_fetch_sub(&mark_count, 1);
		}
	}
	pthread_mutex_unlock(&linger_lock);
}

int agent_linger_holds(uint64_t dev, uint64_t ino)
{
	unsigned int i;
	int found = 0;

	if (!atomic_load_explicit(&linger_count, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&linger_lock);
	for (i = 0; i < AGENT_LINGER_MAX && !found; i++)
		found = linger[i].close && linger[i].dev == dev &&
			linger[i].ino == ino;
	pthread_mutex_unlock(&linger_lock);
	return found;
}

void agent_linger_expire(void)
{
	uint64_t now;
	unsigned int i;

	if (!atomic_load_explicit(&linger_count, memory_order_relaxed))
		return;
	if (pthread_mutex_trylock(&linger_lock))
		return;		/* another worker is at it */
	now = agent_now_ns();
	for (i = 0; i < AGENT_LINGER_MAX; i++) {
		if (linger[i].close && linger[i].until <= now) {
			linger_close(&linger[i]);
			linger_expired++;
		}
	}
	pthread_mutex_unlock(&linger_lock);
}

void agent_linger_fini(void)
{
	unsigned int i;

	pthread_mutex_lock(&linger_lock);
	linger_done = 1;
	for (i = 0; i < AGENT_LINGER_MAX; i++)
		if (linger[i].close) {
			linger_close(&linger[i]);
			linger_expired++;
		}
	/* what a host got back after a cut, for whoever asks what happened */
	if (linger_kept)
		agent_info("linger: %llu removed files kept for their hosts, "
			   "%llu opened again, %llu closed unclaimed",
			   (unsigned long long)linger_kept,
			   (unsigned long long)linger_claimed,
			   (unsigned long long)linger_expired);
	pthread_mutex_unlock(&linger_lock);
}
