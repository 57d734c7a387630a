/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * peek.c - small files read with their OPEN.
 *
 * The first open of a file for reading asks the agent for the whole file
 * when it has at most BCP_OPEN_PEEK_MAX bytes (OPEN's peek, protocol
 * version 3); the bytes come in the OPEN reply and are kept here for that
 * descriptor, and its READs are answered from them: reading a small file
 * costs the agent one round trip (the OPEN) instead of two.
 *
 * The bytes are the file's at the open.  They answer a READ only while
 * nothing could have changed the file since the OPEN went out: no
 * notification since was about it (another session, a process on the
 * agent's machine or another Ceph client changed it, or a RESET:
 * bcfs_notify_touched_locked()), and
 * this mount changed no file's data (bcfs_peek_dirty() at the start and
 * at the end of every write, truncate, fallocate and copy: a change in
 * flight when the OPEN went out may reach the file after the agent read
 * it).  Otherwise the READ goes to the agent as any other.
 *
 * BCFS_PEEK_SLOTS descriptors hold bytes at once, BCP_OPEN_PEEK_MAX each
 * (allocated at first use and kept: 4 MiB at most); an open that finds
 * none free does not ask.  A slot is given back once a READ reached the
 * end of the file (the kernel's page cache has it then), once the bytes
 * may be old, or at RELEASE, whichever comes first: the kernel sends
 * RELEASE late on a busy machine, and a loop of small reads would find
 * every slot held by files it closed long ago.  A READ copies from the
 * slot's bytes without the lock; the slot counts it (readers), and is
 * given back only when none is left.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "bcfs_i.h"

#define BCFS_PEEK_SLOTS		64

struct bcfs_peek {
	int taken;
	int ready;		/* bytes held for fh, to be served */
	unsigned int readers;	/* READs copying from buf */
	uint64_t fh;		/* 0 until the OPEN was answered */
	uint64_t handle;	/* the file's */
	uint64_t ngen;		/* bcfs_notify_gen() when the OPEN went out,
				 * or when nothing since had been about it */
	uint64_t wgen;		/* bcfs_peek_wgen() then */
	uint32_t len;
	uint8_t *buf;		/* BCP_OPEN_PEEK_MAX bytes, or NULL */
};

static pthread_mutex_t bcfs_peek_lock = PTHREAD_MUTEX_INITIALIZER;
/* protected by bcfs_peek_lock */
static struct bcfs_peek bcfs_peeks[BCFS_PEEK_SLOTS];
/* slots holding bytes (atomic): READs look only when there are some */
static unsigned int bcfs_peek_ready;
/* slots taken (atomic): RELEASEs look only when there are some */
static unsigned int bcfs_peek_taken;
/* changes of file data by this mount, begun or ended (atomic) */
static uint64_t bcfs_peek_changes;

void bcfs_peek_dirty(void)
{
	__atomic_add_fetch(&bcfs_peek_changes, 1, __ATOMIC_ACQ_REL);
}

uint64_t bcfs_peek_wgen(void)
{
	return __atomic_load_n(&bcfs_peek_changes, __ATOMIC_ACQUIRE);
}

int bcfs_peek_take(void)
{
	int i, slot = -1;

	pthread_mutex_lock(&bcfs_peek_lock);
	for (i = 0; i < BCFS_PEEK_SLOTS; i++) {
		if (bcfs_peeks[i].taken)
			continue;
		if (!bcfs_peeks[i].buf) {
			bcfs_peeks[i].buf = malloc(BCP_OPEN_PEEK_MAX);
			if (!bcfs_peeks[i].buf)
				break;
		}
		bcfs_peeks[i].taken = 1;
		bcfs_peeks[i].ready = 0;
		bcfs_peeks[i].fh = 0;
		__atomic_add_fetch(&bcfs_peek_taken, 1, __ATOMIC_RELEASE);
		slot = i;
		break;
	}
	pthread_mutex_unlock(&bcfs_peek_lock);
	return slot;
}

static void bcfs_peek_unready(struct bcfs_peek *p)
{
	if (p->ready) {
		p->ready = 0;
		__atomic_sub_fetch(&bcfs_peek_ready, 1, __ATOMIC_RELEASE);
	}
}

static void bcfs_peek_free(struct bcfs_peek *p)
{
	bcfs_peek_unready(p);
	p->taken = 0;
	p->fh = 0;
	__atomic_sub_fetch(&bcfs_peek_taken, 1, __ATOMIC_RELEASE);
}

/* A filled slot that serves no more and that no READ uses goes back. */
static void bcfs_peek_done(struct bcfs_peek *p)
{
	bcfs_peek_unready(p);
	if (p->taken && p->fh && !p->readers)
		bcfs_peek_free(p);
}

void bcfs_peek_put(int slot)
{
	struct bcfs_peek *p;

	if (slot < 0 || slot >= BCFS_PEEK_SLOTS)
		return;
	p = &bcfs_peeks[slot];
	pthread_mutex_lock(&bcfs_peek_lock);
	if (p->taken)
		bcfs_peek_free(p);
	pthread_mutex_unlock(&bcfs_peek_lock);
}

void bcfs_peek_fill(int slot, uint64_t fh, uint64_t handle, uint64_t ngen,
		    uint64_t wgen, const void *data, uint32_t len)
{
	struct bcfs_peek *p = &bcfs_peeks[slot];

	if (len > BCP_OPEN_PEEK_MAX) {
		bcfs_peek_put(slot);
		return;
	}
	/* the slot is this thread's until ready is set; an empty file's
	 * data may be NULL */
	if (len)
		memcpy(p->buf, data, len);
	pthread_mutex_lock(&bcfs_peek_lock);
	p->fh = fh;
	p->handle = handle;
	p->ngen = ngen;
	p->wgen = wgen;
	p->len = len;
	p->ready = 1;
	__atomic_add_fetch(&bcfs_peek_ready, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&bcfs_peek_lock);
}

static struct bcfs_peek *bcfs_peek_find(uint64_t fh)
{
	int i;

	for (i = 0; i < BCFS_PEEK_SLOTS; i++)
		if (bcfs_peeks[i].taken && bcfs_peeks[i].fh == fh)
			return &bcfs_peeks[i];
	return NULL;
}

/*
 * Called with bcfs_peek_lock held: whether p's bytes are still the file's.
 * What was checked is not checked again (ngen moves on).
 */
static int bcfs_peek_current(struct bcfs_peek *p)
{
	int touched;

	if (p->wgen != bcfs_peek_wgen())
		return 0;
	if (p->ngen == bcfs_notify_gen())
		return 1;
	bcfs_notify_lock();
	touched = bcfs_notify_touched_locked(p->ngen, p->handle, 0);
	p->ngen = bcfs_notify_gen();
	bcfs_notify_unlock();
	return !touched;
}

int bcfs_peek_read(fuse_req_t req, uint64_t fh, size_t size, off_t off)
{
	struct bcfs_peek *p;
	size_t n = 0;

	if (!__atomic_load_n(&bcfs_peek_ready, __ATOMIC_ACQUIRE) || off < 0)
		return 0;
	pthread_mutex_lock(&bcfs_peek_lock);
	p = bcfs_peek_find(fh);
	if (p && !p->ready)
		p = NULL;
	if (p && !bcfs_peek_current(p)) {
		/* the file may have changed since: the agent's turn */
		bcfs_peek_done(p);
		p = NULL;
	}
	if (p) {
		p->readers++;
		if ((uint64_t)off < p->len) {
			n = p->len - (size_t)off;
			if (n > size)
				n = size;
		}
	}
	pthread_mutex_unlock(&bcfs_peek_lock);
	if (!p)
		return 0;
	fuse_reply_buf(req, (const char *)p->buf + (n ? off : 0), n);
	pthread_mutex_lock(&bcfs_peek_lock);
	p->readers--;
	/* up to the end: the kernel holds the pages now */
	if ((uint64_t)off + n >= p->len || !p->ready)
		bcfs_peek_done(p);
	pthread_mutex_unlock(&bcfs_peek_lock);
	return 1;
}

void bcfs_peek_release(uint64_t fh)
{
	struct bcfs_peek *p;

	if (!fh || !__atomic_load_n(&bcfs_peek_taken, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&bcfs_peek_lock);
	p = bcfs_peek_find(fh);
	if (p)
		bcfs_peek_done(p);	/* or its last reader, later */
	pthread_mutex_unlock(&bcfs_peek_lock);
}

void bcfs_peek_fini(void)
{
	int i;

	for (i = 0; i < BCFS_PEEK_SLOTS; i++) {
		free(bcfs_peeks[i].buf);
		bcfs_peeks[i].buf = NULL;
	}
}
