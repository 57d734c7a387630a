/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * frame.c - framing over socketpairs and sockets: frames of several sizes
 * (up to a full data frame), descriptor passing, a peer closing between
 * and in the middle of frames, an oversized header refused before its
 * payload is read, timeouts, the buffered reader fed a stream of frames in
 * pieces of every size, address parsing, listening and connecting.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bcp_frame.h"
#include "check.h"

#define BIG (BCP_DATA_FRAME_MAX)

static uint8_t sbuf[BIG], rbuf[BIG];

struct sender {
	int sock;
	const void *buf;
	size_t len;
	int ret;
};

static void *send_thread(void *arg)
{
	struct sender *s = arg;

	s->ret = bcp_frame_send(s->sock, s->buf, s->len, -1);
	return NULL;
}

static int encode_data_write(uint32_t len)
{
	static uint8_t data[BCP_SEG_LEN_MAX];
	struct bcp_msg m;
	uint32_t i;

	for (i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 31 + len);
	bcp_msg_init(&m, BCP_OP_DATA_WRITE, len);
	m.u.data_req.region_id = 1;
	m.u.data_req.length = len;
	m.data = data;
	m.data_len = len;
	return bcp_encode(sbuf, sizeof(sbuf), &m);
}

static void sizes(void)
{
	static const uint32_t lens[] = { 1, 4000, 65536, 1u << 20,
					 BCP_SEG_LEN_MAX };
	struct sender s;
	pthread_t th;
	struct bcp_msg m;
	enum bcp_err why;
	int sv[2], n, got;
	size_t i;

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		n = encode_data_write(lens[i]);
		REQUIRE(n > 0, "encode %u", lens[i]);
		s = (struct sender){ .sock = sv[0], .buf = sbuf,
				     .len = (size_t)n };
		REQUIRE(pthread_create(&th, NULL, send_thread, &s) == 0,
			"thread");
		got = bcp_frame_recv(sv[1], rbuf, sizeof(rbuf), NULL, 10000,
				     &why);
		pthread_join(th, NULL);
		CHECK(s.ret == 0, "send %u: %d", lens[i], s.ret);
		CHECK(got == n && !memcmp(sbuf, rbuf, (size_t)n),
		      "frame of %d bytes: got %d", n, got);
		CHECK(bcp_decode(rbuf, (size_t)got, &m, &why) == 0 &&
		      m.data_len == lens[i], "decode %u", lens[i]);
	}

	/* the same 8 MiB frame against a control-sized buffer: refused */
	n = encode_data_write(BCP_SEG_LEN_MAX);
	s = (struct sender){ .sock = sv[0], .buf = sbuf, .len = BCP_HDR_SIZE };
	send_thread(&s);
	got = bcp_frame_recv(sv[1], rbuf, BCP_FRAME_MAX, NULL, 1000, &why);
	CHECK(got == -EMSGSIZE && why == BCP_E_FRAME_TOO_LONG,
	      "8 MiB frame into a 256 KiB buffer: %d", got);

	/* several frames back to back, then a clean close */
	close(sv[0]);
	close(sv[1]);
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	bcp_msg_init(&m, BCP_OP_PING, 1);
	n = bcp_encode(sbuf, sizeof(sbuf), &m);
	CHECK(bcp_frame_send(sv[0], sbuf, (size_t)n, -1) == 0, "ping 1");
	CHECK(bcp_frame_send(sv[0], sbuf, (size_t)n, -1) == 0, "ping 2");
	close(sv[0]);
	CHECK(bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why) == n,
	      "first ping");
	CHECK(bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why) == n,
	      "second ping");
	CHECK(bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why) == 0,
	      "clean EOF between frames");
	close(sv[1]);
}

