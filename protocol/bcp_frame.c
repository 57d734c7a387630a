/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_frame.c - whole BCP frames over stream sockets, and the addresses
 * both programs accept ("tcp://HOST[:PORT]", "unix:PATH").
 *
 * Sending retries short writes and EINTR and never raises SIGPIPE.
 * Receiving reads the fixed header first and validates it with
 * bcp_hdr_check() before a single payload byte is read, so a peer cannot
 * make the reader buffer more than its limit.  A descriptor passed with
 * SCM_RIGHTS arrives with the first byte of its frame.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bcp_frame.h"

#define BCP_IOV_MAX	64
#define BCP_FDS_MAX	8	/* descriptors accepted (and closed) per read */

/* ---- time ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Remaining milliseconds to deadline (-1 = forever), at least 0. */
static int remaining_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	if (left < 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

/* Wait for events on sock until deadline: 0, -ETIMEDOUT or -errno. */
static int wait_for(int sock, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = sock, .events = events };
	int ret;

	for (;;) {
		ret = poll(&pfd, 1, remaining_ms(deadline));
		if (ret > 0)
			return 0;
		if (ret == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* ---- sending ---- */

int bcp_frame_sendv(int sock, const struct iovec *iov, int iovcnt,
		    int pass_fd)
{
	struct iovec v[BCP_IOV_MAX];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct msghdr mh;
	struct cmsghdr *c;
	int first = 0, n = 0, i, ret;
	bool fd_sent = pass_fd < 0;
	ssize_t sent;

	if (iovcnt < 0 || iovcnt > BCP_IOV_MAX)
		return -EINVAL;
	for (i = 0; i < iovcnt; i++)
		if (iov[i].iov_len)
			v[n++] = iov[i];
	if (n == 0)
		return pass_fd < 0 ? 0 : -EINVAL;

	while (first < n) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &v[first];
		mh.msg_iovlen = (size_t)(n - first);
		if (!fd_sent) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.buf;
			mh.msg_controllen = sizeof(cm.buf);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
		}
		sent = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (sent < 0) {
			ret = -errno;
			if (ret == -EINTR)
				continue;
			if (ret == -EAGAIN || ret == -EWOULDBLOCK) {
				ret = wait_for(sock, POLLOUT, -1);
				if (ret)
					return ret;
				continue;
			}
			return ret;
		}
		fd_sent = true;
		while (sent > 0 && first < n) {
			if ((size_t)sent >= v[first].iov_len) {
				sent -= (ssize_t)v[first].iov_len;
				first++;
			} else {
				v[first].iov_base =
					(char *)v[first].iov_base + sent;
				v[first].iov_len -= (size_t)sent;
				sent = 0;
			}
		}
	}
	return 0;
}

int bcp_frame_send(int sock, const void *buf, size_t len, int pass_fd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return bcp_frame_sendv(sock, &iov, 1, pass_fd);
}

/* ---- receiving ---- */

/* Keep the first descriptor in *fd (if it is still -1), close the rest. */
static void take_fds(struct msghdr *mh, int *fd)
{
	struct cmsghdr *c;
	size_t i, nfds;
	int got;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfds; i++) {
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int),
			       sizeof(int));
			if (*fd < 0)
				*fd = got;
			else
				close(got);
		}
	}
}

/*
 * Read exactly len bytes.  Returns len, 0 when the peer closed before the
 * first byte and at_start, or -errno (-ECONNRESET for a close mid-way).
 */
