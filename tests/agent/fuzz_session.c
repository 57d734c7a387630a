/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_session.c - libFuzzer target for the agent's session layer: every
 * input is a sequence of frames (fuzz_session.h) played on a real session
 * of real workers, in-process, against a data root in a temporary
 * directory.
 *
 * Per input: the data root is emptied, a socketpair's one end is handed to
 * the worker with a HELLO as the acceptor thread does, the harness
 * authenticates with the empty secret and sends the frames, passing a
 * sealed-able memfd when a record asks, so REGISTER_REGION and the shm
 * batch paths are reached.  It then waits for the reply to a final PING
 * or for the agent to close the connection, closes its end and waits for
 * the session to be freed.  Findings, besides sanitizer reports: a reply
 * that does not decode, no answer within FZS_WAIT_MS (a hang), a session
 * never freed, an error line in the agent's log (an error is an agent bug
 * or a broken environment, never a host's fault), and anything created
 * beside the data root.
 *
 * The agent's objects are linked with -Wl,--wrap=agent_log so that the
 * log's error lines reach fz_log_error() here.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include "agent.h"
#include "bcp_auth.h"
#include "bcp_xfer_srv.h"
#include "fuzz_session.h"
#include "store.h"

#define FZS_WAIT_MS	10000		/* for any answer: more is a hang */
#define FZS_FSIZE_MAX	(16ull << 20)	/* RLIMIT_FSIZE: bounds the disk */
#define FZS_RX_CAP	(2 * BCP_FRAME_MAX)
#define FZS_PING_ID	0xf022000000000000ull

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void __wrap_agent_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void __real_agent_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* main.c is not linked: this is the agent's whole configuration. */
struct agent_config agent_cfg = {
	.queue_depth = 4,
	.slot_size = 64u << 10,
	.workers = 1,
	.log_level = AGENT_LOG_ERROR,
	.ready_fd = -1,
	.completion = BCP_XSRV_CQ_ADAPTIVE,
	.poll_usec = 20,
	.inline_max = 16u << 10,
	.meta_io = AGENT_META_SYNC,
	.squash = AGENT_SQUASH_NONE,
	.anon_uid = 65534,
	.anon_gid = 65534,
	.max_handles = 4096,
	.max_files = 256,
	.max_regions = 8,
	.max_region_bytes = 4ull << 20,
	.max_slots = 4,
	.max_sessions = 4,
	.max_unauth = 4,
	.handshake_ms = 10000,
	.xfer_timeout_ms = FZS_WAIT_MS / 2,
	.pool_threads = 1,
	.root_fd = -1,
};

static char fz_base[4096];		/* the temporary directory */
static char fz_root[4096];		/* the data root inside it */
static int fz_memfd = -1;
static uint64_t fz_pings;
static int fz_verbose;			/* BCF_FUZZ_VERBOSE: print replies */

/* The harness's end of one session's control connection. */
struct fz_conn {
	int fd;
	int closed;			/* EOF or error from the agent */
	uint64_t deadline;		/* ns: FZS_WAIT_MS from the last step */
	/* replies read and not yet parsed */
	uint8_t *rx;
	size_t rlen;
	/* the agent's view of what was sent: where its frames end */
	uint8_t shdr[BCP_HDR_SIZE];
	size_t shlen;			/* header bytes of the current frame */
	uint64_t sneed;			/* payload bytes still to come */
	int sbroken;			/* a header the agent refuses */
	uint64_t ping_seen;		/* req_id of the last PING reply */
	struct bcp_msg hello, auth;	/* the handshake's replies */
};

static uint8_t fz_rx[FZS_RX_CAP];

__attribute__((noreturn)) static void fz_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fuzz_session: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/*
 * Every agent log line goes through here.  An error line means the agent
 * hit a state it should never reach from the wire (or the environment
 * failed it): stop with a stack, so libFuzzer keeps the input.
 */
void __wrap_agent_log(int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > agent_cfg.log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	__real_agent_log(level, "%s", msg);
	if (level == AGENT_LOG_ERROR)
		fz_die("the agent logged an error: %s", msg);
}

/* ---- the data root ---- */

static int fz_rm_one(const char *path, const struct stat *st, int type,
		     struct FTW *ftw)
{
	(void)st;
	if (ftw->level == 0)
		return 0;
	if (type == FTW_DP || type == FTW_D || type == FTW_DNR)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static int fz_open_up(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_D || type == FTW_DNR)
		chmod(path, 0700);
	return 0;
}

