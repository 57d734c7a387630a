/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * main.c - bluecache-agent: options and configuration file, the secret,
 * listeners, the acceptor loop and shutdown.
 *
 * The main thread owns the listening sockets.  A new connection stays here
 * (non-blocking) until its first frame arrived: a HELLO starts a session on
 * the next worker, a DATA_ATTACH goes to the worker of the session it names;
 * a connection that says nothing is dropped after a timeout.  SIGTERM or
 * SIGINT: stop accepting, let the workers finish what is in flight, sync
 * the store, print the summary and exit 0.
 *
 * The store (--store, or --root DIR for posix:DIR) is opened before the
 * workers start and closed after they stopped, so that a wrong cluster
 * configuration fails at start-up with one line, not at the first request.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <syslog.h>
#include <linux/capability.h>

#include "agent.h"
#include "log_i.h"
#include "metrics.h"
#include "bcp_auth.h"
#include "bcp_xfer_srv.h"
#include "resume.h"
#include "store.h"
#include "watch.h"

#define MAIN_PENDING_MAX	256
#define MAIN_FIRST_MAX		128	/* HELLO and DATA_ATTACH fit */
#define MAIN_FDS_SPARE		64	/* epoll, rings, eventfds, pool, log */
#define MAIN_FDS_MIN		64	/* the least budget worth serving */
#define MAIN_ACCEPT_PAUSE_MS	100	/* out of descriptors: stop accepting */
#define MAIN_ACCEPT_BURST	16	/* accepts before reading first frames */

struct agent_config agent_cfg = {
	.queue_depth = 64,
	.slot_size = 1u << 20,
	.log_level = AGENT_LOG_INFO,
	.ready_fd = -1,
	.root_fd = -1,
	.completion = BCP_XSRV_CQ_ADAPTIVE,
	.poll_usec = 20,
	.inline_max = 1u << 20,
	.spin_usec = 50,
	.meta_io = AGENT_META_SYNC,
	.squash = AGENT_SQUASH_ROOT,
	.anon_uid = 65534,
	.anon_gid = 65534,
	.max_regions = 64,
	.max_region_bytes = 16ull << 30,
	.max_sessions = 128,
	.max_unauth = 32,
	.handshake_ms = 5000,
	.xfer_timeout_ms = 30000,
	.pool_threads = 4,
	.store_timeout_s = 30,
};

/* What agent_cfg starts as; SIGHUP starts again from it. */
static struct agent_config main_defaults;

/* The rdma listener's event channel (main_loop polls it), or -1. */
static int main_rdma_fd = -1;
static char main_rdma_tag;

struct main_listener {
	int fd;
	int is_unix;
	uint64_t paused_until;		/* out of descriptors: not polled */
	char name[300];
	char path[PATH_MAX];		/* absolute: removed at exit */
};

struct main_pending {
	int fd;				/* -1: free */
	int is_unix;
	char peer[64];
	uint8_t buf[MAIN_FIRST_MAX];
	uint32_t got;
	uint64_t t0;
};

static struct main_listener listeners[AGENT_LISTEN_MAX];
static unsigned int nlisteners;
static struct main_pending pending[MAIN_PENDING_MAX];

static const char usage_text[] =
"Usage: bluecache-agent --store SPEC [OPTION]...\n"
"  or:  bluecache-agent --root DIR [OPTION]...\n"
"Serve the objects of a store to bluecachefs hosts over the BCP protocol.\n"
"\n"
"      --store SPEC          where the objects live (see STORES in the man\n"
"                            page): posix:DIR, a directory, or\n"
"                            cephfs:[PATH][,conf=FILE][,id=NAME][,fs=NAME],\n"
"                            a CephFS (PATH default /, conf default\n"
"                            $CEPH_CONF or /etc/ceph/ceph.conf, id default\n"
"                            admin, fs default the cluster's default)\n"
"  -r, --root DIR            short for --store posix:DIR: every object\n"
"                            lives beneath DIR\n"
"      --store-timeout SECONDS\n"
"                            how long opening the store may wait for its\n"
"                            cluster at start-up, and stopping past the\n"
"                            10 s drain (default 30)\n"
"  -l, --listen ADDR         tcp://ADDR[:PORT] or unix:PATH; may be repeated\n"
"                            (default tcp://127.0.0.1:18517)\n"
"  -s, --secret-file FILE    pre-shared secret (mode 0600); required to\n"
"                            listen on anything but loopback or unix\n"
"  -q, --queue-depth N       staging slots per worker (default 64)\n"
"  -S, --slot-size BYTES     bytes per staging slot, K/M suffixes allowed\n"
"                            (default 1M)\n"
"  -w, --workers N           worker threads (default: CPUs, at most 4)\n"
"  -c, --config FILE         read options from an INI file first\n"
"  -L, --log-level LEVEL     error, warning, info or debug (default info)\n"
"  -f, --foreground          do not detach; log to stderr\n"
"      --log-file FILE       once detached, log to FILE (default: syslog)\n"
"      --socket-mode MODE    unix sockets: octal mode set after bind\n"
"                            (default: 0777 less the umask)\n"
"      --socket-group GROUP  unix sockets: group set after bind\n"
"      --metrics-listen ADDR:PORT  serve Prometheus metrics and /healthz\n"
"      --rdma-listen ADDR[:PORT]\n"
"                            accept rdma data connections on the RDMA\n"
"                            device that has ADDR (IPv4, or [IPv6]; default\n"
"                            port 18517, 0 picks one); announced in HELLO\n"
"      --completion MODE     rdma completions: poll, event or adaptive\n"
"                            (default adaptive: poll, then sleep)\n"
"      --poll-usec N         adaptive: microseconds to poll before sleeping\n"
"                            (default 20)\n"
"      --inline-max BYTES    shm (and small tcp batches): move cached\n"
"                            segments up to BYTES between file and host\n"
"                            memory on the worker thread\n"
"                            (default 1M, 0 = always through io_uring)\n"
"      --spin-usec N         after serving a request, poll N microseconds\n"
"                            for the next before sleeping, only while a\n"
"                            CPU is idle (default 50, 0: off)\n"
"      --meta-io MODE        metadata operations: sync (system calls on the\n"
"                            worker thread, the default) or uring (through\n"
"                            the worker's io_uring)\n"
"      --watch MODE          tell hosts what other processes on this machine\n"
"                            change beneath DIR (fanotify): auto (when the\n"
"                            agent has CAP_SYS_ADMIN, the default), yes\n"
"                            (do not start without it) or no; posix\n"
"                            stores only (auto is no for cephfs)\n"
"\n"
"Identity and limits (see doc/security.md):\n"
"      --squash MODE         tcp/rdma hosts: none, root (ids 0 become the\n"
"                            anonymous ids, the default) or all\n"
"      --anon-uid N          uid squashed ids become (default 65534)\n"
"      --anon-gid N          gid squashed ids become (default 65534)\n"
"      --allow-devices       let hosts create block and character devices\n"
"      --max-handles N       handles one session holds (default: a quarter\n"
"                            of the descriptor budget, at least 16; with\n"
"                            --max-sessions S below 4, the budget over S)\n"
"      --max-files N         open files one session holds (default: an\n"
"                            eighth of the descriptor budget, at least 16;\n"
"                            with --max-sessions S below 4, over 2S)\n"
"      --max-regions N       registered regions per session (1..64,\n"
"                            default 64)\n"
"      --max-region-bytes BYTES\n"
"                            all regions of a session together, K/M/G\n"
"                            suffixes allowed (default 16G)\n"
"      --max-slots N         staging slots one session holds on a worker\n"
"                            (default queue-depth/4, at least 1)\n"
"      --max-sessions N      sessions on the agent (default 128)\n"
"      --max-unauth N        connections not yet authenticated; the oldest\n"
"                            is dropped for a new one (default 32)\n"
"      --handshake-timeout MS\n"
"                            connect to authenticated (default 5000)\n"
"      --xfer-timeout MS     one transfer on a data connection (default\n"
"                            30000, 0 = never)\n"
"      --pool-threads N      threads for calls that may block for long\n"
"                            (default 4)\n"
"      --fd-cache N          descriptors of looked-up objects one session\n"
"                            keeps open (8..1048576, default 1024)\n"
"\n"
"Resuming after a restart (see doc/protocol.md):\n"
"      --state-dir DIR       the handle key and the reply cache (default\n"
"                            " AGENT_STATE_DIR ", for other users\n"
"                            ~/.local/state/bluecache-agent); none:\n"
"                            nothing survives a restart\n"
"\n"
"  -R, --ready-fd FD         write \"ready\\n\" to FD once listening\n"
"  -h, --help                show this help and exit\n"
"  -V, --version             show the version and exit\n";

