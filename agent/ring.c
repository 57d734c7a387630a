/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring.c - a worker's io_uring.  Completions are signalled on an eventfd
 * the worker's epoll watches.  agent_ring_wait() runs one metadata
 * operation to completion: it keeps reaping, and parks the completions of
 * other operations (storage transfers) for the event loop, which takes
 * them with io_uring's own queue first and the park after (worker.c).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "agent.h"

int agent_ring_init(struct agent_ring *r, unsigned int entries)
{
	int ret;

	memset(r, 0, sizeof(*r));
	ret = io_uring_queue_init(entries, &r->ring, 0);
	if (ret < 0)
		return ret;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		ret = -errno;
		goto out_exit;
	}
	ret = io_uring_register_eventfd(&r->ring, r->efd);
	if (ret < 0)
		goto out_close;
	r->cap = r->ring.cq.ring_entries;
	r->parked = calloc(r->cap, sizeof(*r->parked));
	if (!r->parked) {
		ret = -ENOMEM;
		goto out_close;
	}
	return 0;

out_close:
	close(r->efd);
out_exit:
	io_uring_queue_exit(&r->ring);
	return ret;
}

void agent_ring_fini(struct agent_ring *r)
{
	free(r->parked);
	close(r->efd);
	io_uring_queue_exit(&r->ring);
}

struct io_uring_sqe *agent_ring_sqe(struct agent_ring *r)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&r->ring)))
		io_uring_submit(&r->ring);
	io_uring_sqe_set_data64(sqe, 0);
	return sqe;
}

int agent_ring_wait(struct agent_ring *r, struct io_uring_sqe *sqe)
{
	/* The token's address is the user_data; it is even, slots are odd. */
	uint64_t token = (uint64_t)(uintptr_t)&sqe;
	struct io_uring_cqe *cqe;
	int ret;

	io_uring_sqe_set_data64(sqe, token);
	io_uring_submit(&r->ring);
	for (;;) {
		ret = io_uring_wait_cqe(&r->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			return ret;
		if (cqe->user_data == token) {
			ret = cqe->res;
			io_uring_cqe_seen(&r->ring, cqe);
			return ret;
		}
		if (r->nparked < r->cap) {
			r->parked[r->nparked].user_data = cqe->user_data;
			r->parked[r->nparked].res = cqe->res;
			r->nparked++;
		}
		io_uring_cqe_seen(&r->ring, cqe);
	}
}
