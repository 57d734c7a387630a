/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics_http.c - the agent's Prometheus endpoint (--metrics-listen
 * ADDR:PORT): /metrics in the text exposition format, /healthz for probes.
 *
 * It runs on libmicrohttpd's own thread, never on a worker: a scrape sums
 * the workers' counters with relaxed atomic loads (metrics.h), so a slow
 * or hostile scraper costs the data path nothing but this thread's CPU.
 * MHD bounds what such a client can hold: METRICS_CONN_MAX connections,
 * each closed after METRICS_TIMEOUT_S idle seconds, with a small memory
 * pool each.  Only bluecache-agent links this file (the tests and the
 * fuzzer run workers without an endpoint).
 *
 * /healthz asks the store whether it answers: a posix store with fstat()
 * of its root; a store without a root descriptor (cephfs, whose statfs
 * may wait for the cluster) with its statfs on a thread of its own, one at
 * a time, waited for at most METRICS_PROBE_MS: an unreachable cluster
 * makes /healthz say so soon, and never stalls /metrics for long.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <microhttpd.h>

#include "store.h"
#include "worker_i.h"

#define METRICS_CONN_MAX	32	/* scrapers connected at once */
#define METRICS_TIMEOUT_S	5	/* an idle scraper is closed */
#define METRICS_STALL_NS	5000000000ull /* /healthz: a worker's loop */
#define METRICS_PROBE_MS	2000	/* /healthz: waiting for the store */
#define METRICS_PROBE_AGE_NS	1000000000ull /* a probe's answer reused */

static struct MHD_Daemon *metrics_mhd;
static int metrics_fd = -1;
/* 1 from start to stop: /healthz answers 200 only then */
static int metrics_serving;

/* The store's statfs for /healthz (a store without a root descriptor). */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t done;		/* running went 0 (CLOCK_MONOTONIC) */
	/* under lock: */
	int running;			/* the thread is in statfs */
	int joinable;			/* a thread to join before the next */
	int ret;			/* the last probe's result */
	uint64_t t_done;		/* when it ended, agent_now_ns() */
	pthread_t thread;
} probe = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *const xport_names[AGENT_XPORT_MAX] = {
	"shm", "tcp", "rdma",
};
static const char *const mdir_names[AGENT_MDIR_MAX] = { "read", "write" };
static const char *const stage_names[AGENT_STAGE_MAX] = {
	"dispatch", "storage", "transfer",
};
static const char *const family_names[AGENT_FAM_MAX] = {
	"meta", "sync", "read", "write", "session",
};

/* "LOOKUP" -> "lookup" into buf; NULL for an opcode without a name. */
static const char *metrics_op_label(uint16_t op, char *buf, size_t len)
{
	const char *n = bcp_op_name(op);
	size_t i;

	if (!strcmp(n, "?"))
		return NULL;
	for (i = 0; n[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)n[i]);
	buf[i] = 0;
	return buf;
}

static void metrics_head(FILE *f, const char *name, const char *type,
			 const char *help)
{
	fprintf(f, "# HELP bluecache_agent_%s %s\n# TYPE bluecache_agent_%s "
		"%s\n", name, help, name, type);
}

static void metrics_render_ops(FILE *f, struct agent_worker **ws,
			       unsigned int n)
{
	static const char *const what[2][3] = {
		{ "requests_total", "counter",
		  "Requests served, by operation." },
		{ "request_errors_total", "counter",
		  "Requests answered with an error, by operation." },
	};
	unsigned int k, i, op;
	char buf[32];

	for (k = 0; k < 2; k++) {
		metrics_head(f, what[k][0], what[k][1], what[k][2]);
		for (op = 1; op < BCP_OP_MAX; op++) {
			const char *l = metrics_op_label((uint16_t)op, buf,
							 sizeof(buf));
			uint64_t v = 0;

			if (!l)
				continue;
			for (i = 0; i < n; i++) {
				const struct agent_op_stats *o =
					&ws[i]->stats.op[op];

				v += agent_ctr_get(k ? &o->failed : &o->count);
			}
			fprintf(f, "bluecache_agent_%s{op=\"%s\"} %" PRIu64
				"\n", what[k][0], l, v);
		}
	}
}

