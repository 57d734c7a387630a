/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_xfer_rdma.c - the agent's rdma transport: a librdmacm listener, one
 * reliable-connected queue pair per session, and the agent-initiated
 * one-sided transfers behind bcp_xfer_srv.h's post/kick/progress calls.
 *
 * Set-up.  A session whose HELLO asked for rdma is entered in the table of
 * expected connections (its session id and server nonce).  The host then
 * rdma_connect()s with private data {magic, version, session, mac =
 * HMAC(secret, "bcp-rdma" | Ns | session LE64)}.  The listener (main
 * thread) checks the MAC against the table and rejects a connection that
 * fails; a good one is migrated to the session's own event channel and
 * handed to the session's worker through an eventfd.  The worker creates
 * the completion queue and the queue pair on the device's protection
 * domain and accepts.  Each device is opened once, and every staging area
 * (the workers' slots, allocated once at start-up) is registered with it
 * once: at start-up for the --rdma-listen device, or on a device's first
 * connection.  Nothing is registered per request.
 *
 * Transfers.  bcp_xsrv_post() checks the op against the host's region and
 * queues it here; bcp_xsrv_kick() posts what is queued as one chain of
 * RDMA WRITE (PULL: staging -> host pool) and RDMA READ (PUSH: host pool
 * -> staging) work requests, only the last of them signalled, never more
 * than the send queue holds.  RC completes in order, so a signalled
 * completion completes every op posted before it.
 *
 * Completions: poll (reap while transfers are posted; the worker loop does
 * not sleep), event (the completion channel is armed and its fd is in the
 * worker's epoll), or adaptive (poll for poll_usec after the last activity,
 * then arm the channel and sleep).
 *
 * Failures (a work completion in error, a disconnect, a device removed)
 * return -errno with a static reason; the caller logs it once and tears
 * the session down: the queue pair is destroyed before any op is completed,
 * so no transfer can touch a staging slot after it was given back.
 *
 * Lock: xr.lock guards the device table, the staging areas and the
 * expected-connection table with each entry's state, incoming and
 * req_* fields.  Everything else of a connection is its worker's.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "bcp_auth.h"
#include "bcp_rdma_wire.h"
#include "bcp_xfer_rdma_i.h"

#define XR_DEVS_MAX	8
#define XR_AREAS_MAX	64
#define XR_POLL_BATCH	16
#define XR_RD_ATOM_MAX	16

struct xrdma_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct ibv_mr *mr[XR_AREAS_MAX];
};

struct xrdma_area {
	uint8_t *base;
	size_t len;
};

enum xrdma_state {
	XR_EXPECTING = 1,	/* waiting for the host's connection */
	XR_HANDED,		/* the listener handed one over (eventfd) */
	XR_ACCEPTED,		/* queue pair created, accept sent */
	XR_CONNECTED,		/* established: transfers flow */
	XR_FAILED,		/* torn down; everything fails */
};

struct xrdma_conn {
	struct bcp_xsrv *x;
	uint64_t session;
	uint8_t nonce[BCP_NONCE_LEN];
	/* xr.lock: */
	enum xrdma_state state;
	struct rdma_cm_id *incoming;
	uint8_t req_initiator;		/* the host's conn params */
	uint8_t req_responder;
	struct xrdma_conn *next;	/* expected-connection table */
	/* the worker's: */
	int epfd;			/* cm channel + cq channel + efd */
	int efd;
	struct rdma_event_channel *cm_ch;
	struct rdma_cm_id *id;
	struct xrdma_dev *dev;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t sq_depth;
	uint32_t wr_out;		/* posted, not yet completed */
	int armed;
	uint64_t last_ns;		/* adaptive: last activity */
	struct bcp_xsrv_op *q_head, *q_tail;	/* queued */
	struct bcp_xsrv_op *p_head, *p_tail;	/* posted, in order */
	struct ibv_send_wr *wrs;	/* sq_depth of each, once */
	struct ibv_sge *sges;
};

