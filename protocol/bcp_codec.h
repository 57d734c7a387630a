/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_codec.h - host-endian view of BCP messages, and the one codec that
 * turns them into frames and back.
 *
 * The API structs (struct bcp_NAME) are generated from the same field lists
 * as the wire structs in bcp_wire.h, minus padding.  Only bcp_codec.c
 * converts between the two.  bcp_decode() validates every field of an
 * untrusted frame before anything else looks at it: on success every length,
 * count, name and array in the message is known to be within the frame and
 * within the protocol's limits.
 *
 * Which body and tail each opcode carries (req = request, rep = reply; a
 * reply with status < 0 has no payload at all):
 *
 *   opcode              req body / tail                rep body / tail
 *   HELLO               hello_req                      hello_rep
 *   AUTH                auth_req                       auth_rep
 *   DATA_ATTACH         attach_req                     -
 *   PING                -                              -
 *   LOOKUP              named_req / name               entry_rep (dir 0)
 *   GETATTR             node_req                       attr_rep
 *   SETATTR             setattr_req                    attr_rep
 *   CREATE              create_req / name              create_rep
 *   MKDIR               mkdir_req / name               entry_rep
 *   MKNOD               mknod_req / name               entry_rep
 *   SYMLINK             symlink_req / name, name2      entry_rep
 *   READLINK            handle_req                     readlink_rep / data
 *   LINK                link_req / name                entry_rep
 *   UNLINK, RMDIR       named_req / name               dir_rep
 *   RENAME              rename_req / name, name2       rename_rep
 *   OPEN                open_req                       open_rep / data
 *   OPENDIR             open_req                       open_rep
 *   RELEASE, RELEASEDIR node_req                       -
 *   READDIR             readdir_req                    readdir_rep / dirents
 *   STATFS              handle_req                     statfs_rep
 *   FSYNC, FSYNCDIR     fsync_req                      -
 *   FALLOCATE           fallocate_req                  -
 *   SETXATTR            setxattr_req / name, data      -
 *   GETXATTR            getxattr_req / name            xattr_rep / data
 *   LISTXATTR           listxattr_req                  xattr_rep / data
 *   REMOVEXATTR         removexattr_req / name         -
 *   FORGET              forget_req / forgets           -
 *   COPY_FILE_RANGE     copy_req                       copy_rep
 *   LSEEK               lseek_req                      lseek_rep
 *   NOTIFY (agent)      notify_req / name              (none: not answered)
 *   REGISTER_REGION     region_req                     -
 *   UNREGISTER_REGION   unregion_req                   -
 *   BATCH_PULL, _PUSH   batch_req / segs               batch_rep / statuses
 *   DATA_WRITE          data_req / data (length)       -
 *   DATA_READ           data_req                       - / data (length)
 */
#ifndef BCP_CODEC_H
#define BCP_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include "bcp_wire.h"

/* API field kinds: as on the wire, host-endian, padding dropped. */
#define BCP_AT_U16(n)	uint16_t n;
#define BCP_AT_U32(n)	uint32_t n;
#define BCP_AT_U64(n)	uint64_t n;
#define BCP_AT_S32(n)	int32_t n;
#define BCP_AT_S64(n)	int64_t n;
#define BCP_AT_PAD16(n)
#define BCP_AT_PAD32(n)
#define BCP_AT_B16(n)	uint8_t n[16];
#define BCP_AT_B32(n)	uint8_t n[32];
#define BCP_AT_B64(n)	uint8_t n[64];
#define BCP_AT_ATTR(n)	struct bcp_attr n;
#define BCP_AT_ENTRY(n)	struct bcp_entry n;
#define BCP_AFIELD(k, n) BCP_AT_##k(n)
#define BCP_ASTRUCT(name, FIELDS, size) \
	struct bcp_##name { FIELDS(BCP_AFIELD) };
BCP_MSGS(BCP_ASTRUCT)

/*
 * Per-struct converters, generated from the lists.  bcp_enc_NAME() writes
 * the wire form (padding zeroed); bcp_dec_NAME() reads it and returns
 * -EBADMSG when a padding field is not zero.  wire need not be aligned.
 */
#define BCP_CONV_DECL(name, FIELDS, size) \
	void bcp_enc_##name(void *wire, const struct bcp_##name *in); \
	int bcp_dec_##name(const void *wire, struct bcp_##name *out);
BCP_MSGS(BCP_CONV_DECL)

