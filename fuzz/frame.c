/* Fuzz target: the frame decoder of SPEC §7, fed the way a pipe delivers.
 *
 * The same stream goes in whole, one byte at a time and in chunks the input
 * chooses: every feeding must deliver the same messages and agree on
 * success or failure (only the wording of a refusal may differ, since a
 * line can be wrong in two ways at once). In the second mode the input is a
 * list of payloads the target frames itself (with the channel token when
 * one is set), so the decoder's answer is known in advance: each payload
 * that is non-empty, UTF-8, JSON and within maxFrameBytes comes out as the
 * parsed message; the first one that is not fails the stream. */
#include "frame.h"
#include "fuzz_input.h"

typedef struct lr_fuzz_msgs {
  lr_buf text; /* each message as JSON, one per line (JSON text has no raw \n) */
  size_t n;
} lr_fuzz_msgs;

static int lr_fuzz_collect(void *ud, lr_json *msg) {
  lr_fuzz_msgs *m = ud;
  lr__json_write(msg, &m->text);
  lr__buf_append_char(&m->text, '\n');
  m->n++;
  lr__json_free(msg);
  return 0;
}

static bool lr_fuzz_same(const lr_fuzz_msgs *a, const lr_fuzz_msgs *b) {
  return a->text.len == b->text.len && (!a->text.len || memcmp(a->text.data, b->text.data, a->text.len) == 0);
}

typedef struct lr_fuzz_setup {
  size_t max_frame;
  char token[64];
  size_t token_len;
} lr_fuzz_setup;

/* Feeds s[0..n) in chunks: step 0 = whole, 1 = byte by byte, else chunk
 * sizes from a small generator seeded by `seed`. Returns 0 or -1. */
static int lr_fuzz_feed(const lr_fuzz_setup *su, const char *s, size_t n, int step, uint32_t seed,
                        lr_fuzz_msgs *out) {
  lr_frame_decoder d;
  lr__frame_decoder_init(&d, su->max_frame);
  if (su->token_len) lr__frame_decoder_set_token(&d, su->token, su->token_len);
  char err[LR_ERR_MAX];
  int rc = 0;
  size_t pos = 0;
  while (pos < n && rc == 0) {
    size_t k;
    if (step == 0) {
      k = n - pos;
    } else if (step == 1) {
      k = 1;
    } else {
      seed = seed * 1103515245u + 12345u;
      k = 1 + (seed >> 16) % 97; /* split anywhere, often mid-line */
    }
    if (k > n - pos) k = n - pos;
    /* A chunk of its own, as read(2) would fill it: ASan sees overreads. */
    char *chunk = lr__xmemdup(s + pos, k);
    rc = lr__frame_feed(&d, chunk, k, lr_fuzz_collect, out, err);
    free(chunk);
    pos += k;
  }
  if (rc == 0) rc = lr__frame_finish(&d, err);
  if (rc) {
    LR_FUZZ_ASSERT(err[0] != '\0', "a refusal without a message");
    LR_FUZZ_ASSERT(lr__frame_feed(&d, "", 0, lr_fuzz_collect, out, err) == -1, "a failed decoder accepted more");
  }
  lr__frame_decoder_free(&d);
  return rc ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lr_fuzz_in in = {data, size};
  uint8_t flags = lr_fuzz_u8(&in);
  uint8_t sel = lr_fuzz_u8(&in);
  lr_fuzz_setup su = {.max_frame = sel == 255 ? (size_t)268435456 : 1 + (size_t)sel * 7};
  if (flags & 1) {
    su.token_len = 1 + lr_fuzz_u8(&in) % 63;
    for (size_t i = 0; i < su.token_len; i++) su.token[i] = (char)('A' + lr_fuzz_u8(&in) % 26);
  }
  uint32_t seed = lr_fuzz_u32(&in);

  lr_buf stream = {0};
  lr_fuzz_msgs want = {0};
  int want_rc = 0;
  bool known = flags & 2;
  if (!known) {
    lr__buf_append(&stream, in.p, in.n);
  } else {
    /* Payloads separated by 0xFF (never part of UTF-8), framed here. */
    const uint8_t *p = in.p, *end = in.p + in.n;
    while (p < end) {
      const uint8_t *q = memchr(p, 0xFF, (size_t)(end - p));
      size_t len = q ? (size_t)(q - p) : (size_t)(end - p);
      if (len) {
        if (su.token_len) lr__buf_append(&stream, su.token, su.token_len);
        char err[LR_ERR_MAX];
        int erc = lr__frame_encode_text((const char *)p, len, SIZE_MAX, &stream, err);
        LR_FUZZ_ASSERT(erc == 0, "encode: %s", err);
        if (want_rc == 0) {
          lr_json v;
          bool ok = len <= su.max_frame && lr__utf8_valid((const char *)p, len, false) &&
                    lr__json_parse((const char *)p, len, &v, err) == 0;
          if (ok) lr_fuzz_collect(&want, &v);
          else want_rc = -1;
        }
      }
      p += len + (q != NULL);
    }
  }

  lr_fuzz_msgs got[3] = {0};
  int rc[3];
  for (int step = 0; step < 3; step++)
    rc[step] = lr_fuzz_feed(&su, stream.data ? stream.data : "", stream.len, step, seed, &got[step]);
  for (int step = 1; step < 3; step++) {
    LR_FUZZ_ASSERT(rc[step] == rc[0], "feeding %d ends %d, whole ends %d", step, rc[step], rc[0]);
    LR_FUZZ_ASSERT(lr_fuzz_same(&got[step], &got[0]), "feeding %d delivered other messages (%zu vs %zu)", step, got[step].n, got[0].n);
  }
  if (known) {
    LR_FUZZ_ASSERT(rc[0] == want_rc, "decoder ends %d, expected %d", rc[0], want_rc);
    LR_FUZZ_ASSERT(lr_fuzz_same(&got[0], &want), "decoded %zu messages, expected %zu", got[0].n, want.n);
  }
  for (int step = 0; step < 3; step++) lr__buf_free(&got[step].text);
  lr__buf_free(&want.text);
  lr__buf_free(&stream);
  return 0;
}
