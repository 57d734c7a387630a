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
 * the data root, print the summary and exit 0.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <signal.h>
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
#include <sys/un.h>
#include <syslog.h>

#include "agent.h"
#include "bcp_auth.h"
#include "bcp_xfer_srv.h"

#define MAIN_PENDING_MAX	256
#define MAIN_FIRST_MAX		128	/* HELLO and DATA_ATTACH fit */

struct agent_config agent_cfg = {
	.queue_depth = 64,
	.slot_size = 1u << 20,
	.log_level = AGENT_LOG_INFO,
	.ready_fd = -1,
	.root_fd = -1,
	.completion = BCP_XSRV_CQ_ADAPTIVE,
	.poll_usec = 20,
	.inline_max = 1u << 20,
	.spin_usec = 0,
	.meta_io = AGENT_META_SYNC,
};

/* The rdma listener's event channel (main_loop polls it), or -1. */
static int main_rdma_fd = -1;
static char main_rdma_tag;

struct main_listener {
	int fd;
	int is_unix;
	char name[300];
	char path[108];
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
"Usage: bluecache-agent --root DIR [OPTION]...\n"
"Serve the objects under DIR to bluecachefs hosts over the BCP protocol.\n"
"\n"
"  -r, --root DIR            data root: every object lives beneath it\n"
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
"  -f, --foreground          do not detach\n"
"      --rdma-listen ADDR[:PORT]\n"
"                            accept rdma data connections on the RDMA\n"
"                            device that has ADDR (IPv4, or [IPv6]; default\n"
"                            port 18517, 0 picks one); announced in HELLO\n"
"      --completion MODE     rdma completions: poll, event or adaptive\n"
"                            (default adaptive: poll, then sleep)\n"
"      --poll-usec N         adaptive: microseconds to poll before sleeping\n"
"                            (default 20)\n"
"      --inline-max BYTES    shm: move cached segments up to BYTES between\n"
"                            file and host memory on the worker thread\n"
"                            (default 1M, 0 = always through io_uring)\n"
"      --spin-usec N         after serving a request, poll N microseconds\n"
"                            for the next before sleeping (default 0: off)\n"
"      --meta-io MODE        metadata operations: sync (system calls on the\n"
"                            worker thread, the default) or uring (through\n"
"                            the worker's io_uring)\n"
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
	{ "completion", required_argument, NULL, 1001 },
	{ "poll-usec", required_argument, NULL, 1002 },
	{ "inline-max", required_argument, NULL, 1003 },
	{ "spin-usec", required_argument, NULL, 1004 },
	{ "meta-io", required_argument, NULL, 1005 },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static int main_uint(const char *s, unsigned long long min,
		     unsigned long long max, int suffix, unsigned int *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (suffix && (*end == 'k' || *end == 'K')) {
		v <<= 10;
		end++;
	} else if (suffix && (*end == 'm' || *end == 'M')) {
		v <<= 20;
		end++;
	}
	if (*end || v < min || v > max)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

/* One option from the command line or the config file.  0 or -EINVAL. */
static int main_set(const char *key, const char *val, int from_file)
{
	unsigned int u;

	if (!strcmp(key, "root")) {
		free(agent_cfg.root);
		agent_cfg.root = strdup(val);
	} else if (!strcmp(key, "listen")) {
		if (agent_cfg.nlisten >= AGENT_LISTEN_MAX) {
			agent_err("too many listen addresses (at most %d)",
				  AGENT_LISTEN_MAX);
			return -EINVAL;
		}
		agent_cfg.listen[agent_cfg.nlisten++] = strdup(val);
	} else if (!strcmp(key, "secret-file")) {
		free(agent_cfg.secret_file);
		agent_cfg.secret_file = strdup(val);
	} else if (!strcmp(key, "queue-depth")) {
		if (main_uint(val, 1, 4096, 0, &u) < 0)
			goto out_bad;
		agent_cfg.queue_depth = u;
	} else if (!strcmp(key, "slot-size")) {
		if (main_uint(val, 4096, BCP_SEG_LEN_MAX, 1, &u) < 0 ||
		    u % 4096)
			goto out_bad;
		agent_cfg.slot_size = u;
	} else if (!strcmp(key, "workers")) {
		if (main_uint(val, 1, 64, 0, &u) < 0)
			goto out_bad;
		agent_cfg.workers = u;
	} else if (!strcmp(key, "log-level")) {
		int l = agent_log_level_parse(val);

		if (l < 0)
			goto out_bad;
		agent_cfg.log_level = l;
	} else if (!strcmp(key, "foreground")) {
		if (!strcmp(val, "true") || !strcmp(val, "yes") ||
		    !strcmp(val, "1"))
			agent_cfg.foreground = 1;
		else if (!strcmp(val, "false") || !strcmp(val, "no") ||
			 !strcmp(val, "0"))
			agent_cfg.foreground = 0;
		else
			goto out_bad;
	} else if (!strcmp(key, "rdma-listen")) {
		struct sockaddr_storage ss;
		int ret = bcp_xrdma_addr_parse(val, &ss);

		if (ret == -EOPNOTSUPP) {
			agent_err("rdma-listen: the rdma transport is not "
				  "built into this agent (configure "
				  "--with-rdma)");
			return -EINVAL;
		}
		if (ret < 0)
			goto out_bad;
		free(agent_cfg.rdma_listen);
		agent_cfg.rdma_listen = strdup(val);
	} else if (!strcmp(key, "completion")) {
		if (!strcmp(val, "poll"))
			agent_cfg.completion = BCP_XSRV_CQ_POLL;
		else if (!strcmp(val, "event"))
			agent_cfg.completion = BCP_XSRV_CQ_EVENT;
		else if (!strcmp(val, "adaptive"))
			agent_cfg.completion = BCP_XSRV_CQ_ADAPTIVE;
		else
			goto out_bad;
	} else if (!strcmp(key, "poll-usec")) {
		if (main_uint(val, 0, 1000000, 0, &u) < 0)
			goto out_bad;
		agent_cfg.poll_usec = u;
	} else if (!strcmp(key, "inline-max")) {
		if (main_uint(val, 0, BCP_SEG_LEN_MAX, 1, &u) < 0)
			goto out_bad;
		agent_cfg.inline_max = u;
	} else if (!strcmp(key, "spin-usec")) {
		if (main_uint(val, 0, 10000, 0, &u) < 0)
			goto out_bad;
		agent_cfg.spin_usec = u;
	} else if (!strcmp(key, "meta-io")) {
		if (!strcmp(val, "sync"))
			agent_cfg.meta_io = AGENT_META_SYNC;
		else if (!strcmp(val, "uring"))
			agent_cfg.meta_io = AGENT_META_URING;
		else
			goto out_bad;
	} else if (!strcmp(key, "ready-fd")) {
		if (main_uint(val, 0, INT_MAX, 0, &u) < 0)
			goto out_bad;
		agent_cfg.ready_fd = (int)u;
	} else {
		agent_err("unknown %s '%s'", from_file ? "configuration key" :
			  "option", key);
		return -EINVAL;
	}
	return 0;

out_bad:
	agent_err("invalid value '%s' for %s (see --help)", val, key);
	return -EINVAL;
}

static int main_ini(void *user, const char *section, const char *name,
		    const char *value)
{
	(void)user;
	if (section[0] && strcmp(section, "agent")) {
		agent_err("configuration: unknown section [%s]", section);
		return 0;
	}
	return main_set(name, value, 1) == 0;
}

static int main_parse(int argc, char **argv)
{
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
		c = ini_parse(file, main_ini, NULL);
		if (c < 0) {
			agent_err("cannot read configuration file %s", file);
			return -EINVAL;
		}
		if (c > 0) {
			agent_err("configuration file %s: invalid line %d",
				  file, c);
			return -EINVAL;
		}
	}
	optind = 1;
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
			agent_cfg.foreground = 1;
			continue;
		case 'l':
			if (!have_listen) {
				/* the command line replaces the file's */
				while (agent_cfg.nlisten)
					free(agent_cfg.listen[
						--agent_cfg.nlisten]);
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
		case 1001: key = "completion"; break;
		case 1002: key = "poll-usec"; break;
		case 1003: key = "inline-max"; break;
		case 1004: key = "spin-usec"; break;
		case 1005: key = "meta-io"; break;
		default:
			fputs("Try 'bluecache-agent --help'.\n", stderr);
			return -EINVAL;
		}
		if (main_set(key, optarg, 0) < 0)
			return -EINVAL;
	}
	if (optind < argc) {
		agent_err("unexpected argument '%s' (see --help)",
			  argv[optind]);
		return -EINVAL;
	}
	if (!agent_cfg.root) {
		agent_err("no data root: pass --root DIR (see --help)");
		return -EINVAL;
	}
	if (!agent_cfg.nlisten)
		agent_cfg.listen[agent_cfg.nlisten++] =
			strdup("tcp://127.0.0.1:18517");
	if (!agent_cfg.workers) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		agent_cfg.workers = n < 1 ? 1 : n > 4 ? 4 : (unsigned int)n;
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
				  "socket", s, agent_cfg.root);
			return -EACCES;
		}
		if (a.family == AF_UNIX) {
			struct stat st;

			if (lstat(a.path, &st) == 0 && S_ISSOCK(st.st_mode))
				unlink(a.path);
		}
		fd = bcp_addr_listen(&a, 128);
		if (fd < 0) {
			agent_err("cannot listen on %s: %s", s, strerror(-fd));
			return fd;
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		l->fd = fd;
		l->is_unix = a.family == AF_UNIX;
		snprintf(l->name, sizeof(l->name), "%s", s);
		if (l->is_unix)
			snprintf(l->path, sizeof(l->path), "%s", a.path);
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

static void main_accept(int epfd, struct main_listener *l)
{
	for (;;) {
		struct epoll_event ev = { .events = EPOLLIN };
		struct main_pending *p = NULL;
		unsigned int i;
		int fd;

		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
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
		if (!p) {
			agent_warn_rl("limit of %d connections in handshake "
				      "reached; refusing one",
				      MAIN_PENDING_MAX);
			close(fd);
			continue;
		}
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
		    agent_sessions_live() >= AGENT_SESSIONS_MAX) {
			agent_warn("session limit (%d) reached; refusing %s",
				   AGENT_SESSIONS_MAX, p->peer);
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

static void main_ready(int daemon_fd)
{
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

/* Detach; the parent exits once the child is ready (0) or failed (1). */
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
	if (chdir("/") < 0)
		return -errno;
	{
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (nul >= 0) {
			dup2(nul, STDIN_FILENO);
			close(nul);
		}
	}
	return p[1];
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
		int n, j;

		n = epoll_wait(epfd, evs, 32, 500);
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
				if (si.ssi_signo == SIGHUP)
					continue;
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
				    AGENT_HANDSHAKE_MS * 1000000ull) {
				agent_warn("connection from %s sent nothing "
					   "within %d ms; closing",
					   pending[i].peer, AGENT_HANDSHAKE_MS);
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

int main(int argc, char **argv)
{
	struct agent_stats total;
	struct rlimit rl;
	sigset_t mask;
	unsigned int i;
	int sfd, daemon_fd = -1, ret;
	char err[256];

	for (i = 0; i < MAIN_PENDING_MAX; i++)
		pending[i].fd = -1;
	if (main_parse(argc, argv) < 0)
		return 2;
	if (agent_cfg.secret_file &&
	    bcp_secret_load(agent_cfg.secret_file, &agent_cfg.secret,
			    &agent_cfg.secret_len, err, sizeof(err)) < 0) {
		agent_err("secret file %s: %s", agent_cfg.secret_file, err);
		return 1;
	}
	agent_cfg.root_fd = open(agent_cfg.root, O_PATH | O_DIRECTORY |
				 O_CLOEXEC);
	if (agent_cfg.root_fd < 0) {
		agent_err("data root %s: %s", agent_cfg.root, strerror(errno));
		return 1;
	}
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		agent_err("signalfd: %s", strerror(errno));
		return 1;
	}
	ret = main_listen();
	if (ret < 0)
		goto out_listeners;
	if (!agent_cfg.foreground) {
		daemon_fd = main_daemonize();
		if (daemon_fd < 0) {
			agent_err("cannot detach: %s", strerror(-daemon_fd));
			ret = daemon_fd;
			goto out_listeners;
		}
	}
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
	agent_info("serving %s with %u worker(s), %u slots of %u bytes each",
		   agent_cfg.root, agent_cfg.workers, agent_cfg.queue_depth,
		   agent_cfg.slot_size);
	main_ready(daemon_fd);
	main_loop(sfd);
	main_sd_notify("STOPPING=1");
	for (i = 0; i < nlisteners; i++) {
		close(listeners[i].fd);
		listeners[i].fd = -1;
	}
	memset(&total, 0, sizeof(total));
	agent_workers_stop(&total);
	bcp_xrdma_shutdown();
	{
		int rfd = openat(agent_cfg.root_fd, ".", O_RDONLY |
				 O_DIRECTORY | O_CLOEXEC);

		if (rfd < 0 || syncfs(rfd) < 0)
			agent_err("syncfs of %s: %s", agent_cfg.root,
				  strerror(errno));
		if (rfd >= 0)
			close(rfd);
	}
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
	close(agent_cfg.root_fd);
	free(agent_cfg.secret);
	return ret < 0 ? 1 : 0;
}
