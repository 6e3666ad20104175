/* Tests of Connect envelopes (core/connect.c): the streaming reader at every
 * split a pipe or a socket may make, the end-of-stream flag, the size limit,
 * and the base64 helpers the E2B backend uses with them (core/frame.c). */
#include "connect.h"
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct seen {
  lr_buf text; /* "flags:message|" per envelope */
  size_t count;
  size_t stop_after;
} seen;

static int collect(void *ud, unsigned flags, const char *msg, size_t len) {
  seen *s = ud;
  char head[16];
  snprintf(head, sizeof head, "%u:", flags);
  lr__buf_append_str(&s->text, head);
  lr__buf_append(&s->text, msg, len);
  lr__buf_append_char(&s->text, '|');
  s->count++;
  return s->stop_after && s->count >= s->stop_after;
}

static void test_splits(void) {
  lr_buf stream = {0};
  lr__connect_envelope(&stream, 0, "{\"event\":{\"start\":{\"pid\":7}}}", 29);
  lr__connect_envelope(&stream, 0, "", 0);
  lr__connect_envelope(&stream, 0, "{\"event\":{\"keepalive\":{}}}", 26);
  lr__connect_envelope(&stream, LR_CONNECT_END_STREAM, "{}", 2);
  const char *want = "0:{\"event\":{\"start\":{\"pid\":7}}}|0:|0:{\"event\":{\"keepalive\":{}}}|2:{}|";
  /* Every split into two reads, and one byte per read. */
  for (size_t cut = 0; cut <= stream.len; cut++) {
    lr_connect_reader r;
    lr__connect_reader_init(&r, 1024);
    seen s = {0};
    char err[LR_ERR_MAX];
    CHECK(lr__connect_feed(&r, stream.data, cut, collect, &s, err) == 0);
    CHECK(lr__connect_feed(&r, stream.data + cut, stream.len - cut, collect, &s, err) == 0);
    CHECK_STR(s.text.data, want);
    CHECK(lr__connect_at_boundary(&r));
    lr__buf_free(&s.text);
    lr__connect_reader_free(&r);
  }
  lr_connect_reader r;
  lr__connect_reader_init(&r, 1024);
  seen s = {0};
  char err[LR_ERR_MAX];
  for (size_t i = 0; i < stream.len; i++) {
    CHECK(lr__connect_feed(&r, stream.data + i, 1, collect, &s, err) == 0);
    /* Mid-envelope the reader knows it. */
    if (i == 3) CHECK(!lr__connect_at_boundary(&r));
  }
  CHECK_STR(s.text.data, want);
  lr__buf_free(&s.text);
  lr__connect_reader_free(&r);
  lr__buf_free(&stream);
}

static void test_refusals(void) {
  lr_connect_reader r;
  lr__connect_reader_init(&r, 16);
  seen s = {0};
  char err[LR_ERR_MAX];
  /* A header that promises 2^31-1 bytes is refused at once, not awaited. */
  const char huge[5] = {0, 0x7f, (char)0xff, (char)0xff, (char)0xff};
  CHECK(lr__connect_feed(&r, huge, 5, collect, &s, err) == -1);
  CHECK_STR(err, "an envelope of 2147483647 bytes is over the limit of 16");
  CHECK(lr__connect_feed(&r, "", 0, collect, &s, err) == -1);
  CHECK(!lr__connect_at_boundary(&r));
  CHECK(s.count == 0);
  lr__connect_reader_free(&r);

  /* The callback stops the reader. */
  lr_buf two = {0};
  lr__connect_envelope(&two, 0, "a", 1);
  lr__connect_envelope(&two, 0, "b", 1);
  lr__connect_reader_init(&r, 16);
  seen t = {.stop_after = 1};
  CHECK(lr__connect_feed(&r, two.data, two.len, collect, &t, err) == 1);
  CHECK_STR(t.text.data, "0:a|");
  lr__buf_free(&t.text);
  lr__buf_free(&two);
  lr__connect_reader_free(&r);
}

static void test_base64(void) {
  char err[LR_ERR_MAX];
  const char *inputs[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\x00\x80"};
  const size_t lens[] = {0, 1, 2, 3, 4, 5, 6, 3};
  const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy", "/wCA"};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    lr_buf enc = {0}, dec = {0};
    lr__base64_append(&enc, inputs[i], lens[i]);
    CHECK_STR(enc.data ? enc.data : "", want[i]);
    CHECK(lr__base64_decode_append(&dec, enc.data ? enc.data : "", enc.len, err) == 0);
    CHECK(dec.len == lens[i] && (lens[i] == 0 || memcmp(dec.data, inputs[i], lens[i]) == 0));
    lr__buf_free(&enc);
    lr__buf_free(&dec);
  }
  lr_buf dec = {0};
  lr__buf_append_str(&dec, "kept");
  CHECK(lr__base64_decode_append(&dec, "Zm9", 3, err) == -1);
  CHECK(lr__base64_decode_append(&dec, "Zm!v", 4, err) == -1);
  CHECK(lr__base64_decode_append(&dec, "Zg=v", 4, err) == -1);
  CHECK_STR(dec.data, "kept"); /* a refusal appends nothing */
  lr__buf_free(&dec);
}

int main(void) {
  test_splits();
  test_refusals();
  test_base64();
  return CHECK_DONE();
}
