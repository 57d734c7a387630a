/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * main.c - bluecachefs: mount objects served by a bluecache-agent.
 *
 *   bluecachefs AGENT MOUNTPOINT [-o opt,...] [-f] [-d] [-s]
 *   AGENT = tcp://HOST[:PORT] | unix:PATH | local:DIR
 *
 * Start-up order matters for the errors users see: options are checked,
 * then (unless -f) the daemon forks at once, before any thread exists; the
 * child starts the private agent of local:DIR, connects to the agent
 * (HELLO, AUTH, pool registration), and only then mounts, so an
 * unreachable agent, a wrong secret or a version mismatch never leaves a
 * dead mount behind.  The child reports its start-up status through a
 * pipe and the parent exits with it: when the command returns 0 the mount
 * is usable.
 *
 * This file also holds the operation table and the FUSE init callback that
 * negotiates the kernel's capabilities.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "bcp_auth.h"
#include "bcp_frame.h"
#include "bcfs_i.h"

struct bcfs bcfs_g;

enum {
	BCFS_KEY_HELP,
	BCFS_KEY_VERSION,
	BCFS_KEY_FOREGROUND,
	BCFS_KEY_DEBUG,
	BCFS_KEY_SINGLE,
	BCFS_KEY_RO,
	BCFS_KEY_DISCARD,
	BCFS_KEY_ATTR_TIMEOUT,
	BCFS_KEY_ENTRY_TIMEOUT,
	BCFS_KEY_TIMEOUT,
	BCFS_KEY_BUSY_TIMEOUT,
	BCFS_KEY_RECONNECT_TIMEOUT,
	BCFS_KEY_MAX_BATCH,
	BCFS_KEY_SPIN_USEC,
	BCFS_KEY_QUEUE_DEPTH,
	BCFS_KEY_SLOT_SIZE,
};

#define BCFS_OPT(t, p, v) { t, offsetof(struct bcfs_opts, p), v }

