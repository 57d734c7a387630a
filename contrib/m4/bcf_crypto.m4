# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_CRYPTO: OpenSSL's libcrypto for HMAC-SHA256, required.
AC_DEFUN([BCF_CHECK_CRYPTO], [
	PKG_CHECK_MODULES([CRYPTO], [libcrypto >= 1.1], [],
		[AC_MSG_ERROR([libcrypto not found: install libssl-dev])])
])
