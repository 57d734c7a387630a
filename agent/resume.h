/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * resume.h - what lets a host go on after the agent restarted: sealed file
 * ids (fids) that name an object across restarts, and the reply cache that
 * answers a replayed request the way its first execution was answered.
 *
 * Both live in the state directory (--state-dir): handle-key, the 32-byte
 * key that seals fids, and reply-cache, a fixed-size file mapped shared so
 * that what a worker wrote survives a SIGKILL of the agent (page cache).
 * With --state-dir none the key is random per start and the cache is
 * anonymous memory: nothing survives a restart.  Before
 * agent_resume_init() (in-process tests) there are no fids and no cache.
 *
 * Threads: everything here may be called from any worker at once; the
 * state set up by agent_resume_init() is read-only afterwards, and the
 * cache guards each of its sets with a lock word in the mapping.
 */
#ifndef AGENT_RESUME_H
#define AGENT_RESUME_H

#include <stdint.h>

#include "bcp_wire.h"

/*
 * Start-up (main.c), after the store is open: dir is the state directory
 * or "none"; root_fd the posix store's root, or -1 for a store without
 * one (cephfs), whose fids are its own: then agent_resume_handles() is 0,
 * agent_fid_seal() and agent_fid_open() name nothing, and only the key
 * and the reply cache are set up.  Logs one error line and returns
 * -errno when the directory, the key or the cache file is unusable.
 */
int agent_resume_init(const char *dir, int root_fd);
void agent_resume_fini(void);

/*
 * 1 when the agent can open objects by handle (open_by_handle_at, which
 * needs CAP_DAC_READ_SEARCH, on a file system that makes handles): nodes
 * then keep a descriptor only while they are in the session's LRU.
 */
int agent_resume_handles(void);

/*
 * The fid of the object behind fd (an O_PATH descriptor beneath the data
 * root), as its file handle and a MAC over it bound to the data root.
 * Returns 0, or -EOPNOTSUPP with fid all zeros when the object has no
 * lasting name (handles off, another mount, a file system without
 * handles, a handle too long for the fid).
 */
int agent_fid_seal(int fd, uint8_t fid[BCP_FID_LEN]);
/*
 * 1 when fid (one agent_fid_seal() made) names the object behind fd, 0
 * when another one (an inode number the file system gave out again
 * after the fid's object was removed: the handle's generation differs),
 * or -errno when it cannot tell (fid all zeros, no handle for fd).
 */
int agent_fid_names(const uint8_t fid[BCP_FID_LEN], int fd);
/* 1 when fid is all zeros (it names nothing). */
int agent_fid_zero(const uint8_t fid[BCP_FID_LEN]);
/*
 * Open the object a fid names with flags (O_PATH, O_RDONLY ...; O_CLOEXEC
 * is added).  The MAC is checked first, in constant time.  Returns the
 * descriptor, or -ESTALE when the fid is not this agent's (for this data
 * root) or the object is gone, or another -errno.
 */
int agent_fid_open(const uint8_t fid[BCP_FID_LEN], int flags);

/*
 * For a store that names its objects itself (root_fd -1 at
 * agent_resume_init(), cephfs): the store fills fid[0..47] with what
 * finds the object again, and these seal fid[48..63] with a MAC over
 * those bytes and bind (what the fids are valid for: the file system's
 * id and the served path, so that a fid of another export fails), made
 * with the handle key, which lasts as long as the state directory.  A
 * host cannot forge a fid that passes.  seal: 0 or -EOPNOTSUPP (before
 * agent_resume_init()); check, in constant time: 0 or -ESTALE.
 */
#define AGENT_FID_MAC_OFF	48
int agent_fid_store_seal(const void *bind, size_t blen,
			 uint8_t fid[BCP_FID_LEN]);
int agent_fid_store_check(const void *bind, size_t blen,
			  const uint8_t fid[BCP_FID_LEN]);

/*
 * The reply cache, keyed by (client id, req_id).  A state is found only
 * for the same opcode; anything else is AGENT_RC_NONE.  A client id of
 * all zeros is never cached.  None of these allocate or block for long:
 * when a set's lock cannot be had at once the request goes uncached.
 */
enum agent_rc_state {
	AGENT_RC_NONE = 0,		/* not seen (or evicted) */
	AGENT_RC_INTENT,		/* started; its outcome unknown */
	AGENT_RC_DONE,			/* finished: the outcome below */
};
struct agent_rc_outcome {
	int32_t status;			/* 0 or -errno as answered */
	uint32_t open_flags;		/* CREATE: O_* to open it again */
	uint8_t fid[BCP_FID_LEN];	/* entry replies: the object */
};
int agent_rc_find(const uint8_t client[BCP_CLIENT_ID_LEN], uint64_t req_id,
		  uint16_t op, struct agent_rc_outcome *out);
void agent_rc_intent(const uint8_t client[BCP_CLIENT_ID_LEN],
		     uint64_t req_id, uint16_t op);
void agent_rc_done(const uint8_t client[BCP_CLIENT_ID_LEN], uint64_t req_id,
		   uint16_t op, const struct agent_rc_outcome *o);

#endif /* AGENT_RESUME_H */
