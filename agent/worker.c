/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * worker.c - worker threads: one event loop each (epoll over the sessions'
 * sockets, the io_uring's completion eventfd and an inbox eventfd), its own
 * io_uring, staging slots and sessions.
 *
 * The main thread hands over connections through the inbox (inbox_lock);
 * a session never moves between workers.  A loop iteration: wait for
 * events, serve them, reap storage completions (parked ones first), start
 * chunks for waiting batches, submit, then one pass over the sessions to
 * serve frames left buffered by backpressure, flush replies, update poll
 * interest and free sessions that finished closing.  The pass is the only
 * place a session is freed, so no callback ever sees a freed session.
 *
 * The inbox eventfd also wakes the worker when notifications were queued
 * for one of its sessions (notify.c): the pass encodes them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "worker_i.h"

static struct agent_worker *workers;
static unsigned int nworkers;
static atomic_uint hand_rr;
atomic_uint agent_live_sessions;
/*
 * Sessions in SESS_AUTH on the whole agent: the sum of every worker's
 * nunauth, each worker adding its own changes.
 */
static atomic_uint worker_unauth;
/* HELLOs handed to an inbox, not yet taken by their worker. */
static atomic_uint worker_hellos;
atomic_long agent_fds_used;
long agent_fds_budget = 1L << 30;	/* main.c sets it from RLIMIT_NOFILE */

/*
 * Sessions that count against max_sessions: the authenticated ones, and
 * those not yet authenticated up to max_unauth; beyond that these make
 * room for each other (the oldest is dropped), so a flood of them cannot
 * make the agent refuse a real host.
 */
unsigned int agent_sessions_live(void)
{
	unsigned int live = atomic_load(&agent_live_sessions);
	unsigned int unauth = atomic_load(&worker_unauth) +
			      atomic_load(&worker_hellos);

	if (unauth > live)
		unauth = live;
	return live - unauth + (unauth < agent_cfg.max_unauth ?
				unauth : agent_cfg.max_unauth);
}

/*
 * Count this worker's sessions still in SESS_AUTH and carry the change to
 * the agent-wide count.  Idempotent: called once a new session exists,
 * and by session_set() (agent_worker_unauth_done()) whenever one leaves
 * SESS_AUTH, which every way out (authenticated, closed) goes through.
 */
static void worker_unauth_sync(struct agent_worker *w)
{
	struct agent_session *s;
	unsigned int n = 0;

	for (s = w->sessions; s; s = s->next)
		if (s->state == SESS_AUTH)
			n++;
	if (n > w->nunauth)
		atomic_fetch_add(&worker_unauth, n - w->nunauth);
	else if (n < w->nunauth)
		atomic_fetch_sub(&worker_unauth, w->nunauth - n);
	w->nunauth = n;
}

void agent_worker_unauth_done(struct agent_session *s)
{
	worker_unauth_sync(s->w);
}

/*
 * A new HELLO while max_unauth connections are unauthenticated: close this
 * worker's oldest one.  A real host authenticates within a millisecond of
 * its HELLO, so it is never the oldest for long, while connections that
 * never authenticate make room for each other instead of locking hosts out.
 */
static void worker_unauth_make_room(struct agent_worker *w)
{
	struct agent_session *s, *old;
	char c;

	if (atomic_load(&worker_unauth) < agent_cfg.max_unauth)
		return;
	for (;;) {
		uint16_t count[AGENT_PEER_BUCKETS] = { 0 };
		unsigned int n, most = 0;

		/* the oldest of the source holding the most (agent.h) */
		old = NULL;
		for (s = w->sessions; s; s = s->next)
			if (s->state == SESS_AUTH)
				count[agent_peer_hash(s->peer)]++;
		for (s = w->sessions; s; s = s->next) {
			if (s->state != SESS_AUTH)
				continue;
			n = count[agent_peer_hash(s->peer)];
			if (n > most ||
			    (n == most && s->t_start < old->t_start)) {
				most = n;
				old = s;
			}
		}
		if (!old)
			return;
		/* its AUTH may be waiting unread: serve it, not drop it */
		if (recv(old->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 1)
			break;
		agent_session_on_ctl(old, EPOLLIN);
		if (old->state == SESS_AUTH)
			break;
	}
	agent_warn_rl("limit of %u unauthenticated connections reached; "
		      "dropping the oldest, from %s", agent_cfg.max_unauth,
		      old->peer);
	agent_session_close(old, 1);
	worker_unauth_sync(w);
}

static void worker_reap(struct agent_worker *w)
{
	struct agent_ring *r = &w->ring;
	struct io_uring_cqe *cqe;
	uint64_t v;

	if (read(r->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		agent_dbg("ring eventfd: %s", strerror(errno));
	for (;;) {
		uint64_t ud;
		int32_t res;

		if (r->nparked) {
			r->nparked--;
			ud = r->parked[r->nparked].user_data;
			res = r->parked[r->nparked].res;
		} else if (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
			ud = cqe->user_data;
			res = cqe->res;
			io_uring_cqe_seen(&r->ring, cqe);
		} else {
			break;
		}
		if (ud & 1)
			agent_batch_ring_done(w, ud, res);
	}
}

void agent_worker_job_done(struct agent_job *j)
{
	struct agent_worker *w = j->w;
	uint64_t one = 1;

	pthread_mutex_lock(&w->inbox_lock);
	j->next = w->jobs_done;
	w->jobs_done = j;
	pthread_mutex_unlock(&w->inbox_lock);
	if (write(w->inbox_efd, &one, sizeof(one)) < 0)
		agent_dbg("inbox eventfd: %s", strerror(errno));
}

/*
 * The inbox, newest first, in arrival order.  HELLOs beyond the newest
 * max_unauth would only make room for the later ones (see
 * worker_unauth_make_room()): they are dropped here, before a session is
 * set up for them, so a flood of them costs little.
 */
/* Mark the HELLOs whose source sent another HELLO in the same list. */
static void worker_inbox_flooders(struct agent_inbox_item *list)
{
	uint16_t count[AGENT_PEER_BUCKETS] = { 0 };
	struct agent_inbox_item *it;
	struct bcp_hdr h;

	for (it = list; it; it = it->next) {
		bcp_dec_hdr(it->frame, &h);
		it->hello = h.opcode == BCP_OP_HELLO;
		it->src = (uint16_t)agent_peer_hash(it->peer);
		if (it->hello && count[it->src] < UINT16_MAX)
			count[it->src]++;
	}
	for (it = list; it; it = it->next)
		it->flood = it->hello && count[it->src] > 1;
}

static struct agent_inbox_item *worker_inbox_order(
	struct agent_inbox_item *it)
{
	struct agent_inbox_item *out = NULL, *next;
	unsigned int hellos = 0;
	struct bcp_hdr h;

	worker_inbox_flooders(it);
	for (; it; it = next) {
		next = it->next;
		bcp_dec_hdr(it->frame, &h);
		if (h.opcode == BCP_OP_HELLO)
			atomic_fetch_sub(&worker_hellos, 1);
		/* a source that sent one HELLO is never dropped here */
		if (h.opcode == BCP_OP_HELLO &&
		    ++hellos > agent_cfg.max_unauth && it->flood) {
			agent_warn_rl("limit of %u unauthenticated connections "
				      "reached; dropping the oldest, from %s",
				      agent_cfg.max_unauth, it->peer);
			close(it->fd);
			atomic_fetch_sub(&agent_live_sessions, 1);
			free(it);
			continue;
		}
		it->next = out;
		out = it;
	}
	return out;
}

static void worker_inbox(struct agent_worker *w)
{
	struct agent_inbox_item *it, *next;
	struct agent_job *j, *jnext;
	uint64_t v;

	if (read(w->inbox_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		agent_dbg("inbox eventfd: %s", strerror(errno));
	pthread_mutex_lock(&w->inbox_lock);
	it = w->inbox;
	w->inbox = NULL;
	j = w->jobs_done;
	w->jobs_done = NULL;
	pthread_mutex_unlock(&w->inbox_lock);
	for (; j; j = jnext) {
		jnext = j->next;
		j->done(j);
	}
	it = worker_inbox_order(it);
	for (; it; it = next) {
		struct agent_session *s;
		enum bcp_err why = BCP_E_OK;
		struct bcp_msg m;
		struct bcp_hdr h;

		next = it->next;
		bcp_dec_hdr(it->frame, &h);
		if (w->stopping ||
		    bcp_decode(it->frame, it->len, &m, &why) < 0) {
			if (!w->stopping)
				agent_warn("connection from %s: bad first "
					   "frame (%s)", it->peer,
					   bcp_err_str(why));
			close(it->fd);
			if (h.opcode == BCP_OP_HELLO)
				atomic_fetch_sub(&agent_live_sessions, 1);
		} else if (m.hdr.opcode == BCP_OP_DATA_ATTACH) {
			agent_session_attach(w, it->fd, it->peer, &m);
		} else {
			worker_unauth_make_room(w);
			s = agent_session_new(w, it->fd, it->peer,
					      it->is_unix);
			if (!s) {
				agent_err("connection from %s: out of memory",
					  it->peer);
				close(it->fd);
				atomic_fetch_sub(&agent_live_sessions, 1);
			} else {
				worker_unauth_sync(w);
				agent_session_hello(s, &m);
			}
		}
		free(it);
	}
}

static void worker_pass(struct agent_worker *w)
{
	struct agent_session *s, *next;
	uint64_t now = agent_now_ns();

	for (s = w->sessions; s; s = next) {
		next = s->next;
		if (s->state == SESS_AUTH &&
		    now - s->t_start > agent_cfg.handshake_ms * 1000000ull) {
			agent_warn_rl("session %s: no authentication within "
				      "%u ms; closing", s->peer,
				      agent_cfg.handshake_ms);
			agent_session_close(s, 1);
		}
		if (w->stopping && s->state != SESS_CLOSING &&
		    !s->batches_live && !s->jobs_live)
			agent_session_close(s, 0);
		if (w->stopping && now > w->stop_deadline && !s->peer_gone) {
			agent_warn("session %s: still busy at shutdown; "
				   "dropping it", s->peer);
			agent_session_close(s, 1);
		}
		if (s->kick)
			agent_session_parse(s);
		if (s->ns && agent_notify_pending(s->ns))
			agent_session_notify(s);
		agent_session_busy(s, now);
		if (!s->peer_gone)
			agent_session_flush(s);
		if (s->state == SESS_CLOSING && !s->batches_live &&
		    !s->jobs_live && (s->peer_gone || s->wpos == s->wlen)) {
			agent_session_free(s);
			continue;
		}
		agent_session_update_events(s);
	}
	agent_metrics_publish(w);
}

/* Let every session's transport post and poll; 1 = do not sleep. */
static int worker_kick(struct agent_worker *w)
{
	struct agent_session *s;
	int busy = 0;

	for (s = w->sessions; s; s = s->next)
		if (agent_session_kick(s) > 0)
			busy = 1;
	return busy;
}

/*
 * The worker's spinning (worker_wait).  Owned by its worker thread.
 */
struct worker_spin {
	int loadavg_fd;			/* /proc/loadavg, or -1: never spin */
	unsigned int ncpus;		/* online CPUs */
	int open;			/* the last sample allowed spinning */
	uint64_t next_ns;		/* when to sample again */
};

#define WORKER_SPIN_SAMPLE_NS	1000000ull

static void worker_spin_init(struct worker_spin *g)
{
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(g, 0, sizeof(*g));
	g->loadavg_fd = -1;
	/* one CPU never has another idle beside the spinner's */
	if (!agent_cfg.spin_usec || ncpus < 2)
		return;
	g->loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	g->ncpus = (unsigned int)ncpus;
}

static void worker_spin_fini(struct worker_spin *g)
{
	if (g->loadavg_fd >= 0)
		close(g->loadavg_fd);
	g->loadavg_fd = -1;
}

/*
 * 1 when a CPU is idle: fewer threads runnable, this one included, than
 * there are CPUs.  The fourth field of /proc/loadavg ("2/345") counts the
 * threads runnable at the moment of the read; /proc/stat's idle time
 * moves in scheduler ticks and costs a page of text per read.  Sampled
 * at most every WORKER_SPIN_SAMPLE_NS.
 */
static int worker_spin_idle_cpu(struct worker_spin *g, uint64_t now)
{
	if (now < g->next_ns)
		return g->open;
	g->next_ns = now + WORKER_SPIN_SAMPLE_NS;
	g->open = 0;
	g->open = bcp_cpu_idle(g->loadavg_fd, g->ncpus);
	return g->open;
}

/*
 * Wait for events.  After a pass that served something, poll for up to
 * spin_usec first: at queue depth 1 the next request follows the reply
 * within microseconds, and catching it awake saves the sleep and the
 * wake-up.  It spins only while a CPU is idle, and yields between polls
 * so that a woken thread sharing this CPU (the host's, when the agent
 * runs beside it) runs at once: under load it costs nothing.  A spin that
 * finds nothing ends the spinning until the next event, so an idle worker
 * sleeps and burns no CPU.
 */
static int worker_wait(struct agent_worker *w, struct worker_spin *g,
		       struct epoll_event *evs, int max, int busy, int *spin)
{
	uint64_t now, until;
	int n;

	if (busy)
		return epoll_wait(w->epfd, evs, max, 0);
	if (*spin && g->loadavg_fd >= 0) {
		now = agent_now_ns();
		until = now + agent_cfg.spin_usec * 1000ull;
		while (worker_spin_idle_cpu(g, now)) {
			n = epoll_wait(w->epfd, evs, max, 0);
			if (n)
				return n;
			now = agent_now_ns();
			if (now >= until)
				break;
			sched_yield();
		}
		*spin = 0;
	}
	n = epoll_wait(w->epfd, evs, max, 200);
	*spin = n > 0;
	return n;
}

static void *worker_main(void *arg)
{
	struct agent_worker *w = arg;
	struct epoll_event evs[64];
	struct worker_spin g;
	int busy = 0, spin = 0;

	worker_spin_init(&g);
	while (!w->stopping || w->nsessions) {
		int n, i, inbox;

		n = worker_wait(w, &g, evs, 64, busy, &spin);
		if (n < 0 && errno != EINTR) {
			agent_err("worker %u: epoll_wait: %s", w->idx,
				  strerror(errno));
			break;
		}
		if (!w->stopping && atomic_load(&w->stop)) {
			w->stopping = 1;
			w->stop_deadline = agent_now_ns() +
					   AGENT_DRAIN_MS * 1000000ull;
		}
		inbox = 0;
		for (i = 0; i < n; i++) {
			struct agent_tag *t = evs[i].data.ptr;

			switch (t->kind) {
			case AGENT_TAG_RING:
				worker_reap(w);
				break;
			case AGENT_TAG_INBOX:
				inbox = 1;
				break;
			case AGENT_TAG_CTL:
				agent_session_on_ctl(t->ptr, evs[i].events);
				break;
			case AGENT_TAG_DATA:
				agent_session_on_data(t->ptr, evs[i].events);
				break;
			}
		}
		/*
		 * New connections after the sessions' frames: an AUTH that
		 * arrived with a flood of HELLOs is served before they make
		 * room by dropping the oldest unauthenticated sessions.
		 */
		if (inbox)
			worker_inbox(w);
		worker_reap(w);
		agent_batch_schedule(w);
		io_uring_submit(&w->ring.ring);
		worker_kick(w);
		worker_pass(w);
		agent_linger_expire();
		/* post what the pass queued; polled completions keep us up */
		busy = worker_kick(w);
		io_uring_submit(&w->ring.ring);
	}
	worker_spin_fini(&g);
	return NULL;
}

static int worker_init(struct agent_worker *w, unsigned int idx)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ret;

	w->idx = idx;
	pthread_mutex_init(&w->inbox_lock, NULL);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		return -errno;
	ret = agent_ring_init(&w->ring, agent_cfg.queue_depth * 2 + 16);
	if (ret < 0) {
		agent_err("io_uring set-up failed: %s", strerror(-ret));
		goto out_epfd;
	}
	ret = agent_batch_slots_init(w);
	if (ret < 0)
		goto out_ring;
	w->inbox_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->inbox_efd < 0) {
		ret = -errno;
		goto out_slots;
	}
	w->ring_tag.kind = AGENT_TAG_RING;
	w->inbox_tag.kind = AGENT_TAG_INBOX;
	ev.data.ptr = &w->ring_tag;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ring.efd, &ev) < 0)
		goto out_errno;
	ev.data.ptr = &w->inbox_tag;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->inbox_efd, &ev) < 0)
		goto out_errno;
	return 0;

out_errno:
	ret = -errno;
	close(w->inbox_efd);
out_slots:
	agent_batch_slots_fini(w);
out_ring:
	agent_ring_fini(&w->ring);
out_epfd:
	close(w->epfd);
	return ret;
}

