/* Fuzz target: the Connect envelope reader (core/connect.c) that splits
 * envd's process streams for the E2B backend. Any bytes in: fed whole, byte
 * by byte and in chunks the input chooses, the envelopes seen (flags and
 * messages) and the verdict must be the same; a refused stream stays
 * refused; every envelope re-encoded gives back the bytes it came from. */
#include "connect.h"
#include "fuzz_input.h"

typedef struct lr_fuzz_seen {
  lr_buf text;
  size_t count;
} lr_fuzz_seen;

static int lr_fuzz_collect(void *ud, unsigned flags, const char *msg, size_t len) {
  lr_fuzz_seen *s = ud;
  lr__connect_envelope(&s->text, flags, msg, len);
  s->count++;
  return 0;
}

/* Returns -1 when refused, else 1 when the stream ended on a boundary. */
static int lr_fuzz_feed(const uint8_t *p, size_t n, size_t max, int step, uint32_t seed, lr_fuzz_seen *s) {
  lr_connect_reader r;
  lr__connect_reader_init(&r, max);
  char err[LR_ERR_MAX];
  int verdict = 0;
  size_t pos = 0;
  while (pos < n && verdict == 0) {
    size_t k = step == 0 ? n - pos : step == 1 ? 1 : 1 + ((seed = seed * 1103515245u + 12345u) >> 16) % 9;
    if (k > n - pos) k = n - pos;
    char *chunk = lr__xmemdup(p + pos, k); /* exactly k bytes: ASan sees overreads */
    if (lr__connect_feed(&r, chunk, k, lr_fuzz_collect, s, err) < 0) verdict = -1;
    free(chunk);
    pos += k;
  }
  if (verdict == -1) LR_FUZZ_ASSERT(lr__connect_feed(&r, "", 0, lr_fuzz_collect, s, err) < 0, "refusal did not stick");
  else verdict = lr__connect_at_boundary(&r) ? 1 : 0;
  lr__connect_reader_free(&r);
  return verdict;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lr_fuzz_in in = {data, size};
  uint32_t seed = lr_fuzz_u32(&in);
  size_t max = lr_fuzz_u8(&in) * 8u;
  lr_fuzz_seen seen[3];
  memset(seen, 0, sizeof seen);
  int verdict[3];
  for (int step = 0; step < 3; step++) verdict[step] = lr_fuzz_feed(in.p, in.n, max, step, seed, &seen[step]);
  for (int step = 1; step < 3; step++) {
    LR_FUZZ_ASSERT(verdict[step] == verdict[0], "feeding %d gives verdict %d, not %d", step, verdict[step], verdict[0]);
    LR_FUZZ_ASSERT(seen[step].count == seen[0].count && seen[step].text.len == seen[0].text.len &&
                       (!seen[0].text.len || memcmp(seen[step].text.data, seen[0].text.data, seen[0].text.len) == 0),
                   "feeding %d sees other envelopes", step);
  }
  /* What was seen is a prefix of the input, byte for byte. */
  LR_FUZZ_ASSERT(seen[0].text.len <= in.n && (!seen[0].text.len || memcmp(seen[0].text.data, in.p, seen[0].text.len) == 0),
                 "the envelopes seen are not the input's");
  if (verdict[0] == 1) LR_FUZZ_ASSERT(seen[0].text.len == in.n, "a clean end left bytes unread");
  for (int step = 0; step < 3; step++) lr__buf_free(&seen[step].text);
  return 0;
}