static ssize_t read_full(int sock, uint8_t *buf, size_t len, bool at_start,
			 int *fd, int64_t deadline)
{
	union {
		char buf[CMSG_SPACE(BCP_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov;
	struct msghdr mh;
	size_t got = 0;
	ssize_t n;
	int ret;

	while (got < len) {
		ret = wait_for(sock, POLLIN, deadline);
		if (ret)
			return ret;
		iov.iov_base = buf + got;
		iov.iov_len = len - got;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			ret = -errno;
			if (ret == -EINTR || ret == -EAGAIN ||
			    ret == -EWOULDBLOCK)
				continue;
			return ret;
		}
		if (mh.msg_controllen)
			take_fds(&mh, fd);
		if (n == 0)
			return (at_start && got == 0) ? 0 : -ECONNRESET;
		got += (size_t)n;
	}
	return (ssize_t)len;
}

int bcp_frame_recv(int sock, void *buf, size_t cap, int *fd_out,
		   int timeout_ms, enum bcp_err *why)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	struct bcp_hdr h;
	enum bcp_err dummy;
	int fd = -1;
	ssize_t n;
	int ret;

	if (!why)
		why = &dummy;
	*why = BCP_E_OK;
	if (fd_out)
		*fd_out = -1;
	if (cap < BCP_HDR_SIZE || cap > INT_MAX)
		return -EINVAL;
	n = read_full(sock, buf, BCP_HDR_SIZE, true, &fd, deadline);
	if (n <= 0) {
		ret = (int)n;
		goto out_close_fd;
	}
	ret = bcp_hdr_check(buf, cap, &h, why);
	if (ret)
		goto out_close_fd;
	if (h.payload_len) {
		n = read_full(sock, (uint8_t *)buf + BCP_HDR_SIZE,
			      h.payload_len, false, &fd, deadline);
		if (n < 0) {
			ret = (int)n;
			goto out_close_fd;
		}
	}
	/* a descriptor nobody asked for, or on a frame that has none */
	if (fd >= 0 && (!fd_out || !(h.flags & BCP_HF_FD))) {
		close(fd);
		fd = -1;
	}
	if (fd_out)
		*fd_out = fd;
	return (int)(BCP_HDR_SIZE + h.payload_len);

out_close_fd:
	if (fd >= 0)
		close(fd);
	return ret;
}

/* ---- buffered reading ---- */

int bcp_frame_reader_init(struct bcp_frame_reader *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	if (max < BCP_HDR_SIZE || max > INT_MAX / 2)
		return -EINVAL;
	r->buf = malloc(2 * max);
	if (!r->buf)
		return -ENOMEM;
	r->max = max;
	return 0;
}

void bcp_frame_reader_fini(struct bcp_frame_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

int bcp_frame_read(struct bcp_frame_reader *r, int sock,
		   const uint8_t **frame, enum bcp_err *why)
{
	size_t need = BCP_HDR_SIZE;
	struct bcp_hdr h;
	ssize_t n;
	int ret;

	*why = BCP_E_OK;
	for (;;) {
		if (r->end - r->start >= BCP_HDR_SIZE) {
			ret = bcp_hdr_check(r->buf + r->start, r->max, &h,
					    why);
			if (ret)
				return ret;
			need = BCP_HDR_SIZE + h.payload_len;
			if (r->end - r->start >= need) {
				*frame = r->buf + r->start;
				r->start += need;
				return (int)need;
			}
		}
		if (r->start == r->end) {
			r->start = r->end = 0;
		} else if (r->start + need > 2 * r->max) {
			/* a partial frame near the end: move it to the front */
			memmove(r->buf, r->buf + r->start, r->end - r->start);
			r->end -= r->start;
			r->start = 0;
		}
		/*
		 * Never sleep in recv(): a stream socket's readers and writers
		 * share one wait queue, and the peer's every read of what this
		 * side sent wakes a sleeping recv() (write space) for nothing.
		 * poll() for POLLIN sleeps only until something is readable.
		 */
		n = recv(sock, r->buf + r->end, 2 * r->max - r->end,
			 MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ret = wait_for(sock, POLLIN, -1);
				if (ret)
					return ret;
				continue;
			}
			return -errno;
		}
		if (n == 0)
			return r->start == r->end ? 0 : -ECONNRESET;
		r->end += (size_t)n;
	}
}

/* ---- addresses ---- */

static int addr_err(char *err, size_t errlen, const char *fmt, const char *s)
{
	if (err && errlen)
		snprintf(err, errlen, fmt, s);
	return -EINVAL;
}

static int parse_port(const char *s, unsigned short *port)
{
	unsigned long v = 0;
	const char *p;

	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*port = (unsigned short)v;
	return 0;
}

static int parse_tcp(const char *orig, const char *s, struct bcp_addr *a,
		     char *err, size_t errlen)
{
	const char *end, *port = NULL;
	bool scope = false;
	size_t hlen, i;
	char c;

	a->family = AF_INET;
	if (*s == '[') {
		end = strchr(s, ']');
		if (!end)
			return addr_err(err, errlen,
					"%s: missing ']' after an IPv6 address",
					orig);
		s++;
		hlen = (size_t)(end - s);
		a->family = AF_INET6;
		if (end[1] == ':')
			port = end + 2;
		else if (end[1])
			return addr_err(err, errlen,
					"%s: expected ':PORT' after ']'", orig);
	} else {
		end = strchr(s, ':');
		hlen = end ? (size_t)(end - s) : strlen(s);
		if (end) {
			port = end + 1;
			if (strchr(port, ':'))
				return addr_err(err, errlen,
						"%s: an IPv6 address needs brackets: tcp://[ADDR]:PORT",
						orig);
		}
	}
	if (hlen == 0)
		return addr_err(err, errlen, "%s: missing host", orig);
	if (hlen >= sizeof(a->host))
		return addr_err(err, errlen, "%s: host name too long", orig);
	memcpy(a->host, s, hlen);
	a->host[hlen] = '\0';
	for (i = 0; i < hlen; i++) {
		c = a->host[i];
		if (c == '/' || c == '@' || c == '?' || c == '#' ||
		    c <= ' ' || c == 0x7f)
			return addr_err(err, errlen,
					"%s: invalid character in host", orig);
		if (c == '%')
			scope = true;
		if (a->family == AF_INET6 && !scope &&
		    !isxdigit((unsigned char)c) && c != ':' && c != '.')
			return addr_err(err, errlen,
					"%s: invalid IPv6 address", orig);
	}
	a->port = BCP_DEFAULT_PORT;
	if (port && parse_port(port, &a->port))
		return addr_err(err, errlen,
				"%s: port must be a number from 0 to 65535",
				orig);
	return 0;
}

int bcp_addr_parse(const char *s, struct bcp_addr *out, char *err,
		   size_t errlen)
{
	struct bcp_addr a;
	size_t len;
	int ret;

	memset(&a, 0, sizeof(a));
	if (!s)
		return addr_err(err, errlen, "%s", "no address given");
	if (!strncmp(s, "tcp://", 6)) {
		ret = parse_tcp(s, s + 6, &a, err, errlen);
		if (ret)
			return ret;
	} else if (!strncmp(s, "unix:", 5)) {
		len = strlen(s + 5);
		if (len == 0)
			return addr_err(err, errlen,
					"%s: missing socket path after 'unix:'",
					s);
		if (len >= sizeof(a.path))
			return addr_err(err, errlen,
					"%s: socket path too long (at most 107 bytes)",
					s);
		a.family = AF_UNIX;
		memcpy(a.path, s + 5, len + 1);
	} else {
		return addr_err(err, errlen,
				"%s: expected tcp://HOST[:PORT] or unix:PATH",
				s);
	}
	*out = a;
	return 0;
}

static int unix_sockaddr(const struct bcp_addr *a, struct sockaddr_un *sun)
{
	size_t len = strnlen(a->path, sizeof(a->path));

	if (len == 0 || len >= sizeof(sun->sun_path))
		return -EINVAL;
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, a->path, len);
	return 0;
}