/* Give every input the same, empty data root. */
static void fz_root_reset(void)
{
	char names[4096];
	ssize_t n, i;

	chmod(fz_root, 0755);
	if (lchown(fz_root, geteuid(), getegid()) < 0)
		fz_die("chown %s: %s", fz_root, strerror(errno));
	nftw(fz_root, fz_open_up, 16, FTW_PHYS | FTW_MOUNT);
	nftw(fz_root, fz_rm_one, 16, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
	n = llistxattr(fz_root, names, sizeof(names));
	for (i = 0; n > 0 && i < n; i += (ssize_t)strlen(names + i) + 1)
		lremovexattr(fz_root, names + i);
}

/* Nothing but the data root may appear beside it. */
static void fz_check_base(void)
{
	struct dirent *e;
	DIR *d;

	d = opendir(fz_base);
	if (!d)
		fz_die("%s: %s", fz_base, strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, "root"))
			fz_die("%s/%s appeared outside the data root",
			       fz_base, e->d_name);
	closedir(d);
}

static void fz_cleanup(void)
{
	if (fz_root[0]) {
		fz_root_reset();
		rmdir(fz_root);
		rmdir(fz_base);
	}
}

/*
 * Run as root, a session could make a node of the host's disk and write
 * to it: without CAP_MKNOD the kernel refuses any device node, whatever
 * the agent lets through.  Before any thread starts, so all inherit it.
 */
static void fz_drop_mknod(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	unsigned int w = CAP_MKNOD / 32;
	uint32_t bit = 1u << (CAP_MKNOD % 32);

	if (syscall(SYS_capget, &hdr, d) < 0)
		fz_die("capget: %s", strerror(errno));
	if (!(d[w].permitted & bit))
		return;
	d[w].effective &= ~bit;
	d[w].permitted &= ~bit;
	d[w].inheritable &= ~bit;
	if (syscall(SYS_capset, &hdr, d) < 0)
		fz_die("cannot drop CAP_MKNOD: %s", strerror(errno));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct rlimit rl = { FZS_FSIZE_MAX, FZS_FSIZE_MAX };
	const char *tmp = getenv("TMPDIR");
	uint8_t pattern[4096];
	unsigned int i;
	int ret;

	(void)argc;
	(void)argv;
	fz_drop_mknod();
	/* a FALLOCATE or SETATTR of 1 TiB must not fill the disk */
	if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
		fz_die("RLIMIT_FSIZE: %s", strerror(errno));
	fz_verbose = getenv("BCF_FUZZ_VERBOSE") != NULL;
	signal(SIGPIPE, SIG_IGN);
	snprintf(fz_base, sizeof(fz_base), "%s/bcf-fuzz-session.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(fz_base))
		fz_die("mkdtemp %s: %s", fz_base, strerror(errno));
	snprintf(fz_root, sizeof(fz_root), "%s/root", fz_base);
	if (mkdir(fz_root, 0755) < 0)
		fz_die("mkdir %s: %s", fz_root, strerror(errno));
	atexit(fz_cleanup);
	agent_cfg.root = fz_root;
	if (agent_posix_open(fz_root, &agent_backend) < 0)
		fz_die("open %s: %s", fz_root, strerror(errno));
	agent_cfg.root_fd = agent_backend->root_fd;

	/* regions: a memfd that may be sealed, as the host's are */
	fz_memfd = memfd_create("bcf-fuzz-region",
				MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fz_memfd < 0 || ftruncate(fz_memfd, FZS_SHM_LEN) < 0)
		fz_die("memfd: %s", strerror(errno));
	for (i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 7 + 1);
	for (i = 0; i < FZS_SHM_LEN; i += sizeof(pattern))
		if (pwrite(fz_memfd, pattern, sizeof(pattern), i) < 0)
			fz_die("memfd: %s", strerror(errno));

	ret = agent_workers_start(agent_cfg.workers);
	if (ret < 0)
		fz_die("cannot start the workers: %s", strerror(-ret));
	return 0;
}

/* ---- the connection ---- */

static void fz_arm(struct fz_conn *c)
{
	c->deadline = agent_now_ns() + FZS_WAIT_MS * 1000000ull;
}

/* Parse the replies read so far; every one must decode. */
static void fz_parse(struct fz_conn *c)
{
	size_t pos = 0;

	while (c->rlen - pos >= BCP_HDR_SIZE) {
		enum bcp_err why = BCP_E_OK;
		struct bcp_msg m;
		struct bcp_hdr h;
		size_t flen;

		if (bcp_hdr_check(c->rx + pos, BCP_FRAME_MAX, &h, &why) < 0)
			fz_die("the agent sent a bad header: %s",
			       bcp_err_str(why));
		flen = BCP_HDR_SIZE + h.payload_len;
		if (c->rlen - pos < flen)
			break;
		if (bcp_decode(c->rx + pos, flen, &m, &why) < 0)
			fz_die("the agent sent an undecodable %s: %s",
			       bcp_op_name(h.opcode), bcp_err_str(why));
		if (fz_verbose)
			fprintf(stderr, "reply %s #%llu: %d\n",
				bcp_op_name(h.opcode),
				(unsigned long long)h.req_id, h.status);
		if (!(m.hdr.flags & BCP_HF_REPLY))
			fz_die("the agent sent a %s request on the control "
			       "connection", bcp_op_name(h.opcode));
		if (m.hdr.opcode == BCP_OP_PING)
			c->ping_seen = m.hdr.req_id;
		else if (m.hdr.opcode == BCP_OP_HELLO)
			c->hello = m;
		else if (m.hdr.opcode == BCP_OP_AUTH)
			c->auth = m;
		pos += flen;
	}
	memmove(c->rx, c->rx + pos, c->rlen - pos);
	c->rlen -= pos;
}

static void fz_read(struct fz_conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->rlen == FZS_RX_CAP)
			fz_die("a reply longer than the longest frame");
		n = recv(c->fd, c->rx + c->rlen, FZS_RX_CAP - c->rlen,
			 MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			c->closed = 1;
			break;
		}
		c->rlen += (size_t)n;
		fz_parse(c);
	}
}

