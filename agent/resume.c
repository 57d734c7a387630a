/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * resume.c - the state directory, sealed file ids and the reply cache
 * (see resume.h, doc/protocol.md "Resuming" and doc/security.md).
 *
 * A fid is 64 bytes:
 *   [0]      format (1)
 *   [1]      handle_bytes of the file handle (at most 40)
 *   [2..3]   zero
 *   [4..7]   handle_type, little-endian
 *   [8..47]  f_handle, zero-padded
 *   [48..63] HMAC-SHA256(handle-key, "bcp-fid" | root handle | [0..47]),
 *            the first 16 bytes
 * The root's own file handle binds a fid to the data root it was made
 * under: a fid of another export (even on the same file system) fails the
 * MAC, and the root's handle, unlike its device number, is the same after
 * a reboot.
 *
 * The reply cache file: a header page, one lock word per set, then
 * RC_SETS sets of RC_WAYS slots of 128 bytes.  A slot is written only
 * under its set's lock, and carries a checksum, so a slot torn by a
 * SIGKILL in the middle of a write reads as empty.  The lock word holds
 * the writer's thread id: a waiter that finds the holder dead takes the
 * lock over; one that finds it alive and busy gives up (the request goes
 * uncached) rather than wait.  Several agents may share one state
 * directory: the locks are in the shared mapping.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "agent.h"
#include "bcp_auth.h"
#include "resume.h"

#define RES_KEY_LEN		32
#define RES_KEY_FILE		"handle-key"
#define RES_RC_FILE		"reply-cache"
#define RES_FID_FORMAT		1
#define RES_FH_MAX		40	/* f_handle bytes a fid holds */
#define RES_FID_MAC_OFF		AGENT_FID_MAC_OFF
#define RES_FID_MAC_LEN		16
#define RES_LABEL_FID		"bcp-fid"

#define RC_MAGIC		0x3130435242434231ull	/* "1BCBRC01" */
#define RC_SETS			4096
#define RC_WAYS			4
#define RC_HDR_SIZE		4096
#define RC_LOCKS_SIZE		(RC_SETS * 4)
#define RC_SPIN			4096	/* tries before looking at the holder */

struct rc_hdr {
	uint64_t magic;
	uint32_t sets, ways;
	uint32_t slot_size, pad0;
	uint64_t salt;			/* of the set hash, random per file */
	_Atomic uint64_t stamp;		/* age of slots, for replacement */
};

struct rc_slot {
	uint32_t state;			/* enum agent_rc_state */
	uint16_t op;
	uint16_t pad0;
	uint64_t req_id;
	uint64_t stamp;
	uint8_t client[BCP_CLIENT_ID_LEN];
	int32_t status;
	uint32_t open_flags;
	uint8_t fid[BCP_FID_LEN];
	uint64_t pad1;
	uint64_t sum;			/* FNV-1a of everything above */
};
_Static_assert(sizeof(struct rc_slot) == 128, "reply cache slot size");
_Static_assert(sizeof(struct rc_hdr) <= RC_HDR_SIZE, "reply cache header");

#define RC_SIZE	(RC_HDR_SIZE + RC_LOCKS_SIZE + \
		 (size_t)RC_SETS * RC_WAYS * sizeof(struct rc_slot))

/* Set once by agent_resume_init(), read-only afterwards. */
static struct {
	int ready;
	int handles;			/* open_by_handle_at works */
	int mount_fd;			/* the root, open for reading */
	int root_mnt;			/* mount id of the data root */
	uint8_t key[RES_KEY_LEN];
	uint8_t root_fh[8 + MAX_HANDLE_SZ];
	size_t root_fh_len;
	void *rc_map;			/* RC_SIZE bytes, or NULL */
	struct rc_hdr *rc;
	_Atomic uint32_t *rc_locks;
	struct rc_slot *rc_slots;
} res = { .mount_fd = -1, .root_mnt = -1 };

