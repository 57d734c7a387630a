/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_client.c - the host side of a BCP session: connection and handshake,
 * synchronous metadata calls, asynchronous batched data I/O, FORGET
 * batching, and the failure of everything pending when the connection goes.
 *
 * Threads:
 *   receiver  reads every frame of the control connection and hands each
 *             reply to its waiter slot (a blocked bcp_client_call(), or an
 *             in-flight batch whose I/Os it completes with done()),
 *             and hands each NOTIFY to opts.notify (recv_notify; a
 *             NOTIFY BUSY counts as a PING's answer instead).  It
 *             never sends: an agent that stops reading while its replies
 *             wait would deadlock with it.  What it has to say (FORGET,
 *             RELEASE) it queues for the sender.
 *   sender    coalesces queued I/Os into BATCH_PULL / BATCH_PUSH frames
 *             (pulls and pushes apart), flushes queued FORGETs when the
 *             queue is full or the I/O queue idle, sends the requests the
 *             receiver posted, and fails requests the agent leaves
 *             unanswered past the timeout.  An I/O submitted while
 *             the sender sleeps and nothing is queued goes out from the
 *             submitting thread instead (client_send_direct): a lone I/O
 *             has nothing to coalesce with, and waking the sender for it
 *             would cost two context switches.
 *   data      tcp transport only, in bcp_client_xfer.c.
 *
 * Outstanding requests live in a fixed table of waiter slots, one per
 * request the agent accepts in flight (max_inflight from HELLO): callers
 * and the sender wait for a free slot, so nothing is allocated per request
 * and the agent's bound is never exceeded.  Frames go out whole under
 * send_lock, so calls and batches interleave on the one socket; a send
 * that makes no progress for the timeout breaks the session.
 *
 * A request whose caller gave up keeps its slot (ABANDONED) until the
 * agent answers: the agent still counts it against max_inflight, and a
 * late success must be undone (FORGET of the handle it returned, RELEASE
 * of the file it opened) or the agent keeps both for the session's life.
 * Once every slot is ABANDONED the connection is given up (sender_scan):
 * nothing could be sent on it until the agent answers.
 *
 * Reconnect (opts.reconnect_timeout_ms > 0): a lost connection pauses the
 * session instead of failing it (client_pause).  A fourth thread,
 * reconnect, joins the receiver and data threads of the lost connection,
 * moves the connection epoch on (a frame meant for the lost connection
 * is never sent on the next: every send names its epoch), connects again
 * with backoff, redoes HELLO, AUTH and the transport on the same pool,
 * runs the resume callback with the new connection to itself, starts the
 * new receiver, sends again the kept frames of unanswered calls flagged
 * BCP_HF_REPLAY, and only then lets callers and the sender on (READY).
 * A receiver that reads a reply after the pause began drops it: the
 * request goes out again and is answered on the next connection.
 *
 * Lock order: qlock, then wlock, then send_lock.  send_lock and the pool
 * lock are leaves.  done() callbacks run with no lock held.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "bcp_auth.h"
#include "bcp_client_i.h"

#define BCP_CLIENT_BATCH_DEFAULT	256
#define BCP_CLIENT_TIMEOUT_DEFAULT	10000
#define BCP_CLIENT_SLOTS_MAX		4096
#define BCP_CLIENT_FORGET_IDLE_NS	2000000L	/* 2 ms */
#define BCP_CLIENT_SCAN_MIN_MS		10
#define BCP_CLIENT_SCAN_MAX_MS		1000
/*
 * The receiver's spin after the last frame (doc/performance.md, "Where
 * the time goes"); BLUECACHE_SPIN_USEC in the environment overrides it.
 */
#define BCP_CLIENT_SPIN_USEC_DEFAULT	50
#ifdef HAVE_RDMA
#define BCP_CLIENT_HAVE_RDMA		1
#else
#define BCP_CLIENT_HAVE_RDMA		0
#endif

/*
 * The client whose receiver or sender runs on this thread, if any: done()
 * callbacks run there, and neither may wait for the sender.
 */
static __thread struct bcp_client *client_worker_of;

/* The client whose resume callback runs on this thread, if any. */
static __thread struct bcp_client *client_resumer_of;

static int client_on_worker(const struct bcp_client *c)
{
	return client_worker_of == c;
}

static uint64_t client_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t client_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Process-wide logging (set before any client exists). */
static bcp_client_log_fn client_log_fn;
static int client_log_max = LOG_WARNING;

void bcp_client_set_log(bcp_client_log_fn fn, int max_level)
{
	client_log_fn = fn;
	client_log_max = max_level;
}

static const char *client_level_name(int level)
{
	if (level <= LOG_ERR)
		return "error";
	if (level == LOG_WARNING || level == LOG_NOTICE)
		return "warning";
	if (level == LOG_INFO)
		return "info";
	return "debug";
}

void bcp_client_logf(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (level > client_log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (client_log_fn)
		client_log_fn(level, msg);
	else
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name,
			client_level_name(level), msg);
}

static const char *const transport_names[] = {
	[BCP_XFER_AUTO] = "auto",
	[BCP_XFER_SHM] = "shm",
	[BCP_XFER_TCP] = "tcp",
	[BCP_XFER_RDMA] = "rdma",
};

const char *bcp_transport_name(enum bcp_transport t)
{
	if ((unsigned int)t >= sizeof(transport_names) /
			       sizeof(transport_names[0]))
		return "?";
	return transport_names[t];
}

int bcp_transport_parse(const char *s, enum bcp_transport *out)
{
	unsigned int i;

	if (!s)
		return -EINVAL;
	for (i = 0; i < sizeof(transport_names) / sizeof(transport_names[0]);
	     i++) {
		if (!strcmp(s, transport_names[i])) {
			*out = (enum bcp_transport)i;
			return 0;
		}
	}
	return -EINVAL;
}

void bcp_client_opts_init(struct bcp_client_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->transport = BCP_XFER_AUTO;
	o->pool_size = BCP_CLIENT_POOL_DEFAULT;
	o->max_batch = BCP_CLIENT_BATCH_DEFAULT;
	o->timeout_ms = BCP_CLIENT_TIMEOUT_DEFAULT;
	o->spin_usec = -1;
}

/* ---- state and waiter slots ------------------------------------------ */

/* Called with qlock and wlock held.  Returns 1 when the state changed. */
static int client_state_set(struct bcp_client *c, enum bcp_client_state to)
{
	enum bcp_client_state from = c->state;
	int ok;

	switch (to) {
	case BCP_CLIENT_READY:
		ok = from == BCP_CLIENT_CONNECTING ||
		     from == BCP_CLIENT_RESUMING;
		break;
	case BCP_CLIENT_BROKEN:
		ok = from == BCP_CLIENT_READY;
		break;
	case BCP_CLIENT_PAUSED:
		ok = from == BCP_CLIENT_READY || from == BCP_CLIENT_RESUMING;
		break;
	case BCP_CLIENT_RESUMING:
		ok = from == BCP_CLIENT_PAUSED;
		break;
	case BCP_CLIENT_CLOSING:
		ok = from != BCP_CLIENT_CLOSING;
		break;
	default:
		ok = 0;
		break;
	}
	if (ok)
		c->state = to;
	return ok;
}

/* Called with wlock held: the connection is lost and being sought. */
static int client_paused(const struct bcp_client *c)
{
	return c->state == BCP_CLIENT_PAUSED ||
	       c->state == BCP_CLIENT_RESUMING;
}

/*
 * Take a free slot, waiting for one (until deadline, if not NULL; a pause
 * waits for its end without one).  Called with wlock held.  NULL with
 * *err = -ENOTCONN, -ETIMEDOUT or, after a pause ran out, -EIO.
 */
static struct bcp_wslot *slot_get_locked(struct bcp_client *c,
					 const struct timespec *deadline,
					 int *err)
{
	struct bcp_wslot *s;
	uint32_t i;

	for (;;) {
		if (c->state == BCP_CLIENT_READY &&
		    c->free_slot != BCP_POOL_NONE)
			break;
		if (client_paused(c) && (c->expired || c->closing)) {
			*err = -EIO;
			return NULL;
		}
		if (client_paused(c)) {
			pthread_cond_wait(&c->slot_cond, &c->wlock);
			continue;
		}
		if (c->state != BCP_CLIENT_READY) {
			*err = -ENOTCONN;
			return NULL;
		}
		if (!deadline) {
			pthread_cond_wait(&c->slot_cond, &c->wlock);
		} else if (pthread_cond_timedwait(&c->slot_cond, &c->wlock,
						  deadline) == ETIMEDOUT &&
			   c->state == BCP_CLIENT_READY &&
			   c->free_slot == BCP_POOL_NONE) {
			*err = -ETIMEDOUT;
			return NULL;
		}
	}
	i = c->free_slot;
	s = &c->slots[i];
	c->free_slot = s->next_free;
	c->gen = (c->gen + 1) & 0x7fffffffu;
	if (!c->gen)
		c->gen = 1;
	s->req_id = (uint64_t)c->gen << 32 | i;
	s->kind = BCP_WSLOT_RESERVED;
	s->done = 0;
	s->head = NULL;
	s->count = 0;
	s->handle = 0;
	s->plus = 0;
	s->resend = 0;
	s->frame_len = 0;
	s->epoch = c->epoch;
	s->start_ms = client_now_ms();
	c->nbusy++;
	return s;
}

/* Called with wlock held. */
static void slot_put_locked(struct bcp_client *c, struct bcp_wslot *s)
{
	s->kind = BCP_WSLOT_FREE;
	s->req_id = 0;
	s->head = NULL;
	s->call = NULL;
	s->rep = NULL;
	s->rbuf = NULL;
	s->resend = 0;
	s->frame_len = 0;
	s->next_free = c->free_slot;
	c->free_slot = (uint32_t)(s - c->slots);
	c->nbusy--;
	pthread_cond_signal(&c->slot_cond);
}

/* What undoing a late reply to req needs to know (recv_late). */
static void slot_note_req(struct bcp_wslot *s, const struct bcp_msg *req)
{
	s->op = req->hdr.opcode;
	if (s->op == BCP_OP_OPEN || s->op == BCP_OP_OPENDIR)
		s->handle = req->u.open_req.handle;
	else if (s->op == BCP_OP_READDIR)
		s->plus = !!(req->u.readdir_req.flags & BCP_READDIR_PLUS);
}

static void io_list_complete(struct bcp_io *io, int32_t result)
{
	struct bcp_io *next;

	for (; io; io = next) {
		next = io->next;
		io->next = NULL;
		io->done(io, result);
	}
}

/* Take every queued I/O onto *tail; returns where the list ends.  qlock. */
static struct bcp_io **queue_take_locked(struct bcp_client *c,
					 struct bcp_io **tail)
{
	int k;

	for (k = 0; k < 2; k++) {
		if (!c->qhead[k])
			continue;
		*tail = c->qhead[k];
		tail = &c->qtail[k]->next;
		c->qhead[k] = NULL;
		c->qtail[k] = NULL;
		c->qlen[k] = 0;
	}
	return tail;
}

/*
 * Fail what the slots hold with err: a waiting call is woken with it; an
 * async call goes onto *calls and a batch's I/Os onto *tail, to be
 * completed once the locks are dropped (client_complete); an abandoned
 * request is let go (the agent drops what it made with the session).
 * Returns where *tail's list ends.  qlock and wlock held.
 */
static struct bcp_io **slots_fail_locked(struct bcp_client *c, int err,
					 struct bcp_io **tail,
					 struct bcp_call **calls)
{
	struct bcp_wslot *s;
	uint32_t i;

	for (i = 0; i < c->nslots; i++) {
		s = &c->slots[i];
		s->resend = 0;
		if (s->kind == BCP_WSLOT_CALL && !s->done) {
			s->result = err;
			s->done = 1;
			pthread_cond_signal(&s->cond);
		} else if (s->kind == BCP_WSLOT_BATCH) {
			*tail = s->head;
			while (*tail)
				tail = &(*tail)->next;
			slot_put_locked(c, s);
		} else if (s->kind == BCP_WSLOT_ACALL) {
			s->call->next = *calls;
			*calls = s->call;
			slot_put_locked(c, s);
		} else if (s->kind == BCP_WSLOT_ABANDONED) {
			slot_put_locked(c, s);
		}
	}
	pthread_cond_broadcast(&c->slot_cond);
	return tail;
}

/* Complete what slots_fail_locked() handed back.  No lock held. */
static void client_complete(struct bcp_io *list, struct bcp_call *calls,
			    int err)
{
	struct bcp_call *call;

	io_list_complete(list, err);
	while ((call = calls)) {
		calls = call->next;
		call->done(call, err);
	}
}

/*
 * Move the session to state to (BROKEN, or CLOSING from destroy) and fail
 * everything pending with -ENOTCONN: blocked calls wake, queued and
 * in-flight I/Os complete, the sockets are shut down so that every thread
 * leaves its blocking read.  Safe from any thread, any number of times.
 */
static void client_fail_all(struct bcp_client *c, enum bcp_client_state to,
			    const char *why)
{
	struct bcp_io *list = NULL, **tail = &list;
	struct bcp_call *calls = NULL;
	int changed;

	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	changed = client_state_set(c, to);
	tail = queue_take_locked(c, tail);
	c->nforgets = 0;
	c->nposts = 0;
	slots_fail_locked(c, -ENOTCONN, tail, &calls);
	pthread_cond_broadcast(&c->fcond);
	pthread_cond_broadcast(&c->qcond);
	pthread_cond_broadcast(&c->rcond);
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);

	if (changed) {
		if (to == BCP_CLIENT_BROKEN && why)
			bcp_client_logf(LOG_WARNING, "%s", why);
		if (c->ctl >= 0)
			shutdown(c->ctl, SHUT_RDWR);
		if (c->data >= 0)
			shutdown(c->data, SHUT_RDWR);
	}
	client_complete(list, calls, -ENOTCONN);
}