static const struct option main_opts[] = {
	{ "root", required_argument, NULL, 'r' },
	{ "listen", required_argument, NULL, 'l' },
	{ "secret-file", required_argument, NULL, 's' },
	{ "queue-depth", required_argument, NULL, 'q' },
	{ "slot-size", required_argument, NULL, 'S' },
	{ "workers", required_argument, NULL, 'w' },
	{ "config", required_argument, NULL, 'c' },
	{ "log-level", required_argument, NULL, 'L' },
	{ "foreground", no_argument, NULL, 'f' },
	{ "ready-fd", required_argument, NULL, 'R' },
	{ "rdma-listen", required_argument, NULL, 1000 },
	{ "metrics-listen", required_argument, NULL, 1100 },
	{ "completion", required_argument, NULL, 1001 },
	{ "poll-usec", required_argument, NULL, 1002 },
	{ "inline-max", required_argument, NULL, 1003 },
	{ "spin-usec", required_argument, NULL, 1004 },
	{ "meta-io", required_argument, NULL, 1005 },
	{ "squash", required_argument, NULL, 1006 },
	{ "anon-uid", required_argument, NULL, 1007 },
	{ "anon-gid", required_argument, NULL, 1008 },
	{ "allow-devices", no_argument, NULL, 1009 },
	{ "max-handles", required_argument, NULL, 1010 },
	{ "max-files", required_argument, NULL, 1011 },
	{ "max-regions", required_argument, NULL, 1012 },
	{ "max-region-bytes", required_argument, NULL, 1013 },
	{ "max-slots", required_argument, NULL, 1014 },
	{ "max-sessions", required_argument, NULL, 1015 },
	{ "max-unauth", required_argument, NULL, 1016 },
	{ "handshake-timeout", required_argument, NULL, 1017 },
	{ "xfer-timeout", required_argument, NULL, 1018 },
	{ "pool-threads", required_argument, NULL, 1019 },
	{ "socket-mode", required_argument, NULL, 1020 },
	{ "socket-group", required_argument, NULL, 1021 },
	{ "log-file", required_argument, NULL, 1022 },
	{ "state-dir", required_argument, NULL, 1023 },
	{ "fd-cache", required_argument, NULL, 1024 },
	{ "watch", required_argument, NULL, 1025 },
	{ "store", required_argument, NULL, 1026 },
	{ "store-timeout", required_argument, NULL, 1027 },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* A number in [min, max]; with suffix, K/M/G multiply.  0 or -EINVAL. */
static int main_u64(const char *s, unsigned long long min,
		    unsigned long long max, int suffix, unsigned long long *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (suffix && (*end == 'k' || *end == 'K'))
		shift = 10;
	else if (suffix && (*end == 'm' || *end == 'M'))
		shift = 20;
	else if (suffix > 1 && (*end == 'g' || *end == 'G'))
		shift = 30;
	if (shift) {
		if (v > (~0ull >> shift))
			return -EINVAL;
		v <<= shift;
		end++;
	}
	if (*end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int main_uint(const char *s, unsigned long long min,
		     unsigned long long max, int suffix, unsigned int *out)
{
	unsigned long long v;

	if (max > UINT_MAX || main_u64(s, min, max, suffix, &v) < 0)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

/* yes/no and friends: 1, 0, or -EINVAL. */
static int main_bool(const char *s)
{
	if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "1"))
		return 1;
	if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "0"))
		return 0;
	return -EINVAL;
}

/*
 * A numeric option: key, range, whether K/M(/G) suffixes are allowed, and
 * where the value goes (an unsigned int, or a uint64_t when wide).
 */
struct main_num {
	const char *key;
	unsigned long long min, max;
	int suffix;			/* 1: K/M, 2: K/M/G */
	int wide;
	size_t off;			/* in struct agent_config */
	const char *range;		/* for the error line */
};

#define MAIN_OFF(f)	offsetof(struct agent_config, f)

static const struct main_num main_nums[] = {
	{ "queue-depth", 1, 4096, 0, 0, MAIN_OFF(queue_depth),
	  "1..4096" },
	{ "workers", 1, 64, 0, 0, MAIN_OFF(workers), "1..64" },
	{ "poll-usec", 0, 1000000, 0, 0, MAIN_OFF(poll_usec),
	  "0..1000000" },
	{ "inline-max", 0, BCP_SEG_LEN_MAX, 1, 0, MAIN_OFF(inline_max),
	  "0..8M" },
	{ "spin-usec", 0, 10000, 0, 0, MAIN_OFF(spin_usec), "0..10000" },
	{ "anon-uid", 0, 4294967294u, 0, 0, MAIN_OFF(anon_uid),
	  "0..4294967294" },
	{ "anon-gid", 0, 4294967294u, 0, 0, MAIN_OFF(anon_gid),
	  "0..4294967294" },
	{ "max-handles", 16, AGENT_HANDLES_MAX, 0, 0, MAIN_OFF(max_handles),
	  "16..1048576" },
	{ "max-files", 16, AGENT_FILES_MAX, 0, 0, MAIN_OFF(max_files),
	  "16..65536" },
	{ "max-regions", 1, 64, 0, 0, MAIN_OFF(max_regions), "1..64" },
	{ "max-region-bytes", 4096, 1ull << 40, 2, 1,
	  MAIN_OFF(max_region_bytes), "4K..1024G" },
	{ "max-slots", 1, 4096, 0, 0, MAIN_OFF(max_slots),
	  "1..queue-depth" },
	{ "max-sessions", 1, 65536, 0, 0, MAIN_OFF(max_sessions),
	  "1..65536" },
	{ "max-unauth", 1, 65536, 0, 0, MAIN_OFF(max_unauth), "1..65536" },
	{ "handshake-timeout", 10, 600000, 0, 0, MAIN_OFF(handshake_ms),
	  "10..600000 ms" },
	{ "xfer-timeout", 0, 3600000, 0, 0, MAIN_OFF(xfer_timeout_ms),
	  "0..3600000 ms, 0 = never" },
	{ "pool-threads", 1, 64, 0, 0, MAIN_OFF(pool_threads), "1..64" },
	{ "fd-cache", 8, 1u << 20, 0, 0, MAIN_OFF(fd_cache), "8..1048576" },
	{ "store-timeout", 1, 3600, 0, 0, MAIN_OFF(store_timeout_s),
	  "1..3600 seconds" },
};

/*
 * What the command line and the configuration file set: the agent's
 * configuration and the options only main.c uses.  Filled at start-up,
 * and again into a scratch copy on SIGHUP (main_reload).
 */
struct main_cfg {
	struct agent_config *a;
	char *config;			/* the last --config, or NULL */
	char *log_file;			/* --log-file, or NULL */
	char *sock_group;		/* --socket-group, or NULL */
	int sock_mode;			/* --socket-mode, or -1 */
	int watch;			/* enum agent_watch_mode */
	char *store;			/* the store's spec, as given (root =
					 * DIR: "posix:DIR"), or NULL */
	struct agent_store_spec spec;	/* store, parsed */
	const char *store_key[2];	/* "root" or "store", the last set on
					 * the command line [0], in files [1] */
};

static struct main_cfg main_cfg = { .a = &agent_cfg, .sock_mode = -1 };

/*
 * Errors met while a configuration file is read are kept here, the first
 * one only, and printed with the file's name and line in one line.
 */
static int main_in_file;
static char main_file_err[512];
static int main_reloading;		/* a bad file on SIGHUP: a warning */

static void __attribute__((format(printf, 1, 2)))
main_bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (!main_in_file) {
		char line[512];

		vsnprintf(line, sizeof(line), fmt, ap);
		agent_err("%s", line);
	} else if (!main_file_err[0]) {
		vsnprintf(main_file_err, sizeof(main_file_err), fmt, ap);
	}
	va_end(ap);
}

/*
 * root = DIR is short for store = posix:DIR.  Both in one place (on the
 * command line, or in the files) is refused, since which was meant is
 * unclear; the command line's either overrides the file's.
 */
static int main_set_store(struct main_cfg *c, const char *key,
			  const char *val, int from_file)
{
	const char *other = c->store_key[from_file];
	struct agent_store_spec sp;
	char err[256], *spec;
	int is_root = !strcmp(key, "root");

	if (other && strcmp(other, key)) {
		if (from_file)
			main_bad("root and store both set: root = DIR is "
				 "short for store = posix:DIR; keep one");
		else
			main_bad("--root and --store both given: --root DIR "
				 "is short for --store posix:DIR; give one");
		return -EINVAL;
	}
	if (is_root && !val[0]) {
		main_bad("invalid value '' for root: expected a directory");
		return -EINVAL;
	}
	if (is_root ? asprintf(&spec, "posix:%s", val) < 0 :
		      !(spec = strdup(val))) {
		main_bad("%s: out of memory", key);
		return -EINVAL;
	}
	if (agent_store_spec_parse(spec, &sp, err, sizeof(err)) < 0) {
		main_bad("%s", err);
		free(spec);
		return -EINVAL;
	}
	agent_store_spec_free(&c->spec);
	c->spec = sp;
	free(c->store);
	c->store = spec;
	/* the posix directory, for what needs one (NULL for cephfs) */
	free(c->a->root);
	c->a->root = sp.kind == AGENT_STORE_POSIX ? strdup(sp.path) : NULL;
	c->store_key[from_file] = is_root ? "root" : "store";
	return 0;
}

