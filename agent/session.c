/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * session.c - one host session on a worker: the control connection's
 * framing (incremental, non-blocking, descriptors received with
 * SCM_RIGHTS), the handshake (HELLO, AUTH, DATA_ATTACH) and the dispatch of
 * every request opcode to the store or the batch engine.
 *
 * States: SESS_AUTH -> SESS_READY -> SESS_CLOSING, through session_set().
 * Backpressure: a frame is read only while the output buffer has room for
 * its reply plus every batch reply that may still come, and a batch is
 * started only while the session has a free batch; otherwise the socket is
 * left unread, so memory stays bounded and max_inflight is enforced.
 * A malformed frame gets an error reply and the connection is closed; a
 * name the store refuses is only an error reply.
 *
 * A store that may block on every call (AGENT_STORE_BLOCKING, cephfs) is
 * never called on the worker: each request that calls it is copied into
 * one of the session's jobs and its store calls run on the blocking pool,
 * while the worker goes on serving its other sessions.  The pool thread
 * sends the reply itself when the stream is between frames
 * (agent_session_pool_send(); out_lock serialises every send); the stats
 * and the job's release stay on the worker (session_mjob_*).  A session
 * has up to SESS_JOBS_BLOCKING such jobs out, answered as they finish.
 * Other stores are called on the worker, as they never wait for long.
 *
 * Notifications (BCP_FEAT_NOTIFY, notify.h): the store publishes the
 * changes a request made before its reply is encoded; the events queued
 * for this session are encoded by agent_session_notify() into the room
 * left beside the reservation for replies, so a notification never delays
 * a reply nor stops the session's requests from being read.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "bcp_auth.h"
#include "resume.h"
#include "worker_i.h"

static void session_set(struct agent_session *s, enum agent_session_state to)
{
	static const int ok[4][4] = {
		[SESS_AUTH] = { [SESS_READY] = 1, [SESS_CLOSING] = 1 },
		[SESS_READY] = { [SESS_CLOSING] = 1 },
		[SESS_CLOSING] = { [SESS_CLOSING] = 1 },
	};

	enum agent_session_state from = s->state;

	if (!ok[from][to])
		agent_err("session %s: bad state change %d -> %d", s->peer,
			  from, to);
	s->state = to;
	if (from == SESS_AUTH && to != SESS_AUTH)
		agent_worker_unauth_done(s);
}

/*
 * The session's identity policy (doc/security.md).  A unix-socket host is
 * known by its peer credentials: root or the agent's own user is trusted
 * with the ids it sends; any other user stores everything as itself.  A
 * network host gets --squash.
 */
static void session_ident(struct agent_session *s)
{
	struct agent_ident *id = &s->ident;
	struct ucred cr;
	socklen_t len = sizeof(cr);

	id->squash = agent_cfg.squash;
	id->anon_uid = agent_cfg.anon_uid;
	id->anon_gid = agent_cfg.anon_gid;
	if (s->is_unix) {
		if (getsockopt(s->fd, SOL_SOCKET, SO_PEERCRED, &cr,
			       &len) < 0) {
			id->squash = AGENT_SQUASH_ALL;
		} else if (cr.uid == 0 || cr.uid == geteuid()) {
			id->squash = AGENT_SQUASH_NONE;
		} else {
			id->squash = AGENT_SQUASH_ALL;
			id->anon_uid = cr.uid;
			id->anon_gid = cr.gid;
		}
	}
	id->allow_devices = agent_cfg.allow_devices &&
			    id->squash == AGENT_SQUASH_NONE;
}

struct agent_session *agent_session_new(struct agent_worker *w, int fd,
					const char *peer, int is_unix)
{
	struct agent_session *s;
	unsigned int i;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->out_lock, NULL);
	s->rbuf = malloc(SESS_RCAP);
	s->wbuf = malloc(SESS_WCAP);
	s->batches = calloc(AGENT_INFLIGHT_MAX, sizeof(*s->batches));
	if (!s->rbuf || !s->wbuf || !s->batches)
		goto out_free;
	s->fd = fd;
	s->is_unix = is_unix;
	session_ident(s);
	s->store = agent_store_new(agent_backend, &w->ring, &s->ident);
	if (!s->store)
		goto out_free;
	/* the backend says whether its sessions' stores may block */
	s->store->flags |= agent_backend->flags & AGENT_STORE_BLOCKING;
	s->jobs_max = agent_store_blocking(s->store) ? SESS_JOBS_BLOCKING :
						       SESS_JOBS_MAX;
	s->jobs = calloc(s->jobs_max, sizeof(*s->jobs));
	if (!s->jobs)
		goto out_store;
	s->xsrv = bcp_xsrv_create(agent_batch_xfer_done, s);
	if (!s->xsrv)
		goto out_store;
	{
		struct bcp_xsrv_limits lim = {
			.max_regions = agent_cfg.max_regions,
			.max_bytes = agent_cfg.max_region_bytes,
			.timeout_ms = agent_cfg.xfer_timeout_ms,
		};

		bcp_xsrv_set_limits(s->xsrv, &lim);
	}
	for (i = 0; i < AGENT_INFLIGHT_MAX; i++) {
		s->batches[i].next = s->batch_pool;
		s->batch_pool = &s->batches[i];
	}
	for (i = 0; i < s->jobs_max; i++) {
		s->jobs[i].s = s;
		s->jobs[i].next = s->job_pool;
		s->job_pool = &s->jobs[i];
	}
	s->w = w;
	s->state = SESS_AUTH;
	s->t_start = agent_now_ns();
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	s->tag.kind = AGENT_TAG_CTL;
	s->tag.ptr = s;
	s->data_tag.kind = AGENT_TAG_DATA;
	s->data_tag.ptr = s;
	s->ev = EPOLLIN;
	struct epoll_event ev = { .events = s->ev, .data.ptr = &s->tag };

	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		goto out_xsrv;
	s->next = w->sessions;
	if (w->sessions)
		w->sessions->pprev = &s->next;
	s->pprev = &w->sessions;
	w->sessions = s;
	w->nsessions++;
	w->stats.sessions++;
	return s;

out_xsrv:
	bcp_xsrv_destroy(s->xsrv);
out_store:
	agent_store_destroy(s->store);
out_free:
	free(s->jobs);
	free(s->batches);
	free(s->wbuf);
	free(s->rbuf);
	free(s);
	return NULL;
}

/* Only when no batch is live: nothing refers to s any more. */
void agent_session_free(struct agent_session *s)
{
	struct agent_worker *w = s->w;
	unsigned int i;

	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	w->nsessions--;
	if (bcp_xsrv_fd(s->xsrv) >= 0)
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, bcp_xsrv_fd(s->xsrv), NULL);
	bcp_xsrv_destroy(s->xsrv);
	if (!s->ev_gone)
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	for (i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	/* the store unregisters every hold: then nothing reaches ns */
	agent_store_destroy(s->store);
	agent_notify_sess_destroy(s->ns);
	agent_dbg("session %s: closed", s->peer);
	for (i = 0; i < s->jobs_max; i++) {
		free(s->jobs[i].call.buf);
		free(s->jobs[i].buf);
		free(s->jobs[i].obuf);
	}
	free(s->jobs);
	for (i = 0; i < AGENT_INFLIGHT_MAX; i++) {
		free(s->batches[i].ibuf);
		free(s->batches[i].obuf);
	}
	free(s->batches);
	free(s->wbuf);
	free(s->rbuf);
	pthread_mutex_destroy(&s->out_lock);
	free(s);
	atomic_fetch_sub(&agent_live_sessions, 1);
}

void agent_session_close(struct agent_session *s, int peer_gone)
{
	if (peer_gone && !s->peer_gone) {
		s->peer_gone = 1;
		s->wlen = s->wpos = 0;
		pthread_mutex_lock(&s->out_lock);
		s->out_dead = 1;
		pthread_mutex_unlock(&s->out_lock);
		/* fails posted transfers: their chunks end, batches finish */
		bcp_xsrv_fail(s->xsrv, -ECONNABORTED);
		agent_batch_schedule(s->w);
	}
	if (s->state != SESS_CLOSING)
		session_set(s, SESS_CLOSING);
}

int agent_session_reply(struct agent_session *s, const struct bcp_msg *m)
{
	int n;

	if (s->peer_gone)
		return -ENOTCONN;
	if (s->wpos && s->wpos == s->wlen)
		s->wpos = s->wlen = 0;
	n = bcp_encode(s->wbuf + s->wlen, SESS_WCAP - s->wlen, m);
	if (n < 0) {
		agent_err("session %s: cannot encode a %s reply: %s", s->peer,
			  bcp_op_name(m->hdr.opcode), strerror(-n));
		agent_session_close(s, 0);
		return n;
	}
	s->wlen += (uint32_t)n;
	return 0;
}

static int session_status(struct agent_session *s, const struct bcp_msg *req,
			  int status)
{
	struct bcp_msg rep;

	bcp_msg_init_reply(&rep, req, status);
	return agent_session_reply(s, &rep);
}