static void sendv_parts(void)
{
	struct bcp_msg m;
	struct iovec iov[3];
	uint8_t head[64];
	enum bcp_err why;
	int sv[2], h, got;

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	bcp_msg_init(&m, BCP_OP_DATA_WRITE, 77);
	m.u.data_req.length = 10;
	m.data = "0123456789";
	m.data_len = 10;
	h = bcp_encode_head(head, sizeof(head), &m);
	REQUIRE(h == BCP_HDR_SIZE + 16, "encode_head %d", h);
	iov[0] = (struct iovec){ head, (size_t)h };
	iov[1] = (struct iovec){ (void *)"01234", 5 };
	iov[2] = (struct iovec){ (void *)"56789", 5 };
	CHECK(bcp_frame_sendv(sv[0], iov, 3, -1) == 0, "sendv");
	got = bcp_frame_recv(sv[1], rbuf, sizeof(rbuf), NULL, 1000, &why);
	CHECK(got == h + 10 && bcp_decode(rbuf, (size_t)got, &m, &why) == 0 &&
	      m.data_len == 10 && !memcmp(m.data, "0123456789", 10),
	      "head + data in three parts");
	close(sv[0]);
	close(sv[1]);
}

static int count_fds(void)
{
	int n = 0, fd;

	for (fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

static void fd_passing(void)
{
	struct bcp_msg m;
	struct stat st;
	enum bcp_err why;
	int sv[2], mfd, fd = -2, n, got, before;
	char *p;

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	mfd = memfd_create("bcp-test", MFD_CLOEXEC);
	REQUIRE(mfd >= 0 && ftruncate(mfd, 1 << 20) == 0, "memfd");
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	REQUIRE(p != MAP_FAILED, "mmap");
	strcpy(p + 4096, "shared bytes");

	bcp_msg_init(&m, BCP_OP_REGISTER_REGION, 3);
	m.hdr.flags = BCP_HF_FD;
	m.u.region_req.region_id = 1;
	m.u.region_req.kind = BCP_REGION_SHM;
	m.u.region_req.length = 1 << 20;
	n = bcp_encode(sbuf, sizeof(sbuf), &m);
	CHECK(bcp_frame_send(sv[0], sbuf, (size_t)n, mfd) == 0, "send fd");
	got = bcp_frame_recv(sv[1], rbuf, 4096, &fd, 1000, &why);
	CHECK(got == n && fd >= 0 && fd != mfd, "received fd %d", fd);
	if (fd >= 0) {
		char *q;

		CHECK(fstat(fd, &st) == 0 && st.st_size == 1 << 20,
		      "passed memfd size");
		CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "close-on-exec");
		q = mmap(NULL, 1 << 20, PROT_READ, MAP_SHARED, fd, 0);
		CHECK(q != MAP_FAILED && !strcmp(q + 4096, "shared bytes"),
		      "the same memory");
		if (q != MAP_FAILED)
			munmap(q, 1 << 20);
		close(fd);
	}

	/* a descriptor on a frame without BCP_HF_FD is closed */
	before = count_fds();
	bcp_msg_init(&m, BCP_OP_PING, 4);
	n = bcp_encode(sbuf, sizeof(sbuf), &m);
	CHECK(bcp_frame_send(sv[0], sbuf, (size_t)n, mfd) == 0, "send fd");
	got = bcp_frame_recv(sv[1], rbuf, 4096, &fd, 1000, &why);
	CHECK(got == n && fd == -1, "stray descriptor not handed out");
	CHECK(count_fds() == before, "stray descriptor closed");
	/* and when the caller does not take descriptors */
	bcp_msg_init(&m, BCP_OP_REGISTER_REGION, 3);
	m.hdr.flags = BCP_HF_FD;
	m.u.region_req.kind = BCP_REGION_SHM;
	m.u.region_req.length = 1;
	n = bcp_encode(sbuf, sizeof(sbuf), &m);
	CHECK(bcp_frame_send(sv[0], sbuf, (size_t)n, mfd) == 0, "send fd");
	got = bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why);
	CHECK(got == n && count_fds() == before, "unwanted descriptor closed");

	munmap(p, 1 << 20);
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

static void broken_peers(void)
{
	struct bcp_msg m;
	enum bcp_err why;
	struct timespec t0, t1;
	int sv[2], n, got, avail = 0;
	long ms;

	/* closed in the middle of the payload */
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	bcp_msg_init(&m, BCP_OP_LOOKUP, 1);
	m.u.named_req.name_len = 5;
	m.name = "hello";
	n = bcp_encode(sbuf, sizeof(sbuf), &m);
	CHECK(write(sv[0], sbuf, (size_t)n - 2) == n - 2, "partial write");
	close(sv[0]);
	got = bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why);
	CHECK(got == -ECONNRESET, "close mid-payload: %d", got);
	close(sv[1]);

	/* closed in the middle of the header */
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	CHECK(write(sv[0], sbuf, 10) == 10, "partial header");
	close(sv[0]);
	got = bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why);
	CHECK(got == -ECONNRESET, "close mid-header: %d", got);
	close(sv[1]);

	/* a header announcing 200 KiB to a 4 KiB reader: payload never read */
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	bcp_msg_init(&m, BCP_OP_DATA_WRITE, 2);
	m.u.data_req.length = 200000;
	m.data = rbuf;
	m.data_len = 200000;
	n = bcp_encode_head(sbuf, sizeof(sbuf), &m);
	memset(sbuf + n, 0xab, 1000);
	CHECK(write(sv[0], sbuf, (size_t)n + 1000) == n + 1000, "write");
	got = bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why);
	CHECK(got == -EMSGSIZE && why == BCP_E_FRAME_TOO_LONG,
	      "oversized header: %d (%s)", got, bcp_err_str(why));
	CHECK(ioctl(sv[1], FIONREAD, &avail) == 0 &&
	      avail == n + 1000 - BCP_HDR_SIZE,
	      "payload left unread (%d bytes waiting)", avail);
	close(sv[0]);
	close(sv[1]);

	/* a bad magic is reported as such */
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	memset(sbuf, 'G', BCP_HDR_SIZE);
	CHECK(write(sv[0], sbuf, BCP_HDR_SIZE) == BCP_HDR_SIZE, "write");
	got = bcp_frame_recv(sv[1], rbuf, 4096, NULL, 1000, &why);
	CHECK(got == -EPROTO && why == BCP_E_BAD_MAGIC, "HTTP-ish bytes: %d",
	      got);

	/* nothing arrives: -ETIMEDOUT after about the timeout */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	got = bcp_frame_recv(sv[1], rbuf, 4096, NULL, 150, &why);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CHECK(got == -ETIMEDOUT && ms >= 140 && ms < 5000,
	      "timeout: %d after %ld ms", got, ms);
	close(sv[0]);
	close(sv[1]);

	/* sending to a closed peer: an error, not SIGPIPE */
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	close(sv[1]);
	CHECK(bcp_frame_send(sv[0], sbuf, 100, -1) == -EPIPE,
	      "send to a closed peer");
	close(sv[0]);
}

