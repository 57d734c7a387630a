# SPDX-License-Identifier: GPL-2.0-or-later
# BCF_CHECK_FUZZER: a clang that links -fsanitize=fuzzer,address, for the
# decoder's libFuzzer target.  FUZZ_CC names it; absent means the fuzz test
# skips.
AC_DEFUN([BCF_CHECK_FUZZER], [
	AC_ARG_VAR([FUZZ_CC], [clang used to build libFuzzer targets])
	bcf_have_fuzzer=no
	AS_IF([test -z "$FUZZ_CC"], [AC_PATH_PROGS([FUZZ_CC], [clang clang-16 clang-15 clang-14], [])])
	AS_IF([test -n "$FUZZ_CC"], [
		AC_MSG_CHECKING([whether $FUZZ_CC links libFuzzer targets])
		cat > conftest_fuzz.c <<_BCF_EOF
#include <stdint.h>
#include <stddef.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
_BCF_EOF
		AS_IF([$FUZZ_CC -fsanitize=fuzzer,address -o conftest_fuzz conftest_fuzz.c >/dev/null 2>&1],
			[bcf_have_fuzzer=yes])
		rm -f conftest_fuzz conftest_fuzz.c
		AC_MSG_RESULT([$bcf_have_fuzzer])
	])
	AM_CONDITIONAL([HAVE_FUZZER], [test "x$bcf_have_fuzzer" = xyes])
])