int agent_session_flush(struct agent_session *s)
{
	uint32_t was = s->wlen - s->wpos;
	int err = 0;

	if (s->wpos == s->wlen) {
		s->wpos = s->wlen = 0;
		return 0;
	}
	pthread_mutex_lock(&s->out_lock);
	if (s->out_hold) {
		/* a pool thread's frame is partly out: its rest goes first */
		pthread_mutex_unlock(&s->out_lock);
		return 0;
	}
	while (s->wpos < s->wlen && !s->peer_gone) {
		ssize_t n = send(s->fd, s->wbuf + s->wpos, s->wlen - s->wpos,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				err = -errno;
			break;
		}
		s->wpos += (uint32_t)n;
	}
	s->out_part = s->wpos < s->wlen;
	pthread_mutex_unlock(&s->out_lock);
	if (err) {
		agent_warn("session %s: send failed: %s", s->peer,
			   strerror(-err));
		agent_session_close(s, 1);
		return err;
	}
	if (s->wpos == s->wlen) {
		s->wpos = s->wlen = 0;
	} else if (s->wpos > SESS_WCAP / 2) {
		memmove(s->wbuf, s->wbuf + s->wpos, s->wlen - s->wpos);
		s->wlen -= s->wpos;
		s->wpos = 0;
	}
	/*
	 * Room was made: frames left buffered because replies filled the
	 * output must be served now, not when the host happens to send
	 * more (it may be waiting for exactly those replies).
	 */
	if (s->wlen - s->wpos < was && s->rlen >= BCP_HDR_SIZE)
		agent_session_parse(s);
	return 0;
}

/*
 * The output room kept for what may still come: the next frame's reply,
 * every batch reply, every pool call's reply and inline pull's bytes.
 */
static uint32_t session_reserved(const struct agent_session *s)
{
	return BCP_FRAME_MAX + s->jobs_rsv + s->inl_rsv +
	       AGENT_INFLIGHT_MAX * SESS_BATCH_REP_MAX;
}

/*
 * May another frame be read and served now?  The output must have room
 * for its reply, every batch reply and every pool call's reply that may
 * still come.
 */
static int session_can_take(const struct agent_session *s)
{
	return s->state != SESS_CLOSING && !s->w->stopping &&
	       SESS_WCAP - s->wlen >= session_reserved(s);
}

/*
 * An inline pull of len bytes may hold that much more output room: what
 * is left once every reply that may still come has its room, this
 * frame's own reservation (BCP_FRAME_MAX) kept for the next one.  0 and
 * the room held, or -ENOSPC: the pull then moves its bytes as usual.
 */
int agent_session_inline_hold(struct agent_session *s, uint32_t len)
{
	uint64_t keep = (uint64_t)session_reserved(s) + len;

	if (SESS_WCAP - s->wlen < keep)
		return -ENOSPC;
	s->inl_rsv += len;
	return 0;
}

/* A NOTIFY frame's size at most: header, body, name padded to 8. */
#define SESS_NOTIFY_FRAME_MAX	(BCP_HDR_SIZE + 48 + BCP_NAME_MAX + 8)
#define SESS_NOTIFY_BATCH	16	/* events taken at once */

/*
 * Output room for notifications: what is left once every reply that may
 * still come (session_can_take()'s reservation) has its room.
 */
static uint32_t session_notify_room(const struct agent_session *s)
{
	uint32_t keep = session_reserved(s);
	uint32_t room = SESS_WCAP - s->wlen;

	return room > keep ? room - keep : 0;
}

/*
 * NOTIFY BUSY (BCP_FEAT_BUSY), at most every SESS_BUSY_NS while store
 * calls or batches of s are out.  The host waits past its timeout for an
 * agent that answers its PING; but a session with every job it may have
 * out reads no more frames, so the PING would wait behind those calls
 * unanswered and a slow store (an OSD or the MDS stalled) would give the
 * host's application EIO.  Worker thread, from its pass (at least every
 * 200 ms): with a host's timeout of a second at the least, a frame every
 * quarter second keeps the last one well within it (a few small frames a
 * second, and only while calls are out).
 */
#define SESS_BUSY_NS	250000000ull

void agent_session_busy(struct agent_session *s, uint64_t now)
{
	struct bcp_msg m;
	int len;

	if (!(s->features & BCP_FEAT_BUSY) || s->state != SESS_READY ||
	    s->peer_gone || (!s->jobs_live && !s->batches_live) ||
	    now - s->busy_ns < SESS_BUSY_NS)
		return;
	if (s->wpos && s->wpos == s->wlen)
		s->wpos = s->wlen = 0;
	/* no room: the host is not reading either; the next pass tries */
	if (session_notify_room(s) < SESS_NOTIFY_FRAME_MAX)
		return;
	bcp_msg_init(&m, BCP_OP_NOTIFY, 0);
	m.u.notify_req.kind = BCP_NOTIFY_BUSY;
	len = bcp_encode(s->wbuf + s->wlen, SESS_WCAP - s->wlen, &m);
	if (len < 0)
		return;
	s->wlen += (uint32_t)len;
	s->busy_ns = now;
}

void agent_session_notify(struct agent_session *s)
{
	struct agent_notify_ev ev[SESS_NOTIFY_BATCH];
	struct agent_worker *w = s->w;
	unsigned int n, i, max;
	uint64_t dropped;
	struct bcp_msg m;
	int len;

	if (s->state == SESS_AUTH)
		return;		/* nothing held yet; a RESET may wait */
	if (s->state != SESS_READY || s->peer_gone) {
		/* nobody will read them */
		while (agent_notify_take(s->ns, ev, SESS_NOTIFY_BATCH,
					 &dropped))
			;
		return;
	}
	if (s->wpos && s->wpos == s->wlen)
		s->wpos = s->wlen = 0;
	if (s->wpos && session_notify_room(s) < SESS_NOTIFY_FRAME_MAX) {
		memmove(s->wbuf, s->wbuf + s->wpos, s->wlen - s->wpos);
		s->wlen -= s->wpos;
		s->wpos = 0;
	}
	for (;;) {
		max = session_notify_room(s) / SESS_NOTIFY_FRAME_MAX;
		if (max > SESS_NOTIFY_BATCH)
			max = SESS_NOTIFY_BATCH;
		if (!max)
			break;
		n = agent_notify_take(s->ns, ev, max, &dropped);
		if (dropped)
			agent_ctr_add(&w->stats.op[BCP_OP_NOTIFY].failed,
				      dropped);
		for (i = 0; i < n; i++) {
			bcp_msg_init(&m, BCP_OP_NOTIFY, 0);
			m.u.notify_req.kind = ev[i].kind;
			m.u.notify_req.name_len = ev[i].name_len;
			m.u.notify_req.handle = ev[i].handle;
			m.u.notify_req.child = ev[i].child;
			m.u.notify_req.offset = ev[i].offset;
			m.u.notify_req.length = ev[i].length;
			m.name = ev[i].name_len ? ev[i].name : NULL;
			len = bcp_encode(s->wbuf + s->wlen,
					 SESS_WCAP - s->wlen, &m);
			if (len < 0) {
				agent_err("session %s: cannot encode a "
					  "NOTIFY: %s", s->peer,
					  strerror(-len));
				continue;
			}
			s->wlen += (uint32_t)len;
			/* count: frames sent; latency: time queued */
			agent_stats_op(&w->stats, BCP_OP_NOTIFY, 0,
				       ev[i].t_queued);
		}
		if (n < max)
			break;
	}
}

/* The calls that may block for long in every store (call_begin...). */
static int session_is_call_op(uint16_t op)
{
	switch (op) {
	case BCP_OP_FSYNC: case BCP_OP_FSYNCDIR: case BCP_OP_FALLOCATE:
	case BCP_OP_COPY_FILE_RANGE: case BCP_OP_READDIR:
		return 1;
	default:
		return 0;
	}
}

/* The requests served by session_call(): each calls the store. */
static int session_is_store_op(uint16_t op)
{
	switch (op) {
	case BCP_OP_LOOKUP: case BCP_OP_GETATTR: case BCP_OP_SETATTR:
	case BCP_OP_CREATE: case BCP_OP_MKDIR: case BCP_OP_MKNOD:
	case BCP_OP_SYMLINK: case BCP_OP_READLINK: case BCP_OP_LINK:
	case BCP_OP_UNLINK: case BCP_OP_RMDIR: case BCP_OP_RENAME:
	case BCP_OP_OPEN: case BCP_OP_OPENDIR: case BCP_OP_RELEASE:
	case BCP_OP_RELEASEDIR: case BCP_OP_STATFS: case BCP_OP_SETXATTR:
	case BCP_OP_GETXATTR: case BCP_OP_LISTXATTR: case BCP_OP_REMOVEXATTR:
	case BCP_OP_LSEEK: case BCP_OP_REOPEN: case BCP_OP_REBIND:
		return 1;
	default:
		return 0;
	}
}

/* A request of op served on the blocking pool, for s. */
static int session_is_pool_op(const struct agent_session *s, uint16_t op)
{
	return session_is_call_op(op) ||
	       (agent_store_blocking(s->store) && session_is_store_op(op));
}