/* The buffered reader: 2000 frames of 32..4096 bytes, written in pieces. */
#define RD_MAX		4096
#define RD_FRAMES	2000

struct chunker {
	int sock;
	const uint8_t *buf;
	size_t len;
};

static void *chunk_thread(void *arg)
{
	struct chunker *k = arg;
	size_t off = 0, n;
	unsigned int seed = 7;

	while (off < k->len) {
		n = 1 + rand_r(&seed) % 9000;
		if (n > k->len - off)
			n = k->len - off;
		if (send(k->sock, k->buf + off, n, MSG_NOSIGNAL) !=
		    (ssize_t)n)
			break;
		off += n;
		if (rand_r(&seed) % 8 == 0)
			usleep(100);
	}
	close(k->sock);
	return NULL;
}

static void reader(void)
{
	static uint8_t stream[RD_FRAMES * RD_MAX];
	static size_t starts[RD_FRAMES + 1];
	struct bcp_frame_reader r;
	struct chunker k;
	const uint8_t *f;
	enum bcp_err why;
	unsigned int seed = 1;
	size_t off = 0;
	pthread_t th;
	int sv[2], i, n, bad = 0;

	for (i = 0; i < RD_FRAMES; i++) {
		n = encode_data_write((uint32_t)(rand_r(&seed) %
				      (RD_MAX - 64) + 1));
		REQUIRE(n > 0 && n <= RD_MAX, "encode frame %d", i);
		memcpy(stream + off, sbuf, (size_t)n);
		starts[i] = off;
		off += (size_t)n;
	}
	starts[RD_FRAMES] = off;
	REQUIRE(bcp_frame_reader_init(&r, RD_MAX) == 0, "reader init");
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	k = (struct chunker){ .sock = sv[0], .buf = stream, .len = off };
	REQUIRE(pthread_create(&th, NULL, chunk_thread, &k) == 0, "thread");
	for (i = 0; i < RD_FRAMES; i++) {
		n = bcp_frame_read(&r, sv[1], &f, &why);
		if (n != (int)(starts[i + 1] - starts[i]) ||
		    memcmp(f, stream + starts[i], (size_t)n)) {
			bad++;
			break;
		}
	}
	CHECK(bad == 0, "frame %d of the stream differs (%d bytes)", i, n);
	if (!bad) {
		n = bcp_frame_read(&r, sv[1], &f, &why);
		CHECK(n == 0, "clean EOF after the stream: %d", n);
	}
	shutdown(sv[1], SHUT_RDWR);	/* a failed reader: free the writer */
	pthread_join(th, NULL);
	close(sv[1]);

	/* closed mid-frame; then a header longer than the reader's limit */
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	CHECK(write(sv[0], stream, starts[1] + 10) ==
	      (ssize_t)(starts[1] + 10), "write");
	close(sv[0]);
	n = bcp_frame_read(&r, sv[1], &f, &why);
	CHECK(n == (int)starts[1], "the whole frame before the cut: %d", n);
	n = bcp_frame_read(&r, sv[1], &f, &why);
	CHECK(n == -ECONNRESET, "close mid-frame: %d", n);
	close(sv[1]);
	bcp_frame_reader_fini(&r);

	REQUIRE(bcp_frame_reader_init(&r, RD_MAX) == 0, "reader init");
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	n = encode_data_write(RD_MAX);
	CHECK(write(sv[0], sbuf, (size_t)n) == n, "write");
	n = bcp_frame_read(&r, sv[1], &f, &why);
	CHECK(n == -EMSGSIZE && why == BCP_E_FRAME_TOO_LONG,
	      "frame over the reader's limit: %d", n);
	close(sv[0]);
	close(sv[1]);
	bcp_frame_reader_fini(&r);
}

