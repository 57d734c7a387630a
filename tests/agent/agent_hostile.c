/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_hostile.c - hostile peers against a real agent, with raw frames:
 * a client that never speaks, garbage bytes, a truncated frame, a huge
 * declared length, a request before AUTH, names that try to leave the root
 * ("..", absolute, too long, through a symlink to /etc), a region larger
 * than its memfd, and a client that vanishes mid-batch.  After each one a
 * well-behaved client is still served, and nothing outside the root
 * changed.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "bcp_frame.h"
#include "harness.h"

static struct t_agent a;
static uint8_t buf[BCP_FRAME_MAX];

static void still_serves(const char *after)
{
	struct bcp_msg m, rep;
	uint64_t root;
	int fd, tcp;

	for (tcp = 0; tcp < 2; tcp++) {
		fd = t_raw_connect(&a, tcp);
		if (t_raw_handshake(fd, a.secret, &root, NULL) < 0)
			t_fail("no handshake after %s", after);
		bcp_msg_init(&m, BCP_OP_PING, 9);
		if (t_raw_call(fd, &m, &rep, buf, sizeof(buf)) != 0)
			t_fail("no PING after %s", after);
		bcp_msg_init(&m, BCP_OP_GETATTR, 10);
		m.u.node_req.handle = root;
		if (t_raw_call(fd, &m, &rep, buf, sizeof(buf)) != 0)
			t_fail("no GETATTR after %s", after);
		close(fd);
	}
}

static int session(uint64_t *root)
{
	int fd = t_raw_connect(&a, 0);

	T_EQ(t_raw_handshake(fd, a.secret, root, NULL), 0);
	return fd;
}

static int lookup(int fd, uint64_t parent, const char *name, size_t len,
		  struct bcp_entry *e)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_LOOKUP, 20);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)len;
	m.name = name;
	ret = t_raw_call(fd, &m, &rep, buf, sizeof(buf));
	if (!ret && e)
		*e = rep.u.entry_rep.entry;
	return ret;
}

/* Send a LOOKUP whose name the encoder would refuse, built by hand. */
static int lookup_forged(int fd, uint64_t parent, const char *name,
			 size_t len)
{
	struct bcp_msg m, rep;
	enum bcp_err why;
	uint8_t frame[600];
	int n;

	bcp_msg_init(&m, BCP_OP_LOOKUP, 21);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = 1;
	m.name = "x";
	n = bcp_encode(frame, sizeof(frame), &m);
	T_CHECK(n == BCP_HDR_SIZE + 16 + 1);
	/* payload_len at offset 12, name_len at header + 8 */
	frame[12] = (uint8_t)(16 + len);
	frame[13] = (uint8_t)((16 + len) >> 8);
	frame[BCP_HDR_SIZE + 8] = (uint8_t)len;
	frame[BCP_HDR_SIZE + 9] = (uint8_t)(len >> 8);
	memcpy(frame + BCP_HDR_SIZE + 16, name, len);
	if (bcp_frame_send(fd, frame, BCP_HDR_SIZE + 16 + len, -1) < 0)
		return -EPIPE;
	n = bcp_frame_recv(fd, buf, sizeof(buf), NULL, 5000, &why);
	if (n <= 0)
		return -ECONNRESET;
	T_EQ(bcp_decode(buf, (size_t)n, &rep, &why), 0);
	return rep.hdr.status;
}