union res_fh {
	struct file_handle fh;
	uint8_t buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

static int res_state_dir(const char *dir)
{
	struct stat st;
	int fd, ret;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		ret = -errno;
		agent_err("state directory %s: cannot create it: %s", dir,
			  strerror(-ret));
		return ret;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		agent_err("state directory %s: %s", dir, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		agent_err("state directory %s: must belong to the agent's user "
			  "and be writable by no one else (use --state-dir "
			  "none to run without one)", dir);
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Read the key, making it first if there is none (O_EXCL, then link). */
static int res_key_load(int dfd, const char *dir)
{
	char tmp[64];
	uint8_t key[RES_KEY_LEN];
	struct stat st;
	ssize_t n;
	int fd, ret;

	fd = openat(dfd, RES_KEY_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		ret = bcp_random(key, sizeof(key));
		if (ret < 0)
			goto out_err;
		snprintf(tmp, sizeof(tmp), ".%s.%ld", RES_KEY_FILE,
			 (long)getpid());
		unlinkat(dfd, tmp, 0);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			ret = -errno;
			goto out_err;
		}
		n = write(fd, key, sizeof(key));
		ret = n == (ssize_t)sizeof(key) ? 0 : n < 0 ? -errno : -EIO;
		if (!ret && fsync(fd) < 0)
			ret = -errno;
		close(fd);
		/* another agent sharing the directory may have won: fine */
		if (!ret && linkat(dfd, tmp, dfd, RES_KEY_FILE, 0) < 0 &&
		    errno != EEXIST)
			ret = -errno;
		unlinkat(dfd, tmp, 0);
		if (ret < 0)
			goto out_err;
		agent_info("state directory %s: made a new handle key", dir);
		fd = openat(dfd, RES_KEY_FILE, O_RDONLY | O_NOFOLLOW |
			    O_CLOEXEC);
	}
	if (fd < 0) {
		ret = -errno;
		goto out_err;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077) ||
	    st.st_size != RES_KEY_LEN) {
		close(fd);
		agent_err("state directory %s: %s must be a %d-byte file of "
			  "mode 0600 owned by the agent's user", dir,
			  RES_KEY_FILE, RES_KEY_LEN);
		return -EPERM;
	}
	n = read(fd, res.key, RES_KEY_LEN);
	ret = n == RES_KEY_LEN ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	if (ret < 0)
		goto out_err;
	return 0;

out_err:
	agent_err("state directory %s: handle key: %s", dir, strerror(-ret));
	return ret;
}

static uint64_t res_fnv(const void *p, size_t len, uint64_t h)
{
	const uint8_t *b = p;

	while (len--)
		h = (h ^ *b++) * 0x100000001b3ull;
	return h;
}

static uint64_t rc_slot_sum(const struct rc_slot *s)
{
	return res_fnv(s, offsetof(struct rc_slot, sum),
		       0xcbf29ce484222325ull);
}

static void rc_layout(void *map)
{
	res.rc_map = map;
	res.rc = map;
	res.rc_locks = (_Atomic uint32_t *)((uint8_t *)map + RC_HDR_SIZE);
	res.rc_slots = (struct rc_slot *)((uint8_t *)map + RC_HDR_SIZE +
					  RC_LOCKS_SIZE);
}

static int rc_hdr_ok(const struct rc_hdr *h)
{
	return h->magic == RC_MAGIC && h->sets == RC_SETS &&
	       h->ways == RC_WAYS && h->slot_size == sizeof(struct rc_slot);
}

static int rc_hdr_init(struct rc_hdr *h)
{
	uint64_t salt;
	int ret;

	ret = bcp_random(&salt, sizeof(salt));
	if (ret < 0)
		return ret;
	h->sets = RC_SETS;
	h->ways = RC_WAYS;
	h->slot_size = sizeof(struct rc_slot);
	h->salt = salt;
	atomic_store(&h->stamp, 1);
	h->magic = RC_MAGIC;
	return 0;
}

/*
 * Map the cache file, making or remaking it when it is not one (an older
 * layout, a truncated file).  flock() keeps two agents starting at once
 * from remaking it under each other.
 */
static int rc_open(int dfd, const char *dir)
{
	struct stat st;
	void *map;
	int fd, ret;

	fd = openat(dfd, RES_RC_FILE, O_RDWR | O_CREAT | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out_err;
	}
	if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0) {
		ret = -errno;
		goto out_close;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		ret = -EPERM;
		goto out_close;
	}
	if (st.st_size != (off_t)RC_SIZE &&
	    (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)RC_SIZE) < 0)) {
		ret = -errno;
		goto out_close;
	}
	map = mmap(NULL, RC_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto out_close;
	}
	if (!rc_hdr_ok(map)) {
		memset(map, 0, RC_SIZE);
		ret = rc_hdr_init(map);
		if (ret < 0) {
			munmap(map, RC_SIZE);
			goto out_close;
		}
	}
	flock(fd, LOCK_UN);
	close(fd);
	rc_layout(map);
	return 0;

out_close:
	close(fd);
out_err:
	agent_err("state directory %s: reply cache: %s", dir, strerror(-ret));
	return ret;
}

