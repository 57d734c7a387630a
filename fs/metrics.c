/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics.c - what the daemon counts of its requests to the agent, and
 * the two ways out of it (doc/metrics.md):
 *
 *  - the stats socket, always: a unix socket named for the mount's device
 *    number (bcfs_stats_path()), which `bluecachefs --stats` finds from
 *    the st_dev of any path in the mount.  A connection gets one
 *    struct bcfs_msnap and is closed; a small thread of its own serves it.
 *  - with -o metrics=ADDR:PORT, /metrics in the Prometheus text format,
 *    served by libmicrohttpd on its own thread with a bounded number of
 *    connections and an idle timeout, so no scraper slows the FUSE threads.
 *
 * Counting is a few relaxed atomic adds per request on counters shared by
 * every thread (metrics.h); nothing here takes a lock on the data path.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <microhttpd.h>

#include "bcfs_i.h"
#include "bcp_frame.h"

#define METRICS_CONN_MAX	16	/* scrapers connected at once */
#define METRICS_TIMEOUT_S	5	/* an idle scraper is closed */

static struct bcfs_msnap bcfs_m;
static uint64_t bcfs_m_start;

static struct MHD_Daemon *metrics_mhd;
static int metrics_fd = -1;
/* the stats socket: its thread, listening fd, stop pipe and path */
static pthread_t stats_thread;
static int stats_started;
static int stats_fd = -1;
static int stats_stop[2] = { -1, -1 };
static char stats_path[PATH_MAX];

static inline void m_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static void metrics_op(uint16_t op, int status, uint64_t ns)
{
	struct bcfs_mop *o;
	uint64_t us = ns / 1000;
	unsigned int b = 0;

	if (op >= BCP_OP_MAX)
		return;
	o = &bcfs_m.op[op];
	/* bucket b holds (2^(b-1), 2^b] microseconds */
	if (us > 1)
		b = 64 - (unsigned int)__builtin_clzll(us - 1);
	if (b > BCFS_MHIST - 1)
		b = BCFS_MHIST - 1;
	m_add(&o->count, 1);
	if (status < 0)
		m_add(&o->errors, 1);
	m_add(&o->sum_ns, ns);
	m_add(&o->hist[b], 1);
}

void bcfs_metrics_begin(struct bcfs_mtimer *t, uint16_t op)
{
	t->t0 = bcfs_now_ns();
	t->op = op;
}

void bcfs_metrics_end(const struct bcfs_mtimer *t, int status)
{
	if (t->t0)
		metrics_op(t->op, status, bcfs_now_ns() - t->t0);
}

void bcfs_metrics_rw(int write, ssize_t total, uint64_t t0)
{
	metrics_op(write ? BCP_OP_BATCH_PUSH : BCP_OP_BATCH_PULL,
		   total < 0 ? (int)total : 0, bcfs_now_ns() - t0);
	if (total > 0)
		m_add(write ? &bcfs_m.bytes_written : &bcfs_m.bytes_read,
		      (uint64_t)total);
}

uint64_t bcfs_metrics_written(void)
{
	return __atomic_load_n(&bcfs_m.bytes_written, __ATOMIC_RELAXED);
}

void bcfs_metrics_reconnected(void)
{
	m_add(&bcfs_m.reconnects, 1);
}

void bcfs_metrics_notice(uint16_t kind)
{
	if (kind >= BCP_NOTIFY_INODE && kind <= BCP_NOTIFY_RESET)
		m_add(&bcfs_m.notices[kind - BCP_NOTIFY_INODE], 1);
}

const char *bcfs_metrics_op_name(uint16_t op, char *buf, size_t len)
{
	const char *n;
	size_t i;

	if (op == BCP_OP_BATCH_PULL)
		n = "read";
	else if (op == BCP_OP_BATCH_PUSH)
		n = "write";
	else
		n = bcp_op_name(op);
	if (!strcmp(n, "?"))
		return NULL;
	for (i = 0; n[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)n[i]);
	buf[i] = 0;
	return buf;
}

