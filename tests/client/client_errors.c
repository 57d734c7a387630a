/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client_errors.c - what bcp_client_connect() says when it cannot work,
 * against a real agent that holds a secret: the right secret connects
 * (shm on the unix socket, tcp on the TCP address), a wrong or missing
 * secret gives -EACCES naming the secret, an address nobody listens on
 * gives -ECONNREFUSED or -ENOENT, and transports that cannot work give
 * -EOPNOTSUPP, each with a message a user can act on.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "bcp_client.h"
#include "harness.h"

#define SECRET "correct horse battery staple"

static int try(const char *addr, const char *secret, enum bcp_transport t,
	       char *err, size_t errlen, enum bcp_transport *got)
{
	struct bcp_client_opts o;
	struct bcp_client *c = NULL;
	int ret;

	bcp_client_opts_init(&o);
	o.addr = addr;
	o.secret = secret;
	o.secret_len = secret ? strlen(secret) : 0;
	o.transport = t;
	o.pool_size = 4u << 20;
	o.timeout_ms = 5000;
	err[0] = '\0';
	ret = bcp_client_connect(&o, &c, err, errlen);
	printf("%s %s secret=%s: %d %s\n", addr, bcp_transport_name(t),
	       secret ? secret : "(none)", ret, err);
	if (ret == 0) {
		if (got)
			*got = bcp_client_transport(c);
		bcp_client_destroy(c);
	}
	return ret;
}

int main(void)
{
	char err[512], addr[PATH_MAX + 64];
	enum bcp_transport t = BCP_XFER_AUTO;
	struct th_agent a;
	int ret;

	alarm(120);
	ret = th_agent_start(&a, SECRET);
	if (ret)
		return ret;

	ret = try(a.unix_addr, SECRET, BCP_XFER_AUTO, err, sizeof(err), &t);
	TH_CHECK(ret == 0 && t == BCP_XFER_SHM, "unix auto: %d %s", ret,
		 err);
	ret = try(a.tcp_addr, SECRET, BCP_XFER_AUTO, err, sizeof(err), &t);
	TH_CHECK(ret == 0 && t == BCP_XFER_TCP, "tcp auto: %d %s", ret, err);

	ret = try(a.unix_addr, "wrong", BCP_XFER_AUTO, err, sizeof(err),
		  NULL);
	TH_CHECK(ret == -EACCES, "wrong secret: %d", ret);
	TH_CHECK(strstr(err, "rejected the secret") &&
		 strstr(err, a.unix_addr), "message: %s", err);
	ret = try(a.tcp_addr, NULL, BCP_XFER_AUTO, err, sizeof(err), NULL);
	TH_CHECK(ret == -EACCES, "no secret: %d", ret);
	TH_CHECK(strstr(err, "secret") != NULL, "message: %s", err);

	ret = try(a.tcp_addr, SECRET, BCP_XFER_SHM, err, sizeof(err), NULL);
	TH_CHECK(ret == -EOPNOTSUPP, "shm over tcp: %d", ret);
	TH_CHECK(strstr(err, "shm") != NULL, "message: %s", err);
	ret = try(a.unix_addr, SECRET, BCP_XFER_RDMA, err, sizeof(err), NULL);
	TH_CHECK(ret == -EOPNOTSUPP, "rdma: %d", ret);
	TH_CHECK(strstr(err, "rdma") != NULL, "message: %s", err);

	snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%u", th_free_port());
	ret = try(addr, SECRET, BCP_XFER_AUTO, err, sizeof(err), NULL);
	TH_CHECK(ret == -ECONNREFUSED, "refused: %d", ret);
	TH_CHECK(strstr(err, "cannot reach agent at") && strstr(err, addr) &&
		 strstr(err, strerror(ECONNREFUSED)), "message: %s", err);
	snprintf(addr, sizeof(addr), "unix:%s/nobody.sock", a.dir);
	ret = try(addr, SECRET, BCP_XFER_AUTO, err, sizeof(err), NULL);
	TH_CHECK(ret == -ENOENT, "missing socket: %d", ret);
	ret = try("bogus://x", SECRET, BCP_XFER_AUTO, err, sizeof(err), NULL);
	TH_CHECK(ret == -EINVAL && err[0], "bad address: %d", ret);

	/* The agent still serves after all that. */
	ret = try(a.unix_addr, SECRET, BCP_XFER_TCP, err, sizeof(err), &t);
	TH_CHECK(ret == 0 && t == BCP_XFER_TCP, "unix tcp: %d %s", ret, err);

	if (th_agent_stop(&a))
		th_failed++;
	if (th_failed) {
		fprintf(stderr, "%d check(s) failed\n", th_failed);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