/* Put ios back at the front of their queue.  Called with qlock held. */
static void queue_requeue_locked(struct bcp_client *c, struct bcp_io *head)
{
	struct bcp_io *io, *next;
	struct bcp_io *h[2] = { NULL, NULL }, **t[2] = { &h[0], &h[1] };
	struct bcp_io *last[2] = { NULL, NULL };
	uint32_t n[2] = { 0, 0 };
	int k;

	for (io = head; io; io = next) {
		next = io->next;
		k = io->op == BCP_OP_BATCH_PUSH;
		io->next = NULL;
		*t[k] = io;
		t[k] = &io->next;
		last[k] = io;
		n[k]++;
	}
	for (k = 0; k < 2; k++) {
		if (!h[k])
			continue;
		*t[k] = c->qhead[k];
		if (!c->qhead[k])
			c->qtail[k] = last[k];
		c->qhead[k] = h[k];
		c->qlen[k] += n[k];
	}
}

/*
 * The connection of epoch is lost and reconnect is on: pause.  Calls keep
 * waiting and are sent again on the next connection; in-flight batches go
 * back to the queue; abandoned requests are dropped (the agent's session
 * that held them is gone, and the host resumes its handles and open files
 * from its own tables); queued FORGETs and posts are dropped for the same
 * reason.  Wakes the reconnect thread.
 */
static void client_pause(struct bcp_client *c, const char *why,
			 uint64_t epoch)
{
	struct bcp_wslot *s;
	int was_ready;
	uint32_t i;

	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	if (c->epoch != epoch || !(c->state == BCP_CLIENT_READY ||
				   c->state == BCP_CLIENT_RESUMING)) {
		pthread_mutex_unlock(&c->wlock);
		pthread_mutex_unlock(&c->qlock);
		return;
	}
	was_ready = c->state == BCP_CLIENT_READY;
	client_state_set(c, BCP_CLIENT_PAUSED);
	if (was_ready) {
		c->pause_start_ms = client_now_ms();
		c->expired = 0;
	}
	c->nforgets = 0;
	c->nposts = 0;
	for (i = 0; i < c->nslots; i++) {
		s = &c->slots[i];
		if ((s->kind == BCP_WSLOT_CALL && !s->done) ||
		    s->kind == BCP_WSLOT_ACALL) {
			s->resend = 1;
		} else if (s->kind == BCP_WSLOT_BATCH) {
			queue_requeue_locked(c, s->head);
			slot_put_locked(c, s);
		} else if (s->kind == BCP_WSLOT_ABANDONED) {
			slot_put_locked(c, s);
		}
	}
	/* closing: the last calls fail now rather than wait for a resume */
	for (i = 0; c->closing && i < c->nslots; i++)
		if (c->slots[i].kind == BCP_WSLOT_CALL)
			pthread_cond_broadcast(&c->slots[i].cond);
	pthread_cond_broadcast(&c->fcond);
	pthread_cond_broadcast(&c->rcond);
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);

	if (was_ready)
		bcp_client_logf(LOG_WARNING,
				"agent connection lost: %s; pausing requests",
				why ? why : "unknown cause");
	else
		bcp_client_logf(LOG_INFO,
				"agent connection lost again while resuming: %s",
				why ? why : "unknown cause");
	/* every thread of the lost connection leaves its blocking read */
	if (c->ctl >= 0)
		shutdown(c->ctl, SHUT_RDWR);
	if (c->data >= 0)
		shutdown(c->data, SHUT_RDWR);
}

/*
 * The pause ran past reconnect_timeout_ms: what waits fails with -EIO,
 * and so does every new request until a connection is back.  Reconnect
 * thread only.
 */
static void client_expire(struct bcp_client *c)
{
	struct bcp_io *list = NULL, **tail = &list;
	struct bcp_call *calls = NULL;

	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	if (!client_paused(c) || c->expired) {
		pthread_mutex_unlock(&c->wlock);
		pthread_mutex_unlock(&c->qlock);
		return;
	}
	c->expired = 1;
	tail = queue_take_locked(c, tail);
	slots_fail_locked(c, -EIO, tail, &calls);
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);

	bcp_client_logf(LOG_WARNING,
			"agent at %s still unreachable after %d ms: requests fail with EIO until it is back",
			c->addr_str, c->opts.reconnect_timeout_ms);
	client_complete(list, calls, -EIO);
}

/* The connection of epoch is lost: pause, or fail everything. */
static void client_lost_epoch(struct bcp_client *c, const char *why,
			      uint64_t epoch)
{
	if (c->opts.reconnect_timeout_ms > 0)
		client_pause(c, why, epoch);
	else
		client_fail_all(c, BCP_CLIENT_BROKEN, why);
}

/*
 * The agent of epoch sent what no agent may send: the requests it holds
 * may have been answered by the garbage, so they are not sent again but
 * fail with -EIO (a misbehaving agent is EIO, never a hang); then the
 * connection is lost as any other.
 */
static void client_misbehaved(struct bcp_client *c, const char *why,
			      uint64_t epoch)
{
	struct bcp_io *list = NULL;
	struct bcp_call *calls = NULL;

	if (c->opts.reconnect_timeout_ms <= 0) {
		client_lost_epoch(c, why, epoch);
		return;
	}
	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	if (c->epoch != epoch || c->state != BCP_CLIENT_READY) {
		pthread_mutex_unlock(&c->wlock);
		pthread_mutex_unlock(&c->qlock);
		client_lost_epoch(c, why, epoch);
		return;
	}
	slots_fail_locked(c, -EIO, &list, &calls);
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);
	client_lost_epoch(c, why, epoch);
	client_complete(list, calls, -EIO);
}

void bcp_client_break(struct bcp_client *c, const char *why)
{
	uint64_t epoch;

	pthread_mutex_lock(&c->wlock);
	epoch = c->epoch;
	pthread_mutex_unlock(&c->wlock);
	client_lost_epoch(c, why, epoch);
}

/* ---- handshake ------------------------------------------------------- */

int bcp_client_rpc_sync(struct bcp_client *c, int sock, struct bcp_msg *req,
			int pass_fd, struct bcp_msg *rep, void *buf,
			size_t cap, int32_t *status, char *err, size_t errlen)
{
	const char *op = bcp_op_name(req->hdr.opcode);
	enum bcp_err why = BCP_E_OK;
	int n, ret;

	if (pass_fd >= 0)
		req->hdr.flags |= BCP_HF_FD;
	n = bcp_encode(buf, cap, req);
	if (n < 0) {
		snprintf(err, errlen, "cannot encode %s: %s", op,
			 strerror(-n));
		return n;
	}
	ret = bcp_frame_send(sock, buf, (size_t)n, pass_fd);
	if (ret < 0) {
		snprintf(err, errlen,
			 "lost the connection to agent at %s during %s: %s",
			 c->addr_str, op, strerror(-ret));
		return ret == -EPIPE ? -ECONNRESET : ret;
	}
	memset(buf, 0, BCP_HDR_SIZE);
	n = bcp_frame_recv(sock, buf, cap, NULL, c->opts.timeout_ms, &why);
	if (n == 0 || n == -ECONNRESET) {
		snprintf(err, errlen,
			 "agent at %s closed the connection during %s",
			 c->addr_str, op);
		return -ECONNRESET;
	}
	if (n == -ETIMEDOUT) {
		snprintf(err, errlen,
			 "agent at %s did not answer %s within %d ms",
			 c->addr_str, op, c->opts.timeout_ms);
		return n;
	}
	if (n == -EPROTO || n == -EMSGSIZE || n == -EBADMSG) {
		snprintf(err, errlen, "bad reply from agent at %s to %s: %s",
			 c->addr_str, op, bcp_err_str(why));
		return -EPROTO;
	}
	if (n < 0) {
		snprintf(err, errlen,
			 "lost the connection to agent at %s during %s: %s",
			 c->addr_str, op, strerror(-n));
		return n;
	}
	ret = bcp_decode(buf, (size_t)n, rep, &why);
	if (ret < 0) {
		snprintf(err, errlen, "bad reply from agent at %s to %s: %s",
			 c->addr_str, op, bcp_err_str(why));
		return -EPROTO;
	}
	if (!(rep->hdr.flags & BCP_HF_REPLY) ||
	    rep->hdr.opcode != req->hdr.opcode ||
	    rep->hdr.req_id != req->hdr.req_id) {
		snprintf(err, errlen,
			 "bad reply from agent at %s to %s: unexpected %s %s",
			 c->addr_str, op, bcp_op_name(rep->hdr.opcode),
			 rep->hdr.flags & BCP_HF_REPLY ? "reply" : "request");
		return -EPROTO;
	}
	*status = rep->hdr.status;
	return 0;
}

static int client_hello(struct bcp_client *c, uint64_t want, char *err,
			size_t errlen)
{
	struct bcp_msg req, rep;
	const uint8_t *raw;
	uint8_t buf[512];
	int32_t status;
	unsigned int v;
	int ret;

	ret = bcp_random(c->nonce_c, sizeof(c->nonce_c));
	if (ret < 0) {
		snprintf(err, errlen, "cannot draw a nonce: %s",
			 strerror(-ret));
		return ret;
	}
	bcp_msg_init(&req, BCP_OP_HELLO, 1);
	req.u.hello_req.ver_min = BCP_VERSION_MIN;
	req.u.hello_req.ver_max = BCP_VERSION_MAX;
	req.u.hello_req.features = want;
	memcpy(req.u.hello_req.nonce, c->nonce_c, BCP_NONCE_LEN);
	memcpy(req.u.hello_req.client, c->client_id, BCP_CLIENT_ID_LEN);
	ret = bcp_client_rpc_sync(c, c->ctl, &req, -1, &rep, buf, sizeof(buf),
				  &status, err, errlen);
	if (ret == -EPROTO) {
		/*
		 * The codec rejects other versions, in the header or in
		 * the HELLO reply's body: read the raw bytes to say which.
		 */
		raw = buf;
		v = (unsigned int)raw[4] | (unsigned int)raw[5] << 8;
		if (v >= BCP_VERSION_MIN && v <= BCP_VERSION_MAX &&
		    raw[6] == BCP_OP_HELLO && raw[7] == 0)
			v = (unsigned int)raw[BCP_HDR_SIZE] |
			    (unsigned int)raw[BCP_HDR_SIZE + 1] << 8;
		if (raw[0] == (BCP_MAGIC & 0xff) &&
		    raw[1] == ((BCP_MAGIC >> 8) & 0xff) &&
		    (v < BCP_VERSION_MIN || v > BCP_VERSION_MAX)) {
			snprintf(err, errlen,
				 "agent at %s speaks protocol version %u, this client %d-%d",
				 c->addr_str, v, BCP_VERSION_MIN,
				 BCP_VERSION_MAX);
			return -EPROTONOSUPPORT;
		}
	}
	if (ret < 0)
		return ret;
	if (status == -EPROTONOSUPPORT) {
		snprintf(err, errlen,
			 "agent at %s speaks none of the protocol versions %d-%d of this client",
			 c->addr_str, BCP_VERSION_MIN, BCP_VERSION_MAX);
		return status;
	}
	if (status < 0) {
		snprintf(err, errlen, "agent at %s refused HELLO: %s",
			 c->addr_str, strerror(-status));
		return status;
	}
	c->hello = rep.u.hello_rep;
	if (c->hello.version < BCP_VERSION_MIN ||
	    c->hello.version > BCP_VERSION_MAX) {
		snprintf(err, errlen,
			 "agent at %s speaks protocol version %u, this client %d-%d",
			 c->addr_str, c->hello.version, BCP_VERSION_MIN,
			 BCP_VERSION_MAX);
		return -EPROTONOSUPPORT;
	}
	if (!c->hello.max_segs || !c->hello.max_inflight ||
	    c->hello.max_frame < BCP_HDR_SIZE + 64) {
		snprintf(err, errlen,
			 "agent at %s announced unusable limits (max_segs %u, max_inflight %u, max_frame %u)",
			 c->addr_str, c->hello.max_segs,
			 c->hello.max_inflight, c->hello.max_frame);
		return -EPROTO;
	}
	/* Only what was asked for counts, whatever the agent says. */
	c->hello.features &= want;
	return 0;
}

static int client_auth(struct bcp_client *c, char *err, size_t errlen)
{
	struct bcp_msg req, rep;
	uint8_t buf[256], expect[BCP_MAC_LEN];
	int32_t status;
	int ret;

	bcp_msg_init(&req, BCP_OP_AUTH, 2);
	ret = bcp_auth_mac(c->secret, c->secret_len, BCP_AUTH_LABEL_CLIENT,
			   c->hello.nonce, BCP_NONCE_LEN, c->nonce_c,
			   BCP_NONCE_LEN, req.u.auth_req.mac);
	if (ret < 0)
		goto out_mac;
	ret = bcp_client_rpc_sync(c, c->ctl, &req, -1, &rep, buf, sizeof(buf),
				  &status, err, errlen);
	if (ret < 0)
		return ret;
	if (status == -EACCES) {
		snprintf(err, errlen,
			 "agent at %s rejected the secret (check secret_file)",
			 c->addr_str);
		return status;
	}
	if (status < 0) {
		snprintf(err, errlen, "agent at %s refused AUTH: %s",
			 c->addr_str, strerror(-status));
		return status;
	}
	ret = bcp_auth_mac(c->secret, c->secret_len, BCP_AUTH_LABEL_SERVER,
			   c->nonce_c, BCP_NONCE_LEN, c->hello.nonce,
			   BCP_NONCE_LEN, expect);
	if (ret < 0)
		goto out_mac;
	if (!bcp_auth_mac_equal(expect, rep.u.auth_rep.mac)) {
		snprintf(err, errlen,
			 "agent at %s could not prove it holds the secret (check secret_file)",
			 c->addr_str);
		return -EACCES;
	}
	if (rep.u.auth_rep.root == 0) {
		snprintf(err, errlen, "agent at %s sent root handle 0",
			 c->addr_str);
		return -EPROTO;
	}
	c->root = rep.u.auth_rep.root;
	return 0;

out_mac:
	snprintf(err, errlen, "cannot compute the session MAC: %s",
		 strerror(-ret));
	return ret;
}

