/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_meta.c - every metadata operation of a real agent, through the
 * client library over the unix socket, with its exact errno cases, checked
 * against the data root on disk; then a wrong secret gets -EACCES.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "harness.h"

static struct bcp_client *c;
static uint8_t rbuf[BCP_FRAME_MAX];

static int call(struct bcp_msg *m, struct bcp_msg *rep)
{
	return bcp_client_call(c, m, rep, rbuf, sizeof(rbuf));
}

static int named(uint16_t op, uint64_t parent, const char *name)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, op, 0);
	m.u.named_req.parent = parent;
	m.u.named_req.name_len = (uint16_t)strlen(name);
	m.name = name;
	return call(&m, &rep);
}

/*
 * The flags above st_mode in the entry of parent/name through cl
 * (BCP_MODE_NO_XATTRS with BCP_FEAT_XATTR_HINT asked for).
 */
static uint32_t mode_flags(struct bcp_client *cl, uint64_t parent,
			   const char *name)
{
	struct bcp_entry e;

	T_EQ(t_lookup(cl, parent, name, &e), 0);
	return e.attr.mode & ~(uint32_t)BCP_MODE_BITS;
}

static int getattr(uint64_t h, struct bcp_attr *a)
{
	struct bcp_msg m, rep;
	int ret;

	bcp_msg_init(&m, BCP_OP_GETATTR, 0);
	m.u.node_req.handle = h;
	ret = call(&m, &rep);
	if (!ret && a)
		*a = rep.u.attr_rep.attr;
	return ret;
}

static int do_rename(uint64_t p, const char *a, uint64_t np, const char *b,
		     uint32_t flags)
{
	struct bcp_msg m, rep;

	bcp_msg_init(&m, BCP_OP_RENAME, 0);
	m.u.rename_req.parent = p;
	m.u.rename_req.newparent = np;
	m.u.rename_req.flags = flags;
	m.u.rename_req.name_len = (uint16_t)strlen(a);
	m.u.rename_req.newname_len = (uint16_t)strlen(b);
	m.name = a;
	m.name2 = b;
	return call(&m, &rep);
}

static void check_file(const struct t_agent *a, const char *rel,
		       const char *want)
{
	char path[600], buf[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", a->root, rel);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		t_fail("%s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf));
	close(fd);
	T_EQ(n, strlen(want));
	T_CHECK(!memcmp(buf, want, (size_t)n));
}

/* a's times and identity equal st's (the directory on disk) */
static int same_dir(const struct bcp_attr *a, const struct stat *st)
{
	return a->ino == st->st_ino && a->nlink == st->st_nlink &&
	       a->mtime == st->st_mtim.tv_sec &&
	       a->mtime_nsec == (uint32_t)st->st_mtim.tv_nsec &&
	       a->ctime == st->st_ctim.tv_sec &&
	       a->ctime_nsec == (uint32_t)st->st_ctim.tv_nsec &&
	       S_ISDIR(a->mode);
}

/* OPEN of handle with peek: 1 and the bytes when they came, else 0. */
static int open_peek(uint64_t handle, uint32_t flags, uint32_t peek,
		     struct bcp_msg *rep, uint64_t *fh)
{
	struct bcp_msg m;
	int ret;

	bcp_msg_init(&m, BCP_OP_OPEN, 0);
	m.u.open_req.handle = handle;
	m.u.open_req.flags = flags;
	m.u.open_req.peek = peek;
	ret = call(&m, rep);
	if (ret)
		return ret;
	*fh = rep->u.open_rep.fh;
	return !!(rep->u.open_rep.open_flags & BCP_OPEN_DATA);
}

/*
 * Version 3: a request that changes a directory answers with its
 * attributes right after the change; OPEN brings a small file's bytes
 * when asked, and the attributes of what it opened.
 */