static void metrics_render_stages(FILE *f, struct agent_worker **ws,
				  unsigned int n)
{
	unsigned int fam, st, b, i;

	metrics_head(f, "stage_duration_seconds", "histogram",
		     "Time a request spends in each stage, by operation "
		     "family (per chunk for read and write).");
	for (fam = 0; fam < AGENT_FAM_MAX; fam++) {
		for (st = 0; st < AGENT_STAGE_MAX; st++) {
			uint64_t cum = 0, sum = 0;

			for (b = 0; b < AGENT_MHIST; b++) {
				for (i = 0; i < n; i++)
					cum += agent_ctr_get(&ws[i]->metrics
						.stage[fam][st].b[b]);
				fprintf(f, "bluecache_agent_stage_duration_"
					"seconds_bucket{family=\"%s\","
					"stage=\"%s\",le=\"", family_names[fam],
					stage_names[st]);
				if (b == AGENT_MHIST - 1)
					fputs("+Inf", f);
				else
					fprintf(f, "%.9g",
						(double)(1ull << b) / 1e6);
				fprintf(f, "\"} %" PRIu64 "\n", cum);
			}
			for (i = 0; i < n; i++)
				sum += agent_ctr_get(&ws[i]->metrics
					.stage[fam][st].sum_ns);
			fprintf(f, "bluecache_agent_stage_duration_seconds_sum"
				"{family=\"%s\",stage=\"%s\"} %.9f\n",
				family_names[fam], stage_names[st],
				(double)sum / 1e9);
			fprintf(f, "bluecache_agent_stage_duration_seconds_"
				"count{family=\"%s\",stage=\"%s\"} %" PRIu64
				"\n", family_names[fam], stage_names[st], cum);
		}
	}
}

/* A sum over the workers of one published field. */
#define METRICS_SUM(field) ({ \
	uint64_t v_ = 0; \
	for (i = 0; i < n; i++) \
		v_ += agent_ctr_get(&ws[i]->metrics.field); \
	v_; })

