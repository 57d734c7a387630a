/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_client_rdma.c - the host side of the rdma transport.
 *
 * The agent announced an RDMA address and port in HELLO.  We resolve it,
 * create a reliable-connected queue pair on the device that reaches it,
 * register the buffer pool as a memory region the agent may read and
 * write (IBV_ACCESS_LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE), and
 * rdma_connect() with private data proving the secret for this session
 * (bcp_rdma_wire.h).  Once established, REGISTER_REGION {kind rdma, addr,
 * rkey, length} tells the agent where the pool is.  From then on the host
 * posts nothing: the agent moves every byte with RDMA WRITE (PULL) and
 * RDMA READ (PUSH), and the BATCH reply on the control connection says
 * when it is done.
 *
 * A thread watches the connection manager: a disconnect (the agent went
 * away, the link or device failed) breaks the session once, with its cause,
 * so every pending request fails and the owner may reconnect.
 *
 * c->data holds one end of a socketpair that nobody writes, the other end
 * (wake) stays open and silent until teardown: shutting c->data down
 * (bcp_client_break, bcp_client_destroy) wakes the watcher thread, as it
 * wakes the tcp transport's data thread.  Were the other end closed, the
 * watcher would see end-of-file at once and watch nothing.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "bcp_client_i.h"
#include "bcp_rdma_wire.h"

#define CRDMA_RD_ATOM_MAX	16

struct bcp_crdma {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	int connected;
	int wake;		/* the socketpair's other end, never written */
};

int bcp_client_rdma_available(void)
{
	struct ibv_device **l;
	int n = 0;

	l = ibv_get_device_list(&n);
	if (l)
		ibv_free_device_list(l);
	return n > 0;
}

static uint64_t crdma_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Wait for the next event of our id and check it is want.  0, or -errno
 * with err set (the event that came instead, or -ETIMEDOUT).
 */
static int crdma_wait(struct bcp_client *c, enum rdma_cm_event_type want,
		      const char *step, char *err, size_t errlen)
{
	struct bcp_crdma *r = c->rdma;
	uint64_t end = crdma_ms() + (uint64_t)c->opts.timeout_ms;
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type got;
	struct pollfd pfd = { .fd = r->ch->fd, .events = POLLIN };
	int status, ret;

	for (;;) {
		uint64_t now = crdma_ms();

		if (!rdma_get_cm_event(r->ch, &ev))
			break;
		if (errno != EAGAIN) {
			ret = -errno;
			snprintf(err, errlen, "rdma %s: %s", step,
				 strerror(-ret));
			return ret;
		}
		if (now >= end) {
			snprintf(err, errlen,
				 "rdma %s with agent at %s timed out after %d ms",
				 step, c->addr_str, c->opts.timeout_ms);
			return -ETIMEDOUT;
		}
		poll(&pfd, 1, (int)(end - now));
	}
	got = ev->event;
	status = ev->status;
	rdma_ack_cm_event(ev);
	if (got == want)
		return 0;
	switch (got) {
	case RDMA_CM_EVENT_REJECTED:
		snprintf(err, errlen,
			 "agent at %s refused the rdma connection (its log says why)",
			 c->addr_str);
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		snprintf(err, errlen,
			 "rdma %s with agent at %s failed: %s (%s)", step,
			 c->addr_str, rdma_event_str(got),
			 strerror(status < 0 ? -status : EHOSTUNREACH));
		return -EHOSTUNREACH;
	default:
		snprintf(err, errlen, "rdma %s with agent at %s: unexpected %s",
			 step, c->addr_str, rdma_event_str(got));
		return -EPROTO;
	}
}