static void worker_fini(struct agent_worker *w)
{
	close(w->inbox_efd);
	agent_batch_slots_fini(w);
	agent_ring_fini(&w->ring);
	close(w->epfd);
}

/*
 * The blocking pool's size: --pool-threads serves the calls that may block
 * for long in any store.  A store that may block on every call
 * (AGENT_STORE_BLOCKING) has every session's requests and the data of its
 * files on the pool: each worker's sessions keep several calls out at
 * once, so it gets at least 4 threads per worker, and 16 at least.
 */
static unsigned int worker_pool_threads(unsigned int nw)
{
	unsigned int n = agent_cfg.pool_threads, want;

	if (!agent_backend || !(agent_backend->flags & AGENT_STORE_BLOCKING))
		return n;
	want = 4 * nw;
	if (want < 16)
		want = 16;
	return n > want ? n : want;
}

int agent_workers_start(unsigned int n)
{
	unsigned int i;
	char name[16];
	int ret;

	workers = calloc(n, sizeof(*workers));
	if (!workers)
		return -ENOMEM;
	ret = agent_pool_start(worker_pool_threads(n));
	if (ret < 0) {
		free(workers);
		workers = NULL;
		return ret;
	}
	for (i = 0; i < n; i++) {
		ret = worker_init(&workers[i], i);
		if (ret < 0)
			goto out_fini;
		ret = -pthread_create(&workers[i].thread, NULL, worker_main,
				      &workers[i]);
		if (ret < 0) {
			worker_fini(&workers[i]);
			goto out_fini;
		}
		snprintf(name, sizeof(name), "bca-worker%u", i % 1000);
		pthread_setname_np(workers[i].thread, name);
		nworkers = i + 1;
	}
	return 0;

out_fini:
	agent_err("cannot start worker %u: %s", i, strerror(-ret));
	agent_workers_stop(NULL);
	return ret;
}