static void parse_ok(const char *s, int family, const char *host,
		     unsigned short port, const char *path)
{
	struct bcp_addr a;
	char err[256] = "";
	int ret = bcp_addr_parse(s, &a, err, sizeof(err));

	CHECK(ret == 0, "parse %s: %s", s, err);
	if (ret)
		return;
	CHECK(a.family == family, "%s: family %d", s, a.family);
	if (host)
		CHECK(!strcmp(a.host, host) && a.port == port,
		      "%s: host '%s' port %u", s, a.host, a.port);
	if (path)
		CHECK(!strcmp(a.path, path), "%s: path '%s'", s, a.path);
}

static void parse_bad(const char *s, const char *msg_part)
{
	struct bcp_addr a;
	char err[256] = "";
	int ret = bcp_addr_parse(s, &a, err, sizeof(err));

	CHECK(ret == -EINVAL && strstr(err, msg_part),
	      "parse '%s' should fail mentioning '%s': %d '%s'", s, msg_part,
	      ret, err);
}

static void addresses(void)
{
	char longpath[200];
	struct bcp_addr a;

	parse_ok("tcp://127.0.0.1:9000", AF_INET, "127.0.0.1", 9000, NULL);
	parse_ok("tcp://agent.example", AF_INET, "agent.example",
		 BCP_DEFAULT_PORT, NULL);
	parse_ok("tcp://[::1]:80", AF_INET6, "::1", 80, NULL);
	parse_ok("tcp://[fe80::1%eth0]", AF_INET6, "fe80::1%eth0",
		 BCP_DEFAULT_PORT, NULL);
	parse_ok("tcp://0.0.0.0:0", AF_INET, "0.0.0.0", 0, NULL);
	parse_ok("unix:/run/bluecache.sock", AF_UNIX, NULL, 0,
		 "/run/bluecache.sock");
	parse_ok("unix:rel.sock", AF_UNIX, NULL, 0, "rel.sock");

	parse_bad("tcp://", "missing host");
	parse_bad("tcp://:80", "missing host");
	parse_bad("tcp://host:99999", "port");
	parse_bad("tcp://host:12x", "port");
	parse_bad("tcp://host:", "port");
	parse_bad("tcp://::1:80", "brackets");
	parse_bad("tcp://[::1", "']'");
	parse_bad("tcp://[::1]x", "':PORT'");
	parse_bad("tcp://[nothex]:1", "IPv6");
	parse_bad("tcp://host/path", "invalid character");
	parse_bad("unix:", "missing socket path");
	parse_bad("udp://host", "expected tcp://HOST[:PORT] or unix:PATH");
	parse_bad("127.0.0.1:18517", "expected");
	memset(longpath, 'p', sizeof(longpath));
	memcpy(longpath, "unix:", 5);
	longpath[sizeof(longpath) - 1] = '\0';
	parse_bad(longpath, "too long");

	bcp_addr_parse("tcp://127.3.4.5", &a, NULL, 0);
	CHECK(bcp_addr_is_local(&a) == 1, "127/8 is local");
	bcp_addr_parse("tcp://[::1]", &a, NULL, 0);
	CHECK(bcp_addr_is_local(&a) == 1, "::1 is local");
	bcp_addr_parse("tcp://10.0.0.1", &a, NULL, 0);
	CHECK(bcp_addr_is_local(&a) == 0, "10.0.0.1 is not local");
	bcp_addr_parse("tcp://128.0.0.1", &a, NULL, 0);
	CHECK(bcp_addr_is_local(&a) == 0, "128.0.0.1 is not local");
	bcp_addr_parse("unix:/x", &a, NULL, 0);
	CHECK(bcp_addr_is_local(&a) == 1, "unix is local");
}