static int rc_anon(void)
{
	void *map;

	map = mmap(NULL, RC_SIZE, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		agent_err("reply cache: %s", strerror(errno));
		return -errno;
	}
	if (rc_hdr_init(map) < 0) {
		munmap(map, RC_SIZE);
		agent_err("reply cache: no random bytes");
		return -EIO;
	}
	rc_layout(map);
	return 0;
}

/*
 * The root's handle (the MAC binds fids to it) and whether this process
 * may open by handle at all.
 */
static void res_probe_handles(int root_fd)
{
	union res_fh u;
	int mnt, fd;

	/* open_by_handle_at() wants a descriptor that is not O_PATH */
	res.mount_fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY |
			      O_CLOEXEC);
	if (res.mount_fd < 0) {
		agent_info("data root: %s: handles do not survive a restart",
			   strerror(errno));
		return;
	}
	u.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(root_fd, "", &u.fh, &mnt, AT_EMPTY_PATH) < 0) {
		agent_info("the data root's file system makes no file "
			   "handles (%s): handles do not survive a restart",
			   strerror(errno));
		return;
	}
	fd = open_by_handle_at(res.mount_fd, &u.fh, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		agent_info("cannot open by handle (%s: CAP_DAC_READ_SEARCH "
			   "is needed): every handle keeps a descriptor and "
			   "none survives a restart", strerror(errno));
		return;
	}
	close(fd);
	memcpy(res.root_fh, &u.fh.handle_type, 4);
	memcpy(res.root_fh + 4, &u.fh.handle_bytes, 4);
	memcpy(res.root_fh + 8, u.fh.f_handle, u.fh.handle_bytes);
	res.root_fh_len = 8 + u.fh.handle_bytes;
	res.root_mnt = mnt;
	res.handles = 1;
}

int agent_resume_init(const char *dir, int root_fd)
{
	int dfd, ret;

	if (!dir || !strcmp(dir, "none")) {
		ret = bcp_random(res.key, sizeof(res.key));
		if (ret < 0) {
			agent_err("handle key: no random bytes");
			return ret;
		}
		ret = rc_anon();
		if (ret < 0)
			return ret;
		agent_info("no state directory: handles and the reply cache "
			   "do not survive a restart");
	} else {
		dfd = res_state_dir(dir);
		if (dfd < 0)
			return dfd;
		ret = res_key_load(dfd, dir);
		if (ret == 0)
			ret = rc_open(dfd, dir);
		close(dfd);
		if (ret < 0)
			return ret;
	}
	/*
	 * A store without a local root (cephfs) names its objects itself:
	 * its fids are its own, and nothing here opens by handle.
	 */
	if (root_fd >= 0)
		res_probe_handles(root_fd);
	res.ready = 1;
	return 0;
}

void agent_resume_fini(void)
{
	if (res.rc_map)
		munmap(res.rc_map, RC_SIZE);
	if (res.mount_fd >= 0)
		close(res.mount_fd);
	res.mount_fd = -1;
	res.rc_map = NULL;
	res.rc = NULL;
	res.ready = 0;
	res.handles = 0;
	memset(res.key, 0, sizeof(res.key));
}

int agent_resume_handles(void)
{
	return res.handles;
}

int agent_fid_zero(const uint8_t fid[BCP_FID_LEN])
{
	unsigned int i;

	for (i = 0; i < BCP_FID_LEN; i++)
		if (fid[i])
			return 0;
	return 1;
}

static int res_fid_mac(const uint8_t fid[BCP_FID_LEN],
		       uint8_t mac[BCP_MAC_LEN])
{
	return bcp_auth_mac(res.key, sizeof(res.key), RES_LABEL_FID,
			    res.root_fh, res.root_fh_len, fid,
			    RES_FID_MAC_OFF, mac);
}

/*
 * The handle part of a fid (format, length, type, handle bytes; no MAC)
 * for the object behind fd, into fid (zeroed first).  0, or -errno;
 * *mnt is the handle's mount id.
 */
static int res_fid_handle(int fd, uint8_t fid[BCP_FID_LEN], int *mnt)
{
	union res_fh u;
	uint32_t t;

	memset(fid, 0, BCP_FID_LEN);
	u.fh.handle_bytes = RES_FH_MAX;
	if (name_to_handle_at(fd, "", &u.fh, mnt, AT_EMPTY_PATH) < 0)
		return -errno;
	fid[0] = RES_FID_FORMAT;
	fid[1] = (uint8_t)u.fh.handle_bytes;
	t = (uint32_t)u.fh.handle_type;
	fid[4] = (uint8_t)t;
	fid[5] = (uint8_t)(t >> 8);
	fid[6] = (uint8_t)(t >> 16);
	fid[7] = (uint8_t)(t >> 24);
	memcpy(fid + 8, u.fh.f_handle, u.fh.handle_bytes);
	return 0;
}

