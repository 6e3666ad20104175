/* Fuzz target: the decoder that turns what a sandbox writes to its pipes
 * into log text (lr__utf8_stream_feed in core/util.c): any bytes in,
 * UTF-8 out, invalid sequences replaced per maximal subpart as TextDecoder
 * does, a sequence cut by a chunk's end completed by the next chunk.
 *
 * Fed whole, byte by byte and in chunks the input chooses, the text must be
 * the same; it is always valid UTF-8; valid input comes out unchanged. */
#include "util.h"
#include "fuzz_input.h"

static void lr_fuzz_feed(const uint8_t *p, size_t n, int step, uint32_t seed, lr_buf *out) {
  lr_utf8_stream st = {0};
  size_t pos = 0;
  while (pos < n) {
    size_t k = step == 0 ? n - pos : step == 1 ? 1 : 1 + ((seed = seed * 1103515245u + 12345u) >> 16) % 7;
    if (k > n - pos) k = n - pos;
    char *chunk = lr__xmemdup(p + pos, k); /* exactly k bytes: ASan sees overreads */
    size_t before = out->len;
    lr__utf8_stream_feed(&st, chunk, k, false, out);
    free(chunk);
    /* Each chunk's text is a log entry of its own: it must be UTF-8 alone. */
    LR_FUZZ_ASSERT(lr__utf8_valid(out->data ? out->data + before : "", out->len - before, false),
                   "a chunk's text is not UTF-8");
    LR_FUZZ_ASSERT(st.npend < 4, "%zu bytes held back", st.npend);
    pos += k;
  }
  lr__utf8_stream_feed(&st, "", 0, true, out);
  LR_FUZZ_ASSERT(st.npend == 0, "bytes held back at the end");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lr_fuzz_in in = {data, size};
  uint32_t seed = lr_fuzz_u32(&in);
  lr_buf out[3] = {{0}};
  for (int step = 0; step < 3; step++) lr_fuzz_feed(in.p, in.n, step, seed, &out[step]);
  for (int step = 1; step < 3; step++)
    LR_FUZZ_ASSERT(out[step].len == out[0].len && (!out[0].len || memcmp(out[step].data, out[0].data, out[0].len) == 0),
                   "feeding %d gives other text", step);
  LR_FUZZ_ASSERT(lr__utf8_valid(out[0].data ? out[0].data : "", out[0].len, false), "the text is not UTF-8");
  if (lr__utf8_valid((const char *)in.p, in.n, false))
    LR_FUZZ_ASSERT(out[0].len == in.n && (!in.n || memcmp(out[0].data, in.p, in.n) == 0), "valid input changed");
  for (int step = 0; step < 3; step++) lr__buf_free(&out[step]);
  return 0;
}