/* The agent's announced address as a socket address.  0 or -EINVAL. */
static int crdma_agent_addr(const struct bcp_hello_rep *h,
			    struct sockaddr_storage *ss)
{
	static const uint8_t v4map[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t zero[16];

	memset(ss, 0, sizeof(*ss));
	if (!memcmp(h->rdma_addr, zero, 16) || !h->rdma_port)
		return -EINVAL;
	if (!memcmp(h->rdma_addr, v4map, 12)) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(h->rdma_port);
		memcpy(&in->sin_addr, h->rdma_addr + 12, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(h->rdma_port);
		memcpy(&in6->sin6_addr, h->rdma_addr, 16);
	}
	return 0;
}

static int crdma_connect(struct bcp_client *c, char *err, size_t errlen)
{
	struct bcp_crdma *r = c->rdma;
	struct sockaddr_storage ss;
	struct ibv_device_attr da;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct bcp_rdma_priv pd;
	uint8_t priv[BCP_RDMA_PRIV_LEN], le[8];
	char host[INET6_ADDRSTRLEN + 8];
	int ret;

	if (crdma_agent_addr(&c->hello, &ss) < 0) {
		snprintf(err, errlen, "agent at %s announced no rdma address",
			 c->addr_str);
		return -EPROTO;
	}
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr,
			  host, sizeof(host));
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
			  host, sizeof(host));
	if (rdma_resolve_addr(r->id, NULL, (struct sockaddr *)&ss,
			      c->opts.timeout_ms)) {
		ret = -errno;
		snprintf(err, errlen, "cannot resolve the agent's rdma address "
			 "%s: %s", host, strerror(-ret));
		return ret;
	}
	ret = crdma_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED, "address resolution",
			 err, errlen);
	if (ret < 0)
		return ret;
	if (rdma_resolve_route(r->id, c->opts.timeout_ms)) {
		ret = -errno;
		snprintf(err, errlen, "cannot resolve an rdma route to %s: %s",
			 host, strerror(-ret));
		return ret;
	}
	ret = crdma_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED, "route resolution",
			 err, errlen);
	if (ret < 0)
		return ret;
	if (ibv_query_device(r->id->verbs, &da)) {
		ret = -errno;
		snprintf(err, errlen, "cannot query the rdma device: %s",
			 strerror(-ret));
		return ret;
	}
	r->pd = ibv_alloc_pd(r->id->verbs);
	if (!r->pd) {
		ret = -errno;
		snprintf(err, errlen, "cannot allocate an rdma protection "
			 "domain: %s", strerror(-ret));
		return ret;
	}
	r->mr = ibv_reg_mr(r->pd, c->pool_base, c->pool_len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_WRITE);
	if (!r->mr) {
		ret = -errno;
		snprintf(err, errlen,
			 "cannot register the %zu byte buffer pool for rdma: %s (check ulimit -l)",
			 c->pool_len, strerror(-ret));
		return ret;
	}
	r->cq = ibv_create_cq(r->id->verbs, 2, NULL, NULL, 0);
	if (!r->cq) {
		ret = -errno;
		snprintf(err, errlen, "cannot create an rdma completion queue: "
			 "%s", strerror(-ret));
		return ret;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = r->cq;
	qa.recv_cq = r->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 1;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(r->id, r->pd, &qa)) {
		ret = -errno;
		snprintf(err, errlen, "cannot create an rdma queue pair: %s",
			 strerror(-ret));
		return ret;
	}

	bcp_rdma_put_le(le, c->hello.session, 8);
	pd.session = c->hello.session;
	ret = bcp_auth_mac(c->secret, c->secret_len, BCP_AUTH_LABEL_RDMA,
			   c->hello.nonce, BCP_NONCE_LEN, le, sizeof(le),
			   pd.mac);
	if (ret < 0) {
		snprintf(err, errlen, "cannot compute the rdma MAC: %s",
			 strerror(-ret));
		return ret;
	}
	bcp_rdma_priv_enc(priv, &pd);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = priv;
	cp.private_data_len = sizeof(priv);
	/* the agent READs from us: let it have as many as the device can */
	cp.responder_resources = (uint8_t)(da.max_qp_rd_atom <
					   CRDMA_RD_ATOM_MAX ?
					   da.max_qp_rd_atom :
					   CRDMA_RD_ATOM_MAX);
	cp.initiator_depth = (uint8_t)(da.max_qp_init_rd_atom <
				       CRDMA_RD_ATOM_MAX ?
				       da.max_qp_init_rd_atom :
				       CRDMA_RD_ATOM_MAX);
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(r->id, &cp)) {
		ret = -errno;
		snprintf(err, errlen, "cannot connect over rdma to %s: %s",
			 host, strerror(-ret));
		return ret;
	}
	ret = crdma_wait(c, RDMA_CM_EVENT_ESTABLISHED, "connection", err,
			 errlen);
	if (ret < 0)
		return ret;
	r->connected = 1;
	bcp_client_logf(LOG_DEBUG, "rdma connection to %s:%u on %s "
			"established", host, c->hello.rdma_port,
			ibv_get_device_name(r->id->verbs->device));
	return 0;
}

