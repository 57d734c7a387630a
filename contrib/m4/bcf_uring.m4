# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_URING: liburing, required by the agent's store.
AC_DEFUN([BCF_CHECK_URING], [
	PKG_CHECK_MODULES([URING], [liburing >= 2.2], [],
		[AC_MSG_ERROR([liburing development files not found: install liburing-dev])])
])
