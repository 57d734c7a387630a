/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_session.h - the input format of the session fuzzer
 * (fuzz_session.c), shared with its seed generator
 * (fuzz_session_seed.c).
 *
 * An input is a sequence of records, each one frame for the agent:
 *
 *   u8  ctl          FZS_* bits below
 *   u16 len          little-endian, clamped to what is left of the input
 *   u8  frame[len]   sent as is on the control connection
 *
 * The harness authenticates first (unless the first record asks not to),
 * sends the records in order, then a PING, and reads every reply.  Handles
 * and open files of a fresh session are predictable, so sequences can name
 * them: the root is FZS_ROOT, the n-th new node (0-based) FZS_NODE(n), the
 * n-th open file FZS_FH(n) while no file was released.
 */
#ifndef BCF_FUZZ_SESSION_H
#define BCF_FUZZ_SESSION_H

#include <stdint.h>

#define FZS_FIX		0x01	/* set magic, version and payload_len */
#define FZS_FD		0x02	/* the shared memfd rides along (SCM_RIGHTS) */
#define FZS_SYNC	0x04	/* first wait until all before was served */
/* first record only: how the session is set up */
#define FZS_NOAUTH	0x80	/* skip AUTH */
#define FZS_URING	0x40	/* metadata through io_uring (--meta-io) */
#define FZS_TCP		0x20	/* handed over as a tcp connection */

#define FZS_REC_HDR	3
#define FZS_SHM_LEN	(1u << 20)	/* the memfd regions are made of */

#define FZS_ROOT	2ull
#define FZS_NODE(n)	(3ull + (n))
#define FZS_FH(n)	((1ull << 32) | (1ull + (n)))

#endif /* BCF_FUZZ_SESSION_H */