static struct {
	pthread_mutex_t lock;
	/* lock: */
	struct xrdma_dev devs[XR_DEVS_MAX];
	unsigned int ndevs;
	struct xrdma_area areas[XR_AREAS_MAX];
	unsigned int nareas;
	struct xrdma_conn *expect;
	/* set once by bcp_xrdma_listen(), read-only afterwards: */
	struct bcp_xrdma_cfg cfg;
	uint8_t *secret;
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	struct sockaddr_storage bound;
} xr = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static void xr_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void xr_log(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!xr.cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	xr.cfg.log(level, msg);
}

static uint64_t xr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int xr_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static void xr_addr_str(const struct sockaddr *sa, char *buf, size_t cap)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (!sa) {
		snprintf(buf, cap, "?");
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, cap, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, cap, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, cap, "?");
	}
}

/* ---- devices and staging areas (xr.lock held) ------------------------ */

static int xr_area_reg(struct xrdma_dev *d, unsigned int i)
{
	d->mr[i] = ibv_reg_mr(d->pd, xr.areas[i].base, xr.areas[i].len,
			      IBV_ACCESS_LOCAL_WRITE);
	if (!d->mr[i]) {
		int ret = -errno;

		xr_log(LOG_ERR, "rdma: cannot register %zu bytes of staging "
		       "memory with %s: %s", xr.areas[i].len,
		       ibv_get_device_name(d->ctx->device), strerror(-ret));
		return ret;
	}
	return 0;
}

/* The device of ctx, opened (PD, staging registered) on first use. */
static struct xrdma_dev *xr_dev_get_locked(struct ibv_context *ctx)
{
	struct xrdma_dev *d;
	unsigned int i;

	for (i = 0; i < xr.ndevs; i++)
		if (xr.devs[i].ctx == ctx)
			return &xr.devs[i];
	if (xr.ndevs == XR_DEVS_MAX) {
		xr_log(LOG_ERR, "rdma: more than %d devices", XR_DEVS_MAX);
		return NULL;
	}
	d = &xr.devs[xr.ndevs];
	memset(d, 0, sizeof(*d));
	d->ctx = ctx;
	if (ibv_query_device(ctx, &d->attr)) {
		xr_log(LOG_ERR, "rdma: cannot query %s: %s",
		       ibv_get_device_name(ctx->device), strerror(errno));
		return NULL;
	}
	d->pd = ibv_alloc_pd(ctx);
	if (!d->pd) {
		xr_log(LOG_ERR, "rdma: cannot allocate a protection domain "
		       "on %s: %s", ibv_get_device_name(ctx->device),
		       strerror(errno));
		return NULL;
	}
	for (i = 0; i < xr.nareas; i++)
		if (xr_area_reg(d, i) < 0)
			goto out_dereg;
	xr_log(LOG_INFO, "rdma: device %s: %u staging area(s) registered",
	       ibv_get_device_name(ctx->device), xr.nareas);
	xr.ndevs++;
	return d;

out_dereg:
	while (i-- > 0)
		ibv_dereg_mr(d->mr[i]);
	ibv_dealloc_pd(d->pd);
	memset(d, 0, sizeof(*d));
	return NULL;
}

int bcp_xrdma_staging_add(void *base, size_t len)
{
	unsigned int i;
	int ret = 0;

	pthread_mutex_lock(&xr.lock);
	if (xr.nareas == XR_AREAS_MAX) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	xr.areas[xr.nareas].base = base;
	xr.areas[xr.nareas].len = len;
	for (i = 0; i < xr.ndevs; i++) {
		ret = xr_area_reg(&xr.devs[i], xr.nareas);
		if (ret < 0) {
			while (i-- > 0)
				ibv_dereg_mr(xr.devs[i].mr[xr.nareas]);
			goto out_unlock;
		}
	}
	xr.nareas++;
out_unlock:
	pthread_mutex_unlock(&xr.lock);
	return ret;
}

/* The lkey of [p, p + len) in dev, or -EFAULT outside every area. */
static int64_t xr_lkey(const struct xrdma_dev *d, const void *p, size_t len)
{
	const uint8_t *b = p;
	unsigned int i;

	/* areas only grow before the first connection; no lock needed */
	for (i = 0; i < xr.nareas; i++)
		if (b >= xr.areas[i].base &&
		    len <= xr.areas[i].len &&
		    (size_t)(b - xr.areas[i].base) <= xr.areas[i].len - len)
			return d->mr[i]->lkey;
	return -EFAULT;
}

