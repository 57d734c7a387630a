/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops_xattr.c - extended attributes: setxattr, getxattr, listxattr and
 * removexattr, passed to the agent as they are (its backing files hold
 * the real xattrs).  A size of 0 asks for the size only, as in the
 * system calls.
 *
 * The kernel asks for security.capability before every write (to drop
 * file capabilities), and libfuse 3.14 cannot negotiate
 * FUSE_HANDLE_KILLPRIV_V2 that would stop it.  The agent's -ENODATA for
 * it is therefore remembered per inode (inode.c) for attr_timeout seconds,
 * the time the kernel trusts cached attributes too; this mount's
 * setxattr and removexattr on the inode forget it at once.  So is the
 * absence of the POSIX ACLs (the kernel's permission checks, ls -l) and
 * of security.selinux (ls -l asks every name for it).  An agent that
 * says so in the entries it hands out (BCP_FEAT_XATTR_HINT: the object
 * has no xattrs at all) spares even the first question of each kind:
 * a cold ls -l asks the agent for the listing only.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "bcfs_i.h"

#define BCFS_XATTR_CAP	"security.capability"

static int bcfs_xattr_name_len(const char *name)
{
	size_t len = strlen(name);

	if (!len)
		return -EINVAL;
	return len > BCP_XATTR_NAME_MAX ? -ERANGE : (int)len;
}

/*
 * SETXATTR, REMOVEXATTR: what inode.c keeps of the attribute is dropped
 * before and after (a getxattr racing with it must not cache), and what
 * dattr.c keeps of a directory (its ctime moves).
 */
static uint64_t bcfs_xattr_epoch_v;

uint64_t bcfs_xattr_epoch(void)
{
	return __atomic_load_n(&bcfs_xattr_epoch_v, __ATOMIC_ACQUIRE);
}

static int bcfs_xattr_change(struct bcp_msg *m, uint64_t handle)
{
	struct bcp_msg r;
	uint32_t t;
	int ret;

	__atomic_add_fetch(&bcfs_xattr_epoch_v, 1, __ATOMIC_ACQ_REL);
	bcfs_inode_xattr_forget(handle);
	t = bcfs_dattr_begin(handle);
	ret = bcfs_call(m, &r);
	bcfs_dattr_end(handle, t, NULL, 0);
	bcfs_inode_xattr_forget(handle);
	__atomic_add_fetch(&bcfs_xattr_epoch_v, 1, __ATOMIC_ACQ_REL);
	return ret;
}

void bcfs_xattr_hint(const struct bcp_entry *entry,
		     const struct fuse_entry_param *e, uint64_t xepoch)
{
	/* attr_timeout 0: the option's, or news of the object meanwhile */
	if ((entry->attr.mode & BCP_MODE_NO_XATTRS) && e->attr_timeout > 0 &&
	    bcfs_xattr_epoch() == xepoch)
		bcfs_inode_xattr_none(entry->handle);
}

int bcfs_xattr_cap_absent(uint64_t handle, int ask)
{
	struct bcp_msg m, r;
	uint32_t gen;
	int ret;

	if (bcfs_inode_xattr_absent(handle, BCFS_XA_CAP, &gen))
		return 1;
	if (!ask)
		return 0;
	bcfs_msg(&m, BCP_OP_GETXATTR);
	m.u.getxattr_req.handle = handle;
	m.u.getxattr_req.size = 0;
	m.u.getxattr_req.name_len = sizeof(BCFS_XATTR_CAP) - 1;
	m.name = BCFS_XATTR_CAP;
	ret = bcfs_call(&m, &r);
	if (ret != -ENODATA && ret != -EOPNOTSUPP)
		return 0;
	bcfs_inode_xattr_absent_known(handle, BCFS_XA_CAP, gen);
	return 1;
}

void bcfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      const char *value, size_t size, int flags)
{
	struct bcp_msg m;
	int len, ret;

	len = bcfs_xattr_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	if (size > BCP_XATTR_VALUE_MAX) {
		fuse_reply_err(req, E2BIG);
		return;
	}
	bcfs_msg(&m, BCP_OP_SETXATTR);
	m.u.setxattr_req.handle = bcfs_handle(ino);
	m.u.setxattr_req.flags = flags;
	m.u.setxattr_req.value_len = size;
	m.u.setxattr_req.name_len = len;
	m.name = name;
	m.data = value;
	m.data_len = size;
	ret = bcfs_xattr_change(&m, bcfs_handle(ino));
	bcfs_reply_status(req, ret);
}