static unsigned int count_entries(const char *dir)
{
	unsigned int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int main(void)
{
	char outside[400], path[700], name[300];
	struct bcp_msg m, rep;
	struct bcp_entry e;
	struct stat st0, st1;
	uint64_t root;
	int silent, fd, ret;

	t_agent_init(&a, "agent_hostile");
	a.secret = "s3cret-for-tests";
	snprintf(outside, sizeof(outside), "%s/outside", a.dir);
	T_EQ(mkdir(outside, 0755), 0);
	snprintf(path, sizeof(path), "%s/victim", outside);
	T_EQ(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
	T_EQ(stat(path, &st0), 0);
	snprintf(path, sizeof(path), "%s/evil", a.root);
	T_EQ(symlink(outside, path), 0);
	snprintf(path, sizeof(path), "%s/etc", a.root);
	T_EQ(symlink("/etc", path), 0);
	t_agent_start(&a);

	/* a client that connects and never speaks */
	silent = t_raw_connect(&a, 1);
	still_serves("a silent client");

	/* garbage bytes */
	fd = t_raw_connect(&a, 0);
	memset(buf, 0xa5, 200);
	T_EQ(send(fd, buf, 200, MSG_NOSIGNAL), 200);
	T_CHECK(t_raw_closed(fd, 5000));
	close(fd);
	still_serves("garbage");

	/* a truncated frame, then the client goes */
	fd = session(&root);
	bcp_msg_init(&m, BCP_OP_LOOKUP, 5);
	m.u.named_req.parent = root;
	m.u.named_req.name_len = 4;
	m.name = "abcd";
	ret = bcp_encode(buf, sizeof(buf), &m);
	T_EQ(send(fd, buf, (size_t)ret - 3, MSG_NOSIGNAL), ret - 3);
	close(fd);
	still_serves("a truncated frame");

	/* a huge declared length: refused without reading it */
	fd = session(&root);
	bcp_msg_init(&m, BCP_OP_PING, 6);
	ret = bcp_encode(buf, sizeof(buf), &m);
	buf[12] = 0;
	buf[13] = 0;
	buf[14] = 0;
	buf[15] = 0x40;		/* payload_len = 1 GiB */
	T_EQ(send(fd, buf, (size_t)ret, MSG_NOSIGNAL), ret);
	T_CHECK(t_raw_closed(fd, 5000));
	close(fd);
	still_serves("a huge length");

	/* a request before AUTH, and a wrong secret */
	fd = t_raw_connect(&a, 1);
	bcp_msg_init(&m, BCP_OP_GETATTR, 7);
	m.u.node_req.handle = 2;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), -EACCES);
	T_CHECK(t_raw_closed(fd, 5000));
	close(fd);
	fd = t_raw_connect(&a, 0);
	T_EQ(t_raw_handshake(fd, "not the secret", NULL, NULL), -EACCES);
	T_CHECK(t_raw_closed(fd, 5000));
	close(fd);
	still_serves("a wrong secret");

	/* names that try to leave the root */
	fd = session(&root);
	T_CHECK(lookup_forged(fd, root, "..", 2) < 0);
	T_CHECK(lookup_forged(fd, root, "/etc", 4) < 0);
	T_CHECK(lookup_forged(fd, root, "a/../../x", 9) < 0);
	memset(name, 'n', sizeof(name));
	T_EQ(lookup_forged(fd, root, name, 256), -ENAMETOOLONG);
	T_EQ(lookup(fd, root, "evil", 4, &e), 0);
	T_CHECK(S_ISLNK(e.attr.mode));
	T_EQ(lookup(fd, e.handle, "victim", 6, NULL), -ENOTDIR);
	bcp_msg_init(&m, BCP_OP_OPENDIR, 22);
	m.u.open_req.handle = e.handle;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), -ENOTDIR);
	bcp_msg_init(&m, BCP_OP_OPEN, 22);
	m.u.open_req.handle = e.handle;
	m.u.open_req.flags = O_RDWR | O_TRUNC;
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), -ELOOP);
	bcp_msg_init(&m, BCP_OP_CREATE, 23);
	m.u.create_req.parent = e.handle;
	m.u.create_req.mode = 0644;
	m.u.create_req.flags = O_RDWR;
	m.u.create_req.name_len = 6;
	m.name = "planted";
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), -ENOTDIR);
	T_EQ(lookup(fd, root, "etc", 3, &e), 0);
	T_EQ(lookup(fd, e.handle, "passwd", 6, NULL), -ENOTDIR);
	/* creating over the symlink does not follow it */
	m.u.create_req.parent = root;
	m.u.create_req.name_len = 4;
	m.name = "evil";
	T_CHECK(t_raw_call(fd, &m, &rep, buf, sizeof(buf)) < 0);
	/* the connection survived every refusal */
	bcp_msg_init(&m, BCP_OP_PING, 24);
	T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);

	/* a region larger than its memfd; a region kind not served */
	{
		int mfd = memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		enum bcp_err why;
		int n;

		T_EQ(ftruncate(mfd, 4096), 0);
		bcp_msg_init(&m, BCP_OP_REGISTER_REGION, 25);
		m.hdr.flags = BCP_HF_FD;
		m.u.region_req.region_id = 1;
		m.u.region_req.kind = BCP_REGION_SHM;
		m.u.region_req.length = 1 << 20;
		n = bcp_encode(buf, sizeof(buf), &m);
		T_EQ(bcp_frame_send(fd, buf, (size_t)n, mfd), 0);
		n = bcp_frame_recv(fd, buf, sizeof(buf), NULL, 5000, &why);
		T_CHECK(n > 0);
		T_EQ(bcp_decode(buf, (size_t)n, &rep, &why), 0);
		T_CHECK(rep.hdr.status < 0);
		close(mfd);
		bcp_msg_init(&m, BCP_OP_REGISTER_REGION, 26);
		m.u.region_req.region_id = 2;
		m.u.region_req.kind = BCP_REGION_RDMA;
		m.u.region_req.length = 4096;
		T_CHECK(t_raw_call(fd, &m, &rep, buf, sizeof(buf)) < 0);
	}
	close(fd);
	still_serves("escape attempts");

	/* a client that vanishes mid-batch */
	{
		static struct bcp_seg segs[64];
		size_t rlen = 8u << 20;
		int mfd = memfd_create("r", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		int i, n;
		uint64_t fh;

		T_EQ(ftruncate(mfd, (off_t)rlen), 0);
		fd = session(&root);
		T_EQ(t_raw_register_shm(fd, 30, 3, mfd, rlen), 0);
		close(mfd);
		bcp_msg_init(&m, BCP_OP_CREATE, 31);
		m.u.create_req.parent = root;
		m.u.create_req.mode = 0644;
		m.u.create_req.flags = O_RDWR;
		m.u.create_req.name_len = 4;
		m.name = "dump";
		T_EQ(t_raw_call(fd, &m, &rep, buf, sizeof(buf)), 0);
		fh = rep.u.create_rep.fh;
		for (i = 0; i < 64; i++)
			segs[i] = (struct bcp_seg){ fh, (uint64_t)i << 17,
						    1u << 17, 3,
						    (uint64_t)i << 17 };
		for (i = 0; i < 8; i++) {
			bcp_msg_init(&m, BCP_OP_BATCH_PUSH,
				     (uint64_t)(40 + i));
			m.u.batch_req.count = 64;
			m.segs = segs;
			n = bcp_encode(buf, sizeof(buf), &m);
			T_EQ(bcp_frame_send(fd, buf, (size_t)n, -1), 0);
		}
		close(fd);
	}
	still_serves("a client gone mid-batch");

	/* the silent client is dropped in time, the others served */
	close(silent);
	still_serves("everything");
	T_EQ(t_agent_stop(&a), 0);

	/* nothing outside the root was touched */
	T_EQ(count_entries(outside), 3);
	snprintf(path, sizeof(path), "%s/victim", outside);
	T_EQ(stat(path, &st1), 0);
	T_EQ(st1.st_size, 0);
	T_EQ(st1.st_mtime, st0.st_mtime);
	T_CHECK(t_log_has(&a, "bad frame"));
	t_agent_cleanup(&a);
	return 0;
}
