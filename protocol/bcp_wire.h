/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_wire.h - the bluecachefs protocol (BCP) on the wire.
 *
 * This header is the single source of truth for every byte that crosses
 * between the host daemon (bluecachefs) and the agent (bluecache-agent).
 * Each message body is described once, as an X-macro field list; from that
 * list come the wire struct (struct bcp_w_NAME, little-endian fields, used
 * only by bcp_codec.c), the host-endian API struct (struct bcp_NAME, in
 * bcp_codec.h) and the encoder and decoder of both.  Every wire struct has
 * explicit padding, a size that is a multiple of 8 and a _Static_assert on
 * that size.  Padding must be zero on the wire and is checked.
 *
 * A frame is a struct bcp_w_hdr followed by payload_len bytes: the fixed
 * body of the opcode, then its variable tail (names, arrays) as the body's
 * length and count fields describe.  doc/protocol.md is the prose version.
 *
 * Version changelog (fields are only ever appended; a new field needs a new
 * version and a feature bit, and peers negotiate the lowest common version):
 *   1  first version: HELLO/AUTH/DATA_ATTACH, metadata ops, REGISTER_REGION,
 *      BATCH_PULL/BATCH_PUSH, FORGET, COPY_FILE_RANGE, LSEEK, PING; data
 *      connection ops DATA_WRITE/DATA_READ.
 *   1 + BCP_FEAT_SETATTR_CTIME: SETATTR valid bit BCP_SETATTR_CTIME (a
 *      change of nothing but ctime, as chown(f, -1, -1) makes).
 *   2  an entry carries the object's sealed file id (fid), HELLO the
 *      client's id; REBIND, REOPEN and the header flag BCP_HF_REPLAY let a
 *      host resume its handles, open files and unanswered requests on a
 *      restarted agent (BCP_FEAT_RESUME).  The entry layout changed, so
 *      version 1 is no longer spoken.
 *   2 + BCP_FEAT_CREATED: a CREATE reply's open_flags say with
 *      BCP_OPEN_CREATED that the agent made the file (it has no xattrs).
 *   2 + BCP_FEAT_NOTIFY: the agent sends NOTIFY frames (requests from the
 *      agent, never answered) when another session or a process on the
 *      agent's machine changes something this session holds.
 *   3  fewer round trips: the replies of the requests that change a
 *      directory carry its attributes after the change (entry_rep and
 *      create_rep gain dir; UNLINK, RMDIR and RENAME, which had no reply
 *      body, answer dir_rep and rename_rep); OPEN asks with peek for the
 *      whole of a small file, and its reply (open_rep, also OPENDIR's and
 *      REOPEN's) carries the file's attributes and, with BCP_OPEN_DATA,
 *      its bytes.  Layouts changed, so version 2 is no longer spoken.
 *   3 + BCP_FEAT_BATCH_INLINE: a BATCH_PULL or BATCH_PUSH of at most
 *      BCP_BATCH_INLINE_MAX bytes may carry them in its frames
 *      (BCP_BATCH_INLINE): a push's bytes follow its segments, a pull's
 *      reply may bring its bytes after the statuses (batch_rep's pad0
 *      becomes data_len, zero everywhere else).
 *   3 + BCP_FEAT_BUSY: the agent sends NOTIFY BUSY every 250-450 ms
 *      while it works on requests of this session, so that the host waits
 *      for a slow store past its timeout even when the agent cannot read
 *      (and answer) a PING behind those requests.
 *   3 + BCP_FEAT_XATTR_HINT: the attributes of an entry (LOOKUP, MKDIR,
 *      MKNOD, SYMLINK, LINK, READDIRPLUS) may say with BCP_MODE_NO_XATTRS
 *      in mode that the object had no extended attributes when they were
 *      read, so that a host answers the getxattr of ls -l itself.
 */
#ifndef BCP_WIRE_H
#define BCP_WIRE_H

#include <stdint.h>

#define BCP_MAGIC		0x31464342u	/* "BCF1" little-endian */
#define BCP_VERSION_MIN		3
#define BCP_VERSION_MAX		3
#define BCP_DEFAULT_PORT	18517

/* Limits.  A peer that exceeds one gets an error reply and is disconnected. */
#define BCP_HDR_SIZE		32
#define BCP_FRAME_MAX		(256u * 1024)	/* control frame incl. header */
#define BCP_DATA_FRAME_MAX	(8u * 1024 * 1024 + 64) /* data connection */
#define BCP_SEGS_MAX		1024	/* segments in one BATCH_* */
#define BCP_FORGETS_MAX		4096	/* entries in one FORGET */
#define BCP_NAME_MAX		255	/* bytes in one path component */
#define BCP_SYMLINK_MAX		4095	/* bytes in a symlink target */
#define BCP_XATTR_NAME_MAX	255
#define BCP_XATTR_VALUE_MAX	65536
#define BCP_XATTR_LIST_MAX	65536
#define BCP_READDIR_MAX		(128u * 1024) /* max_bytes of one READDIR */
#define BCP_SEG_LEN_MAX		(8u * 1024 * 1024) /* one segment's length */
#define BCP_REGIONS_MAX		64	/* regions per session */
#define BCP_NONCE_LEN		32
#define BCP_MAC_LEN		32	/* HMAC-SHA256 */
#define BCP_FID_LEN		64	/* an entry's sealed file id */
#define BCP_CLIENT_ID_LEN	16	/* HELLO: the host's lasting id */
#define BCP_REBINDS_MAX		2048	/* entries in one REBIND */
#define BCP_OPEN_PEEK_MAX	(64u * 1024) /* OPEN: a small file's bytes */
#define BCP_BATCH_INLINE_MAX	(64u * 1024) /* BCP_BATCH_INLINE: bytes */

/* Header flags. */
#define BCP_HF_REPLY		0x1u	/* this frame is a reply */
#define BCP_HF_FD		0x2u	/* a file descriptor rides along (unix) */
/*
 * A request sent again on a new connection of the same client (HELLO's
 * client id) because the old one was lost before its reply came: the agent
 * answers from its reply cache what it had already done.  Requests only.
 */
#define BCP_HF_REPLAY		0x4u
#define BCP_HF_ALL		(BCP_HF_REPLY | BCP_HF_FD | BCP_HF_REPLAY)

/* Feature bits, negotiated in HELLO: the reply holds the intersection. */
#define BCP_FEAT_SHM		(1ull << 0) /* regions may be memfds (unix) */
#define BCP_FEAT_TCP_DATA	(1ull << 1) /* a DATA_ATTACH connection */
#define BCP_FEAT_RDMA		(1ull << 2) /* rdma_addr/rdma_port valid */
#define BCP_FEAT_READDIRPLUS	(1ull << 3)
#define BCP_FEAT_COPY_RANGE	(1ull << 4)
#define BCP_FEAT_SETATTR_CTIME	(1ull << 5) /* BCP_SETATTR_CTIME understood */
#define BCP_FEAT_RESUME		(1ull << 6) /* fids, REBIND, REOPEN, replay */
#define BCP_FEAT_NOTIFY		(1ull << 7) /* the agent sends NOTIFY */
#define BCP_FEAT_CREATED	(1ull << 8) /* BCP_OPEN_CREATED */
#define BCP_FEAT_BATCH_INLINE	(1ull << 9) /* BCP_BATCH_INLINE */
#define BCP_FEAT_BUSY		(1ull << 10) /* NOTIFY BUSY */
#define BCP_FEAT_XATTR_HINT	(1ull << 11) /* BCP_MODE_NO_XATTRS */
#define BCP_FEAT_ALL		((1ull << 12) - 1)

enum bcp_opcode {
	BCP_OP_HELLO = 1,
	BCP_OP_AUTH = 2,
	BCP_OP_DATA_ATTACH = 3,
	BCP_OP_PING = 4,
	BCP_OP_LOOKUP = 10,
	BCP_OP_GETATTR = 11,
	BCP_OP_SETATTR = 12,
	BCP_OP_CREATE = 13,
	BCP_OP_MKDIR = 14,
	BCP_OP_MKNOD = 15,
	BCP_OP_SYMLINK = 16,
	BCP_OP_READLINK = 17,
	BCP_OP_LINK = 18,
	BCP_OP_UNLINK = 19,
	BCP_OP_RMDIR = 20,
	BCP_OP_RENAME = 21,
	BCP_OP_OPEN = 22,
	BCP_OP_RELEASE = 23,
	BCP_OP_OPENDIR = 24,
	BCP_OP_RELEASEDIR = 25,
	BCP_OP_READDIR = 26,
	BCP_OP_STATFS = 27,
	BCP_OP_FSYNC = 28,
	BCP_OP_FSYNCDIR = 29,
	BCP_OP_FALLOCATE = 30,
	BCP_OP_SETXATTR = 31,
	BCP_OP_GETXATTR = 32,
	BCP_OP_LISTXATTR = 33,
	BCP_OP_REMOVEXATTR = 34,
	BCP_OP_FORGET = 35,
	BCP_OP_COPY_FILE_RANGE = 36,
	BCP_OP_LSEEK = 37,
	BCP_OP_REBIND = 38,
	BCP_OP_REOPEN = 39,
	BCP_OP_NOTIFY = 40,
	BCP_OP_REGISTER_REGION = 50,
	BCP_OP_UNREGISTER_REGION = 51,
	BCP_OP_BATCH_PULL = 52,
	BCP_OP_BATCH_PUSH = 53,
	/* Data connection only (after DATA_ATTACH); agent -> host requests. */
	BCP_OP_DATA_WRITE = 70,
	BCP_OP_DATA_READ = 71,
	BCP_OP_MAX = 72
};

/* SETATTR valid bits. */
#define BCP_SETATTR_MODE	0x01u
#define BCP_SETATTR_UID		0x02u
#define BCP_SETATTR_GID		0x04u
#define BCP_SETATTR_SIZE	0x08u
#define BCP_SETATTR_ATIME	0x10u
#define BCP_SETATTR_MTIME	0x20u
#define BCP_SETATTR_ATIME_NOW	0x40u
#define BCP_SETATTR_MTIME_NOW	0x80u
#define BCP_SETATTR_CTIME	0x100u	/* BCP_FEAT_SETATTR_CTIME: touch ctime */
#define BCP_SETATTR_ALL		0x1ffu

/* RENAME flags (values of the Linux RENAME_* constants). */
#define BCP_RENAME_NOREPLACE	0x1u
#define BCP_RENAME_EXCHANGE	0x2u

/*
 * An attr's mode is st_mode in its low 16 bits; above them, flags
 * (BCP_FEAT_XATTR_HINT, in entries only): the object had no extended
 * attributes at all when the attributes were read.
 */
#define BCP_MODE_BITS		0xffffu
#define BCP_MODE_NO_XATTRS	0x80000000u

/* READDIR flags. */
#define BCP_READDIR_PLUS	0x1u	/* entries carry handle + attributes */

/* OPEN/CREATE reply open_flags. */
#define BCP_OPEN_KEEP_CACHE	0x1u
#define BCP_OPEN_DIRECT_IO	0x2u
/* CREATE replies only (BCP_FEAT_CREATED): the agent made the file */
#define BCP_OPEN_CREATED	0x4u
/*
 * OPEN replies only, to a request with peek > 0: the reply's tail is the
 * whole file, data_len bytes (0: the file is empty), read after the open.
 */
#define BCP_OPEN_DATA		0x8u

/* REGISTER_REGION kinds. */
enum bcp_region_kind {
	BCP_REGION_SHM = 1,	/* memfd passed with SCM_RIGHTS (BCP_HF_FD) */
	BCP_REGION_TCP = 2,	/* bytes move on the session's data connection */
	BCP_REGION_RDMA = 3,	/* addr + rkey of a remotely accessible MR */
};

/*
 * Field kinds of the X-macro lists.  X(KIND, name):
 *   U16 U32 U64 S32 S64: little-endian integers.  PAD16 PAD32: zero padding.
 *   B16 B32 B64: byte arrays.  ATTR ENTRY: nested structs below.
 */
#define BCP_WT_U16(n)	uint16_t n;
#define BCP_WT_U32(n)	uint32_t n;
#define BCP_WT_U64(n)	uint64_t n;
#define BCP_WT_S32(n)	int32_t n;
#define BCP_WT_S64(n)	int64_t n;
#define BCP_WT_PAD16(n)	uint16_t n;
#define BCP_WT_PAD32(n)	uint32_t n;
#define BCP_WT_B16(n)	uint8_t n[16];
#define BCP_WT_B32(n)	uint8_t n[32];
#define BCP_WT_B64(n)	uint8_t n[64];
#define BCP_WT_ATTR(n)	struct bcp_w_attr n;
#define BCP_WT_ENTRY(n)	struct bcp_w_entry n;
#define BCP_WFIELD(k, n) BCP_WT_##k(n)

/*
 * Every message body: BCP_MSGS(M) calls M(name, LIST, wire size).  The
 * order here is the order of the codec's tables, not of opcodes.
 */

/* struct bcp_w_hdr: every frame starts with it. */
#define BCP_HDR_FIELDS(X) \
	X(U32, magic) X(U16, version) X(U16, opcode) X(U32, flags) \
	X(U32, payload_len) X(U64, req_id) X(S32, status) X(PAD32, pad0)

#define BCP_ATTR_FIELDS(X) \
	X(U64, ino) X(U64, size) X(U64, blocks) \
	X(S64, atime) X(S64, mtime) X(S64, ctime) \
	X(U32, atime_nsec) X(U32, mtime_nsec) X(U32, ctime_nsec) \
	X(U32, mode) X(U32, nlink) X(U32, uid) X(U32, gid) X(U32, blksize) \
	X(U64, rdev)

/*
 * handle: the agent's 64-bit name for an object in this session, counted
 * like FUSE lookups.  fid: the object's lasting name, opaque to the host
 * and sealed by the agent (all zeros: it has none); a host keeps it to
 * REBIND the handle on a restarted agent.
 */
#define BCP_ENTRY_FIELDS(X) \
	X(U64, handle) X(U64, generation) X(ATTR, attr) X(B64, fid)

/*
 * client: random, chosen once by a host for the life of a mount and sent
 * again on every reconnect; it keys the agent's reply cache.  All zeros:
 * the host will not resume.
 */
#define BCP_HELLO_REQ_FIELDS(X) \
	X(U16, ver_min) X(U16, ver_max) X(PAD32, pad0) X(U64, features) \
	X(B32, nonce) X(B16, client)
#define BCP_HELLO_REP_FIELDS(X) \
	X(U16, version) X(PAD16, pad0) X(U32, max_segs) X(U64, features) \
	X(U32, max_frame) X(U32, max_inflight) X(U32, slot_size) \
	X(U32, nslots) X(U64, session) X(B32, nonce) X(B16, rdma_addr) \
	X(U16, rdma_port) X(PAD16, pad1) X(PAD32, pad2)
/* mac = HMAC-SHA256(secret, "bcp-client" | server nonce | client nonce) */
#define BCP_AUTH_REQ_FIELDS(X) X(B32, mac)
/* mac = HMAC-SHA256(secret, "bcp-server" | client nonce | server nonce) */
#define BCP_AUTH_REP_FIELDS(X) X(B32, mac) X(U64, root)
/* mac = HMAC-SHA256(secret, "bcp-data" | server nonce | session LE64) */
#define BCP_ATTACH_REQ_FIELDS(X) X(U64, session) X(B32, mac)

/* tail: name[name_len] */
#define BCP_NAMED_REQ_FIELDS(X) \
	X(U64, parent) X(U16, name_len) X(PAD16, pad0) X(PAD32, pad1)
/*
 * dir: the attributes of the directory the request changed, right after
 * the change (MKDIR, MKNOD, SYMLINK: the parent; LINK: newparent); all
 * zeros in a LOOKUP reply, or when the agent could not read them (ino 0
 * says so).  The same in create_rep, dir_rep and rename_rep.
 */
#define BCP_ENTRY_REP_FIELDS(X) X(ENTRY, entry) X(ATTR, dir)
/* UNLINK, RMDIR: the parent after the change */
#define BCP_DIR_REP_FIELDS(X) X(ATTR, dir)
/* RENAME: parent and newparent after the change (the same when equal) */
#define BCP_RENAME_REP_FIELDS(X) X(ATTR, dir) X(ATTR, newdir)
#define BCP_NODE_REQ_FIELDS(X) X(U64, handle) X(U64, fh)
#define BCP_ATTR_REP_FIELDS(X) X(ATTR, attr)
#define BCP_SETATTR_REQ_FIELDS(X) \
	X(U64, handle) X(U64, fh) X(U32, valid) X(U32, mode) X(U32, uid) \
	X(U32, gid) X(U64, size) X(S64, atime) X(S64, mtime) \
	X(U32, atime_nsec) X(U32, mtime_nsec)
/* tail: name[name_len].  flags: O_* open flags (Linux values). */
#define BCP_CREATE_REQ_FIELDS(X) \
	X(U64, parent) X(U32, mode) X(U32, umask) X(U32, flags) X(U32, uid) \
	X(U32, gid) X(U16, name_len) X(PAD16, pad0)
#define BCP_CREATE_REP_FIELDS(X) \
	X(ENTRY, entry) X(U64, fh) X(U32, open_flags) X(PAD32, pad0) \
	X(ATTR, dir)
/* tail: name[name_len] */
#define BCP_MKDIR_REQ_FIELDS(X) \
	X(U64, parent) X(U32, mode) X(U32, umask) X(U32, uid) X(U32, gid) \
	X(U16, name_len) X(PAD16, pad0) X(PAD32, pad1)
/* tail: name[name_len] */
#define BCP_MKNOD_REQ_FIELDS(X) \
	X(U64, parent) X(U64, rdev) X(U32, mode) X(U32, umask) X(U32, uid) \
	X(U32, gid) X(U16, name_len) X(PAD16, pad0) X(PAD32, pad1)
/* tail: name[name_len] target[target_len] */
#define BCP_SYMLINK_REQ_FIELDS(X) \
	X(U64, parent) X(U32, uid) X(U32, gid) X(U16, name_len) \
	X(U16, target_len) X(PAD32, pad0)
#define BCP_HANDLE_REQ_FIELDS(X) X(U64, handle)
/* tail: target[len] */
#define BCP_READLINK_REP_FIELDS(X) X(U32, len) X(PAD32, pad0)
/* tail: name[name_len] (the new name in newparent) */
#define BCP_LINK_REQ_FIELDS(X) \
	X(U64, handle) X(U64, newparent) X(U16, name_len) X(PAD16, pad0) \
	X(PAD32, pad1)
/* tail: name[name_len] newname[newname_len] */
#define BCP_RENAME_REQ_FIELDS(X) \
	X(U64, parent) X(U64, newparent) X(U32, flags) X(U16, name_len) \
	X(U16, newname_len)
/*
 * peek (OPEN of a regular file only; else 0): when the file has at most
 * peek bytes (<= BCP_OPEN_PEEK_MAX), the reply carries all of them
 * (BCP_OPEN_DATA).
 */
#define BCP_OPEN_REQ_FIELDS(X) X(U64, handle) X(U32, flags) X(U32, peek)
/*
 * attr: the object's attributes once opened (ino 0: not read).  tail:
 * data[data_len], with BCP_OPEN_DATA only.
 */
#define BCP_OPEN_REP_FIELDS(X) \
	X(U64, fh) X(U32, open_flags) X(U32, data_len) X(ATTR, attr)
/*
 * READDIR: cookie 0 starts at the beginning; each entry carries the cookie
 * that resumes after it.  Reply tail: count entries, each a struct
 * bcp_w_dirent (or bcp_w_direntplus with BCP_READDIR_PLUS) followed by the
 * name padded with zeros to a multiple of 8.
 */
#define BCP_READDIR_REQ_FIELDS(X) \
	X(U64, handle) X(U64, fh) X(U64, cookie) X(U32, max_bytes) \
	X(U32, flags)
#define BCP_READDIR_REP_FIELDS(X) X(U32, count) X(U32, eof)
#define BCP_DIRENT_FIELDS(X) \
	X(U64, cookie) X(U64, ino) X(U32, type) X(U16, name_len) X(PAD16, pad0)
#define BCP_DIRENTPLUS_FIELDS(X) \
	X(U64, cookie) X(U64, ino) X(U32, type) X(U16, name_len) \
	X(PAD16, pad0) X(ENTRY, entry)
#define BCP_STATFS_REP_FIELDS(X) \
	X(U64, blocks) X(U64, bfree) X(U64, bavail) X(U64, files) \
	X(U64, ffree) X(U32, bsize) X(U32, frsize) X(U32, namemax) \
	X(PAD32, pad0)
#define BCP_FSYNC_REQ_FIELDS(X) \
	X(U64, handle) X(U64, fh) X(U32, datasync) X(PAD32, pad0)
#define BCP_FALLOCATE_REQ_FIELDS(X) \
	X(U64, handle) X(U64, fh) X(U64, offset) X(U64, length) X(U32, mode) \
	X(PAD32, pad0)
/* tail: name[name_len] value[value_len] */
#define BCP_SETXATTR_REQ_FIELDS(X) \
	X(U64, handle) X(U32, flags) X(U32, value_len) X(U16, name_len) \
	X(PAD16, pad0) X(PAD32, pad1)
/* tail: name[name_len].  size 0 asks for the size only. */
#define BCP_GETXATTR_REQ_FIELDS(X) \
	X(U64, handle) X(U32, size) X(U16, name_len) X(PAD16, pad0)
#define BCP_LISTXATTR_REQ_FIELDS(X) X(U64, handle) X(U32, size) X(PAD32, pad0)
/* tail: size bytes of value or list, or nothing when the request's size was 0 */
#define BCP_XATTR_REP_FIELDS(X) X(U32, size) X(PAD32, pad0)
/* tail: name[name_len] */
#define BCP_REMOVEXATTR_REQ_FIELDS(X) \
	X(U64, handle) X(U16, name_len) X(PAD16, pad0) X(PAD32, pad1)
/* tail: count x struct bcp_w_forget_one */
#define BCP_FORGET_REQ_FIELDS(X) X(U32, count) X(PAD32, pad0)
#define BCP_FORGET_ONE_FIELDS(X) X(U64, handle) X(U64, nlookup)
#define BCP_COPY_REQ_FIELDS(X) \
	X(U64, fh_in) X(U64, off_in) X(U64, fh_out) X(U64, off_out) \
	X(U64, length) X(U32, flags) X(PAD32, pad0)
#define BCP_COPY_REP_FIELDS(X) X(U64, copied)
#define BCP_LSEEK_REQ_FIELDS(X) \
	X(U64, fh) X(S64, offset) X(U32, whence) X(PAD32, pad0)
#define BCP_LSEEK_REP_FIELDS(X) X(S64, offset)
/*
 * REBIND (BCP_FEAT_RESUME): on a new session, take back handles a host
 * held on an agent that restarted: tail count x struct bcp_w_rebind_one,
 * each installing handle (the same value as before) with nlookup
 * references on the object fid names.  Reply: a batch_rep with one S32
 * status per entry (0, -ESTALE when the object is gone or the fid is not
 * the agent's, -EEXIST when the handle is taken by another object).
 */
#define BCP_REBIND_REQ_FIELDS(X) X(U32, count) X(U32, flags)
#define BCP_REBIND_ONE_FIELDS(X) X(U64, handle) X(U64, nlookup) X(B64, fid)
/*
 * REOPEN (BCP_FEAT_RESUME): open handle again (a file with O_* flags, or
 * the directory when dir is 1) under the fh value it had, so the host's
 * open files and directory streams go on.  Reply: open_rep.
 */
#define BCP_REOPEN_REQ_FIELDS(X) \
	X(U64, handle) X(U64, fh) X(U32, flags) X(U32, dir)
/*
 * NOTIFY (BCP_FEAT_NOTIFY): agent -> host, req_id 0, never answered.
 * Something this session holds was changed by another session or by a
 * process on the agent's machine; the host drops what it cached of it.
 *   INODE   handle's attributes changed, and its data in [offset,
 *           offset + length) (length 0: to the end; offset -1: the
 *           attributes only).
 *   ENTRY   the name name[name_len] in directory handle now names
 *           something else or nothing (and the directory changed).
 *   DELETE  the name in directory handle that named child is gone.
 *   RESET   notifications were lost (the session's queue overflowed):
 *           drop everything cached.  handle, child, offset, length 0.
 *   BUSY    (BCP_FEAT_BUSY, which alone lets the agent send this kind)
 *           the agent is at work on requests of this session, some of
 *           them perhaps not read yet: the host's timeout for them runs
 *           from this frame on (up to its own bound).  handle, child,
 *           offset, length 0.
 * tail: name[name_len] (ENTRY and DELETE; 0 otherwise).
 */
#define BCP_NOTIFY_REQ_FIELDS(X) \
	X(U32, kind) X(U16, name_len) X(PAD16, pad0) X(U64, handle) \
	X(U64, child) X(S64, offset) X(S64, length)
enum bcp_notify_kind {
	BCP_NOTIFY_INODE = 1,
	BCP_NOTIFY_ENTRY = 2,
	BCP_NOTIFY_DELETE = 3,
	BCP_NOTIFY_RESET = 4,
	BCP_NOTIFY_BUSY = 5,
};
/* shm: the memfd rides with BCP_HF_FD; rdma: addr + rkey; tcp: neither */
#define BCP_REGION_REQ_FIELDS(X) \
	X(U32, region_id) X(U32, kind) X(U64, length) X(U64, addr) \
	X(U32, rkey) X(PAD32, pad0)
#define BCP_UNREGION_REQ_FIELDS(X) X(U32, region_id) X(PAD32, pad0)
/*
 * BATCH_PULL (object -> host region) and BATCH_PUSH (host region -> object):
 * tail: count x struct bcp_w_seg.  Reply tail: count x S32 status (bytes
 * moved, or -errno for that segment alone), padded with zeros to 8.
 *
 * flags BCP_BATCH_INLINE (BCP_FEAT_BATCH_INLINE; the segments' lengths add
 * up to at most BCP_BATCH_INLINE_MAX): a PUSH's bytes follow its segments,
 * each segment's in turn, and the agent takes them from there; a PULL's
 * reply may bring its bytes after the statuses, data_len of them: each
 * segment's delivered bytes (its status, when positive) in turn.  A pull
 * reply with data_len 0 delivered its bytes into the region as usual.
 * data_len is 0 in every other reply (and in REBIND's).
 */
#define BCP_BATCH_INLINE	0x1u
#define BCP_BATCH_REQ_FIELDS(X) X(U32, count) X(U32, flags)
#define BCP_SEG_FIELDS(X) \
	X(U64, fh) X(U64, offset) X(U32, length) X(U32, region_id) \
	X(U64, region_off)
#define BCP_BATCH_REP_FIELDS(X) X(U32, count) X(U32, data_len)
/*
 * Data connection (tcp transport): the agent plays the RDMA engine.
 * DATA_WRITE: tail length bytes, the host stores them at region_off and
 * replies (header only, status 0 or -errno).  DATA_READ: the host replies
 * with length bytes of the region as the reply's tail.
 */
#define BCP_DATA_REQ_FIELDS(X) \
	X(U32, region_id) X(U32, length) X(U64, region_off)

/* M(name, FIELDS, wire size in bytes) */
#define BCP_MSGS(M) \
	M(hdr, BCP_HDR_FIELDS, 32) \
	M(attr, BCP_ATTR_FIELDS, 88) \
	M(entry, BCP_ENTRY_FIELDS, 168) \
	M(hello_req, BCP_HELLO_REQ_FIELDS, 64) \
	M(hello_rep, BCP_HELLO_REP_FIELDS, 96) \
	M(auth_req, BCP_AUTH_REQ_FIELDS, 32) \
	M(auth_rep, BCP_AUTH_REP_FIELDS, 40) \
	M(attach_req, BCP_ATTACH_REQ_FIELDS, 40) \
	M(named_req, BCP_NAMED_REQ_FIELDS, 16) \
	M(entry_rep, BCP_ENTRY_REP_FIELDS, 256) \
	M(dir_rep, BCP_DIR_REP_FIELDS, 88) \
	M(rename_rep, BCP_RENAME_REP_FIELDS, 176) \
	M(node_req, BCP_NODE_REQ_FIELDS, 16) \
	M(attr_rep, BCP_ATTR_REP_FIELDS, 88) \
	M(setattr_req, BCP_SETATTR_REQ_FIELDS, 64) \
	M(create_req, BCP_CREATE_REQ_FIELDS, 32) \
	M(create_rep, BCP_CREATE_REP_FIELDS, 272) \
	M(mkdir_req, BCP_MKDIR_REQ_FIELDS, 32) \
	M(mknod_req, BCP_MKNOD_REQ_FIELDS, 40) \
	M(symlink_req, BCP_SYMLINK_REQ_FIELDS, 24) \
	M(handle_req, BCP_HANDLE_REQ_FIELDS, 8) \
	M(readlink_rep, BCP_READLINK_REP_FIELDS, 8) \
	M(link_req, BCP_LINK_REQ_FIELDS, 24) \
	M(rename_req, BCP_RENAME_REQ_FIELDS, 24) \
	M(open_req, BCP_OPEN_REQ_FIELDS, 16) \
	M(open_rep, BCP_OPEN_REP_FIELDS, 104) \
	M(readdir_req, BCP_READDIR_REQ_FIELDS, 32) \
	M(readdir_rep, BCP_READDIR_REP_FIELDS, 8) \
	M(dirent, BCP_DIRENT_FIELDS, 24) \
	M(direntplus, BCP_DIRENTPLUS_FIELDS, 192) \
	M(statfs_rep, BCP_STATFS_REP_FIELDS, 56) \
	M(fsync_req, BCP_FSYNC_REQ_FIELDS, 24) \
	M(fallocate_req, BCP_FALLOCATE_REQ_FIELDS, 40) \
	M(setxattr_req, BCP_SETXATTR_REQ_FIELDS, 24) \
	M(getxattr_req, BCP_GETXATTR_REQ_FIELDS, 16) \
	M(listxattr_req, BCP_LISTXATTR_REQ_FIELDS, 16) \
	M(xattr_rep, BCP_XATTR_REP_FIELDS, 8) \
	M(removexattr_req, BCP_REMOVEXATTR_REQ_FIELDS, 16) \
	M(forget_req, BCP_FORGET_REQ_FIELDS, 8) \
	M(forget_one, BCP_FORGET_ONE_FIELDS, 16) \
	M(copy_req, BCP_COPY_REQ_FIELDS, 48) \
	M(copy_rep, BCP_COPY_REP_FIELDS, 8) \
	M(lseek_req, BCP_LSEEK_REQ_FIELDS, 24) \
	M(lseek_rep, BCP_LSEEK_REP_FIELDS, 8) \
	M(rebind_req, BCP_REBIND_REQ_FIELDS, 8) \
	M(rebind_one, BCP_REBIND_ONE_FIELDS, 80) \
	M(reopen_req, BCP_REOPEN_REQ_FIELDS, 24) \
	M(notify_req, BCP_NOTIFY_REQ_FIELDS, 40) \
	M(region_req, BCP_REGION_REQ_FIELDS, 32) \
	M(unregion_req, BCP_UNREGION_REQ_FIELDS, 8) \
	M(batch_req, BCP_BATCH_REQ_FIELDS, 8) \
	M(seg, BCP_SEG_FIELDS, 32) \
	M(batch_rep, BCP_BATCH_REP_FIELDS, 8) \
	M(data_req, BCP_DATA_REQ_FIELDS, 16)

/* The wire structs.  Only bcp_codec.c touches them. */
#define BCP_WSTRUCT(name, FIELDS, size) \
	struct bcp_w_##name { FIELDS(BCP_WFIELD) };
#define BCP_WASSERT(name, FIELDS, size) \
	_Static_assert(sizeof(struct bcp_w_##name) == (size), \
		       "wire size of " #name); \
	_Static_assert((size) % 8 == 0, #name " is a multiple of 8");

/* BCP_MSGS lists attr and entry before every struct that embeds them. */
BCP_MSGS(BCP_WSTRUCT)
BCP_MSGS(BCP_WASSERT)

#endif /* BCP_WIRE_H */