/*
 * The directory the agent was started in: a relative path of an option is
 * taken from there, at start-up and when SIGHUP reads the options again
 * (a detached agent's own directory is /).
 */
static char *main_start_dir;

/* PATH made absolute from main_start_dir; NULL when out of memory. */
static char *main_abs(const char *path)
{
	char *out;

	if (path[0] == '/' || !main_start_dir)
		return strdup(path);
	if (asprintf(&out, "%s/%s", main_start_dir, path) < 0)
		return NULL;
	return out;
}

/* One option from the command line or the config file.  0 or -EINVAL. */
static int main_set(struct main_cfg *c, const char *key, const char *val,
		    int from_file)
{
	struct agent_config *a = c->a;
	const char *range = NULL;
	unsigned long long v;
	unsigned int u, i;
	int b;

	for (i = 0; i < sizeof(main_nums) / sizeof(main_nums[0]); i++) {
		const struct main_num *n = &main_nums[i];

		if (strcmp(key, n->key))
			continue;
		range = n->range;
		if (main_u64(val, n->min, n->max, n->suffix, &v) < 0)
			goto out_bad;
		if (n->wide)
			*(uint64_t *)((char *)a + n->off) = v;
		else
			*(unsigned int *)((char *)a + n->off) = (unsigned int)v;
		return 0;
	}
	if (!strcmp(key, "root") || !strcmp(key, "store")) {
		return main_set_store(c, key, val, from_file);
	} else if (!strcmp(key, "listen")) {
		if (a->nlisten >= AGENT_LISTEN_MAX) {
			main_bad("too many listen addresses (at most %d)",
				 AGENT_LISTEN_MAX);
			return -EINVAL;
		}
		a->listen[a->nlisten++] = strdup(val);
	} else if (!strcmp(key, "secret-file")) {
		free(a->secret_file);
		a->secret_file = main_abs(val);
		if (!a->secret_file)
			goto out_nomem;
	} else if (!strcmp(key, "state-dir")) {
		range = "an absolute path or none";
		if (val[0] != '/' && strcmp(val, "none"))
			goto out_bad;
		free(a->state_dir);
		a->state_dir = strdup(val);
	} else if (!strcmp(key, "slot-size")) {
		range = "a multiple of 4K (4096 bytes) from 4K to 8M";
		if (main_uint(val, 4096, BCP_SEG_LEN_MAX, 1, &u) < 0 ||
		    u % 4096)
			goto out_bad;
		a->slot_size = u;
	} else if (!strcmp(key, "log-level")) {
		int l = agent_log_level_parse(val);

		range = "error, warning, info or debug";
		if (l < 0)
			goto out_bad;
		a->log_level = l;
	} else if (!strcmp(key, "foreground")) {
		range = "yes or no";
		b = main_bool(val);
		if (b < 0)
			goto out_bad;
		a->foreground = b;
	} else if (!strcmp(key, "allow-devices")) {
		range = "yes or no";
		b = main_bool(val);
		if (b < 0)
			goto out_bad;
		a->allow_devices = b;
	} else if (!strcmp(key, "squash")) {
		range = "none, root or all";
		if (!strcmp(val, "none"))
			a->squash = AGENT_SQUASH_NONE;
		else if (!strcmp(val, "root"))
			a->squash = AGENT_SQUASH_ROOT;
		else if (!strcmp(val, "all"))
			a->squash = AGENT_SQUASH_ALL;
		else
			goto out_bad;
	} else if (!strcmp(key, "metrics-listen")) {
		free(agent_cfg.metrics_listen);
		agent_cfg.metrics_listen = strdup(val);
	} else if (!strcmp(key, "rdma-listen")) {
		struct sockaddr_storage ss;
		int ret = bcp_xrdma_addr_parse(val, &ss);

		if (ret == -EOPNOTSUPP) {
			main_bad("rdma-listen: the rdma transport is not "
				 "built into this agent (configure "
				 "--with-rdma)");
			return -EINVAL;
		}
		range = "ADDR[:PORT], IPv6 in brackets";
		if (ret < 0)
			goto out_bad;
		free(a->rdma_listen);
		a->rdma_listen = strdup(val);
	} else if (!strcmp(key, "completion")) {
		range = "poll, event or adaptive";
		if (!strcmp(val, "poll"))
			a->completion = BCP_XSRV_CQ_POLL;
		else if (!strcmp(val, "event"))
			a->completion = BCP_XSRV_CQ_EVENT;
		else if (!strcmp(val, "adaptive"))
			a->completion = BCP_XSRV_CQ_ADAPTIVE;
		else
			goto out_bad;
	} else if (!strcmp(key, "meta-io")) {
		range = "sync or uring";
		if (!strcmp(val, "sync"))
			a->meta_io = AGENT_META_SYNC;
		else if (!strcmp(val, "uring"))
			a->meta_io = AGENT_META_URING;
		else
			goto out_bad;
	} else if (!strcmp(key, "watch")) {
		range = "auto, yes or no";
		if (!strcmp(val, "auto"))
			c->watch = AGENT_WATCH_AUTO;
		else if (!strcmp(val, "yes"))
			c->watch = AGENT_WATCH_YES;
		else if (!strcmp(val, "no"))
			c->watch = AGENT_WATCH_NO;
		else
			goto out_bad;
	} else if (!strcmp(key, "socket-mode")) {
		range = "an octal mode from 0 to 0777";
		errno = 0;
		{
			char *end;
			unsigned long m = strtoul(val, &end, 8);

			if (errno || end == val || *end || *val == '-' ||
			    m > 0777)
				goto out_bad;
			c->sock_mode = (int)m;
		}
	} else if (!strcmp(key, "socket-group")) {
		free(c->sock_group);
		c->sock_group = strdup(val);
	} else if (!strcmp(key, "log-file")) {
		free(c->log_file);
		c->log_file = main_abs(val);
		if (!c->log_file)
			goto out_nomem;
	} else if (!strcmp(key, "ready-fd")) {
		range = "a descriptor number";
		if (main_uint(val, 0, INT_MAX, 0, &u) < 0)
			goto out_bad;
		a->ready_fd = (int)u;
	} else {
		main_bad("unknown %s '%s'", from_file ? "configuration key" :
			 "option", key);
		return -EINVAL;
	}
	return 0;

out_bad:
	main_bad("invalid value '%s' for %s: expected %s", val, key, range);
	return -EINVAL;
out_nomem:
	main_bad("%s: out of memory", key);
	return -EINVAL;
}

static int main_ini(void *user, const char *section, const char *name,
		    const char *value)
{
	if (section[0] && strcmp(section, "agent")) {
		main_bad("unknown section [%s] (the keys belong in [agent])",
			 section);
		return 0;
	}
	return main_set(user, name, value, 1) == 0;
}

/* Read FILE into cf; one line on error.  0 or -EINVAL. */
static int main_file(struct main_cfg *cf, const char *file)
{
	FILE *f = fopen(file, "r");
	int line;

	if (!f) {
		agent_err("configuration file %s: %s", file, strerror(errno));
		return -EINVAL;
	}
	main_file_err[0] = '\0';
	main_in_file = 1;
	line = ini_parse_file(f, main_ini, cf);
	main_in_file = 0;
	fclose(f);
	if (line < 0) {
		agent_err("configuration file %s: out of memory", file);
		return -EINVAL;
	}
	if (line > 0) {
		agent_log(main_reloading ? AGENT_LOG_WARNING : AGENT_LOG_ERROR,
			  "configuration file %s, line %d: %s", file, line,
			  main_file_err[0] ? main_file_err :
			  "not a 'key = value' line");
		return -EINVAL;
	}
	return 0;
}