int bcp_client_rdma_setup(struct bcp_client *c, char *err, size_t errlen)
{
	struct bcp_crdma *r;
	int sp[2], ret;

	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->wake = -1;
	c->rdma = r;
	/* on a reconnect the pool exists: only its registration is new */
	if (!c->pool_base)
		c->pool_base = mmap(NULL, c->pool_len,
				    PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->pool_base == MAP_FAILED) {
		ret = -errno;
		c->pool_base = NULL;
		snprintf(err, errlen, "cannot map the buffer pool: %s",
			 strerror(-ret));
		goto out_teardown;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		ret = -errno;
		snprintf(err, errlen, "socketpair: %s", strerror(-ret));
		goto out_teardown;
	}
	/* its shutdown wakes the watcher; wake only keeps it quiet */
	c->data = sp[0];
	r->wake = sp[1];
	r->ch = rdma_create_event_channel();
	if (!r->ch) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the rdma connection "
			 "manager: %s (is rdma_ucm loaded?)", strerror(-ret));
		goto out_teardown;
	}
	if (fcntl(r->ch->fd, F_SETFL, fcntl(r->ch->fd, F_GETFL) |
		  O_NONBLOCK) < 0 ||
	    rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_TCP)) {
		ret = -errno;
		snprintf(err, errlen, "cannot create an rdma id: %s",
			 strerror(-ret));
		goto out_teardown;
	}
	ret = crdma_connect(c, err, errlen);
	if (ret < 0)
		goto out_teardown;
	ret = bcp_client_register_pool(c, BCP_REGION_RDMA, -1,
				       (uintptr_t)c->pool_base,
				       c->rdma->mr->rkey, err, errlen);
	if (ret < 0)
		goto out_teardown;
	return 0;

out_teardown:
	/* the caller's teardown unmaps the pool and closes c->data */
	bcp_client_rdma_teardown(c);
	return ret;
}

/*
 * Whether an rdma_cm event ends the connection: the agent disconnected,
 * the device went away, or the address it used is gone.
 */
static int crdma_event_fatal(enum rdma_cm_event_type t)
{
	return t == RDMA_CM_EVENT_DISCONNECTED ||
	       t == RDMA_CM_EVENT_DEVICE_REMOVAL ||
	       t == RDMA_CM_EVENT_ADDR_CHANGE;
}

/*
 * Wait on the connection manager's channel and on c->data.  A fatal event
 * breaks the session (pending requests fail, the daemon answers EIO); a
 * shut-down c->data means the session is over already.
 */
static void *crdma_watch(void *arg)
{
	struct bcp_client *c = arg;
	struct bcp_crdma *r = c->rdma;
	struct pollfd pfd[2] = {
		{ .fd = r->ch->fd, .events = POLLIN },
		{ .fd = c->data, .events = POLLIN },
	};
	enum rdma_cm_event_type t;
	struct rdma_cm_event *ev;
	char msg[512];
	int ret;

	for (;;) {
		pfd[0].revents = 0;
		pfd[1].revents = 0;
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out_break;
		}
		if (pfd[1].revents)
			return NULL;	/* shut down: the session is over */
		while (!rdma_get_cm_event(r->ch, &ev)) {
			t = ev->event;
			rdma_ack_cm_event(ev);
			if (crdma_event_fatal(t)) {
				snprintf(msg, sizeof(msg),
					 "rdma connection to agent at %s lost: %s",
					 c->addr_str, rdma_event_str(t));
				bcp_client_break(c, msg);
				return NULL;
			}
			bcp_client_logf(LOG_DEBUG,
					"rdma connection to agent at %s: %s",
					c->addr_str, rdma_event_str(t));
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			ret = -errno;
			goto out_break;
		}
	}

out_break:
	snprintf(msg, sizeof(msg), "rdma connection to agent at %s: %s",
		 c->addr_str, strerror(-ret));
	bcp_client_break(c, msg);
	return NULL;
}

int bcp_client_rdma_start(struct bcp_client *c)
{
	return bcp_client_thread_start(c, &c->data_thread,
				       &c->have_data_thread, crdma_watch,
				       "bcp-data");
}

void bcp_client_rdma_teardown(struct bcp_client *c)
{
	struct bcp_crdma *r = c->rdma;

	if (!r)
		return;
	if (r->connected)
		rdma_disconnect(r->id);
	if (r->id && r->id->qp)
		rdma_destroy_qp(r->id);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->cq)
		ibv_destroy_cq(r->cq);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->id)
		rdma_destroy_id(r->id);
	if (r->ch)
		rdma_destroy_event_channel(r->ch);
	if (r->wake >= 0)
		close(r->wake);
	free(r);
	c->rdma = NULL;
}