struct agent_worker *agent_worker_nth(unsigned int i)
{
	return i < nworkers ? &workers[i] : NULL;
}

void agent_worker_hand(int fd, const char *peer, const void *frame,
		       size_t len, int is_unix)
{
	struct agent_inbox_item *it;
	struct agent_worker *w;
	struct bcp_hdr h;
	uint64_t one = 1;

	it = calloc(1, sizeof(*it));
	if (!it || len > sizeof(it->frame)) {
		free(it);
		close(fd);
		return;
	}
	it->fd = fd;
	it->is_unix = is_unix;
	snprintf(it->peer, sizeof(it->peer), "%s", peer);
	memcpy(it->frame, frame, len);
	it->len = len;
	bcp_dec_hdr(frame, &h);
	if (h.opcode == BCP_OP_DATA_ATTACH && len >= BCP_HDR_SIZE + 8) {
		/* the session id's low byte names its worker */
		w = &workers[it->frame[BCP_HDR_SIZE] % nworkers];
	} else {
		w = &workers[atomic_fetch_add(&hand_rr, 1) % nworkers];
	}
	if (h.opcode == BCP_OP_HELLO)
		atomic_fetch_add(&worker_hellos, 1);
	pthread_mutex_lock(&w->inbox_lock);
	it->next = w->inbox;
	w->inbox = it;
	pthread_mutex_unlock(&w->inbox_lock);
	if (write(w->inbox_efd, &one, sizeof(one)) < 0)
		agent_dbg("inbox eventfd: %s", strerror(errno));
}

void agent_workers_stop(struct agent_stats *total)
{
	unsigned int i;
	uint64_t one = 1;

	for (i = 0; i < nworkers; i++) {
		atomic_store(&workers[i].stop, 1);
		if (write(workers[i].inbox_efd, &one, sizeof(one)) < 0)
			agent_dbg("inbox eventfd: %s", strerror(errno));
	}
	for (i = 0; i < nworkers; i++) {
		pthread_join(workers[i].thread, NULL);
		if (total)
			agent_stats_add(total, &workers[i].stats);
		worker_inbox(&workers[i]);
		worker_fini(&workers[i]);
	}
	agent_pool_stop();
	free(workers);
	workers = NULL;
	nworkers = 0;
}