static int main_parse(struct main_cfg *cf, int argc, char **argv)
{
	struct agent_config *a = cf->a;
	int c, i, have_listen = 0;

	/* --config first, so that the command line overrides the file */
	for (i = 1; i < argc; i++) {
		const char *file = NULL;

		if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "-c"))
			file = i + 1 < argc ? argv[i + 1] : NULL;
		else if (!strncmp(argv[i], "--config=", 9))
			file = argv[i] + 9;
		if (!file)
			continue;
		free(cf->config);
		cf->config = main_abs(file);
		if (!cf->config || main_file(cf, cf->config) < 0)
			return -EINVAL;
	}
	optind = 0;		/* SIGHUP parses the command line again */
	while ((c = getopt_long(argc, argv, "r:l:s:q:S:w:c:L:fR:hV",
				main_opts, NULL)) != -1) {
		const char *key = NULL;

		switch (c) {
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case 'V':
			printf("%s %s\n", AGENT_NAME, PACKAGE_VERSION);
			exit(0);
		case 'c':
			continue;
		case 'f':
			a->foreground = 1;
			continue;
		case 1009:
			a->allow_devices = 1;
			continue;
		case 'l':
			if (!have_listen) {
				/* the command line replaces the file's */
				while (a->nlisten)
					free(a->listen[
						--a->nlisten]);
				have_listen = 1;
			}
			key = "listen";
			break;
		case 'r': key = "root"; break;
		case 's': key = "secret-file"; break;
		case 'q': key = "queue-depth"; break;
		case 'S': key = "slot-size"; break;
		case 'w': key = "workers"; break;
		case 'L': key = "log-level"; break;
		case 'R': key = "ready-fd"; break;
		case 1000: key = "rdma-listen"; break;
		case 1100: key = "metrics-listen"; break;
		case 1001: key = "completion"; break;
		case 1002: key = "poll-usec"; break;
		case 1003: key = "inline-max"; break;
		case 1004: key = "spin-usec"; break;
		case 1005: key = "meta-io"; break;
		case 1006: key = "squash"; break;
		case 1007: key = "anon-uid"; break;
		case 1008: key = "anon-gid"; break;
		case 1010: key = "max-handles"; break;
		case 1011: key = "max-files"; break;
		case 1012: key = "max-regions"; break;
		case 1013: key = "max-region-bytes"; break;
		case 1014: key = "max-slots"; break;
		case 1015: key = "max-sessions"; break;
		case 1016: key = "max-unauth"; break;
		case 1017: key = "handshake-timeout"; break;
		case 1018: key = "xfer-timeout"; break;
		case 1019: key = "pool-threads"; break;
		case 1020: key = "socket-mode"; break;
		case 1021: key = "socket-group"; break;
		case 1022: key = "log-file"; break;
		case 1023: key = "state-dir"; break;
		case 1024: key = "fd-cache"; break;
		case 1025: key = "watch"; break;
		case 1026: key = "store"; break;
		case 1027: key = "store-timeout"; break;
		default:
			fputs("Try 'bluecache-agent --help'.\n", stderr);
			return -EINVAL;
		}
		if (main_set(cf, key, optarg, 0) < 0)
			return -EINVAL;
	}
	if (optind < argc) {
		agent_err("unexpected argument '%s' (see --help)",
			  argv[optind]);
		return -EINVAL;
	}
	if (!cf->store) {
		agent_err("no store: pass --store SPEC or --root DIR (see "
			  "--help)");
		return -EINVAL;
	}
	if (!a->nlisten)
		a->listen[a->nlisten++] =
			strdup("tcp://127.0.0.1:18517");
	if (!a->workers) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		a->workers = n < 1 ? 1 : n > 4 ? 4 : (unsigned int)n;
	}
	if (a->max_slots > a->queue_depth) {
		agent_err("invalid value '%u' for max-slots: expected "
			  "1..queue-depth (%u)", a->max_slots,
			  a->queue_depth);
		return -EINVAL;
	}
	return 0;
}

/*
 * The per-session limits left unset share the descriptor budget; handles
 * do only where objects cannot be opened by their fid.
 */
static void main_derive(struct agent_config *a)
{
	/* a store without a root fd (cephfs) holds no descriptors */
	int nofd = agent_backend && agent_backend->root_fd < 0;
	/*
	 * The budget is shared as if four sessions were busy, or every
	 * session the agent takes when it takes fewer (a private agent's
	 * one host may use it all)
	 */
	long busy = a->max_sessions < 4 ? a->max_sessions : 4;
	long per;

	if (!a->max_slots)
		a->max_slots = a->queue_depth / 4 ? a->queue_depth / 4 : 1;
	if (!a->max_handles && (agent_resume_handles() || nofd)) {
		/* a handle is a name, not a descriptor: memory bounds it */
		a->max_handles = AGENT_HANDLES_MAX;
	} else if (!a->max_handles) {
		per = agent_fds_budget / busy;
		a->max_handles = per < 16 ? 16 : per > AGENT_HANDLES_MAX ?
				 AGENT_HANDLES_MAX : (unsigned int)per;
	}
	if (!a->max_files && nofd) {
		a->max_files = AGENT_FILES_MAX;
	} else if (!a->max_files) {
		per = agent_fds_budget / (2 * busy);
		a->max_files = per < 16 ? 16 : per > AGENT_FILES_MAX ?
			       AGENT_FILES_MAX : (unsigned int)per;
	}
}

/*
 * Descriptors: raise the soft limit to the hard one, keep a reserve for
 * listeners, connections in handshake and every session's sockets, and
 * let the handles and open files of all sessions share the rest
 * (agent_fds_budget).  Derives the per-session defaults from it.
 */
static int main_fds(void)
{
	long reserve = (long)agent_cfg.max_sessions * 4 + MAIN_PENDING_MAX +
		       MAIN_FDS_SPARE;
	struct rlimit rl;
	long lim;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		agent_err("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return -errno;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit want = { rl.rlim_max, rl.rlim_max };

		/* an unlimited hard limit is capped by fs.nr_open */
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	lim = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX ?
	      INT_MAX : (long)rl.rlim_cur;
	if (lim - reserve < MAIN_FDS_MIN) {
		agent_err("descriptor limit %ld is too small: %ld are kept for "
			  "connections (max-sessions %u) and at least %d are "
			  "needed for files; raise it (ulimit -n, "
			  "LimitNOFILE=) to %ld or lower --max-sessions",
			  lim, reserve, agent_cfg.max_sessions, MAIN_FDS_MIN,
			  reserve + MAIN_FDS_MIN);
		return -EMFILE;
	}
	agent_fds_budget = lim - reserve;
	main_derive(&agent_cfg);
	agent_dbg("descriptors: limit %ld, %ld for files and handles; per "
		  "session at most %u handles, %u open files", lim,
		  agent_fds_budget, agent_cfg.max_handles,
		  agent_cfg.max_files);
	return 0;
}

/* Whether this process holds CAP_IPC_LOCK (in its effective set). */
static int main_has_ipc_lock(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d) < 0)
		return 0;
	return !!(d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &
		  CAP_TO_MASK(CAP_IPC_LOCK));
}

/*
 * Every worker registers its staging slots with io_uring, which pins them
 * and charges them to RLIMIT_MEMLOCK unless the agent holds CAP_IPC_LOCK.
 * Raise the soft limit to the hard one; if that is still short, say so
 * here in one line rather than let every worker fail.  0 or -ENOMEM.
 */