/* Wait for the socket (events), reading replies; dies past the deadline. */
static void fz_wait(struct fz_conn *c, short events)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN | events };
	uint64_t now = agent_now_ns();

	if (now > c->deadline)
		fz_die("the agent did not answer within %d ms", FZS_WAIT_MS);
	if (poll(&p, 1, (int)((c->deadline - now) / 1000000 + 1)) < 0 &&
	    errno != EINTR)
		fz_die("poll: %s", strerror(errno));
	if (p.revents & (POLLIN | POLLHUP | POLLERR))
		fz_read(c);
}

/* Follow the agent's framing over the bytes sent (see fz_boundary). */
static void fz_track(struct fz_conn *c, const uint8_t *p, size_t len)
{
	while (len && !c->sbroken) {
		size_t k;

		if (c->sneed) {
			k = len < c->sneed ? len : (size_t)c->sneed;
			c->sneed -= k;
		} else {
			enum bcp_err why;
			struct bcp_hdr h;

			k = BCP_HDR_SIZE - c->shlen;
			if (k > len)
				k = len;
			memcpy(c->shdr + c->shlen, p, k);
			c->shlen += k;
			if (c->shlen == BCP_HDR_SIZE) {
				c->shlen = 0;
				if (bcp_hdr_check(c->shdr, BCP_FRAME_MAX, &h,
						  &why) < 0)
					c->sbroken = 1;
				else
					c->sneed = h.payload_len;
			}
		}
		p += k;
		len -= k;
	}
}

/* Does the agent see the bytes sent so far as whole frames? */
static int fz_boundary(const struct fz_conn *c)
{
	return !c->sbroken && !c->sneed && !c->shlen;
}

/* Send buf[len], the memfd along with its first byte when pass_fd. */
static void fz_send(struct fz_conn *c, const uint8_t *buf, size_t len,
		    int pass_fd)
{
	size_t off = 0;

	fz_arm(c);
	while (off < len && !c->closed) {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { .iov_base = (void *)(buf + off),
				     .iov_len = len - off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;

		if (pass_fd && off == 0) {
			struct cmsghdr *cm;

			memset(&cbuf, 0, sizeof(cbuf));
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = sizeof(cbuf.buf);
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &fz_memfd, sizeof(int));
		}
		n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			fz_wait(c, POLLOUT);
			continue;
		}
		if (n < 0) {
			c->closed = 1;	/* the agent closed: fine */
			break;
		}
		fz_track(c, buf + off, (size_t)n);
		off += (size_t)n;
		fz_arm(c);
		fz_read(c);
	}
}

/*
 * Wait until the agent answered everything sent: a PING's reply, or the
 * connection closed.  A frame the agent still waits bytes for is completed
 * with zeros first, so the PING is read as a frame of its own.
 */
static void fz_sync(struct fz_conn *c)
{
	static const uint8_t zeros[4096];
	uint8_t ping[BCP_HDR_SIZE];
	struct bcp_msg m;
	uint64_t id = FZS_PING_ID | ++fz_pings;

	while (!c->closed && !c->sbroken && !fz_boundary(c)) {
		size_t k = c->sneed ? (c->sneed < sizeof(zeros) ?
				       (size_t)c->sneed : sizeof(zeros)) :
				      BCP_HDR_SIZE - c->shlen;

		fz_send(c, zeros, k, 0);
	}
	fz_arm(c);
	if (!c->closed && !c->sbroken) {
		bcp_msg_init(&m, BCP_OP_PING, id);
		if (bcp_encode(ping, sizeof(ping), &m) != BCP_HDR_SIZE)
			fz_die("cannot encode a PING");
		fz_send(c, ping, sizeof(ping), 0);
	}
	while (!c->closed && c->ping_seen != id)
		fz_wait(c, 0);
}