void agent_session_update_events(struct agent_session *s)
{
	struct agent_worker *w = s->w;
	uint32_t ev = 0, dev;
	int dfd;

	if (s->peer_gone)
		ev = 0;
	else if (session_can_take(s) && s->batch_pool &&
		 s->rlen < SESS_RCAP)
		ev = EPOLLIN;
	if (!s->peer_gone && s->wpos < s->wlen)
		ev |= EPOLLOUT;
	if (s->peer_gone) {
		/* HUP and ERR are reported whatever the interest: stop it */
		if (!s->ev_gone)
			epoll_ctl(w->epfd, EPOLL_CTL_DEL, s->fd, NULL);
		s->ev_gone = 1;
	} else if (ev != s->ev) {
		struct epoll_event e = { .events = ev, .data.ptr = &s->tag };

		epoll_ctl(w->epfd, EPOLL_CTL_MOD, s->fd, &e);
		s->ev = ev;
	}
	dfd = bcp_xsrv_fd(s->xsrv);
	dev = bcp_xsrv_events(s->xsrv);
	if (dfd >= 0 && dev != s->data_ev) {
		struct epoll_event e = { .events = dev,
					 .data.ptr = &s->data_tag };

		epoll_ctl(w->epfd, EPOLL_CTL_MOD, dfd, &e);
		s->data_ev = dev;
	}
}

static void session_bad_frame(struct agent_session *s, const void *frame,
			      int ret, enum bcp_err why)
{
	struct bcp_hdr h;
	struct bcp_msg req;

	s->w->stats.bad_frames++;
	agent_warn("session %s: bad frame (%s): %s; closing the connection",
		   s->peer, bcp_err_str(why), strerror(-ret));
	bcp_dec_hdr(frame, &h);
	if (h.magic == BCP_MAGIC && h.opcode > 0 && h.opcode < BCP_OP_MAX &&
	    strcmp(bcp_op_name(h.opcode), "?") && !(h.flags & BCP_HF_REPLY)) {
		memset(&req, 0, sizeof(req));
		req.hdr = h;
		session_status(s, &req, ret);
	}
	agent_session_close(s, 0);
}

/* Decode errors that concern one name or value, not the framing. */
static int session_soft_err(enum bcp_err why)
{
	switch (why) {
	case BCP_E_NAME_EMPTY: case BCP_E_NAME_TOO_LONG:
	case BCP_E_NAME_SLASH: case BCP_E_NAME_DOT: case BCP_E_NAME_NUL:
	case BCP_E_TARGET_TOO_LONG: case BCP_E_TARGET_EMPTY:
	case BCP_E_TARGET_NUL: case BCP_E_XATTR_NAME:
	case BCP_E_XATTR_VALUE_TOO_LONG:
		return 1;
	default:
		return 0;
	}
}

/* Wait for the session's rdma connection; without it, no rdma. */
static void session_rdma_expect(struct agent_session *s)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.ptr = &s->data_tag };
	int ret;

	ret = bcp_xsrv_rdma_expect(s->xsrv, s->id, s->nonce_s);
	if (ret == 0 && epoll_ctl(s->w->epfd, EPOLL_CTL_ADD,
				  bcp_xsrv_fd(s->xsrv), &ev) < 0)
		ret = -errno;
	if (ret < 0) {
		agent_err("session %s: cannot offer rdma: %s", s->peer,
			  strerror(-ret));
		s->features &= ~BCP_FEAT_RDMA;
		return;
	}
	s->data_ev = EPOLLIN;
}

int agent_session_kick(struct agent_session *s)
{
	const char *why = "transfer failed";
	int ret;

	if (s->peer_gone)
		return 0;
	ret = bcp_xsrv_kick(s->xsrv, &why);
	if (ret < 0) {
		agent_warn("session %s: data transport: %s (%s); closing the "
			   "session", s->peer, why, strerror(-ret));
		s->data_ev = 0;
		agent_session_close(s, 1);
		return 1;
	}
	return ret;
}

void agent_session_hello(struct agent_session *s, const struct bcp_msg *m)
{
	const struct bcp_hello_req *hq = &m->u.hello_req;
	uint16_t lo = hq->ver_min > BCP_VERSION_MIN ? hq->ver_min :
						      BCP_VERSION_MIN;
	uint16_t hi = hq->ver_max < BCP_VERSION_MAX ? hq->ver_max :
						      BCP_VERSION_MAX;
	uint64_t offered = BCP_FEAT_TCP_DATA | BCP_FEAT_READDIRPLUS |
			   BCP_FEAT_COPY_RANGE | BCP_FEAT_SETATTR_CTIME |
			   BCP_FEAT_RESUME | BCP_FEAT_NOTIFY |
			   BCP_FEAT_CREATED | BCP_FEAT_BATCH_INLINE |
			   BCP_FEAT_BUSY | BCP_FEAT_XATTR_HINT;
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	uint8_t raddr[16] = { 0 };
	uint16_t rport = 0;
	struct bcp_msg rep;
	uint64_t id;

	if (lo > hi) {
		agent_warn("session %s: no common protocol version (host %u..%u,"
			   " agent %u..%u)", s->peer, hq->ver_min, hq->ver_max,
			   BCP_VERSION_MIN, BCP_VERSION_MAX);
		session_status(s, m, -EPROTONOSUPPORT);
		agent_session_close(s, 0);
		return;
	}
	if (s->is_unix)
		offered |= BCP_FEAT_SHM;
	if ((hq->features & BCP_FEAT_RDMA) &&
	    !getsockname(s->fd, (struct sockaddr *)&local, &llen) &&
	    !bcp_xrdma_announce((struct sockaddr *)&local, raddr, &rport))
		offered |= BCP_FEAT_RDMA;
	memcpy(s->nonce_c, hq->nonce, BCP_NONCE_LEN);
	memcpy(s->client, hq->client, BCP_CLIENT_ID_LEN);
	if (bcp_random(s->nonce_s, BCP_NONCE_LEN) < 0 ||
	    bcp_random(&id, sizeof(id)) < 0) {
		agent_err("session %s: no random bytes for the handshake",
			  s->peer);
		session_status(s, m, -EIO);
		agent_session_close(s, 0);
		return;
	}
	/* the low byte routes a DATA_ATTACH to this worker */
	s->id = (id & ~0xffull) | s->w->idx;
	if (s->id == 0)
		s->id = 0x100 | s->w->idx;
	s->features = hq->features & offered;
	s->store->flags &= ~AGENT_STORE_XATTR_HINT;
	if (s->features & BCP_FEAT_XATTR_HINT)
		s->store->flags |= AGENT_STORE_XATTR_HINT;
	if (s->features & BCP_FEAT_RDMA)
		session_rdma_expect(s);
	/* its holds are registered once it authenticated (session_auth) */
	if ((s->features & BCP_FEAT_NOTIFY) && !s->ns) {
		s->ns = agent_notify_sess_create(s->id, s->w->inbox_efd);
		if (!s->ns) {
			agent_warn("session %s: no memory for notifications; "
				   "not offered", s->peer);
			s->features &= ~BCP_FEAT_NOTIFY;
		}
	}
	bcp_msg_init_reply(&rep, m, 0);
	if (s->features & BCP_FEAT_RDMA) {
		memcpy(rep.u.hello_rep.rdma_addr, raddr, sizeof(raddr));
		rep.u.hello_rep.rdma_port = rport;
	}
	rep.u.hello_rep.version = hi;
	rep.u.hello_rep.max_segs = BCP_SEGS_MAX;
	rep.u.hello_rep.features = s->features;
	rep.u.hello_rep.max_frame = BCP_FRAME_MAX;
	rep.u.hello_rep.max_inflight = AGENT_INFLIGHT_MAX;
	rep.u.hello_rep.slot_size = agent_cfg.slot_size;
	rep.u.hello_rep.nslots = agent_cfg.queue_depth;
	rep.u.hello_rep.session = s->id;
	memcpy(rep.u.hello_rep.nonce, s->nonce_s, BCP_NONCE_LEN);
	agent_session_reply(s, &rep);
	agent_session_flush(s);
}

pthread_mutex_t agent_secret_lock = PTHREAD_MUTEX_INITIALIZER;

/* A copy of the secret in key[]: SIGHUP may replace it at any moment. */
static size_t session_secret(uint8_t key[BCP_SECRET_MAX])
{
	size_t len = 0;

	pthread_mutex_lock(&agent_secret_lock);
	if (agent_cfg.secret && agent_cfg.secret_len <= BCP_SECRET_MAX) {
		len = agent_cfg.secret_len;
		memcpy(key, agent_cfg.secret, len);
	}
	pthread_mutex_unlock(&agent_secret_lock);
	return len;
}

