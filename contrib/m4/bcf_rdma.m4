# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_RDMA: libibverbs + librdmacm for the rdma transport.
# --with-rdma=check (default) uses them when present; yes fails without them.
AC_DEFUN([BCF_CHECK_RDMA], [
	AC_ARG_WITH([rdma],
		[AS_HELP_STRING([--with-rdma=check|yes|no],
			[RDMA data transport (libibverbs, librdmacm) @<:@default=check@:>@])],
		[], [with_rdma=check])
	bcf_have_rdma=no
	AS_CASE(["$with_rdma"],
		[no], [],
		[yes|check], [
			PKG_CHECK_MODULES([RDMA], [libibverbs librdmacm],
				[bcf_have_rdma=yes],
				[AS_IF([test "x$with_rdma" = xyes],
					[AC_MSG_ERROR([--with-rdma=yes but libibverbs/librdmacm not found: install libibverbs-dev librdmacm-dev])])])
		],
		[AC_MSG_ERROR([--with-rdma takes check, yes or no, not '$with_rdma'])])
	AS_IF([test "x$bcf_have_rdma" = xyes],
		[AC_DEFINE([HAVE_RDMA], [1], [Define if the rdma transport is built])])
	AM_CONDITIONAL([HAVE_RDMA], [test "x$bcf_have_rdma" = xyes])
])
