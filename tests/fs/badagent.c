/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * badagent.c - a fake agent that serves one bluecachefs mount over a unix
 * socket and misbehaves in one chosen way, so that badagent.sh can check
 * what the FUSE daemon makes of a bad reply on a real mount.
 *
 *   badagent SOCKET MODE [SECRET_FILE]
 *
 * It plays the agent's side of HELLO (offering BCP_FEAT_SHM and
 * BCP_FEAT_READDIRPLUS; BCP_FEAT_BUSY too in mode busy-notify) and AUTH (the secret of SECRET_FILE, or the empty
 * one), accepts the shm REGISTER_REGION, and serves a root directory
 * holding the regular files "a", "b", "a2" and "c" (LOOKUP, GETATTR,
 * OPENDIR, READDIR in both forms, GETXATTR, LISTXATTR, STATFS).  "user.x"
 * of any file has a 16-byte value; every other extended attribute is
 * -ENODATA.  What it does not know it logs and answers with -ENOSYS.
 *
 * MODE is what goes wrong:
 *   none            nothing (the control run)
 *   readdir-form    a READDIR asking for plus entries gets plain ones:
 *                   ".", ".." and "a", count 3
 *   xattr-oversize  a GETXATTR of "user.x" with a size below 64 gets 64
 *                   bytes; one with size 0 is told 16
 *   garbage         the reply to the LOOKUP of "bad" is 64 bytes of junk
 *   unknown-id      the reply to the LOOKUP of "bad" carries a request id
 *                   the daemon never used (its slot, a generation to come)
 *   busy            the LOOKUP of "bad" is never answered; everything
 *                   else is, PING too (an agent at work on a slow store)
 *   mute            from the LOOKUP of "bad" on nothing is answered (a
 *                   hung agent whose connection stays up)
 *   busy-notify     the LOOKUP of "bad" is never answered, and for 8 s
 *                   after it nothing is read (PINGs wait unread), but a
 *                   NOTIFY BUSY goes out every 500 ms, when the daemon
 *                   asked for BCP_FEAT_BUSY (an agent whose session has
 *                   every store call it may have out on a slow store);
 *                   then it serves again
 *
 * It prints "ready" on stdout once it listens, logs each request on
 * stderr, and exits 0 when the daemon closes the session, 1 on a failure
 * of its own.  One session, one thread: requests are answered in order.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bcp_auth.h"
#include "bcp_codec.h"
#include "bcp_frame.h"

#define BA_ROOT		77
#define BA_FILE0	100	/* handle of names[0]; the others follow */
#define BA_SESSION	0x0badbadbadbad00full
#define BA_XATTR	"user.x"
#define BA_XATTR_LEN	16	/* the value's true length */
#define BA_OVERSIZE	64	/* what xattr-oversize answers */
#define BA_GEN_UNUSED	0x7fffffffull	/* a request id generation */

enum ba_mode {
	BA_NONE,
	BA_READDIR_FORM,
	BA_XATTR_OVERSIZE,
	BA_GARBAGE,
	BA_UNKNOWN_ID,
	BA_BUSY,
	BA_MUTE,
	BA_BUSY_NOTIFY,
};

static const char *const ba_mode_names[] = {
	[BA_NONE] = "none",
	[BA_READDIR_FORM] = "readdir-form",
	[BA_XATTR_OVERSIZE] = "xattr-oversize",
	[BA_GARBAGE] = "garbage",
	[BA_UNKNOWN_ID] = "unknown-id",
	[BA_BUSY] = "busy",
	[BA_MUTE] = "mute",
	[BA_BUSY_NOTIFY] = "busy-notify",
};

/* The root's regular files, in directory order. */
static const char *const ba_names[] = { "a", "b", "a2", "c" };
#define BA_NFILES	(sizeof(ba_names) / sizeof(ba_names[0]))

struct ba {
	enum ba_mode mode;
	int sock;
	uint8_t *secret;
	size_t secret_len;
	uint8_t nc[BCP_NONCE_LEN], ns[BCP_NONCE_LEN];
	uint8_t in[BCP_FRAME_MAX];
	uint8_t out[BCP_FRAME_MAX];
	uint64_t next_fh;
	int mute;		/* mute: answers nothing any more */
	uint64_t features;	/* as agreed in HELLO */
};

