/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bcp_auth.c - HMAC-SHA256 proofs of a pre-shared secret, nonces and
 * secret files.
 *
 * The MAC input is the ASCII label without its NUL, then the two byte
 * strings, concatenated; see bcp_auth.h and doc/protocol.md for which
 * nonces go where.  Comparison is constant-time.  A secret file must not be
 * readable by group or others, so a mode leaked by a copy is caught at
 * start-up instead of silently weakening the secret.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
#include <openssl/core_names.h>
#include <openssl/params.h>
#else
#include <openssl/hmac.h>
#endif

#include "bcp_auth.h"

int bcp_random(void *buf, size_t len)
{
	uint8_t *p = buf;
	ssize_t n;

	while (len) {
		n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
int bcp_auth_mac(const void *secret, size_t secret_len, const char *label,
		 const void *a, size_t alen, const void *b, size_t blen,
		 uint8_t out[BCP_MAC_LEN])
{
	static const uint8_t empty_key[1];
	OSSL_PARAM params[2];
	EVP_MAC_CTX *ctx;
	EVP_MAC *mac;
	size_t outlen = 0;
	int ret = -EIO;

	/* a zero-length key still needs a non-NULL pointer */
	if (!secret || secret_len == 0) {
		secret = empty_key;
		secret_len = 0;
	}
	mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!mac)
		return -EIO;
	ctx = EVP_MAC_CTX_new(mac);
	if (!ctx)
		goto out_free_mac;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						     (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (!EVP_MAC_init(ctx, secret, secret_len, params))
		goto out_free_ctx;
	if ((label && !EVP_MAC_update(ctx, (const unsigned char *)label,
				      strlen(label))) ||
	    (alen && !EVP_MAC_update(ctx, a, alen)) ||
	    (blen && !EVP_MAC_update(ctx, b, blen)))
		goto out_free_ctx;
	if (!EVP_MAC_final(ctx, out, &outlen, BCP_MAC_LEN) ||
	    outlen != BCP_MAC_LEN)
		goto out_free_ctx;
	ret = 0;
out_free_ctx:
	EVP_MAC_CTX_free(ctx);
out_free_mac:
	EVP_MAC_free(mac);
	return ret;
}
#else
int bcp_auth_mac(const void *secret, size_t secret_len, const char *label,
		 const void *a, size_t alen, const void *b, size_t blen,
		 uint8_t out[BCP_MAC_LEN])
{
	static const uint8_t empty_key[1];
	unsigned int outlen = 0;
	HMAC_CTX *ctx;
	int ret = -EIO;

	if (!secret || secret_len == 0) {
		secret = empty_key;
		secret_len = 0;
	}
	ctx = HMAC_CTX_new();
	if (!ctx)
		return -EIO;
	if (!HMAC_Init_ex(ctx, secret, (int)secret_len, EVP_sha256(), NULL))
		goto out_free_ctx;
	if ((label && !HMAC_Update(ctx, (const unsigned char *)label,
				   strlen(label))) ||
	    (alen && !HMAC_Update(ctx, a, alen)) ||
	    (blen && !HMAC_Update(ctx, b, blen)))
		goto out_free_ctx;
	if (!HMAC_Final(ctx, out, &outlen) || outlen != BCP_MAC_LEN)
		goto out_free_ctx;
	ret = 0;
out_free_ctx:
	HMAC_CTX_free(ctx);
	return ret;
}
#endif

int bcp_auth_mac_equal(const uint8_t a[BCP_MAC_LEN],
		       const uint8_t b[BCP_MAC_LEN])
{
	return CRYPTO_memcmp(a, b, BCP_MAC_LEN) == 0;
}

static int secret_err(char *err, size_t errlen, int ret, const char *fmt,
		      const char *path)
{
	if (err && errlen)
		snprintf(err, errlen, fmt, path, strerror(-ret));
	return ret;
}

int bcp_secret_load(const char *path, uint8_t **out, size_t *len, char *err,
		    size_t errlen)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	ssize_t n;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return secret_err(err, errlen, -errno,
				  "secret file %s: %s", path);
	if (fstat(fd, &st) < 0) {
		ret = secret_err(err, errlen, -errno, "secret file %s: %s",
				 path);
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = secret_err(err, errlen, -EINVAL,
				 "secret file %s: not a regular file (%s)",
				 path);
		goto out_close;
	}
	if (st.st_mode & (S_IRGRP | S_IROTH)) {
		if (err && errlen)
			snprintf(err, errlen,
				 "secret file %s is readable by group or others (mode %04o): run chmod 600 %s",
				 path, (unsigned int)(st.st_mode & 07777),
				 path);
		ret = -EPERM;
		goto out_close;
	}
	buf = malloc(BCP_SECRET_MAX + 1);
	if (!buf) {
		ret = secret_err(err, errlen, -ENOMEM, "secret file %s: %s",
				 path);
		goto out_close;
	}
	while (got <= BCP_SECRET_MAX) {
		n = read(fd, buf + got, BCP_SECRET_MAX + 1 - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = secret_err(err, errlen, -errno,
					 "secret file %s: %s", path);
			goto out_free_buf;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > 0 && buf[got - 1] == '\n')
		got--;
	if (got > BCP_SECRET_MAX) {
		ret = secret_err(err, errlen, -EFBIG,
				 "secret file %s: longer than 4096 bytes (%s)",
				 path);
		goto out_free_buf;
	}
	if (got == 0) {
		ret = secret_err(err, errlen, -EINVAL,
				 "secret file %s: empty secret (%s)", path);
		goto out_free_buf;
	}
	close(fd);
	*out = buf;
	*len = got;
	return 0;

out_free_buf:
	OPENSSL_cleanse(buf, BCP_SECRET_MAX + 1);
	free(buf);
out_close:
	close(fd);
	return ret;
}