/* Why a frame was rejected: one specific reason per check. */
enum bcp_err {
	BCP_E_OK = 0,
	BCP_E_TRUNCATED,	/* fewer bytes than the header says */
	BCP_E_TRAILING,		/* more bytes than the message describes */
	BCP_E_FRAME_TOO_LONG,	/* payload_len over the frame limit */
	BCP_E_BAD_MAGIC,
	BCP_E_BAD_VERSION,
	BCP_E_BAD_OPCODE,
	BCP_E_BAD_FLAGS,	/* unknown header flag bits */
	BCP_E_BAD_PADDING,	/* a padding field is not zero */
	BCP_E_BODY_SHORT,	/* payload shorter than the opcode's body */
	BCP_E_ERROR_WITH_BODY,	/* status < 0 but a payload follows */
	BCP_E_BAD_STATUS,	/* request with status != 0, or status > 0 */
	BCP_E_NAME_EMPTY,
	BCP_E_NAME_TOO_LONG,
	BCP_E_NAME_SLASH,
	BCP_E_NAME_DOT,		/* "." or ".." */
	BCP_E_NAME_NUL,
	BCP_E_TARGET_TOO_LONG,	/* symlink target */
	BCP_E_TARGET_EMPTY,
	BCP_E_TARGET_NUL,
	BCP_E_XATTR_NAME,	/* empty, too long or holds NUL */
	BCP_E_XATTR_VALUE_TOO_LONG,
	BCP_E_SEG_COUNT,	/* 0 or over BCP_SEGS_MAX */
	BCP_E_SEG_LENGTH,	/* 0 or over BCP_SEG_LEN_MAX */
	BCP_E_OFFSET_OVERFLOW,	/* offset + length wraps or passes 2^63 */
	BCP_E_REGION_RANGE,	/* region_off + length outside the region */
	BCP_E_FORGET_COUNT,	/* also the entries of a REBIND */
	BCP_E_DIRENT,		/* a directory entry runs past the frame */
	BCP_E_BAD_FIELD,	/* a field outside its documented values */
	BCP_E_COUNT_MISMATCH,	/* count disagrees with the tail's length */
	BCP_E__MAX
};

/* A short, stable English phrase for a reason; never NULL. */
const char *bcp_err_str(enum bcp_err why);


/*
 * One message.  For bcp_decode() the tails point into the frame (valid as
 * long as the frame buffer is); for bcp_encode() they are the caller's.
 */
struct bcp_msg {
	struct bcp_hdr hdr;
	union {
		struct bcp_hello_req hello_req;
		struct bcp_hello_rep hello_rep;
		struct bcp_auth_req auth_req;
		struct bcp_auth_rep auth_rep;
		struct bcp_attach_req attach_req;
		struct bcp_named_req named_req;
		struct bcp_entry_rep entry_rep;
		struct bcp_dir_rep dir_rep;
		struct bcp_rename_rep rename_rep;
		struct bcp_node_req node_req;
		struct bcp_attr_rep attr_rep;
		struct bcp_setattr_req setattr_req;
		struct bcp_create_req create_req;
		struct bcp_create_rep create_rep;
		struct bcp_mkdir_req mkdir_req;
		struct bcp_mknod_req mknod_req;
		struct bcp_symlink_req symlink_req;
		struct bcp_handle_req handle_req;
		struct bcp_readlink_rep readlink_rep;
		struct bcp_link_req link_req;
		struct bcp_rename_req rename_req;
		struct bcp_open_req open_req;
		struct bcp_open_rep open_rep;
		struct bcp_readdir_req readdir_req;
		struct bcp_readdir_rep readdir_rep;
		struct bcp_statfs_rep statfs_rep;
		struct bcp_fsync_req fsync_req;
		struct bcp_fallocate_req fallocate_req;
		struct bcp_setxattr_req setxattr_req;
		struct bcp_getxattr_req getxattr_req;
		struct bcp_listxattr_req listxattr_req;
		struct bcp_xattr_rep xattr_rep;
		struct bcp_removexattr_req removexattr_req;
		struct bcp_forget_req forget_req;
		struct bcp_copy_req copy_req;
		struct bcp_copy_rep copy_rep;
		struct bcp_lseek_req lseek_req;
		struct bcp_lseek_rep lseek_rep;
		struct bcp_rebind_req rebind_req;
		struct bcp_reopen_req reopen_req;
		struct bcp_notify_req notify_req;
		struct bcp_region_req region_req;
		struct bcp_unregion_req unregion_req;
		struct bcp_batch_req batch_req;
		struct bcp_batch_rep batch_rep;
		struct bcp_data_req data_req;
	} u;
	/* name[len] and name2[len] as the body's length fields say; no NUL */
	const char *name;
	const char *name2;
	/* xattr value or list, readlink target, DATA_WRITE/DATA_READ bytes */
	const void *data;
	uint32_t data_len;
	/*
	 * Arrays.  Decode: items points at count wire items inside the frame;
	 * read them with bcp_msg_seg() and friends.  Encode: set the one
	 * host-endian array that fits the opcode (segs, statuses, forgets,
	 * rebinds) or,
	 * for READDIR replies, dirents/dirents_len as built by
	 * bcp_dirent_put(); count is taken from the body.
	 */
	const void *items;
	const struct bcp_seg *segs;
	const int32_t *statuses;
	const struct bcp_forget_one *forgets;
	const struct bcp_rebind_one *rebinds;
	const void *dirents;
	uint32_t dirents_len;
};