static void metrics_render(FILE *f)
{
	struct agent_worker *ws[256];
	unsigned int n = 0, i, x, d;

	while (n < 256 && (ws[n] = agent_worker_nth(n)))
		n++;
	metrics_render_ops(f, ws, n);
	metrics_head(f, "bytes_total", "counter",
		     "Bytes moved between hosts and objects, by transport "
		     "and direction (read: to the host).");
	for (x = 0; x < AGENT_XPORT_MAX; x++)
		for (d = 0; d < AGENT_MDIR_MAX; d++)
			fprintf(f, "bluecache_agent_bytes_total{transport="
				"\"%s\",direction=\"%s\"} %" PRIu64 "\n",
				xport_names[x], mdir_names[d],
				METRICS_SUM(bytes[x][d]));
	metrics_head(f, "sessions", "gauge", "Sessions open now.");
	fprintf(f, "bluecache_agent_sessions %" PRIu64 "\n",
		METRICS_SUM(sessions));
	metrics_head(f, "sessions_opened_total", "counter",
		     "Sessions opened since start.");
	fprintf(f, "bluecache_agent_sessions_opened_total %" PRIu64 "\n",
		METRICS_SUM(sessions_total));
	metrics_head(f, "handles", "gauge",
		     "Handles the sessions hold (an O_PATH descriptor each).");
	fprintf(f, "bluecache_agent_handles %" PRIu64 "\n",
		METRICS_SUM(handles));
	metrics_head(f, "open_files", "gauge", "Open files of all sessions.");
	fprintf(f, "bluecache_agent_open_files %" PRIu64 "\n",
		METRICS_SUM(files));
	metrics_head(f, "descriptors", "gauge",
		     "Descriptors drawn from the agent-wide budget.");
	fprintf(f, "bluecache_agent_descriptors %ld\n",
		atomic_load_explicit(&agent_fds_used, memory_order_relaxed));
	metrics_head(f, "descriptors_budget", "gauge",
		     "The agent-wide descriptor budget.");
	fprintf(f, "bluecache_agent_descriptors_budget %ld\n",
		agent_fds_budget);
	metrics_head(f, "bad_frames_total", "counter",
		     "Frames refused as malformed or out of place.");
	fprintf(f, "bluecache_agent_bad_frames_total %" PRIu64 "\n",
		METRICS_SUM(bad_frames));
	metrics_head(f, "auth_failures_total", "counter",
		     "Failed authentications.");
	fprintf(f, "bluecache_agent_auth_failures_total %" PRIu64 "\n",
		METRICS_SUM(auth_failed));
	metrics_head(f, "staging_slots", "gauge",
		     "Staging slots of each worker.");
	for (i = 0; i < n; i++)
		fprintf(f, "bluecache_agent_staging_slots{worker=\"%u\"} %u\n",
			i, agent_cfg.queue_depth);
	metrics_head(f, "staging_slots_in_use", "gauge",
		     "Staging slots holding a chunk, by worker.");
	for (i = 0; i < n; i++)
		fprintf(f, "bluecache_agent_staging_slots_in_use{worker="
			"\"%u\"} %" PRIu64 "\n", i,
			agent_ctr_get(&ws[i]->metrics.slots_used));
	metrics_head(f, "batches_queued", "gauge",
		     "Sessions whose batches wait for a staging slot, by "
		     "worker.");
	for (i = 0; i < n; i++)
		fprintf(f, "bluecache_agent_batches_queued{worker=\"%u\"} %"
			PRIu64 "\n", i,
			agent_ctr_get(&ws[i]->metrics.batches_queued));
	metrics_render_stages(f, ws, n);
}

static void *metrics_probe_main(void *arg)
{
	struct bcp_statfs_rep rep;
	int ret;

	(void)arg;
	ret = agent_backend->ops->statfs(agent_backend, &rep);
	pthread_mutex_lock(&probe.lock);
	probe.ret = ret;
	probe.t_done = agent_now_ns();
	probe.running = 0;
	pthread_cond_broadcast(&probe.done);
	pthread_mutex_unlock(&probe.lock);
	return NULL;
}

/*
 * The store's statfs: a fresh answer, or the last one when it is recent.
 * NULL when it answered, else why not.
 */
static const char *metrics_probe_store(void)
{
	struct timespec until;
	const char *why = NULL;

	bcp_deadline_ms(&until, METRICS_PROBE_MS);
	pthread_mutex_lock(&probe.lock);
	if (!probe.running &&
	    (!probe.t_done ||
	     agent_now_ns() - probe.t_done > METRICS_PROBE_AGE_NS)) {
		if (probe.joinable)
			pthread_join(probe.thread, NULL);
		probe.joinable = 0;
		probe.running = 1;
		if (pthread_create(&probe.thread, NULL, metrics_probe_main,
				   NULL)) {
			probe.running = 0;
			why = "cannot ask the store";
			goto out_unlock;
		}
		probe.joinable = 1;
	}
	while (probe.running &&
	       pthread_cond_timedwait(&probe.done, &probe.lock, &until) == 0)
		;
	if (probe.running)
		why = "the store does not answer";
	else if (probe.ret < 0)
		why = "the store is unreachable";
out_unlock:
	pthread_mutex_unlock(&probe.lock);
	return why;
}