static int set_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Non-blocking connect of a fresh socket, then back to blocking. */
static int connect_one(int family, const struct sockaddr *sa, socklen_t len,
		       int64_t deadline)
{
	socklen_t elen = sizeof(int);
	int fd, ret, soerr = 0;

	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) < 0) {
		ret = -errno;
		if (ret != -EINPROGRESS)
			goto out_close;
		ret = wait_for(fd, POLLOUT, deadline);
		if (ret)
			goto out_close;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &elen) < 0) {
			ret = -errno;
			goto out_close;
		}
		if (soerr) {
			ret = -soerr;
			goto out_close;
		}
	}
	ret = set_blocking(fd);
	if (ret)
		goto out_close;
	return fd;

out_close:
	close(fd);
	return ret;
}

/*
 * A unix listener with a full backlog answers a nonblocking connect with
 * EAGAIN and leaves the socket unconnected (there is no EINPROGRESS to
 * wait on).  A blocking connect waits for room instead, for as long as
 * SO_SNDTIMEO says: set to what is left of the deadline, and cleared
 * once connected.
 */
static int connect_unix(const struct sockaddr_un *sun, int64_t deadline)
{
	struct timeval tv = { 0, 0 };
	int64_t left;
	int fd, ret;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (deadline >= 0) {
			left = deadline - now_ms();
			if (left <= 0) {
				ret = -ETIMEDOUT;
				goto out_close;
			}
			tv.tv_sec = (time_t)(left / 1000);
			tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
			if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
				       sizeof(tv)) < 0) {
				ret = -errno;
				goto out_close;
			}
		}
		if (connect(fd, (const struct sockaddr *)sun,
			    sizeof(*sun)) == 0)
			break;
		ret = -errno;
		/* EAGAIN: the wait ran out; the loop says so */
		if (ret != -EINTR && ret != -EAGAIN)
			goto out_close;
		if (ret == -EAGAIN && deadline < 0) {
			ret = -ETIMEDOUT;
			goto out_close;
		}
	}
	tv.tv_sec = 0;
	tv.tv_usec = 0;
	if (deadline >= 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		ret = -errno;
		goto out_close;
	}
	return fd;