/* Listen, connect, exchange one PING each way. */
static void exchange(const struct bcp_addr *a, int lfd, const char *what)
{
	struct bcp_msg m, d;
	enum bcp_err why;
	int c, s, n;

	c = bcp_addr_connect(a, 2000);
	CHECK(c >= 0, "%s: connect %d", what, c);
	if (c < 0)
		return;
	s = accept(lfd, NULL, NULL);
	REQUIRE(s >= 0, "accept");
	bcp_msg_init(&m, BCP_OP_PING, 42);
	n = bcp_encode(sbuf, sizeof(sbuf), &m);
	CHECK(bcp_frame_send(c, sbuf, (size_t)n, -1) == 0, "%s: send", what);
	CHECK(bcp_frame_recv(s, rbuf, 4096, NULL, 2000, &why) == n &&
	      bcp_decode(rbuf, (size_t)n, &d, &why) == 0 &&
	      d.hdr.req_id == 42, "%s: ping arrives", what);
	close(s);
	close(c);
}

struct acceptor {
	int lfd;
	int delay_ms;
};

static void *accept_late(void *arg)
{
	struct acceptor *ac = arg;
	int fd;

	usleep((useconds_t)ac->delay_ms * 1000);
	fd = accept(ac->lfd, NULL, NULL);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/*
 * A unix listener whose backlog is full: a nonblocking connect says
 * EAGAIN and the socket is not connected.  bcp_addr_connect() must wait
 * for room until its deadline, never hand back an unconnected socket.
 */
static void unix_backlog_full(const struct bcp_addr *a)
{
	struct acceptor ac;
	pthread_t th;
	int lfd, fds[16], n = 0, fd, i;
	char c = 'x';

	lfd = bcp_addr_listen(a, 1);
	REQUIRE(lfd >= 0, "listen unix backlog 1: %d", lfd);
	for (i = 0; i < 16; i++) {
		struct sockaddr_un sun;

		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", a->path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		REQUIRE(fd >= 0, "socket");
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			CHECK(errno == EAGAIN, "filling the backlog: %s",
			      strerror(errno));
			close(fd);
			break;
		}
		fds[n++] = fd;
	}
	CHECK(n > 0 && n < 16, "backlog filled after %d connections", n);

	fd = bcp_addr_connect(a, 300);
	CHECK(fd == -ETIMEDOUT, "full backlog, nobody accepts: %d", fd);
	if (fd >= 0)
		close(fd);

	ac.lfd = lfd;
	ac.delay_ms = 200;
	REQUIRE(pthread_create(&th, NULL, accept_late, &ac) == 0, "thread");
	fd = bcp_addr_connect(a, 5000);
	CHECK(fd >= 0, "full backlog, room made after 200 ms: %d", fd);
	if (fd >= 0) {
		CHECK(send(fd, &c, 1, MSG_NOSIGNAL) == 1,
		      "the socket is connected: %s", strerror(errno));
		close(fd);
	}
	pthread_join(th, NULL);
	for (i = 0; i < n; i++)
		close(fds[i]);
	close(lfd);
	unlink(a->path);
}

