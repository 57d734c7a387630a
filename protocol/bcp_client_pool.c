/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_client_pool.c - the buddy allocator that hands out I/O buffers from
 * the pool registered with the agent.
 *
 * The pool is cut into 4 KiB pages; a block is 4 KiB << order (up to the
 * largest segment, 8 MiB, or the pool's size) and starts at a page index
 * aligned to its size.  The I/O descriptor of a block is the descriptor of
 * its first page, so bcp_pool_get() allocates nothing.  Callers block while
 * the pool is exhausted: memory stays bounded.  All state is under
 * pool->lock, which is a leaf lock.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bcp_client_i.h"

static void pool_list_add(struct bcp_pool *p, uint32_t pg, unsigned int o)
{
	uint32_t head = p->free_head[o];

	p->order[pg] = (uint8_t)o;
	p->is_free[pg] = 1;
	p->prev[pg] = BCP_POOL_NONE;
	p->next[pg] = head;
	if (head != BCP_POOL_NONE)
		p->prev[head] = pg;
	p->free_head[o] = pg;
}

static void pool_list_del(struct bcp_pool *p, uint32_t pg)
{
	unsigned int o = p->order[pg];

	if (p->prev[pg] != BCP_POOL_NONE)
		p->next[p->prev[pg]] = p->next[pg];
	else
		p->free_head[o] = p->next[pg];
	if (p->next[pg] != BCP_POOL_NONE)
		p->prev[p->next[pg]] = p->prev[pg];
	p->is_free[pg] = 0;
}

int bcp_pool_init(struct bcp_pool *p, void *base, size_t size)
{
	uint32_t pg;
	unsigned int o;
	int ret;

	memset(p, 0, sizeof(*p));
	p->base = base;
	p->npages = (uint32_t)(size >> BCP_POOL_PAGE_SHIFT);
	p->size = (size_t)p->npages << BCP_POOL_PAGE_SHIFT;
	if (!p->npages)
		return -EINVAL;
	for (o = 0; o < BCP_POOL_ORDERS; o++)
		p->free_head[o] = BCP_POOL_NONE;
	p->max_order = 0;
	while (p->max_order + 1 < BCP_POOL_ORDERS &&
	       (2u << p->max_order) <= p->npages)
		p->max_order++;

	ret = -ENOMEM;
	p->ios = calloc(p->npages, sizeof(*p->ios));
	if (!p->ios)
		goto out;
	p->next = calloc(p->npages, sizeof(*p->next));
	if (!p->next)
		goto out_free_ios;
	p->prev = calloc(p->npages, sizeof(*p->prev));
	if (!p->prev)
		goto out_free_next;
	p->order = calloc(p->npages, 1);
	if (!p->order)
		goto out_free_prev;
	p->is_free = calloc(p->npages, 1);
	if (!p->is_free)
		goto out_free_order;
	ret = pthread_mutex_init(&p->lock, NULL);
	if (ret) {
		ret = -ret;
		goto out_free_is_free;
	}
	ret = pthread_cond_init(&p->cond, NULL);
	if (ret) {
		ret = -ret;
		goto out_destroy_lock;
	}

	/* Carve the pool into the largest aligned blocks that fit. */
	pg = 0;
	while (pg < p->npages) {
		o = p->max_order;
		while (o && ((pg & ((1u << o) - 1)) ||
			     pg + (1u << o) > p->npages))
			o--;
		pool_list_add(p, pg, o);
		pg += 1u << o;
	}
	return 0;

out_destroy_lock:
	pthread_mutex_destroy(&p->lock);
out_free_is_free:
	free(p->is_free);
out_free_order:
	free(p->order);
out_free_prev:
	free(p->prev);
out_free_next:
	free(p->next);
out_free_ios:
	free(p->ios);
out:
	memset(p, 0, sizeof(*p));
	return ret;
}

void bcp_pool_fini(struct bcp_pool *p)
{
	if (!p->ios)
		return;
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->is_free);
	free(p->order);
	free(p->prev);
	free(p->next);
	free(p->ios);
	memset(p, 0, sizeof(*p));
}

static unsigned int pool_order_of(size_t len)
{
	size_t pages = (len + BCP_POOL_PAGE - 1) >> BCP_POOL_PAGE_SHIFT;
	unsigned int o = 0;

	while (((size_t)1 << o) < pages)
		o++;
	return o;
}

struct bcp_io *bcp_pool_get(struct bcp_pool *p, size_t len)
{
	struct bcp_io *io;
	unsigned int want, o;
	uint32_t pg;

	if (!p->ios || len > ((size_t)BCP_POOL_PAGE << p->max_order))
		return NULL;
	want = pool_order_of(len ? len : 1);

	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (p->closing) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		for (o = want; o <= p->max_order; o++)
			if (p->free_head[o] != BCP_POOL_NONE)
				break;
		if (o <= p->max_order)
			break;
		p->waiters++;
		pthread_cond_wait(&p->cond, &p->lock);
		p->waiters--;
	}
	pg = p->free_head[o];
	pool_list_del(p, pg);
	/* Split: keep the lower half, free the upper halves. */
	while (o > want) {
		o--;
		pool_list_add(p, pg + (1u << o), o);
	}
	p->order[pg] = (uint8_t)o;
	pthread_mutex_unlock(&p->lock);

	io = &p->ios[pg];
	memset(io, 0, sizeof(*io));
	io->buf = p->base + ((size_t)pg << BCP_POOL_PAGE_SHIFT);
	io->cap = (size_t)BCP_POOL_PAGE << o;
	io->slot = pg;
	return io;
}

void bcp_pool_put(struct bcp_pool *p, struct bcp_io *io)
{
	uint32_t pg = io->slot, buddy;
	unsigned int o;

	pthread_mutex_lock(&p->lock);
	o = p->order[pg];
	while (o < p->max_order) {
		buddy = pg ^ (1u << o);
		if (buddy >= p->npages || !p->is_free[buddy] ||
		    p->order[buddy] != o)
			break;
		pool_list_del(p, buddy);
		if (buddy < pg)
			pg = buddy;
		o++;
	}
	pool_list_add(p, pg, o);
	if (p->waiters)
		pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void bcp_pool_close(struct bcp_pool *p)
{
	if (!p->ios)
		return;
	pthread_mutex_lock(&p->lock);
	p->closing = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}