/* ---- listener (main thread) ------------------------------------------ */

int bcp_xrdma_addr_parse(const char *s, struct sockaddr_storage *ss)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *port = NULL, *colon;
	unsigned long p = BCP_DEFAULT_PORT;
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	size_t hl;
	char *end;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		colon = strchr(s, ']');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s - 1);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if (colon[1] == ':')
			port = colon + 2;
		else if (colon[1])
			return -EINVAL;
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') == colon) {
			hl = (size_t)(colon - s);
			port = colon + 1;
		} else {
			hl = strlen(s);
		}
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = '\0';
	}
	if (port) {
		errno = 0;
		p = strtoul(port, &end, 10);
		if (errno || end == port || *end || p > 65535)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)p);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)p);
		return 0;
	}
	return -EINVAL;
}

int bcp_xrdma_listen(const struct bcp_xrdma_cfg *cfg, char *err,
		     size_t errlen)
{
	struct sockaddr_storage ss;
	int ret;

	if (xr.lch) {
		snprintf(err, errlen, "only one rdma listener is supported");
		return -EBUSY;
	}
	if (bcp_xrdma_addr_parse(cfg->listen, &ss) < 0) {
		snprintf(err, errlen, "bad rdma address '%s': give ADDR[:PORT]"
			 " (IPv4, or IPv6 in brackets)", cfg->listen);
		return -EINVAL;
	}
	xr.cfg = *cfg;
	xr.cfg.listen = NULL;
	if (!xr.cfg.queue_depth)
		xr.cfg.queue_depth = 64;
	xr.secret = malloc(cfg->secret_len + 1);
	if (!xr.secret) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (cfg->secret_len)
		memcpy(xr.secret, cfg->secret, cfg->secret_len);
	xr.cfg.secret = xr.secret;

	xr.lch = rdma_create_event_channel();
	if (!xr.lch) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the rdma connection "
			 "manager: %s (is rdma_ucm loaded?)", strerror(-ret));
		goto out_free;
	}
	ret = xr_nonblock(xr.lch->fd);
	if (ret < 0)
		goto out_err;
	if (rdma_create_id(xr.lch, &xr.lid, NULL, RDMA_PS_TCP)) {
		ret = -errno;
		goto out_err;
	}
	if (rdma_bind_addr(xr.lid, (struct sockaddr *)&ss)) {
		ret = -errno;
		snprintf(err, errlen, "cannot bind rdma to %s: %s (no RDMA "
			 "device has this address?)", cfg->listen,
			 strerror(-ret));
		goto out_id;
	}
	if (rdma_listen(xr.lid, 64)) {
		ret = -errno;
		snprintf(err, errlen, "cannot listen for rdma on %s: %s",
			 cfg->listen, strerror(-ret));
		goto out_id;
	}
	memcpy(&xr.bound, rdma_get_local_addr(xr.lid),
	       ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					 sizeof(struct sockaddr_in6));
	if (xr.lid->verbs) {
		/* bound to one device: register the staging now */
		pthread_mutex_lock(&xr.lock);
		if (!xr_dev_get_locked(xr.lid->verbs)) {
			pthread_mutex_unlock(&xr.lock);
			ret = -ENODEV;
			snprintf(err, errlen,
				 "cannot set up the rdma device of %s",
				 cfg->listen);
			goto out_id;
		}
		pthread_mutex_unlock(&xr.lock);
	}
	return xr.lch->fd;

out_err:
	snprintf(err, errlen, "cannot set up the rdma listener: %s",
		 strerror(-ret));
	goto out_channel;
out_id:
	rdma_destroy_id(xr.lid);
	xr.lid = NULL;
out_channel:
	rdma_destroy_event_channel(xr.lch);
	xr.lch = NULL;
out_free:
	free(xr.secret);
	xr.secret = NULL;
	return ret;
}

