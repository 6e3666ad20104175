/* A tiny test harness for the engine's C tests: CHECK counts, main ends with
 * the plain line "N passed, N failed" and exits non-zero on any failure. */
#ifndef LR_CHECK_H
#define LR_CHECK_H

#include <stdio.h>
#include <string.h>

static int lr_check_passed, lr_check_failed;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (cond) {                                                             \
      lr_check_passed++;                                                    \
    } else {                                                                \
      lr_check_failed++;                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                       \
  } while (0)

#define CHECK_STR(got, want)                                                \
  do {                                                                      \
    const char *g_ = (got), *w_ = (want);                                   \
    if (g_ && w_ && strcmp(g_, w_) == 0) {                                  \
      lr_check_passed++;                                                    \
    } else {                                                                \
      lr_check_failed++;                                                    \
      fprintf(stderr, "%s:%d: got \"%s\", want \"%s\"\n", __FILE__, __LINE__, \
              g_ ? g_ : "(null)", w_ ? w_ : "(null)");                      \
    }                                                                       \
  } while (0)

#define CHECK_DONE()                                                        \
  (printf("%d passed, %d failed\n", lr_check_passed, lr_check_failed),     \
   lr_check_failed ? 1 : 0)

#endif