static int main_memlock(void)
{
	unsigned long long per = (unsigned long long)agent_cfg.queue_depth *
				 agent_cfg.slot_size;
	unsigned long long need = per * agent_cfg.workers;
	struct rlimit rl;

	if (main_has_ipc_lock() || getrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur < need) {
		struct rlimit want = { rl.rlim_max, rl.rlim_max };

		if (setrlimit(RLIMIT_MEMLOCK, &want) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return 0;
	agent_err("RLIMIT_MEMLOCK is %llu KiB but the staging slots need "
		  "%llu KiB (%u worker(s) x queue-depth %u x slot-size %u); "
		  "raise it (ulimit -l, LimitMEMLOCK=), grant CAP_IPC_LOCK, "
		  "or lower --queue-depth, --slot-size or --workers",
		  (unsigned long long)rl.rlim_cur >> 10, need >> 10,
		  agent_cfg.workers, agent_cfg.queue_depth,
		  agent_cfg.slot_size);
	return -ENOMEM;
}

/*
 * --socket-group and --socket-mode on a unix socket just bound: connect(2)
 * needs write permission on it, so they say who may mount.  0 or -errno.
 */
static int main_sock_perms(const char *name, const char *path)
{
	int ret;

	if (main_cfg.sock_group) {
		struct group *g = getgrnam(main_cfg.sock_group);
		unsigned long long gid;

		if (g)
			gid = g->gr_gid;
		else if (main_u64(main_cfg.sock_group, 0, 4294967294u, 0,
				  &gid) < 0) {
			agent_err("%s: --socket-group %s: no such group", name,
				  main_cfg.sock_group);
			return -EINVAL;
		}
		if (chown(path, (uid_t)-1, (gid_t)gid) < 0) {
			ret = -errno;
			agent_err("%s: cannot give the socket to group %s: %s",
				  name, main_cfg.sock_group, strerror(-ret));
			return ret;
		}
	}
	if (main_cfg.sock_mode >= 0 &&
	    chmod(path, (mode_t)main_cfg.sock_mode) < 0) {
		ret = -errno;
		agent_err("%s: cannot set the socket's mode to %04o: %s", name,
			  main_cfg.sock_mode, strerror(-ret));
		return ret;
	}
	return 0;
}

static int main_listen(void)
{
	unsigned int i;

	for (i = 0; i < agent_cfg.nlisten; i++) {
		struct main_listener *l = &listeners[nlisteners];
		const char *s = agent_cfg.listen[i];
		struct bcp_addr a;
		char err[256];
		int fd;

		if (bcp_addr_parse(s, &a, err, sizeof(err)) < 0) {
			agent_err("bad listen address '%s': %s", s, err);
			return -EINVAL;
		}
		if (!agent_cfg.secret && !bcp_addr_is_local(&a)) {
			agent_err("refusing to listen on %s without a secret: "
				  "anyone who can reach it could read and "
				  "write %s; give a secret with --secret-file "
				  "FILE (mode 0600, the same on the hosts), or "
				  "listen on a loopback address or a unix "
				  "socket", s, agent_backend->desc);
			return -EACCES;
		}
		if (a.family == AF_UNIX) {
			struct stat st;

			/* a stale socket is ours to replace; nothing else is */
			if (lstat(a.path, &st) == 0) {
				if (!S_ISSOCK(st.st_mode)) {
					agent_err("cannot listen on %s: %s "
						  "exists and is not a socket; "
						  "it will not be replaced", s,
						  a.path);
					return -EEXIST;
				}
				unlink(a.path);
			}
		}
		fd = bcp_addr_listen(&a, 128);
		if (fd < 0) {
			agent_err("cannot listen on %s: %s", s, strerror(-fd));
			return fd;
		}
		if (a.family == AF_UNIX) {
			int ret = main_sock_perms(s, a.path);

			if (ret < 0) {
				close(fd);
				unlink(a.path);
				return ret;
			}
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		l->fd = fd;
		l->is_unix = a.family == AF_UNIX;
		snprintf(l->name, sizeof(l->name), "%s", s);
		if (l->is_unix) {
			char *path = main_abs(a.path);

			snprintf(l->path, sizeof(l->path), "%s",
				 path ? path : a.path);
			free(path);
		}
		nlisteners++;
		agent_info("listening on %s", s);
	}
	return 0;
}

/* The rdma listener's lines, in the agent's format. */
static void main_xrdma_log(int level, const char *msg)
{
	agent_log(level <= LOG_ERR ? AGENT_LOG_ERROR :
		  level == LOG_WARNING ? AGENT_LOG_WARNING :
		  level <= LOG_INFO ? AGENT_LOG_INFO : AGENT_LOG_DEBUG,
		  "%s", msg);
}

/* After the workers recorded their staging: listen for rdma.  0/-errno. */
static int main_rdma_listen(void)
{
	struct bcp_xrdma_cfg rc = {
		.listen = agent_cfg.rdma_listen,
		.secret = agent_cfg.secret,
		.secret_len = agent_cfg.secret_len,
		.completion = (enum bcp_xsrv_completion)agent_cfg.completion,
		.poll_usec = agent_cfg.poll_usec,
		.queue_depth = agent_cfg.queue_depth,
		.log = main_xrdma_log,
	};
	static const char *const modes[] = {
		[BCP_XSRV_CQ_ADAPTIVE] = "adaptive",
		[BCP_XSRV_CQ_POLL] = "poll",
		[BCP_XSRV_CQ_EVENT] = "event",
	};
	struct sockaddr_in any = { .sin_family = AF_INET };
	uint8_t a[16];
	uint16_t port = 0;
	char err[256];
	int fd;

	fd = bcp_xrdma_listen(&rc, err, sizeof(err));
	if (fd < 0) {
		agent_err("%s", err);
		return fd;
	}
	main_rdma_fd = fd;
	bcp_xrdma_announce((struct sockaddr *)&any, a, &port);
	agent_info("listening for rdma on %s (port %u), %s completions",
		   agent_cfg.rdma_listen, port, modes[agent_cfg.completion]);
	return 0;
}

static void main_peer_name(int fd, int is_unix, char *buf, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	if (is_unix) {
		struct ucred cr;
		socklen_t cl = sizeof(cr);

		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl))
			snprintf(buf, cap, "unix:pid=%d,uid=%u", cr.pid,
				 cr.uid);
		else
			snprintf(buf, cap, "unix");
		return;
	}
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(buf, cap, "?");
	} else if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, cap, "%s:%u", host, ntohs(in->sin_port));
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, cap, "[%s]:%u", host, ntohs(in6->sin6_port));
	}
}

static void main_pending_drop(int epfd, struct main_pending *p)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
	close(p->fd);
	p->fd = -1;
}

/*
 * The table is full: the connection to drop is the oldest of the source
 * that holds the most (agent_peer_hash()), the oldest of all on a tie.
 */
static struct main_pending *main_pending_oldest(void)
{
	static uint16_t count[AGENT_PEER_BUCKETS];
	struct main_pending *old = NULL;
	unsigned int i, n, most = 0;
	uint16_t src[MAIN_PENDING_MAX];

	memset(count, 0, sizeof(count));
	for (i = 0; i < MAIN_PENDING_MAX; i++) {
		src[i] = (uint16_t)agent_peer_hash(pending[i].peer);
		count[src[i]]++;
	}
	for (i = 0; i < MAIN_PENDING_MAX; i++) {
		n = count[src[i]];
		if (n > most || (n == most && pending[i].t0 < old->t0)) {
			most = n;
			old = &pending[i];
		}
	}
	return old;
}

/*
 * accept4() found no descriptor: the listener stays readable, so stop
 * polling it for a while instead of spinning on it.  Logged at most every
 * ten seconds.
 */
static void main_accept_pause(int epfd, struct main_listener *l, int err)
{
	static uint64_t logged;
	static unsigned int quiet;
	struct epoll_event ev = { .events = 0, .data.ptr = l };
	uint64_t now = agent_now_ns();

	l->paused_until = now + MAIN_ACCEPT_PAUSE_MS * 1000000ull;
	epoll_ctl(epfd, EPOLL_CTL_MOD, l->fd, &ev);
	if (logged && now - logged < 10000000000ull) {
		quiet++;
		return;
	}
	agent_warn("accept on %s: %s; not accepting for %d ms (%u more "
		   "times since the last warning)", l->name, strerror(err),
		   MAIN_ACCEPT_PAUSE_MS, quiet);
	logged = now;
	quiet = 0;
}

/* Poll paused listeners again; the epoll timeout until the next one. */
static int main_accept_resume(int epfd, int timeout)
{
	uint64_t now = agent_now_ns();
	unsigned int i;

	for (i = 0; i < nlisteners; i++) {
		struct main_listener *l = &listeners[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = l };
		uint64_t left;

		if (!l->paused_until)
			continue;
		if (now >= l->paused_until) {
			l->paused_until = 0;
			epoll_ctl(epfd, EPOLL_CTL_MOD, l->fd, &ev);
			continue;
		}
		left = (l->paused_until - now) / 1000000 + 1;
		if (left < (uint64_t)timeout)
			timeout = (int)left;
	}
	return timeout;
}

static void main_first_frame(int epfd, struct main_pending *p);

/*
 * The table is full: make room.  A connection whose first frame waits
 * unread is served (a real host sends its HELLO at once, so under a
 * flood its connection soon becomes the oldest); the oldest one with
 * nothing waiting is dropped.  Serving reads at least a byte or frees the
 * slot, and a first frame is at most MAIN_FIRST_MAX bytes, so this ends.
 */
static struct main_pending *main_pending_make_room(int epfd)
{
	struct main_pending *p;
	unsigned int i, served;
	char c;