int bcp_xrdma_announce(const struct sockaddr *local, uint8_t addr[16],
		       uint16_t *port)
{
	const struct sockaddr *sa = (const struct sockaddr *)&xr.bound;
	static const uint8_t any6[16];

	if (!xr.lid)
		return -ENODEV;
	if (sa->sa_family == AF_INET &&
	    ((const struct sockaddr_in *)sa)->sin_addr.s_addr == INADDR_ANY)
		sa = local;
	else if (sa->sa_family == AF_INET6 &&
		 !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, any6,
			 16))
		sa = local;
	if (!sa)
		return -ENODEV;
	memset(addr, 0, 16);
	if (sa->sa_family == AF_INET) {
		addr[10] = 0xff;
		addr[11] = 0xff;
		memcpy(addr + 12,
		       &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	} else {
		return -ENODEV;
	}
	*port = ntohs(rdma_get_src_port(xr.lid));
	return 0;
}

/* A connection request: check its private data, hand it to its session. */
static void xr_listen_request(struct rdma_cm_id *id,
			      const struct rdma_conn_param *p)
{
	struct bcp_rdma_priv pd;
	struct xrdma_conn *c;
	uint8_t mac[BCP_MAC_LEN], le[8];
	char peer[64];
	const char *why;
	uint64_t one = 1;
	unsigned int i;

	xr_addr_str(rdma_get_peer_addr(id), peer, sizeof(peer));
	if (p->private_data_len < BCP_RDMA_PRIV_LEN ||
	    bcp_rdma_priv_dec(p->private_data, &pd) < 0) {
		why = "no or bad private data";
		goto out_reject;
	}
	for (i = 0; i < 8; i++)
		le[i] = (uint8_t)(pd.session >> (8 * i));
	pthread_mutex_lock(&xr.lock);
	for (c = xr.expect; c; c = c->next)
		if (c->session == pd.session && c->state == XR_EXPECTING)
			break;
	if (!c) {
		pthread_mutex_unlock(&xr.lock);
		why = "it names no session waiting for one";
		goto out_reject;
	}
	if (bcp_auth_mac(xr.cfg.secret, xr.cfg.secret_len,
			 BCP_AUTH_LABEL_RDMA, c->nonce, BCP_NONCE_LEN, le,
			 sizeof(le), mac) < 0 ||
	    !bcp_auth_mac_equal(mac, pd.mac)) {
		pthread_mutex_unlock(&xr.lock);
		why = "authentication failed";
		goto out_reject;
	}
	if (rdma_migrate_id(id, c->cm_ch)) {
		pthread_mutex_unlock(&xr.lock);
		xr_log(LOG_ERR, "rdma connection from %s: cannot migrate it "
		       "to its session: %s", peer, strerror(errno));
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	c->incoming = id;
	c->req_initiator = p->initiator_depth;
	c->req_responder = p->responder_resources;
	c->state = XR_HANDED;
	if (write(c->efd, &one, sizeof(one)) < 0)
		xr_log(LOG_DEBUG, "rdma: eventfd: %s", strerror(errno));
	pthread_mutex_unlock(&xr.lock);
	return;

out_reject:
	xr_log(LOG_WARNING, "rdma connection from %s refused: %s", peer, why);
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
}

void bcp_xrdma_listen_event(void)
{
	struct rdma_cm_event *ev;

	while (xr.lch && !rdma_get_cm_event(xr.lch, &ev)) {
		struct rdma_conn_param p = ev->param.conn;
		struct rdma_cm_id *id = ev->id;
		uint8_t priv[BCP_RDMA_PRIV_LEN];
		enum rdma_cm_event_type type = ev->event;

		if (type == RDMA_CM_EVENT_CONNECT_REQUEST &&
		    p.private_data_len >= BCP_RDMA_PRIV_LEN) {
			memcpy(priv, p.private_data, BCP_RDMA_PRIV_LEN);
			p.private_data = priv;
		}
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
			xr_listen_request(id, &p);
		else if (type == RDMA_CM_EVENT_DEVICE_REMOVAL)
			xr_log(LOG_WARNING, "rdma: the listener's device was "
			       "removed");
	}
}

void bcp_xrdma_shutdown(void)
{
	unsigned int i, j;

	if (xr.lid)
		rdma_destroy_id(xr.lid);
	xr.lid = NULL;
	if (xr.lch)
		rdma_destroy_event_channel(xr.lch);
	xr.lch = NULL;
	pthread_mutex_lock(&xr.lock);
	for (i = 0; i < xr.ndevs; i++) {
		for (j = 0; j < xr.nareas; j++)
			if (xr.devs[i].mr[j])
				ibv_dereg_mr(xr.devs[i].mr[j]);
		ibv_dealloc_pd(xr.devs[i].pd);
	}
	xr.ndevs = 0;
	xr.nareas = 0;
	pthread_mutex_unlock(&xr.lock);
	free(xr.secret);
	xr.secret = NULL;
}

/* ---- one session's connection (its worker) --------------------------- */

struct xrdma_conn *xrdma_conn_create(struct bcp_xsrv *x, uint64_t session,
				     const uint8_t nonce[BCP_NONCE_LEN],
				     int *err)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct xrdma_conn *c;
	int ret;

	if (!xr.lch) {
		*err = -EOPNOTSUPP;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	c->x = x;
	c->session = session;
	memcpy(c->nonce, nonce, BCP_NONCE_LEN);
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0)
		goto out_errno;
	c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->efd < 0)
		goto out_errno_epfd;
	c->cm_ch = rdma_create_event_channel();
	if (!c->cm_ch)
		goto out_errno_efd;
	ret = xr_nonblock(c->cm_ch->fd);
	if (ret < 0)
		goto out_channel;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->efd, &ev) < 0 ||
	    epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->cm_ch->fd, &ev) < 0)
		goto out_errno_channel;
	c->state = XR_EXPECTING;
	pthread_mutex_lock(&xr.lock);
	c->next = xr.expect;
	xr.expect = c;
	pthread_mutex_unlock(&xr.lock);
	return c;