int agent_fid_seal(int fd, uint8_t fid[BCP_FID_LEN])
{
	uint8_t mac[BCP_MAC_LEN];
	int mnt;

	memset(fid, 0, BCP_FID_LEN);
	if (!res.handles)
		return -EOPNOTSUPP;
	if (res_fid_handle(fd, fid, &mnt) < 0 ||
	    /* beneath the root on another mount: its handle means nothing */
	    mnt != res.root_mnt || res_fid_mac(fid, mac) < 0) {
		memset(fid, 0, BCP_FID_LEN);
		return -EOPNOTSUPP;
	}
	memcpy(fid + RES_FID_MAC_OFF, mac, RES_FID_MAC_LEN);
	return 0;
}

int agent_fid_names(const uint8_t fid[BCP_FID_LEN], int fd)
{
	uint8_t now[BCP_FID_LEN];
	int mnt, ret;

	if (agent_fid_zero(fid))
		return -EOPNOTSUPP;
	ret = res_fid_handle(fd, now, &mnt);
	if (ret < 0)
		return ret;
	return !memcmp(fid, now, 8 + (size_t)now[1]);
}

/* Constant time: a forger learns nothing from how long a refusal took. */
static int res_mac_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	uint8_t d = 0;
	size_t i;

	for (i = 0; i < len; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

int agent_fid_open(const uint8_t fid[BCP_FID_LEN], int flags)
{
	uint8_t mac[BCP_MAC_LEN];
	union res_fh u;
	unsigned int i;
	int fd;

	if (!res.handles || fid[0] != RES_FID_FORMAT || fid[2] || fid[3] ||
	    fid[1] == 0 || fid[1] > RES_FH_MAX)
		return -ESTALE;
	if (res_fid_mac(fid, mac) < 0)
		return -EIO;
	if (!res_mac_equal(mac, fid + RES_FID_MAC_OFF, RES_FID_MAC_LEN))
		return -ESTALE;
	/* sealed by us: still, the padding must be as we wrote it */
	for (i = 8 + fid[1]; i < RES_FID_MAC_OFF; i++)
		if (fid[i])
			return -ESTALE;
	u.fh.handle_bytes = fid[1];
	u.fh.handle_type = (int)((uint32_t)fid[4] | (uint32_t)fid[5] << 8 |
				 (uint32_t)fid[6] << 16 |
				 (uint32_t)fid[7] << 24);
	memcpy(u.fh.f_handle, fid + 8, fid[1]);
	fd = open_by_handle_at(res.mount_fd, &u.fh, flags | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESTALE ? -ESTALE : -errno;
	return fd;
}

/*
 * A store's own fids share the key but not the label, so that no posix
 * fid ever passes as one, nor the other way round.
 */
#define RES_LABEL_STORE_FID	"bcp-store-fid"

static int res_store_mac(const void *bind, size_t blen,
			 const uint8_t fid[BCP_FID_LEN],
			 uint8_t mac[BCP_MAC_LEN])
{
	if (!res.ready)
		return -EOPNOTSUPP;
	return bcp_auth_mac(res.key, sizeof(res.key), RES_LABEL_STORE_FID,
			    bind, blen, fid, AGENT_FID_MAC_OFF, mac);
}

int agent_fid_store_seal(const void *bind, size_t blen,
			 uint8_t fid[BCP_FID_LEN])
{
	uint8_t mac[BCP_MAC_LEN];
	int ret;

	ret = res_store_mac(bind, blen, fid, mac);
	if (ret < 0)
		return ret;
	memcpy(fid + AGENT_FID_MAC_OFF, mac, BCP_FID_LEN - AGENT_FID_MAC_OFF);
	return 0;
}

int agent_fid_store_check(const void *bind, size_t blen,
			  const uint8_t fid[BCP_FID_LEN])
{
	uint8_t mac[BCP_MAC_LEN];

	if (res_store_mac(bind, blen, fid, mac) < 0)
		return -ESTALE;
	if (!res_mac_equal(mac, fid + AGENT_FID_MAC_OFF,
			   BCP_FID_LEN - AGENT_FID_MAC_OFF))
		return -ESTALE;
	return 0;
}

/* The reply cache. */

static unsigned int rc_set(const uint8_t *client, uint64_t req_id)
{
	uint64_t h = res_fnv(&res.rc->salt, 8, 0xcbf29ce484222325ull);

	h = res_fnv(client, BCP_CLIENT_ID_LEN, h);
	h = res_fnv(&req_id, 8, h);
	h ^= h >> 29;
	return (unsigned int)(h % RC_SETS);
}

static int rc_usable(const uint8_t *client)
{
	unsigned int i;

	if (!res.rc)
		return 0;
	for (i = 0; i < BCP_CLIENT_ID_LEN; i++)
		if (client[i])
			return 1;
	return 0;
}

/* Take set's lock: 0, or -EBUSY when a live holder keeps it. */
static int rc_lock(unsigned int set)
{
	_Atomic uint32_t *l = &res.rc_locks[set];
	uint32_t me = (uint32_t)syscall(SYS_gettid), cur;
	unsigned int i;

	for (i = 0; i < RC_SPIN; i++) {
		cur = 0;
		if (atomic_compare_exchange_weak(l, &cur, me))
			return 0;
		if ((i & 63) == 63)
			sched_yield();
	}
	/* a holder killed inside the few stores of a write */
	cur = atomic_load(l);
	if (cur && kill((pid_t)cur, 0) < 0 && errno == ESRCH &&
	    atomic_compare_exchange_strong(l, &cur, me))
		return 0;
	return -EBUSY;
}

static void rc_unlock(unsigned int set)
{
	atomic_store(&res.rc_locks[set], 0);
}

static struct rc_slot *rc_slot_find(unsigned int set, const uint8_t *client,
				    uint64_t req_id)
{
	struct rc_slot *s = &res.rc_slots[(size_t)set * RC_WAYS];
	unsigned int i;

	for (i = 0; i < RC_WAYS; i++, s++) {
		if (s->state != AGENT_RC_NONE && s->req_id == req_id &&
		    !memcmp(s->client, client, BCP_CLIENT_ID_LEN) &&
		    s->sum == rc_slot_sum(s))
			return s;
	}
	return NULL;
}

int agent_rc_find(const uint8_t client[BCP_CLIENT_ID_LEN], uint64_t req_id,
		  uint16_t op, struct agent_rc_outcome *out)
{
	struct rc_slot *s;
	unsigned int set;
	int st = AGENT_RC_NONE;

	if (!rc_usable(client))
		return AGENT_RC_NONE;
	set = rc_set(client, req_id);
	if (rc_lock(set) < 0)
		return AGENT_RC_NONE;
	s = rc_slot_find(set, client, req_id);
	if (s && s->op == op && (s->state == AGENT_RC_INTENT ||
				 s->state == AGENT_RC_DONE)) {
		st = (int)s->state;
		if (st == AGENT_RC_DONE) {
			out->status = s->status;
			out->open_flags = s->open_flags;
			memcpy(out->fid, s->fid, BCP_FID_LEN);
		}
	}
	rc_unlock(set);
	return st;
}

/* Write one slot of (client, req_id): its own, a free one or the oldest. */
static void rc_put(const uint8_t *client, uint64_t req_id, uint16_t op,
		   uint32_t state, const struct agent_rc_outcome *o)
{
	struct rc_slot *s, *base;
	unsigned int set, i;

	if (!rc_usable(client))
		return;
	set = rc_set(client, req_id);
	if (rc_lock(set) < 0)
		return;
	base = &res.rc_slots[(size_t)set * RC_WAYS];
	s = rc_slot_find(set, client, req_id);
	for (i = 0; !s && i < RC_WAYS; i++)
		if (base[i].state == AGENT_RC_NONE ||
		    base[i].sum != rc_slot_sum(&base[i]))
			s = &base[i];
	if (!s) {
		s = base;
		for (i = 1; i < RC_WAYS; i++)
			if (base[i].stamp < s->stamp)
				s = &base[i];
	}
	memset(s, 0, sizeof(*s));
	s->state = state;
	s->op = op;
	s->req_id = req_id;
	s->stamp = atomic_fetch_add(&res.rc->stamp, 1);
	memcpy(s->client, client, BCP_CLIENT_ID_LEN);
	if (o) {
		s->status = o->status;
		s->open_flags = o->open_flags;
		memcpy(s->fid, o->fid, BCP_FID_LEN);
	}
	s->sum = rc_slot_sum(s);
	rc_unlock(set);
}

void agent_rc_intent(const uint8_t client[BCP_CLIENT_ID_LEN],
		     uint64_t req_id, uint16_t op)
{
	rc_put(client, req_id, op, AGENT_RC_INTENT, NULL);
}

void agent_rc_done(const uint8_t client[BCP_CLIENT_ID_LEN], uint64_t req_id,
		   uint16_t op, const struct agent_rc_outcome *o)
{
	rc_put(client, req_id, op, AGENT_RC_DONE, o);
}