	for (served = 0;; served++) {
		for (i = 0; i < MAIN_PENDING_MAX; i++)
			if (pending[i].fd < 0)
				return &pending[i];
		p = main_pending_oldest();
		if (served >= MAIN_PENDING_MAX ||
		    recv(p->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 1)
			break;
		main_first_frame(epfd, p);
	}
	agent_warn_rl("limit of %d connections in handshake reached; "
		      "dropping the oldest, from %s", MAIN_PENDING_MAX,
		      p->peer);
	main_pending_drop(epfd, p);
	return p;
}

/*
 * Accept a burst, then let the epoll loop read the first frames that
 * came meanwhile: the listener is level-triggered and reports the rest.
 */
static void main_accept(int epfd, struct main_listener *l)
{
	unsigned int burst;

	for (burst = 0; burst < MAIN_ACCEPT_BURST; burst++) {
		struct epoll_event ev = { .events = EPOLLIN };
		struct main_pending *p = NULL;
		unsigned int i;
		int fd;

		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				main_accept_pause(epfd, l, errno);
			else if (errno != EAGAIN && errno != EINTR &&
				 errno != ECONNABORTED)
				agent_warn_rl("accept on %s: %s", l->name,
					      strerror(errno));
			return;
		}
		for (i = 0; i < MAIN_PENDING_MAX; i++) {
			if (pending[i].fd < 0) {
				p = &pending[i];
				break;
			}
		}
		if (!p)
			p = main_pending_make_room(epfd);
		if (!l->is_unix) {
			int one = 1;

			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
		}
		p->fd = fd;
		p->is_unix = l->is_unix;
		p->got = 0;
		p->t0 = agent_now_ns();
		main_peer_name(fd, l->is_unix, p->peer, sizeof(p->peer));
		ev.data.ptr = p;
		epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* Reply a bare status to a first frame and drop the connection. */
static void main_refuse(int epfd, struct main_pending *p,
			const struct bcp_hdr *h, int status)
{
	struct bcp_msg req, rep;
	uint8_t buf[64];
	int n;

	memset(&req, 0, sizeof(req));
	req.hdr = *h;
	bcp_msg_init_reply(&rep, &req, status);
	n = bcp_encode(buf, sizeof(buf), &rep);
	if (n > 0 && send(p->fd, buf, (size_t)n, MSG_DONTWAIT |
			  MSG_NOSIGNAL) < 0)
		agent_dbg("%s: %s", p->peer, strerror(errno));
	main_pending_drop(epfd, p);
}

static void main_first_frame(int epfd, struct main_pending *p)
{
	enum bcp_err why = BCP_E_OK;
	struct bcp_hdr h;
	uint32_t want;
	ssize_t n;
	int ret;

	if (p->fd < 0)		/* dropped earlier in this round of events */
		return;
	want = BCP_HDR_SIZE;
	if (p->got >= BCP_HDR_SIZE) {
		bcp_dec_hdr(p->buf, &h);
		want = BCP_HDR_SIZE + h.payload_len;
	}
	n = recv(p->fd, p->buf + p->got, want - p->got, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		agent_dbg("%s: closed before its first frame", p->peer);
		main_pending_drop(epfd, p);
		return;
	}
	p->got += (uint32_t)n;
	if (p->got == BCP_HDR_SIZE) {
		ret = bcp_hdr_check(p->buf, BCP_FRAME_MAX, &h, &why);
		if (ret < 0) {
			agent_warn("connection from %s: bad first frame (%s); "
				   "closing", p->peer, bcp_err_str(why));
			main_pending_drop(epfd, p);
			return;
		}
		if (h.opcode != BCP_OP_HELLO &&
		    h.opcode != BCP_OP_DATA_ATTACH) {
			agent_warn("connection from %s: %s before "
				   "authentication; closing", p->peer,
				   bcp_op_name(h.opcode));
			main_refuse(epfd, p, &h, -EACCES);
			return;
		}
		if (BCP_HDR_SIZE + h.payload_len > MAIN_FIRST_MAX) {
			agent_warn("connection from %s: oversized %s; closing",
				   p->peer, bcp_op_name(h.opcode));
			main_refuse(epfd, p, &h, -EMSGSIZE);
			return;
		}
		if (h.opcode == BCP_OP_HELLO &&
		    agent_sessions_live() >= agent_cfg.max_sessions) {
			agent_warn_rl("session limit (%u) reached; refusing %s",
				      agent_cfg.max_sessions, p->peer);
			main_refuse(epfd, p, &h, -EBUSY);
			return;
		}
	}
	if (p->got < BCP_HDR_SIZE)
		return;
	bcp_dec_hdr(p->buf, &h);
	if (p->got < BCP_HDR_SIZE + h.payload_len)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
	if (h.opcode == BCP_OP_HELLO)
		atomic_fetch_add(&agent_live_sessions, 1);
	agent_worker_hand(p->fd, p->peer, p->buf, p->got, p->is_unix);
	p->fd = -1;
}

static void main_sd_notify(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@') ||
	    strlen(path) >= sizeof(sun.sun_path))
		return;
	memcpy(sun.sun_path, path, strlen(path));
	if (path[0] == '@')
		sun.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
			  strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL,
		   (struct sockaddr *)&sun, len) < 0)
		agent_dbg("sd_notify: %s", strerror(errno));
	close(fd);
}

/*
 * Ready and detached: log where the options say (syslog, or --log-file),
 * and let go of the caller's stdout and stderr, so that a pipe from the
 * caller sees its end.
 */
static void main_detach_log(void)
{
	int nul;

	if (agent_cfg.foreground && !main_cfg.log_file)
		return;
	agent_log_use();
	if (agent_cfg.foreground)
		return;
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul < 0)
		return;
	dup2(nul, STDOUT_FILENO);
	dup2(nul, STDERR_FILENO);
	close(nul);
}

static void main_ready(int daemon_fd)
{
	main_detach_log();
	if (agent_cfg.ready_fd >= 0) {
		if (write(agent_cfg.ready_fd, "ready\n", 6) != 6)
			agent_warn("cannot write to --ready-fd %d: %s",
				   agent_cfg.ready_fd, strerror(errno));
		close(agent_cfg.ready_fd);
		agent_cfg.ready_fd = -1;
	}
	if (daemon_fd >= 0) {
		if (write(daemon_fd, "ready\n", 6) != 6)
			agent_dbg("daemon pipe: %s", strerror(errno));
		close(daemon_fd);
	}
	main_sd_notify("READY=1");
}

/*
 * Detach; the parent exits once the child is ready (0) or failed (1).
 * Before the store is opened: a fork keeps only the calling thread, and
 * the Ceph client's threads (ceph_mount()) must be the child's.  The
 * child keeps the caller's directory and stderr until main_detached().
 */
static int main_daemonize(void)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		_exit(read(p[0], &c, 1) == 1 ? 0 : 1);
	}
	close(p[0]);
	setsid();
	return p[1];
}

/* After every relative path was used: the rest of detaching. */
static int main_detached(void)
{
	int nul;

	if (chdir("/") < 0)
		return -errno;
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		close(nul);
	}
	return 0;
}

static int main_argc;
static char **main_argv;

static void main_cfg_free(struct main_cfg *c)
{
	unsigned int i;

	free(c->a->root);
	free(c->store);
	agent_store_spec_free(&c->spec);
	for (i = 0; i < c->a->nlisten; i++)
		free(c->a->listen[i]);
	free(c->a->secret_file);
	free(c->a->state_dir);
	free(c->a->rdma_listen);
	free(c->config);
	free(c->log_file);
	free(c->sock_group);
}

static int main_str_differ(const char *x, const char *y)
{
	return (x || y) && (!x || !y || strcmp(x, y));
}

/* Options fixed at start-up: which of them the file changed. */
static void main_reload_fixed(const struct main_cfg *n, char *buf,
			      size_t cap)
{
	const struct agent_config *o = &agent_cfg, *a = n->a;
	size_t len = 0;
	unsigned int i;
	int listen = o->nlisten != a->nlisten;

	for (i = 0; !listen && i < a->nlisten; i++)
		listen = strcmp(o->listen[i], a->listen[i]) != 0;
	buf[0] = '\0';
#define FIXED(cond, name)						\
	do {								\
		if ((cond) && len < cap)				\
			len += (size_t)snprintf(buf + len, cap - len,	\
						"%s%s", len ? ", " : "", \
						name);			\
	} while (0)
	FIXED(main_str_differ(main_cfg.store, n->store), "store");
	FIXED(o->store_timeout_s != a->store_timeout_s, "store-timeout");
	FIXED(listen, "listen");
	FIXED(main_str_differ(o->rdma_listen, a->rdma_listen),
	      "rdma-listen");
	FIXED(o->queue_depth != a->queue_depth, "queue-depth");
	FIXED(o->slot_size != a->slot_size, "slot-size");
	FIXED(o->workers != a->workers, "workers");
	FIXED(o->completion != a->completion, "completion");
	FIXED(o->poll_usec != a->poll_usec, "poll-usec");
	FIXED(o->inline_max != a->inline_max, "inline-max");
	FIXED(o->spin_usec != a->spin_usec, "spin-usec");
	FIXED(o->meta_io != a->meta_io, "meta-io");
	FIXED(o->squash != a->squash, "squash");
	FIXED(o->anon_uid != a->anon_uid, "anon-uid");
	FIXED(o->anon_gid != a->anon_gid, "anon-gid");
	FIXED(o->allow_devices != a->allow_devices, "allow-devices");
	FIXED(o->pool_threads != a->pool_threads, "pool-threads");
	FIXED(o->fd_cache != a->fd_cache, "fd-cache");
	FIXED(main_str_differ(o->state_dir, a->state_dir), "state-dir");
	FIXED(o->foreground != a->foreground, "foreground");
	FIXED(main_str_differ(main_cfg.log_file, n->log_file), "log-file");
	FIXED(main_str_differ(main_cfg.sock_group, n->sock_group),
	      "socket-group");
	FIXED(main_cfg.sock_mode != n->sock_mode, "socket-mode");
	FIXED(main_cfg.watch != n->watch, "watch");
	FIXED(o->max_sessions < a->max_sessions,
	      "max-sessions (raised: descriptors are reserved at start-up)");
#undef FIXED
}

/*
 * The options SIGHUP may change: read by the workers as plain loads, each
 * on its own (a session sees the old or the new value, either is valid).
 */
struct main_live {
	const char *key;
	size_t off;
	int wide;
};

static const struct main_live main_lives[] = {
	{ "max-handles", MAIN_OFF(max_handles), 0 },
	{ "max-files", MAIN_OFF(max_files), 0 },
	{ "max-regions", MAIN_OFF(max_regions), 0 },
	{ "max-region-bytes", MAIN_OFF(max_region_bytes), 1 },
	{ "max-slots", MAIN_OFF(max_slots), 0 },
	{ "max-sessions", MAIN_OFF(max_sessions), 0 },
	{ "max-unauth", MAIN_OFF(max_unauth), 0 },
	{ "handshake-timeout", MAIN_OFF(handshake_ms), 0 },
	{ "xfer-timeout", MAIN_OFF(xfer_timeout_ms), 0 },
};