out_close:
	close(fd);
	return ret;
}

static int gai_errno(int rc)
{
	switch (rc) {
	case EAI_SYSTEM:
		return errno ? -errno : -EIO;
	case EAI_NONAME:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
	case EAI_AGAIN:
	case EAI_FAIL:
		return -EHOSTUNREACH;
	case EAI_MEMORY:
		return -ENOMEM;
	default:
		return -EINVAL;
	}
}

int bcp_addr_connect(const struct bcp_addr *a, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	struct addrinfo hints, *res, *ai;
	struct sockaddr_un sun;
	char port[8];
	int fd, rc, ret = -EHOSTUNREACH, one = 1;

	if (a->family == AF_UNIX) {
		ret = unix_sockaddr(a, &sun);
		if (ret)
			return ret;
		return connect_unix(&sun, deadline);
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = a->family == AF_INET6 ? AF_INET6 : AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%u", a->port);
	rc = getaddrinfo(a->host, port, &hints, &res);
	if (rc)
		return gai_errno(rc);
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai->ai_family, ai->ai_addr, ai->ai_addrlen,
				 deadline);
		if (fd >= 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
			freeaddrinfo(res);
			return fd;
		}
		ret = fd;
		if (ret == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return ret;
}

/*
 * A unix socket path that exists: remove it only when it is a socket that
 * nobody listens on any more.
 */
static int unix_stale_remove(const struct sockaddr_un *sun)
{
	struct stat st;
	int fd;

	if (lstat(sun->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EADDRINUSE;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0) {
		close(fd);
		return -EADDRINUSE;
	}
	close(fd);
	if (unlink(sun->sun_path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int bcp_addr_listen(const struct bcp_addr *a, int backlog)
{
	struct addrinfo hints, *res, *ai;
	struct sockaddr_un sun;
	char port[8];
	int fd, rc, ret, one = 1;

	if (a->family == AF_UNIX) {
		ret = unix_sockaddr(a, &sun);
		if (ret)
			return ret;
		ret = unix_stale_remove(&sun);
		if (ret)
			return ret;
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		    listen(fd, backlog) < 0) {
			ret = -errno;
			close(fd);
			return ret;
		}
		return fd;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = a->family == AF_INET6 ? AF_INET6 : AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	snprintf(port, sizeof(port), "%u", a->port);
	rc = getaddrinfo(a->host, port, &hints, &res);
	if (rc)
		return gai_errno(rc);
	ret = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
		    listen(fd, backlog) < 0) {
			ret = -errno;
			close(fd);
			continue;
		}
		freeaddrinfo(res);
		return fd;
	}
	freeaddrinfo(res);
	return ret;
}

int bcp_addr_bound_port(int sock)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(sock, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -EAFNOSUPPORT;
}

int bcp_addr_is_local(const struct bcp_addr *a)
{
	struct in6_addr a6;
	struct in_addr a4;
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					      0xff, 0xff };

	if (a->family == AF_UNIX)
		return 1;
	if (!strcmp(a->host, "localhost"))
		return 1;
	if (inet_pton(AF_INET, a->host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, a->host, &a6) == 1) {
		if (!memcmp(&a6, &in6addr_loopback, sizeof(a6)))
			return 1;
		return !memcmp(a6.s6_addr, v4mapped, sizeof(v4mapped)) &&
		       a6.s6_addr[12] == 127;
	}
	return 0;
}

void bcp_deadline_ms(struct timespec *ts, unsigned int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int bcp_cpu_idle(int loadavg_fd, unsigned int ncpus)
{
	char buf[128], *p = buf;
	unsigned long running;
	ssize_t n;
	int i;

	n = pread(loadavg_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (i = 0; i < 3 && p; i++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return 0;
	running = strtoul(p, NULL, 10);
	return running && running < ncpus;
}
