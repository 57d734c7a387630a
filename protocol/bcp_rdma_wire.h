/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_rdma_wire.h - the private data of the rdma transport's connection
 * request, shared by the host (rdma_connect) and the agent (its listener).
 *
 * 48 bytes, little-endian, well under the 56 bytes an RC connection request
 * carries on InfiniBand and RoCE:
 *   u32 magic "BCR1" | u16 version | u16 zero | u64 session |
 *   mac[32] = HMAC-SHA256(secret, "bcp-rdma" | server nonce | session LE64)
 * The session and the server nonce come from the HELLO reply on the
 * control connection; the agent accepts the queue pair only for a session
 * that announced rdma and only with the right MAC, and binds it to it.
 */
#ifndef BCP_RDMA_WIRE_H
#define BCP_RDMA_WIRE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "bcp_auth.h"
#include "bcp_wire.h"

#define BCP_RDMA_PRIV_MAGIC	0x31524342u	/* "BCR1" little-endian */
#define BCP_RDMA_PRIV_VERSION	1
#define BCP_RDMA_PRIV_LEN	48

struct bcp_rdma_priv {
	uint64_t session;
	uint8_t mac[BCP_MAC_LEN];
};

static inline void bcp_rdma_put_le(uint8_t *p, uint64_t v, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t bcp_rdma_get_le(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline void bcp_rdma_priv_enc(uint8_t out[BCP_RDMA_PRIV_LEN],
				     const struct bcp_rdma_priv *p)
{
	bcp_rdma_put_le(out, BCP_RDMA_PRIV_MAGIC, 4);
	bcp_rdma_put_le(out + 4, BCP_RDMA_PRIV_VERSION, 2);
	bcp_rdma_put_le(out + 6, 0, 2);
	bcp_rdma_put_le(out + 8, p->session, 8);
	memcpy(out + 16, p->mac, BCP_MAC_LEN);
}

/* 0, or -EBADMSG for a wrong magic, version or padding. */
static inline int bcp_rdma_priv_dec(const void *in, struct bcp_rdma_priv *p)
{
	const uint8_t *b = in;

	if (bcp_rdma_get_le(b, 4) != BCP_RDMA_PRIV_MAGIC ||
	    bcp_rdma_get_le(b + 4, 2) != BCP_RDMA_PRIV_VERSION ||
	    bcp_rdma_get_le(b + 6, 2) != 0)
		return -EBADMSG;
	p->session = bcp_rdma_get_le(b + 8, 8);
	memcpy(p->mac, b + 16, BCP_MAC_LEN);
	return 0;
}

#endif /* BCP_RDMA_WIRE_H */