/*
 * SIGHUP: read the configuration file and the command line again (the
 * command line still wins), apply what may change while serving, keep the
 * rest with a warning, and reopen the log file.  A file that does not
 * parse changes nothing.
 */
static void main_reload(void)
{
	struct agent_config na = main_defaults;	/* as at start-up */
	struct main_cfg n = { .a = &na, .sock_mode = -1 };
	uint8_t *secret = NULL, *old;
	size_t secret_len = 0, len = 0;
	char changed[1024], fixed[512], err[256];
	unsigned int i;
	int ret;

	ret = agent_log_reopen();
	if (ret < 0)
		agent_warn("SIGHUP: cannot reopen log file %s: %s; still "
			   "logging to the old file", main_cfg.log_file,
			   strerror(-ret));
	if (!main_cfg.config) {
		agent_info("SIGHUP: no configuration file to read (--config)");
		return;
	}
	main_reloading = 1;
	ret = main_parse(&n, main_argc, main_argv);
	main_reloading = 0;
	if (ret < 0) {
		agent_warn("SIGHUP: configuration file %s not reloaded; "
			   "nothing changed", main_cfg.config);
		goto out_free;
	}
	if (na.secret_file) {
		ret = bcp_secret_load(na.secret_file, &secret, &secret_len,
				      err, sizeof(err));
		if (ret < 0) {
			agent_warn("SIGHUP: %s; configuration not reloaded, "
				   "nothing changed", err);
			goto out_free;
		}
	}
	main_reload_fixed(&n, fixed, sizeof(fixed));
	if (fixed[0])
		agent_warn("SIGHUP: %s changed in %s; kept as they are until "
			   "a restart", fixed, main_cfg.config);
	/* what is derived follows what is kept */
	na.queue_depth = agent_cfg.queue_depth;
	main_derive(&na);
	if (na.max_sessions > agent_cfg.max_sessions)
		na.max_sessions = agent_cfg.max_sessions;
	if (na.max_slots > agent_cfg.queue_depth)
		na.max_slots = agent_cfg.queue_depth;

	changed[0] = '\0';
	if (na.log_level != agent_cfg.log_level) {
		static const char *const lv[] = { "error", "warning", "info",
						  "debug" };

		len += (size_t)snprintf(changed + len, sizeof(changed) - len,
					"%slog-level %s -> %s",
					len ? ", " : "",
					lv[agent_cfg.log_level],
					lv[na.log_level]);
		agent_cfg.log_level = na.log_level;
	}
	for (i = 0; i < sizeof(main_lives) / sizeof(main_lives[0]); i++) {
		const struct main_live *l = &main_lives[i];
		unsigned long long ov, nv;

		if (l->wide) {
			ov = *(uint64_t *)((char *)&agent_cfg + l->off);
			nv = *(uint64_t *)((char *)&na + l->off);
		} else {
			ov = *(unsigned int *)((char *)&agent_cfg + l->off);
			nv = *(unsigned int *)((char *)&na + l->off);
		}
		if (ov == nv || len >= sizeof(changed))
			continue;
		len += (size_t)snprintf(changed + len, sizeof(changed) - len,
					"%s%s %llu -> %llu", len ? ", " : "",
					l->key, ov, nv);
		if (l->wide)
			*(uint64_t *)((char *)&agent_cfg + l->off) = nv;
		else
			*(unsigned int *)((char *)&agent_cfg + l->off) =
				(unsigned int)nv;
	}
	if (secret && (secret_len != agent_cfg.secret_len ||
		       !agent_cfg.secret ||
		       memcmp(secret, agent_cfg.secret, secret_len))) {
		if (len < sizeof(changed))
			len += (size_t)snprintf(changed + len,
						sizeof(changed) - len,
						"%sthe secret (%s)",
						len ? ", " : "",
						na.secret_file);
		/* workers copy it under the lock (session.c) */
		pthread_mutex_lock(&agent_secret_lock);
		old = agent_cfg.secret;
		agent_cfg.secret_len = secret_len;
		agent_cfg.secret = secret;
		pthread_mutex_unlock(&agent_secret_lock);
		secret = old;	/* freed below */
		if (agent_cfg.rdma_listen)
			agent_warn("SIGHUP: the rdma listener keeps the "
				   "secret it started with until a restart");
	} else if (!na.secret_file && agent_cfg.secret_file) {
		agent_warn("SIGHUP: secret-file is no longer set in %s; "
			   "keeping the secret until a restart",
			   main_cfg.config);
	}
	agent_info("SIGHUP: reloaded %s: %s", main_cfg.config,
		   len ? changed : "nothing changed");
out_free:
	free(secret);
	main_cfg_free(&n);
}

static int main_loop(int sfd)
{
	struct epoll_event evs[32];
	unsigned int i;
	int epfd, quit = 0;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return -errno;
	for (i = 0; i < nlisteners; i++) {
		struct epoll_event ev = { .events = EPOLLIN,
					  .data.ptr = &listeners[i] };

		epoll_ctl(epfd, EPOLL_CTL_ADD, listeners[i].fd, &ev);
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

		epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev);
	}
	if (main_rdma_fd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN,
					  .data.ptr = &main_rdma_tag };

		epoll_ctl(epfd, EPOLL_CTL_ADD, main_rdma_fd, &ev);
	}
	while (!quit) {
		uint64_t now;
		int n, j, timeout;

		timeout = agent_cfg.handshake_ms < 500 ?
			  (int)agent_cfg.handshake_ms : 500;
		timeout = main_accept_resume(epfd, timeout);
		n = epoll_wait(epfd, evs, 32, timeout);
		if (n < 0 && errno != EINTR) {
			agent_err("epoll_wait: %s", strerror(errno));
			break;
		}
		for (j = 0; j < n; j++) {
			void *p = evs[j].data.ptr;

			if (!p) {
				struct signalfd_siginfo si;

				if (read(sfd, &si, sizeof(si)) != sizeof(si))
					continue;
				if (si.ssi_signo == SIGHUP) {
					main_reload();
					continue;
				}
				agent_info("%s: shutting down",
					   strsignal((int)si.ssi_signo));
				quit = 1;
			} else if (p == &main_rdma_tag) {
				bcp_xrdma_listen_event();
			} else if ((struct main_listener *)p >= listeners &&
				   (struct main_listener *)p <
					   listeners + AGENT_LISTEN_MAX) {
				main_accept(epfd, p);
			} else {
				main_first_frame(epfd, p);
			}
		}
		now = agent_now_ns();
		for (i = 0; i < MAIN_PENDING_MAX; i++) {
			if (pending[i].fd >= 0 &&
			    now - pending[i].t0 >
				    agent_cfg.handshake_ms * 1000000ull) {
				agent_warn_rl("connection from %s sent nothing "
					      "within %u ms; closing",
					      pending[i].peer,
					      agent_cfg.handshake_ms);
				main_pending_drop(epfd, &pending[i]);
			}
		}
	}
	for (i = 0; i < MAIN_PENDING_MAX; i++)
		if (pending[i].fd >= 0)
			main_pending_drop(epfd, &pending[i]);
	close(epfd);
	return 0;
}

/*
 * The state directory: --state-dir, else AGENT_STATE_DIR for root and,
 * for another user (a local: mount the host daemon started), the
 * bluecache-agent directory of $XDG_STATE_HOME or ~/.local/state, whose
 * parents are made 0700 as needed.
 */
static int main_state_dir(char *buf, size_t cap)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char *p;
	int n;

	if (agent_cfg.state_dir || geteuid() == 0) {
		n = snprintf(buf, cap, "%s", agent_cfg.state_dir ?
			     agent_cfg.state_dir : AGENT_STATE_DIR);
		return n > 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
	}
	if (xdg && xdg[0] == '/')
		n = snprintf(buf, cap, "%s/bluecache-agent", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, cap, "%s/.local/state/bluecache-agent",
			     home);
	else
		n = snprintf(buf, cap, "%s", AGENT_STATE_DIR);
	if (n <= 0 || (size_t)n >= cap) {
		agent_err("state directory: path too long");
		return -ENAMETOOLONG;
	}
	for (p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		mkdir(buf, 0700);
		*p = '/';
	}
	return 0;
}

/*
 * Who this agent is to a cluster store across its restarts: the host, the
 * state directory and the listeners, which no two agents running at once
 * share (struct agent_store_spec, uuid).  NULL when out of memory: the
 * store then reclaims nothing.
 */
static char *main_uuid(const char *state)
{
	uint64_t h = 0xcbf29ce484222325ull;
	char host[256] = "", *out;
	const char *p;
	unsigned int i;

	gethostname(host, sizeof(host) - 1);
	for (i = 0; i <= agent_cfg.nlisten; i++) {
		p = i == 0 ? state : agent_cfg.listen[i - 1];
		do {
			h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
		} while (*p++);
	}
	if (asprintf(&out, "bluecache-agent:%s:%016llx", host,
		     (unsigned long long)h) < 0)
		return NULL;
	return out;
}

