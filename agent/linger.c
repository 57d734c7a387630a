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
 * store hands such a descriptor here instead of closing it; it stays
 * AGENT_LINGER_S seconds, or until a session opens the same file again
 * (agent_linger_claim(): the new descriptor keeps it then, and the space
 * is freed at the host's last close, not a minute later).
 *
 * At most AGENT_LINGER_MAX descriptors linger, for all sessions: a host
 * that makes many end with removed files open only shortens how long the
 * others' stay (the oldest goes first), which is how it was without this.
 * Each keeps its unit of the descriptor budget (agent_fd_take()) until
 * it is closed.
 *
 * Threads: any worker (store teardown, REOPEN, the periodic expiry); one
 * mutex, a leaf.  agent_linger_expire() looks at an atomic count first, so
 * it costs nothing while nothing lingers.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/stat.h>

#include "agent.h"

struct linger_ent {
	int fd;			/* -1: free */
	uint64_t dev, ino;
	uint64_t until;		/* agent_now_ns() */
};

static pthread_mutex_t linger_lock = PTHREAD_MUTEX_INITIALIZER;
/* under linger_lock */
static struct linger_ent linger[AGENT_LINGER_MAX];
static unsigned int linger_init;
/* entries in use; written under linger_lock */
static atomic_uint linger_count;
static uint64_t linger_kept, linger_claimed, linger_expired;

/* Called with the lock held. */
static void linger_close(struct linger_ent *e)
{
	close(e->fd);
	agent_fd_give();
	e->fd = -1;
	atomic_fetch_sub(&linger_count, 1);
}

/* Called with the lock held. */
static void linger_setup(void)
{
	unsigned int i;

	if (linger_init)
		return;
	for (i = 0; i < AGENT_LINGER_MAX; i++)
		linger[i].fd = -1;
	linger_init = 1;
}

int agent_linger_keep(int fd)
{
	struct linger_ent *e = NULL, *old = NULL;
	struct stat st;
	unsigned int i;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink)
		return 0;
	pthread_mutex_lock(&linger_lock);
	linger_setup();
	for (i = 0; i < AGENT_LINGER_MAX && !e; i++) {
		if (linger[i].fd < 0)
			e = &linger[i];
		else if (!old || linger[i].until < old->until)
			old = &linger[i];
	}
	if (!e) {
		e = old;
		linger_close(e);
		linger_expired++;
	}
	e->fd = fd;
	e->dev = (uint64_t)st.st_dev;
	e->ino = (uint64_t)st.st_ino;
	e->until = agent_now_ns() + AGENT_LINGER_S * 1000000000ull;
	atomic_fetch_add(&linger_count, 1);
	linger_kept++;
	pthread_mutex_unlock(&linger_lock);
	agent_dbg("linger: a removed file still open (%llu:%llu) kept %d s "
		  "for its host to reopen", (unsigned long long)st.st_dev,
		  (unsigned long long)st.st_ino, AGENT_LINGER_S);
	return 1;
}

void agent_linger_claim(int fd)
{
	struct stat st;
	unsigned int i;

	if (!atomic_load_explicit(&linger_count, memory_order_relaxed) ||
	    fstat(fd, &st) < 0 || st.st_nlink)
		return;
	pthread_mutex_lock(&linger_lock);
	for (i = 0; i < AGENT_LINGER_MAX && linger_init; i++) {
		if (linger[i].fd >= 0 &&
		    linger[i].dev == (uint64_t)st.st_dev &&
		    linger[i].ino == (uint64_t)st.st_ino) {
			linger_close(&linger[i]);
			linger_claimed++;
		}
	}
	pthread_mutex_unlock(&linger_lock);
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
		if (linger[i].fd >= 0 && linger[i].until <= now) {
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
	for (i = 0; i < AGENT_LINGER_MAX && linger_init; i++)
		if (linger[i].fd >= 0)
			linger_close(&linger[i]);
	if (linger_kept)
		agent_dbg("linger: %llu removed files kept for their hosts, "
			  "%llu opened again, %llu closed unclaimed",
			  (unsigned long long)linger_kept,
			  (unsigned long long)linger_claimed,
			  (unsigned long long)linger_expired);
	pthread_mutex_unlock(&linger_lock);
}
