/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * check.h - minimal assertions for the protocol unit tests.  A failed
 * CHECK prints where and why and counts; main() returns check_exit().
 */
#ifndef BCP_TEST_CHECK_H
#define BCP_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond, ...)						\
	do {								\
		check_count++;						\
		if (!(cond)) {						\
			check_failures++;				\
			fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__,	\
				__LINE__, #cond);			\
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
		}							\
	} while (0)

/* A setup step that must work, or the test cannot go on: exit 99. */
#define REQUIRE(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: HARD ERROR: %s: ",	\
				__FILE__, __LINE__, #cond);		\
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
			exit(99);					\
		}							\
	} while (0)

static inline int check_exit(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, check_count,
	       check_failures);
	return check_failures ? 1 : 0;
}

#endif /* BCP_TEST_CHECK_H */
