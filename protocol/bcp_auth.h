/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_auth.h - challenge-response over a pre-shared secret (HMAC-SHA256
 * from libcrypto), nonces from getrandom(2), and secret files.
 *
 * HELLO carries a client nonce, its reply a server nonce.  The client then
 * proves the secret with AUTH.mac = HMAC(secret, "bcp-client" | Ns | Nc);
 * the server answers with HMAC(secret, "bcp-server" | Nc | Ns), so each side
 * knows the other holds the secret and neither MAC can be replayed.  An
 * agent without a secret uses the empty key: both sides must agree.
 */
#ifndef BCP_AUTH_H
#define BCP_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include "bcp_wire.h"

#define BCP_AUTH_LABEL_CLIENT	"bcp-client"
#define BCP_AUTH_LABEL_SERVER	"bcp-server"
#define BCP_AUTH_LABEL_DATA	"bcp-data"
#define BCP_AUTH_LABEL_RDMA	"bcp-rdma"
#define BCP_SECRET_MAX		4096

/* Fill buf with len random bytes.  0 or -errno. */
int bcp_random(void *buf, size_t len);

/* out = HMAC-SHA256(secret, label | a | b).  0 or -EIO. */
int bcp_auth_mac(const void *secret, size_t secret_len, const char *label,
		 const void *a, size_t alen, const void *b, size_t blen,
		 uint8_t out[BCP_MAC_LEN]);

/* Constant-time comparison of two MACs: 1 when equal. */
int bcp_auth_mac_equal(const uint8_t a[BCP_MAC_LEN],
		       const uint8_t b[BCP_MAC_LEN]);

/*
 * Read a secret file: at most BCP_SECRET_MAX bytes, one trailing newline
 * stripped, not empty.  Refuses a file readable by group or others
 * (-EPERM) so that a leaked mode is caught.  *out is malloc'ed; on error
 * err[errlen] says why.  0 or -errno.
 */
int bcp_secret_load(const char *path, uint8_t **out, size_t *len, char *err,
		    size_t errlen);

#endif /* BCP_AUTH_H */
