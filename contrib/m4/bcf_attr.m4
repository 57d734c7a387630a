# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_ATTR: libattr (extended attribute helpers), required.
AC_DEFUN([BCF_CHECK_ATTR], [
	PKG_CHECK_MODULES([ATTR], [libattr], [],
		[AC_MSG_ERROR([libattr not found: install libattr1-dev])])
])
