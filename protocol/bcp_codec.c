/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_codec.c - the one place where BCP messages become bytes and back.
 *
 * The per-struct converters are generated from the field lists of
 * bcp_wire.h.  On top of them sits one table per opcode (which body a
 * request and a reply carry) and one description of each message's tail
 * (names, data, arrays), computed from the body by tail_spec().  Both the
 * decoder and the encoder validate through the same functions, so the
 * encoder can never produce a frame the decoder refuses, and the fuzzer can
 * check that decode(encode(decode(x))) == decode(x).
 *
 * Nothing here allocates or keeps state: every function is safe to call
 * from any thread.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "bcp_codec.h"

/* Linux values of the few kernel constants whose ranges are checked here. */
#define BCP_XATTR_CREATE	0x1u
#define BCP_XATTR_REPLACE	0x2u
#define BCP_FALLOC_ALL		0x7fu	/* FALLOC_FL_KEEP_SIZE .. UNSHARE */
#define BCP_SEEK_WHENCE_MAX	4	/* SEEK_SET .. SEEK_HOLE */
#define BCP_ERRNO_MAX		4095
#define BCP_HELLO_FRAME_MIN	4096
#define BCP_NSEC_MAX		999999999u
#define BCP_DTYPE_MAX		15u

/* ---- little-endian accessors; the wire need not be aligned ---- */

static inline void put_le16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t get_le16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t get_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* ---- generated per-struct converters ---- */

#define OFF(n) (p + offsetof(bcp_wt, n))

#define ENC_U16(n)	put_le16(OFF(n), in->n);
#define ENC_U32(n)	put_le32(OFF(n), in->n);
#define ENC_U64(n)	put_le64(OFF(n), in->n);
#define ENC_S32(n)	put_le32(OFF(n), (uint32_t)in->n);
#define ENC_S64(n)	put_le64(OFF(n), (uint64_t)in->n);
#define ENC_PAD16(n)	put_le16(OFF(n), 0);
#define ENC_PAD32(n)	put_le32(OFF(n), 0);
#define ENC_B16(n)	memcpy(OFF(n), in->n, 16);
#define ENC_B32(n)	memcpy(OFF(n), in->n, 32);
#define ENC_B64(n)	memcpy(OFF(n), in->n, 64);
#define ENC_ATTR(n)	bcp_enc_attr(OFF(n), &in->n);
#define ENC_ENTRY(n)	bcp_enc_entry(OFF(n), &in->n);
#define ENC_FIELD(k, n)	ENC_##k(n)

#define DEC_U16(n)	out->n = get_le16(OFF(n));
#define DEC_U32(n)	out->n = get_le32(OFF(n));
#define DEC_U64(n)	out->n = get_le64(OFF(n));
#define DEC_S32(n)	out->n = (int32_t)get_le32(OFF(n));
#define DEC_S64(n)	out->n = (int64_t)get_le64(OFF(n));
#define DEC_PAD16(n)	bad |= get_le16(OFF(n)) != 0;
#define DEC_PAD32(n)	bad |= get_le32(OFF(n)) != 0;
#define DEC_B16(n)	memcpy(out->n, OFF(n), 16);
#define DEC_B32(n)	memcpy(out->n, OFF(n), 32);
#define DEC_B64(n)	memcpy(out->n, OFF(n), 64);
#define DEC_ATTR(n)	bad |= bcp_dec_attr(OFF(n), &out->n) != 0;
#define DEC_ENTRY(n)	bad |= bcp_dec_entry(OFF(n), &out->n) != 0;
#define DEC_FIELD(k, n)	DEC_##k(n)

#define GEN_CONV(name, FIELDS, size)					\
void bcp_enc_##name(void *wire, const struct bcp_##name *in)		\
{									\
	typedef struct bcp_w_##name bcp_wt;				\
	uint8_t *p = wire;						\
									\
	FIELDS(ENC_FIELD)						\
}									\
									\
int bcp_dec_##name(const void *wire, struct bcp_##name *out)		\
{									\
	typedef struct bcp_w_##name bcp_wt;				\
	const uint8_t *p = wire;					\
	int bad = 0;							\
									\
	FIELDS(DEC_FIELD)						\
	return bad ? -EBADMSG : 0;					\
}
BCP_MSGS(GEN_CONV)

