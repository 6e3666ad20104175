/* Reading a fuzzer's input as a stream of small decisions: every target
 * takes its options from the front of the input and its payload from the
 * rest, so a crashing file replays exactly. Header-only, shared by the
 * targets of fuzz/. */
#ifndef LR_FUZZ_INPUT_H
#define LR_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lr_fuzz_in {
  const uint8_t *p;
  size_t n;
} lr_fuzz_in;

/* One byte, 0 once the input is used up (so short inputs still decide). */
static inline uint8_t lr_fuzz_u8(lr_fuzz_in *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

static inline uint32_t lr_fuzz_u32(lr_fuzz_in *in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = v << 8 | lr_fuzz_u8(in);
  return v;
}

static inline uint64_t lr_fuzz_u64(lr_fuzz_in *in) {
  return (uint64_t)lr_fuzz_u32(in) << 32 | lr_fuzz_u32(in);
}

/* Up to max bytes, the length chosen by the input. */
static inline const uint8_t *lr_fuzz_bytes(lr_fuzz_in *in, size_t max, size_t *len) {
  size_t k = lr_fuzz_u8(in);
  if (k > max) k = max;
  if (k > in->n) k = in->n;
  const uint8_t *s = in->p;
  in->p += k, in->n -= k;
  *len = k;
  return s;
}

/* A property the target checks failed: print why and abort, which libFuzzer
 * reports as a crash and saves the input for. */
#define LR_FUZZ_ASSERT(cond, ...)                                             \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                           \
      fputc('\n', stderr);                                                    \
      abort();                                                                \
    }                                                                         \
  } while (0)

#endif
