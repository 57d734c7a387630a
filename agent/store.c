/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store.c - choosing the agent's store: parsing --store and opening the
 * store it names (store.h).  The stores themselves are store_posix.c and
 * store_ceph.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

struct agent_backend *agent_backend;

void agent_store_spec_free(struct agent_store_spec *sp)
{
	free(sp->path);
	free(sp->conf);
	free(sp->id);
	free(sp->fs);
	free(sp->uuid);
	free(sp->run_dir);
	memset(sp, 0, sizeof(*sp));
}

/* One "key=value" option of a cephfs spec into sp. */
static int spec_ceph_opt(struct agent_store_spec *sp, const char *opt,
			 char *err, size_t errlen)
{
	static const char *const keys[] = { "conf", "id", "fs" };
	char **dst[] = { &sp->conf, &sp->id, &sp->fs };
	const char *eq = strchr(opt, '=');
	size_t i, klen;

	klen = eq ? (size_t)(eq - opt) : strlen(opt);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strlen(keys[i]) != klen || strncmp(opt, keys[i], klen))
			continue;
		if (!eq || !eq[1]) {
			snprintf(err, errlen, "store cephfs: %s= needs a value",
				 keys[i]);
			return -EINVAL;
		}
		if (*dst[i]) {
			snprintf(err, errlen, "store cephfs: %s= given twice",
				 keys[i]);
			return -EINVAL;
		}
		*dst[i] = strdup(eq + 1);
		return *dst[i] ? 0 : -ENOMEM;
	}
	snprintf(err, errlen,
		 "store cephfs: unknown option '%.*s' (conf=, id=, fs=)",
		 (int)klen, opt);
	return -EINVAL;
}

int agent_store_spec_parse(const char *spec, struct agent_store_spec *out,
			   char *err, size_t errlen)
{
	struct agent_store_spec sp = { 0 };
	char *copy, *opt, *next;
	const char *rest;
	int ret = 0, first = 1;

	if (!strncmp(spec, "posix:", 6)) {
		if (!spec[6]) {
			snprintf(err, errlen, "store posix: needs a directory "
				 "(posix:DIR)");
			return -EINVAL;
		}
		sp.kind = AGENT_STORE_POSIX;
		sp.path = strdup(spec + 6);
		if (!sp.path)
			return -ENOMEM;
		*out = sp;
		return 0;
	}
	if (strncmp(spec, "cephfs:", 7) && strcmp(spec, "cephfs")) {
		snprintf(err, errlen, "store '%s': expected posix:DIR or "
			 "cephfs:[PATH][,conf=FILE][,id=NAME][,fs=NAME]",
			 spec);
		return -EINVAL;
	}
	sp.kind = AGENT_STORE_CEPHFS;
	rest = spec[6] ? spec + 7 : "";
	copy = strdup(rest);
	if (!copy)
		return -ENOMEM;
	/*
	 * The first field is the path unless it is an option.  An empty
	 * field is refused (not skipped): "cephfs:/a,,id=x" is a typo.
	 */
	for (next = copy; *rest && next && !ret; first = 0) {
		opt = strsep(&next, ",");
		if (!*opt && !(first && next)) {
			snprintf(err, errlen, "store cephfs: an empty field "
				 "in '%s'", rest);
			ret = -EINVAL;
			break;
		}
		if (!*opt)
			continue;	/* "cephfs:,conf=F": the default path */
		if (!first && opt[0] == '/') {
			snprintf(err, errlen, "store cephfs: the path '%s' "
				 "must come first", opt);
			ret = -EINVAL;
			break;
		}
		if (first && !strchr(opt, '=')) {
			if (opt[0] != '/') {
				snprintf(err, errlen, "store cephfs: the path "
					 "'%s' must be absolute", opt);
				ret = -EINVAL;
				break;
			}
			sp.path = strdup(opt);
			if (!sp.path)
				ret = -ENOMEM;
			continue;
		}
		ret = spec_ceph_opt(&sp, opt, err, errlen);
	}
	free(copy);
	if (ret < 0) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "store: out of memory");
		agent_store_spec_free(&sp);
		return ret;
	}
	*out = sp;
	return 0;
}

#ifndef HAVE_CEPHFS
int agent_ceph_open(const struct agent_store_spec *sp,
		    unsigned int timeout_ms, struct agent_backend **out)
{
	(void)sp;
	(void)timeout_ms;
	(void)out;
	agent_err("store cephfs: this bluecache-agent was built without "
		  "libcephfs (configure --with-cephfs)");
	return -EOPNOTSUPP;
}
#endif

int agent_backend_open(const struct agent_store_spec *sp,
		       unsigned int timeout_ms, struct agent_backend **out)
{
	switch (sp->kind) {
	case AGENT_STORE_POSIX:
		return agent_posix_open(sp->path, out);
	case AGENT_STORE_CEPHFS:
		return agent_ceph_open(sp, timeout_ms, out);
	default:
		return -EINVAL;
	}
}

void agent_backend_close(struct agent_backend *b)
{
	if (b)
		b->ops->close(b);
}

int agent_store_fenced(int ret)
{
	if (!agent_backend || !(agent_backend->flags & AGENT_STORE_FENCEABLE))
		return ret == -ESHUTDOWN ? -EIO : ret;
	agent_err("store %s: the cluster fenced this agent off (its client "
		  "was evicted and blocklisted); exiting with status %d to "
		  "start again with a new client, which replays the write "
		  "log; the hosts carry on with it", agent_backend->desc,
		  AGENT_EXIT_FENCED);
	/* not exit(): no orderly stop, whose sync could only fail or wait */
	_exit(AGENT_EXIT_FENCED);
}