static void session_auth(struct agent_session *s, const struct bcp_msg *m)
{
	uint8_t mac[BCP_MAC_LEN], key[BCP_SECRET_MAX];
	struct bcp_msg rep;
	size_t klen;

	klen = session_secret(key);
	if (bcp_auth_mac(key, klen, BCP_AUTH_LABEL_CLIENT, s->nonce_s,
			 BCP_NONCE_LEN, s->nonce_c, BCP_NONCE_LEN, mac) < 0) {
		agent_err("session %s: cannot compute a MAC", s->peer);
		goto out_refuse;
	}
	if (!bcp_auth_mac_equal(mac, m->u.auth_req.mac)) {
		s->w->stats.auth_failed++;
		agent_warn("session %s: authentication failed: the host's "
			   "secret does not match this agent's", s->peer);
		goto out_refuse;
	}
	bcp_msg_init_reply(&rep, m, 0);
	if (bcp_auth_mac(key, klen, BCP_AUTH_LABEL_SERVER, s->nonce_c,
			 BCP_NONCE_LEN, s->nonce_s, BCP_NONCE_LEN,
			 rep.u.auth_rep.mac) < 0) {
		agent_err("session %s: cannot compute a MAC", s->peer);
		goto out_refuse;
	}
	rep.u.auth_rep.root = agent_store_root(s->store);
	session_set(s, SESS_READY);
	if (s->ns)
		agent_store_notify_start(s->store, s->ns);
	agent_session_reply(s, &rep);
	agent_info("session %s: authenticated (id %016" PRIx64 ")", s->peer,
		   s->id);
	return;

out_refuse:
	session_status(s, m, -EACCES);
	agent_session_close(s, 0);
}

void agent_session_attach(struct agent_worker *w, int fd, const char *peer,
			  const struct bcp_msg *m)
{
	const struct bcp_attach_req *a = &m->u.attach_req;
	struct agent_session *s;
	uint8_t mac[BCP_MAC_LEN], le[8], key[BCP_SECRET_MAX];
	struct bcp_msg rep;
	uint8_t buf[64];
	size_t klen;
	int ret = -EACCES, n, i;

	for (s = w->sessions; s; s = s->next)
		if (s->id == a->session && s->state == SESS_READY)
			break;
	if (!s) {
		agent_warn("data connection from %s names no live session",
			   peer);
		goto out_reply;
	}
	for (i = 0; i < 8; i++)
		le[i] = (uint8_t)(a->session >> (8 * i));
	klen = session_secret(key);
	if (bcp_auth_mac(key, klen, BCP_AUTH_LABEL_DATA, s->nonce_s,
			 BCP_NONCE_LEN, le, 8, mac) < 0 ||
	    !bcp_auth_mac_equal(mac, a->mac)) {
		w->stats.auth_failed++;
		agent_warn("data connection from %s: authentication failed",
			   peer);
		goto out_reply;
	}
	if (!(s->features & BCP_FEAT_TCP_DATA) ||
	    bcp_xsrv_fd(s->xsrv) >= 0) {
		agent_warn("data connection from %s: session %s has one "
			   "already or did not ask for it", peer, s->peer);
		ret = -EBUSY;
		goto out_reply;
	}
	ret = 0;

out_reply:
	bcp_msg_init_reply(&rep, m, ret);
	n = bcp_encode(buf, sizeof(buf), &rep);
	if (n > 0 && send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) !=
		     n && ret == 0) {
		agent_warn("data connection from %s: cannot reply", peer);
		ret = -EIO;
	}
	if (ret < 0) {
		close(fd);
		return;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN,
					  .data.ptr = &s->data_tag };

		bcp_xsrv_data_attach(s->xsrv, fd);
		s->data_ev = EPOLLIN;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			agent_err("data connection: epoll: %s",
				  strerror(errno));
			bcp_xsrv_fail(s->xsrv, -EIO);
			return;
		}
	}
	agent_dbg("session %s: data connection from %s", s->peer, peer);
}

static void session_register(struct agent_session *s, const struct bcp_msg *m)
{
	const struct bcp_region_req *r = &m->u.region_req;
	int fd = -1, ret;
	unsigned int i;

	if (m->hdr.flags & BCP_HF_FD) {
		if (!s->nfds) {
			session_status(s, m, -EBADF);
			return;
		}
		fd = s->fds[0];
		for (i = 1; i < s->nfds; i++)
			s->fds[i - 1] = s->fds[i];
		s->nfds--;
	}
	if (r->kind == BCP_REGION_SHM && !(s->features & BCP_FEAT_SHM))
		ret = -EOPNOTSUPP;
	else
		ret = bcp_xsrv_region_register(s->xsrv, r->region_id, r->kind,
					       r->length, r->addr, r->rkey, fd);
	if (!ret)
		s->xport = agent_metrics_xport(r->kind);
	if (fd >= 0)
		close(fd);
	if (ret < 0)
		agent_warn("session %s: region %u refused: %s", s->peer,
			   r->region_id, strerror(-ret));
	session_status(s, m, ret);
}

static void session_job_run(struct agent_job *j)
{
	struct agent_sjob *sj = (struct agent_sjob *)j;

	agent_store_call_run(&sj->call);
}

/* Back on the worker: answer, drop the call's references, serve on. */
static void session_job_done(struct agent_job *j)
{
	struct agent_sjob *sj = (struct agent_sjob *)j;
	struct agent_session *s = sj->s;
	struct agent_store_call *c = &sj->call;
	uint8_t tail[BCP_READDIR_MAX];
	struct bcp_msg req, rep;
	size_t len = 0;
	int ret = agent_store_ret(c->res < 0 ? (int)c->res : 0);

	memset(&req, 0, sizeof(req));
	req.hdr = sj->hdr;
	bcp_msg_init_reply(&rep, &req, 0);
	if (c->op == BCP_OP_READDIR) {
		ret = agent_store_readdir_fill(s->store, c, tail, sizeof(tail),
					       &len, &rep.u.readdir_rep.count,
					       &rep.u.readdir_rep.eof);
		rep.dirents = tail;
		rep.dirents_len = (uint32_t)len;
	} else if (c->op == BCP_OP_COPY_FILE_RANGE && ret == 0) {
		rep.u.copy_rep.copied = (uint64_t)c->res;
	}
	agent_store_call_end(s->store, c);
	agent_stats_op(&s->w->stats, c->op, ret, sj->t0);
	agent_metrics_req(s->w, c->op, 0, sj->t0);
	if (ret < 0)
		bcp_msg_init_reply(&rep, &req, ret);
	agent_session_reply(s, &rep);
	sj->next = s->job_pool;
	s->job_pool = sj;
	s->jobs_live--;
	s->jobs_rsv -= sj->rsv;
	s->kick = 1;
}

/*
 * A call that may block (store.h) goes to the blocking pool.  0: it is
 * out; -EAGAIN: the session has all its jobs out already (the frame
 * waits); another -errno: refused, to be answered now.
 */
static int session_job_start(struct agent_session *s,
			     const struct bcp_msg *m, uint64_t t0)
{
	struct agent_sjob *sj = s->job_pool;
	int ret;

	if (!sj)
		return -EAGAIN;
	if (m->hdr.opcode == BCP_OP_READDIR && !sj->call.buf) {
		sj->call.buf = malloc(AGENT_STORE_DENTS_BUF);
		if (!sj->call.buf)
			return -ENOMEM;
		sj->call.cap = AGENT_STORE_DENTS_BUF;
	}
	ret = agent_store_ret(agent_store_call_begin(s->store, m, &sj->call));
	if (ret < 0)
		return ret;
	s->job_pool = sj->next;
	s->jobs_live++;
	sj->rsv = BCP_FRAME_MAX;
	s->jobs_rsv += sj->rsv;
	sj->hdr = m->hdr;
	sj->t0 = t0;
	agent_pool_submit(&sj->job, session_job_run, session_job_done, s->w);
	return 0;
}

/* What a request names, for a debug line: "handle N" or "N/'name'". */
static void session_obj(const struct bcp_msg *m, char *buf, size_t cap)
{
	uint64_t h = 0;
	unsigned int len = 0;

	switch (m->hdr.opcode) {
	case BCP_OP_LOOKUP: case BCP_OP_UNLINK: case BCP_OP_RMDIR:
		h = m->u.named_req.parent;
		len = m->u.named_req.name_len;
		break;
	case BCP_OP_CREATE:
		h = m->u.create_req.parent;
		len = m->u.create_req.name_len;
		break;
	case BCP_OP_MKDIR:
		h = m->u.mkdir_req.parent;
		len = m->u.mkdir_req.name_len;
		break;
	case BCP_OP_MKNOD:
		h = m->u.mknod_req.parent;
		len = m->u.mknod_req.name_len;
		break;
	case BCP_OP_SYMLINK:
		h = m->u.symlink_req.parent;
		len = m->u.symlink_req.name_len;
		break;
	case BCP_OP_LINK:
		h = m->u.link_req.newparent;
		len = m->u.link_req.name_len;
		break;
	case BCP_OP_RENAME:
		h = m->u.rename_req.parent;
		len = m->u.rename_req.name_len;
		break;
	case BCP_OP_GETATTR: case BCP_OP_RELEASE: case BCP_OP_RELEASEDIR:
		h = m->u.node_req.handle;
		break;
	case BCP_OP_SETATTR:
		h = m->u.setattr_req.handle;
		break;
	case BCP_OP_OPEN: case BCP_OP_OPENDIR:
		h = m->u.open_req.handle;
		break;
	case BCP_OP_READLINK: case BCP_OP_STATFS:
		h = m->u.handle_req.handle;
		break;
	case BCP_OP_SETXATTR:
		h = m->u.setxattr_req.handle;
		len = m->u.setxattr_req.name_len;
		break;
	case BCP_OP_GETXATTR:
		h = m->u.getxattr_req.handle;
		len = m->u.getxattr_req.name_len;
		break;
	case BCP_OP_REMOVEXATTR:
		h = m->u.removexattr_req.handle;
		len = m->u.removexattr_req.name_len;
		break;
	case BCP_OP_LISTXATTR:
		h = m->u.listxattr_req.handle;
		break;
	}
	if (len && m->name)
		snprintf(buf, cap, "%" PRIu64 "/'%.*s'", h, (int)len,
			 m->name);
	else
		snprintf(buf, cap, "handle %" PRIu64, h);
}

