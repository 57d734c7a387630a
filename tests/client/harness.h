/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * harness.h - what the client library tests share: a real agent started in
 * a private temporary directory (a unix socket and a free loopback TCP
 * port), its log checked for unexpected "error" lines and sanitizer
 * reports when it stops, and small assertion helpers.
 */
#ifndef TESTS_CLIENT_HARNESS_H
#define TESTS_CLIENT_HARNESS_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#define TH_SKIP		77
#define TH_HARD		99

#define TH_CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, \
			#cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		th_failed++; \
	} \
} while (0)

extern int th_failed;

struct th_agent {
	pid_t pid;
	char dir[PATH_MAX];		/* private temp dir, removed at stop */
	char root[PATH_MAX + 16];	/* the agent's --root */
	char unix_addr[PATH_MAX + 32];	/* "unix:DIR/agent.sock" */
	char tcp_addr[64];		/* "tcp://127.0.0.1:PORT" */
	char log[PATH_MAX + 16];
	char secret_file[PATH_MAX + 16];
	unsigned short port;
};

/* The agent binary, or NULL (the test then skips). */
const char *th_agent_path(void);

/* Make a private temp dir into buf.  0 or -errno. */
int th_tmpdir(char *buf, size_t len, const char *tag);
void th_rmtree(const char *dir);

/* A loopback TCP port nothing listens on right now. */
unsigned short th_free_port(void);

/*
 * Start an agent (secret NULL: none).  0, TH_SKIP when the binary does not
 * exist, TH_HARD when it would not start (its log is printed).
 */
int th_agent_start(struct th_agent *a, const char *secret);
/* SIGKILL it (the temp dir stays for th_agent_stop()). */
void th_agent_kill(struct th_agent *a);
/*
 * Stop it (SIGTERM unless killed), check its log, remove the temp dir.
 * Returns 0, or 1 when the log holds an unexpected error line (printed).
 */
int th_agent_stop(struct th_agent *a);

/* Random numbers for tests: xorshift, seeded from TH_SEED or the time. */
uint64_t th_rand(uint64_t *state);
uint64_t th_seed(void);

#endif /* TESTS_CLIENT_HARNESS_H */