static void v3_cases(const struct t_agent *a, uint64_t root)
{
	static char big[BCP_OPEN_PEEK_MAX + 1];
	struct bcp_entry d, sub, f;
	struct bcp_msg m, rep;
	char path[600];
	struct stat st;
	uint64_t fh;
	int fd;

	T_EQ(t_mkdir(c, root, "v3", &d), 0);
	snprintf(path, sizeof(path), "%s/v3", a->root);

	bcp_msg_init(&m, BCP_OP_CREATE, 0);
	m.u.create_req.parent = d.handle;
	m.u.create_req.mode = 0644;
	m.u.create_req.flags = O_RDWR;
	m.u.create_req.name_len = 1;
	m.name = "f";
	T_EQ(call(&m, &rep), 0);
	f = rep.u.create_rep.entry;
	fh = rep.u.create_rep.fh;
	T_EQ(stat(path, &st), 0);
	T_CHECK(same_dir(&rep.u.create_rep.dir, &st));
	T_EQ(t_io(c, BCP_OP_BATCH_PUSH, fh, 0, "small", 5), 5);
	T_EQ(t_release(c, f.handle, fh), 0);

	bcp_msg_init(&m, BCP_OP_MKDIR, 0);
	m.u.mkdir_req.parent = d.handle;
	m.u.mkdir_req.mode = 0755;
	m.u.mkdir_req.name_len = 3;
	m.name = "sub";
	T_EQ(call(&m, &rep), 0);
	sub = rep.u.entry_rep.entry;
	T_EQ(stat(path, &st), 0);
	T_CHECK(same_dir(&rep.u.entry_rep.dir, &st));
	T_EQ(rep.u.entry_rep.dir.nlink, 3);	/* ., .. of sub */

	bcp_msg_init(&m, BCP_OP_LOOKUP, 0);
	m.u.named_req.parent = d.handle;
	m.u.named_req.name_len = 1;
	m.name = "f";
	T_EQ(call(&m, &rep), 0);
	T_EQ(rep.u.entry_rep.dir.ino, 0);	/* LOOKUP changes nothing */

	bcp_msg_init(&m, BCP_OP_RENAME, 0);
	m.u.rename_req.parent = d.handle;
	m.u.rename_req.newparent = sub.handle;
	m.u.rename_req.name_len = 1;
	m.u.rename_req.newname_len = 1;
	m.name = "f";
	m.name2 = "g";
	T_EQ(call(&m, &rep), 0);
	T_EQ(stat(path, &st), 0);
	T_CHECK(same_dir(&rep.u.rename_rep.dir, &st));
	snprintf(path, sizeof(path), "%s/v3/sub", a->root);
	T_EQ(stat(path, &st), 0);
	T_CHECK(same_dir(&rep.u.rename_rep.newdir, &st));

	/* the whole of a small file, and its attributes */
	T_EQ(open_peek(f.handle, O_RDONLY, BCP_OPEN_PEEK_MAX, &rep, &fh), 1);
	T_EQ(rep.u.open_rep.data_len, 5);
	T_EQ(rep.data_len, 5);
	T_CHECK(rep.data && !memcmp(rep.data, "small", 5));
	T_EQ(rep.u.open_rep.attr.ino, f.attr.ino);
	T_EQ(rep.u.open_rep.attr.size, 5);
	T_EQ(t_release(c, f.handle, fh), 0);
	/* not asked, too small a peek, not readable: attributes only */
	T_EQ(open_peek(f.handle, O_RDONLY, 0, &rep, &fh), 0);
	T_EQ(rep.u.open_rep.attr.size, 5);
	T_EQ(rep.u.open_rep.data_len, 0);
	T_EQ(t_release(c, f.handle, fh), 0);
	T_EQ(open_peek(f.handle, O_RDONLY, 4, &rep, &fh), 0);
	T_EQ(t_release(c, f.handle, fh), 0);
	T_EQ(open_peek(f.handle, O_WRONLY, BCP_OPEN_PEEK_MAX, &rep, &fh), 0);
	T_EQ(t_release(c, f.handle, fh), 0);
	T_EQ(open_peek(sub.handle, O_RDONLY, BCP_OPEN_PEEK_MAX, &rep, &fh),
	     -EISDIR);

	/* at the limit the bytes come; one more and they do not */
	snprintf(path, sizeof(path), "%s/v3/sub/big", a->root);
	memset(big, 'b', sizeof(big));
	big[BCP_OPEN_PEEK_MAX - 1] = 'e';
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	T_CHECK(fd >= 0);
	T_EQ(write(fd, big, BCP_OPEN_PEEK_MAX), BCP_OPEN_PEEK_MAX);
	T_EQ(t_lookup(c, sub.handle, "big", &f), 0);
	T_EQ(open_peek(f.handle, O_RDONLY, BCP_OPEN_PEEK_MAX, &rep, &fh), 1);
	T_EQ(rep.data_len, BCP_OPEN_PEEK_MAX);
	T_CHECK(rep.data && ((const char *)rep.data)[BCP_OPEN_PEEK_MAX - 1] ==
		'e');
	T_EQ(t_release(c, f.handle, fh), 0);
	T_EQ(write(fd, "x", 1), 1);
	T_EQ(open_peek(f.handle, O_RDONLY, BCP_OPEN_PEEK_MAX, &rep, &fh), 0);
	T_EQ(rep.u.open_rep.attr.size, BCP_OPEN_PEEK_MAX + 1);
	T_EQ(t_release(c, f.handle, fh), 0);
	close(fd);
	/* an empty file: its (no) bytes come */
	T_EQ(ftruncate(fd = open(path, O_WRONLY), 0), 0);
	close(fd);
	T_EQ(open_peek(f.handle, O_RDONLY, BCP_OPEN_PEEK_MAX, &rep, &fh), 1);
	T_EQ(rep.data_len, 0);
	T_EQ(t_release(c, f.handle, fh), 0);

	/* UNLINK and RMDIR: the parent after the change */
	bcp_msg_init(&m, BCP_OP_UNLINK, 0);
	m.u.named_req.parent = sub.handle;
	m.u.named_req.name_len = 3;
	m.name = "big";
	T_EQ(call(&m, &rep), 0);
	snprintf(path, sizeof(path), "%s/v3/sub", a->root);
	T_EQ(stat(path, &st), 0);
	T_CHECK(same_dir(&rep.u.dir_rep.dir, &st));
	m.name = "g";
	m.u.named_req.name_len = 1;
	T_EQ(call(&m, &rep), 0);
	m.hdr.opcode = BCP_OP_RMDIR;
	m.u.named_req.parent = d.handle;
	m.u.named_req.name_len = 3;
	m.name = "sub";
	T_EQ(call(&m, &rep), 0);
	snprintf(path, sizeof(path), "%s/v3", a->root);
	T_EQ(stat(path, &st), 0);
	T_CHECK(same_dir(&rep.u.dir_rep.dir, &st));
	T_EQ(rep.u.dir_rep.dir.nlink, 2);
	/* a failed change says nothing */
	T_EQ(call(&m, &rep), -ENOENT);
}