/*
 * The reply cache (resume.h, doc/protocol.md "Replays"): the requests a
 * second execution could answer differently from the first.
 */
static int session_rc_op(uint16_t op)
{
	switch (op) {
	case BCP_OP_CREATE: case BCP_OP_MKDIR: case BCP_OP_MKNOD:
	case BCP_OP_SYMLINK: case BCP_OP_LINK: case BCP_OP_UNLINK:
	case BCP_OP_RMDIR: case BCP_OP_RENAME: case BCP_OP_SETXATTR:
	case BCP_OP_REMOVEXATTR: case BCP_OP_SETATTR:
		return 1;
	}
	return 0;
}

static int session_rc_entry_op(uint16_t op)
{
	return op == BCP_OP_MKDIR || op == BCP_OP_MKNOD ||
	       op == BCP_OP_SYMLINK || op == BCP_OP_LINK;
}

static int session_has_client(const struct agent_session *s)
{
	unsigned int i;

	for (i = 0; i < BCP_CLIENT_ID_LEN; i++)
		if (s->client[i])
			return 1;
	return 0;
}

/*
 * 1 when a cached outcome cannot be given again (an entry without a
 * fid): the replay is executed once more.  Calls no store.
 */
static int session_rc_reexec(uint16_t op, const struct agent_rc_outcome *o)
{
	return o->status >= 0 &&
	       (op == BCP_OP_CREATE || session_rc_entry_op(op)) &&
	       agent_fid_zero(o->fid);
}

/*
 * A replayed request whose outcome is cached: answer as the first
 * execution did, an entry with a fresh handle of this session (and a
 * CREATE with a fresh fh, opened without O_TRUNC or O_EXCL).  -EAGAIN:
 * the outcome cannot be given again (session_rc_reexec()): execute once
 * more.  *forget: a handle the caller forgets (one reference) on the
 * worker, or 0.
 */
static int session_rc_answer(struct agent_session *s,
			     const struct bcp_msg *m,
			     const struct agent_rc_outcome *o,
			     struct bcp_msg *rep, uint64_t *forget)
{
	struct agent_store *st = s->store;
	uint16_t op = m->hdr.opcode;
	struct bcp_entry *e = op == BCP_OP_CREATE ? &rep->u.create_rep.entry :
				&rep->u.entry_rep.entry;
	int ret;

	if (o->status < 0)
		return o->status;
	if (op == BCP_OP_SETATTR)
		return agent_store_getattr(st, m->u.setattr_req.handle, 0,
					   &rep->u.attr_rep.attr);
	if (op != BCP_OP_CREATE && !session_rc_entry_op(op))
		return 0;
	if (session_rc_reexec(op, o))
		return -EAGAIN;
	ret = agent_store_fid_entry(st, o->fid, e);
	if (ret < 0 || op != BCP_OP_CREATE)
		return ret;
	{
		struct bcp_open_rep orep;

		ret = agent_store_open(st, e->handle, o->open_flags, 0, &orep);
		if (ret < 0) {
			*forget = e->handle;
			return ret;
		}
		rep->u.create_rep.fh = orep.fh;
		rep->u.create_rep.open_flags = orep.open_flags;
	}
	return 0;
}

/* The name an entry-making request made, and where. */
static void session_rc_name(const struct bcp_msg *m, uint64_t *parent,
			    size_t *len)
{
	switch (m->hdr.opcode) {
	case BCP_OP_MKDIR:
		*parent = m->u.mkdir_req.parent;
		*len = m->u.mkdir_req.name_len;
		break;
	case BCP_OP_MKNOD:
		*parent = m->u.mknod_req.parent;
		*len = m->u.mknod_req.name_len;
		break;
	case BCP_OP_SYMLINK:
		*parent = m->u.symlink_req.parent;
		*len = m->u.symlink_req.name_len;
		break;
	default:	/* LINK */
		*parent = m->u.link_req.newparent;
		*len = m->u.link_req.name_len;
		break;
	}
}

/*
 * A replay whose first execution may have run (its intent is cached, its
 * outcome is not): the error that a completed first execution causes is
 * the success it had.  ret is the second execution's result.  *forget:
 * as for session_rc_answer().
 */
static int session_rc_again(struct agent_session *s, const struct bcp_msg *m,
			    int ret, struct bcp_msg *rep, uint64_t *forget)
{
	struct agent_store *st = s->store;
	uint16_t op = m->hdr.opcode;
	struct bcp_entry e;
	struct bcp_attr a;
	uint32_t want = 0;
	uint64_t parent;
	size_t len;

	switch (op) {
	case BCP_OP_UNLINK: case BCP_OP_RMDIR:
		return ret == -ENOENT ? 0 : ret;
	case BCP_OP_REMOVEXATTR:
		return ret == -ENODATA ? 0 : ret;
	case BCP_OP_SETXATTR:
		return ret == -EEXIST ? 0 : ret;
	case BCP_OP_RENAME:
		/* the source is gone and the target is there: it moved */
		if (ret != -ENOENT ||
		    agent_store_lookup(st, m->u.rename_req.newparent,
				       m->name2, m->u.rename_req.newname_len,
				       &e) < 0)
			return ret;
		*forget = e.handle;
		return 0;
	case BCP_OP_MKDIR: case BCP_OP_MKNOD: case BCP_OP_SYMLINK:
	case BCP_OP_LINK:
		if (ret != -EEXIST)
			return ret;
		session_rc_name(m, &parent, &len);
		if (op == BCP_OP_MKDIR)
			want = S_IFDIR;
		else if (op == BCP_OP_SYMLINK)
			want = S_IFLNK;
		else if (op == BCP_OP_MKNOD)
			want = m->u.mknod_req.mode & S_IFMT;
		if (agent_store_lookup(st, parent, m->name, len, &e) < 0)
			return ret;
		if (op == BCP_OP_LINK &&
		    (agent_store_getattr(st, m->u.link_req.handle, 0, &a) < 0 ||
		     a.ino != e.attr.ino))
			want = ~0u;
		if (want && (e.attr.mode & S_IFMT) != want) {
			*forget = e.handle;
			return ret;
		}
		rep->u.entry_rep.entry = e;
		return 0;
	}
	/* CREATE ran without O_EXCL and O_TRUNC: nothing to mend */
	return ret;
}

/* What the reply cache keeps of a finished request. */
static void session_rc_record(struct agent_session *s, const struct bcp_msg *m,
			      int ret, const struct bcp_msg *rep)
{
	struct agent_rc_outcome o;
	uint16_t op = m->hdr.opcode;

	memset(&o, 0, sizeof(o));
	o.status = ret;
	if (ret == 0 && op == BCP_OP_CREATE) {
		memcpy(o.fid, rep->u.create_rep.entry.fid, BCP_FID_LEN);
		o.open_flags = m->u.create_req.flags &
			       ~(uint32_t)(O_TRUNC | O_EXCL | O_CREAT);
	} else if (ret == 0 && session_rc_entry_op(op)) {
		memcpy(o.fid, rep->u.entry_rep.entry.fid, BCP_FID_LEN);
	}
	agent_rc_done(s->client, m->hdr.req_id, op, &o);
}

/* REBIND: each entry on its own; the reply has one status per entry. */
static int session_rebind(struct agent_session *s, const struct bcp_msg *m,
			  struct bcp_msg *rep, int32_t *st)
{
	struct bcp_rebind_one r;
	uint32_t i;

	if (!(s->features & BCP_FEAT_RESUME))
		return -EOPNOTSUPP;
	for (i = 0; i < m->u.rebind_req.count; i++) {
		bcp_msg_rebind(m, i, &r);
		st[i] = agent_store_ret(agent_store_rebind(s->store, r.handle,
							   r.nlookup, r.fid));
	}
	rep->u.batch_rep.count = m->u.rebind_req.count;
	rep->statuses = st;
	return 0;
}

/*
 * dir's attributes after a request changed it, for the reply; ino 0 when
 * they cannot be read (the host then asks again, as before).
 */
static void session_dirattr(struct agent_store *st, uint64_t dir,
			    struct bcp_attr *out)
{
	if (agent_store_getattr(st, dir, 0, out) < 0)
		memset(out, 0, sizeof(*out));
}

