/* The C side of the differential check (spec/differential/gen.mjs makes the
 * cases and JavaScript's answers): builds each value from its tokens, with
 * no JSON text involved, and compares
 *   - lr__json_write with JSON.stringify, byte for byte,
 *   - lr__json_size, the §5 ledger cost (value, or logs through
 *     lr__ledger_add_log) with Buffer.byteLength(JSON.stringify(x)),
 *   - lr__wire_encode's verdict with SPEC §6 (refuses NaN, ±Infinity, -0),
 *   - a lossless value through the wire and back, and JSON.stringify's text
 *     through lr__json_parse and back, with the same text;
 *   - for a JSON text (kind "p"), lr__json_parse then lr__json_write with
 *     JSON.stringify(JSON.parse(text));
 *   - for pipe bytes (kind "u"), the log text lr__utf8_stream_feed makes of
 *     each chunk with what TextDecoder's stream mode makes of it.
 * Reads the cases on stdin (or the file named); prints the first mismatches
 * and a count; exits 1 on any mismatch or a short stream. */
#define _GNU_SOURCE /* getline */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "ledger.h"
#include "wire.h"

static unsigned long lr_mismatches;

static void lr_mismatch(unsigned long n, const char *what, const char *want, size_t want_len, const char *got,
                        size_t got_len) {
  if (++lr_mismatches <= 20)
    fprintf(stderr, "case %lu: %s\n  want %.*s%s\n  got  %.*s%s\n", n, what, (int)(want_len > 400 ? 400 : want_len),
            want, want_len > 400 ? "..." : "", (int)(got_len > 400 ? 400 : got_len), got, got_len > 400 ? "..." : "");
}

static int lr_hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* UTF-16 units given as hex (4 digits each) to WTF-8: pairs join, lone
 * surrogates keep three bytes, as the engine stores JavaScript strings. */