/* ---- adaptive spinning ----------------------------------------------- */

/*
 * How long the receiver spins: opts.spin_usec, else BLUECACHE_SPIN_USEC
 * (0 to BCP_SPIN_USEC_MAX; 0 never spins), else the default.  A machine
 * with one CPU never has one idle beside the spinner's.
 */
static void client_spin_init(struct bcp_spin *g, int opt)
{
	const char *env = getenv("BLUECACHE_SPIN_USEC");
	unsigned long usec = BCP_CLIENT_SPIN_USEC_DEFAULT;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	char *end;

	memset(g, 0, sizeof(*g));
	g->loadavg_fd = -1;
	if (opt >= 0) {
		usec = opt > BCP_SPIN_USEC_MAX ? BCP_SPIN_USEC_MAX :
						 (unsigned long)opt;
	} else if (env && *env) {
		errno = 0;
		usec = strtoul(env, &end, 10);
		if (errno || *end || usec > BCP_SPIN_USEC_MAX) {
			bcp_client_logf(LOG_WARNING,
					"BLUECACHE_SPIN_USEC=%s is not 0..%u: not spinning",
					env, BCP_SPIN_USEC_MAX);
			usec = 0;
		}
	}
	if (!usec || ncpus < 2)
		return;
	g->loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (g->loadavg_fd < 0)
		return;
	g->usec = (unsigned int)usec;
	g->ncpus = (unsigned int)ncpus;
}

static void client_spin_fini(struct bcp_spin *g)
{
	if (g->usec)
		bcp_client_logf(LOG_DEBUG,
				"receiver spin: %llu frames caught spinning, %llu waits slept",
				(unsigned long long)g->spun,
				(unsigned long long)g->slept);
	if (g->loadavg_fd >= 0)
		close(g->loadavg_fd);
	g->loadavg_fd = -1;
	g->usec = 0;
}

/*
 * 1 when a CPU is idle: fewer threads runnable, the caller included, than
 * there are CPUs.  The fourth field of /proc/loadavg ("2/345") counts the
 * runnable threads at the moment of the read (nr_running()), where
 * /proc/stat's idle time is a sum in scheduler ticks (4 ms and more) and
 * costs a page of text per read; a pread of /proc/loadavg costs a few
 * microseconds, and is done at most every BCP_SPIN_SAMPLE_NS.
 */
static int client_spin_idle_cpu(struct bcp_spin *g, uint64_t now)
{
	if (now < g->next_ns)
		return g->open;
	g->next_ns = now + BCP_SPIN_SAMPLE_NS;
	g->open = 0;
	g->open = bcp_cpu_idle(g->loadavg_fd, g->ncpus);
	return g->open;
}

/*
 * Wait, spinning, until the control connection has something to read
 * (or an error or hang-up to report): at most spin.usec after the last
 * frame this client sent or received, and only while a CPU is idle.
 * Returns 1 when it found something, 0 when the caller must sleep.  The
 * sched_yield() between polls lets a woken thread that shares this CPU
 * (the application, a FUSE thread) run at once.  Receiver thread only.
 */
static int receiver_spin(struct bcp_client *c)
{
	struct pollfd pfd = { .fd = c->ctl, .events = POLLIN };
	struct bcp_spin *g = &c->rspin;
	uint64_t now, last, sent, window = (uint64_t)g->usec * 1000;

	if (!g->usec)
		return 0;
	for (;;) {
		now = client_now_ns();
		sent = __atomic_load_n(&c->last_send_ns, __ATOMIC_RELAXED);
		last = sent > c->rd_last_ns ? sent : c->rd_last_ns;
		if (now > last && now - last > window)
			break;
		if (!client_spin_idle_cpu(g, now))
			break;
		if (poll(&pfd, 1, 0) != 0) {
			g->spun++;
			return 1;
		}
		sched_yield();
	}
	g->slept++;
	return 0;
}

/* The send path notes when a frame went out: the receiver spins after. */
static void client_note_send(struct bcp_client *c)
{
	if (c->rspin.usec)
		__atomic_store_n(&c->last_send_ns, client_now_ns(),
				 __ATOMIC_RELAXED);
}

/* ---- receiver -------------------------------------------------------- */

/*
 * An inline pull's reply (BCP_BATCH_INLINE): its data must be exactly the
 * bytes its statuses delivered, none over its segment.  0 or -EPROTO.
 */
static int recv_inline_check(struct bcp_client *c, const struct bcp_msg *m,
			     struct bcp_io *head, int asked, char *msg,
			     size_t msglen)
{
	uint64_t sum = 0;
	struct bcp_io *io;
	int32_t st;
	uint32_t i;

	for (io = head, i = 0; io; io = io->next, i++) {
		st = bcp_msg_status(m, i);
		if (st > (int32_t)io->length) {
			snprintf(msg, msglen,
				 "bad frame from agent at %s: %d bytes moved for a %u byte segment",
				 c->addr_str, st, io->length);
			return -EPROTO;
		}
		if (st > 0)
			sum += (uint64_t)st;
	}
	if (asked && m->hdr.opcode == BCP_OP_BATCH_PULL &&
	    sum == m->data_len)
		return 0;
	snprintf(msg, msglen,
		 "bad frame from agent at %s: %u bytes in a %s reply that delivered %llu%s",
		 c->addr_str, m->data_len, bcp_op_name(m->hdr.opcode),
		 (unsigned long long)sum, asked ? "" : " (not asked inline)");
	return -EPROTO;
}

static int recv_batch(struct bcp_client *c, const struct bcp_hdr *h,
		      const uint8_t *f, size_t n, uint16_t op,
		      struct bcp_io *head, uint32_t count, int inl,
		      char *msg, size_t msglen)
{
	const uint8_t *data = NULL;
	uint64_t *ctr = op == BCP_OP_BATCH_PULL ? &c->stats.bytes_pulled :
						  &c->stats.bytes_pushed;
	struct bcp_io *io, *next;
	struct bcp_msg m;
	enum bcp_err why;
	int32_t all = 0, st;
	uint32_t i;
	int ret = 0;

	if (h->opcode != op) {
		snprintf(msg, msglen,
			 "bad frame from agent at %s: %s reply to a %s",
			 c->addr_str, bcp_op_name(h->opcode), bcp_op_name(op));
		ret = -EPROTO;
	} else if (h->status < 0) {
		all = h->status;
	} else if (bcp_decode(f, n, &m, &why) < 0) {
		snprintf(msg, msglen, "bad frame from agent at %s: %s",
			 c->addr_str, bcp_err_str(why));
		ret = -EPROTO;
	} else if (m.u.batch_rep.count != count) {
		snprintf(msg, msglen,
			 "bad frame from agent at %s: %u statuses for %u segments",
			 c->addr_str, m.u.batch_rep.count, count);
		ret = -EPROTO;
	} else if (m.data_len) {
		ret = recv_inline_check(c, &m, head, inl, msg, msglen);
		data = m.data;
	}
	if (ret < 0)
		all = -EIO;

	for (io = head, i = 0; io; io = next, i++) {
		next = io->next;
		io->next = NULL;
		st = all ? all : bcp_msg_status(&m, i);
		if (st > (int32_t)io->length) {
			snprintf(msg, msglen,
				 "bad frame from agent at %s: %d bytes moved for a %u byte segment",
				 c->addr_str, st, io->length);
			st = -EIO;
			ret = -EPROTO;
		}
		if (data && st > 0) {
			/* checked above: data holds every st in turn */
			memcpy(io->buf, data, (size_t)st);
			data += st;
		}
		/* counted before done(): its caller may read the stats */
		if (st > 0)
			__atomic_fetch_add(ctr, (uint64_t)st,
					   __ATOMIC_RELAXED);
		io->done(io, st);
	}
	return ret;
}

/* The reply to an asynchronous call, outside every lock. */
static int recv_call(struct bcp_client *c, const struct bcp_hdr *h,
		     const uint8_t *f, size_t n, uint16_t op,
		     struct bcp_call *call, char *msg, size_t msglen)
{
	enum bcp_err why;
	int ret = 0, result;

	if (h->opcode != op) {
		snprintf(msg, msglen,
			 "bad frame from agent at %s: %s reply to a %s",
			 c->addr_str, bcp_op_name(h->opcode), bcp_op_name(op));
		ret = -EPROTO;
		result = -EIO;
	} else if (n > call->rcap) {
		result = -EMSGSIZE;
	} else {
		memcpy(call->rbuf, f, n);
		if (bcp_decode(call->rbuf, n, &call->rep, &why) < 0) {
			snprintf(msg, msglen, "bad frame from agent at %s: %s",
				 c->addr_str, bcp_err_str(why));
			ret = -EPROTO;
			result = -EIO;
		} else {
			result = call->rep.hdr.status;
		}
	}
	call->done(call, result);
	return ret;
}

static void client_post_release(struct bcp_client *c, uint16_t op,
				uint64_t handle, uint64_t fh);

/*
 * The reply to a request its caller gave up on.  What a success created
 * is given back: the reference of a returned handle (FORGET) and an open
 * file (RELEASE / RELEASEDIR); otherwise the agent would hold both until
 * the session ends.  Runs on the receiver thread: only queues.
 */
static int recv_late(struct bcp_client *c, const struct bcp_hdr *h,
		     const uint8_t *f, size_t n, uint16_t op, uint64_t handle,
		     uint32_t plus, char *msg, size_t msglen)
{
	struct bcp_dirent_iter it = { 0 };
	struct bcp_dirent_view v;
	struct bcp_msg m;
	enum bcp_err why;

	if (h->opcode != op) {
		snprintf(msg, msglen,
			 "bad frame from agent at %s: %s reply to a %s",
			 c->addr_str, bcp_op_name(h->opcode), bcp_op_name(op));
		return -EPROTO;
	}
	if (h->status < 0)
		return 0;
	if (bcp_decode(f, n, &m, &why) < 0) {
		snprintf(msg, msglen, "bad frame from agent at %s: %s",
			 c->addr_str, bcp_err_str(why));
		return -EPROTO;
	}
	bcp_client_logf(LOG_DEBUG,
			"agent at %s: %s answered after its timeout; undone",
			c->addr_str, bcp_op_name(op));
	switch (op) {
	case BCP_OP_LOOKUP:
	case BCP_OP_MKDIR:
	case BCP_OP_MKNOD:
	case BCP_OP_SYMLINK:
	case BCP_OP_LINK:
		bcp_client_forget(c, m.u.entry_rep.entry.handle, 1);
		break;
	case BCP_OP_CREATE:
		client_post_release(c, BCP_OP_RELEASE,
				    m.u.create_rep.entry.handle,
				    m.u.create_rep.fh);
		bcp_client_forget(c, m.u.create_rep.entry.handle, 1);
		break;
	case BCP_OP_OPEN:
	case BCP_OP_OPENDIR:
		client_post_release(c, op == BCP_OP_OPEN ? BCP_OP_RELEASE :
				    BCP_OP_RELEASEDIR, handle,
				    m.u.open_rep.fh);
		break;
	case BCP_OP_READDIR:
		/* plus entries other than "." and ".." hold a reference */
		while (plus && bcp_dirent_next(&m, 1, &it, &v) == 1) {
			if (!v.entry.handle)
				continue;
			bcp_client_forget(c, v.entry.handle, 1);
		}
		break;
	default:
		break;
	}
	return 0;
}

/*
 * The agent answered a PING or said by NOTIFY BUSY that it is at work:
 * an overdue call may wait on (client_busy_wait_ok()).  Any thread.
 */
static void client_heard(struct bcp_client *c, uint64_t now)
{
	__atomic_store_n(&c->heard_ms, now, __ATOMIC_RELAXED);
}

/*
 * A NOTIFY: the one request an agent may send on the control connection,
 * once asked for.  Validated whole (kind, name, req_id 0) before the
 * callback sees it.  0, or -EPROTO with msg set.
 */
static int recv_notify(struct bcp_client *c, const uint8_t *f, size_t n,
		       char *msg, size_t msglen)
{
	char name[BCP_NAME_MAX + 1];
	struct bcp_msg m;
	enum bcp_err why;

	if (bcp_decode(f, n, &m, &why) < 0) {
		snprintf(msg, msglen, "bad frame from agent at %s: %s",
			 c->addr_str, bcp_err_str(why));
		return -EPROTO;
	}
	if (m.u.notify_req.kind == BCP_NOTIFY_BUSY ?
	    !(c->hello.features & BCP_FEAT_BUSY) :
	    !(c->hello.features & BCP_FEAT_NOTIFY)) {
		snprintf(msg, msglen,
			 "bad frame from agent at %s: a NOTIFY of kind %u, "
			 "not agreed on", c->addr_str, m.u.notify_req.kind);
		return -EPROTO;
	}
	if (m.u.notify_req.kind == BCP_NOTIFY_BUSY) {
		client_heard(c, client_now_ms());
		return 0;
	}
	if (m.name) {
		memcpy(name, m.name, m.u.notify_req.name_len);
		name[m.u.notify_req.name_len] = '\0';
	}
	c->opts.notify(c->opts.notify_arg, &m.u.notify_req,
		       m.name ? name : NULL);
	return 0;
}

/* Whatever was said while no connection was up went unsaid: a RESET. */
static void client_notify_reset(struct bcp_client *c)
{
	struct bcp_notify_req n;

	if (!c->opts.notify)
		return;
	memset(&n, 0, sizeof(n));
	n.kind = BCP_NOTIFY_RESET;
	c->opts.notify(c->opts.notify_arg, &n, NULL);
}

