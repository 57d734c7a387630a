/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * harness.h - shared by the agent tests: start a real bluecache-agent on a
 * private data root (unix socket and TCP on 127.0.0.1 with a free port),
 * stop it with SIGTERM and check its log, talk to it with the client
 * library or with raw frames.
 */
#ifndef TESTS_AGENT_HARNESS_H
#define TESTS_AGENT_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bcp_client.h"
#include "bcp_codec.h"

#define T_SKIP	77
#define T_HARD	99

struct t_agent {
	pid_t pid;
	char dir[256];		/* temp dir: root/, sock, log, secret */
	char root[300];
	char unix_addr[320];
	char tcp_addr[64];
	char log[300];
	char secret_path[300];
	const char *secret;	/* NULL: none */
	const char *extra[8];	/* more agent arguments */
};

/* Fail the test with a message (exit 1), or a hard error (exit 99). */
void t_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						noreturn));
void t_hard(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						noreturn));
#define T_CHECK(c) do { if (!(c)) t_fail("%s:%d: check failed: %s", \
					 __FILE__, __LINE__, #c); } while (0)
#define T_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) t_fail("%s:%d: %s == %lld, expected %s == %lld", \
			     __FILE__, __LINE__, #a, _a, #b, _b); } while (0)

/* Prepare the temp dir; then t_agent_start(); t_agent_stop() at the end. */
void t_agent_init(struct t_agent *a, const char *name);
void t_agent_start(struct t_agent *a);
/* SIGTERM, wait; returns the exit status; checks the log for faults. */
int t_agent_stop(struct t_agent *a);
/* kill -9 if still running and remove the temp dir (atexit-safe). */
void t_agent_cleanup(struct t_agent *a);
/* 1 when the log contains s. */
int t_log_has(const struct t_agent *a, const char *s);

/* Client library session; transport BCP_XFER_SHM or BCP_XFER_TCP. */
struct bcp_client *t_client(struct t_agent *a, int tcp,
			    enum bcp_transport tr, size_t pool);
/* The same, asking for reply_features (bcp_client_opts) too. */
struct bcp_client *t_client_features(const struct t_agent *a, int tcp,
				     enum bcp_transport tr, size_t pool,
				     uint64_t reply_features);

/* Raw: connect; handshake (HELLO+AUTH) with a secret.  Returns the fd. */
int t_raw_connect(struct t_agent *a, int tcp);
int t_raw_handshake(int fd, const char *secret, uint64_t *root,
		    struct bcp_hello_rep *hello);
/* Send m (encoded); receive one frame into buf and decode it into rep. */
int t_raw_call(int fd, struct bcp_msg *m, struct bcp_msg *rep, void *buf,
	       size_t cap);
/* 1 when the peer closed the connection within timeout_ms. */
int t_raw_closed(int fd, int timeout_ms);
/* REGISTER_REGION of memfd mfd as shm region id; returns the reply status */
int t_raw_register_shm(int fd, uint64_t req_id, uint32_t id, int mfd,
		       uint64_t len);

/* Synchronous helpers over the client library; return status. */
int t_lookup(struct bcp_client *c, uint64_t parent, const char *name,
	     struct bcp_entry *e);
int t_create(struct bcp_client *c, uint64_t parent, const char *name,
	     uint32_t mode, uint32_t flags, struct bcp_entry *e,
	     uint64_t *fh);
int t_mkdir(struct bcp_client *c, uint64_t parent, const char *name,
	    struct bcp_entry *e);
int t_open(struct bcp_client *c, uint64_t handle, uint32_t flags,
	   uint64_t *fh);
int t_release(struct bcp_client *c, uint64_t handle, uint64_t fh);
/* One I/O through the pool: returns bytes moved or -errno. */
int t_io(struct bcp_client *c, uint16_t op, uint64_t fh, uint64_t off,
	 void *buf, uint32_t len);

uint64_t t_fnv(const void *p, size_t len);

/*
 * Start the agent as t_agent_start() does, with the NULL-terminated
 * extra[] (any length) after the usual arguments, so a later option wins,
 * and with RLIMIT_NOFILE set to nofile in the agent when nofile > 0.
 * Never ends the test: returns 0 once the agent is ready, -EINVAL when it
 * exited before (its reasons are in a->log), -ETIMEDOUT when it did not
 * become ready within 10 s (it is killed then).
 */
int t_agent_start_args(struct t_agent *a, const char *const *extra,
		       long nofile);
/* -1 while the agent runs; else its wait status (a->pid becomes -1). */
int t_agent_exited(struct t_agent *a);
/* User plus system CPU time process pid has used, in ms; -1 if unknown. */
long t_proc_cpu_ms(pid_t pid);

/*
 * Raw session on the unix socket (HELLO+AUTH), with a sealed memfd of rlen
 * bytes registered as shm region 7 (mapped at *region) and the object
 * name opened read-write (*fh).  Returns the control fd.
 */
int t_raw_shm_session(struct t_agent *a, const char *name, size_t rlen,
		      uint8_t **region, uint64_t *fh);
/* Send m without waiting for the reply; 0 or -errno. */
int t_raw_send(int fd, struct bcp_msg *m);
/* Receive one frame into buf (cap) and decode it into rep; -errno. */
int t_raw_recv(int fd, struct bcp_msg *rep, void *buf, size_t cap,
	       int timeout_ms);

/*
 * t_raw_handshake() with HELLO's client id set (resuming hosts): the
 * client's id keys the agent's reply cache.
 */
int t_raw_handshake_client(int fd, const char *secret,
			   const uint8_t client[BCP_CLIENT_ID_LEN],
			   uint64_t *root, struct bcp_hello_rep *hello);
/* The same, asking for exactly these BCP_FEAT_* bits. */
int t_raw_handshake_features(int fd, const char *secret,
			     const uint8_t client[BCP_CLIENT_ID_LEN],
			     uint64_t features, uint64_t *root,
			     struct bcp_hello_rep *hello);
/*
 * The agent t_fail() and t_hard() clean up (t_agent_init() makes it the
 * last one prepared): a test that runs two agents names the one to keep.
 */
void t_agent_current(struct t_agent *a);

#endif /* TESTS_AGENT_HARNESS_H */
