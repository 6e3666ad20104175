/* Tests of the frames of SPEC §7: base64, the streaming decoder and its
 * refusals, the encoder, and frames of tens of megabytes. */
#include "frame.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

/* Collects decoded messages as their JSON texts, one per line. */
typedef struct sink {
  lr_buf texts;
  size_t count;
  size_t stop_after; /* 0 = never stop */
  lr_json last;      /* the last message, kept for closer looks */
} sink;

static int collect(void *ud, lr_json *msg) {
  sink *s = ud;
  lr__json_write(msg, &s->texts);
  lr__buf_append_char(&s->texts, '\n');
  s->count++;
  lr__json_free(&s->last);
  s->last = *msg; /* take ownership */
  *msg = lr__json_null();
  return s->stop_after && s->count >= s->stop_after;
}

static void sink_free(sink *s) {
  lr__buf_free(&s->texts);
  lr__json_free(&s->last);
}

static const char *sink_text(sink *s) { return s->texts.data ? s->texts.data : ""; }

/* Base64 of raw bytes, through the text encoder (which does not parse). */
static char *b64(const char *raw, size_t len) {
  lr_buf out = {0};
  char err[LR_ERR_MAX];
  if (lr__frame_encode_text(raw, len, (size_t)-1, &out, err)) return lr__xstrdup("");
  out.data[--out.len] = '\0'; /* drop the newline */
  return lr__buf_steal(&out, NULL);
}

/* Feeds a whole stream in one chunk and finishes; returns the first
 * non-zero code (err filled) or 0. */
static int feed_all(size_t max_frame, const char *data, size_t len, sink *s, char err[LR_ERR_MAX]) {
  lr_frame_decoder d;
  lr__frame_decoder_init(&d, max_frame);
  int rc = lr__frame_feed(&d, data, len, collect, s, err);
  if (rc == 0) rc = lr__frame_finish(&d, err);
  lr__frame_decoder_free(&d);
  return rc;
}

/* The same stream one byte at a time: complete lines are then decoded from
 * the decoder's own buffer, in place. */
static int feed_bytes(size_t max_frame, const char *data, size_t len, sink *s,
                      char err[LR_ERR_MAX]) {
  lr_frame_decoder d;
  lr__frame_decoder_init(&d, max_frame);
  int rc = 0;
  for (size_t k = 0; k < len && rc == 0; k++) rc = lr__frame_feed(&d, data + k, 1, collect, s, err);
  if (rc == 0) rc = lr__frame_finish(&d, err);
  lr__frame_decoder_free(&d);
  return rc;
}

/* Expects the stream to be refused with a message containing `what`, fed
 * whole and fed byte by byte, with the same message both ways. */
static void refused(size_t max_frame, const char *data, size_t len, const char *what) {
  sink s = {0}, t = {0};
  char err[LR_ERR_MAX] = "", err2[LR_ERR_MAX] = "";
  CHECK(feed_all(max_frame, data, len, &s, err) == -1);
  if (!strstr(err, what)) {
    fprintf(stderr, "  wanted an error with \"%s\", got \"%s\"\n", what, err);
    CHECK(strstr(err, what) != NULL);
  }
  CHECK(feed_bytes(max_frame, data, len, &t, err2) == -1);
  CHECK_STR(err2, err);
  CHECK(s.count == t.count);
  sink_free(&s);
  sink_free(&t);
}

#define REFUSED(max, lit, what) refused(max, lit, sizeof(lit) - 1, what)

/* A frame whose payload is raw bytes (valid JSON or not). */
static void refused_payload(const char *raw, size_t len, const char *what) {
  char *b = b64(raw, len);
  lr_buf line = {0};
  lr__buf_append_str(&line, b);
  lr__buf_append_char(&line, '\n');
  refused(1000, line.data, line.len, what);
  lr__buf_free(&line);
  free(b);
}

#define REFUSED_PAYLOAD(lit, what) refused_payload(lit, sizeof(lit) - 1, what)