out_errno_channel:
	ret = -errno;
out_channel:
	rdma_destroy_event_channel(c->cm_ch);
	close(c->efd);
	close(c->epfd);
	free(c);
	*err = ret;
	return NULL;
out_errno_efd:
	ret = -errno;
	close(c->efd);
	close(c->epfd);
	free(c);
	*err = ret;
	return NULL;
out_errno_epfd:
	ret = -errno;
	close(c->epfd);
	free(c);
	*err = ret;
	return NULL;
out_errno:
	*err = -errno;
	free(c);
	return NULL;
}

/* Drop c from the expected-connection table; reject a handed-over id. */
static void xr_unexpect(struct xrdma_conn *c)
{
	struct xrdma_conn **pp;
	struct rdma_cm_id *id = NULL;

	pthread_mutex_lock(&xr.lock);
	for (pp = &xr.expect; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	c->next = NULL;
	if (c->state == XR_HANDED) {
		id = c->incoming;
		c->incoming = NULL;
	}
	pthread_mutex_unlock(&xr.lock);
	if (id) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
	}
}

static void xr_set_state(struct xrdma_conn *c, enum xrdma_state to)
{
	pthread_mutex_lock(&xr.lock);
	c->state = to;
	pthread_mutex_unlock(&xr.lock);
}

static void xr_complete_list(struct xrdma_conn *c, struct bcp_xsrv_op *op,
			     int err)
{
	struct bcp_xsrv_op *next;

	for (; op; op = next) {
		next = op->next;
		op->next = NULL;
		bcp_xsrv_complete_i(c->x, op, err);
	}
}

void xrdma_fail(struct xrdma_conn *c, int err)
{
	struct bcp_xsrv_op *p, *q;

	if (!c)
		return;
	if (c->id && c->state >= XR_ACCEPTED && c->state != XR_FAILED)
		rdma_disconnect(c->id);
	/* no transfer may touch a slot once it is given back */
	if (c->qp) {
		rdma_destroy_qp(c->id);
		c->qp = NULL;
	}
	if (c->state != XR_FAILED) {
		xr_unexpect(c);
		xr_set_state(c, XR_FAILED);
	}
	p = c->p_head;
	q = c->q_head;
	c->p_head = c->p_tail = NULL;
	c->q_head = c->q_tail = NULL;
	c->wr_out = 0;
	xr_complete_list(c, p, err);
	xr_complete_list(c, q, err);
}