/* The field lists must add up to the struct sizes: no hidden padding. */
#define SZ_U16	2 +
#define SZ_U32	4 +
#define SZ_U64	8 +
#define SZ_S32	4 +
#define SZ_S64	8 +
#define SZ_PAD16 2 +
#define SZ_PAD32 4 +
#define SZ_B16	16 +
#define SZ_B32	32 +
#define SZ_B64	64 +
#define SZ_ATTR	88 +
#define SZ_ENTRY 168 +
#define SZ_FIELD(k, n) SZ_##k
#define GEN_SIZE_ASSERT(name, FIELDS, size)				\
	_Static_assert(FIELDS(SZ_FIELD) 0 == (size),			\
		       "fields of " #name " add up to its size");
BCP_MSGS(GEN_SIZE_ASSERT)

/* ---- bodies and opcodes ---- */

#define GEN_BODY_ENUM(name, FIELDS, size) BB_##name,
enum bcp_body { BB_NONE = 0, BCP_MSGS(GEN_BODY_ENUM) BB__MAX };

#define GEN_BODY_SIZE(name, FIELDS, size) [BB_##name] = (size),
static const uint16_t body_size[BB__MAX] = { BCP_MSGS(GEN_BODY_SIZE) };

/* Typed converters behind one signature; the union members share &m->u. */
#define GEN_ANY(name, FIELDS, size)					\
static void enc_any_##name(void *wire, const void *in)			\
{									\
	bcp_enc_##name(wire, in);					\
}									\
static int dec_any_##name(const void *wire, void *out)			\
{									\
	return bcp_dec_##name(wire, out);				\
}
BCP_MSGS(GEN_ANY)

#define GEN_ENC_TAB(name, FIELDS, size) [BB_##name] = enc_any_##name,
#define GEN_DEC_TAB(name, FIELDS, size) [BB_##name] = dec_any_##name,
static void (*const body_enc[BB__MAX])(void *, const void *) = {
	BCP_MSGS(GEN_ENC_TAB)
};
static int (*const body_dec[BB__MAX])(const void *, void *) = {
	BCP_MSGS(GEN_DEC_TAB)
};

struct op_desc {
	const char *name;
	uint8_t req;	/* enum bcp_body */
	uint8_t rep;
};

#define OPD(op, rq, rp) [BCP_OP_##op] = { #op, BB_##rq, BB_##rp }
static const struct op_desc op_tab[BCP_OP_MAX] = {
	OPD(HELLO, hello_req, hello_rep),
	OPD(AUTH, auth_req, auth_rep),
	OPD(DATA_ATTACH, attach_req, NONE),
	OPD(PING, NONE, NONE),
	OPD(LOOKUP, named_req, entry_rep),
	OPD(GETATTR, node_req, attr_rep),
	OPD(SETATTR, setattr_req, attr_rep),
	OPD(CREATE, create_req, create_rep),
	OPD(MKDIR, mkdir_req, entry_rep),
	OPD(MKNOD, mknod_req, entry_rep),
	OPD(SYMLINK, symlink_req, entry_rep),
	OPD(READLINK, handle_req, readlink_rep),
	OPD(LINK, link_req, entry_rep),
	OPD(UNLINK, named_req, dir_rep),
	OPD(RMDIR, named_req, dir_rep),
	OPD(RENAME, rename_req, rename_rep),
	OPD(OPEN, open_req, open_rep),
	OPD(RELEASE, node_req, NONE),
	OPD(OPENDIR, open_req, open_rep),
	OPD(RELEASEDIR, node_req, NONE),
	OPD(READDIR, readdir_req, readdir_rep),
	OPD(STATFS, handle_req, statfs_rep),
	OPD(FSYNC, fsync_req, NONE),
	OPD(FSYNCDIR, fsync_req, NONE),
	OPD(FALLOCATE, fallocate_req, NONE),
	OPD(SETXATTR, setxattr_req, NONE),
	OPD(GETXATTR, getxattr_req, xattr_rep),
	OPD(LISTXATTR, listxattr_req, xattr_rep),
	OPD(REMOVEXATTR, removexattr_req, NONE),
	OPD(FORGET, forget_req, NONE),
	OPD(COPY_FILE_RANGE, copy_req, copy_rep),
	OPD(LSEEK, lseek_req, lseek_rep),
	OPD(REBIND, rebind_req, batch_rep),
	OPD(REOPEN, reopen_req, open_rep),
	OPD(NOTIFY, notify_req, NONE),
	OPD(REGISTER_REGION, region_req, NONE),
	OPD(UNREGISTER_REGION, unregion_req, NONE),
	OPD(BATCH_PULL, batch_req, batch_rep),
	OPD(BATCH_PUSH, batch_req, batch_rep),
	OPD(DATA_WRITE, data_req, NONE),
	OPD(DATA_READ, data_req, NONE),
};

static const struct op_desc *op_get(uint16_t opcode)
{
	if (opcode >= BCP_OP_MAX || !op_tab[opcode].name)
		return NULL;
	return &op_tab[opcode];
}

const char *bcp_op_name(uint16_t opcode)
{
	const struct op_desc *d = op_get(opcode);

	return d ? d->name : "?";
}

/* ---- reasons ---- */

static const char *const err_str[BCP_E__MAX] = {
	[BCP_E_OK] = "ok",
	[BCP_E_TRUNCATED] = "truncated frame",
	[BCP_E_TRAILING] = "trailing bytes after the message",
	[BCP_E_FRAME_TOO_LONG] = "frame too long",
	[BCP_E_BAD_MAGIC] = "bad magic",
	[BCP_E_BAD_VERSION] = "unsupported protocol version",
	[BCP_E_BAD_OPCODE] = "unknown opcode",
	[BCP_E_BAD_FLAGS] = "unknown or misplaced header flags",
	[BCP_E_BAD_PADDING] = "non-zero padding",
	[BCP_E_BODY_SHORT] = "payload shorter than the message body",
	[BCP_E_ERROR_WITH_BODY] = "error reply with a payload",
	[BCP_E_BAD_STATUS] = "status not allowed here",
	[BCP_E_NAME_EMPTY] = "empty name",
	[BCP_E_NAME_TOO_LONG] = "name too long",
	[BCP_E_NAME_SLASH] = "name contains '/'",
	[BCP_E_NAME_DOT] = "name is \".\" or \"..\"",
	[BCP_E_NAME_NUL] = "name contains NUL",
	[BCP_E_TARGET_TOO_LONG] = "symlink target too long",
	[BCP_E_TARGET_EMPTY] = "empty symlink target",
	[BCP_E_TARGET_NUL] = "symlink target contains NUL",
	[BCP_E_XATTR_NAME] = "bad xattr name",
	[BCP_E_XATTR_VALUE_TOO_LONG] = "xattr value too long",
	[BCP_E_SEG_COUNT] = "bad segment count",
	[BCP_E_SEG_LENGTH] = "bad segment length",
	[BCP_E_OFFSET_OVERFLOW] = "offset + length overflows",
	[BCP_E_REGION_RANGE] = "segment outside its region",
	[BCP_E_FORGET_COUNT] = "bad forget count",
	[BCP_E_DIRENT] = "directory entry runs past the frame",
	[BCP_E_BAD_FIELD] = "field outside its documented values",
	[BCP_E_COUNT_MISMATCH] = "count disagrees with the payload",
};

const char *bcp_err_str(enum bcp_err why)
{
	if ((unsigned int)why >= BCP_E__MAX || !err_str[why])
		return "unknown reason";
	return err_str[why];
}

/* Record a reason; returns its errno (negative). */
static int fail(enum bcp_err *why, enum bcp_err reason, int err)
{
	*why = reason;
	return err;
}

/* ---- names ---- */

int bcp_name_check(const char *name, size_t len, enum bcp_err *why)
{
	enum bcp_err dummy;

	if (!why)
		why = &dummy;
	if (len == 0)
		return fail(why, BCP_E_NAME_EMPTY, -EINVAL);
	if (len > BCP_NAME_MAX)
		return fail(why, BCP_E_NAME_TOO_LONG, -ENAMETOOLONG);
	if (memchr(name, '\0', len))
		return fail(why, BCP_E_NAME_NUL, -EINVAL);
	if (memchr(name, '/', len))
		return fail(why, BCP_E_NAME_SLASH, -EINVAL);
	if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
		return fail(why, BCP_E_NAME_DOT, -EINVAL);
	*why = BCP_E_OK;
	return 0;
}

/* A directory entry's name: as bcp_name_check() but "." and ".." pass. */
static int dirent_name_check(const char *name, size_t len, enum bcp_err *why)
{
	if (name && (len == 1 || len == 2) && name[0] == '.' &&
	    (len == 1 || name[1] == '.')) {
		*why = BCP_E_OK;
		return 0;
	}
	return bcp_name_check(name, len, why);
}

int bcp_xattr_name_check(const char *name, size_t len, enum bcp_err *why)
{
	enum bcp_err dummy;

	if (!why)
		why = &dummy;
	if (len == 0 || memchr(name, '\0', len))
		return fail(why, BCP_E_XATTR_NAME, -EINVAL);
	if (len > BCP_XATTR_NAME_MAX)
		return fail(why, BCP_E_XATTR_NAME, -ENAMETOOLONG);
	*why = BCP_E_OK;
	return 0;
}

static int target_check(const char *t, size_t len, enum bcp_err *why)
{
	if (len == 0)
		return fail(why, BCP_E_TARGET_EMPTY, -EINVAL);
	if (len > BCP_SYMLINK_MAX)
		return fail(why, BCP_E_TARGET_TOO_LONG, -ENAMETOOLONG);
	if (memchr(t, '\0', len))
		return fail(why, BCP_E_TARGET_NUL, -EINVAL);
	return 0;
}

/* ---- segments ---- */

/* offset + length must stay within [0, INT64_MAX]. */
static bool range_overflows(uint64_t off, uint64_t len)
{
	return off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off;
}

static int seg_fields_check(const struct bcp_seg *s, enum bcp_err *why)
{
	if (s->length == 0 || s->length > BCP_SEG_LEN_MAX)
		return fail(why, BCP_E_SEG_LENGTH, -EINVAL);
	if (range_overflows(s->offset, s->length) ||
	    s->region_off > UINT64_MAX - s->length)
		return fail(why, BCP_E_OFFSET_OVERFLOW, -EOVERFLOW);
	return 0;
}

int bcp_seg_check(const struct bcp_seg *s, uint64_t region_len,
		  enum bcp_err *why)
{
	enum bcp_err dummy;
	int ret;

	if (!why)
		why = &dummy;
	ret = seg_fields_check(s, why);
	if (ret)
		return ret;
	if (s->region_off > region_len ||
	    s->length > region_len - s->region_off)
		return fail(why, BCP_E_REGION_RANGE, -EFAULT);
	*why = BCP_E_OK;
	return 0;
}

/* ---- message init ---- */

void bcp_msg_init(struct bcp_msg *m, uint16_t opcode, uint64_t req_id)
{
	memset(m, 0, sizeof(*m));
	m->hdr.magic = BCP_MAGIC;
	m->hdr.version = BCP_VERSION_MAX;
	m->hdr.opcode = opcode;
	m->hdr.req_id = req_id;
}

void bcp_msg_init_reply(struct bcp_msg *m, const struct bcp_msg *req,
			int32_t status)
{
	uint16_t version = req->hdr.version;

	bcp_msg_init(m, req->hdr.opcode, req->hdr.req_id);
	if (version >= BCP_VERSION_MIN && version <= BCP_VERSION_MAX)
		m->hdr.version = version;
	m->hdr.flags = BCP_HF_REPLY;
	m->hdr.status = status;
}

/* ---- header ---- */

static size_t frame_limit(uint16_t opcode, bool reply)
{
	if ((opcode == BCP_OP_DATA_WRITE && !reply) ||
	    (opcode == BCP_OP_DATA_READ && reply))
		return BCP_DATA_FRAME_MAX;
	return BCP_FRAME_MAX;
}

/* Header rules shared by bcp_hdr_check() and bcp_encode(). */
static int hdr_rules(const struct bcp_hdr *h, size_t max_frame,
		     enum bcp_err *why)
{
	bool reply = h->flags & BCP_HF_REPLY;
	size_t limit;

	if (h->magic != BCP_MAGIC)
		return fail(why, BCP_E_BAD_MAGIC, -EPROTO);
	if (h->version < BCP_VERSION_MIN || h->version > BCP_VERSION_MAX)
		return fail(why, BCP_E_BAD_VERSION, -EPROTO);
	if (!op_get(h->opcode))
		return fail(why, BCP_E_BAD_OPCODE, -EBADMSG);
	if (h->flags & ~BCP_HF_ALL)
		return fail(why, BCP_E_BAD_FLAGS, -EBADMSG);
	/* a descriptor rides only with a shm REGISTER_REGION request */
	if ((h->flags & BCP_HF_FD) &&
	    (reply || h->opcode != BCP_OP_REGISTER_REGION))
		return fail(why, BCP_E_BAD_FLAGS, -EBADMSG);
	if ((h->flags & BCP_HF_REPLAY) && reply)
		return fail(why, BCP_E_BAD_FLAGS, -EBADMSG);
	limit = frame_limit(h->opcode, reply);
	if (max_frame < limit)
		limit = max_frame;
	if (limit < BCP_HDR_SIZE || h->payload_len > limit - BCP_HDR_SIZE)
		return fail(why, BCP_E_FRAME_TOO_LONG, -EMSGSIZE);
	if (!reply && h->status != 0)
		return fail(why, BCP_E_BAD_STATUS, -EBADMSG);
	if (reply && (h->status > 0 || h->status < -BCP_ERRNO_MAX))
		return fail(why, BCP_E_BAD_STATUS, -EBADMSG);
	if (h->status < 0 && h->payload_len != 0)
		return fail(why, BCP_E_ERROR_WITH_BODY, -EBADMSG);
	return 0;
}

int bcp_hdr_check(const void *buf, size_t max_frame, struct bcp_hdr *out,
		  enum bcp_err *why)
{
	struct bcp_hdr h;
	enum bcp_err dummy;
	int bad, ret;

	if (!why)
		why = &dummy;
	bad = bcp_dec_hdr(buf, &h);
	/* magic and version first: a stranger is not a padding problem */
	ret = hdr_rules(&h, max_frame, why);
	if (ret)
		return ret;
	if (bad)
		return fail(why, BCP_E_BAD_PADDING, -EBADMSG);
	if (out)
		*out = h;
	*why = BCP_E_OK;
	return 0;
}

/* ---- tails ---- */

enum name_kind { NK_NONE, NK_NAME, NK_TARGET, NK_XATTR };
enum data_kind { DK_NONE, DK_EXACT, DK_ZERO_OR_EXACT, DK_REST };
enum item_kind {
	IK_NONE, IK_SEG, IK_STATUS, IK_FORGET, IK_REBIND, IK_DIRENT
};

/* What follows a message's body, as its body fields describe it. */
struct tail_spec {
	uint8_t name_kind, name2_kind, data_kind, item_kind;
	uint32_t name_len, name2_len;
	uint32_t data_len;	/* DK_EXACT, DK_ZERO_OR_EXACT */
	uint32_t count;		/* items */
	size_t items_len;	/* wire bytes of the items (not dirents) */
	uint8_t items_data;	/* bytes after the items: enum items_data */
};

/* What follows a message's items (BCP_BATCH_INLINE). */
enum items_data {
	ID_NONE,	/* nothing */
	ID_EXACT,	/* data_len bytes (a pull's reply) */
	ID_SEGS,	/* the segments' lengths added up (a push) */
};

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/*
 * Check the body's fields and describe its tail.  Reply bodies of an error
 * status never get here.
 */
static int body_rules(const struct bcp_msg *m, bool reply,
		      struct tail_spec *t, enum bcp_err *why)
{
	const uint16_t op = m->hdr.opcode;

	memset(t, 0, sizeof(*t));
	if (reply) {
		switch (op) {
		case BCP_OP_HELLO: {
			const struct bcp_hello_rep *r = &m->u.hello_rep;

			if (r->version < BCP_VERSION_MIN ||
			    r->version > BCP_VERSION_MAX ||
			    r->max_segs == 0 || r->max_segs > BCP_SEGS_MAX ||
			    r->max_frame < BCP_HELLO_FRAME_MIN ||
			    r->max_frame > BCP_FRAME_MAX ||
			    r->max_inflight == 0)
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			break;
		}
		case BCP_OP_AUTH:
			if (m->u.auth_rep.root <= 1)
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			break;
		case BCP_OP_LOOKUP:
		case BCP_OP_MKDIR:
		case BCP_OP_MKNOD:
		case BCP_OP_SYMLINK:
		case BCP_OP_LINK:
			if (m->u.entry_rep.entry.handle <= 1)
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			break;
		case BCP_OP_CREATE:
			if (m->u.create_rep.entry.handle <= 1 ||
			    (m->u.create_rep.open_flags &
			     ~(BCP_OPEN_KEEP_CACHE | BCP_OPEN_DIRECT_IO |
			       BCP_OPEN_CREATED)))
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			break;
		case BCP_OP_OPEN: {
			const struct bcp_open_rep *o = &m->u.open_rep;

			if ((o->open_flags &
			     ~(BCP_OPEN_KEEP_CACHE | BCP_OPEN_DIRECT_IO |
			       BCP_OPEN_DATA)) ||
			    (o->data_len && !(o->open_flags & BCP_OPEN_DATA)))
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			if (o->data_len > BCP_OPEN_PEEK_MAX)
				return fail(why, BCP_E_BAD_FIELD, -E2BIG);
			if (o->open_flags & BCP_OPEN_DATA) {
				t->data_kind = DK_EXACT;
				t->data_len = o->data_len;
			}
			break;
		}
		case BCP_OP_OPENDIR:
		case BCP_OP_REOPEN:
			if ((m->u.open_rep.open_flags &
			     ~(BCP_OPEN_KEEP_CACHE | BCP_OPEN_DIRECT_IO)) ||
			    m->u.open_rep.data_len)
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			break;
		case BCP_OP_READLINK:
			if (m->u.readlink_rep.len == 0)
				return fail(why, BCP_E_TARGET_EMPTY, -EINVAL);
			if (m->u.readlink_rep.len > BCP_SYMLINK_MAX)
				return fail(why, BCP_E_TARGET_TOO_LONG,
					    -ENAMETOOLONG);
			t->name_kind = NK_TARGET;
			t->name_len = m->u.readlink_rep.len;
			break;
		case BCP_OP_READDIR:
			if (m->u.readdir_rep.eof > 1)
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			t->item_kind = IK_DIRENT;
			t->count = m->u.readdir_rep.count;
			break;
		case BCP_OP_GETXATTR:
		case BCP_OP_LISTXATTR:
			if (m->u.xattr_rep.size > BCP_XATTR_VALUE_MAX)
				return fail(why, BCP_E_XATTR_VALUE_TOO_LONG,
					    -E2BIG);
			t->data_kind = DK_ZERO_OR_EXACT;
			t->data_len = m->u.xattr_rep.size;
			break;
		case BCP_OP_LSEEK:
			if (m->u.lseek_rep.offset < 0)
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			break;
		case BCP_OP_BATCH_PULL:
		case BCP_OP_BATCH_PUSH:
		case BCP_OP_REBIND:
			if (m->u.batch_rep.count == 0)
				return fail(why, BCP_E_SEG_COUNT, -EINVAL);
			if (m->u.batch_rep.count > (op == BCP_OP_REBIND ?
						    BCP_REBINDS_MAX :
						    BCP_SEGS_MAX))
				return fail(why, BCP_E_SEG_COUNT, -E2BIG);
			if (m->u.batch_rep.data_len &&
			    op != BCP_OP_BATCH_PULL)
				return fail(why, BCP_E_BAD_FIELD, -EINVAL);
			if (m->u.batch_rep.data_len > BCP_BATCH_INLINE_MAX)
				return fail(why, BCP_E_BAD_FIELD, -E2BIG);
			t->item_kind = IK_STATUS;
			t->count = m->u.batch_rep.count;
			t->items_len = round8((size_t)t->count * 4);
			t->items_data = ID_EXACT;
			t->data_len = m->u.batch_rep.data_len;
			break;
		case BCP_OP_DATA_READ:
			t->data_kind = DK_REST;
			break;
		default:
			break;
		}
		return 0;
	}

	switch (op) {
	case BCP_OP_HELLO:
		if (m->u.hello_req.ver_min == 0 ||
		    m->u.hello_req.ver_min > m->u.hello_req.ver_max)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	case BCP_OP_LOOKUP:
	case BCP_OP_UNLINK:
	case BCP_OP_RMDIR:
		t->name_kind = NK_NAME;
		t->name_len = m->u.named_req.name_len;
		break;
	case BCP_OP_SETATTR: {
		const struct bcp_setattr_req *s = &m->u.setattr_req;

		if ((s->valid & ~BCP_SETATTR_ALL) ||
		    ((s->valid & BCP_SETATTR_SIZE) &&
		     s->size > (uint64_t)INT64_MAX) ||
		    ((s->valid & BCP_SETATTR_ATIME) &&
		     s->atime_nsec > BCP_NSEC_MAX) ||
		    ((s->valid & BCP_SETATTR_MTIME) &&
		     s->mtime_nsec > BCP_NSEC_MAX))
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	}
	case BCP_OP_CREATE:
		t->name_kind = NK_NAME;
		t->name_len = m->u.create_req.name_len;
		break;
	case BCP_OP_MKDIR:
		t->name_kind = NK_NAME;
		t->name_len = m->u.mkdir_req.name_len;
		break;
	case BCP_OP_MKNOD:
		t->name_kind = NK_NAME;
		t->name_len = m->u.mknod_req.name_len;
		break;
	case BCP_OP_SYMLINK:
		t->name_kind = NK_NAME;
		t->name_len = m->u.symlink_req.name_len;
		t->name2_kind = NK_TARGET;
		t->name2_len = m->u.symlink_req.target_len;
		break;
	case BCP_OP_LINK:
		t->name_kind = NK_NAME;
		t->name_len = m->u.link_req.name_len;
		break;
	case BCP_OP_RENAME: {
		uint32_t f = m->u.rename_req.flags;

		if ((f & ~(BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE)) ||
		    f == (BCP_RENAME_NOREPLACE | BCP_RENAME_EXCHANGE))
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		t->name_kind = NK_NAME;
		t->name_len = m->u.rename_req.name_len;
		t->name2_kind = NK_NAME;
		t->name2_len = m->u.rename_req.newname_len;
		break;
	}
	case BCP_OP_OPEN:
	case BCP_OP_OPENDIR:
		if (m->u.open_req.peek > BCP_OPEN_PEEK_MAX ||
		    (op == BCP_OP_OPENDIR && m->u.open_req.peek))
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	case BCP_OP_READDIR:
		if (m->u.readdir_req.max_bytes == 0 ||
		    m->u.readdir_req.max_bytes > BCP_READDIR_MAX ||
		    (m->u.readdir_req.flags & ~BCP_READDIR_PLUS))
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	case BCP_OP_FSYNC:
	case BCP_OP_FSYNCDIR:
		if (m->u.fsync_req.datasync > 1)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	case BCP_OP_FALLOCATE: {
		const struct bcp_fallocate_req *f = &m->u.fallocate_req;

		if (f->length == 0 || (f->mode & ~BCP_FALLOC_ALL))
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		if (range_overflows(f->offset, f->length))
			return fail(why, BCP_E_OFFSET_OVERFLOW, -EOVERFLOW);
		break;
	}
	case BCP_OP_SETXATTR:
		if (m->u.setxattr_req.flags &
		    ~(BCP_XATTR_CREATE | BCP_XATTR_REPLACE))
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		if (m->u.setxattr_req.value_len > BCP_XATTR_VALUE_MAX)
			return fail(why, BCP_E_XATTR_VALUE_TOO_LONG, -E2BIG);
		t->name_kind = NK_XATTR;
		t->name_len = m->u.setxattr_req.name_len;
		t->data_kind = DK_EXACT;
		t->data_len = m->u.setxattr_req.value_len;
		break;
	case BCP_OP_GETXATTR:
		if (m->u.getxattr_req.size > BCP_XATTR_VALUE_MAX)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		t->name_kind = NK_XATTR;
		t->name_len = m->u.getxattr_req.name_len;
		break;
	case BCP_OP_LISTXATTR:
		if (m->u.listxattr_req.size > BCP_XATTR_LIST_MAX)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	case BCP_OP_REMOVEXATTR:
		t->name_kind = NK_XATTR;
		t->name_len = m->u.removexattr_req.name_len;
		break;
	case BCP_OP_NOTIFY: {
		const struct bcp_notify_req *n = &m->u.notify_req;
		int named = n->kind == BCP_NOTIFY_ENTRY ||
			    n->kind == BCP_NOTIFY_DELETE;

		if (n->kind < BCP_NOTIFY_INODE || n->kind > BCP_NOTIFY_BUSY ||
		    (!named && n->name_len) || (named && !n->name_len) ||
		    (n->kind == BCP_NOTIFY_INODE && n->offset < -1) ||
		    n->length < 0 || m->hdr.req_id != 0)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		if (named) {
			t->name_kind = NK_NAME;
			t->name_len = n->name_len;
		}
		break;
	}
	case BCP_OP_FORGET:
		if (m->u.forget_req.count == 0)
			return fail(why, BCP_E_FORGET_COUNT, -EINVAL);
		if (m->u.forget_req.count > BCP_FORGETS_MAX)
			return fail(why, BCP_E_FORGET_COUNT, -E2BIG);
		t->item_kind = IK_FORGET;
		t->count = m->u.forget_req.count;
		t->items_len = (size_t)t->count *
			       sizeof(struct bcp_w_forget_one);
		break;
	case BCP_OP_REBIND:
		if (m->u.rebind_req.flags != 0)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		if (m->u.rebind_req.count == 0)
			return fail(why, BCP_E_FORGET_COUNT, -EINVAL);
		if (m->u.rebind_req.count > BCP_REBINDS_MAX)
			return fail(why, BCP_E_FORGET_COUNT, -E2BIG);
		t->item_kind = IK_REBIND;
		t->count = m->u.rebind_req.count;
		t->items_len = (size_t)t->count *
			       sizeof(struct bcp_w_rebind_one);
		break;
	case BCP_OP_REOPEN:
		if (m->u.reopen_req.dir > 1 || m->u.reopen_req.fh == 0)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	case BCP_OP_COPY_FILE_RANGE: {
		const struct bcp_copy_req *c = &m->u.copy_req;

		if (c->flags != 0)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		if (range_overflows(c->off_in, c->length) ||
		    range_overflows(c->off_out, c->length))
			return fail(why, BCP_E_OFFSET_OVERFLOW, -EOVERFLOW);
		break;
	}
	case BCP_OP_LSEEK:
		if (m->u.lseek_req.whence > BCP_SEEK_WHENCE_MAX)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		break;
	case BCP_OP_REGISTER_REGION: {
		const struct bcp_region_req *r = &m->u.region_req;
		bool has_fd = m->hdr.flags & BCP_HF_FD;

		if (r->kind < BCP_REGION_SHM || r->kind > BCP_REGION_RDMA ||
		    r->length == 0)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		if (has_fd != (r->kind == BCP_REGION_SHM))
			return fail(why, BCP_E_BAD_FLAGS, -EBADMSG);
		break;
	}
	case BCP_OP_BATCH_PULL:
	case BCP_OP_BATCH_PUSH:
		if (m->u.batch_req.flags & ~BCP_BATCH_INLINE)
			return fail(why, BCP_E_BAD_FIELD, -EINVAL);
		if ((m->u.batch_req.flags & BCP_BATCH_INLINE) &&
		    op == BCP_OP_BATCH_PUSH)
			t->items_data = ID_SEGS;
		if (m->u.batch_req.count == 0)
			return fail(why, BCP_E_SEG_COUNT, -EINVAL);
		if (m->u.batch_req.count > BCP_SEGS_MAX)
			return fail(why, BCP_E_SEG_COUNT, -E2BIG);
		t->item_kind = IK_SEG;
		t->count = m->u.batch_req.count;
		t->items_len = (size_t)t->count * sizeof(struct bcp_w_seg);
		break;
	case BCP_OP_DATA_WRITE:
	case BCP_OP_DATA_READ: {
		const struct bcp_data_req *d = &m->u.data_req;

		if (d->length == 0 || d->length > BCP_SEG_LEN_MAX)
			return fail(why, BCP_E_SEG_LENGTH, -EINVAL);
		if (d->region_off > UINT64_MAX - d->length)
			return fail(why, BCP_E_OFFSET_OVERFLOW, -EOVERFLOW);
		if (op == BCP_OP_DATA_WRITE) {
			t->data_kind = DK_EXACT;
			t->data_len = d->length;
		}
		break;
	}
	default:
		break;
	}

	/* length fields of names, checked before the tail is looked at */
	if (t->name_kind == NK_NAME && t->name_len > BCP_NAME_MAX)
		return fail(why, BCP_E_NAME_TOO_LONG, -ENAMETOOLONG);
	if (t->name_kind == NK_NAME && t->name_len == 0)
		return fail(why, BCP_E_NAME_EMPTY, -EINVAL);
	if (t->name_kind == NK_XATTR &&
	    (t->name_len == 0 || t->name_len > BCP_XATTR_NAME_MAX))
		return fail(why, BCP_E_XATTR_NAME, t->name_len ?
			    -ENAMETOOLONG : -EINVAL);
	if (t->name2_kind == NK_NAME && t->name2_len > BCP_NAME_MAX)
		return fail(why, BCP_E_NAME_TOO_LONG, -ENAMETOOLONG);
	if (t->name2_kind == NK_NAME && t->name2_len == 0)
		return fail(why, BCP_E_NAME_EMPTY, -EINVAL);
	if (t->name2_kind == NK_TARGET && t->name2_len > BCP_SYMLINK_MAX)
		return fail(why, BCP_E_TARGET_TOO_LONG, -ENAMETOOLONG);
	if (t->name2_kind == NK_TARGET && t->name2_len == 0)
		return fail(why, BCP_E_TARGET_EMPTY, -EINVAL);
	return 0;
}

static int name_rules(uint8_t kind, const char *s, size_t len,
		      enum bcp_err *why)
{
	switch (kind) {
	case NK_NAME:
		return bcp_name_check(s, len, why);
	case NK_TARGET:
		return target_check(s, len, why);
	case NK_XATTR:
		return bcp_xattr_name_check(s, len, why);
	default:
		return 0;
	}
}

static int status_check(int32_t st, enum bcp_err *why)
{
	if (st > (int32_t)BCP_SEG_LEN_MAX || st < -BCP_ERRNO_MAX)
		return fail(why, BCP_E_BAD_FIELD, -EINVAL);
	return 0;
}

/*
 * Parse one directory entry at p[avail].  Returns the bytes it takes, or
 * -errno with *why set.
 */
static int dirent_parse(const uint8_t *p, size_t avail, bool plus,
			struct bcp_dirent_view *out, enum bcp_err *why)
{
	size_t fixed = plus ? sizeof(struct bcp_w_direntplus) :
			      sizeof(struct bcp_w_dirent);
	size_t size, i;
	int bad, ret;

	if (avail < fixed)
		return fail(why, BCP_E_DIRENT, -EBADMSG);
	memset(out, 0, sizeof(*out));
	if (plus) {
		struct bcp_direntplus dp;

		bad = bcp_dec_direntplus(p, &dp);
		out->d.cookie = dp.cookie;
		out->d.ino = dp.ino;
		out->d.type = dp.type;
		out->d.name_len = dp.name_len;
		out->entry = dp.entry;
	} else {
		bad = bcp_dec_dirent(p, &out->d);
	}
	size = fixed + round8(out->d.name_len);
	if (size > avail)
		return fail(why, BCP_E_DIRENT, -EBADMSG);
	out->name = (const char *)p + fixed;
	ret = dirent_name_check(out->name, out->d.name_len, why);
	if (ret)
		return ret;
	if (bad)
		return fail(why, BCP_E_BAD_PADDING, -EBADMSG);
	for (i = fixed + out->d.name_len; i < size; i++)
		if (p[i])
			return fail(why, BCP_E_BAD_PADDING, -EBADMSG);
	if (out->d.type > BCP_DTYPE_MAX)
		return fail(why, BCP_E_BAD_FIELD, -EINVAL);
	return (int)size;
}

static int dirents_walk(const uint8_t *p, size_t len, uint32_t count,
			bool plus, enum bcp_err *why)
{
	struct bcp_dirent_view v;
	size_t off = 0;
	uint32_t i;
	int ret;

	for (i = 0; i < count; i++) {
		ret = dirent_parse(p + off, len - off, plus, &v, why);
		if (ret < 0)
			return ret;
		off += (size_t)ret;
	}
	if (off != len)
		return fail(why, BCP_E_COUNT_MISMATCH, -EBADMSG);
	return 0;
}

/*
 * A READDIR reply does not say whether its entries are plus entries (the
 * request did): accept the tail if it is valid in either form.  A reader
 * iterating with the wrong form stops early, it never reads past the tail.
 */
static int dirents_check(const uint8_t *p, size_t len, uint32_t count,
			 enum bcp_err *why)
{
	enum bcp_err why_plus;
	int ret, ret_plus;

	ret = dirents_walk(p, len, count, false, why);
	if (!ret)
		return 0;
	ret_plus = dirents_walk(p, len, count, true, &why_plus);
	if (!ret_plus) {
		*why = BCP_E_OK;
		return 0;
	}
	/* report the form the length suggests */
	if (count && len >= (size_t)count * sizeof(struct bcp_w_direntplus)) {
		*why = why_plus;
		return ret_plus;
	}
	return ret;
}

/* Wire items (segs, statuses, forgets) in a tail or a caller's buffer. */
static int items_check(const struct tail_spec *t, const uint8_t *p,
		       enum bcp_err *why)
{
	struct bcp_seg s;
	uint32_t i;
	size_t j;
	int ret;

	switch (t->item_kind) {
	case IK_SEG:
		for (i = 0; i < t->count; i++) {
			if (bcp_dec_seg(p + (size_t)i * 32, &s))
				return fail(why, BCP_E_BAD_PADDING, -EBADMSG);
			ret = seg_fields_check(&s, why);
			if (ret)
				return ret;
		}
		break;
	case IK_STATUS:
		for (i = 0; i < t->count; i++) {
			ret = status_check((int32_t)get_le32(p + 4 * (size_t)i),
					   why);
			if (ret)
				return ret;
		}
		for (j = (size_t)t->count * 4; j < t->items_len; j++)
			if (p[j])
				return fail(why, BCP_E_BAD_PADDING, -EBADMSG);
		break;
	case IK_FORGET: {
		struct bcp_forget_one f;

		for (i = 0; i < t->count; i++)
			if (bcp_dec_forget_one(p + (size_t)i * 16, &f))
				return fail(why, BCP_E_BAD_PADDING, -EBADMSG);
		break;
	}
	case IK_REBIND:	/* no padding, every value allowed: nothing to check */
	default:
		break;
	}
	return 0;
}

/*
 * The bytes that follow the items (t->items_data): segments from the wire
 * (p) or the caller's (segs).  A push's lengths are checked here: each is
 * at most BCP_SEG_LEN_MAX already, so 1024 of them cannot overflow.
 */
static int items_data_len(const struct tail_spec *t, const uint8_t *p,
			  const struct bcp_seg *segs, size_t *out,
			  enum bcp_err *why)
{
	size_t sum = 0;
	uint32_t i;

	*out = 0;
	if (t->items_data == ID_EXACT) {
		*out = t->data_len;
	} else if (t->items_data == ID_SEGS) {
		for (i = 0; i < t->count; i++)
			sum += segs ? segs[i].length :
			       get_le32(p + (size_t)i * 32 + 16); /* length */
		if (sum > BCP_BATCH_INLINE_MAX)
			return fail(why, BCP_E_SEG_LENGTH, -E2BIG);
		*out = sum;
	}
	return 0;
}

/* ---- decode ---- */

int bcp_decode(const void *frame, size_t len, struct bcp_msg *m,
	       enum bcp_err *why)
{
	const uint8_t *p = frame;
	const struct op_desc *d;
	struct tail_spec t;
	enum bcp_err dummy;
	size_t plen, bsize, tlen, need, off;
	bool reply;
	uint8_t body;
	int ret;

	if (!why)
		why = &dummy;
	memset(m, 0, sizeof(*m));
	if (len < BCP_HDR_SIZE)
		return fail(why, BCP_E_TRUNCATED, -EBADMSG);
	ret = bcp_hdr_check(p, BCP_DATA_FRAME_MAX, &m->hdr, why);
	if (ret)
		return ret;
	plen = m->hdr.payload_len;
	if (len - BCP_HDR_SIZE < plen)
		return fail(why, BCP_E_TRUNCATED, -EBADMSG);
	if (len - BCP_HDR_SIZE > plen)
		return fail(why, BCP_E_TRAILING, -EBADMSG);
	reply = m->hdr.flags & BCP_HF_REPLY;
	if (m->hdr.status < 0)
		goto out_ok;	/* hdr_check: no payload */

	d = op_get(m->hdr.opcode);
	body = reply ? d->rep : d->req;
	bsize = body_size[body];
	p += BCP_HDR_SIZE;
	if (plen < bsize)
		return fail(why, BCP_E_BODY_SHORT, -EBADMSG);
	if (body != BB_NONE && body_dec[body](p, &m->u))
		return fail(why, BCP_E_BAD_PADDING, -EBADMSG);
	ret = body_rules(m, reply, &t, why);
	if (ret)
		return ret;

	p += bsize;
	tlen = plen - bsize;
	off = 0;
	if (t.data_kind == DK_REST) {
		m->data = p;
		m->data_len = (uint32_t)tlen;
		goto out_ok;
	}
	if (t.item_kind == IK_DIRENT) {
		ret = dirents_check(p, tlen, t.count, why);
		if (ret)
			return ret;
		m->items = p;
		m->dirents = p;
		m->dirents_len = (uint32_t)tlen;
		goto out_ok;
	}
	if (t.item_kind != IK_NONE) {
		if (tlen < t.items_len)
			return fail(why, BCP_E_COUNT_MISMATCH, -EBADMSG);
		ret = items_check(&t, p, why);
		if (ret)
			return ret;
		ret = items_data_len(&t, p, NULL, &need, why);
		if (ret)
			return ret;
		if (tlen != t.items_len + need)
			return fail(why, BCP_E_COUNT_MISMATCH, -EBADMSG);
		m->items = p;
		if (need) {
			m->data = p + t.items_len;
			m->data_len = (uint32_t)need;
		}
		goto out_ok;
	}

	need = (size_t)t.name_len + t.name2_len;
	if (t.data_kind == DK_EXACT)
		need += t.data_len;
	if (t.data_kind == DK_ZERO_OR_EXACT && tlen != 0)
		need += t.data_len;
	if (tlen < need)
		return fail(why, BCP_E_TRUNCATED, -EBADMSG);
	if (tlen > need)
		return fail(why, BCP_E_TRAILING, -EBADMSG);

	if (t.name_kind == NK_TARGET) {
		/* READLINK reply: the target is the data */
		ret = target_check((const char *)p, t.name_len, why);
		if (ret)
			return ret;
		m->data = p;
		m->data_len = t.name_len;
		goto out_ok;
	}
	if (t.name_kind != NK_NONE) {
		m->name = (const char *)p;
		ret = name_rules(t.name_kind, m->name, t.name_len, why);
		if (ret)
			return ret;
		off += t.name_len;
	}
	if (t.name2_kind != NK_NONE) {
		m->name2 = (const char *)p + off;
		ret = name_rules(t.name2_kind, m->name2, t.name2_len, why);
		if (ret)
			return ret;
		off += t.name2_len;
	}
	if (t.data_kind != DK_NONE && tlen > off) {
		m->data = p + off;
		m->data_len = (uint32_t)(tlen - off);
	}
out_ok:
	*why = BCP_E_OK;
	return 0;
}

/* ---- encode ---- */

/* The wire items of m into dst (or only checks them when dst is NULL). */
static int items_encode(const struct bcp_msg *m, const struct tail_spec *t,
			uint8_t *dst, enum bcp_err *why)
{
	uint32_t i;
	int ret;

	switch (t->item_kind) {
	case IK_SEG:
		if (!m->segs)
			break;
		for (i = 0; i < t->count; i++) {
			ret = seg_fields_check(&m->segs[i], why);
			if (ret)
				return ret;
			if (dst)
				bcp_enc_seg(dst + (size_t)i * 32, &m->segs[i]);
		}
		return 0;
	case IK_STATUS:
		if (!m->statuses)
			break;
		for (i = 0; i < t->count; i++) {
			ret = status_check(m->statuses[i], why);
			if (ret)
				return ret;
			if (dst)
				put_le32(dst + (size_t)i * 4,
					 (uint32_t)m->statuses[i]);
		}
		if (dst && t->items_len > (size_t)t->count * 4)
			memset(dst + (size_t)t->count * 4, 0,
			       t->items_len - (size_t)t->count * 4);
		return 0;
	case IK_FORGET:
		if (!m->forgets)
			break;
		if (dst)
			for (i = 0; i < t->count; i++)
				bcp_enc_forget_one(dst + (size_t)i * 16,
						   &m->forgets[i]);
		return 0;
	case IK_REBIND:
		if (!m->rebinds)
			break;
		if (dst)
			for (i = 0; i < t->count; i++)
				bcp_enc_rebind_one(dst + (size_t)i * 80,
						   &m->rebinds[i]);
		return 0;
	default:
		return 0;
	}
	/* no host array: items already holds wire items (a forwarded tail) */
	if (!m->items)
		return fail(why, BCP_E_COUNT_MISMATCH, -EINVAL);
	ret = items_check(t, m->items, why);
	if (ret)
		return ret;
	if (dst)
		memcpy(dst, m->items, t->items_len);
	return 0;
}

/*
 * Validate m as bcp_decode() would and compute the payload length, all
 * tails included.  *data_len is the byte count of m->data that goes last.
 */
static int encode_plan(const struct bcp_msg *m, struct bcp_hdr *h,
		       struct tail_spec *t, size_t *payload, size_t *data_len,
		       enum bcp_err *why)
{
	const struct op_desc *d;
	bool reply;
	uint8_t body;
	size_t plen;
	int ret;

	*h = m->hdr;
	h->magic = BCP_MAGIC;
	if (h->version == 0)
		h->version = BCP_VERSION_MAX;
	h->payload_len = 0;
	ret = hdr_rules(h, BCP_DATA_FRAME_MAX, why);
	if (ret)
		return -EINVAL;
	reply = h->flags & BCP_HF_REPLY;
	memset(t, 0, sizeof(*t));
	*data_len = 0;
	*payload = 0;
	if (h->status < 0)
		return 0;

	d = op_get(h->opcode);
	body = reply ? d->rep : d->req;
	plen = body_size[body];
	if (body_rules(m, reply, t, why))
		return -EINVAL;

	if (t->item_kind == IK_DIRENT) {
		if (m->dirents_len && !m->dirents)
			return -EINVAL;
		if (dirents_check(m->dirents, m->dirents_len, t->count, why))
			return -EINVAL;
		plen += m->dirents_len;
	} else if (t->item_kind != IK_NONE) {
		if (items_encode(m, t, NULL, why))
			return -EINVAL;
		plen += t->items_len;
		if (items_data_len(t, m->items, m->segs, data_len, why))
			return -EINVAL;
		if (m->data_len != *data_len || (m->data_len && !m->data))
			return fail(why, BCP_E_COUNT_MISMATCH, -EINVAL);
	} else if (t->name_kind == NK_TARGET) {
		if (m->data_len != t->name_len || !m->data ||
		    target_check(m->data, t->name_len, why))
			return -EINVAL;
		*data_len = t->name_len;
	} else {
		if (t->name_kind != NK_NONE) {
			if (!m->name || name_rules(t->name_kind, m->name,
						   t->name_len, why))
				return -EINVAL;
			plen += t->name_len;
		}
		if (t->name2_kind != NK_NONE) {
			if (!m->name2 || name_rules(t->name2_kind, m->name2,
						    t->name2_len, why))
				return -EINVAL;
			plen += t->name2_len;
		}
		switch (t->data_kind) {
		case DK_EXACT:
			if (m->data_len != t->data_len)
				return fail(why, BCP_E_COUNT_MISMATCH, -EINVAL);
			break;
		case DK_ZERO_OR_EXACT:
			if (m->data_len != 0 && m->data_len != t->data_len)
				return fail(why, BCP_E_COUNT_MISMATCH, -EINVAL);
			break;
		case DK_REST:
			break;
		default:
			if (m->data_len)
				return fail(why, BCP_E_TRAILING, -EINVAL);
			break;
		}
		if (m->data_len && !m->data)
			return -EINVAL;
		*data_len = m->data_len;
	}
	plen += *data_len;
	if (plen > frame_limit(h->opcode, reply) - BCP_HDR_SIZE)
		return fail(why, BCP_E_FRAME_TOO_LONG, -EMSGSIZE);
	*payload = plen;
	return 0;
}

/* Header, body and every tail but the trailing data; returns bytes. */
static size_t encode_head(uint8_t *p, const struct bcp_msg *m,
			  struct bcp_hdr *h, const struct tail_spec *t,
			  size_t payload)
{
	const struct op_desc *d = op_get(h->opcode);
	uint8_t body;
	size_t off = BCP_HDR_SIZE;
	enum bcp_err why;

	h->payload_len = (uint32_t)payload;
	bcp_enc_hdr(p, h);
	if (h->status < 0)
		return off;
	body = (h->flags & BCP_HF_REPLY) ? d->rep : d->req;
	if (body != BB_NONE)
		body_enc[body](p + off, &m->u);
	off += body_size[body];
	if (t->item_kind == IK_DIRENT) {
		if (m->dirents_len)
			memcpy(p + off, m->dirents, m->dirents_len);
		off += m->dirents_len;
	} else if (t->item_kind != IK_NONE) {
		items_encode(m, t, p + off, &why);
		off += t->items_len;
	} else if (t->name_kind != NK_TARGET) {
		if (t->name_kind != NK_NONE) {
			memcpy(p + off, m->name, t->name_len);
			off += t->name_len;
		}
		if (t->name2_kind != NK_NONE) {
			memcpy(p + off, m->name2, t->name2_len);
			off += t->name2_len;
		}
	}
	return off;
}

int bcp_encode(void *buf, size_t cap, const struct bcp_msg *m)
{
	struct tail_spec t;
	struct bcp_hdr h;
	enum bcp_err why;
	size_t payload, data_len, off;
	int ret;

	ret = encode_plan(m, &h, &t, &payload, &data_len, &why);
	if (ret)
		return ret;
	if (cap < BCP_HDR_SIZE || payload > cap - BCP_HDR_SIZE)
		return -EMSGSIZE;
	off = encode_head(buf, m, &h, &t, payload);
	if (data_len) {
		memcpy((uint8_t *)buf + off, m->data, data_len);
		off += data_len;
	}
	return (int)off;
}

int bcp_encode_head(void *buf, size_t cap, const struct bcp_msg *m)
{
	struct tail_spec t;
	struct bcp_hdr h;
	enum bcp_err why;
	size_t payload, data_len;
	int ret;

	ret = encode_plan(m, &h, &t, &payload, &data_len, &why);
	if (ret)
		return ret;
	if (cap < BCP_HDR_SIZE || payload - data_len > cap - BCP_HDR_SIZE)
		return -EMSGSIZE;
	return (int)encode_head(buf, m, &h, &t, payload);
}

/* ---- item accessors ---- */

void bcp_msg_seg(const struct bcp_msg *m, uint32_t i, struct bcp_seg *out)
{
	if (m->segs) {
		*out = m->segs[i];
		return;
	}
	bcp_dec_seg((const uint8_t *)m->items + (size_t)i * 32, out);
}

int32_t bcp_msg_status(const struct bcp_msg *m, uint32_t i)
{
	if (m->statuses)
		return m->statuses[i];
	return (int32_t)get_le32((const uint8_t *)m->items + (size_t)i * 4);
}

void bcp_msg_rebind(const struct bcp_msg *m, uint32_t i,
		    struct bcp_rebind_one *out)
{
	if (m->rebinds) {
		*out = m->rebinds[i];
		return;
	}
	bcp_dec_rebind_one((const uint8_t *)m->items + (size_t)i * 80, out);
}

void bcp_msg_forget(const struct bcp_msg *m, uint32_t i,
		    struct bcp_forget_one *out)
{
	if (m->forgets) {
		*out = m->forgets[i];
		return;
	}
	bcp_dec_forget_one((const uint8_t *)m->items + (size_t)i * 16, out);
}

/* ---- directory entries ---- */

int bcp_dirent_next(const struct bcp_msg *m, int plus,
		    struct bcp_dirent_iter *it, struct bcp_dirent_view *out)
{
	const uint8_t *p = m->dirents;
	enum bcp_err why;
	int ret;

	if (!p || it->idx >= m->u.readdir_rep.count ||
	    it->off >= m->dirents_len)
		return 0;
	ret = dirent_parse(p + it->off, m->dirents_len - it->off, plus, out,
			   &why);
	if (ret < 0)
		return 0;
	it->off += (size_t)ret;
	it->idx++;
	return 1;
}

size_t bcp_dirent_size(int plus, size_t name_len)
{
	return (plus ? sizeof(struct bcp_w_direntplus) :
		       sizeof(struct bcp_w_dirent)) + round8(name_len);
}

int bcp_dirent_put(void *buf, size_t cap, size_t *off, int plus,
		   const struct bcp_dirent *d, const struct bcp_entry *entry,
		   const char *name)
{
	struct bcp_dirent dd = *d;
	uint8_t *p;
	size_t fixed, size;
	enum bcp_err why;

	/* name_len 0: take the name's length (it is NUL-terminated then) */
	if (dd.name_len == 0 && name)
		dd.name_len = (uint16_t)strnlen(name, BCP_NAME_MAX + 1);
	if (!name || dirent_name_check(name, dd.name_len, &why) ||
	    dd.type > BCP_DTYPE_MAX)
		return -EINVAL;
	fixed = plus ? sizeof(struct bcp_w_direntplus) :
		       sizeof(struct bcp_w_dirent);
	size = fixed + round8(dd.name_len);
	if (*off > cap || size > cap - *off)
		return -ENOSPC;
	p = (uint8_t *)buf + *off;
	if (plus) {
		struct bcp_direntplus dp = {
			.cookie = dd.cookie,
			.ino = dd.ino,
			.type = dd.type,
			.name_len = dd.name_len,
		};

		if (entry)
			dp.entry = *entry;
		bcp_enc_direntplus(p, &dp);
	} else {
		bcp_enc_dirent(p, &dd);
	}
	memcpy(p + fixed, name, dd.name_len);
	memset(p + fixed + dd.name_len, 0, size - fixed - dd.name_len);
	*off += size;
	return 0;
}
