/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool.c - the blocking pool: a few threads for the system calls that may
 * block for long and that io_uring does not offer (copy_file_range,
 * getdents64), so that one session's slow call never stalls the event
 * loop every other session of its worker waits on.
 *
 * A worker submits a job; a pool thread runs job->run(); the finished job
 * is put on its worker's done list and the worker's inbox eventfd is
 * signalled; the worker then runs job->done() on its own thread, where it
 * may touch the session and the store again (a blocking store's job may
 * have sent its reply from the pool thread already: session.c).  Jobs are
 * taken in FIFO order; the sessions bound how many they have out
 * (session.c), so one session cannot fill the queue ahead of everyone
 * else.
 *
 * A store that may block on every call (AGENT_STORE_BLOCKING, cephfs)
 * has all of its calls made here: every request of its sessions that
 * calls it, and the data of its files (batch.c).  The pool then has more
 * threads (worker.c), as each one waits for the store while it holds it.
 *
 * Lock: pool_lock guards the queue and the stop flag; each worker's
 * inbox_lock guards its done list (worker.c).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_i.h"

#define POOL_THREADS_MAX	64

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct agent_job *pool_head, *pool_tail;	/* under pool_lock */
static int pool_stop;				/* under pool_lock */
static pthread_t pool_threads[POOL_THREADS_MAX];
static unsigned int pool_nthreads;

static void *pool_main(void *arg)
{
	struct agent_job *j;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&pool_lock);
		while (!pool_head && !pool_stop)
			pthread_cond_wait(&pool_cond, &pool_lock);
		j = pool_head;
		if (j) {
			pool_head = j->next;
			if (!pool_head)
				pool_tail = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
		if (!j)
			return NULL;	/* stopping, queue empty */
		j->next = NULL;
		j->run(j);
		agent_worker_job_done(j);
	}
}

int agent_pool_start(unsigned int nthreads)
{
	char name[16];
	unsigned int i;
	int ret;

	if (nthreads == 0)
		nthreads = 4;
	if (nthreads > POOL_THREADS_MAX)
		nthreads = POOL_THREADS_MAX;
	pool_stop = 0;
	for (i = 0; i < nthreads; i++) {
		ret = -pthread_create(&pool_threads[i], NULL, pool_main, NULL);
		if (ret < 0) {
			agent_err("cannot start blocking pool thread %u: %s",
				  i, strerror(-ret));
			agent_pool_stop();
			return ret;
		}
		snprintf(name, sizeof(name), "bca-pool%u", i);
		pthread_setname_np(pool_threads[i], name);
		pool_nthreads = i + 1;
	}
	return 0;
}

/* After the workers stopped: every job was done, the threads just exit. */
void agent_pool_stop(void)
{
	unsigned int i;

	pthread_mutex_lock(&pool_lock);
	pool_stop = 1;
	pthread_cond_broadcast(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
	for (i = 0; i < pool_nthreads; i++)
		pthread_join(pool_threads[i], NULL);
	pool_nthreads = 0;
}

void agent_pool_submit(struct agent_job *j, void (*run)(struct agent_job *),
		       void (*done)(struct agent_job *), struct agent_worker *w)
{
	j->run = run;
	j->done = done;
	j->w = w;
	j->next = NULL;
	pthread_mutex_lock(&pool_lock);
	if (pool_tail)
		pool_tail->next = j;
	else
		pool_head = j;
	pool_tail = j;
	pthread_cond_signal(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
}