static int lr_units(const char *h, size_t n, lr_json *out) {
  if (n % 4) return -1;
  size_t count = n / 4;
  unsigned *u = lr__xmalloc((count ? count : 1) * sizeof *u);
  for (size_t i = 0; i < count; i++) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
      int d = lr_hexval(h[4 * i + k]);
      if (d < 0) {
        free(u);
        return -1;
      }
      v = v << 4 | (unsigned)d;
    }
    u[i] = v;
  }
  lr_buf b = {0};
  lr__buf_reserve(&b, 4 * count + 1);
  for (size_t i = 0; i < count; i++) {
    unsigned cp = u[i];
    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < count && u[i + 1] >= 0xDC00 && u[i + 1] < 0xE000)
      cp = 0x10000 + ((cp - 0xD800) << 10) + (u[++i] - 0xDC00);
    char e[4];
    size_t k;
    if (cp < 0x80) e[0] = (char)cp, k = 1;
    else if (cp < 0x800) e[0] = (char)(0xC0 | cp >> 6), e[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
    else if (cp < 0x10000)
      e[0] = (char)(0xE0 | cp >> 12), e[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), e[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
    else
      e[0] = (char)(0xF0 | cp >> 18), e[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
      e[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), e[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
    lr__buf_append(&b, e, k);
  }
  free(u);
  *out = (lr_json){.type = LR_JSTRING, .len = b.len, .u.str = b.data ? b.data : lr__xmemdup("", 0)};
  return 0;
}

/* One token at *p (space-separated) into *out; containers come back empty
 * with room for their children. */
static int lr_token(const char **p, const char *end, lr_json *out) {
  const char *s = *p, *e = memchr(s, ' ', (size_t)(end - s));
  if (!e) e = end;
  *p = e < end ? e + 1 : end;
  if (e == s) return -1;
  switch (*s) {
    case 'z': *out = lr__json_null(); return 0;
    case 't': *out = lr__json_bool(true); return 0;
    case 'f': *out = lr__json_bool(false); return 0;
    case 's': return lr_units(s + 1, (size_t)(e - s - 1), out);
    case 'n': {
      if (e - s != 17) return -1;
      uint64_t bits = 0;
      for (int i = 1; i <= 16; i++) {
        int d = lr_hexval(s[i]);
        if (d < 0) return -1;
        bits = bits << 4 | (uint64_t)d;
      }
      double d;
      memcpy(&d, &bits, sizeof d);
      *out = lr__json_number_value(d);
      return 0;
    }
    case 'a':
    case 'o': {
      size_t n = strtoul(s + 1, NULL, 10);
      *out = *s == 'a' ? lr__json_array(n) : lr__json_object(n);
      return 0;
    }
    default: return -1;
  }
}

typedef struct lr_fill {
  lr_json *c;
  size_t slot, slots;
} lr_fill;

/* The whole value of a tokens field, without recursion. */
static int lr_value(const char *s, const char *end, lr_json *out) {
  lr_fill *st = NULL;
  size_t depth = 0, cap = 0;
  *out = lr__json_null();
  lr_json *dst = out;
  int rc = 0;
  for (;;) {
    if (s >= end || lr_token(&s, end, dst)) {
      rc = -1;
      break;
    }
    if ((dst->type == LR_JARRAY || dst->type == LR_JOBJECT) && dst->len) {
      if (depth == cap) st = lr__xrealloc(st, (cap = cap ? cap * 2 : 64) * sizeof *st);
      st[depth++] = (lr_fill){dst, 0, dst->type == LR_JOBJECT ? 2 * dst->len : dst->len};
    }
    while (depth && st[depth - 1].slot == st[depth - 1].slots) depth--;
    if (!depth) break;
    dst = &st[depth - 1].c->u.items[st[depth - 1].slot++];
  }
  free(st);
  if (!rc && s < end) rc = -1;
  if (rc) lr__json_free(out);
  return rc;
}

static bool lr_same(const lr_buf *b, const char *s, size_t n) {
  return b->len == n && (n == 0 || memcmp(b->data, s, n) == 0);
}

/* Kind "p": the text (hex of its UTF-8 bytes) parsed and written again. */
static void lr_parse_case(unsigned long n, const char *hex, const char *want) {
  size_t hn = strlen(hex), len = hn / 2;
  char *text = lr__xmalloc(len + 1);
  for (size_t i = 0; i < len; i++) {
    int hi = lr_hexval(hex[2 * i]), lo = lr_hexval(hex[2 * i + 1]);
    text[i] = (char)(hi << 4 | lo);
  }
  char err[LR_ERR_MAX];
  lr_json v;
  if (lr__json_parse(text, len, &v, err)) {
    lr_mismatch(n, "lr__json_parse refuses what JSON.parse reads", text, len, err, strlen(err));
  } else {
    lr_buf out = {0};
    lr__json_write(&v, &out);
    if (!lr_same(&out, want, strlen(want)))
      lr_mismatch(n, "parse + write differs from JSON.stringify(JSON.parse(text))", want, strlen(want), out.data, out.len);
    lr__buf_free(&out);
    lr__json_free(&v);
  }
  free(text);
}

/* Kind "u": chunks of pipe bytes, each decoded as the host decodes them. */
static void lr_pipe_case(unsigned long n, char *chunks, char *want) {
  lr_utf8_stream st = {0};
  lr_buf got = {0}, raw = {0};
  /* strsep, not strtok: an empty text between two dots is a field */
  char *c = strsep(&chunks, "."), *w = strsep(&want, ".");
  for (size_t i = 0;; i++) {
    raw.len = 0;
    for (size_t k = 0; c && c[k] && c[k + 1]; k += 2) {
      char b = (char)(lr_hexval(c[k]) << 4 | lr_hexval(c[k + 1]));
      lr__buf_append(&raw, &b, 1);
    }
    got.len = 0;
    lr__utf8_stream_feed(&st, raw.data ? raw.data : "", raw.len, c == NULL, &got);
    /* TextDecoder's text of this chunk, hex of its UTF-8 ("" is empty) */
    lr_buf hex = {0};
    for (size_t k = 0; k < got.len; k++) {
      char h[3];
      snprintf(h, sizeof h, "%02x", (unsigned char)got.data[k]);
      lr__buf_append(&hex, h, 2);
    }
    const char *expect = w ? w : "";
    if (!lr_same(&hex, expect, strlen(expect))) {
      char what[96];
      snprintf(what, sizeof what, "lr__utf8_stream_feed differs from TextDecoder at chunk %zu", i);
      lr_mismatch(n, what, expect, strlen(expect), hex.data ? hex.data : "", hex.len);
    }
    lr__buf_free(&hex);
    if (!c) break;
    c = chunks ? strsep(&chunks, ".") : NULL;
    w = want ? strsep(&want, ".") : NULL;
  }
  lr__buf_free(&got);
  lr__buf_free(&raw);
}

int main(int argc, char **argv) {
  FILE *in = stdin;
  if (argc > 1 && !(in = fopen(argv[1], "r"))) {
    perror(argv[1]);
    return 2;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  unsigned long n = 0, ended = 0, lossless_cases = 0, logs_cases = 0, parse_cases = 0, pipe_cases = 0;
  bool end_seen = false;
  while ((got = getline(&line, &cap, in)) > 0) {
    size_t len = (size_t)got;
    if (line[len - 1] == '\n') line[--len] = '\0';
    if (strncmp(line, "end ", 4) == 0) {
      ended = strtoul(line + 4, NULL, 10);
      end_seen = true;
      break;
    }
    n++;
    char *f[5];
    f[0] = line;
    int k = 1;
    for (char *p = line; k < 5 && (p = strchr(p, '\t')); p++) *p = '\0', f[k++] = p + 1;
    if (k != 5) {
      lr_mismatch(n, "malformed case line", "5 fields", 8, line, strlen(line));
      continue;
    }
    if (f[0][0] == 'u') {
      pipe_cases++;
      lr_pipe_case(n, f[1], f[2]);
      continue;
    }
    if (f[0][0] == 'p') {
      parse_cases++;
      lr_parse_case(n, f[1], f[2]);
      continue;
    }
    const char *text = f[2];
    size_t text_len = strlen(text);
    uint64_t bytes = strtoull(f[3], NULL, 10);
    bool lossless = f[4][0] == '1';
    lr_json v;
    if (lr_value(f[1], f[1] + strlen(f[1]), &v)) {
      lr_mismatch(n, "malformed tokens", "", 0, f[1], strlen(f[1]));
      continue;
    }
    char num[64];

    lr_buf out = {0};
    lr__json_write(&v, &out);
    if (!lr_same(&out, text, text_len)) lr_mismatch(n, "lr__json_write differs from JSON.stringify", text, text_len, out.data, out.len);
    if (lr__json_size(&v) != bytes) {
      int m = snprintf(num, sizeof num, "%zu", lr__json_size(&v));
      lr_mismatch(n, "lr__json_size differs from Buffer.byteLength", f[3], strlen(f[3]), num, (size_t)m);
    }
    if (f[0][0] == 'l') { /* the logs array, entry by entry as a run adds them */
      logs_cases++;
      lr_ledger l;
      lr__ledger_init(&l, UINT64_MAX);
      for (size_t i = 0; i < v.len; i++) lr__ledger_add_log(&l, v.u.items[i].u.str, v.u.items[i].len);
      if (l.logs_cost != bytes) {
        int m = snprintf(num, sizeof num, "%" PRIu64, l.logs_cost);
        lr_mismatch(n, "ledger logs cost differs from Buffer.byteLength", f[3], strlen(f[3]), num, (size_t)m);
      }
    } else if (lossless && lr__ledger_value_cost(&v) != bytes) {
      int m = snprintf(num, sizeof num, "%" PRIu64, lr__ledger_value_cost(&v));
      lr_mismatch(n, "ledger value cost differs from Buffer.byteLength", f[3], strlen(f[3]), num, (size_t)m);
    }

    char err[LR_ERR_MAX] = "";
    lr_buf wire = {0};
    int wrc = lr__wire_write(&v, &wire, err);
    if ((wrc == 0) != lossless)
      lr_mismatch(n, "the wire's verdict differs from SPEC §6", lossless ? "lossless" : "refused", lossless ? 8 : 7,
                  wrc == 0 ? "lossless" : err, wrc == 0 ? 8 : strlen(err));
    if (wrc == 0 && lossless) {
      lossless_cases++;
      lr_json tokens, back;
      if (lr__json_parse(wire.data, wire.len, &tokens, err) || lr__wire_decode(&tokens, &back, err)) {
        lr_mismatch(n, "own wire text refused", "", 0, err, strlen(err));
      } else {
        out.len = 0;
        lr__json_write(&back, &out);
        if (!lr_same(&out, text, text_len)) lr_mismatch(n, "changed through the wire", text, text_len, out.data, out.len);
        lr__json_free(&back);
      }
    }
    lr_json parsed;
    if (lr__json_parse(text, text_len, &parsed, err)) {
      lr_mismatch(n, "lr__json_parse refuses JSON.stringify's text", "", 0, err, strlen(err));
    } else {
      out.len = 0;
      lr__json_write(&parsed, &out);
      if (!lr_same(&out, text, text_len)) lr_mismatch(n, "parse + write changes JSON.stringify's text", text, text_len, out.data, out.len);
      lr__json_free(&parsed);
    }
    lr__buf_free(&wire);
    lr__buf_free(&out);
    lr__json_free(&v);
  }
  free(line);
  if (in != stdin) fclose(in);
  if (!end_seen || ended != n) {
    fprintf(stderr, "json_diff: the stream ended after %lu cases without its \"end\" line (a generator failure?)\n", n);
    return 1;
  }
  printf("json_diff: %lu cases (%lu lossless values, %lu logs arrays, %lu JSON texts, %lu pipe streams), "
         "%lu mismatches\n", n, lossless_cases, logs_cases, parse_cases, pipe_cases, lr_mismatches);
  return lr_mismatches ? 1 : 0;
}