/* Fill hdr for a request/reply; the caller then sets the body. */
void bcp_msg_init(struct bcp_msg *m, uint16_t opcode, uint64_t req_id);
void bcp_msg_init_reply(struct bcp_msg *m, const struct bcp_msg *req,
			int32_t status);

/*
 * Validate a header alone (as a stream reader does before reading the
 * payload).  buf holds at least BCP_HDR_SIZE bytes.  max_frame bounds
 * header + payload.  Returns 0, or -errno with *why set:
 *   -EPROTO (magic, version), -EMSGSIZE (too long), -EBADMSG (other).
 */
int bcp_hdr_check(const void *buf, size_t max_frame, struct bcp_hdr *out,
		  enum bcp_err *why);

/*
 * Decode and validate a whole frame of len bytes (header included).
 * Returns 0 or -errno with *why set: -EPROTO, -EMSGSIZE, -EBADMSG,
 * -ENAMETOOLONG, -EINVAL, -EOVERFLOW, -E2BIG (counts over limits).
 * Region bounds are not known here: see bcp_seg_check().
 */
int bcp_decode(const void *frame, size_t len, struct bcp_msg *m,
	       enum bcp_err *why);

/*
 * Encode m into buf (capacity cap).  Returns the frame length or -errno:
 * -EMSGSIZE when it does not fit, -EINVAL when m breaks a limit (the
 * encoder never emits what bcp_decode() would reject).
 */
int bcp_encode(void *buf, size_t cap, const struct bcp_msg *m);

/*
 * As bcp_encode(), but stop before m->data (DATA_WRITE and DATA_READ
 * bytes, xattr values, readlink targets): the header's payload_len counts
 * them, and the caller sends m->data_len bytes of m->data right after the
 * returned length (e.g. with bcp_frame_sendv), sparing a copy of bulk data.
 */
int bcp_encode_head(void *buf, size_t cap, const struct bcp_msg *m);

/* Item accessors for a decoded message; i < count is the caller's duty. */
void bcp_msg_seg(const struct bcp_msg *m, uint32_t i, struct bcp_seg *out);
int32_t bcp_msg_status(const struct bcp_msg *m, uint32_t i);
void bcp_msg_forget(const struct bcp_msg *m, uint32_t i,
		    struct bcp_forget_one *out);
void bcp_msg_rebind(const struct bcp_msg *m, uint32_t i,
		    struct bcp_rebind_one *out);

/* Directory entries of a decoded READDIR reply. */
struct bcp_dirent_iter {
	uint32_t idx;
	size_t off;
};
struct bcp_dirent_view {
	struct bcp_dirent d;		/* cookie, ino, type, name_len */
	struct bcp_entry entry;		/* only with BCP_READDIR_PLUS */
	const char *name;		/* not NUL-terminated */
};
/* Returns 1 with *out filled, 0 at the end. */
int bcp_dirent_next(const struct bcp_msg *m, int plus,
		    struct bcp_dirent_iter *it, struct bcp_dirent_view *out);
/*
 * Append one entry to a READDIR reply tail being built in buf[cap] at *off.
 * Returns 0, or -ENOSPC when it does not fit (nothing written).
 */
int bcp_dirent_put(void *buf, size_t cap, size_t *off, int plus,
		   const struct bcp_dirent *d, const struct bcp_entry *entry,
		   const char *name);
/* Bytes one entry takes on the wire. */
size_t bcp_dirent_size(int plus, size_t name_len);

/* Name checks shared by codec and agent.  0 or -errno, *why set. */
int bcp_name_check(const char *name, size_t len, enum bcp_err *why);
int bcp_xattr_name_check(const char *name, size_t len, enum bcp_err *why);

/*
 * A segment against its region: offset + length must not wrap, and
 * region_off + length must lie within region_len.  0 or -errno.
 */
int bcp_seg_check(const struct bcp_seg *s, uint64_t region_len,
		  enum bcp_err *why);

/* Human-readable opcode name ("LOOKUP"), or "?" */
const char *bcp_op_name(uint16_t opcode);

#endif /* BCP_CODEC_H */