/* One reply.  0, or -EPROTO with msg set when the connection must go. */
static int recv_dispatch(struct bcp_client *c, const struct bcp_hdr *h,
			 const uint8_t *f, size_t n, char *msg, size_t msglen)
{
	struct bcp_call *call;
	struct bcp_wslot *s;
	struct bcp_io *head;
	enum bcp_err why;
	uint32_t idx, count;
	uint16_t op;
	int ret = 0, inl;

	if (!(h->flags & BCP_HF_REPLY)) {
		if (h->opcode == BCP_OP_NOTIFY &&
		    (c->hello.features & (BCP_FEAT_NOTIFY | BCP_FEAT_BUSY)))
			return recv_notify(c, f, n, msg, msglen);
		snprintf(msg, msglen,
			 "bad frame from agent at %s: a %s request on the control connection",
			 c->addr_str, bcp_op_name(h->opcode));
		return -EPROTO;
	}
	if (h->req_id & BCP_REQ_UNTRACKED) {
		if (h->status < 0)
			bcp_client_logf(LOG_DEBUG, "agent at %s: %s: %s",
					c->addr_str, bcp_op_name(h->opcode),
					strerror(-h->status));
		return 0;
	}
	idx = (uint32_t)h->req_id;
	if (idx >= c->nslots) {
		snprintf(msg, msglen,
			 "bad frame from agent at %s: reply to unknown request %llu",
			 c->addr_str, (unsigned long long)h->req_id);
		return -EPROTO;
	}

	pthread_mutex_lock(&c->wlock);
	if (c->state == BCP_CLIENT_PAUSED) {
		/*
		 * Read before the loss was noticed: what it answers is sent
		 * again on the next connection, and answered there.
		 */
		pthread_mutex_unlock(&c->wlock);
		snprintf(msg, msglen, "connection to agent at %s lost",
			 c->addr_str);
		return -ENOTCONN;
	}
	s = &c->slots[idx];
	if (s->req_id != h->req_id || (s->kind != BCP_WSLOT_CALL &&
				       s->kind != BCP_WSLOT_ACALL &&
				       s->kind != BCP_WSLOT_BATCH &&
				       s->kind != BCP_WSLOT_ABANDONED) ||
	    (s->kind == BCP_WSLOT_CALL && s->done)) {
		/* every request keeps its slot until answered */
		pthread_mutex_unlock(&c->wlock);
		snprintf(msg, msglen,
			 "bad frame from agent at %s: %s reply to unknown request %llu",
			 c->addr_str, bcp_op_name(h->opcode),
			 (unsigned long long)h->req_id);
		return -EPROTO;
	}
	if (s->kind == BCP_WSLOT_ABANDONED) {
		uint64_t handle = s->handle;
		uint32_t plus = s->plus;

		op = s->op;
		slot_put_locked(c, s);
		pthread_mutex_unlock(&c->wlock);
		return recv_late(c, h, f, n, op, handle, plus, msg, msglen);
	}
	if (s->kind == BCP_WSLOT_CALL) {
		if (h->opcode != s->op) {
			s->result = -EIO;
			snprintf(msg, msglen,
				 "bad frame from agent at %s: %s reply to a %s",
				 c->addr_str, bcp_op_name(h->opcode),
				 bcp_op_name(s->op));
			ret = -EPROTO;
		} else if (n > s->rcap) {
			s->result = -EMSGSIZE;
		} else {
			memcpy(s->rbuf, f, n);
			if (bcp_decode(s->rbuf, n, s->rep, &why) < 0) {
				s->result = -EIO;
				snprintf(msg, msglen,
					 "bad frame from agent at %s: %s",
					 c->addr_str, bcp_err_str(why));
				ret = -EPROTO;
			} else {
				s->result = s->rep->hdr.status;
			}
		}
		s->done = 1;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&c->wlock);
		return ret;
	}
	if (s->kind == BCP_WSLOT_ACALL) {
		call = s->call;
		op = s->op;
		slot_put_locked(c, s);
		pthread_mutex_unlock(&c->wlock);
		return recv_call(c, h, f, n, op, call, msg, msglen);
	}
	op = s->op;
	head = s->head;
	count = s->count;
	inl = s->inl;
	slot_put_locked(c, s);
	pthread_mutex_unlock(&c->wlock);
	return recv_batch(c, h, f, n, op, head, count, inl, msg, msglen);
}

static void *receiver_main(void *arg)
{
	struct bcp_client *c = arg;
	enum bcp_err why = BCP_E_OK;
	const uint8_t *f;
	struct bcp_hdr h;
	char msg[512];
	uint64_t epoch;
	int n, bad = 0;

	client_worker_of = c;
	pthread_mutex_lock(&c->wlock);
	epoch = c->epoch;
	pthread_mutex_unlock(&c->wlock);
	c->rd_last_ns = client_now_ns();
	for (;;) {
		/* with nothing buffered the next read would sleep */
		if (c->rd.start == c->rd.end)
			receiver_spin(c);
		n = bcp_frame_read(&c->rd, c->ctl, &f, &why);
		if (n == 0 || n == -ECONNRESET) {
			snprintf(msg, sizeof(msg),
				 "agent at %s closed the connection",
				 c->addr_str);
			break;
		}
		if (n == -EPROTO || n == -EMSGSIZE || n == -EBADMSG) {
			snprintf(msg, sizeof(msg),
				 "bad frame from agent at %s: %s",
				 c->addr_str, bcp_err_str(why));
			bad = 1;
			break;
		}
		if (n < 0) {
			snprintf(msg, sizeof(msg),
				 "connection to agent at %s lost: %s",
				 c->addr_str, strerror(-n));
			break;
		}
		if (bcp_hdr_check(f, BCP_FRAME_MAX, &h, &why) < 0) {
			snprintf(msg, sizeof(msg),
				 "bad frame from agent at %s: %s",
				 c->addr_str, bcp_err_str(why));
			bad = 1;
			break;
		}
		if (recv_dispatch(c, &h, f, (size_t)n, msg,
				  sizeof(msg)) < 0) {
			bad = 1;
			break;
		}
		if (c->rspin.usec)
			c->rd_last_ns = client_now_ns();
	}
	if (bad)
		client_misbehaved(c, msg, epoch);
	else
		bcp_client_break(c, msg);
	return NULL;
}

/* ---- sender ---------------------------------------------------------- */

/*
 * A send on the connection of epoch failed: everything in flight fails
 * with -ENOTCONN, or (reconnect) the session pauses.  No lock held.
 */
static void client_lost(struct bcp_client *c, int err, uint64_t epoch)
{
	char msg[512];

	if (err == -ETIMEDOUT)
		snprintf(msg, sizeof(msg),
			 "agent at %s took no request for %d ms: connection given up",
			 c->addr_str, c->opts.timeout_ms);
	else
		snprintf(msg, sizeof(msg), "connection to agent at %s lost: %s",
			 c->addr_str, strerror(-err));
	client_lost_epoch(c, msg, epoch);
}

/*
 * Send a whole frame on the control connection, giving up when the agent
 * takes none of it for the timeout (it stopped reading: the session is
 * lost, and a frame half sent leaves nothing else to do).  Called with
 * send_lock held.  0 or -errno.
 */