/* HELLO handed over as the acceptor does, then AUTH (unless noauth). */
static void fz_handshake(struct fz_conn *c, int agent_fd, int noauth,
			 int is_unix)
{
	uint8_t buf[256], nc[BCP_NONCE_LEN], key[1] = { 0 };
	struct bcp_msg m;
	unsigned int i;
	int n;

	for (i = 0; i < BCP_NONCE_LEN; i++)
		nc[i] = (uint8_t)(0xa5 ^ i);
	bcp_msg_init(&m, BCP_OP_HELLO, 1);
	m.u.hello_req.ver_min = BCP_VERSION_MIN;
	m.u.hello_req.ver_max = BCP_VERSION_MAX;
	m.u.hello_req.features = BCP_FEAT_ALL & ~(BCP_FEAT_RDMA | BCP_FEAT_BUSY);
	memcpy(m.u.hello_req.nonce, nc, sizeof(nc));
	n = bcp_encode(buf, sizeof(buf), &m);
	if (n < 0)
		fz_die("cannot encode HELLO: %s", strerror(-n));
	atomic_fetch_add(&agent_live_sessions, 1);
	agent_worker_hand(agent_fd, "fuzz", buf, (size_t)n, is_unix);

	fz_arm(c);
	while (!c->closed && !c->hello.hdr.opcode)
		fz_wait(c, 0);
	if (c->closed || c->hello.hdr.status < 0)
		fz_die("HELLO refused");
	if (noauth)
		return;
	bcp_msg_init(&m, BCP_OP_AUTH, 2);
	if (bcp_auth_mac(key, 0, BCP_AUTH_LABEL_CLIENT,
			 c->hello.u.hello_rep.nonce, BCP_NONCE_LEN, nc,
			 BCP_NONCE_LEN, m.u.auth_req.mac) < 0)
		fz_die("cannot compute the AUTH MAC");
	n = bcp_encode(buf, sizeof(buf), &m);
	if (n < 0)
		fz_die("cannot encode AUTH: %s", strerror(-n));
	fz_send(c, buf, (size_t)n, 0);
	while (!c->closed && !c->auth.hdr.opcode)
		fz_wait(c, 0);
	if (c->closed || c->auth.hdr.status < 0)
		fz_die("authentication with the empty secret failed");
}

/* After our end closed: the session must be freed, in bounded time. */
static void fz_wait_freed(void)
{
	uint64_t until = agent_now_ns() + FZS_WAIT_MS * 1000000ull;

	while (atomic_load(&agent_live_sessions)) {
		if (agent_now_ns() > until)
			fz_die("a session was not freed within %d ms of its "
			       "host closing", FZS_WAIT_MS);
		usleep(200);
	}
}

static void fz_put_le(uint8_t *p, uint64_t v, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[FZS_REC_HDR + 65536];
	uint8_t setup = size ? data[0] : 0;
	struct fz_conn c;
	size_t pos = 0;
	int sv[2];

	/* libFuzzer's own SIGXFSZ handler would end the run */
	signal(SIGXFSZ, SIG_IGN);
	fz_root_reset();
	memset(&c, 0, sizeof(c));
	c.rx = fz_rx;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fz_die("socketpair: %s", strerror(errno));
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	c.fd = sv[0];
	/* no session is live: the worker reads agent_cfg after the hand */
	agent_cfg.meta_io = setup & FZS_URING ? AGENT_META_URING :
						AGENT_META_SYNC;
	fz_handshake(&c, sv[1], setup & FZS_NOAUTH, !(setup & FZS_TCP));

	while (size - pos >= FZS_REC_HDR && !c.closed) {
		uint8_t ctl = data[pos];
		size_t len = data[pos + 1] | (size_t)data[pos + 2] << 8;

		pos += FZS_REC_HDR;
		if (len > size - pos)
			len = size - pos;
		memcpy(frame, data + pos, len);
		pos += len;
		if ((ctl & FZS_FIX) && len >= BCP_HDR_SIZE) {
			fz_put_le(frame, BCP_MAGIC, 4);
			fz_put_le(frame + 4, BCP_VERSION_MAX, 2);
			fz_put_le(frame + 12, len - BCP_HDR_SIZE, 4);
		}
		if (ctl & FZS_SYNC)
			fz_sync(&c);
		fz_send(&c, frame, len, !!(ctl & FZS_FD));
	}
	fz_sync(&c);
	close(c.fd);
	fz_wait_freed();
	fz_check_base();
	return 0;
}
