# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_MICROHTTPD: libmicrohttpd serves the Prometheus endpoints of
# the agent (--metrics-listen) and of the FUSE daemon (-o metrics), on a
# thread of its own; required.
AC_DEFUN([BCF_CHECK_MICROHTTPD], [
	PKG_CHECK_MODULES([MHD], [libmicrohttpd >= 0.9.64], [],
		[AC_MSG_ERROR([libmicrohttpd not found: install libmicrohttpd-dev])])
])