void xrdma_conn_destroy(struct xrdma_conn *c)
{
	if (!c)
		return;
	xrdma_fail(c, -ECONNABORTED);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cch)
		ibv_destroy_comp_channel(c->cch);
	if (c->id)
		rdma_destroy_id(c->id);
	rdma_destroy_event_channel(c->cm_ch);
	close(c->efd);
	close(c->epfd);
	free(c->wrs);
	free(c->sges);
	free(c);
}

int xrdma_conn_ready(struct xrdma_conn *c)
{
	int ret;

	pthread_mutex_lock(&xr.lock);
	ret = c->state == XR_ACCEPTED || c->state == XR_CONNECTED ? 0 :
	      -ENOTCONN;
	pthread_mutex_unlock(&xr.lock);
	return ret;
}

int xrdma_fd(const struct xrdma_conn *c)
{
	return c->epfd;
}

/*
 * Ops are posted to the queue pair in the order they were queued and an RC
 * queue pair completes them in that order, so the oldest one is the head
 * of the posted list, or of the queue when nothing is on the device.
 */
const struct bcp_xsrv_op *xrdma_oldest(const struct xrdma_conn *c)
{
	return c->p_head ? c->p_head : c->q_head;
}

int xrdma_post(struct xrdma_conn *c, struct bcp_xsrv_op *op)
{
	if (c->state == XR_FAILED || !c->dev)
		return -ENOTCONN;
	if (xr_lkey(c->dev, op->local, op->len) < 0)
		return -EFAULT;
	op->next = NULL;
	if (c->q_tail)
		c->q_tail->next = op;
	else
		c->q_head = op;
	c->q_tail = op;
	return 0;
}

/* The worker's half of the hand-over: queue pair, accept.  0 or -errno. */
static int xr_accept(struct xrdma_conn *c, const char **why)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	struct rdma_cm_id *id;
	struct xrdma_dev *d;
	uint8_t init_depth, resp_res;
	uint32_t depth;
	int ret;

	pthread_mutex_lock(&xr.lock);
	id = c->incoming;
	if (c->state != XR_HANDED || !id) {
		pthread_mutex_unlock(&xr.lock);
		return 0;
	}
	c->incoming = NULL;
	d = xr_dev_get_locked(id->verbs);
	init_depth = c->req_responder;
	resp_res = c->req_initiator;
	pthread_mutex_unlock(&xr.lock);
	xr_unexpect(c);
	c->id = id;
	*why = "cannot set up the rdma connection";
	if (!d) {
		ret = -ENODEV;
		goto out_reject;
	}
	c->dev = d;
	/*
	 * Our RDMA READs are bounded by what the host's side takes and by
	 * this device's limit; without one outstanding READ a PUSH can
	 * never complete.
	 */
	if (init_depth > d->attr.max_qp_init_rd_atom)
		init_depth = (uint8_t)d->attr.max_qp_init_rd_atom;
	if (init_depth > XR_RD_ATOM_MAX)
		init_depth = XR_RD_ATOM_MAX;
	if (resp_res > d->attr.max_qp_rd_atom)
		resp_res = (uint8_t)d->attr.max_qp_rd_atom;
	if (!init_depth) {
		*why = "the host takes no RDMA READ";
		ret = -EPROTO;
		goto out_reject;
	}
	depth = xr.cfg.queue_depth;
	if (depth > (uint32_t)d->attr.max_qp_wr)
		depth = (uint32_t)d->attr.max_qp_wr;
	if (depth + 1 > (uint32_t)d->attr.max_cqe)
		depth = (uint32_t)d->attr.max_cqe - 1;
	c->sq_depth = depth ? depth : 1;
	c->wrs = calloc(c->sq_depth, sizeof(*c->wrs));
	c->sges = calloc(c->sq_depth, sizeof(*c->sges));
	if (!c->wrs || !c->sges) {
		ret = -ENOMEM;
		goto out_reject;
	}
	c->cch = ibv_create_comp_channel(id->verbs);
	if (!c->cch) {
		ret = -errno;
		*why = "cannot create a completion channel";
		goto out_reject;
	}
	ret = xr_nonblock(c->cch->fd);
	if (ret < 0)
		goto out_reject;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->cch->fd, &ev) < 0) {
		ret = -errno;
		goto out_reject;
	}
	c->cq = ibv_create_cq(id->verbs, (int)c->sq_depth + 1, c, c->cch, 0);
	if (!c->cq) {
		ret = -errno;
		*why = "cannot create a completion queue";
		goto out_reject;
	}
	if (xr.cfg.completion != BCP_XSRV_CQ_POLL) {
		if (ibv_req_notify_cq(c->cq, 0)) {
			ret = -EIO;
			*why = "cannot arm the completion queue";
			goto out_reject;
		}
		c->armed = 1;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = c->sq_depth;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.sq_sig_all = 0;
	if (rdma_create_qp(id, d->pd, &qa)) {
		ret = -errno;
		*why = "cannot create a queue pair";
		goto out_reject;
	}
	c->qp = id->qp;
	memset(&cp, 0, sizeof(cp));
	cp.initiator_depth = init_depth;
	cp.responder_resources = resp_res;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_accept(id, &cp)) {
		ret = -errno;
		*why = "rdma_accept failed";
		goto out_qp;
	}
	xr_set_state(c, XR_ACCEPTED);
	return 0;