static void bcfs_xattr_reply(fuse_req_t req, size_t size, int ret,
			     const struct bcp_msg *r)
{
	if (ret) {
		bcfs_reply_status(req, ret);
		return;
	}
	if (!size) {
		fuse_reply_xattr(req, r->u.xattr_rep.size);
		return;
	}
	if (r->data_len > size) {
		/* the agent answers ERANGE itself: more is a bad reply */
		bcfs_err("the agent answered %u bytes of an extended attribute "
			 "when %zu were asked for", r->data_len, size);
		fuse_reply_err(req, EIO);
		return;
	}
	fuse_reply_buf(req, r->data, r->data_len);
}

/* security.capability values are 20 or 24 bytes; the kernel asks size 0 */
#define BCFS_XATTR_CAP_MAX	64

static void bcfs_answer_cap(struct bcfs_acall *a, int result)
{
	if (result == -ENODATA)
		bcfs_inode_xattr_absent_known(a->parent, BCFS_XA_CAP, a->gen);
	bcfs_xattr_reply(a->req, a->size, result, &a->call.rep);
}

/* The xattr kind whose absence is remembered, or -1. */
static int bcfs_xattr_kind(const char *name)
{
	if (bcfs_g.o.attr_timeout <= 0)
		return -1;
	if (!strcmp(name, BCFS_XATTR_CAP))
		return BCFS_XA_CAP;
	if (!strcmp(name, "system.posix_acl_access"))
		return BCFS_XA_ACL;
	if (!strcmp(name, "system.posix_acl_default"))
		return BCFS_XA_DACL;
	if (!strcmp(name, "security.selinux"))
		return BCFS_XA_SELINUX;
	return -1;
}

void bcfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		      size_t size)
{
	struct bcfs_acall *a;
	struct bcp_msg m, r;
	uint32_t gen = 0;
	int len, ret, kind;

	len = bcfs_xattr_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	if (size > BCP_XATTR_VALUE_MAX)
		size = BCP_XATTR_VALUE_MAX;
	kind = bcfs_xattr_kind(name);
	if (kind >= 0 && bcfs_inode_xattr_absent(bcfs_handle(ino), kind, &gen)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	bcfs_msg(&m, BCP_OP_GETXATTR);
	m.u.getxattr_req.handle = bcfs_handle(ino);
	m.u.getxattr_req.size = size;
	m.u.getxattr_req.name_len = len;
	m.name = name;
	if (kind == BCFS_XA_CAP && size <= BCFS_XATTR_CAP_MAX) {
		/* the kernel's question before a write: answered on arrival */
		a = bcfs_acall_get();
		a->parent = bcfs_handle(ino);
		a->gen = gen;
		a->size = size;
		bcfs_acall_send(a, req, &m, bcfs_answer_cap);
		return;
	}
	ret = bcfs_call(&m, &r);
	if (kind >= 0 && ret == -ENODATA)
		bcfs_inode_xattr_absent_known(bcfs_handle(ino), kind, gen);
	bcfs_xattr_reply(req, size, ret, &r);
}

void bcfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct bcp_msg m, r;

	if (size > BCP_XATTR_LIST_MAX)
		size = BCP_XATTR_LIST_MAX;
	bcfs_msg(&m, BCP_OP_LISTXATTR);
	m.u.listxattr_req.handle = bcfs_handle(ino);
	m.u.listxattr_req.size = size;
	bcfs_xattr_reply(req, size, bcfs_call(&m, &r), &r);
}

void bcfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct bcp_msg m;
	int len, ret;

	len = bcfs_xattr_name_len(name);
	if (len < 0) {
		bcfs_reply_status(req, len);
		return;
	}
	bcfs_msg(&m, BCP_OP_REMOVEXATTR);
	m.u.removexattr_req.handle = bcfs_handle(ino);
	m.u.removexattr_req.name_len = len;
	m.name = name;
	ret = bcfs_xattr_change(&m, bcfs_handle(ino));
	bcfs_reply_status(req, ret);
}