static const struct fuse_opt bcfs_opt_spec[] = {
	BCFS_OPT("transport=%s", transport, 0),
	BCFS_OPT("secret_file=%s", secret_file, 0),
	BCFS_OPT("pool_size=%s", pool_size, 0),
	/* numbers parsed here: libfuse's own parse gives no clear line */
	FUSE_OPT_KEY("attr_timeout=", BCFS_KEY_ATTR_TIMEOUT),
	FUSE_OPT_KEY("entry_timeout=", BCFS_KEY_ENTRY_TIMEOUT),
	FUSE_OPT_KEY("timeout=", BCFS_KEY_TIMEOUT),
	FUSE_OPT_KEY("busy_timeout=", BCFS_KEY_BUSY_TIMEOUT),
	FUSE_OPT_KEY("reconnect_timeout=", BCFS_KEY_RECONNECT_TIMEOUT),
	FUSE_OPT_KEY("max_batch=", BCFS_KEY_MAX_BATCH),
	FUSE_OPT_KEY("spin_usec=", BCFS_KEY_SPIN_USEC),
	FUSE_OPT_KEY("queue_depth=", BCFS_KEY_QUEUE_DEPTH),
	FUSE_OPT_KEY("slot_size=", BCFS_KEY_SLOT_SIZE),
	BCFS_OPT("writeback", writeback, 1),
	BCFS_OPT("nowriteback", writeback, 0),
	BCFS_OPT("writebehind", nowritebehind, 0),
	BCFS_OPT("nowritebehind", nowritebehind, 1),
	BCFS_OPT("parallel_direct", noparallel_direct, 0),
	BCFS_OPT("noparallel_direct", noparallel_direct, 1),
	BCFS_OPT("private", private_mount, 1),
	BCFS_OPT("metrics=%s", metrics, 0),
	FUSE_OPT_KEY("-h", BCFS_KEY_HELP),
	FUSE_OPT_KEY("--help", BCFS_KEY_HELP),
	FUSE_OPT_KEY("-V", BCFS_KEY_VERSION),
	FUSE_OPT_KEY("--version", BCFS_KEY_VERSION),
	FUSE_OPT_KEY("-f", BCFS_KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", BCFS_KEY_DEBUG),
	FUSE_OPT_KEY("debug", BCFS_KEY_DEBUG),
	FUSE_OPT_KEY("-s", BCFS_KEY_SINGLE),
	FUSE_OPT_KEY("ro", BCFS_KEY_RO),
	/* always on / always ours */
	FUSE_OPT_KEY("default_permissions", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("fsname=", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("subtype=", BCFS_KEY_DISCARD),
	/* mount(8), fstab and mount.fuse3 options with no meaning here */
	FUSE_OPT_KEY("_netdev", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("auto", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("noauto", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("nofail", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("user", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("nouser", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("users", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("owner", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("group", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("defaults", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("nonempty", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("relatime", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("norelatime", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("diratime", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("nodiratime", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("strictatime", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("lazytime", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("nolazytime", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("iversion", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("noiversion", BCFS_KEY_DISCARD),
	FUSE_OPT_KEY("comment=", BCFS_KEY_DISCARD),
	FUSE_OPT_END
};

static void bcfs_usage(FILE *f, const char *prog)
{
	fprintf(f,
"usage: %s AGENT MOUNTPOINT [-o opt,...] [-f] [-d] [-s]\n"
"       bluecachefs --stats PATH [--interval N] [--count N]\n"
"\n"
"AGENT:\n"
"    tcp://HOST[:PORT]      an agent on the network (port 18517)\n"
"    unix:PATH              an agent on a unix socket\n"
"    local:DIR              start a private agent serving DIR\n"
"\n"
"general options:\n"
"    -h, --help             print this help and exit\n"
"    -V, --version          print the version and exit\n"
"    -f                     stay in the foreground\n"
"    -d, -o debug           debug output (implies -f)\n"
"    -s                     single-threaded\n"
"\n"
"bluecachefs options:\n"
"    -o transport=T         data transport: auto, shm, tcp or rdma (auto)\n"
"    -o secret_file=FILE    the agent's shared secret (mode 0600)\n"
"    -o attr_timeout=SEC    attribute cache timeout (60 when the agent\n"
"                           tells of changes made elsewhere, else 1)\n"
"    -o entry_timeout=SEC   name cache timeout, negative entries too when\n"
"                           the agent tells of changes (60, else 1); then\n"
"                           directory listings are kept as long too\n"
"                           (while attr_timeout is above 0)\n"
"    -o writeback           kernel writeback cache: the kernel then keeps\n"
"                           the size and mtime of a cached file and takes\n"
"                           neither from the agent, so changes made\n"
"                           elsewhere do not show (off)\n"
"    -o nowriteback         no writeback cache (the default)\n"
"    -o nowritebehind       a file this mount creates sends every write\n"
"                           at once, rather than gathering sequential\n"
"                           writes for up to a second, until close or\n"
"                           fsync (writebehind)\n"
"    -o noparallel_direct   one O_DIRECT write of a file at a time, as\n"
"                           the kernel's page cache path has them,\n"
"                           rather than writers of different parts of\n"
"                           one file at once (parallel_direct)\n"
"    -o pool_size=BYTES     data buffer pool, K/M/G suffixes (64M)\n"
"    -o max_batch=N         segments per batch request (256)\n"
"    -o spin_usec=N         after a reply, poll this long for the next\n"
"                           one, only while a CPU is idle (50; 0: never)\n"
"    -o timeout=SEC         wait for the agent's answer or a transfer; a\n"
"                           request fails with EIO, a stalled\n"
"                           transfer gives up the connection (30)\n"
"    -o busy_timeout=SEC    a request past timeout waits on while the\n"
"                           agent answers pings or says it is at work\n"
"                           (a slow store), up to this long in all,\n"
"                           then fails with EIO (600; not above\n"
"                           timeout: never waits on)\n"
"    -o reconnect_timeout=SEC  when the agent goes away, requests wait\n"
"                           this long for it to come back (it is\n"
"                           reconnected and resumed), then fail with\n"
"                           EIO until it does; 0: EIO at once (300)\n"
"    -o queue_depth=N       local: the private agent's staging slots\n"
"    -o slot_size=BYTES     local: bytes per staging slot, 4K..8M (both\n"
"                           sized to fit RLIMIT_MEMLOCK by default)\n"
"    -o metrics=ADDR:PORT   serve Prometheus metrics (loopback, unless\n"
"                           a secret_file is given)\n"
"\n"
"FUSE options:\n"
"    -o ro                  read-only mount\n"
"    -o allow_other         allow access by other users (the default when\n"
"                           root mounts; the kernel checks permissions)\n"
"    -o private             when root mounts: serve root only\n"
"    -o OPTION              other mount options (noatime, nosuid, ...)\n",
		prog);
}

/* "64M" -> bytes.  0 or -EINVAL. */
static int bcfs_parse_size(const char *s, size_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K':
		v <<= 10;
		end++;
		break;
	case 'm': case 'M':
		v <<= 20;
		end++;
		break;
	case 'g': case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' && end[1] == 'B' ? 2 : 1;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The value of a "name=value" option. */
static const char *bcfs_opt_value(const char *arg)
{
	const char *eq = strchr(arg, '=');

	return eq ? eq + 1 : "";
}

/* "name=SEC" within [min, max].  0, or -EINVAL with the line said. */
static int bcfs_opt_seconds(const char *arg, double min, double max,
			    double *out)
{
	const char *val = bcfs_opt_value(arg);
	char *end;
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno || end == val || *end || !(v >= min && v <= max)) {
		if (max < 1e9)
			bcfs_err("%s: give a number of seconds from %g to %g",
				 arg, min, max);
		else
			bcfs_err("%s: give a number of seconds, %g or more "
				 "(0.5 is half a second)", arg, min);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* "name=N" within [min, max].  0, or -EINVAL with the line said. */
static int bcfs_opt_uint(const char *arg, unsigned int min,
			 unsigned int max, unsigned int *out)
{
	const char *val = bcfs_opt_value(arg);
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(val, &end, 10);
	if (errno || end == val || *end || *val == '-' || v < min ||
	    v > max) {
		bcfs_err("%s: give a whole number from %u to %u", arg, min,
			 max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int bcfs_opt_proc(void *data, const char *arg, int key,
			 struct fuse_args *outargs)
{
	struct bcfs_opts *o = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (!o->agent) {
			o->agent = strdup(arg);
			return 0;
		}
		if (!o->mountpoint) {
			o->mountpoint = strdup(arg);
			return 0;
		}
		fprintf(stderr, BCFS_PROG ": error: unexpected argument "
			"'%s'\n", arg);
		return -1;
	case FUSE_OPT_KEY_OPT:
		/* x-systemd.*, x-gvfs-* ...: for other programs */
		if (!strncmp(arg, "x-", 2))
			return 0;
		return 1;
	case BCFS_KEY_HELP:
		o->show_help = 1;
		return 0;
	case BCFS_KEY_VERSION:
		o->show_version = 1;
		return 0;
	case BCFS_KEY_FOREGROUND:
		o->foreground = 1;
		return 0;
	case BCFS_KEY_DEBUG:
		o->debug = 1;
		o->foreground = 1;
		return 0;
	case BCFS_KEY_SINGLE:
		o->single = 1;
		return 0;
	case BCFS_KEY_RO:
		o->ro = 1;
		return 1;
	case BCFS_KEY_DISCARD:
		return 0;
	case BCFS_KEY_ATTR_TIMEOUT:
		return bcfs_opt_seconds(arg, 0, 1e300, &o->attr_timeout) ?
		       -1 : 0;
	case BCFS_KEY_ENTRY_TIMEOUT:
		return bcfs_opt_seconds(arg, 0, 1e300, &o->entry_timeout) ?
		       -1 : 0;
	case BCFS_KEY_TIMEOUT:
		return bcfs_opt_seconds(arg, 0.001, 86400, &o->timeout) ?
		       -1 : 0;
	case BCFS_KEY_BUSY_TIMEOUT:
		return bcfs_opt_seconds(arg, 0, 86400, &o->busy_timeout) ?
		       -1 : 0;
	case BCFS_KEY_RECONNECT_TIMEOUT:
		return bcfs_opt_seconds(arg, 0, 86400,
					&o->reconnect_timeout) ? -1 : 0;
	case BCFS_KEY_MAX_BATCH:
		return bcfs_opt_uint(arg, 1, BCP_SEGS_MAX, &o->max_batch) ?
		       -1 : 0;
	case BCFS_KEY_SPIN_USEC:
		if (bcfs_opt_uint(arg, 0, 10000, &o->spin_usec))
			return -1;
		o->spin_usec_set = 1;
		return 0;
	case BCFS_KEY_QUEUE_DEPTH:
		return bcfs_opt_uint(arg, 1, 4096, &o->queue_depth) ? -1 : 0;
	case BCFS_KEY_SLOT_SIZE: {
		size_t v;

		/* the agent's rule */
		if (bcfs_parse_size(bcfs_opt_value(arg), &v) ||
		    v < 4096 || v > (8u << 20) || v % 4096) {
			bcfs_err("%s: give a size from 4K to 8M, a multiple "
				 "of 4K", arg);
			return -1;
		}
		o->slot_size = v;
		return 0;
	}
	}
	return 1;
}

static void bcfs_init(void *userdata, struct fuse_conn_info *conn)
{
	unsigned int want = FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS |
			    FUSE_CAP_AUTO_INVAL_DATA;

	if (bcfs_g.features & BCP_FEAT_READDIRPLUS)
		want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
	else
		conn->want &= ~(FUSE_CAP_READDIRPLUS |
				FUSE_CAP_READDIRPLUS_AUTO);
	if (bcfs_g.o.writeback) {
		if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
			want |= FUSE_CAP_WRITEBACK_CACHE;
		else
			bcfs_warn("the kernel has no writeback cache for "
				  "FUSE: writeback ignored");
	} else {
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	}
	/* pool memory is the destination anyway: splicing buys nothing */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE);
	/*
	 * No atomic O_TRUNC: open(O_TRUNC) then truncates through SETATTR,
	 * where the kernel clears set-ID bits as a local file system does
	 * when the opener is not the owner.  An atomic one truncates inside
	 * the agent's open, which runs with every privilege.
	 */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * POSIX ACLs: the kernel checks them (it reads them as xattrs and
	 * caches them); the store keeps them, the mode in step with them,
	 * and applies a directory's default ACL to what is made in it.
	 * The umask is then ours to apply (the agent does, but where a
	 * default ACL replaces it), as a local file system does.
	 */
	want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	conn->want |= want & conn->capable;
	bcfs_g.parallel_dirops = !!(conn->want & FUSE_CAP_PARALLEL_DIROPS);
	conn->max_write = BCFS_IO_MAX;
	conn->max_readahead = BCFS_READAHEAD;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
	bcfs_dbg("kernel protocol %u.%u, capable 0x%x, want 0x%x",
		 conn->proto_major, conn->proto_minor, conn->capable,
		 conn->want);
}

static const struct fuse_lowlevel_ops bcfs_ops = {
	.init = bcfs_init,
	.lookup = bcfs_op_lookup,
	.forget = bcfs_op_forget,
	.forget_multi = bcfs_op_forget_multi,
	.getattr = bcfs_op_getattr,
	.setattr = bcfs_op_setattr,
	.readlink = bcfs_op_readlink,
	.mknod = bcfs_op_mknod,
	.mkdir = bcfs_op_mkdir,
	.unlink = bcfs_op_unlink,
	.rmdir = bcfs_op_rmdir,
	.symlink = bcfs_op_symlink,
	.rename = bcfs_op_rename,
	.link = bcfs_op_link,
	.open = bcfs_op_open,
	.create = bcfs_op_create,
	.read = bcfs_op_read,
	.write = bcfs_op_write,
	.write_buf = bcfs_op_write_buf,
	.release = bcfs_op_release,
	.flush = bcfs_op_flush,
	.fsync = bcfs_op_fsync,
	.opendir = bcfs_op_opendir,
	.readdir = bcfs_op_readdir,
	.readdirplus = bcfs_op_readdirplus,
	.releasedir = bcfs_op_releasedir,
	.fsyncdir = bcfs_op_fsyncdir,
	.statfs = bcfs_op_statfs,
	.setxattr = bcfs_op_setxattr,
	.getxattr = bcfs_op_getxattr,
	.listxattr = bcfs_op_listxattr,
	.removexattr = bcfs_op_removexattr,
	.fallocate = bcfs_op_fallocate,
	.lseek = bcfs_op_lseek,
	.copy_file_range = bcfs_op_copy_file_range,
	/* no getlk/setlk/flock: the kernel serves locks, local to this host */
};

/*
 * The kernel caps readahead at the bdi's default (128 KiB) when it handles
 * the INIT reply.  Once a later request arrives INIT is done: raise the
 * bdi's read_ahead_kb to BCFS_READAHEAD then.  Only root may; failing is
 * harmless.  The mount itself is never touched here (a pending stat of it
 * would make an early unmount fail with EBUSY).
 */
static char bcfs_bdi_path[96];
static int bcfs_ra_done;

void bcfs_readahead_raise(void)
{
	char val[32];
	int fd, n;

	if (__atomic_exchange_n(&bcfs_ra_done, 1, __ATOMIC_ACQ_REL))
		return;
	if (!bcfs_bdi_path[0])
		return;
	fd = open(bcfs_bdi_path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = snprintf(val, sizeof(val), "%u\n", BCFS_READAHEAD / 1024);
	if (write(fd, val, n) != n)
		bcfs_dbg("cannot raise readahead: %s", strerror(errno));
	close(fd);
}

/* Find the device of the mount on mnt in /proc/self/mountinfo. */
static void bcfs_readahead_prepare(const char *mnt)
{
	unsigned int maj, min;
	char line[4096], where[PATH_MAX];
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min,
			   where) != 3 || strcmp(where, mnt))
			continue;
		/* the last match is the one on top */
		snprintf(bcfs_bdi_path, sizeof(bcfs_bdi_path),
			 "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	}
	fclose(f);
}

/*
 * The caches, once the agent said whether it tells of changes.  With
 * notifications, what the kernel caches stays right until the agent says
 * otherwise: the timeouts only bound how long an error of the agent's
 * (a change it did not see) lasts, and the cost of a minute is one
 * GETATTR per inode in use a minute.  Negative entries are cached as long
 * as names.  Without, the short defaults: a change made elsewhere shows
 * within a second.  Timeouts given with -o win either way.
 */
static void bcfs_cache_defaults(struct bcfs_opts *o)
{
	int notified = !!(bcfs_g.features & BCP_FEAT_NOTIFY);
	double def = notified ? BCFS_CACHE_TIMEOUT : BCFS_SHORT_TIMEOUT;

	if (o->attr_timeout < 0)
		o->attr_timeout = def;
	if (o->entry_timeout < 0)
		o->entry_timeout = def;
	bcfs_g.neg_timeout = notified ? o->entry_timeout : 0;
	bcfs_dbg("the agent %s of changes: attr_timeout %g, entry_timeout "
		 "%g, negative entries %g", notified ? "tells" : "does not tell",
		 o->attr_timeout, o->entry_timeout, bcfs_g.neg_timeout);
}

/* The client library's lines, in the daemon's format and destination. */
static void bcfs_client_log(int level, const char *msg)
{
	enum bcfs_level l = level <= LOG_ERR ? BCFS_ERR :
			    level == LOG_WARNING ? BCFS_WARN :
			    level <= LOG_INFO ? BCFS_INFO : BCFS_DEBUG;

	bcfs_log(l, "%s", msg);
}

static int bcfs_opts_check(struct bcfs_opts *o, struct bcp_client_opts *co)
{
	enum bcp_transport t = BCP_XFER_AUTO;
	size_t pool;

	if (o->transport && bcp_transport_parse(o->transport, &t)) {
		bcfs_err("transport=%s: use auto, shm, tcp or rdma",
			 o->transport);
		return -EINVAL;
	}
	co->transport = t;
	if (o->pool_size) {
		if (bcfs_parse_size(o->pool_size, &pool) ||
		    pool < 2 * BCFS_IO_MAX || pool > (64ull << 30)) {
			bcfs_err("pool_size=%s: give a size from 2M to 64G",
				 o->pool_size);
			return -EINVAL;
		}
		co->pool_size = pool;
	}
	if (o->max_batch)
		co->max_batch = o->max_batch;
	if (o->spin_usec_set)
		co->spin_usec = (int)o->spin_usec;
	co->timeout_ms = (int)(o->timeout * 1000);
	co->busy_timeout_ms = (int)(o->busy_timeout * 1000);
	co->reconnect_timeout_ms = (int)(o->reconnect_timeout * 1000);
	if (o->reconnect_timeout > 0 && !co->reconnect_timeout_ms)
		co->reconnect_timeout_ms = 1;
	co->resume = bcfs_resume;
	if ((o->queue_depth || o->slot_size) &&
	    strncmp(o->agent, "local:", 6)) {
		bcfs_err("queue_depth and slot_size size the private agent of "
			 "local:DIR; %s is not one", o->agent);
		return -EINVAL;
	}
	if (o->secret_file) {
		uint8_t *secret;
		size_t len;
		char err[256];
		int ret;

		ret = bcp_secret_load(o->secret_file, &secret, &len, err,
				      sizeof(err));
		if (ret) {
			bcfs_err("%s", err);
			return ret;
		}
		co->secret = secret;
		co->secret_len = len;
	}
	return 0;
}

static int bcfs_agent_check(const char *agent)
{
	if (!strncmp(agent, "local:", 6) && agent[6])
		return 0;
	if (!strncmp(agent, "unix:", 5) && agent[5])
		return 0;
	if (!strncmp(agent, "tcp://", 6) && agent[6])
		return 0;
	bcfs_err("'%s' is not an agent: use tcp://HOST[:PORT], unix:PATH "
		 "or local:DIR", agent);
	return -EINVAL;
}

/*
 * local:DIR or unix:PATH relative to the directory the mount was made in,
 * made absolute: a daemon in the background works from / and starts its
 * private agent again, or reconnects, long after.  0 or -errno (said).
 */
static int bcfs_agent_abs(char **agent)
{
	size_t pre = !strncmp(*agent, "local:", 6) ? 6 :
		     !strncmp(*agent, "unix:", 5) ? 5 : 0;
	char *cwd, *out;
	int n;

	if (!pre || (*agent)[pre] == '/')
		return 0;
	cwd = getcwd(NULL, 0);
	if (!cwd) {
		n = -errno;
		bcfs_err("%s: the current directory: %s", *agent,
			 strerror(-n));
		return n;
	}
	/* a socket's path that would not fit a sockaddr_un stays relative */
	if (pre == 5 && strlen(cwd) + 1 + strlen(*agent + pre) >=
	    sizeof(((struct sockaddr_un *)0)->sun_path)) {
		free(cwd);
		return 0;
	}
	n = asprintf(&out, "%.*s%s/%s", (int)pre, *agent, cwd,
		     *agent + pre);
	free(cwd);
	if (n < 0) {
		bcfs_err("out of memory");
		return -ENOMEM;
	}
	free(*agent);
	*agent = out;
	return 0;
}

/*
 * A tcp:// agent's host name is resolved before anything starts, so that a
 * name that does not resolve is said as such.  0 or -errno (said).
 */
static int bcfs_agent_resolve(const char *agent)
{
	struct addrinfo hints, *res;
	struct bcp_addr a;
	char err[256];
	int rc;

	if (strncmp(agent, "tcp://", 6))
		return 0;
	if (bcp_addr_parse(agent, &a, err, sizeof(err))) {
		bcfs_err("%s", err);
		return -EINVAL;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = a.family == AF_INET6 ? AF_INET6 : AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(a.host, NULL, &hints, &res);
	if (rc) {
		bcfs_err("cannot resolve %s: %s", a.host,
			 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	freeaddrinfo(res);
	return 0;
}

/* A mountinfo path field, its \\ooo escapes undone, in place. */
static void bcfs_mountinfo_unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (s[1] - '0') << 6 | (s[2] - '0') << 3 |
			       (s[3] - '0');
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/*
 * As mount(8) does: refuse to stack this file system on itself.  The top
 * mount on mnt (the last one listed) decides; another file system there
 * is an ordinary mountpoint.  0 or -EBUSY (said).
 */
static int bcfs_mount_check(const char *mnt)
{
	char line[4096], where[PATH_MAX], type[64], source[1024];
	char top_type[64] = "", top_source[1024] = "";
	const char *sep;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS] - TYPE SRC */
		if (sscanf(line, "%*u %*u %*s %*s %4095s", where) != 1)
			continue;
		bcfs_mountinfo_unescape(where);
		if (strcmp(where, mnt))
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep, " - %63s %1023s", type, source) != 2)
			continue;
		strcpy(top_type, type);
		strcpy(top_source, source);
	}
	fclose(f);
	if (strcmp(top_type, "fuse." BCFS_PROG))
		return 0;
	bcfs_mountinfo_unescape(top_source);
	bcfs_err("%s: %s already mounted", mnt, top_source);
	return -EBUSY;
}

/* Options for fuse_session_new: ours, then those the user passed on. */

static int bcfs_fuse_args(struct fuse_args *args)
{
	char *fsname = NULL, *opts = NULL;
	size_t n;
	int ret = -ENOMEM;

	/* escaped: an address may hold commas */
	if (fuse_opt_add_opt_escaped(&fsname, bcfs_g.o.agent))
		goto out;
	n = strlen(fsname) + 64;
	opts = malloc(n);
	if (!opts)
		goto out;
	/*
	 * A mount root makes serves the machine, as a local file system
	 * does, with the kernel checking every user's permissions.
	 */
	snprintf(opts, n, "default_permissions,%ssubtype=%s,fsname=%s",
		 getuid() == 0 && !bcfs_g.o.private_mount ? "allow_other," :
							    "",
		 BCFS_PROG, fsname);
	if (fuse_opt_insert_arg(args, 1, "-o") ||
	    fuse_opt_insert_arg(args, 2, opts))
		goto out;
	if (bcfs_g.o.debug && fuse_opt_add_arg(args, "-d"))
		goto out;
	ret = 0;
out:
	if (ret)
		bcfs_err("out of memory");
	free(opts);
	free(fsname);
	return ret;
}

/* Unless -f: fork now; the parent returns only with the child's status. */
static int bcfs_daemonize(int *status_fd)
{
	int pfd[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC)) {
		bcfs_err("pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		bcfs_err("fork: %s", strerror(errno));
		return -1;
	}
	if (pid > 0) {
		close(pfd[1]);
		do {
			n = read(pfd[0], &status, sizeof(status));
		} while (n < 0 && errno == EINTR);
		if (n != sizeof(status))
			status = 1;
		/* a failed start leaves no process behind when we return */
		if (status)
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		_exit(status);
	}
	close(pfd[0]);
	setsid();
	*status_fd = pfd[1];
	return 0;
}

static void bcfs_report(int *status_fd, int status)
{
	ssize_t n;

	if (*status_fd < 0)
		return;
	n = write(*status_fd, &status, sizeof(status));
	(void)n;
	close(*status_fd);
	*status_fd = -1;
}

/* After a successful start in the background: let go of the terminal. */
static void bcfs_detach(void)
{
	struct stat st;
	int fd;

	if (chdir("/"))
		bcfs_dbg("chdir /: %s", strerror(errno));
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	/*
	 * A log file the caller chose stays; a terminal or a pipe (which a
	 * caller may read to its end) goes, and the log goes to syslog.
	 */
	if (fstat(STDERR_FILENO, &st) || !S_ISREG(st.st_mode)) {
		dup2(fd, STDERR_FILENO);
		bcfs_log_to_syslog();
	}
	if (fd > STDERR_FILENO)
		close(fd);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct bcfs_opts *o = &bcfs_g.o;
	struct fuse_loop_config *lcfg;
	struct bcp_client_opts co = { 0 };
	char mnt[PATH_MAX];
	const char *addr;
	int status_fd = -1, ret = 1, io_err;
	char err[512];
	struct stat st;

	if (argc > 1 && !strcmp(argv[1], "--stats"))
		return bcfs_stats_main(argc, argv);
	o->attr_timeout = -1;
	o->entry_timeout = -1;
	o->timeout = BCFS_TIMEOUT_DEFAULT;
	o->reconnect_timeout = BCFS_RECONNECT_TIMEOUT_DEFAULT;
	o->busy_timeout = BCFS_BUSY_TIMEOUT_DEFAULT;
	/* what was wrong is said in one line, by us or by libfuse */
	if (fuse_opt_parse(&args, o, bcfs_opt_spec, bcfs_opt_proc))
		goto out_args;
	if (o->show_help) {
		bcfs_usage(stdout, BCFS_PROG);
		ret = 0;
		goto out_args;
	}
	if (o->show_version) {
		printf(BCFS_PROG " " PACKAGE_VERSION " (libfuse %s, BCP %d)\n",
		       fuse_pkgversion(), BCP_VERSION_MAX);
		ret = 0;
		goto out_args;
	}
	if (o->debug)
		bcfs_log_level = BCFS_DEBUG;
	if (!o->agent || !o->mountpoint) {
		bcfs_err("missing %s: usage: " BCFS_PROG " AGENT MOUNTPOINT "
			 "[-o opt,...] (see --help)",
			 o->agent ? "MOUNTPOINT" : "AGENT and MOUNTPOINT");
		goto out_args;
	}
	if (bcfs_agent_check(o->agent) || bcfs_agent_abs(&o->agent))
		goto out_args;
	bcp_client_opts_init(&co);
	bcp_client_set_log(bcfs_client_log, o->debug ? LOG_DEBUG : LOG_INFO);
	if (bcfs_opts_check(o, &co))
		goto out_args;
	if (bcfs_agent_resolve(o->agent))
		goto out_args;
	if (!realpath(o->mountpoint, mnt) || stat(mnt, &st)) {
		if (errno == ENOTCONN)
			bcfs_err("mountpoint %s: %s: its daemon is gone; "
				 "unmount it first with fusermount3 -u %s",
				 o->mountpoint, strerror(errno),
				 o->mountpoint);
		else
			bcfs_err("mountpoint %s: %s", o->mountpoint,
				 strerror(errno));
		goto out_args;
	}
	if (!S_ISDIR(st.st_mode)) {
		bcfs_err("mountpoint %s: not a directory", o->mountpoint);
		goto out_args;
	}
	if (bcfs_mount_check(mnt))
		goto out_args;
	if (bcfs_fuse_args(&args))
		goto out_args;
	if (!o->foreground && bcfs_daemonize(&status_fd))
		goto out_args;

	if (bcfs_itable_init(&bcfs_g.itable) || bcfs_rw_init() ||
	    bcfs_notify_init()) {
		bcfs_err("out of memory");
		goto out_report;
	}
	addr = o->agent;
	if (!strncmp(addr, "local:", 6)) {
		if (bcfs_embed_start(addr + 6, o->queue_depth, o->slot_size,
				     &bcfs_g.embed))
			goto out_fini;
		bcfs_g.embedded = 1;
		addr = bcfs_g.embed.addr;
		if (co.transport == BCP_XFER_AUTO)
			co.transport = BCP_XFER_SHM;
	}
	co.addr = addr;
	co.notify = bcfs_notify_cb;
	/*
	 * bcfs_attr_to_stat() strips BCP_MODE_NO_XATTRS; kept only while
	 * attributes are (bcfs_xattr_hint()), so not asked for without
	 */
	if (o->attr_timeout != 0)
		co.reply_features = BCP_FEAT_XATTR_HINT;
	/* a handshake the agent cuts short is tried again by the library */
	ret = bcp_client_connect(&co, &bcfs_g.client, err, sizeof(err));
	if (ret) {
		bcfs_err("%s", err);
		ret = 1;
		goto out_embed;
	}
	ret = 1;
	bcfs_g.root = bcp_client_root(bcfs_g.client);
	bcfs_g.features = bcp_client_hello(bcfs_g.client)->features;
	bcfs_cache_defaults(o);
	if (bcp_client_io_max(bcfs_g.client) < bcfs_g.chunk)
		bcfs_g.chunk = bcp_client_io_max(bcfs_g.client);
	bcfs_wb_init(co.pool_size ? co.pool_size : BCP_CLIENT_POOL_DEFAULT);
	bcfs_dbg("connected to %s: transport %s, root handle %llu",
		 o->agent, bcp_transport_name(bcp_client_transport(
			 bcfs_g.client)), (unsigned long long)bcfs_g.root);

	bcfs_g.se = fuse_session_new(&args, &bcfs_ops, sizeof(bcfs_ops),
				     NULL);
	if (!bcfs_g.se)
		goto out_client;
	if (fuse_set_signal_handlers(bcfs_g.se))
		goto out_session;
	if (fuse_session_mount(bcfs_g.se, mnt))
		goto out_signals;
	io_err = bcfs_fuseio_install(bcfs_g.se);
	if (io_err < 0)
		bcfs_warn("lookups in one directory go one at a time: %s",
			  strerror(-io_err));
	bcfs_readahead_prepare(mnt);
	if (bcfs_notify_start())
		goto out_unmount;
	if (bcfs_metrics_start(mnt) < 0)
		goto out_unmount;
	/* a private agent that dies is started again, and resumed */
	if (bcfs_g.embedded && o->reconnect_timeout > 0 &&
	    bcfs_embed_watch(&bcfs_g.embed))
		goto out_unmount;
	/* a mount tool is silent when it works, unless asked to talk */
	if (o->foreground)
		bcfs_info("%s mounted on %s (%s)", o->agent, mnt,
			  bcfs_g.features & BCP_FEAT_NOTIFY ?
			  "the agent tells of changes made elsewhere" :
			  "the agent does not tell of changes made elsewhere");
	if (!o->foreground) {
		bcfs_report(&status_fd, 0);
		bcfs_detach();
	}

	if (o->single) {
		ret = fuse_session_loop(bcfs_g.se);
	} else {
		lcfg = fuse_loop_cfg_create();
		if (!lcfg) {
			bcfs_err("out of memory");
			ret = -ENOMEM;
			goto out_unmount;
		}
		fuse_loop_cfg_set_max_threads(lcfg, 64);
		fuse_loop_cfg_set_idle_threads(lcfg, 16);
		ret = fuse_session_loop_mt(bcfs_g.se, lcfg);
		fuse_loop_cfg_destroy(lcfg);
	}
	ret = ret < 0 ? 1 : 0;
	bcfs_dbg("unmounting");
	/* files still open when the session ends keep what they wrote */
	bcfs_wb_fini();
	bcfs_peek_fini();

out_unmount:
	bcfs_notify_fini();
	bcfs_metrics_stop();
	fuse_session_unmount(bcfs_g.se);
out_signals:
	fuse_remove_signal_handlers(bcfs_g.se);
out_session:
	/* outstanding I/O fails and replies before the session goes */
	bcfs_dbg("closing the agent session");
	bcp_client_destroy(bcfs_g.client);
	bcfs_g.client = NULL;
	bcfs_dbg("agent session closed");
	fuse_session_destroy(bcfs_g.se);
out_client:
	bcp_client_destroy(bcfs_g.client);
out_embed:
	if (bcfs_g.embedded)
		bcfs_embed_stop(&bcfs_g.embed);
out_fini:
	bcfs_notify_fini();
	bcfs_dirs_fini();
	bcfs_rw_fini();
	bcfs_open_fini();
	bcfs_itable_fini(&bcfs_g.itable);
out_report:
	bcfs_report(&status_fd, ret ? ret : 1);
out_args:
	fuse_opt_free_args(&args);
	free((void *)co.secret);
	free(o->agent);
	free(o->mountpoint);
	free(o->transport);
	free(o->secret_file);
	free(o->pool_size);
	free(o->metrics);
	return ret;
}