int main(void)
{
	struct bcp_entry d, f, f2, e, ln, sl;
	struct bcp_client *ch;
	uint64_t dh;
	struct bcp_msg m, rep;
	struct bcp_attr at;
	struct t_agent a;
	char path[600], buf[64];
	uint64_t root, fh, fh2, dfh;
	struct stat st;
	int ret, i, seen_dot = 0, seen_f = 0;

	t_agent_init(&a, "agent_meta");
	t_agent_start(&a);
	c = t_client(&a, 0, BCP_XFER_SHM, 1 << 20);
	root = bcp_client_root(c);
	T_CHECK(root > 1);
	ch = t_client_features(&a, 0, BCP_XFER_SHM, 1 << 20,
			       BCP_FEAT_XATTR_HINT);
	T_CHECK(bcp_client_hello(ch)->features & BCP_FEAT_XATTR_HINT);

	/* LOOKUP / CREATE / MKDIR and their errnos */
	T_EQ(t_lookup(c, root, "missing", NULL), -ENOENT);
	T_EQ(t_mkdir(c, root, "d", &d), 0);
	T_EQ(t_mkdir(c, root, "d", NULL), -EEXIST);
	T_CHECK(S_ISDIR(d.attr.mode) && d.handle > 1);
	T_EQ(t_create(c, d.handle, "f", 0640, O_RDWR, &f, &fh), 0);
	T_EQ(t_create(c, d.handle, "f", 0640, O_RDWR | O_EXCL, NULL, NULL),
	     -EEXIST);
	{
		/* the reply says whether the agent made the file */
		static uint8_t rb[BCP_FRAME_MAX];
		int k;

		for (k = 0; k < 2; k++) {
			bcp_msg_init(&m, BCP_OP_CREATE, 0);
			m.u.create_req.parent = d.handle;
			m.u.create_req.mode = 0600;
			m.u.create_req.flags = O_RDWR;
			m.u.create_req.uid = getuid();
			m.u.create_req.gid = getgid();
			m.u.create_req.name_len = 7;
			m.name = "created";
			T_EQ(bcp_client_call(c, &m, &rep, rb, sizeof(rb)), 0);
			T_EQ(rep.u.create_rep.open_flags & BCP_OPEN_CREATED,
			     k ? 0u : BCP_OPEN_CREATED);
			t_release(c, rep.u.create_rep.entry.handle,
				  rep.u.create_rep.fh);
		}
		T_EQ(named(BCP_OP_UNLINK, d.handle, "created"), 0);
	}
	T_EQ(f.attr.mode & 07777, 0640);
	T_EQ(t_lookup(c, d.handle, "f", &e), 0);
	T_EQ(e.handle, f.handle);	/* same inode, same handle */
	snprintf(path, sizeof(path), "%s/d/f", a.root);
	T_EQ(stat(path, &st), 0);
	T_EQ(st.st_ino, f.attr.ino);
	T_EQ(t_lookup(c, f.handle, "x", NULL), -ENOTDIR);
	T_EQ(t_create(c, f.handle, "x", 0600, O_RDWR, NULL, NULL), -ENOTDIR);

	/* data through the pool, visible on disk */
	T_EQ(t_io(c, BCP_OP_BATCH_PUSH, fh, 0, "hello world", 11), 11);
	check_file(&a, "d/f", "hello world");
	memset(buf, 0, sizeof(buf));
	T_EQ(t_io(c, BCP_OP_BATCH_PULL, fh, 6, buf, 20), 5);
	T_CHECK(!memcmp(buf, "world", 5));
	T_EQ(t_io(c, BCP_OP_BATCH_PULL, fh, 100, buf, 20), 0);

	/* SETATTR: mode, size, times (explicit and now) */
	bcp_msg_init(&m, BCP_OP_SETATTR, 0);
	m.u.setattr_req.handle = f.handle;
	m.u.setattr_req.valid = BCP_SETATTR_MODE | BCP_SETATTR_SIZE |
				BCP_SETATTR_ATIME | BCP_SETATTR_MTIME_NOW;
	m.u.setattr_req.mode = 0604;
	m.u.setattr_req.size = 5;
	m.u.setattr_req.atime = 1000000;
	m.u.setattr_req.atime_nsec = 7;
	T_EQ(call(&m, &rep), 0);
	T_EQ(rep.u.attr_rep.attr.mode & 07777, 0604);
	T_EQ(rep.u.attr_rep.attr.size, 5);
	T_EQ(rep.u.attr_rep.attr.atime, 1000000);
	T_EQ(rep.u.attr_rep.attr.atime_nsec, 7);
	T_CHECK(rep.u.attr_rep.attr.mtime > 1600000000);
	check_file(&a, "d/f", "hello");
	m.u.setattr_req.handle = d.handle;
	m.u.setattr_req.valid = BCP_SETATTR_SIZE;
	T_EQ(call(&m, &rep), -EISDIR);

	/* xattrs */
	bcp_msg_init(&m, BCP_OP_SETXATTR, 0);
	m.u.setxattr_req.handle = f.handle;
	m.u.setxattr_req.name_len = 8;
	m.u.setxattr_req.value_len = 3;
	m.name = "user.abc";
	m.data = "xyz";
	m.data_len = 3;
	ret = call(&m, &rep);
	if (ret == -EOPNOTSUPP) {
		fprintf(stderr, "note: no user xattrs on %s\n", a.root);
	} else {
		T_EQ(ret, 0);
		T_EQ(getxattr(path, "user.abc", buf, sizeof(buf)), 3);
		/* entries say "no xattrs" only to whom asked, and only then */
		T_EQ(t_lookup(ch, bcp_client_root(ch), "d", &e), 0);
		dh = e.handle;
		T_EQ(mode_flags(ch, dh, "f"), 0);
		T_EQ(mode_flags(c, d.handle, "f"), 0);
		m.u.setxattr_req.flags = XATTR_CREATE;
		T_EQ(call(&m, &rep), -EEXIST);
		bcp_msg_init(&m, BCP_OP_GETXATTR, 0);
		m.u.getxattr_req.handle = f.handle;
		m.u.getxattr_req.name_len = 8;
		m.name = "user.abc";
		T_EQ(call(&m, &rep), 0);
		T_EQ(rep.u.xattr_rep.size, 3);
		m.u.getxattr_req.size = 64;
		T_EQ(call(&m, &rep), 0);
		T_EQ(rep.data_len, 3);
		T_CHECK(!memcmp(rep.data, "xyz", 3));
		m.u.getxattr_req.size = 1;
		T_EQ(call(&m, &rep), -ERANGE);
		bcp_msg_init(&m, BCP_OP_LISTXATTR, 0);
		m.u.listxattr_req.handle = f.handle;
		m.u.listxattr_req.size = 256;
		T_EQ(call(&m, &rep), 0);
		T_CHECK(rep.data_len >= 9 &&
			memmem(rep.data, rep.data_len, "user.abc", 9));
		bcp_msg_init(&m, BCP_OP_REMOVEXATTR, 0);
		m.u.removexattr_req.handle = f.handle;
		m.u.removexattr_req.name_len = 8;
		m.name = "user.abc";
		T_EQ(call(&m, &rep), 0);
		T_EQ(call(&m, &rep), -ENODATA);
		T_EQ(mode_flags(ch, dh, "f"), BCP_MODE_NO_XATTRS);
		T_EQ(mode_flags(c, d.handle, "f"), 0);
	}

	/* SYMLINK / READLINK, LINK (same handle, nlink 2) */
	bcp_msg_init(&m, BCP_OP_SYMLINK, 0);
	m.u.symlink_req.parent = d.handle;
	m.u.symlink_req.uid = getuid();
	m.u.symlink_req.gid = getgid();
	m.u.symlink_req.name_len = 2;
	m.u.symlink_req.target_len = 4;
	m.name = "sl";
	m.name2 = "/etc";
	T_EQ(call(&m, &rep), 0);
	sl = rep.u.entry_rep.entry;
	T_CHECK(S_ISLNK(sl.attr.mode));
	bcp_msg_init(&m, BCP_OP_READLINK, 0);
	m.u.handle_req.handle = sl.handle;
	T_EQ(call(&m, &rep), 0);
	T_EQ(rep.u.readlink_rep.len, 4);
	T_CHECK(!memcmp(rep.data, "/etc", 4));
	m.u.handle_req.handle = f.handle;
	T_EQ(call(&m, &rep), -EINVAL);
	/* a symlink out of the root is never followed */
	T_EQ(t_lookup(c, sl.handle, "passwd", NULL), -ENOTDIR);
	T_EQ(t_open(c, sl.handle, O_RDONLY, &fh2), -ELOOP);

	bcp_msg_init(&m, BCP_OP_LINK, 0);
	m.u.link_req.handle = f.handle;
	m.u.link_req.newparent = root;
	m.u.link_req.name_len = 2;
	m.name = "hl";
	T_EQ(call(&m, &rep), 0);
	ln = rep.u.entry_rep.entry;
	T_EQ(ln.handle, f.handle);
	T_EQ(ln.attr.nlink, 2);
	T_EQ(call(&m, &rep), -EEXIST);
	m.u.link_req.handle = d.handle;
	m.name = "hd";
	T_EQ(call(&m, &rep), -EPERM);

	/* RENAME: plain, NOREPLACE, EXCHANGE */
	T_EQ(t_create(c, root, "g", 0600, O_RDWR, &f2, &fh2), 0);
	T_EQ(do_rename(root, "g", d.handle, "f", BCP_RENAME_NOREPLACE),
	     -EEXIST);
	T_EQ(do_rename(root, "g", d.handle, "f", BCP_RENAME_EXCHANGE), 0);
	T_EQ(t_lookup(c, d.handle, "f", &e), 0);
	T_EQ(e.handle, f2.handle);
	T_EQ(do_rename(root, "nothing", root, "x", 0), -ENOENT);
	T_EQ(do_rename(root, "g", root, "d", 0), -EISDIR);
	T_EQ(do_rename(root, "g", root, "g2", 0), 0);
	T_EQ(do_rename(root, "g2", root, "g3", 3), -EINVAL);

	/* UNLINK / RMDIR errnos */
	T_EQ(named(BCP_OP_RMDIR, root, "d"), -ENOTEMPTY);
	T_EQ(named(BCP_OP_RMDIR, root, "g2"), -ENOTDIR);
	T_EQ(named(BCP_OP_UNLINK, root, "d"), -EISDIR);
	T_EQ(named(BCP_OP_UNLINK, root, "nope"), -ENOENT);

	/* MKNOD: a fifo */
	bcp_msg_init(&m, BCP_OP_MKNOD, 0);
	m.u.mknod_req.parent = root;
	m.u.mknod_req.mode = S_IFIFO | 0600;
	m.u.mknod_req.uid = getuid();
	m.u.mknod_req.gid = getgid();
	m.u.mknod_req.name_len = 4;
	m.name = "fifo";
	T_EQ(call(&m, &rep), 0);
	T_CHECK(S_ISFIFO(rep.u.entry_rep.entry.attr.mode));
	T_EQ(call(&m, &rep), -EEXIST);

	/* FALLOCATE, LSEEK (DATA/HOLE), COPY_FILE_RANGE, FSYNC */
	bcp_msg_init(&m, BCP_OP_FALLOCATE, 0);
	m.u.fallocate_req.handle = f2.handle;
	m.u.fallocate_req.fh = fh2;
	m.u.fallocate_req.offset = 0;
	m.u.fallocate_req.length = 1 << 20;
	T_EQ(call(&m, &rep), 0);
	T_EQ(getattr(f2.handle, &at), 0);
	T_EQ(at.size, 1 << 20);
	T_EQ(t_io(c, BCP_OP_BATCH_PUSH, fh2, 0, "0123456789", 10), 10);
	bcp_msg_init(&m, BCP_OP_LSEEK, 0);
	m.u.lseek_req.fh = fh2;
	m.u.lseek_req.offset = 0;
	m.u.lseek_req.whence = SEEK_DATA;
	T_EQ(call(&m, &rep), 0);
	T_EQ(rep.u.lseek_rep.offset, 0);
	m.u.lseek_req.whence = 99;
	T_EQ(call(&m, &rep), -EINVAL);
	T_EQ(t_create(c, root, "copy", 0600, O_RDWR, NULL, &dfh), 0);
	bcp_msg_init(&m, BCP_OP_COPY_FILE_RANGE, 0);
	m.u.copy_req.fh_in = fh2;
	m.u.copy_req.off_in = 2;
	m.u.copy_req.fh_out = dfh;
	m.u.copy_req.off_out = 0;
	m.u.copy_req.length = 5;
	T_EQ(call(&m, &rep), 0);
	T_EQ(rep.u.copy_rep.copied, 5);
	check_file(&a, "copy", "23456");
	bcp_msg_init(&m, BCP_OP_FSYNC, 0);
	m.u.fsync_req.handle = f2.handle;
	m.u.fsync_req.fh = fh2;
	T_EQ(call(&m, &rep), 0);
	m.u.fsync_req.fh = 12345;
	T_EQ(call(&m, &rep), -EBADF);

	/* READDIR with and without PLUS, STATFS */
	bcp_msg_init(&m, BCP_OP_OPENDIR, 0);
	m.u.open_req.handle = d.handle;
	T_EQ(call(&m, &rep), 0);
	fh = rep.u.open_rep.fh;
	for (i = 0; i < 2; i++) {
		struct bcp_dirent_iter it = { 0, 0 };
		struct bcp_dirent_view v;

		bcp_msg_init(&m, BCP_OP_READDIR, 0);
		m.u.readdir_req.handle = d.handle;
		m.u.readdir_req.fh = fh;
		m.u.readdir_req.max_bytes = 4096;
		m.u.readdir_req.flags = i ? BCP_READDIR_PLUS : 0;
		T_EQ(call(&m, &rep), 0);
		T_EQ(rep.u.readdir_rep.eof, 1);
		seen_dot = seen_f = 0;
		while (bcp_dirent_next(&rep, i, &it, &v) == 1) {
			if (v.d.name_len == 1 && v.name[0] == '.') {
				seen_dot = 1;
				if (i)
					T_EQ(v.entry.handle, 0);
			}
			if (v.d.name_len == 1 && v.name[0] == 'f') {
				seen_f = 1;
				if (i)
					T_EQ(v.entry.handle, f2.handle);
			}
		}
		T_CHECK(seen_dot && seen_f);
		T_EQ(rep.u.readdir_rep.count, 4);	/* . .. f sl */
	}
	m.u.readdir_req.fh = fh2;
	T_EQ(call(&m, &rep), -ENOTDIR);
	bcp_msg_init(&m, BCP_OP_STATFS, 0);
	m.u.handle_req.handle = root;
	T_EQ(call(&m, &rep), 0);
	T_CHECK(rep.u.statfs_rep.bsize > 0 && rep.u.statfs_rep.namemax == 255);

	/* FORGET drops a handle; the root is never dropped */
	T_EQ(t_lookup(c, root, "fifo", &e), 0);
	bcp_msg_init(&m, BCP_OP_FORGET, 0);
	{
		struct bcp_forget_one fo[2] = { { e.handle, 2 }, { root, 9 } };

		m.u.forget_req.count = 2;
		m.forgets = fo;
		T_EQ(call(&m, &rep), 0);
	}
	T_EQ(getattr(e.handle, NULL), -ESTALE);
	T_EQ(getattr(root, NULL), 0);
	bcp_msg_init(&m, BCP_OP_PING, 0);
	T_EQ(call(&m, &rep), 0);
	T_EQ(t_release(c, f2.handle, fh2), 0);
	T_EQ(t_release(c, f2.handle, fh2), -EBADF);
	/* a symlink's xattrs are never served: it has none to tell of */
	T_EQ(t_lookup(ch, bcp_client_root(ch), "d", &e), 0);
	T_EQ(mode_flags(ch, e.handle, "sl"), BCP_MODE_NO_XATTRS);
	bcp_client_destroy(ch);
	v3_cases(&a, root);
	bcp_client_destroy(c);

	/* a wrong secret: -EACCES and a warning naming the peer */
	{
		struct bcp_client_opts o;
		char err[256];

		bcp_client_opts_init(&o);
		o.addr = a.tcp_addr;
		o.secret = "wrong";
		o.secret_len = 5;
		o.transport = BCP_XFER_TCP;
		ret = bcp_client_connect(&o, &c, err, sizeof(err));
		T_EQ(ret, -EACCES);
		T_CHECK(strlen(err) > 0);
	}
	T_EQ(t_agent_stop(&a), 0);
	T_CHECK(t_log_has(&a, "authentication failed"));
	T_CHECK(t_log_has(&a, "summary: LOOKUP"));
	t_agent_cleanup(&a);
	return 0;
}