/*
 * The whole of a regular file of at most peek bytes, read right after its
 * OPEN into tail (SESS_TAIL_MAX > BCP_OPEN_PEEK_MAX bytes), for the reply
 * (BCP_OPEN_DATA).  Best effort: a file that is larger (now), is not
 * readable through fh, or would make the read wait for a device on the
 * worker gets no data, and the host reads it as any other.
 */
static void session_open_peek(struct agent_store *st, uint64_t fh,
			      uint32_t peek, struct bcp_open_rep *o,
			      struct bcp_msg *rep, uint8_t *tail)
{
	struct agent_file *f;
	size_t want = (size_t)peek + 1;	/* one more: the file grew */
	size_t got = 0;
	ssize_t n = -1;
	int fd, mode;

	if (!S_ISREG(o->attr.mode) || o->attr.size > peek ||
	    agent_store_file_get(st, fh, &f, &fd) < 0)
		return;
	mode = fd >= 0 ? agent_store_file_inline(st, f, fd) : 0;
	while (got < want) {
		if (fd < 0) {
			n = agent_store_file_rw(st, f, 0, tail + got,
						want - got, got);
		} else if (mode == AGENT_INLINE_NEVER) {
			n = -1;
		} else {
			struct iovec iov = { tail + got, want - got };

			n = preadv2(fd, &iov, 1, (off_t)got,
				    mode == AGENT_INLINE_NOWAIT ?
				    RWF_NOWAIT : 0);
		}
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	agent_store_file_put(st, f);
	if (n != 0 || got > peek)
		return;		/* an error, or more than peek bytes */
	o->open_flags |= BCP_OPEN_DATA;
	o->data_len = (uint32_t)got;
	rep->data = tail;
	rep->data_len = (uint32_t)got;
}

/*
 * The store call of a request (session_is_store_op()), its reply in rep;
 * tail (SESS_TAIL_MAX bytes) takes the reply's data, st_rebind REBIND's
 * statuses.  On the worker, or on a pool thread for a blocking store:
 * touches nothing of s but its store and what HELLO settled.
 */
static int session_call(struct agent_session *s, const struct bcp_msg *m,
			struct bcp_msg *rep, uint8_t *tail, int32_t *st_rebind)
{
	struct agent_store *st = s->store;
	int ret = 0;

	switch (m->hdr.opcode) {
	case BCP_OP_REBIND:
		ret = session_rebind(s, m, rep, st_rebind);
		break;
	case BCP_OP_REOPEN:
		ret = -EOPNOTSUPP;
		if (s->features & BCP_FEAT_RESUME)
			ret = agent_store_reopen(st, &m->u.reopen_req,
						 &rep->u.open_rep);
		break;
	case BCP_OP_LOOKUP:
		ret = agent_store_lookup(st, m->u.named_req.parent, m->name,
					 m->u.named_req.name_len,
					 &rep->u.entry_rep.entry);
		break;
	case BCP_OP_GETATTR:
		ret = agent_store_getattr(st, m->u.node_req.handle,
					  m->u.node_req.fh,
					  &rep->u.attr_rep.attr);
		break;
	case BCP_OP_SETATTR:
		ret = agent_store_setattr(st, &m->u.setattr_req,
					  &rep->u.attr_rep.attr);
		break;
	case BCP_OP_CREATE:
		ret = agent_store_create_file(st, &m->u.create_req, m->name,
					      &rep->u.create_rep);
		if (!ret)
			session_dirattr(st, m->u.create_req.parent,
					&rep->u.create_rep.dir);
		if (!(s->features & BCP_FEAT_CREATED))
			rep->u.create_rep.open_flags &=
				~(uint32_t)BCP_OPEN_CREATED;
		break;
	case BCP_OP_MKDIR:
		ret = agent_store_mkdir(st, &m->u.mkdir_req, m->name,
					&rep->u.entry_rep.entry);
		if (!ret)
			session_dirattr(st, m->u.mkdir_req.parent,
					&rep->u.entry_rep.dir);
		break;
	case BCP_OP_MKNOD:
		ret = agent_store_mknod(st, &m->u.mknod_req, m->name,
					&rep->u.entry_rep.entry);
		if (!ret)
			session_dirattr(st, m->u.mknod_req.parent,
					&rep->u.entry_rep.dir);
		break;
	case BCP_OP_SYMLINK:
		ret = agent_store_symlink(st, &m->u.symlink_req, m->name,
					  m->name2, &rep->u.entry_rep.entry);
		if (!ret)
			session_dirattr(st, m->u.symlink_req.parent,
					&rep->u.entry_rep.dir);
		break;
	case BCP_OP_READLINK:
		ret = agent_store_readlink(st, m->u.handle_req.handle,
					   (char *)tail, BCP_SYMLINK_MAX);
		if (ret >= 0) {
			rep->u.readlink_rep.len = (uint32_t)ret;
			rep->data = tail;
			rep->data_len = (uint32_t)ret;
			ret = 0;
		}
		break;
	case BCP_OP_LINK:
		ret = agent_store_link(st, &m->u.link_req, m->name,
				       &rep->u.entry_rep.entry);
		if (!ret)
			session_dirattr(st, m->u.link_req.newparent,
					&rep->u.entry_rep.dir);
		break;
	case BCP_OP_UNLINK:
	case BCP_OP_RMDIR:
		ret = agent_store_unlink(st, m->u.named_req.parent, m->name,
					 m->u.named_req.name_len,
					 m->hdr.opcode == BCP_OP_RMDIR);
		if (!ret)
			session_dirattr(st, m->u.named_req.parent,
					&rep->u.dir_rep.dir);
		break;
	case BCP_OP_RENAME:
		ret = agent_store_rename(st, &m->u.rename_req, m->name,
					 m->name2);
		if (!ret) {
			session_dirattr(st, m->u.rename_req.parent,
					&rep->u.rename_rep.dir);
			session_dirattr(st, m->u.rename_req.newparent,
					&rep->u.rename_rep.newdir);
		}
		break;
	case BCP_OP_OPEN:
	case BCP_OP_OPENDIR:
		ret = agent_store_open(st, m->u.open_req.handle,
				       m->u.open_req.flags,
				       m->hdr.opcode == BCP_OP_OPENDIR,
				       &rep->u.open_rep);
		if (ret)
			break;
		/* the attributes once open: the host's close-to-open check */
		if (agent_store_getattr(st, m->u.open_req.handle,
					rep->u.open_rep.fh,
					&rep->u.open_rep.attr) < 0)
			memset(&rep->u.open_rep.attr, 0,
			       sizeof(rep->u.open_rep.attr));
		else if (m->u.open_req.peek)
			session_open_peek(st, rep->u.open_rep.fh,
					  m->u.open_req.peek,
					  &rep->u.open_rep, rep, tail);
		break;
	case BCP_OP_RELEASE:
	case BCP_OP_RELEASEDIR:
		ret = agent_store_release(st, m->u.node_req.handle,
					  m->u.node_req.fh,
					  m->hdr.opcode == BCP_OP_RELEASEDIR);
		break;
	case BCP_OP_STATFS:
		ret = agent_store_statfs(st, m->u.handle_req.handle,
					 &rep->u.statfs_rep);
		break;
	case BCP_OP_SETXATTR:
		ret = agent_store_setxattr(st, m->u.setxattr_req.handle,
					   m->u.setxattr_req.flags, m->name,
					   m->u.setxattr_req.name_len,
					   m->data, m->data_len);
		break;
	case BCP_OP_GETXATTR:
	case BCP_OP_LISTXATTR: {
		uint32_t size = m->hdr.opcode == BCP_OP_GETXATTR ?
				m->u.getxattr_req.size :
				m->u.listxattr_req.size;

		if (size > SESS_TAIL_MAX)
			size = SESS_TAIL_MAX;
		if (m->hdr.opcode == BCP_OP_GETXATTR)
			ret = agent_store_getxattr(st,
						   m->u.getxattr_req.handle,
						   m->name,
						   m->u.getxattr_req.name_len,
						   tail, size);
		else
			ret = agent_store_listxattr(st,
						    m->u.listxattr_req.handle,
						    tail, size);
		if (ret >= 0) {
			rep->u.xattr_rep.size = (uint32_t)ret;
			if (size) {
				rep->data = tail;
				rep->data_len = (uint32_t)ret;
			}
			ret = 0;
		}
		break;
	}
	case BCP_OP_REMOVEXATTR:
		ret = agent_store_removexattr(st, m->u.removexattr_req.handle,
					      m->name,
					      m->u.removexattr_req.name_len);
		break;
	case BCP_OP_LSEEK:
		ret = agent_store_lseek(st, &m->u.lseek_req,
					&rep->u.lseek_rep.offset);
		break;
	}
	return agent_store_ret(ret);
}

/*
 * Answer m with ret (rep when 0): its stats and metrics (t1: the store's
 * call began, 0: none), its reply (none when rep is NULL: a pool thread
 * sent it).  On the worker.
 */
static void session_answer(struct agent_session *s, const struct bcp_msg *m,
			   int ret, struct bcp_msg *rep, uint64_t t0,
			   uint64_t t1)
{
	agent_stats_op(&s->w->stats, m->hdr.opcode, ret, t0);
	agent_metrics_req(s->w, m->hdr.opcode, t0, t1);
	if (ret < 0) {
		if (rep)
			bcp_msg_init_reply(rep, m, ret);
		if (agent_cfg.log_level >= AGENT_LOG_DEBUG) {
			char obj[300];

			session_obj(m, obj, sizeof(obj));
			agent_dbg("session %s: %s %s: %s", s->peer,
				  bcp_op_name(m->hdr.opcode), obj,
				  strerror(-ret));
		}
	}
	if (rep)
		agent_session_reply(s, rep);
}

/*
 * The reply cache's part of a request, before it runs (on the worker):
 * 1 when m is a replay answered from the cached outcome *oc (no store
 * call made here: the caller makes them, session_rc_answer()); else 0,
 * with *cached (its outcome is to be recorded) and *again (it may have
 * run before: session_rc_again()) set, and the intent recorded.
 */
static int session_rc_begin(struct agent_session *s, struct bcp_msg *m,
			    struct agent_rc_outcome *oc, int *cached,
			    int *again)
{
	int found = AGENT_RC_NONE;

	*cached = *again = 0;
	if (!session_rc_op(m->hdr.opcode) || !session_has_client(s))
		return 0;
	if (m->hdr.flags & BCP_HF_REPLAY)
		found = agent_rc_find(s->client, m->hdr.req_id, m->hdr.opcode,
				      oc);
	if (found == AGENT_RC_DONE && !session_rc_reexec(m->hdr.opcode, oc))
		return 1;
	*again = found != AGENT_RC_NONE;
	/* it may have run: never truncate or fail on O_EXCL again */
	if (*again && m->hdr.opcode == BCP_OP_CREATE)
		m->u.create_req.flags &= ~(uint32_t)(O_TRUNC | O_EXCL);
	agent_rc_intent(s->client, m->hdr.req_id, m->hdr.opcode);
	*cached = 1;
	return 0;
}

/* Output room the reply to m may take (a blocking store's job). */
static uint32_t session_rep_max(const struct bcp_msg *m)
{
	switch (m->hdr.opcode) {
	case BCP_OP_OPEN:
		return SESS_REP_SMALL + m->u.open_req.peek;
	case BCP_OP_GETXATTR: case BCP_OP_LISTXATTR: case BCP_OP_REBIND:
		return BCP_FRAME_MAX;
	default:
		/* fixed bodies, READLINK's target: BCP_SYMLINK_MAX */
		return SESS_REP_SMALL;
	}
}

/*
 * Pool thread (a blocking store's request or batch): the reply goes out
 * at once, sparing the worker's wake-up on the way back, when the stream
 * is between frames: no frame partly sent (out_part), nobody's rest
 * waiting (out_hold).  A socket that takes part of it leaves the rest to
 * the worker, which sends nothing until it put the rest first.
 */
int agent_session_pool_send(struct agent_session *s, const uint8_t *buf,
			    uint32_t len, struct agent_out_rest *r)
{
	ssize_t n = -1;

	r->len = r->sent = 0;
	pthread_mutex_lock(&s->out_lock);
	if (!s->out_dead && !s->out_part && !s->out_hold)
		n = send(s->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n > 0 && (uint32_t)n < len) {
		r->buf = buf;
		r->len = len;
		r->sent = (uint32_t)n;
		s->out_part = 1;
		s->out_hold = r;
	}
	pthread_mutex_unlock(&s->out_lock);
	return n > 0;
}

void agent_session_pool_rest(struct agent_session *s,
			     struct agent_out_rest *r)
{
	uint32_t rest = r->len - r->sent;