static void sockets(void)
{
	char tdir[512], path[600], addr[700], err[256];
	const char *tmp = getenv("TMPDIR");
	struct bcp_addr a;
	struct stat st;
	int lfd, lfd2, port, fd;

	/* tcp on an ephemeral port */
	REQUIRE(bcp_addr_parse("tcp://127.0.0.1:0", &a, err, sizeof(err)) ==
		0, "parse");
	lfd = bcp_addr_listen(&a, 8);
	REQUIRE(lfd >= 0, "listen tcp: %d", lfd);
	port = bcp_addr_bound_port(lfd);
	CHECK(port > 0, "bound port %d", port);
	a.port = (unsigned short)port;
	exchange(&a, lfd, "tcp");
	snprintf(addr, sizeof(addr), "tcp://localhost:%d", port);
	if (bcp_addr_parse(addr, &a, err, sizeof(err)) == 0)
		exchange(&a, lfd, "tcp localhost");
	close(lfd);
	a.port = (unsigned short)port;
	fd = bcp_addr_connect(&a, 1000);
	CHECK(fd == -ECONNREFUSED, "closed port: %d", fd);
	if (fd >= 0)
		close(fd);
	if (bcp_addr_parse("tcp://[::1]:0", &a, err, sizeof(err)) == 0) {
		lfd = bcp_addr_listen(&a, 8);
		if (lfd >= 0) {
			a.port = (unsigned short)bcp_addr_bound_port(lfd);
			exchange(&a, lfd, "tcp6");
			close(lfd);
		} else {
			printf("no IPv6 loopback (%d); tcp6 not tested\n", lfd);
		}
	}

	/* unix: stale sockets are replaced, live ones and files are not */
	snprintf(tdir, sizeof(tdir), "%s/bcp-frame-XXXXXX",
		 tmp ? tmp : "/tmp");
	REQUIRE(mkdtemp(tdir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/s.sock", tdir);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	if (bcp_addr_parse(addr, &a, err, sizeof(err))) {
		printf("temp path too long for a unix socket; skipped\n");
		rmdir(tdir);
		return;
	}
	fd = bcp_addr_connect(&a, 1000);
	CHECK(fd == -ENOENT, "connect to a missing socket: %d", fd);
	lfd = bcp_addr_listen(&a, 8);
	REQUIRE(lfd >= 0, "listen unix %d", lfd);
	exchange(&a, lfd, "unix");
	lfd2 = bcp_addr_listen(&a, 8);
	CHECK(lfd2 == -EADDRINUSE, "live socket kept: %d", lfd2);
	close(lfd);
	lfd = bcp_addr_listen(&a, 8);
	CHECK(lfd >= 0, "stale socket replaced: %d", lfd);
	if (lfd >= 0)
		close(lfd);
	unlink(path);
	unix_backlog_full(&a);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	lfd = bcp_addr_listen(&a, 8);
	CHECK(lfd == -EADDRINUSE, "regular file kept: %d", lfd);
	CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode),
	      "regular file still there");
	unlink(path);
	rmdir(tdir);
}

int main(void)
{
	sizes();
	sendv_parts();
	fd_passing();
	broken_peers();
	reader();
	addresses();
	sockets();
	return check_exit("frame");
}