static void ba_log(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void ba_log(const char *fmt, ...)
{
	va_list ap;

	fputs("badagent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int ba_send(struct ba *b, const struct bcp_msg *m)
{
	int n = bcp_encode(b->out, sizeof(b->out), m);

	if (n < 0) {
		ba_log("cannot encode a %s reply: %s",
		       bcp_op_name(m->hdr.opcode), strerror(-n));
		return n;
	}
	return bcp_frame_send(b->sock, b->out, (size_t)n, -1);
}

static int ba_status(struct ba *b, const struct bcp_msg *req, int32_t status)
{
	struct bcp_msg r;

	bcp_msg_init_reply(&r, req, status);
	return ba_send(b, &r);
}

/*
 * busy-notify: at work on the LOOKUP of "bad" for 8 s, reading nothing
 * meanwhile, and saying so every 500 ms when the daemon takes NOTIFY BUSY.
 */
static int ba_busy_notify(struct ba *b)
{
	const struct timespec half = { 0, 500 * 1000 * 1000 };
	struct bcp_msg n;
	int i, ret;

	ba_log("LOOKUP bad: never answered, busy for 8 s%s",
	       b->features & BCP_FEAT_BUSY ? ", saying so" :
	       " (BCP_FEAT_BUSY not agreed: saying nothing)");
	for (i = 0; i < 16; i++) {
		if (b->features & BCP_FEAT_BUSY) {
			bcp_msg_init(&n, BCP_OP_NOTIFY, 0);
			n.u.notify_req.kind = BCP_NOTIFY_BUSY;
			ret = ba_send(b, &n);
			if (ret < 0)
				return ret;
		}
		nanosleep(&half, NULL);
	}
	ba_log("serving again");
	return 0;
}

/* Index into ba_names of a handle, or -1 (the root and unknown ones). */
static int ba_file(uint64_t handle)
{
	if (handle < BA_FILE0 || handle >= BA_FILE0 + BA_NFILES)
		return -1;
	return (int)(handle - BA_FILE0);
}

static void ba_attr(uint64_t handle, struct bcp_attr *a)
{
	int64_t now = (int64_t)time(NULL);

	memset(a, 0, sizeof(*a));
	a->ino = handle;
	a->atime = a->mtime = a->ctime = now;
	a->uid = getuid();
	a->gid = getgid();
	a->blksize = 4096;
	if (handle == BA_ROOT) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
		a->size = 4096;
	} else {
		a->mode = S_IFREG | 0644;
		a->nlink = 1;
	}
}

static void ba_entry(uint64_t handle, struct bcp_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->handle = handle;
	e->generation = 1;
	ba_attr(handle, &e->attr);
}

static int ba_hello(struct ba *b)
{
	struct bcp_msg m, r;
	enum bcp_err why;
	int n;

	n = bcp_frame_recv(b->sock, b->in, sizeof(b->in), NULL, 10000, &why);
	if (n <= 0 || bcp_decode(b->in, (size_t)n, &m, &why) < 0 ||
	    m.hdr.opcode != BCP_OP_HELLO) {
		ba_log("no HELLO");
		return -1;
	}
	memcpy(b->nc, m.u.hello_req.nonce, BCP_NONCE_LEN);
	bcp_random(b->ns, sizeof(b->ns));
	bcp_msg_init_reply(&r, &m, 0);
	r.u.hello_rep.version = BCP_VERSION_MAX;
	r.u.hello_rep.max_segs = 64;
	r.u.hello_rep.features = m.u.hello_req.features &
				 (BCP_FEAT_SHM | BCP_FEAT_READDIRPLUS |
				  (b->mode == BA_BUSY_NOTIFY ? BCP_FEAT_BUSY : 0));
	b->features = r.u.hello_rep.features;
	r.u.hello_rep.max_frame = BCP_FRAME_MAX;
	r.u.hello_rep.max_inflight = 16;
	r.u.hello_rep.slot_size = 1 << 20;
	r.u.hello_rep.nslots = 4;
	r.u.hello_rep.session = BA_SESSION;
	memcpy(r.u.hello_rep.nonce, b->ns, BCP_NONCE_LEN);
	return ba_send(b, &r);
}

static int ba_auth(struct ba *b)
{
	uint8_t mac[BCP_MAC_LEN];
	struct bcp_msg m, r;
	enum bcp_err why;
	int n;

	n = bcp_frame_recv(b->sock, b->in, sizeof(b->in), NULL, 10000, &why);
	if (n <= 0 || bcp_decode(b->in, (size_t)n, &m, &why) < 0 ||
	    m.hdr.opcode != BCP_OP_AUTH) {
		ba_log("no AUTH");
		return -1;
	}
	bcp_auth_mac(b->secret, b->secret_len, BCP_AUTH_LABEL_CLIENT, b->ns,
		     BCP_NONCE_LEN, b->nc, BCP_NONCE_LEN, mac);
	if (!bcp_auth_mac_equal(mac, m.u.auth_req.mac)) {
		ba_log("the daemon does not hold the secret");
		ba_status(b, &m, -EACCES);
		return -1;
	}
	bcp_msg_init_reply(&r, &m, 0);
	bcp_auth_mac(b->secret, b->secret_len, BCP_AUTH_LABEL_SERVER, b->nc,
		     BCP_NONCE_LEN, b->ns, BCP_NONCE_LEN, r.u.auth_rep.mac);
	r.u.auth_rep.root = BA_ROOT;
	return ba_send(b, &r);
}

static int ba_lookup(struct ba *b, const struct bcp_msg *m)
{
	static const uint8_t junk[64] = { 0xab, 0xcd, 0xef, 0x01 };
	struct bcp_msg r;
	size_t i, len = m->u.named_req.name_len;

	if (m->u.named_req.parent == BA_ROOT && len == 3 &&
	    !memcmp(m->name, "bad", 3)) {
		switch (b->mode) {
		case BA_GARBAGE:
			ba_log("LOOKUP bad: answering garbage");
			return bcp_frame_send(b->sock, junk, sizeof(junk), -1);
		case BA_UNKNOWN_ID:
			/*
			 * The daemon's ids are a generation that grows with
			 * every request over a slot index: keep the slot, take
			 * the last generation, which a short session never
			 * reaches.
			 */
			bcp_msg_init_reply(&r, m, 0);
			r.hdr.req_id = BA_GEN_UNUSED << 32 |
				       (m->hdr.req_id & 0xffffffffu);
			ba_log("LOOKUP bad: answering request %llu instead",
			       (unsigned long long)r.hdr.req_id);
			ba_entry(BA_FILE0, &r.u.entry_rep.entry);
			return ba_send(b, &r);
		case BA_BUSY:
			ba_log("LOOKUP bad: never answered");
			return 0;
		case BA_MUTE:
			ba_log("LOOKUP bad: mute from now on");
			b->mute = 1;
			return 0;
		case BA_BUSY_NOTIFY:
			return ba_busy_notify(b);
		default:
			return ba_status(b, m, -ENOENT);
		}
	}
	if (m->u.named_req.parent != BA_ROOT)
		return ba_status(b, m, ba_file(m->u.named_req.parent) < 0 ?
				 -ESTALE : -ENOTDIR);
	for (i = 0; i < BA_NFILES; i++) {
		if (strlen(ba_names[i]) == len &&
		    !memcmp(ba_names[i], m->name, len))
			break;
	}
	if (i == BA_NFILES)
		return ba_status(b, m, -ENOENT);
	bcp_msg_init_reply(&r, m, 0);
	ba_entry(BA_FILE0 + i, &r.u.entry_rep.entry);
	return ba_send(b, &r);
}

static int ba_getattr(struct ba *b, const struct bcp_msg *m)
{
	uint64_t h = m->u.node_req.handle;
	struct bcp_msg r;

	if (h != BA_ROOT && ba_file(h) < 0)
		return ba_status(b, m, -ESTALE);
	bcp_msg_init_reply(&r, m, 0);
	ba_attr(h, &r.u.attr_rep.attr);
	return ba_send(b, &r);
}

static int ba_opendir(struct ba *b, const struct bcp_msg *m)
{
	struct bcp_msg r;

	if (m->u.open_req.handle != BA_ROOT)
		return ba_status(b, m, ba_file(m->u.open_req.handle) < 0 ?
				 -ESTALE : -ENOTDIR);
	bcp_msg_init_reply(&r, m, 0);
	r.u.open_rep.fh = b->next_fh++;
	return ba_send(b, &r);
}

/*
 * The root's entries from the cookie on: ".", "..", then the files; the
 * cookie of entry i is i + 1.  readdir-form answers a plus request with
 * the first three in the plain form.
 */
static int ba_readdir(struct ba *b, const struct bcp_msg *m)
{
	static uint8_t tail[BCP_READDIR_MAX];
	int plus = !!(m->u.readdir_req.flags & BCP_READDIR_PLUS);
	uint64_t i, cookie = m->u.readdir_req.cookie;
	size_t cap = m->u.readdir_req.max_bytes, off = 0;
	struct bcp_dirent d;
	struct bcp_entry e;
	struct bcp_msg r;
	uint32_t count = 0;
	const char *name;

	if (m->u.readdir_req.handle != BA_ROOT)
		return ba_status(b, m, -ENOTDIR);
	if (cap > sizeof(tail))
		cap = sizeof(tail);
	if (plus && b->mode == BA_READDIR_FORM) {
		ba_log("READDIR plus: answering plain entries");
		plus = 0;
		cookie = 0;
		cap = bcp_dirent_size(0, 2) * 3;
	}
	for (i = cookie; i < 2 + BA_NFILES; i++) {
		memset(&d, 0, sizeof(d));
		memset(&e, 0, sizeof(e));
		d.cookie = i + 1;
		if (i < 2) {
			name = i ? ".." : ".";
			d.ino = BA_ROOT;
			d.type = 4;	/* DT_DIR */
		} else {
			name = ba_names[i - 2];
			d.ino = BA_FILE0 + i - 2;
			d.type = 8;	/* DT_REG */
			ba_entry(d.ino, &e);
		}
		d.name_len = (uint16_t)strlen(name);
		if (bcp_dirent_put(tail, cap, &off, plus, &d, &e, name))
			break;
		count++;
	}
	bcp_msg_init_reply(&r, m, 0);
	r.u.readdir_rep.count = count;
	r.u.readdir_rep.eof = i == 2 + BA_NFILES;
	r.dirents = tail;
	r.dirents_len = (uint32_t)off;
	return ba_send(b, &r);
}

static int ba_getxattr(struct ba *b, const struct bcp_msg *m)
{
	static const char value[BA_OVERSIZE] =
		"0123456789abcdef and what no one asked for, to 64 bytes";
	uint32_t size = m->u.getxattr_req.size, len = BA_XATTR_LEN;
	uint64_t h = m->u.getxattr_req.handle;
	struct bcp_msg r;

	if (h != BA_ROOT && ba_file(h) < 0)
		return ba_status(b, m, -ESTALE);
	if (m->u.getxattr_req.name_len != strlen(BA_XATTR) ||
	    memcmp(m->name, BA_XATTR, strlen(BA_XATTR)))
		return ba_status(b, m, -ENODATA);
	bcp_msg_init_reply(&r, m, 0);
	if (!size) {
		r.u.xattr_rep.size = len;
		return ba_send(b, &r);
	}
	if (b->mode == BA_XATTR_OVERSIZE && size < BA_OVERSIZE) {
		ba_log("GETXATTR %s size %u: answering %u bytes", BA_XATTR,
		       size, BA_OVERSIZE);
		len = BA_OVERSIZE;
	} else if (size < len) {
		return ba_status(b, m, -ERANGE);
	}
	r.u.xattr_rep.size = len;
	r.data = value;
	r.data_len = len;
	return ba_send(b, &r);
}

static int ba_statfs(struct ba *b, const struct bcp_msg *m)
{
	struct bcp_msg r;

	bcp_msg_init_reply(&r, m, 0);
	r.u.statfs_rep.blocks = 1000;
	r.u.statfs_rep.bfree = 500;
	r.u.statfs_rep.bavail = 500;
	r.u.statfs_rep.files = 100;
	r.u.statfs_rep.ffree = 50;
	r.u.statfs_rep.bsize = 4096;
	r.u.statfs_rep.frsize = 4096;
	r.u.statfs_rep.namemax = BCP_NAME_MAX;
	return ba_send(b, &r);
}

/*
 * Serve one request: 0 to go on, 1 when the daemon closed the session,
 * -1 on a failure of ours (which the exit status tells the test).
 */
static int ba_serve_one(struct ba *b)
{
	struct bcp_msg m;
	enum bcp_err why;
	int n, fd = -1;

	n = bcp_frame_recv(b->sock, b->in, sizeof(b->in), &fd, -1, &why);
	if (n == 0 || n == -ECONNRESET)
		return 1;
	if (n < 0) {
		ba_log("receive failed: %s", strerror(-n));
		return -1;
	}
	if (bcp_decode(b->in, (size_t)n, &m, &why) < 0) {
		ba_log("a frame that does not decode: %s", bcp_err_str(why));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (m.hdr.opcode == BCP_OP_LOOKUP || m.hdr.opcode == BCP_OP_GETXATTR)
		ba_log("%s %.*s", bcp_op_name(m.hdr.opcode),
		       (int)(m.hdr.opcode == BCP_OP_LOOKUP ?
			     m.u.named_req.name_len :
			     m.u.getxattr_req.name_len), m.name);
	else
		ba_log("%s", bcp_op_name(m.hdr.opcode));
	if (b->mute) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	switch (m.hdr.opcode) {
	case BCP_OP_REGISTER_REGION:
		/* the mapping is never used: nothing here moves data */
		if (fd < 0 || m.u.region_req.kind != BCP_REGION_SHM) {
			ba_log("REGISTER_REGION without a memfd");
			n = ba_status(b, &m, -EINVAL);
			break;
		}
		close(fd);
		n = ba_status(b, &m, 0);
		break;
	case BCP_OP_LOOKUP:
		n = ba_lookup(b, &m);
		break;
	case BCP_OP_GETATTR:
		n = ba_getattr(b, &m);
		break;
	case BCP_OP_OPENDIR:
		n = ba_opendir(b, &m);
		break;
	case BCP_OP_READDIR:
		n = ba_readdir(b, &m);
		break;
	case BCP_OP_GETXATTR:
		n = ba_getxattr(b, &m);
		break;
	case BCP_OP_LISTXATTR:
		n = ba_status(b, &m, 0);
		break;
	case BCP_OP_STATFS:
		n = ba_statfs(b, &m);
		break;
	case BCP_OP_RELEASEDIR:
	case BCP_OP_FORGET:
	case BCP_OP_UNREGISTER_REGION:
	case BCP_OP_PING:
		n = ba_status(b, &m, 0);
		break;
	default:
		ba_log("%s (%u) is not served here: ENOSYS",
		       bcp_op_name(m.hdr.opcode), m.hdr.opcode);
		n = ba_status(b, &m, -ENOSYS);
		break;
	}
	if (fd >= 0 && m.hdr.opcode != BCP_OP_REGISTER_REGION)
		close(fd);
	if (n < 0) {
		ba_log("send failed: %s", strerror(-n));
		return -1;
	}
	return 0;
}

static int ba_listen(const char *path)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		ba_log("socket path %s is too long", path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) ||
	    listen(fd, 4)) {
		ba_log("cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	static struct ba b;
	char err[256];
	size_t i;
	int lfd, ret = 1;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s SOCKET MODE [SECRET_FILE]\n",
			argv[0]);
		return 2;
	}
	for (i = 0; i < sizeof(ba_mode_names) / sizeof(ba_mode_names[0]); i++)
		if (!strcmp(argv[2], ba_mode_names[i]))
			break;
	if (i == sizeof(ba_mode_names) / sizeof(ba_mode_names[0])) {
		fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[2]);
		return 2;
	}
	b.mode = (enum ba_mode)i;
	b.next_fh = 1000;
	if (argc == 4 &&
	    bcp_secret_load(argv[3], &b.secret, &b.secret_len, err,
			    sizeof(err)) < 0) {
		ba_log("%s", err);
		return 1;
	}
	/* never outlive a test that forgot it */
	alarm(600);
	lfd = ba_listen(argv[1]);
	if (lfd < 0)
		goto out_secret;
	printf("ready\n");
	fflush(stdout);
	b.sock = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (b.sock < 0) {
		ba_log("accept: %s", strerror(errno));
		goto out_listen;
	}
	ba_log("mode %s: a daemon connected", ba_mode_names[b.mode]);
	if (ba_hello(&b) || ba_auth(&b))
		goto out_sock;
	do
		ret = ba_serve_one(&b);
	while (!ret);
	ba_log("the session is over");
	ret = ret < 0;
out_sock:
	close(b.sock);
out_listen:
	close(lfd);
	unlink(argv[1]);
out_secret:
	free(b.secret);
	return ret;
}