out_qp:
	rdma_destroy_qp(id);
	c->qp = NULL;
out_reject:
	xr_log(LOG_ERR, "rdma session %016" PRIx64 ": %s: %s", c->session,
	       *why, strerror(-ret));
	rdma_reject(id, NULL, 0);
	xr_set_state(c, XR_FAILED);
	return ret;
}

/* Post what is queued, as far as the send queue has room.  0 or -errno. */
static int xr_post_queued(struct xrdma_conn *c, int *posted,
			  const char **why)
{
	struct ibv_send_wr *bad = NULL;
	struct bcp_xsrv_op *op, *last = NULL;
	uint32_t n = 0;
	int ret;

	for (op = c->q_head; op && c->wr_out + n < c->sq_depth;
	     op = op->next) {
		struct ibv_send_wr *wr = &c->wrs[n];
		struct ibv_sge *sg = &c->sges[n];

		sg->addr = (uintptr_t)op->local;
		sg->length = op->len;
		sg->lkey = (uint32_t)xr_lkey(c->dev, op->local, op->len);
		memset(wr, 0, sizeof(*wr));
		wr->wr_id = (uintptr_t)op;
		wr->sg_list = sg;
		wr->num_sge = 1;
		wr->opcode = op->dir == BCP_XSRV_WRITE ? IBV_WR_RDMA_WRITE :
							 IBV_WR_RDMA_READ;
		wr->wr.rdma.remote_addr = op->raddr;
		wr->wr.rdma.rkey = op->rkey;
		if (n)
			c->wrs[n - 1].next = wr;
		last = op;
		n++;
	}
	if (!n)
		return 0;
	c->wrs[n - 1].send_flags = IBV_SEND_SIGNALED;
	ret = ibv_post_send(c->qp, c->wrs, &bad);
	if (ret) {
		*why = "cannot post rdma work requests";
		return ret > 0 ? -ret : -EIO;
	}
	/* move q_head..last to the posted list, in order */
	if (c->p_tail)
		c->p_tail->next = c->q_head;
	else
		c->p_head = c->q_head;
	c->p_tail = last;
	c->q_head = last->next;
	if (!c->q_head)
		c->q_tail = NULL;
	last->next = NULL;
	c->wr_out += n;
	*posted = 1;
	return 0;
}

/* Reap the completion queue.  Returns ops completed, or -errno. */
static int xr_poll(struct xrdma_conn *c, const char **why)
{
	struct ibv_wc wc[XR_POLL_BATCH];
	int n, i, done = 0;

	for (;;) {
		n = ibv_poll_cq(c->cq, XR_POLL_BATCH, wc);
		if (n < 0) {
			*why = "cannot poll the completion queue";
			return -EIO;
		}
		for (i = 0; i < n; i++) {
			struct bcp_xsrv_op *op, *upto;

			if (wc[i].status != IBV_WC_SUCCESS) {
				*why = ibv_wc_status_str(wc[i].status);
				return wc[i].status == IBV_WC_REM_ACCESS_ERR ?
				       -EFAULT : -EIO;
			}
			upto = (struct bcp_xsrv_op *)(uintptr_t)wc[i].wr_id;
			do {
				op = c->p_head;
				if (!op) {
					*why = "completion of nothing posted";
					return -EPROTO;
				}
				c->p_head = op->next;
				if (!c->p_head)
					c->p_tail = NULL;
				op->next = NULL;
				c->wr_out--;
				done++;
				bcp_xsrv_complete_i(c->x, op, (int)op->len);
			} while (op != upto);
		}
		if (n < XR_POLL_BATCH)
			return done;
	}
}

