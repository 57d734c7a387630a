# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_INIH: inih parses the agent's config file, required.
AC_DEFUN([BCF_CHECK_INIH], [
	PKG_CHECK_MODULES([INIH], [inih], [],
		[AC_MSG_ERROR([inih not found: install libinih-dev])])
])