/*
 * Where the cephfs store logs acknowledged writes (struct
 * agent_store_spec, run_dir): systemd's RuntimeDirectory, else
 * /run/bluecache-agent for root or the user's $XDG_RUNTIME_DIR, else the
 * state directory; none with --state-dir none, as then nothing is to
 * outlive the agent.  NULL when out of memory: no log.
 */
static char *main_run_dir(const char *state)
{
	const char *rt = getenv("RUNTIME_DIRECTORY");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *out = NULL;

	if (!strcmp(state, "none"))
		return strdup("none");
	if (rt && rt[0] == '/') {
		/* one directory per RuntimeDirectory= name, ':' between */
		return strndup(rt, strcspn(rt, ":"));
	}
	if (geteuid() == 0)
		return strdup("/run/bluecache-agent");
	if (xdg && xdg[0] == '/' &&
	    asprintf(&out, "%s/bluecache-agent", xdg) < 0)
		return NULL;
	return out ? out : strdup(state);
}

/* The store being opened on a thread of its own (main_store_open). */
struct main_open {
	int ret;
	atomic_int done;
};

static void *main_open_thread(void *arg)
{
	struct main_open *o = arg;

	o->ret = agent_backend_open(&main_cfg.spec,
				    agent_cfg.store_timeout_s * 1000u,
				    &agent_backend);
	atomic_store(&o->done, 1);
	return NULL;
}

/*
 * Open the store with SIGTERM, SIGINT and SIGHUP blocked in every thread
 * it starts (libcephfs's, in ceph_mount(), inherit the mask: one of them
 * must never take SIGTERM's default action), while this thread still
 * ends the start-up on SIGTERM or SIGINT: a cluster that does not answer
 * holds the start for up to --store-timeout.  A SIGHUP waits for the
 * signalfd.  Every kind of store fails here with one line (logged).
 */
static int main_store_open(void)
{
	struct timespec tick = { 0, 50 * 1000 * 1000 };
	struct main_open o = { .ret = -1 };
	sigset_t stop;
	pthread_t t;
	int sig;

	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	if (pthread_create(&t, NULL, main_open_thread, &o) != 0) {
		main_open_thread(&o);
		return o.ret;
	}
	while (!atomic_load(&o.done)) {
		sig = sigtimedwait(&stop, NULL, &tick);
		if (sig > 0) {
			agent_err("stopped by SIG%s while opening the store",
				  sigabbrev_np(sig));
			_exit(1);
		}
	}
	pthread_join(t, NULL);
	return o.ret;
}

/*
 * Stopping: the workers drain (AGENT_DRAIN_MS), then the store's last
 * sync and close.  A cluster that stopped answering (an MDS stopped)
 * would hold the agent in them for ever: a host's call inside the Ceph
 * client keeps its session, the sync waits for the MDS.  Past the drain
 * and --store-timeout the agent exits without them.  Nothing answered is
 * lost: the cephfs store's write log stays for the next start to replay,
 * the posix store's writes are in its kernel's cache.
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* done was set */
	int done;
	int watching;			/* t runs main_stop_watch() */
	pthread_t t;
	char desc[256];			/* the store's */
} main_stop = {
	.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};

static void *main_stop_watch(void *arg)
{
	unsigned int secs = AGENT_DRAIN_MS / 1000 + agent_cfg.store_timeout_s;
	struct timespec until;
	int ret = 0;

	(void)arg;
	bcp_deadline_ms(&until, secs * 1000u);
	pthread_mutex_lock(&main_stop.lock);
	while (!main_stop.done && ret != ETIMEDOUT)
		ret = pthread_cond_clockwait(&main_stop.cond, &main_stop.lock,
					     CLOCK_MONOTONIC, &until);
	if (!main_stop.done) {
		agent_err("%s did not finish stopping within %u s (its "
			  "cluster does not answer?): exiting without it; a "
			  "cephfs store replays its write log at the next "
			  "start", main_stop.desc, secs);
		_exit(1);
	}
	pthread_mutex_unlock(&main_stop.lock);
	return NULL;
}

static void main_stop_begin(void)
{
	snprintf(main_stop.desc, sizeof(main_stop.desc), "%s",
		 agent_backend->desc);
	main_stop.watching = pthread_create(&main_stop.t, NULL,
					    main_stop_watch, NULL) == 0;
}

static void main_stop_end(void)
{
	if (!main_stop.watching)
		return;
	pthread_mutex_lock(&main_stop.lock);
	main_stop.done = 1;
	pthread_cond_signal(&main_stop.cond);
	pthread_mutex_unlock(&main_stop.lock);
	pthread_join(main_stop.t, NULL);
}

int main(int argc, char **argv)
{
	struct agent_stats total;
	sigset_t mask;
	unsigned int i;
	int sfd, daemon_fd = -1, ret;
	char err[256], state[PATH_MAX];

	for (i = 0; i < MAIN_PENDING_MAX; i++)
		pending[i].fd = -1;
	main_argc = argc;
	main_argv = argv;
	main_start_dir = getcwd(NULL, 0);
	main_defaults = agent_cfg;
	if (main_parse(&main_cfg, argc, argv) < 0)
		return 2;
	if (agent_cfg.secret_file &&
	    bcp_secret_load(agent_cfg.secret_file, &agent_cfg.secret,
			    &agent_cfg.secret_len, err, sizeof(err)) < 0) {
		agent_err("%s", err);
		return 1;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	ret = main_state_dir(state, sizeof(state));
	if (ret < 0)
		return 1;
	main_cfg.spec.uuid = main_uuid(state);
	main_cfg.spec.run_dir = main_run_dir(state);
	if (!agent_cfg.foreground) {
		daemon_fd = main_daemonize();
		if (daemon_fd < 0) {
			agent_err("cannot detach: %s", strerror(-daemon_fd));
			return 1;
		}
	}
	if (main_store_open() < 0)
		return 1;
	agent_cfg.root_fd = agent_backend->root_fd;
	ret = agent_resume_init(state, agent_cfg.root_fd);
	if (ret < 0)
		return 1;
	ret = main_fds();
	if (ret < 0)
		return 1;
	ret = main_memlock();
	if (ret < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		agent_err("signalfd: %s", strerror(errno));
		return 1;
	}
	if (main_cfg.log_file) {
		ret = agent_log_file_open(main_cfg.log_file);
		if (ret < 0) {
			agent_err("log file %s: %s", main_cfg.log_file,
				  strerror(-ret));
			return 1;
		}
	}
	ret = main_listen();
	if (ret < 0)
		goto out_listeners;
	if (!agent_cfg.foreground) {
		ret = main_detached();
		if (ret < 0) {
			agent_err("cannot detach: chdir /: %s", strerror(-ret));
			goto out_listeners;
		}
	}
	/*
	 * The mode a host sends is final (it carries the caller's umask
	 * already): the agent's own umask must never mask it.  Set after
	 * the listeners, whose sockets keep the mode the umask gave them.
	 */
	umask(0);
	agent_notify_init();
	ret = agent_workers_start(agent_cfg.workers);
	if (ret < 0)
		goto out_listeners;
	if (agent_cfg.rdma_listen) {
		ret = main_rdma_listen();
		if (ret < 0) {
			agent_workers_stop(NULL);
			goto out_listeners;
		}
	}
	if (agent_cfg.metrics_listen) {
		ret = agent_metrics_start(agent_cfg.metrics_listen);
		if (ret < 0) {
			agent_workers_stop(NULL);
			bcp_xrdma_shutdown();
			goto out_listeners;
		}
	}
	/* after the workers: what it sees goes to their sessions */
	ret = agent_watch_start(agent_cfg.root_fd, agent_backend->desc,
				(enum agent_watch_mode)main_cfg.watch);
	if (ret < 0) {
		agent_metrics_stop();
		agent_workers_stop(NULL);
		bcp_xrdma_shutdown();
		goto out_listeners;
	}
	agent_info("serving %s with %u worker(s), %u slots of %u bytes each",
		   agent_backend->desc, agent_cfg.workers,
		   agent_cfg.queue_depth,
		   agent_cfg.slot_size);
	main_ready(daemon_fd);
	main_loop(sfd);
	main_stop_begin();
	agent_watch_stop();
	agent_metrics_stop();
	main_sd_notify("STOPPING=1");
	for (i = 0; i < nlisteners; i++) {
		close(listeners[i].fd);
		listeners[i].fd = -1;
	}
	memset(&total, 0, sizeof(total));
	agent_workers_stop(&total);
	agent_linger_fini();
	agent_notify_fini();
	bcp_xrdma_shutdown();
	agent_backend->ops->sync(agent_backend);
	agent_stats_print(&total);
	ret = 0;

out_listeners:
	for (i = 0; i < nlisteners; i++) {
		if (listeners[i].fd >= 0)
			close(listeners[i].fd);
		if (listeners[i].is_unix)
			unlink(listeners[i].path);
	}
	close(sfd);
	agent_resume_fini();
	agent_backend_close(agent_backend);
	main_stop_end();
	agent_backend = NULL;
	free(agent_cfg.secret);
	return ret < 0 ? 1 : 0;
}