/* Connection manager events of the session's id.  0 or -errno. */
static int xr_cm_events(struct xrdma_conn *c, const char **why)
{
	struct rdma_cm_event *ev;
	int ret = 0;

	while (!rdma_get_cm_event(c->cm_ch, &ev)) {
		enum rdma_cm_event_type type = ev->event;

		rdma_ack_cm_event(ev);
		if (ret < 0 || c->state == XR_FAILED)
			continue;
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c->state != XR_ACCEPTED)
				break;
			xr_set_state(c, XR_CONNECTED);
			xr_log(LOG_INFO, "rdma session %016" PRIx64
			       " connected on %s (queue depth %u)",
			       c->session,
			       ibv_get_device_name(c->id->verbs->device),
			       c->sq_depth);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			*why = "rdma connection closed by the host";
			ret = -ECONNRESET;
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			*why = "rdma device removed";
			ret = -ENODEV;
			break;
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			*why = "rdma connection failed to establish";
			ret = -ECONNREFUSED;
			break;
		default:
			break;
		}
	}
	return ret;
}

int xrdma_kick(struct xrdma_conn *c, const char **why)
{
	int posted = 0, done = 0, ret;
	uint64_t now;

	if (c->state != XR_CONNECTED)
		return 0;
	if (c->q_head) {
		ret = xr_post_queued(c, &posted, why);
		if (ret < 0)
			return ret;
	}
	if (!c->wr_out)
		return 0;
	switch (xr.cfg.completion) {
	case BCP_XSRV_CQ_POLL:
		done = xr_poll(c, why);
		if (done < 0)
			return done;
		return 1;
	case BCP_XSRV_CQ_EVENT:
		return 0;
	case BCP_XSRV_CQ_ADAPTIVE:
		break;
	}
	now = xr_now_ns();
	if (posted && !c->last_ns)
		c->last_ns = now;
	done = xr_poll(c, why);
	if (done < 0)
		return done;
	if (done || posted)
		c->last_ns = now;
	if (c->wr_out && now - c->last_ns < xr.cfg.poll_usec * 1000ull)
		return 1;
	c->last_ns = 0;
	if (c->wr_out && !c->armed) {
		/* the window closed: sleep on the channel from now on */
		if (ibv_req_notify_cq(c->cq, 0)) {
			*why = "cannot arm the completion queue";
			return -EIO;
		}
		c->armed = 1;
		done = xr_poll(c, why);
		if (done < 0)
			return done;
	}
	return done > 0;
}

int xrdma_progress(struct xrdma_conn *c, const char **why)
{
	struct ibv_cq *cq;
	uint64_t v;
	void *ctx;
	int ret, done;

	if (read(c->efd, &v, sizeof(v)) == sizeof(v)) {
		ret = xr_accept(c, why);
		if (ret < 0)
			return ret;
	}
	ret = xr_cm_events(c, why);
	if (ret < 0)
		return ret;
	if (!c->cq || c->state == XR_FAILED)
		return 0;
	while (c->cch && !ibv_get_cq_event(c->cch, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		c->armed = 0;
	}
	done = xr_poll(c, why);
	if (done < 0)
		return done;
	if (!c->armed && xr.cfg.completion != BCP_XSRV_CQ_POLL &&
	    (xr.cfg.completion == BCP_XSRV_CQ_EVENT || !done || !c->wr_out)) {
		if (ibv_req_notify_cq(c->cq, 0)) {
			*why = "cannot arm the completion queue";
			return -EIO;
		}
		c->armed = 1;
		done = xr_poll(c, why);
		if (done < 0)
			return done;
	}
	if (done && xr.cfg.completion == BCP_XSRV_CQ_ADAPTIVE)
		c->last_ns = xr_now_ns();
	return 0;
}
