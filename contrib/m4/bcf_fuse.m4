# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_FUSE: libfuse3 (low-level API), required.
AC_DEFUN([BCF_CHECK_FUSE], [
	PKG_CHECK_MODULES([FUSE3], [fuse3 >= 3.10], [],
		[AC_MSG_ERROR([libfuse3 development files not found: install libfuse3-dev (and fuse3)])])
])