void bcfs_metrics_snap(struct bcfs_msnap *s)
{
	const uint64_t *from = (const uint64_t *)&bcfs_m;
	uint64_t *to = (uint64_t *)s;
	size_t i;

	for (i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
	s->magic = BCFS_STATS_MAGIC;
	s->size = sizeof(*s);
	s->uptime_ns = bcfs_now_ns() - bcfs_m_start;
}

/* ---- the stats socket ---- */

int bcfs_stats_path(dev_t dev, unsigned int i, char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	switch (i) {
	case 0:
		n = snprintf(buf, len, "/run/" BCFS_PROG);
		break;
	case 1:
		if (!xdg || xdg[0] != '/')
			return bcfs_stats_path(dev, 2, buf, len);
		n = snprintf(buf, len, "%s/" BCFS_PROG, xdg);
		break;
	case 2:
		n = snprintf(buf, len, "/tmp/" BCFS_PROG "-%u",
			     (unsigned int)geteuid());
		break;
	default:
		return -ENOENT;
	}
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	n += snprintf(buf + n, len - (size_t)n, "/%u:%u.sock", major(dev),
		      minor(dev));
	return (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/*
 * The device number of the mount on mnt, from /proc/self/mountinfo: the
 * daemon must not stat its own mount (the kernel would ask the daemon).
 * The last line for mnt wins (the mount on top).
 */
static int stats_mount_dev(const char *mnt, dev_t *out)
{
	unsigned int maj, min;
	char *line = NULL, path[PATH_MAX];
	size_t cap = 0;
	int found = -ENOENT;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *p, *q;

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min,
			   path) != 3)
			continue;
		/* octal escapes (\040 for a space) */
		for (p = q = path; *p; p++, q++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' &&
			    p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
			    p[3] <= '7') {
				*q = (char)((p[1] - '0') * 64 +
					    (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else {
				*q = *p;
			}
		}
		*q = 0;
		if (!strcmp(path, mnt)) {
			*out = makedev(maj, min);
			found = 0;
		}
	}
	free(line);
	fclose(f);
	return found;
}

/* The directory of path: made 0700 when missing, refused if not ours. */
static int stats_dir(char *path)
{
	char *slash = strrchr(path, '/');
	struct stat st;
	int ret = 0;

	*slash = 0;
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		ret = -errno;
	else if (lstat(path, &st) < 0)
		ret = -errno;
	else if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
		 (st.st_mode & 0022))
		ret = -EPERM;
	*slash = '/';
	return ret;
}

static void *stats_main(void *arg)
{
	struct pollfd p[2] = {
		{ .fd = stats_fd, .events = POLLIN },
		{ .fd = stats_stop[0], .events = POLLIN },
	};
	struct timeval tv = { .tv_sec = 1 };
	struct bcfs_msnap *s;

	(void)arg;
	s = malloc(sizeof(*s));
	if (!s)
		return NULL;
	for (;;) {
		int c;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		c = accept4(stats_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		/* a reader that does not read is dropped, not waited for */
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		bcfs_metrics_snap(s);
		if (send(c, s, sizeof(*s), MSG_NOSIGNAL) < 0)
			bcfs_dbg("stats socket: %s", strerror(errno));
		close(c);
	}
	free(s);
	return NULL;
}

static int stats_start(const char *mnt)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	unsigned int cand;
	dev_t dev;
	int ret;

	ret = stats_mount_dev(mnt, &dev);
	if (ret < 0)
		return ret;
	cand = geteuid() == 0 ? 0 : getenv("XDG_RUNTIME_DIR") ? 1 : 2;
	ret = bcfs_stats_path(dev, cand, stats_path, sizeof(stats_path));
	if (ret < 0)
		return ret;
	if (strlen(stats_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	ret = stats_dir(stats_path);
	if (ret < 0)
		return ret;
	strcpy(sa.sun_path, stats_path);
	/* non-blocking: a client gone between poll and accept4 costs nothing */
	stats_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			  0);
	if (stats_fd < 0)
		return -errno;
	/* a socket left by a daemon that died on this device number */
	unlink(stats_path);
	if (bind(stats_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(stats_fd, 8) < 0)
		goto out_errno;
	if (pipe2(stats_stop, O_CLOEXEC) < 0)
		goto out_unlink;
	ret = -pthread_create(&stats_thread, NULL, stats_main, NULL);
	if (ret < 0)
		goto out_pipe;
	pthread_setname_np(stats_thread, "bcfs-stats");
	stats_started = 1;
	return 0;

out_pipe:
	close(stats_stop[0]);
	close(stats_stop[1]);
	stats_stop[0] = stats_stop[1] = -1;
	errno = -ret;
out_unlink:
	unlink(stats_path);
out_errno:
	ret = -errno;
	close(stats_fd);
	stats_fd = -1;
	return ret;
}

/* ---- the Prometheus endpoint ---- */

static void metrics_head(FILE *f, const char *name, const char *type,
			 const char *help)
{
	fprintf(f, "# HELP bluecachefs_%s %s\n# TYPE bluecachefs_%s %s\n",
		name, help, name, type);
}

static const char *const notice_kinds[BCFS_MNOTICE_KINDS] = {
	"inode", "entry", "delete", "reset"
};

static void metrics_render(FILE *f)
{
	struct bcfs_msnap *s = malloc(sizeof(*s));
	unsigned int op, b;
	char buf[32];
	const char *l;

	if (!s)
		return;
	bcfs_metrics_snap(s);
	metrics_head(f, "requests_total", "counter",
		     "Requests sent to the agent, by operation.");
	for (op = 1; op < BCP_OP_MAX; op++)
		if ((l = bcfs_metrics_op_name((uint16_t)op, buf, sizeof(buf))))
			fprintf(f, "bluecachefs_requests_total{op=\"%s\"} %"
				PRIu64 "\n", l, s->op[op].count);
	metrics_head(f, "request_errors_total", "counter",
		     "Requests that failed (the agent's error or a local "
		     "one), by operation.");
	for (op = 1; op < BCP_OP_MAX; op++)
		if ((l = bcfs_metrics_op_name((uint16_t)op, buf, sizeof(buf))))
			fprintf(f, "bluecachefs_request_errors_total{op=\"%s\"}"
				" %" PRIu64 "\n", l, s->op[op].errors);
	metrics_head(f, "request_duration_seconds", "histogram",
		     "From sending a request to its answer, by operation "
		     "(operations seen so far).");
	for (op = 1; op < BCP_OP_MAX; op++) {
		uint64_t cum = 0;

		l = bcfs_metrics_op_name((uint16_t)op, buf, sizeof(buf));
		if (!l || !s->op[op].count)
			continue;
		for (b = 0; b < BCFS_MHIST; b++) {
			cum += s->op[op].hist[b];
			fprintf(f, "bluecachefs_request_duration_seconds_bucket"
				"{op=\"%s\",le=\"", l);
			if (b == BCFS_MHIST - 1)
				fputs("+Inf", f);
			else
				fprintf(f, "%.9g", (double)(1ull << b) / 1e6);
			fprintf(f, "\"} %" PRIu64 "\n", cum);
		}
		fprintf(f, "bluecachefs_request_duration_seconds_sum{op=\"%s\"}"
			" %.9f\n", l, (double)s->op[op].sum_ns / 1e9);
		fprintf(f, "bluecachefs_request_duration_seconds_count{op="
			"\"%s\"} %" PRIu64 "\n", l, cum);
	}
	metrics_head(f, "bytes_total", "counter",
		     "Bytes read and written through the mount.");
	fprintf(f, "bluecachefs_bytes_total{direction=\"read\"} %" PRIu64
		"\n", s->bytes_read);
	fprintf(f, "bluecachefs_bytes_total{direction=\"write\"} %" PRIu64
		"\n", s->bytes_written);
	metrics_head(f, "reconnects_total", "counter",
		     "Agent sessions re-established after a loss.");
	fprintf(f, "bluecachefs_reconnects_total %" PRIu64 "\n",
		s->reconnects);
	metrics_head(f, "notices_total", "counter",
		     "Changes made elsewhere the agent told of, by kind.");
	for (op = 0; op < BCFS_MNOTICE_KINDS; op++)
		fprintf(f, "bluecachefs_notices_total{kind=\"%s\"} %" PRIu64
			"\n", notice_kinds[op], s->notices[op]);
	metrics_head(f, "uptime_seconds", "gauge", "Time since the mount.");
	fprintf(f, "bluecachefs_uptime_seconds %.3f\n",
		(double)s->uptime_ns / 1e9);
	free(s);
}

static enum MHD_Result metrics_answer(void *cls, struct MHD_Connection *c,
				      const char *url, const char *method,
				      const char *version,
				      const char *upload_data,
				      size_t *upload_data_size, void **con_cls)
{
	const char *type = "text/plain; charset=utf-8";
	unsigned int code = MHD_HTTP_OK;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)cls;
	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
		buf = strdup("only GET\n");
	} else if (!strcmp(url, "/metrics")) {
		f = open_memstream(&buf, &len);
		if (!f)
			return MHD_NO;
		metrics_render(f);
		if (fclose(f)) {
			free(buf);
			return MHD_NO;
		}
		type = "text/plain; version=0.0.4; charset=utf-8";
	} else if (!strcmp(url, "/healthz")) {
		buf = strdup("ok\n");
	} else {
		code = MHD_HTTP_NOT_FOUND;
		buf = strdup("/metrics or /healthz\n");
	}
	if (!buf)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(buf), buf,
					    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static void metrics_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = 0;
	bcfs_dbg("metrics: %s", line);
}

static int metrics_http_start(const char *addr)
{
	const char *colon = strrchr(addr, ':');
	char spec[300], err[256];
	struct bcp_addr a;
	int ret, port;

	if (!colon || colon < strrchr(addr, ']') || !colon[1]) {
		bcfs_err("metrics=%s: expected ADDR:PORT", addr);
		return -EINVAL;
	}
	snprintf(spec, sizeof(spec), "tcp://%s", addr);
	ret = bcp_addr_parse(spec, &a, err, sizeof(err));
	if (ret < 0) {
		bcfs_err("metrics=%s: %s", addr, err);
		return ret;
	}
	if (!bcfs_g.o.secret_file && !bcp_addr_is_local(&a)) {
		bcfs_err("refusing to serve metrics on %s without a secret: "
			 "use a loopback address, or -o secret_file", addr);
		return -EPERM;
	}
	metrics_fd = bcp_addr_listen(&a, 16);
	if (metrics_fd < 0) {
		bcfs_err("cannot serve metrics on %s: %s", addr,
			 strerror(-metrics_fd));
		return metrics_fd;
	}
	port = bcp_addr_bound_port(metrics_fd);
	metrics_mhd = MHD_start_daemon(
		MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
		NULL, metrics_answer, NULL,
		/* first, or MHD prints the earlier options' messages */
		MHD_OPTION_EXTERNAL_LOGGER, metrics_mhd_log, NULL,
		MHD_OPTION_LISTEN_SOCKET, metrics_fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)METRICS_CONN_MAX,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)METRICS_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
		MHD_OPTION_END);
	if (!metrics_mhd) {
		bcfs_err("cannot serve metrics on %s: libmicrohttpd did not "
			 "start", addr);
		close(metrics_fd);
		metrics_fd = -1;
		return -EIO;
	}
	bcfs_info("metrics on http://%s:%d/metrics", a.host, port);
	return 0;
}

int bcfs_metrics_start(const char *mnt)
{
	int ret;

	bcfs_m_start = bcfs_now_ns();
	ret = stats_start(mnt);
	if (ret < 0)
		bcfs_warn("no stats socket for %s (bluecachefs --stats will "
			  "not find it): %s", mnt, strerror(-ret));
	if (!bcfs_g.o.metrics)
		return 0;
	ret = metrics_http_start(bcfs_g.o.metrics);
	if (ret < 0)
		bcfs_metrics_stop();
	return ret;
}

void bcfs_metrics_stop(void)
{
	if (metrics_mhd)
		MHD_stop_daemon(metrics_mhd);
	metrics_mhd = NULL;
	if (metrics_fd >= 0)
		close(metrics_fd);
	metrics_fd = -1;
	if (stats_started) {
		if (write(stats_stop[1], "", 1) < 0)
			bcfs_dbg("stats socket: %s", strerror(errno));
		pthread_join(stats_thread, NULL);
		stats_started = 0;
		close(stats_stop[0]);
		close(stats_stop[1]);
		stats_stop[0] = stats_stop[1] = -1;
		close(stats_fd);
		stats_fd = -1;
		unlink(stats_path);
	}
}