	s->w->stats.pool_sent++;
	if (!r->len)
		return;
	s->w->stats.pool_part++;
	pthread_mutex_lock(&s->out_lock);
	s->out_hold = NULL;
	pthread_mutex_unlock(&s->out_lock);
	/* the room: the request's reservation, as for a reply made here */
	if (SESS_WCAP - s->wlen < rest) {
		agent_err("session %s: no room for the rest of a reply",
			  s->peer);
		agent_session_close(s, 1);
	} else if (!s->peer_gone) {
		memmove(s->wbuf + s->wpos + rest, s->wbuf + s->wpos,
			s->wlen - s->wpos);
		memcpy(s->wbuf + s->wpos, r->buf + r->sent, rest);
		s->wlen += rest;
	}
	r->len = r->sent = 0;
}

/*
 * Pool thread: sj's reply, sent here (sj->sent) unless it needs the
 * worker (a handle to forget) or is too big for obuf.  The reply cache
 * keeps the outcome first, as done() would (its sets have their locks).
 */
static void session_mjob_send(struct agent_sjob *sj)
{
	int len;

	sj->sent = 0;
	if (sj->forget || !sj->obuf)
		return;
	if (sj->ret < 0)
		bcp_msg_init_reply(&sj->rep, &sj->m, sj->ret);
	len = bcp_encode(sj->obuf, SESS_OBUF, &sj->rep);
	if (len < 0 || (uint32_t)len > sj->rsv)
		return;
	if (sj->cached) {
		session_rc_record(sj->s, &sj->m, sj->ret, &sj->rep);
		sj->cached = 0;
	}
	sj->sent = agent_session_pool_send(sj->s, sj->obuf, (uint32_t)len,
					   &sj->rest);
}

/* Pool thread: the store calls of a blocking store's request. */
static void session_mjob_run(struct agent_job *j)
{
	struct agent_sjob *sj = (struct agent_sjob *)j;
	uint8_t *tail = sj->buf + BCP_FRAME_MAX;
	int32_t *st_rebind = (int32_t *)(tail + SESS_TAIL_MAX);
	int ret;

	sj->t1 = agent_now_ns();
	if (sj->answer) {
		ret = session_rc_answer(sj->s, &sj->m, &sj->oc, &sj->rep,
					&sj->forget);
	} else {
		ret = session_call(sj->s, &sj->m, &sj->rep, tail, st_rebind);
		if (sj->again)
			ret = session_rc_again(sj->s, &sj->m, ret, &sj->rep,
					       &sj->forget);
	}
	sj->ret = ret;
	session_mjob_send(sj);
}

/* Back on the worker: the reply cache, stats, the reply; serve on. */
static void session_mjob_done(struct agent_job *j)
{
	struct agent_sjob *sj = (struct agent_sjob *)j;
	struct agent_session *s = sj->s;

	if (sj->sent) {
		session_answer(s, &sj->m, sj->ret, NULL, sj->t0, sj->t1);
		agent_session_pool_rest(s, &sj->rest);
	} else {
		if (sj->forget)
			agent_store_forget(s->store, sj->forget, 1);
		/* kept before the reply goes out: a replay finds it */
		if (sj->cached)
			session_rc_record(s, &sj->m, sj->ret, &sj->rep);
		session_answer(s, &sj->m, sj->ret, &sj->rep, sj->t0,
			       sj->t1);
	}
	sj->next = s->job_pool;
	s->job_pool = sj;
	s->jobs_live--;
	s->jobs_rsv -= sj->rsv;
	s->kick = 1;
}

/*
 * A request (session_is_store_op()) of a session whose store may block:
 * the frame (len bytes) is copied into a job, whose store calls run on
 * the blocking pool.  0: it is out; -EAGAIN: every job of the session is
 * out (the frame waits); another -errno: to be answered now.
 */
static int session_mjob_start(struct agent_session *s, const uint8_t *frame,
			      size_t len, uint64_t t0)
{
	struct agent_sjob *sj = s->job_pool;
	enum bcp_err why = BCP_E_OK;
	int ret;

	if (!sj)
		return -EAGAIN;
	if (!sj->buf) {
		sj->buf = malloc(SESS_JOB_BUF);
		if (!sj->buf)
			return -ENOMEM;
	}
	if (!sj->obuf)
		sj->obuf = malloc(SESS_OBUF);	/* NULL: the worker replies */
	/* m's names and data point into the frame: into the copy now */
	memcpy(sj->buf, frame, len);
	ret = bcp_decode(sj->buf, len, &sj->m, &why);
	if (ret < 0) {
		agent_err("session %s: a frame that decoded does not decode "
			  "again: %s", s->peer, bcp_err_str(why));
		return ret;
	}
	bcp_msg_init_reply(&sj->rep, &sj->m, 0);
	sj->forget = 0;
	sj->answer = session_rc_begin(s, &sj->m, &sj->oc, &sj->cached,
				      &sj->again);
	s->job_pool = sj->next;
	s->jobs_live++;
	sj->rsv = session_rep_max(&sj->m);
	s->jobs_rsv += sj->rsv;
	sj->hdr = sj->m.hdr;
	sj->t0 = t0;
	sj->t1 = 0;
	agent_pool_submit(&sj->job, session_mjob_run, session_mjob_done, s->w);
	return 0;
}

/*
 * Serve one decoded request m, the frame of len bytes.  -EAGAIN: not now
 * (backpressure).
 */
static int session_dispatch(struct agent_session *s, struct bcp_msg *m,
			    const uint8_t *frame, size_t len, uint64_t t0)
{
	struct agent_store *st = s->store;
	uint8_t tail[SESS_TAIL_MAX];
	struct bcp_msg rep;
	uint64_t t1 = agent_now_ns();	/* the store's call begins */
	struct agent_rc_outcome oc;
	int32_t st_rebind[BCP_REBINDS_MAX];
	int ret = 0, cached = 0, again = 0;
	uint64_t forget = 0;
	uint32_t i;

	bcp_msg_init_reply(&rep, m, 0);
	if ((m->hdr.flags & BCP_HF_REPLAY) &&
	    !(s->features & BCP_FEAT_RESUME)) {
		ret = -EOPNOTSUPP;
		goto out_reply;
	}
	if (agent_store_blocking(st) && session_is_store_op(m->hdr.opcode)) {
		ret = session_mjob_start(s, frame, len, t0);
		if (ret == 0 || ret == -EAGAIN)
			return ret;
		goto out_reply;
	}
	if (session_rc_begin(s, m, &oc, &cached, &again)) {
		ret = session_rc_answer(s, m, &oc, &rep, &forget);
		if (forget)
			agent_store_forget(st, forget, 1);
		goto out_reply;
	}
	switch (m->hdr.opcode) {
	case BCP_OP_PING:
		break;
	case BCP_OP_READDIR:
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
	case BCP_OP_FALLOCATE:
	case BCP_OP_COPY_FILE_RANGE:
		ret = session_job_start(s, m, t0);
		if (ret == 0 || ret == -EAGAIN)
			return ret;
		break;
	case BCP_OP_FORGET:
		for (i = 0; i < m->u.forget_req.count; i++) {
			struct bcp_forget_one f;

			bcp_msg_forget(m, i, &f);
			agent_store_forget(st, f.handle, f.nlookup);
		}
		break;
	case BCP_OP_REGISTER_REGION:
		session_register(s, m);
		agent_stats_op(&s->w->stats, m->hdr.opcode, 0, t0);
		return 0;
	case BCP_OP_UNREGISTER_REGION:
		ret = bcp_xsrv_region_unregister(s->xsrv,
						 m->u.unregion_req.region_id);
		break;
	case BCP_OP_BATCH_PULL:
	case BCP_OP_BATCH_PUSH:
		if ((m->u.batch_req.flags & BCP_BATCH_INLINE) &&
		    !(s->features & BCP_FEAT_BATCH_INLINE)) {
			session_status(s, m, -EINVAL);
			return 0;
		}
		ret = agent_batch_start(s, m);
		if (!ret)
			agent_metrics_req(s->w, m->hdr.opcode, t0, 0);
		return ret;
	default:
		if (session_is_store_op(m->hdr.opcode)) {
			ret = session_call(s, m, &rep, tail, st_rebind);
			break;
		}
		/* HELLO/AUTH again, DATA_* from the host: out of place */
		agent_warn("session %s: %s is not valid here; closing",
			   s->peer, bcp_op_name(m->hdr.opcode));
		s->w->stats.bad_frames++;
		session_status(s, m, -EPROTO);
		agent_session_close(s, 0);
		return 0;
	}
	if (again)
		ret = session_rc_again(s, m, ret, &rep, &forget);
	if (forget)
		agent_store_forget(st, forget, 1);
	/* kept before the reply goes out: a replay finds it */
	if (cached)
		session_rc_record(s, m, ret, &rep);
out_reply:
	session_answer(s, m, ret, &rep, t0, t1);
	return 0;
}

/* One whole frame of len bytes.  -EAGAIN leaves it buffered. */
static int session_frame(struct agent_session *s, uint8_t *frame, size_t len)
{
	uint64_t t0 = agent_now_ns();
	struct bcp_msg m;
	enum bcp_err why = BCP_E_OK;
	int ret;

	ret = bcp_decode(frame, len, &m, &why);
	if (ret < 0) {
		struct bcp_hdr h;

		if (session_soft_err(why) && !bcp_dec_hdr(frame, &h) &&
		    !(h.flags & BCP_HF_REPLY) && s->state == SESS_READY) {
			struct bcp_msg req;

			memset(&req, 0, sizeof(req));
			req.hdr = h;
			agent_stats_op(&s->w->stats, h.opcode, ret, t0);
			return session_status(s, &req, ret) < 0 ? 0 : 0;
		}
		session_bad_frame(s, frame, ret, why);
		return 0;
	}
	if (m.hdr.flags & BCP_HF_REPLY) {
		session_bad_frame(s, frame, -EBADMSG, BCP_E_BAD_FLAGS);
		return 0;
	}
	if ((m.hdr.flags & BCP_HF_FD) &&
	    (!s->is_unix || m.hdr.opcode != BCP_OP_REGISTER_REGION)) {
		session_bad_frame(s, frame, -EBADMSG, BCP_E_BAD_FLAGS);
		return 0;
	}
	if (s->state == SESS_AUTH) {
		if (m.hdr.opcode != BCP_OP_AUTH) {
			agent_warn("session %s: %s before authentication; "
				   "closing", s->peer,
				   bcp_op_name(m.hdr.opcode));
			session_status(s, &m, -EACCES);
			agent_session_close(s, 0);
			return 0;
		}
		session_auth(s, &m);
		return 0;
	}
	return session_dispatch(s, &m, frame, len, t0);
}

void agent_session_parse(struct agent_session *s)
{
	uint32_t pos = 0;

	s->kick = 0;
	while (s->state != SESS_CLOSING && !s->w->stopping &&
	       s->rlen - pos >= BCP_HDR_SIZE) {
		struct bcp_hdr h;
		enum bcp_err why = BCP_E_OK;
		uint32_t flen;
		int ret;

		if (!session_can_take(s))
			break;
		ret = bcp_hdr_check(s->rbuf + pos, BCP_FRAME_MAX, &h, &why);
		if (ret < 0) {
			session_bad_frame(s, s->rbuf + pos, ret, why);
			break;
		}
		flen = BCP_HDR_SIZE + h.payload_len;
		if (s->rlen - pos < flen)
			break;
		if ((h.opcode == BCP_OP_BATCH_PULL ||
		     h.opcode == BCP_OP_BATCH_PUSH) && !s->batch_pool &&
		    s->state == SESS_READY)
			break;	/* max_inflight reached: wait */
		if (session_is_pool_op(s, h.opcode) && !s->job_pool &&
		    s->state == SESS_READY)
			break;	/* its pool calls are out: wait */
		ret = session_frame(s, s->rbuf + pos, flen);
		if (ret == -EAGAIN)
			break;
		pos += flen;
	}
	if (pos) {
		memmove(s->rbuf, s->rbuf + pos, s->rlen - pos);
		s->rlen -= pos;
	}
}

static void session_take_fds(struct agent_session *s, struct msghdr *mh)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		int *fds = (int *)CMSG_DATA(c);
		size_t i, n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			if (s->nfds < SESS_FDS_MAX && s->is_unix) {
				s->fds[s->nfds++] = fds[i];
			} else {
				agent_warn_rl("session %s: unexpected "
					      "descriptor dropped", s->peer);
				close(fds[i]);
			}
		}
	}
}

