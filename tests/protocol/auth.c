/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * auth.c - HMAC-SHA256 through bcp_auth_mac() against published vectors
 * (RFC 4231 test case 2, split as label | a | b), the empty key, MAC
 * comparison, nonces, and the secret file rules.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcp_auth.h"
#include "check.h"

static int hex_eq(const uint8_t *mac, const char *hex)
{
	char s[2 * BCP_MAC_LEN + 1];
	int i;

	for (i = 0; i < BCP_MAC_LEN; i++)
		snprintf(s + 2 * i, 3, "%02x", mac[i]);
	if (strcmp(s, hex)) {
		fprintf(stderr, "got  %s\nwant %s\n", s, hex);
		return 0;
	}
	return 1;
}

static void vectors(void)
{
	uint8_t mac[BCP_MAC_LEN], mac2[BCP_MAC_LEN];

	/* RFC 4231 4.3: key "Jefe", data "what do ya want for nothing?" */
	CHECK(bcp_auth_mac("Jefe", 4, "what do ya ", "want ", 5,
			   "for nothing?", 12, mac) == 0, "mac");
	CHECK(hex_eq(mac, "5bdcc146bf60754e6a042426089575c7"
			  "5a003f089d2739839dec58b964ec3843"),
	      "RFC 4231 test case 2");
	/* the same bytes split differently give the same MAC */
	CHECK(bcp_auth_mac("Jefe", 4, "what do ya want for nothing?", NULL, 0,
			   NULL, 0, mac2) == 0 &&
	      bcp_auth_mac_equal(mac, mac2), "split invariance");
	/* the empty key (an agent without a secret) */
	CHECK(bcp_auth_mac(NULL, 0, "", NULL, 0, NULL, 0, mac) == 0 &&
	      hex_eq(mac, "b613679a0814d9ec772f95d778c35fc5"
			  "ff1697c493715653c6c712144292c5ad"),
	      "HMAC-SHA256 of empty key and message");
}

static void handshake_macs(void)
{
	uint8_t nc[BCP_NONCE_LEN], ns[BCP_NONCE_LEN], zero[BCP_NONCE_LEN] = {0};
	uint8_t c1[BCP_MAC_LEN], c2[BCP_MAC_LEN], s1[BCP_MAC_LEN];
	uint8_t w[BCP_MAC_LEN];

	CHECK(bcp_random(nc, sizeof(nc)) == 0 &&
	      bcp_random(ns, sizeof(ns)) == 0, "random");
	CHECK(memcmp(nc, ns, sizeof(nc)) && memcmp(nc, zero, sizeof(nc)),
	      "nonces differ and are not zero");
	bcp_auth_mac("s3cret", 6, BCP_AUTH_LABEL_CLIENT, ns, 32, nc, 32, c1);
	bcp_auth_mac("s3cret", 6, BCP_AUTH_LABEL_CLIENT, ns, 32, nc, 32, c2);
	bcp_auth_mac("s3cret", 6, BCP_AUTH_LABEL_SERVER, nc, 32, ns, 32, s1);
	bcp_auth_mac("s3creT", 6, BCP_AUTH_LABEL_CLIENT, ns, 32, nc, 32, w);
	CHECK(bcp_auth_mac_equal(c1, c2), "same inputs, same MAC");
	CHECK(!bcp_auth_mac_equal(c1, s1), "client and server MACs differ");
	CHECK(!bcp_auth_mac_equal(c1, w), "wrong secret, different MAC");
	c2[BCP_MAC_LEN - 1] ^= 1;
	CHECK(!bcp_auth_mac_equal(c1, c2), "one flipped bit is a mismatch");
	bcp_auth_mac("s3cret", 6, BCP_AUTH_LABEL_CLIENT, nc, 32, ns, 32, w);
	CHECK(!bcp_auth_mac_equal(c1, w), "nonce order matters");
}

static int write_file(const char *path, const char *s, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		return -1;
	if (write(fd, s, n) != (ssize_t)n || fchmod(fd, mode) < 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static void secret_files(void)
{
	char tdir[512], path[600], err[1024];
	static char big[BCP_SECRET_MAX + 2];
	uint8_t *sec = NULL;
	size_t len = 0;
	const char *tmp = getenv("TMPDIR");
	int ret;

	snprintf(tdir, sizeof(tdir), "%s/bcp-auth-XXXXXX", tmp ? tmp : "/tmp");
	REQUIRE(mkdtemp(tdir), "mkdtemp %s", tdir);
	snprintf(path, sizeof(path), "%s/s", tdir);

	REQUIRE(write_file(path, "abc\n", 4, 0600) == 0, "write");
	ret = bcp_secret_load(path, &sec, &len, err, sizeof(err));
	CHECK(ret == 0 && len == 3 && !memcmp(sec, "abc", 3),
	      "0600 file loads, newline stripped (%d)", ret);
	free(sec);
	sec = NULL;

	REQUIRE(write_file(path, "abc", 3, 0644) == 0, "write");
	err[0] = '\0';
	ret = bcp_secret_load(path, &sec, &len, err, sizeof(err));
	CHECK(ret == -EPERM && strstr(err, "chmod 600"),
	      "0644 refused (%d: %s)", ret, err);
	REQUIRE(write_file(path, "abc", 3, 0640) == 0, "write");
	ret = bcp_secret_load(path, &sec, &len, err, sizeof(err));
	CHECK(ret == -EPERM, "0640 refused (%d)", ret);

	REQUIRE(write_file(path, "\n", 1, 0600) == 0, "write");
	ret = bcp_secret_load(path, &sec, &len, err, sizeof(err));
	CHECK(ret == -EINVAL, "empty secret refused (%d)", ret);

	memset(big, 'k', sizeof(big));
	REQUIRE(write_file(path, big, BCP_SECRET_MAX, 0400) == 0, "write");
	ret = bcp_secret_load(path, &sec, &len, err, sizeof(err));
	CHECK(ret == 0 && len == BCP_SECRET_MAX, "4096-byte secret (%d)", ret);
	free(sec);
	sec = NULL;
	REQUIRE(write_file(path, big, BCP_SECRET_MAX + 2, 0600) == 0, "write");
	ret = bcp_secret_load(path, &sec, &len, err, sizeof(err));
	CHECK(ret == -EFBIG, "oversized secret refused (%d)", ret);

	unlink(path);
	ret = bcp_secret_load(path, &sec, &len, err, sizeof(err));
	CHECK(ret == -ENOENT && strstr(err, path), "missing file (%d: %s)",
	      ret, err);
	rmdir(tdir);
}

int main(void)
{
	vectors();
	handshake_macs();
	secret_files();
	return check_exit("auth");
}