static int client_send_timed(struct bcp_client *c, const void *buf,
			     size_t len)
{
	const uint8_t *p = buf;
	struct pollfd pfd = { .fd = c->ctl, .events = POLLOUT };
	int wait = c->opts.timeout_ms > 0 ? c->opts.timeout_ms : -1;
	ssize_t n;
	int ret;

	while (len) {
		n = send(c->ctl, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		ret = n < 0 ? -errno : -EPIPE;
		if (ret == -EINTR)
			continue;
		if (ret != -EAGAIN && ret != -EWOULDBLOCK)
			return ret;
		ret = poll(&pfd, 1, wait);
		if (ret < 0 && errno != EINTR)
			return -errno;
		if (ret == 0)
			return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Send a frame meant for the connection of epoch; when that one is gone
 * already, nothing is sent (what needs it goes out again on the next).
 */
static int send_frame(struct bcp_client *c, const void *buf, size_t len,
		      uint64_t epoch)
{
	int ret = 0;

	pthread_mutex_lock(&c->send_lock);
	if (c->epoch == epoch)
		ret = client_send_timed(c, buf, len);
	pthread_mutex_unlock(&c->send_lock);
	if (ret < 0)
		client_lost(c, ret, epoch);
	else
		client_note_send(c);
	return ret;
}

/*
 * Encode req into sbuf and send it on the connection of epoch.  A failed
 * send breaks the connection, which fails req too if it is tracked, and
 * counts as sent: returns 0, or the encoder's -errno when nothing was
 * sent.  No lock held.
 */
static int send_msg(struct bcp_client *c, struct bcp_msg *req,
		    uint64_t epoch)
{
	int len, ret = 0;

	pthread_mutex_lock(&c->send_lock);
	len = bcp_encode(c->sbuf, BCP_FRAME_MAX, req);
	if (len >= 0 && c->epoch == epoch)
		ret = client_send_timed(c, c->sbuf, (size_t)len);
	pthread_mutex_unlock(&c->send_lock);
	if (ret < 0)
		client_lost(c, ret, epoch);
	else if (len >= 0)
		client_note_send(c);
	return len < 0 ? len : 0;
}

/*
 * Reconnect: encode req into its slot, where it stays until answered, to
 * be sent again on a new connection.  Called with wlock held.  0 or the
 * encoder's -errno.
 */
static int slot_keep_locked(struct bcp_wslot *s, struct bcp_msg *req)
{
	int len;

	len = bcp_encode(s->keep, BCP_CLIENT_KEEP_LEN, req);
	if (len == -EMSGSIZE) {
		/* a large request (SETXATTR, SYMLINK): rare, kept after */
		if (!s->keep_big)
			s->keep_big = malloc(BCP_FRAME_MAX);
		if (!s->keep_big)
			return -ENOMEM;
		len = bcp_encode(s->keep_big, BCP_FRAME_MAX, req);
		if (len < 0)
			return len;
		s->frame = s->keep_big;
	} else if (len < 0) {
		return len;
	} else {
		s->frame = s->keep;
	}
	s->frame_len = (uint32_t)len;
	return 0;
}

/*
 * Send the tracked request of slot s: its kept frame (reconnect) or req
 * encoded now.  As send_msg().  No lock held.
 */
static int send_slot(struct bcp_client *c, struct bcp_wslot *s,
		     struct bcp_msg *req, uint64_t epoch)
{
	if (!c->keeps)
		return send_msg(c, req, epoch);
	/* the frame is the slot's until its reply; that comes after this */
	send_frame(c, s->frame, s->frame_len, epoch);
	return 0;
}

/* How often the sender looks for overdue requests: a quarter timeout. */
static uint64_t sender_scan_period(const struct bcp_client *c)
{
	uint64_t p = (uint64_t)c->opts.timeout_ms / 4;

	if (p < BCP_CLIENT_SCAN_MIN_MS)
		return BCP_CLIENT_SCAN_MIN_MS;
	return p > BCP_CLIENT_SCAN_MAX_MS ? BCP_CLIENT_SCAN_MAX_MS : p;
}

/*
 * May a call that began at start (ms) and is past its timeout wait on?
 * While busy_timeout_ms from its start has not run out and the agent
 * answered a PING (the sender PINGs while a call is half its timeout old)
 * or sent a NOTIFY BUSY within the timeout: the agent is there and
 * working (a slow store), not gone.  Any lock or none.
 */
static int client_busy_wait_ok(struct bcp_client *c, uint64_t start,
			       uint64_t now)
{
	uint64_t heard;

	if (c->opts.busy_timeout_ms <= c->opts.timeout_ms ||
	    now - start >= (uint64_t)c->opts.busy_timeout_ms)
		return 0;
	heard = __atomic_load_n(&c->heard_ms, __ATOMIC_RELAXED);
	return heard + (uint64_t)c->opts.timeout_ms > now;
}

static int client_call_async(struct bcp_client *c, struct bcp_msg *req,
			     struct bcp_call *call, int nowait);

static void client_ping_done(struct bcp_call *call, int result)
{
	struct bcp_client *c = call->priv;

	/* answered (not timed out, not lost with the connection) */
	if (result >= 0)
		client_heard(c, client_now_ms());
	__atomic_store_n(&c->ping_out, 0, __ATOMIC_RELEASE);
}

/*
 * Send a PING unless one is out: its answer tells the agent is there
 * while a call takes long.  Never waits for a slot: with none free, no
 * PING goes out until a reply frees one.  Sender thread, no lock held.
 */
static void client_ping(struct bcp_client *c)
{
	struct bcp_msg m;

	if (__atomic_load_n(&c->ping_out, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&c->ping_out, 1, __ATOMIC_RELAXED);
	bcp_msg_init(&m, BCP_OP_PING, 0);
	c->ping_call.rbuf = c->ping_buf;
	c->ping_call.rcap = sizeof(c->ping_buf);
	c->ping_call.done = client_ping_done;
	c->ping_call.priv = c;
	if (client_call_async(c, &m, &c->ping_call, 1) < 0)
		__atomic_store_n(&c->ping_out, 0, __ATOMIC_RELEASE);
}

/*
 * Send the n FORGETs copied to fbuf, queued for the connection of epoch.
 * Called with no lock held.
 */
static void sender_forget(struct bcp_client *c, uint32_t n, uint64_t epoch)
{
	struct bcp_msg m;
	int len;

	bcp_msg_init(&m, BCP_OP_FORGET, BCP_REQ_UNTRACKED |
		     __atomic_add_fetch(&c->forget_seq, 1, __ATOMIC_RELAXED));
	m.u.forget_req.count = n;
	m.forgets = c->fbuf;
	len = bcp_encode(c->bbuf, BCP_FRAME_MAX, &m);
	if (len < 0) {
		bcp_client_logf(LOG_WARNING, "cannot encode FORGET: %s",
				strerror(-len));
		return;
	}
	send_frame(c, c->bbuf, (size_t)len, epoch);
}

/*
 * A batch of these I/Os may move its bytes in its frames (tcp: the data
 * connection's transfers, each answered, cost two more wake-ups than the
 * bytes themselves): their length in all when it may, else 0.
 */
static int client_inline(const struct bcp_client *c, const struct bcp_io *io)
{
	uint64_t len = 0;

	if (c->transport != BCP_XFER_TCP ||
	    !(c->hello.features & BCP_FEAT_BATCH_INLINE))
		return 0;
	for (; io; io = io->next) {
		len += io->length;
		if (len > BCP_BATCH_INLINE_MAX)
			return 0;
	}
	return (int)len;
}

/*
 * Send what is queued as one batch, encoded with segs and buf: the
 * sender's own, or (direct) those of the submitter that holds
 * direct_busy.  The sender waits for a slot; a direct submitter takes one
 * only if it is free at once.  Returns 1 when a slot was taken (the
 * batch sent, or its I/Os completed or put back), 0 when none was free.
 * No lock held.
 */
static int client_batch(struct bcp_client *c, int direct,
			struct bcp_seg *segs, uint8_t *buf)
{
	struct bcp_io *head, *io;
	struct timespec dl;
	struct bcp_wslot *s = NULL;
	struct bcp_msg m;
	uint32_t n, k;
	uint16_t op;
	int len, err, inl;

	/*
	 * Take the slot first: while it is awaited, the queue grows.  Wait
	 * no longer than a scan period: the sender also fails the requests
	 * that hold the slots when the agent leaves them unanswered.
	 */
	pthread_mutex_lock(&c->wlock);
	if (!direct) {
		bcp_deadline_ms(&dl, (unsigned int)sender_scan_period(c));
		s = slot_get_locked(c, &dl, &err);
	} else if (c->state == BCP_CLIENT_READY &&
		   c->free_slot != BCP_POOL_NONE) {
		s = slot_get_locked(c, NULL, &err);
	}
	pthread_mutex_unlock(&c->wlock);
	if (!s)
		return 0;

	pthread_mutex_lock(&c->qlock);
	k = c->next_queue;
	if (!c->qlen[k])
		k ^= 1;
	c->next_queue = k ^ 1;
	head = c->qhead[k];
	n = 0;
	if (head) {
		n = 1;
		for (io = head; n < c->max_segs && io->next; n++)
			io = io->next;
		c->qhead[k] = io->next;
		if (!c->qhead[k])
			c->qtail[k] = NULL;
		io->next = NULL;
		c->qlen[k] -= n;
	}
	pthread_mutex_unlock(&c->qlock);

	op = k ? BCP_OP_BATCH_PUSH : BCP_OP_BATCH_PULL;
	len = -ENOTCONN;
	inl = 0;
	if (n) {
		for (io = head, n = 0; io; io = io->next, n++) {
			segs[n].fh = io->fh;
			segs[n].offset = io->offset;
			segs[n].length = io->length;
			segs[n].region_id = c->region_id;
			segs[n].region_off = (uint64_t)((uint8_t *)io->buf -
						(uint8_t *)c->pool_base);
		}
		inl = client_inline(c, head);
		bcp_msg_init(&m, op, s->req_id);
		m.u.batch_req.count = n;
		m.u.batch_req.flags = inl ? BCP_BATCH_INLINE : 0;
		m.segs = segs;
		if (inl && op == BCP_OP_BATCH_PUSH) {
			/* the bytes follow, each I/O's in turn */
			m.data = head->buf;
			m.data_len = (uint32_t)inl;
			len = bcp_encode_head(buf, BCP_FRAME_MAX, &m);
			for (io = head; len >= 0 && io; io = io->next) {
				memcpy(buf + len, io->buf, io->length);
				len += (int)io->length;
			}
		} else {
			len = bcp_encode(buf, BCP_FRAME_MAX, &m);
		}
	}

	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	if (len >= 0 && n && client_paused(c) && !c->expired) {
		/* lost meanwhile: the I/Os wait for the next connection */
		queue_requeue_locked(c, head);
		slot_put_locked(c, s);
		pthread_mutex_unlock(&c->wlock);
		pthread_mutex_unlock(&c->qlock);
		return 1;
	}
	pthread_mutex_unlock(&c->qlock);
	if (len < 0 || c->state != BCP_CLIENT_READY) {
		err = len < 0 ? len : client_paused(c) ? -EIO : -ENOTCONN;
		slot_put_locked(c, s);
		pthread_mutex_unlock(&c->wlock);
		io_list_complete(head, err);
		return 1;
	}
	s->kind = BCP_WSLOT_BATCH;
	s->op = op;
	s->head = head;
	s->count = n;
	s->inl = inl > 0;
	pthread_mutex_unlock(&c->wlock);

	__atomic_fetch_add(&c->stats.batches, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->stats.segments, n, __ATOMIC_RELAXED);
	if (inl)
		__atomic_fetch_add(&c->stats.batches_inline, 1,
				   __ATOMIC_RELAXED);
	send_frame(c, buf, (size_t)len, s->epoch);
	return 1;
}

static void sender_batch(struct bcp_client *c)
{
	client_batch(c, 0, c->segs, c->bbuf);
}

/*
 * Fail what the agent left unanswered past the timeout.  A batch breaks
 * the session: the agent may still write into its pool memory, which
 * cannot be handed to anyone else.  An asynchronous call completes with
 * -ETIMEDOUT and leaves its slot ABANDONED, as a timed-out synchronous
 * call does.  No lock held.
 */
static void sender_scan(struct bcp_client *c)
{
	uint64_t now = client_now_ms(), limit;
	struct bcp_call *calls = NULL, *call;
	struct bcp_wslot *s;
	uint16_t late_op = 0;
	uint64_t epoch, age;
	char msg[512];
	int ping = 0, is_ping, stuck;
	uint32_t i, nslots;

	if (c->opts.timeout_ms <= 0 || now < c->next_scan_ms)
		return;
	limit = (uint64_t)c->opts.timeout_ms;
	c->next_scan_ms = now + sender_scan_period(c);
	pthread_mutex_lock(&c->wlock);
	if (c->state != BCP_CLIENT_READY) {
		/* no per-request timeout runs while the connection is away */
		pthread_mutex_unlock(&c->wlock);
		return;
	}
	epoch = c->epoch;
	/*
	 * Read the clock under the lock: a slot taken while this thread
	 * waited for it is newer than a clock read before, and now minus
	 * its start would wrap around to an age of centuries.
	 */
	now = client_now_ms();
	for (i = 0; i < c->nslots && c->nbusy; i++) {
		s = &c->slots[i];
		if (s->start_ms >= now)
			continue;
		age = now - s->start_ms;
		is_ping = s->kind == BCP_WSLOT_ACALL &&
			  s->call == &c->ping_call;
		if (age >= limit / 2 && s->kind >= BCP_WSLOT_CALL &&
		    s->kind <= BCP_WSLOT_BATCH && !is_ping)
			ping = 1;
		if (age < limit)
			continue;
		if (s->kind == BCP_WSLOT_BATCH) {
			late_op = s->op;
		} else if (s->kind == BCP_WSLOT_ACALL && !is_ping &&
			   client_busy_wait_ok(c, s->start_ms, now)) {
			continue;
		} else if (s->kind == BCP_WSLOT_ACALL) {
			s->call->next = calls;
			calls = s->call;
			s->call = NULL;
			s->kind = BCP_WSLOT_ABANDONED;
		}
	}
	/*
	 * Every request the agent takes at once left unanswered past its
	 * timeout: nothing more can be sent, and the slots come back only
	 * with the agent's answers or with the connection.  Give it up, as
	 * for a late batch: the callers waiting for a slot (and the I/Os
	 * queued) then wait for the agent as across a restart, and fail
	 * after reconnect_timeout, instead of for as long as it stays mute.
	 */
	nslots = c->nslots;
	stuck = nslots > 0 && c->free_slot == BCP_POOL_NONE;
	for (i = 0; i < nslots && stuck; i++)
		stuck = c->slots[i].kind == BCP_WSLOT_ABANDONED;
	pthread_mutex_unlock(&c->wlock);
	while ((call = calls)) {
		calls = call->next;
		call->done(call, -ETIMEDOUT);
	}
	if (ping && c->opts.busy_timeout_ms > c->opts.timeout_ms)
		client_ping(c);
	if (late_op) {
		snprintf(msg, sizeof(msg),
			 "agent at %s did not complete a %s within %d ms: connection given up",
			 c->addr_str, bcp_op_name(late_op),
			 c->opts.timeout_ms);
		client_lost_epoch(c, msg, epoch);
	} else if (stuck) {
		snprintf(msg, sizeof(msg),
			 "agent at %s left all %u requests it takes at once unanswered for %d ms: connection given up",
			 c->addr_str, nslots, c->opts.timeout_ms);
		client_lost_epoch(c, msg, epoch);
	}
}

static void *sender_main(void *arg)
{
	struct bcp_client *c = arg;
	struct timespec ts;
	uint64_t epoch;
	uint32_t n, k, busy;
	int idle = 0, r;
	long ns;

	client_worker_of = c;
	pthread_mutex_lock(&c->qlock);
	while (c->state != BCP_CLIENT_BROKEN &&
	       c->state != BCP_CLIENT_CLOSING) {
		if (c->state != BCP_CLIENT_READY) {
			/* paused: nothing goes out until it is back */
			c->sender_sleeping = 1;
			pthread_cond_wait(&c->qcond, &c->qlock);
			c->sender_sleeping = 0;
			continue;
		}
		/* epoch does not change while qlock is held */
		epoch = c->epoch;
		if (c->nposts) {
			k = c->post_head;
			n = c->post_len[k];
			memcpy(c->bbuf, c->posts +
			       (size_t)k * BCP_CLIENT_POST_LEN, n);
			c->post_head = (k + 1) % BCP_CLIENT_POSTQ;
			c->nposts--;
			pthread_mutex_unlock(&c->qlock);
			send_frame(c, c->bbuf, n, epoch);
			pthread_mutex_lock(&c->qlock);
			continue;
		}
		if (c->nforgets >= BCP_FORGETS_MAX ||
		    (c->nforgets && idle && !c->qlen[0] && !c->qlen[1])) {
			n = c->nforgets < BCP_FORGETS_MAX ? c->nforgets :
			    BCP_FORGETS_MAX;
			memcpy(c->fbuf, c->forgets, n * sizeof(*c->fbuf));
			c->nforgets -= n;
			memmove(c->forgets, c->forgets + n,
				c->nforgets * sizeof(*c->forgets));
			idle = 0;
			pthread_cond_broadcast(&c->fcond);
			pthread_mutex_unlock(&c->qlock);
			sender_forget(c, n, epoch);
			pthread_mutex_lock(&c->qlock);
			continue;
		}
		if (c->qlen[0] || c->qlen[1]) {
			idle = 0;
			pthread_mutex_unlock(&c->qlock);
			sender_batch(c);
			sender_scan(c);
			pthread_mutex_lock(&c->qlock);
			continue;
		}
		/*
		 * With a timeout, wake at least every scan period: a
		 * request sent from another thread (client_send_direct,
		 * bcp_client_call) does not wake the sender.
		 */
		pthread_mutex_lock(&c->wlock);
		busy = c->nbusy;
		pthread_mutex_unlock(&c->wlock);
		c->sender_sleeping = 1;
		if (c->nforgets || c->opts.timeout_ms > 0) {
			/* Let more FORGETs gather before the flush. */
			ns = c->nforgets ? BCP_CLIENT_FORGET_IDLE_NS :
			     (long)sender_scan_period(c) * 1000000L;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += ns / 1000000000L;
			ts.tv_nsec += ns % 1000000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			r = pthread_cond_timedwait(&c->qcond, &c->qlock, &ts);
			if (r == ETIMEDOUT && c->nforgets)
				idle = 1;
		} else {
			pthread_cond_wait(&c->qcond, &c->qlock);
		}
		c->sender_sleeping = 0;
		if (busy || c->opts.timeout_ms > 0) {
			pthread_mutex_unlock(&c->qlock);
			sender_scan(c);
			pthread_mutex_lock(&c->qlock);
		}
	}
	pthread_mutex_unlock(&c->qlock);
	return NULL;
}

/* ---- public API ------------------------------------------------------ */

static void client_free(struct bcp_client *c)
{
	uint32_t i;

	bcp_pool_fini(&c->pool);
	bcp_client_xfer_teardown(c);
	if (c->ctl >= 0)
		close(c->ctl);
	for (i = 0; i < c->nslots; i++) {
		pthread_cond_destroy(&c->slots[i].cond);
		free(c->slots[i].keep_big);
	}
	free(c->slots);
	free(c->keeps);
	free(c->dbuf);
	free(c->fbuf);
	free(c->segs);
	free(c->dsegs);
	free(c->dbuf_batch);
	free(c->forgets);
	free(c->posts);
	free(c->bbuf);
	bcp_frame_reader_fini(&c->rd);
	client_spin_fini(&c->rspin);
	free(c->sbuf);
	free(c->secret);
	pthread_mutex_destroy(&c->send_lock);
	pthread_cond_destroy(&c->slot_cond);
	pthread_cond_destroy(&c->fcond);
	pthread_cond_destroy(&c->rcond);
	pthread_mutex_destroy(&c->wlock);
	pthread_cond_destroy(&c->qcond);
	pthread_mutex_destroy(&c->qlock);
	free(c);
}

static struct bcp_client *client_alloc(void)
{
	pthread_condattr_t ca;
	struct bcp_client *c;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ctl = -1;
	c->data = -1;
	c->memfd = -1;
	c->rspin.loadavg_fd = -1;
	c->free_slot = BCP_POOL_NONE;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&c->qlock, NULL);
	pthread_cond_init(&c->qcond, &ca);
	pthread_mutex_init(&c->wlock, NULL);
	pthread_cond_init(&c->slot_cond, &ca);
	pthread_cond_init(&c->fcond, &ca);
	pthread_cond_init(&c->rcond, &ca);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_condattr_destroy(&ca);
	return c;
}

static int client_alloc_buffers(struct bcp_client *c)
{
	pthread_condattr_t ca;
	uint32_t i;

	c->sbuf = malloc(BCP_FRAME_MAX);
	if (bcp_frame_reader_init(&c->rd, BCP_FRAME_MAX) < 0)
		return -ENOMEM;
	c->bbuf = malloc(BCP_FRAME_MAX);
	c->segs = calloc(BCP_SEGS_MAX, sizeof(*c->segs));
	c->dbuf_batch = malloc(BCP_FRAME_MAX);
	c->dsegs = calloc(BCP_SEGS_MAX, sizeof(*c->dsegs));
	c->forgets = calloc(BCP_CLIENT_FORGETQ, sizeof(*c->forgets));
	c->posts = malloc((size_t)BCP_CLIENT_POSTQ * BCP_CLIENT_POST_LEN);
	c->fbuf = calloc(BCP_FORGETS_MAX, sizeof(*c->fbuf));
	c->nslots = c->hello.max_inflight;
	if (c->nslots > BCP_CLIENT_SLOTS_MAX)
		c->nslots = BCP_CLIENT_SLOTS_MAX;
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	if (!c->sbuf || !c->bbuf || !c->segs || !c->dbuf_batch ||
	    !c->dsegs || !c->forgets || !c->posts || !c->fbuf ||
	    !c->slots) {
		c->nslots = 0;
		return -ENOMEM;
	}
	if (c->opts.reconnect_timeout_ms > 0) {
		c->keeps = malloc((size_t)c->nslots * BCP_CLIENT_KEEP_LEN);
		if (!c->keeps)
			return -ENOMEM;
		for (i = 0; i < c->nslots; i++)
			c->slots[i].keep = c->keeps +
					   (size_t)i * BCP_CLIENT_KEEP_LEN;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	for (i = c->nslots; i-- > 0;) {
		pthread_cond_init(&c->slots[i].cond, &ca);
		c->slots[i].next_free = c->free_slot;
		c->free_slot = i;
	}
	pthread_condattr_destroy(&ca);
	return 0;
}

/* Checks that need no agent; then the features to ask for. */
static int client_want(struct bcp_client *c, uint64_t *want, char *err,
		       size_t errlen)
{
	int is_unix = c->addr.family == AF_UNIX;

	*want = BCP_FEAT_READDIRPLUS | BCP_FEAT_COPY_RANGE |
		BCP_FEAT_SETATTR_CTIME | BCP_FEAT_CREATED |
		BCP_FEAT_BATCH_INLINE;
	if (c->opts.reconnect_timeout_ms > 0)
		*want |= BCP_FEAT_RESUME;
	if (c->opts.notify)
		*want |= BCP_FEAT_NOTIFY;
	if (c->opts.busy_timeout_ms > c->opts.timeout_ms)
		*want |= BCP_FEAT_BUSY;
	*want |= c->opts.reply_features & BCP_FEAT_XATTR_HINT;
	switch (c->opts.transport) {
	case BCP_XFER_AUTO:
		*want |= BCP_FEAT_TCP_DATA | (is_unix ? BCP_FEAT_SHM : 0);
		/* rdma when both sides have a device */
		if (!is_unix && bcp_client_rdma_available())
			*want |= BCP_FEAT_RDMA;
		return 0;
	case BCP_XFER_SHM:
		if (!is_unix) {
			snprintf(err, errlen,
				 "transport shm needs a unix: agent address, not %s (use transport=tcp or auto)",
				 c->addr_str);
			return -EOPNOTSUPP;
		}
		*want |= BCP_FEAT_SHM;
		return 0;
	case BCP_XFER_TCP:
		*want |= BCP_FEAT_TCP_DATA;
		return 0;
	case BCP_XFER_RDMA:
		if (!bcp_client_rdma_available()) {
			snprintf(err, errlen,
				 "transport rdma: %s (use tcp)",
				 BCP_CLIENT_HAVE_RDMA ?
				 "this host has no RDMA device" :
				 "not built into this client");
			return -EOPNOTSUPP;
		}
		*want |= BCP_FEAT_RDMA;
		return 0;
	}
	snprintf(err, errlen, "unknown transport %d", (int)c->opts.transport);
	return -EINVAL;
}

static int client_choose(struct bcp_client *c, enum bcp_transport *t,
			 char *err, size_t errlen)
{
	uint64_t f = c->hello.features;

	switch (c->opts.transport) {
	case BCP_XFER_AUTO:
		if (f & BCP_FEAT_SHM) {
			*t = BCP_XFER_SHM;
			return 0;
		}
		if (f & BCP_FEAT_RDMA) {
			*t = BCP_XFER_RDMA;
			return 0;
		}
		if (f & BCP_FEAT_TCP_DATA) {
			*t = BCP_XFER_TCP;
			return 0;
		}
		break;
	case BCP_XFER_RDMA:
		if (f & BCP_FEAT_RDMA) {
			*t = BCP_XFER_RDMA;
			return 0;
		}
		break;
	case BCP_XFER_SHM:
		if (f & BCP_FEAT_SHM) {
			*t = BCP_XFER_SHM;
			return 0;
		}
		break;
	case BCP_XFER_TCP:
		if (f & BCP_FEAT_TCP_DATA) {
			*t = BCP_XFER_TCP;
			return 0;
		}
		break;
	default:
		break;
	}
	snprintf(err, errlen, "agent at %s does not offer transport %s",
		 c->addr_str, bcp_transport_name(c->opts.transport));
	return -EOPNOTSUPP;
}

int bcp_client_thread_start(struct bcp_client *c, pthread_t *th, int *have,
			    void *(*fn)(void *), const char *name)
{
	int ret;

	ret = pthread_create(th, NULL, fn, c);
	if (ret)
		return -ret;
	*have = 1;
	pthread_setname_np(*th, name);
	return 0;
}

/* ---- reconnect ------------------------------------------------------- */

#define BCP_CLIENT_BACKOFF_MIN_MS	50
#define BCP_CLIENT_BACKOFF_MAX_MS	200

/*
 * Join the threads of the lost connection and close it (the pool stays).
 * The epoch moves on under all three locks: a frame meant for the old
 * connection is never sent on the next one.  Reconnect thread only.
 */
static void reconn_drop(struct bcp_client *c)
{
	if (c->ctl >= 0)
		shutdown(c->ctl, SHUT_RDWR);
	if (c->data >= 0)
		shutdown(c->data, SHUT_RDWR);
	if (c->have_receiver) {
		pthread_join(c->receiver, NULL);
		c->have_receiver = 0;
	}
	if (c->have_data_thread) {
		pthread_join(c->data_thread, NULL);
		c->have_data_thread = 0;
	}
	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	pthread_mutex_lock(&c->send_lock);
	c->epoch++;
	if (c->ctl >= 0) {
		close(c->ctl);
		c->ctl = -1;
	}
	pthread_mutex_unlock(&c->send_lock);
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);
	bcp_client_xfer_disconnect(c);
	c->rd.start = 0;
	c->rd.end = 0;
}

/* Set the state under both locks; 1 when it changed. */
static int reconn_state(struct bcp_client *c, enum bcp_client_state to)
{
	int ok;

	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	ok = client_state_set(c, to);
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);
	return ok;
}

/*
 * Send again, flagged BCP_HF_REPLAY with their req_ids, the requests the
 * lost connections left unanswered.  The state is RESUMING: no caller
 * takes a slot, so a slot marked resend is not reused before its frame is
 * out.  0, or -ENOTCONN when this connection was lost too.
 */
static int reconn_replay(struct bcp_client *c, uint64_t epoch)
{
	struct bcp_wslot *s;
	struct bcp_hdr h;
	enum bcp_err why;
	uint32_t i, n = 0;
	int ret;

	for (i = 0; i < c->nslots; i++) {
		pthread_mutex_lock(&c->wlock);
		s = &c->slots[i];
		if (c->state != BCP_CLIENT_RESUMING) {
			pthread_mutex_unlock(&c->wlock);
			return -ENOTCONN;
		}
		if (!s->resend || !s->frame_len) {
			pthread_mutex_unlock(&c->wlock);
			continue;
		}
		s->resend = 0;
		s->start_ms = client_now_ms();
		pthread_mutex_unlock(&c->wlock);
		if (bcp_hdr_check(s->frame, BCP_FRAME_MAX, &h, &why) == 0) {
			h.flags |= BCP_HF_REPLAY;
			bcp_enc_hdr(s->frame, &h);
		}
		n++;
		ret = send_frame(c, s->frame, s->frame_len, epoch);
		if (ret < 0)
			return -ENOTCONN;
	}
	if (n)
		bcp_client_logf(LOG_DEBUG, "agent at %s: %u requests sent again",
				c->addr_str, n);
	return 0;
}

/*
 * One attempt: connect, HELLO, AUTH, the transport, resume, replay.  0
 * when the session is READY again, or -errno with err set.
 */
static int reconn_once(struct bcp_client *c, uint64_t want, char *err,
		       size_t errlen)
{
	enum bcp_transport t;
	uint64_t epoch, root = c->root;
	uint32_t i;
	int fd, ret, one = 1;

	fd = bcp_addr_connect(&c->addr, c->opts.timeout_ms);
	if (fd < 0) {
		snprintf(err, errlen, "cannot reach agent at %s: %s",
			 c->addr_str, strerror(-fd));
		return fd;
	}
	if (c->addr.family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pthread_mutex_lock(&c->send_lock);
	c->ctl = fd;
	epoch = c->epoch;
	pthread_mutex_unlock(&c->send_lock);

	ret = client_hello(c, want, err, errlen);
	if (!ret)
		ret = client_auth(c, err, errlen);
	if (!ret)
		ret = client_choose(c, &t, err, errlen);
	if (!ret && t != c->transport) {
		snprintf(err, errlen,
			 "agent at %s no longer offers transport %s",
			 c->addr_str, bcp_transport_name(c->transport));
		ret = -EOPNOTSUPP;
	}
	if (ret < 0)
		return ret;
	if (c->root != root) {
		bcp_client_logf(LOG_WARNING,
				"agent at %s has root handle %llu, was %llu",
				c->addr_str, (unsigned long long)c->root,
				(unsigned long long)root);
		c->root = root;
	}
	if (c->hello.max_inflight < c->nslots)
		bcp_client_logf(LOG_WARNING,
				"agent at %s now takes %u requests in flight, fewer than %u",
				c->addr_str, c->hello.max_inflight, c->nslots);
	ret = bcp_client_xfer_reconnect(c, err, errlen);
	if (ret < 0)
		return ret;
	if (!reconn_state(c, BCP_CLIENT_RESUMING)) {
		snprintf(err, errlen, "closing");
		return -ECANCELED;
	}
	c->resumed_noted = 0;
	if (c->opts.resume) {
		client_resumer_of = c;
		ret = c->opts.resume(c, c->opts.resume_arg);
		client_resumer_of = NULL;
		if (ret < 0) {
			snprintf(err, errlen, "resuming on agent at %s: %s",
				 c->addr_str, strerror(-ret));
			client_pause(c, err, epoch);
			return ret;
		}
	}
	ret = bcp_client_thread_start(c, &c->receiver, &c->have_receiver,
				      receiver_main, "bcp-recv");
	if (!ret)
		ret = bcp_client_xfer_start(c);
	if (ret < 0) {
		snprintf(err, errlen, "cannot start client threads: %s",
			 strerror(-ret));
		client_pause(c, err, epoch);
		return ret;
	}
	ret = reconn_replay(c, epoch);
	if (ret < 0) {
		snprintf(err, errlen, "connection to agent at %s lost again",
			 c->addr_str);
		return ret;
	}
	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	ret = client_state_set(c, BCP_CLIENT_READY) ? 0 : -ENOTCONN;
	if (!ret) {
		c->expired = 0;
		/* calls waiting out the pause start their timeout again */
		for (i = 0; i < c->nslots; i++)
			if (c->slots[i].kind == BCP_WSLOT_CALL)
				pthread_cond_signal(&c->slots[i].cond);
		pthread_cond_broadcast(&c->slot_cond);
		pthread_cond_broadcast(&c->qcond);
		c->sender_sleeping = 0;
	}
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);
	if (ret < 0)
		snprintf(err, errlen, "connection to agent at %s lost again",
			 c->addr_str);
	return ret;
}

/* The line that ends an outage of ms milliseconds. */
static void reconn_log_restored(struct bcp_client *c, uint64_t ms)
{
	char what[128] = "";

	if (c->resumed_noted)
		snprintf(what, sizeof(what),
			 " (%llu handles and %llu open files resumed)",
			 (unsigned long long)c->resumed_handles,
			 (unsigned long long)c->resumed_files);
	bcp_client_logf(LOG_WARNING,
			"agent connection restored after %llu.%03llu s%s",
			(unsigned long long)(ms / 1000),
			(unsigned long long)(ms % 1000), what);
}

static void *reconn_main(void *arg)
{
	struct bcp_client *c = arg;
	uint64_t want, now, next, end, start;
	struct timespec ts;
	int delay, ret, last_err = 0;
	char err[512];

	if (client_want(c, &want, err, sizeof(err)) < 0)
		return NULL;
	pthread_mutex_lock(&c->wlock);
	for (;;) {
		while (c->state == BCP_CLIENT_READY ||
		       c->state == BCP_CLIENT_CONNECTING)
			pthread_cond_wait(&c->rcond, &c->wlock);
		if (c->state != BCP_CLIENT_PAUSED)
			break;
		start = c->pause_start_ms;
		pthread_mutex_unlock(&c->wlock);

		delay = BCP_CLIENT_BACKOFF_MIN_MS;
		for (;;) {
			reconn_drop(c);
			ret = reconn_once(c, want, err, sizeof(err));
			if (ret == 0)
				break;
			if (ret == -ECANCELED)
				break;
			/* a refusal is said once an outage, the rest is noise */
			if ((ret == -EACCES || ret == -EPROTONOSUPPORT ||
			     ret == -EOPNOTSUPP) && ret != last_err)
				bcp_client_logf(LOG_WARNING,
						"agent still down: %s", err);
			else
				bcp_client_logf(LOG_DEBUG,
						"agent still down: %s", err);
			last_err = ret;
			now = client_now_ms();
			next = now + (uint64_t)delay;
			end = start + (uint64_t)c->opts.reconnect_timeout_ms;
			pthread_mutex_lock(&c->wlock);
			if (!c->expired && end < next)
				next = end > now ? end : now;
			if (c->state == BCP_CLIENT_PAUSED) {
				ts.tv_sec = (time_t)(next / 1000);
				ts.tv_nsec = (long)(next % 1000) * 1000000L;
				pthread_cond_timedwait(&c->rcond, &c->wlock,
						       &ts);
			}
			if (c->state != BCP_CLIENT_PAUSED) {
				pthread_mutex_unlock(&c->wlock);
				break;
			}
			pthread_mutex_unlock(&c->wlock);
			if (client_now_ms() >= end)
				client_expire(c);
			if (client_now_ms() >= next) {
				delay *= 2;
				if (delay > BCP_CLIENT_BACKOFF_MAX_MS)
					delay = BCP_CLIENT_BACKOFF_MAX_MS;
			}
		}
		if (ret == 0) {
			last_err = 0;
			reconn_log_restored(c, client_now_ms() - start);
			client_notify_reset(c);
		}
		pthread_mutex_lock(&c->wlock);
	}
	pthread_mutex_unlock(&c->wlock);
	return NULL;
}

void bcp_client_resumed(struct bcp_client *c, uint64_t handles,
			uint64_t files)
{
	c->resumed_handles = handles;
	c->resumed_files = files;
	c->resumed_noted = 1;
}

const uint8_t *bcp_client_id(const struct bcp_client *c)
{
	return c->client_id;
}

/*
 * The reconnect thread starts last: the connection may be lost at once,
 * and reconn_drop() must find every thread of it started, to join it.
 * A thread of the first connection started after the reconnect began
 * would read the new connection's frames (the answer to its DATA_ATTACH).
 */
static int client_start_threads(struct bcp_client *c)
{
	int ret;

	ret = bcp_client_thread_start(c, &c->receiver, &c->have_receiver,
				      receiver_main, "bcp-recv");
	if (!ret)
		ret = bcp_client_thread_start(c, &c->sender, &c->have_sender,
					      sender_main, "bcp-send");
	if (!ret)
		ret = bcp_client_xfer_start(c);
	if (!ret && c->opts.reconnect_timeout_ms > 0)
		ret = bcp_client_thread_start(c, &c->reconn, &c->have_reconn,
					      reconn_main, "bcp-reconn");
	return ret;
}

static int client_connect_once(const struct bcp_client_opts *o,
			       struct bcp_client **out, char *err,
			       size_t errlen)
{
	enum bcp_transport t;
	struct bcp_client *c;
	char dummy[1];
	uint64_t want;
	uint32_t frame_segs;
	int ret, one = 1;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!o || !o->addr || !out) {
		snprintf(err, errlen, "no agent address");
		return -EINVAL;
	}
	if (strlen(o->addr) >= sizeof(c->addr_str)) {
		snprintf(err, errlen, "agent address too long");
		return -EINVAL;
	}
	c = client_alloc();
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->opts = *o;
	strcpy(c->addr_str, o->addr);
	c->opts.addr = c->addr_str;
	c->opts.secret = NULL;
	client_spin_init(&c->rspin, c->opts.spin_usec);
	if (!c->opts.pool_size)
		c->opts.pool_size = BCP_CLIENT_POOL_DEFAULT;
	if (!c->opts.max_batch)
		c->opts.max_batch = BCP_CLIENT_BATCH_DEFAULT;
	if (c->opts.max_batch > BCP_SEGS_MAX)
		c->opts.max_batch = BCP_SEGS_MAX;
	if (!c->opts.timeout_ms)
		c->opts.timeout_ms = BCP_CLIENT_TIMEOUT_DEFAULT;
	c->pool_len = c->opts.pool_size & ~((size_t)BCP_POOL_PAGE - 1);
	if (!c->pool_len) {
		snprintf(err, errlen, "pool size %zu is below %u bytes",
			 c->opts.pool_size, BCP_POOL_PAGE);
		ret = -EINVAL;
		goto out_free;
	}

	ret = bcp_addr_parse(o->addr, &c->addr, err, errlen);
	if (ret < 0)
		goto out_free;
	if (o->secret && o->secret_len) {
		c->secret = malloc(o->secret_len);
		if (!c->secret) {
			snprintf(err, errlen, "out of memory");
			ret = -ENOMEM;
			goto out_free;
		}
		memcpy(c->secret, o->secret, o->secret_len);
		c->secret_len = o->secret_len;
	}
	ret = client_want(c, &want, err, errlen);
	if (ret < 0)
		goto out_free;
	ret = bcp_random(c->client_id, sizeof(c->client_id));
	if (ret < 0) {
		snprintf(err, errlen, "cannot draw a client id: %s",
			 strerror(-ret));
		goto out_free;
	}

	c->ctl = bcp_addr_connect(&c->addr, c->opts.timeout_ms);
	if (c->ctl < 0) {
		ret = c->ctl;
		c->ctl = -1;
		snprintf(err, errlen, "cannot reach agent at %s: %s",
			 c->addr_str, strerror(-ret));
		goto out_free;
	}
	if (c->addr.family != AF_UNIX)
		setsockopt(c->ctl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	ret = client_hello(c, want, err, errlen);
	if (ret < 0)
		goto out_free;
	ret = client_auth(c, err, errlen);
	if (ret < 0)
		goto out_free;
	ret = client_choose(c, &t, err, errlen);
	if (ret < 0)
		goto out_free;
	ret = bcp_client_xfer_setup(c, t, err, errlen);
	if (ret < 0)
		goto out_free;
	ret = bcp_pool_init(&c->pool, c->pool_base, c->pool_len);
	if (ret < 0)
		goto out_nomem;
	ret = client_alloc_buffers(c);
	if (ret < 0)
		goto out_nomem;

	c->max_segs = c->opts.max_batch;
	if (c->max_segs > c->hello.max_segs)
		c->max_segs = c->hello.max_segs;
	frame_segs = ((c->hello.max_frame < BCP_FRAME_MAX ?
		       c->hello.max_frame : BCP_FRAME_MAX) - BCP_HDR_SIZE -
		      (uint32_t)sizeof(struct bcp_w_batch_req)) /
		     (uint32_t)sizeof(struct bcp_w_seg);
	if (c->max_segs > frame_segs)
		c->max_segs = frame_segs;
	if (!c->max_segs)
		c->max_segs = 1;

	pthread_mutex_lock(&c->qlock);
	pthread_mutex_lock(&c->wlock);
	client_state_set(c, BCP_CLIENT_READY);
	pthread_mutex_unlock(&c->wlock);
	pthread_mutex_unlock(&c->qlock);

	ret = client_start_threads(c);
	if (ret < 0) {
		snprintf(err, errlen, "cannot start client threads: %s",
			 strerror(-ret));
		bcp_client_destroy(c);
		return ret;
	}
	*out = c;
	return 0;

out_nomem:
	snprintf(err, errlen, "out of memory for a %zu byte buffer pool",
		 c->pool_len);
out_free:
	client_free(c);
	return ret;
}

/* Handshakes cut short, tried again with reconnect: 50 ms doubling, 3 s. */
#define BCP_CLIENT_CONNECT_TRIES	6

int bcp_client_connect(const struct bcp_client_opts *o,
		       struct bcp_client **out, char *err, size_t errlen)
{
	int ret, i;

	/*
	 * An agent under a flood of half-open handshakes drops the oldest
	 * to make room: with reconnect, a connection closed during the
	 * handshake is worth a few more tries.  Anything else (no agent, a
	 * wrong secret, no common version) is said at once.
	 */
	for (i = 0;; i++) {
		ret = client_connect_once(o, out, err, errlen);
		if (ret != -ECONNRESET || !o || o->reconnect_timeout_ms <= 0 ||
		    i + 1 >= BCP_CLIENT_CONNECT_TRIES)
			return ret;
		bcp_client_logf(LOG_DEBUG, "%s; trying again",
				err ? err : "handshake cut short");
		usleep(50000u << i);
	}
}

void bcp_client_destroy(struct bcp_client *c)
{
	struct bcp_msg req, rep;
	uint8_t buf[256];

	if (!c)
		return;
	/* nothing waits for a resume from here on (client_pause) */
	pthread_mutex_lock(&c->wlock);
	c->closing = 1;
	pthread_mutex_unlock(&c->wlock);
	if (c->state == BCP_CLIENT_READY && c->have_receiver &&
	    c->have_sender) {
		/* Best effort: the agent drops the region with the session. */
		bcp_msg_init(&req, BCP_OP_UNREGISTER_REGION, 0);
		req.u.unregion_req.region_id = c->region_id;
		bcp_client_call(c, &req, &rep, buf, sizeof(buf));
	}
	client_fail_all(c, BCP_CLIENT_CLOSING, NULL);
	bcp_pool_close(&c->pool);
	/* before the others: it may start a receiver and a data thread */
	if (c->have_reconn)
		pthread_join(c->reconn, NULL);
	if (c->ctl >= 0)
		shutdown(c->ctl, SHUT_RDWR);
	if (c->data >= 0)
		shutdown(c->data, SHUT_RDWR);
	if (c->have_receiver)
		pthread_join(c->receiver, NULL);
	if (c->have_sender)
		pthread_join(c->sender, NULL);
	if (c->have_data_thread)
		pthread_join(c->data_thread, NULL);
	/* Anything a thread queued on its way out. */
	client_fail_all(c, BCP_CLIENT_CLOSING, NULL);
	client_free(c);
}

uint64_t bcp_client_root(const struct bcp_client *c)
{
	return c->root;
}

enum bcp_transport bcp_client_transport(const struct bcp_client *c)
{
	return c->transport;
}

const struct bcp_hello_rep *bcp_client_hello(const struct bcp_client *c)
{
	return &c->hello;
}

/*
 * A call from the resume callback: straight on the new connection, which
 * no other thread reads or writes yet.  Its req_ids have generation 0,
 * which no slot's has.  A NOTIFY may come before the reply: what it says
 * is covered by the RESET that follows the resume, and a BUSY (the agent
 * at work on this call, a slow store) lets the call wait past the
 * timeout, up to busy_timeout from its start, as other calls do.
 */
static int client_call_resume(struct bcp_client *c, struct bcp_msg *req,
			      struct bcp_msg *rep, void *rbuf, size_t rcap)
{
	uint64_t start = client_now_ms(), now;
	enum bcp_err why = BCP_E_OK;
	int n, ret;

	req->hdr.req_id = ++c->resume_seq & 0xffffffffu;
	__atomic_fetch_add(&c->stats.calls, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->send_lock);
	n = bcp_encode(c->sbuf, BCP_FRAME_MAX, req);
	ret = n < 0 ? n : bcp_frame_send(c->ctl, c->sbuf, (size_t)n, -1);
	pthread_mutex_unlock(&c->send_lock);
	if (n < 0)
		return n;
	if (ret < 0)
		return -ENOTCONN;
	for (;;) {
		n = bcp_frame_recv(c->ctl, rbuf, rcap, NULL,
				   c->opts.timeout_ms, &why);
		if (n == -EMSGSIZE)
			return -EMSGSIZE;
		if (n <= 0)
			return n == -ETIMEDOUT ? n : -ENOTCONN;
		if (bcp_decode(rbuf, (size_t)n, rep, &why) < 0)
			goto bad;
		if ((rep->hdr.flags & BCP_HF_REPLY) ||
		    rep->hdr.opcode != BCP_OP_NOTIFY)
			break;
		now = client_now_ms();
		if (rep->u.notify_req.kind == BCP_NOTIFY_BUSY &&
		    (c->hello.features & BCP_FEAT_BUSY))
			client_heard(c, now);
		/* past the timeout only while the agent says it is busy */
		if (c->opts.timeout_ms > 0 &&
		    now - start >= (uint64_t)c->opts.timeout_ms &&
		    !client_busy_wait_ok(c, start, now))
			return -ETIMEDOUT;
	}
	if (!(rep->hdr.flags & BCP_HF_REPLY) ||
	    rep->hdr.opcode != req->hdr.opcode ||
	    rep->hdr.req_id != req->hdr.req_id) {
bad:
		bcp_client_logf(LOG_WARNING,
				"bad reply from agent at %s to %s while resuming",
				c->addr_str, bcp_op_name(req->hdr.opcode));
		return -EIO;
	}
	return rep->hdr.status;
}

int bcp_client_call(struct bcp_client *c, struct bcp_msg *req,
		    struct bcp_msg *rep, void *rbuf, size_t rcap)
{
	struct timespec deadline, *dl = NULL;
	struct bcp_wslot *s;
	int ret, len, paused = 0;

	if (client_resumer_of == c)
		return client_call_resume(c, req, rep, rbuf, rcap);
	if (c->opts.timeout_ms > 0) {
		bcp_deadline_ms(&deadline, (unsigned int)c->opts.timeout_ms);
		dl = &deadline;
	}
	__atomic_fetch_add(&c->stats.calls, 1, __ATOMIC_RELAXED);

	pthread_mutex_lock(&c->wlock);
	s = slot_get_locked(c, dl, &ret);
	if (!s) {
		pthread_mutex_unlock(&c->wlock);
		return ret;
	}
	s->kind = BCP_WSLOT_CALL;
	slot_note_req(s, req);
	s->rep = rep;
	s->rbuf = rbuf;
	s->rcap = rcap;
	s->result = 0;
	req->hdr.req_id = s->req_id;
	len = c->keeps ? slot_keep_locked(s, req) : 0;
	pthread_mutex_unlock(&c->wlock);

	/* a lost connection wakes this call too, with -ENOTCONN */
	if (len == 0)
		len = send_slot(c, s, req, s->epoch);

	pthread_mutex_lock(&c->wlock);
	if (len < 0) {
		ret = len;
	} else {
		while (!s->done) {
			if (client_paused(c)) {
				if (c->closing)
					break;
				/* no timeout runs while the agent is away */
				pthread_cond_wait(&s->cond, &c->wlock);
				paused = 1;
				continue;
			}
			if (paused && dl)
				bcp_deadline_ms(&deadline,
						(unsigned int)c->opts.timeout_ms);
			paused = 0;
			if (!dl) {
				pthread_cond_wait(&s->cond, &c->wlock);
			} else if (pthread_cond_timedwait(&s->cond, &c->wlock,
							  dl) == ETIMEDOUT &&
				   !s->done && !client_paused(c)) {
				if (!client_busy_wait_ok(c, s->start_ms,
							 client_now_ms()))
					break;
				/* the agent is there: look again later */
				bcp_deadline_ms(&deadline, (unsigned int)
						sender_scan_period(c));
			}
		}
		ret = s->done ? s->result : -ETIMEDOUT;
	}
	if (len >= 0 && !s->done && c->state == BCP_CLIENT_READY) {
		/* the agent still has it: the reply frees the slot */
		s->kind = BCP_WSLOT_ABANDONED;
		s->rep = NULL;
		s->rbuf = NULL;
	} else {
		slot_put_locked(c, s);
	}
	pthread_mutex_unlock(&c->wlock);
	return ret;
}

int bcp_client_call_async(struct bcp_client *c, struct bcp_msg *req,
			  struct bcp_call *call)
{
	__atomic_fetch_add(&c->stats.calls, 1, __ATOMIC_RELAXED);
	return client_call_async(c, req, call, 0);
}

/* nowait: -EAGAIN rather than wait for a slot or a paused connection */
static int client_call_async(struct bcp_client *c, struct bcp_msg *req,
			     struct bcp_call *call, int nowait)
{
	struct bcp_wslot *s;
	uint64_t id, epoch;
	int ret, len;

	pthread_mutex_lock(&c->wlock);
	if (nowait && (c->state != BCP_CLIENT_READY ||
		       c->free_slot == BCP_POOL_NONE)) {
		pthread_mutex_unlock(&c->wlock);
		return -EAGAIN;
	}
	s = slot_get_locked(c, NULL, &ret);
	if (!s) {
		pthread_mutex_unlock(&c->wlock);
		return ret;
	}
	/* armed before the frame leaves: the reply may beat this thread */
	s->kind = BCP_WSLOT_ACALL;
	slot_note_req(s, req);
	s->call = call;
	req->hdr.req_id = id = s->req_id;
	epoch = s->epoch;
	len = c->keeps ? slot_keep_locked(s, req) : 0;
	pthread_mutex_unlock(&c->wlock);

	/* s may be answered and reused as soon as the frame is out */
	if (len == 0)
		len = c->keeps ? send_slot(c, s, req, epoch) :
				 send_msg(c, req, epoch);
	if (len < 0) {
		/* unless a lost connection already failed it, take it back */
		ret = 0;
		pthread_mutex_lock(&c->wlock);
		if (s->req_id == id && s->kind == BCP_WSLOT_ACALL) {
			slot_put_locked(c, s);
			ret = len;
		}
		pthread_mutex_unlock(&c->wlock);
		return ret;
	}
	return 0;
}

/*
 * Queue req, encoded, for the sender (the receiver thread never sends).
 * Called with qlock held.  0, -ENOSPC when the queue is full, or the
 * encoder's -errno.
 */
static int post_queue_locked(struct bcp_client *c, struct bcp_msg *req)
{
	uint32_t i;
	int len;

	if (c->nposts == BCP_CLIENT_POSTQ)
		return -ENOSPC;
	i = (c->post_head + c->nposts) % BCP_CLIENT_POSTQ;
	len = bcp_encode(c->posts + (size_t)i * BCP_CLIENT_POST_LEN,
			 BCP_CLIENT_POST_LEN, req);
	if (len < 0)
		return len;
	c->post_len[i] = (uint16_t)len;
	c->nposts++;
	return 0;
}

/* Wake the sender.  Called with qlock held; 1 when it must be signalled. */
static int sender_wake_locked(struct bcp_client *c)
{
	int wake = c->sender_sleeping;

	c->sender_sleeping = 0;
	return wake;
}

static void client_dropped(struct bcp_client *c, const char *what)
{
	uint64_t n = __atomic_add_fetch(&c->dropped, 1, __ATOMIC_RELAXED);

	/* a power of two: the log stays short however long it lasts */
	if (!(n & (n - 1)))
		bcp_client_logf(LOG_WARNING,
				"agent at %s takes no requests: %s dropped (%llu so far)",
				c->addr_str, what, (unsigned long long)n);
}

int bcp_client_post(struct bcp_client *c, struct bcp_msg *req)
{
	enum bcp_client_state state;
	uint64_t epoch;
	int ret, wake;

	req->hdr.req_id = BCP_REQ_UNTRACKED |
		__atomic_add_fetch(&c->forget_seq, 1, __ATOMIC_RELAXED);
	if (client_on_worker(c)) {
		pthread_mutex_lock(&c->qlock);
		if (c->state != BCP_CLIENT_READY) {
			pthread_mutex_unlock(&c->qlock);
			return -ENOTCONN;
		}
		ret = post_queue_locked(c, req);
		wake = !ret && sender_wake_locked(c);
		pthread_mutex_unlock(&c->qlock);
		if (wake)
			pthread_cond_signal(&c->qcond);
		if (ret == -ENOSPC) {
			client_dropped(c, bcp_op_name(req->hdr.opcode));
			ret = 0;
		}
		return ret;
	}
	pthread_mutex_lock(&c->wlock);
	state = c->state;
	epoch = c->epoch;
	pthread_mutex_unlock(&c->wlock);
	if (state != BCP_CLIENT_READY)
		return -ENOTCONN;
	return send_msg(c, req, epoch);
}

static void client_post_release(struct bcp_client *c, uint16_t op,
				uint64_t handle, uint64_t fh)
{
	struct bcp_msg m;

	bcp_msg_init(&m, op, 0);
	m.u.node_req.handle = handle;
	m.u.node_req.fh = fh;
	bcp_client_post(c, &m);
}

/*
 * FORGETs are only queued: the sender sends them (a caller that sent
 * under qlock would stall the receiver behind a full socket).  Callers
 * other than the receiver wait while a whole FORGET is queued; the
 * receiver has the rest of the queue to itself and never waits.
 */
void bcp_client_forget(struct bcp_client *c, uint64_t handle,
		       uint64_t nlookup)
{
	struct bcp_forget_one *f;
	int wake, receiver = client_on_worker(c);

	if (!nlookup)
		return;
	pthread_mutex_lock(&c->qlock);
	while (!receiver && c->state == BCP_CLIENT_READY &&
	       c->nforgets >= BCP_FORGETS_MAX)
		pthread_cond_wait(&c->fcond, &c->qlock);
	if (c->state != BCP_CLIENT_READY) {
		/* The agent drops every handle with the session. */
		pthread_mutex_unlock(&c->qlock);
		return;
	}
	if (c->nforgets == BCP_CLIENT_FORGETQ) {
		pthread_mutex_unlock(&c->qlock);
		client_dropped(c, "FORGET");
		return;
	}
	f = &c->forgets[c->nforgets++];
	f->handle = handle;
	f->nlookup = nlookup;
	wake = (c->nforgets == 1 || c->nforgets >= BCP_FORGETS_MAX) &&
	       sender_wake_locked(c);
	pthread_mutex_unlock(&c->qlock);
	if (wake)
		pthread_cond_signal(&c->qcond);
}

size_t bcp_client_io_max(const struct bcp_client *c)
{
	return (size_t)BCP_POOL_PAGE << c->pool.max_order;
}

struct bcp_io *bcp_client_io_get(struct bcp_client *c, size_t len)
{
	return bcp_pool_get(&c->pool, len);
}

void bcp_client_io_put(struct bcp_client *c, struct bcp_io *io)
{
	if (io)
		bcp_pool_put(&c->pool, io);
}

/*
 * Send io as a one-segment batch from the calling thread: the sender is
 * asleep and nothing is queued, so there is nothing to coalesce with, and
 * waking the sender would cost two context switches per I/O.  Called with
 * no lock held, and only by the thread that set direct_busy.  Returns 0
 * when io was handed over (its done() will run once), -EAGAIN when no
 * waiter slot is free (the caller queues io instead).
 */
static int client_send_direct(struct bcp_client *c, struct bcp_io *io)
{
	struct bcp_wslot *s;
	struct bcp_seg seg;
	struct bcp_msg m;
	uint64_t epoch;
	int len, err, inl;

	pthread_mutex_lock(&c->wlock);
	if (c->state != BCP_CLIENT_READY || c->free_slot == BCP_POOL_NONE) {
		pthread_mutex_unlock(&c->wlock);
		return -EAGAIN;
	}
	s = slot_get_locked(c, NULL, &err);
	if (!s) {
		pthread_mutex_unlock(&c->wlock);
		return -EAGAIN;
	}
	inl = client_inline(c, io);
	s->kind = BCP_WSLOT_BATCH;
	s->op = io->op;
	s->head = io;
	s->count = 1;
	s->inl = inl > 0;
	epoch = s->epoch;
	pthread_mutex_unlock(&c->wlock);

	seg.fh = io->fh;
	seg.offset = io->offset;
	seg.length = io->length;
	seg.region_id = c->region_id;
	seg.region_off = (uint64_t)((uint8_t *)io->buf -
				    (uint8_t *)c->pool_base);
	bcp_msg_init(&m, io->op, s->req_id);
	m.u.batch_req.count = 1;
	m.u.batch_req.flags = inl ? BCP_BATCH_INLINE : 0;
	m.segs = &seg;
	if (inl && io->op == BCP_OP_BATCH_PUSH) {
		m.data = io->buf;
		m.data_len = io->length;
	}
	__atomic_fetch_add(&c->stats.batches, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->stats.segments, 1, __ATOMIC_RELAXED);
	if (inl)
		__atomic_fetch_add(&c->stats.batches_inline, 1,
				   __ATOMIC_RELAXED);

	/* from here on the receiver may complete io at any time */
	len = send_msg(c, &m, epoch);
	if (len < 0)
		client_lost(c, len, epoch);	/* fails the slot, and io */
	return 0;
}

void bcp_client_submit(struct bcp_client *c, struct bcp_io *io)
{
	uint8_t *buf = io->buf, *base = c->pool_base;
	int k, wake, r;

	if (io->op != BCP_OP_BATCH_PULL && io->op != BCP_OP_BATCH_PUSH) {
		io->done(io, -EINVAL);
		return;
	}
	if (!io->length) {
		io->done(io, 0);
		return;
	}
	if (io->length > BCP_SEG_LEN_MAX || buf < base ||
	    buf > base + c->pool_len ||
	    io->length > (size_t)(base + c->pool_len - buf)) {
		io->done(io, -EFAULT);
		return;
	}
	if (io->offset > (uint64_t)INT64_MAX - io->length) {
		io->done(io, -EFBIG);
		return;
	}
	k = io->op == BCP_OP_BATCH_PUSH;
	io->next = NULL;

	pthread_mutex_lock(&c->qlock);
	if (c->state != BCP_CLIENT_READY &&
	    (!client_paused(c) || c->expired)) {
		r = client_paused(c) ? -EIO : -ENOTCONN;
		pthread_mutex_unlock(&c->qlock);
		io->done(io, r);
		return;
	}
	if (c->state == BCP_CLIENT_READY && c->sender_sleeping &&
	    !c->direct_busy && !c->qlen[0] && !c->qlen[1]) {
		c->direct_busy = 1;
		pthread_mutex_unlock(&c->qlock);
		r = client_send_direct(c, io);
		pthread_mutex_lock(&c->qlock);
		if (!r && c->sender_sleeping && (c->qlen[0] || c->qlen[1])) {
			/*
			 * What others queued meanwhile goes out from here,
			 * coalesced, once: waking the sender for it would
			 * add a hand-off per batch.  The rest, if any, is
			 * the sender's.
			 */
			pthread_mutex_unlock(&c->qlock);
			client_batch(c, 1, c->dsegs, c->dbuf_batch);
			pthread_mutex_lock(&c->qlock);
		}
		c->direct_busy = 0;
		if (!r) {
			/* what is still queued goes to the sender */
			wake = c->sender_sleeping &&
			       (c->qlen[0] || c->qlen[1]);
			if (wake)
				c->sender_sleeping = 0;
			pthread_mutex_unlock(&c->qlock);
			if (wake)
				pthread_cond_signal(&c->qcond);
			return;
		}
		if (c->state != BCP_CLIENT_READY &&
		    (!client_paused(c) || c->expired)) {
			r = client_paused(c) ? -EIO : -ENOTCONN;
			pthread_mutex_unlock(&c->qlock);
			io->done(io, r);
			return;
		}
	}
	if (c->qtail[k])
		c->qtail[k]->next = io;
	else
		c->qhead[k] = io;
	c->qtail[k] = io;
	c->qlen[k]++;
	wake = c->sender_sleeping;
	c->sender_sleeping = 0;
	pthread_mutex_unlock(&c->qlock);
	if (wake)
		pthread_cond_signal(&c->qcond);
}

void bcp_client_stats(const struct bcp_client *c,
		      struct bcp_client_stats *out)
{
	out->calls = __atomic_load_n(&c->stats.calls, __ATOMIC_RELAXED);
	out->batches = __atomic_load_n(&c->stats.batches, __ATOMIC_RELAXED);
	out->segments = __atomic_load_n(&c->stats.segments,
					__ATOMIC_RELAXED);
	out->bytes_pulled = __atomic_load_n(&c->stats.bytes_pulled,
					    __ATOMIC_RELAXED);
	out->bytes_pushed = __atomic_load_n(&c->stats.bytes_pushed,
					    __ATOMIC_RELAXED);
	out->batches_inline = __atomic_load_n(&c->stats.batches_inline,
					      __ATOMIC_RELAXED);
}