void agent_session_on_ctl(struct agent_session *s, uint32_t events)
{
	if (events & EPOLLOUT)
		agent_session_flush(s);
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !s->peer_gone &&
	    s->state != SESS_CLOSING) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * SESS_FDS_MAX)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = {
			.iov_base = s->rbuf + s->rlen,
			.iov_len = SESS_RCAP - s->rlen,
		};
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf.buf,
			.msg_controllen = sizeof(cbuf.buf),
		};
		ssize_t n;

		if (!iov.iov_len) {
			/*
			 * Nothing can be read until frames are served; a
			 * hang-up must end the session now, or the
			 * level-triggered HUP spins the worker.
			 */
			if (events & (EPOLLHUP | EPOLLERR)) {
				agent_info("session %s: connection lost with "
					   "requests unread", s->peer);
				agent_session_close(s, 1);
			}
			return;
		}
		n = recvmsg(s->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			agent_info("session %s: connection lost: %s", s->peer,
				   strerror(errno));
			agent_session_close(s, 1);
			return;
		}
		session_take_fds(s, &mh);
		if (mh.msg_flags & MSG_CTRUNC)
			agent_warn_rl("session %s: descriptors truncated",
				      s->peer);
		if (n == 0) {
			if (s->rlen)
				agent_warn("session %s: closed mid-frame",
					   s->peer);
			else
				agent_dbg("session %s: closed by the host",
					  s->peer);
			agent_session_close(s, 1);
			return;
		}
		s->rlen += (uint32_t)n;
		agent_session_parse(s);
	}
}

void agent_session_on_data(struct agent_session *s, uint32_t events)
{
	const char *why;
	int ret;

	ret = bcp_xsrv_progress(s->xsrv, events, &why);
	if (ret < 0) {
		if (ret == -ECONNRESET)
			agent_info("session %s: %s; closing the session",
				   s->peer, why);
		else
			agent_warn("session %s: data connection: %s (%s); "
				   "closing the session", s->peer, why,
				   strerror(-ret));
		s->data_ev = 0;
		agent_session_close(s, 1);
	}
}