static void test_base64(void) {
  CHECK(lr__base64_len(0) == 0);
  CHECK(lr__base64_len(1) == 4);
  CHECK(lr__base64_len(2) == 4);
  CHECK(lr__base64_len(3) == 4);
  CHECK(lr__base64_len(4) == 8);
  CHECK(lr__base64_len(268435456) == 357913944);
  CHECK(lr__base64_len((size_t)-1) == (size_t)-1); /* saturates */

  /* RFC 4648 §10 vectors. */
  static const char *const vec[][2] = {
      {"f", "Zg=="},     {"fo", "Zm8="},         {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
  };
  for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
    char *b = b64(vec[i][0], strlen(vec[i][0]));
    CHECK_STR(b, vec[i][1]);
    free(b);
  }
  /* All byte values, every alignment. */
  unsigned char all[256];
  for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
  char *b = b64((const char *)all, 256);
  CHECK(strlen(b) == 344);
  CHECK(strncmp(b, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v", 64) == 0);
  CHECK(strcmp(b + 336, "/P3+/w==") == 0);
  free(b);
}

static void test_encode(void) {
  char err[LR_ERR_MAX];
  lr_buf out = {0};
  CHECK(lr__frame_encode_text("{}", 2, 2, &out, err) == 0);
  CHECK_STR(out.data, "e30=\n");
  /* Over max_frame: refused, nothing appended. */
  CHECK(lr__frame_encode_text("{}", 2, 1, &out, err) == -1);
  CHECK(strstr(err, "maxFrameBytes") != NULL);
  CHECK_STR(out.data, "e30=\n");
  /* An empty text would be an empty line: refused. */
  CHECK(lr__frame_encode_text("", 0, 10, &out, err) == -1);
  CHECK(out.len == 5);
  lr__buf_free(&out);

  /* lr__frame_encode matches the text encoder for every padding case,
   * appended after data already in the buffer. */
  for (size_t n = 0; n < 40; n++) {
    char s[64];
    memset(s, 'a' + (int)(n % 26), n);
    lr_json v = lr__json_string(s, n);
    lr_buf text = {0}, want = {0}, got = {0};
    lr__json_write(&v, &text);
    lr__buf_append_str(&want, "prefix");
    lr__buf_append_str(&got, "prefix");
    CHECK(lr__frame_encode_text(text.data, text.len, 100, &want, err) == 0);
    CHECK(lr__frame_encode(&v, 100, &got, err) == 0);
    CHECK_STR(got.data, want.data);
    CHECK(got.len == want.len);
    lr__json_free(&v);
    lr__buf_free(&text);
    lr__buf_free(&want);
    lr__buf_free(&got);
  }

  /* A message over max_frame: refused, nothing appended. */
  lr_json msg = lr__json_object(2);
  msg.u.items[0] = lr__json_string("type", 4);
  msg.u.items[1] = lr__json_string("log", 3);
  msg.u.items[2] = lr__json_string("text", 4);
  msg.u.items[3] = lr__json_string("h\xc3\xa9\n", 4);
  size_t size = lr__json_size(&msg); /* {"type":"log","text":"hé\n"} */
  CHECK(size == 29);
  lr__buf_append_str(&out, "x");
  CHECK(lr__frame_encode(&msg, size - 1, &out, err) == -1);
  CHECK_STR(out.data, "x");
  CHECK(lr__frame_encode(&msg, size, &out, err) == 0);
  CHECK(out.len == 1 + lr__base64_len(size) + 1);
  /* And it decodes back to the same message. */
  sink s = {0};
  CHECK(feed_all(size, out.data + 1, out.len - 1, &s, err) == 0);
  CHECK_STR(sink_text(&s), "{\"type\":\"log\",\"text\":\"h\xc3\xa9\\n\"}\n");
  CHECK(s.count == 1 && s.last.type == LR_JOBJECT);
  sink_free(&s);
  lr__json_free(&msg);
  lr__buf_free(&out);
}

/* A stream of several frames, fed in every possible two-way split and byte
 * by byte: the same messages each time. */
static void test_splits(void) {
  static const char *const texts[] = {
      "{}", "[1,2,3]", "\"\xe2\x82\xac \xf0\x9f\x98\x80\"", "\"\\ud800\"", "null", "1e+21",
      "{\"a\":[true,false,{\"b\":\"\\u0000\"}]}", " 7 ",
  };
  const size_t n = sizeof texts / sizeof texts[0];
  lr_buf stream = {0}, want = {0};
  char err[LR_ERR_MAX];
  for (size_t i = 0; i < n; i++) {
    CHECK(lr__frame_encode_text(texts[i], strlen(texts[i]), 100, &stream, err) == 0);
    lr_json v;
    CHECK(lr__json_parse(texts[i], strlen(texts[i]), &v, err) == 0);
    lr__json_write(&v, &want);
    lr__buf_append_char(&want, '\n');
    lr__json_free(&v);
  }

  /* One chunk. */
  sink s = {0};
  CHECK(feed_all(100, stream.data, stream.len, &s, err) == 0);
  CHECK(s.count == n);
  CHECK_STR(sink_text(&s), want.data);
  sink_free(&s);

  /* Every two-way split. */
  int bad = 0;
  for (size_t k = 0; k <= stream.len; k++) {
    sink t = {0};
    lr_frame_decoder d;
    lr__frame_decoder_init(&d, 100);
    int rc = lr__frame_feed(&d, stream.data, k, collect, &t, err);
    rc |= lr__frame_feed(&d, stream.data + k, stream.len - k, collect, &t, err);
    rc |= lr__frame_finish(&d, err);
    if (rc || t.count != n || strcmp(sink_text(&t), want.data) != 0) bad++;
    lr__frame_decoder_free(&d);
    sink_free(&t);
  }
  CHECK(bad == 0);

  /* Byte by byte, with empty chunks in between. */
  sink t = {0};
  lr_frame_decoder d;
  lr__frame_decoder_init(&d, 100);
  int rc = 0;
  for (size_t k = 0; k < stream.len; k++) {
    rc |= lr__frame_feed(&d, stream.data + k, 1, collect, &t, err);
    rc |= lr__frame_feed(&d, stream.data + k, 0, collect, &t, err);
  }
  CHECK(rc == 0);
  CHECK(lr__frame_finish(&d, err) == 0);
  CHECK_STR(sink_text(&t), want.data);
  lr__frame_decoder_free(&d);
  sink_free(&t);

  /* A callback that stops: feeding returns 1 after that message. */
  sink u = {.stop_after = 2};
  lr__frame_decoder_init(&d, 100);
  CHECK(lr__frame_feed(&d, stream.data, stream.len, collect, &u, err) == 1);
  CHECK(u.count == 2);
  lr__frame_decoder_free(&d);
  sink_free(&u);

  lr__buf_free(&stream);
  lr__buf_free(&want);
}

static void test_refusals(void) {
  /* Bytes outside printable ASCII and "\n". */
  REFUSED(100, "e30=\r\n", "outside printable ASCII");
  REFUSED(100, "e30=\t", "outside printable ASCII");
  REFUSED(100, "e3\x7f=\n", "outside printable ASCII");
  REFUSED(100, "e3\x80=\n", "outside printable ASCII");
  REFUSED(100, "e3\xff=\n", "outside printable ASCII");
  refused(100, "e3\0=\n", 5, "outside printable ASCII");
  /* Refused as soon as it arrives, before the line ends. */
  {
    lr_frame_decoder d;
    char err[LR_ERR_MAX];
    sink s = {0};
    lr__frame_decoder_init(&d, 100);
    CHECK(lr__frame_feed(&d, "e3", 2, collect, &s, err) == 0);
    CHECK(lr__frame_feed(&d, "0\x01", 2, collect, &s, err) == -1);
    CHECK(strstr(err, "0x01") != NULL);
    CHECK(d.failed && d.line.len == 0);
    lr__frame_decoder_free(&d);
    sink_free(&s);
  }

  /* Line length: max_frame 3 gives max_line 4. */
  REFUSED(3, "e30=e\n", "line longer than 4");
  REFUSED(3, "AAAAAAAA", "line longer than 4");
  {
    lr_frame_decoder d;
    char err[LR_ERR_MAX];
    sink s = {0};
    lr__frame_decoder_init(&d, 3);
    CHECK(d.max_line == 4);
    CHECK(lr__frame_feed(&d, "e3", 2, collect, &s, err) == 0);
    CHECK(lr__frame_feed(&d, "0=", 2, collect, &s, err) == 0);
    CHECK(lr__frame_feed(&d, "e", 1, collect, &s, err) == -1); /* the 5th byte, no newline yet */
    lr__frame_decoder_free(&d);
    sink_free(&s);
  }
  /* A stream with no newline is refused without buffering it. */
  {
    size_t big = 1 << 20;
    char *junk = malloc(big);
    memset(junk, 'A', big);
    lr_frame_decoder d;
    char err[LR_ERR_MAX];
    sink s = {0};
    lr__frame_decoder_init(&d, 1000);
    int rc = 0;
    for (size_t k = 0; k < big && rc == 0; k += 100) rc = lr__frame_feed(&d, junk + k, 100, collect, &s, err);
    CHECK(rc == -1);
    CHECK(d.line.cap <= 2048);
    CHECK(strstr(err, "line longer than 1336") != NULL);
    lr__frame_decoder_free(&d);
    sink_free(&s);
    free(junk);
  }

  /* Empty lines. */
  REFUSED(100, "\n", "empty line");
  REFUSED(100, "e30=\n\ne30=\n", "empty line");

  /* Malformed base64. */
  REFUSED(100, "e30\n", "multiple of 4");
  REFUSED(100, "e30=e\n", "multiple of 4");
  REFUSED(100, "e3 =\n", "malformed base64");
  REFUSED(100, "e3*=\n", "malformed base64");
  REFUSED(100, "W10_\n", "malformed base64"); /* base64url is not base64 */
  REFUSED(100, "W10-\n", "malformed base64");
  REFUSED(100, "e30=e30=\n", "'=' at offset 3");
  REFUSED(100, "====\n", "malformed base64");
  REFUSED(100, "A===\n", "malformed base64");
  REFUSED(100, "e=0=\n", "malformed base64");
  REFUSED(100, "=30=\n", "malformed base64");
  /* Non-zero bits under the padding: "{" is "ew==", "{}" is "e30=". */
  REFUSED(100, "ex==\n", "padding bits");
  REFUSED(100, "e31=\n", "padding bits");
  REFUSED(100, "e33=\n", "padding bits");
  {
    sink s = {0};
    char err[LR_ERR_MAX];
    CHECK(feed_all(100, "MQ==\nMTI=\nMTIz\n", 15, &s, err) == 0); /* 1, 12, 123 */
    CHECK_STR(sink_text(&s), "1\n12\n123\n");
    sink_free(&s);
  }

  /* Decoded bytes over max_frame: 8 base64 bytes can carry 4, 5 or 6. */
  {
    sink s = {0};
    char err[LR_ERR_MAX];
    CHECK(feed_all(5, "IjEyMyI=\n", 9, &s, err) == 0); /* "123" in 5 bytes */
    CHECK_STR(sink_text(&s), "\"123\"\n");
    CHECK(feed_bytes(5, "IjEyMyI=\n", 9, &s, err) == 0); /* a line of exactly max_line */
    CHECK_STR(sink_text(&s), "\"123\"\n\"123\"\n");
    sink_free(&s);
  }
  REFUSED(4, "IjEyMyI=\n", "5 decoded bytes, over maxFrameBytes 4");
  REFUSED(4, "IjEyMzQi\n", "6 decoded bytes");

  /* Invalid UTF-8, surrogates in WTF-8 form included. */
  REFUSED_PAYLOAD("\"\xff\"", "UTF-8");
  REFUSED_PAYLOAD("\"\xc0\xaf\"", "UTF-8");
  REFUSED_PAYLOAD("\"\xe2\x82\"", "UTF-8");
  REFUSED_PAYLOAD("\"\xed\xa0\x80\"", "UTF-8");
  REFUSED_PAYLOAD("\"\xed\xbf\xbf\"", "UTF-8");
  REFUSED_PAYLOAD("\"\xf4\x90\x80\x80\"", "UTF-8");

  /* Invalid JSON. */
  REFUSED_PAYLOAD("{", "invalid JSON");
  REFUSED_PAYLOAD("[1,]", "invalid JSON");
  REFUSED_PAYLOAD("1 2", "invalid JSON");
  REFUSED_PAYLOAD("NaN", "invalid JSON");
  REFUSED_PAYLOAD("'a'", "invalid JSON");
  REFUSED_PAYLOAD(" ", "invalid JSON");
  refused_payload("\"a\0\"", 4, "invalid JSON"); /* a raw NUL in a string */

  /* The stream ends mid-frame. */
  REFUSED(100, "e30=\ne30", "stream ended mid-frame");
  REFUSED(100, "e30=", "stream ended mid-frame");

  /* Frames before a bad byte are delivered; after a refusal, everything is. */
  {
    lr_frame_decoder d;
    char err[LR_ERR_MAX];
    sink s = {0};
    lr__frame_decoder_init(&d, 100);
    CHECK(lr__frame_feed(&d, "e30=\nW10=\n\x01", 11, collect, &s, err) == -1);
    CHECK(s.count == 2);
    CHECK_STR(sink_text(&s), "{}\n[]\n");
    CHECK(lr__frame_feed(&d, "e30=\n", 5, collect, &s, err) == -1);
    CHECK(strstr(err, "already failed") != NULL);
    CHECK(lr__frame_finish(&d, err) == -1);
    CHECK(s.count == 2);
    lr__frame_decoder_free(&d);
    sink_free(&s);
  }
  /* A failure while finishing sticks too. */
  {
    lr_frame_decoder d;
    char err[LR_ERR_MAX];
    lr__frame_decoder_init(&d, 100);
    CHECK(lr__frame_finish(&d, err) == 0); /* an empty stream is fine */
    CHECK(lr__frame_feed(&d, "e30", 3, collect, NULL, err) == 0);
    CHECK(lr__frame_finish(&d, err) == -1);
    CHECK(strstr(err, "mid-frame") != NULL);
    CHECK(lr__frame_feed(&d, "=\n", 2, collect, NULL, err) == -1);
    lr__frame_decoder_free(&d);
  }
}

/* A frame of tens of megabytes, whole and in 64 KiB chunks; LR_BIG_FRAME
 * (bytes) overrides the size, e.g. to keep valgrind runs short. */
static void test_big(void) {
  size_t n = 90u * 1000 * 1000;
  const char *env = getenv("LR_BIG_FRAME");
  if (env) n = (size_t)strtoull(env, NULL, 10);
  size_t max_frame = n + 2;
  char err[LR_ERR_MAX];

  lr_json v;
  v.type = LR_JSTRING;
  v.len = n;
  v.u.str = lr__xmalloc(n + 1);
  for (size_t i = 0; i < n; i++) v.u.str[i] = (char)('a' + i % 26);
  v.u.str[n] = '\0';

  clock_t t0 = clock();
  lr_buf frame = {0};
  CHECK(lr__frame_encode(&v, max_frame, &frame, err) == 0);
  CHECK(frame.len == lr__base64_len(n + 2) + 1);
  CHECK(lr__frame_encode(&v, max_frame - 1, &frame, err) == -1);

  sink s = {0};
  CHECK(feed_all(max_frame, frame.data, frame.len, &s, err) == 0);
  CHECK(s.count == 1 && s.last.type == LR_JSTRING && s.last.len == n);
  CHECK(s.last.u.str && memcmp(s.last.u.str, v.u.str, n) == 0);
  lr__buf_free(&s.texts);
  lr__json_free(&s.last);
  s.count = 0;

  lr_frame_decoder d;
  lr__frame_decoder_init(&d, max_frame);
  int rc = 0;
  for (size_t k = 0; k < frame.len && rc == 0; k += 65536) {
    size_t m = frame.len - k < 65536 ? frame.len - k : 65536;
    rc = lr__frame_feed(&d, frame.data + k, m, collect, &s, err);
  }
  CHECK(rc == 0);
  CHECK(lr__frame_finish(&d, err) == 0);
  CHECK(s.count == 1 && s.last.len == n && memcmp(s.last.u.str, v.u.str, n) == 0);
  /* The big pending buffer is not kept once its frame is through. */
  CHECK(d.line.cap <= (1u << 20));
  lr__frame_decoder_free(&d);
  /* Two bytes less room: refused. */
  lr__frame_decoder_init(&d, n);
  CHECK(lr__frame_feed(&d, frame.data, frame.len, collect, &s, err) == -1);
  lr__frame_decoder_free(&d);
  fprintf(stderr, "big frame (%zu bytes): %.2fs\n", n, (double)(clock() - t0) / CLOCKS_PER_SEC);

  sink_free(&s);
  lr__buf_free(&frame);
  lr__json_free(&v);
}

int main(void) {
  test_base64();
  test_encode();
  test_splits();
  test_refusals();
  test_big();
  return CHECK_DONE();
}