/* metrics_stop: no probe outlives the store (closed after this). */
static void metrics_probe_stop(void)
{
	pthread_mutex_lock(&probe.lock);
	if (probe.joinable) {
		pthread_mutex_unlock(&probe.lock);
		pthread_join(probe.thread, NULL);
		pthread_mutex_lock(&probe.lock);
		probe.joinable = 0;
	}
	probe.t_done = 0;
	pthread_mutex_unlock(&probe.lock);
}

/* NULL when the agent can serve, else why not. */
static const char *metrics_unhealthy(void)
{
	uint64_t now = agent_now_ns();
	struct agent_worker *w;
	const char *why;
	struct stat st;
	unsigned int i;

	if (!__atomic_load_n(&metrics_serving, __ATOMIC_ACQUIRE))
		return "stopping";
	if (agent_cfg.root_fd >= 0) {
		if (fstat(agent_cfg.root_fd, &st) < 0)
			return "data root unreachable";
	} else {
		why = metrics_probe_store();
		if (why)
			return why;
	}
	for (i = 0; (w = agent_worker_nth(i)); i++) {
		/* an idle loop wakes every 200 ms and publishes */
		if (now - agent_ctr_get(&w->metrics.t_pub) > METRICS_STALL_NS &&
		    agent_ctr_get(&w->metrics.t_pub))
			return "a worker's loop is stalled";
	}
	return NULL;
}

static enum MHD_Result metrics_answer(void *cls, struct MHD_Connection *c,
				      const char *url, const char *method,
				      const char *version,
				      const char *upload_data,
				      size_t *upload_data_size, void **con_cls)
{
	struct MHD_Response *r;
	unsigned int code = MHD_HTTP_OK;
	const char *why, *type = "text/plain; charset=utf-8";
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
		why = metrics_unhealthy();
		if (why)
			code = MHD_HTTP_SERVICE_UNAVAILABLE;
		if (asprintf(&buf, "%s\n", why ? why : "ok") < 0)
			buf = NULL;
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
	agent_warn_rl("metrics: %s", line);
}

int agent_metrics_start(const char *addr)
{
	char spec[300], err[256];
	struct bcp_addr a;
	const char *colon = strrchr(addr, ':');
	int ret, port;

	if (!colon || colon < strrchr(addr, ']') || !colon[1]) {
		agent_err("metrics-listen %s: expected ADDR:PORT", addr);
		return -EINVAL;
	}
	snprintf(spec, sizeof(spec), "tcp://%s", addr);
	ret = bcp_addr_parse(spec, &a, err, sizeof(err));
	if (ret < 0) {
		agent_err("metrics-listen %s: %s", addr, err);
		return ret;
	}
	if (!agent_cfg.secret && !bcp_addr_is_local(&a)) {
		agent_err("refusing to serve metrics on %s without a secret: "
			  "anyone who reaches it reads what the hosts do; "
			  "give a secret with --secret-file or use a loopback "
			  "address", addr);
		return -EPERM;
	}
	metrics_fd = bcp_addr_listen(&a, 16);
	if (metrics_fd < 0) {
		agent_err("cannot serve metrics on %s: %s", addr,
			  strerror(-metrics_fd));
		return metrics_fd;
	}
	port = bcp_addr_bound_port(metrics_fd);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&probe.done, &ca);
		pthread_condattr_destroy(&ca);
	}
	__atomic_store_n(&metrics_serving, 1, __ATOMIC_RELEASE);
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
		agent_err("cannot serve metrics on %s: libmicrohttpd did not "
			  "start", addr);
		close(metrics_fd);
		metrics_fd = -1;
		return -EIO;
	}
	agent_info("metrics on http://%s:%d/metrics", a.host, port);
	return 0;
}

void agent_metrics_stop(void)
{
	__atomic_store_n(&metrics_serving, 0, __ATOMIC_RELEASE);
	if (metrics_mhd)
		MHD_stop_daemon(metrics_mhd);
	metrics_mhd = NULL;
	metrics_probe_stop();
	if (metrics_fd >= 0)
		close(metrics_fd);
	metrics_fd = -1;
}
