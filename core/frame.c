/* Frames of SPEC §7: base64(UTF-8(JSON)) + "\n". The decoder is streaming
 * and strict; every refusal is a bridge failure and sticks. */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

static const char lr__b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Decode table: 0..63 for the alphabet, 0xFF for anything else ('=' too:
 * padding is handled apart, at the end of the line only). Constant, so
 * decoders on several threads share it safely. */
#define LR_X16 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255
static const unsigned char lr__b64_table[256] = {
    LR_X16, LR_X16,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,  62, 255, 255, 255,  63,
     52,  53,  54,  55,  56,  57,  58,  59,  60,  61, 255, 255, 255, 255, 255, 255,
    255,   0,   1,   2,   3,   4,   5,   6,   7,   8,   9,  10,  11,  12,  13,  14,
     15,  16,  17,  18,  19,  20,  21,  22,  23,  24,  25, 255, 255, 255, 255, 255,
    255,  26,  27,  28,  29,  30,  31,  32,  33,  34,  35,  36,  37,  38,  39,  40,
     41,  42,  43,  44,  45,  46,  47,  48,  49,  50,  51, 255, 255, 255, 255, 255,
    LR_X16, LR_X16, LR_X16, LR_X16, LR_X16, LR_X16, LR_X16, LR_X16,
};
#undef LR_X16

/* Saturates rather than wraps, so a huge max_frame still gives a sane bound. */
size_t lr__base64_len(size_t n) {
  size_t quads = n / 3 + (n % 3 != 0);
  if (quads > SIZE_MAX / 4) return SIZE_MAX;
  return quads * 4;
}

/* Keeping a huge pending buffer alive after one big frame would pin that
 * memory for the rest of the run. */
#define LR_FRAME_KEEP_CAP ((size_t)1 << 20)

void lr__frame_decoder_init(lr_frame_decoder *d, size_t max_frame) {
  d->max_frame = max_frame;
  d->max_line = lr__base64_len(max_frame);
  d->line = (lr_buf){0};
  d->failed = false;
  d->token_len = 0;
}

void lr__frame_decoder_set_token(lr_frame_decoder *d, const char *token, size_t len) {
  if (len >= sizeof d->token) len = sizeof d->token - 1;
  memcpy(d->token, token, len);
  d->token_len = len;
  size_t b64 = lr__base64_len(d->max_frame);
  d->max_line = b64 > SIZE_MAX - len ? SIZE_MAX : b64 + len;
}

void lr__frame_decoder_free(lr_frame_decoder *d) {
  lr__buf_free(&d->line);
  d->failed = true;
}

/* Index of the first byte of p[0..n) outside 0x20..0x7E, or n. Checks blocks
 * with a branch-free reduction (vectorizable) and only then looks closer. */
static size_t lr__first_unprintable(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (n - i >= 64) {
    unsigned char bad = 0;
    for (size_t k = 0; k < 64; k++) bad |= (unsigned char)((unsigned char)(p[i + k] - 0x20) > 0x5E);
    if (bad) break;
    i += 64;
  }
  for (; i < n; i++)
    if ((unsigned char)(p[i] - 0x20) > 0x5E) return i;
  return n;
}

/* Index of the first byte of p[0..n) at or above 0x80, or n; same block
 * trick, since frames are mostly ASCII and lr__utf8_valid goes byte by byte. */
static size_t lr__first_non_ascii(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (n - i >= 64) {
    unsigned char any = 0;
    for (size_t k = 0; k < 64; k++) any |= p[i + k];
    if (any & 0x80) break;
    i += 64;
  }
  while (i < n && p[i] < 0x80) i++;
  return i;
}

static int lr__frame_fail(lr_frame_decoder *d) {
  d->failed = true;
  lr__buf_free(&d->line);
  return -1;
}

/* Decodes one complete line s[0..n) (no "\n", all printable) into a message.
 * With in_place, s is the decoder's own buffer and the bytes are decoded over
 * it: quad q reads s[4q..4q+3] before writing s[3q..3q+2], so nothing unread
 * is overwritten, and a big split frame needs no second buffer. */
static int lr__frame_decode_line(lr_frame_decoder *d, char *s, size_t n, bool in_place,
                                 lr_json *msg, char err[LR_ERR_MAX]) {
  const unsigned char *u = (const unsigned char *)s;
  if (n == 0) return lr__errf(err, "frame: empty line");
  if (n % 4) return lr__errf(err, "frame: malformed base64: length %zu is not a multiple of 4", n);
  size_t pads = u[n - 1] != '=' ? 0 : u[n - 2] != '=' ? 1 : 2;
  size_t out_len = n / 4 * 3 - pads;
  if (out_len > d->max_frame)
    return lr__errf(err, "frame: %zu decoded bytes, over maxFrameBytes %zu", out_len, d->max_frame);

  unsigned char *out = in_place ? (unsigned char *)s : lr__xmalloc(out_len + 1);
  size_t full = (n - (pads ? 4 : 0)) / 4; /* quads without padding */
  const unsigned char *t = lr__b64_table;
  unsigned char *o = out;
  for (size_t q = 0; q < full; q++, u += 4) {
    unsigned a = t[u[0]], b = t[u[1]], c = t[u[2]], e = t[u[3]];
    if ((a | b | c | e) & 0x80) goto bad_quad;
    uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | e;
    o[0] = (unsigned char)(v >> 16);
    o[1] = (unsigned char)(v >> 8);
    o[2] = (unsigned char)v;
    o += 3;
  }
  if (pads) {
    unsigned a = t[u[0]], b = t[u[1]];
    unsigned c = pads == 1 ? t[u[2]] : 0;
    if ((a | b | c) & 0x80) goto bad_quad;
    /* Canonical base64 only: the bits the padding drops must be zero. */
    if ((pads == 2 && (b & 0x0F)) || (pads == 1 && (c & 0x03))) {
      if (!in_place) free(out);
      return lr__errf(err, "frame: malformed base64: non-zero padding bits");
    }
    o[0] = (unsigned char)(a << 2 | b >> 4);
    if (pads == 1) o[1] = (unsigned char)(b << 4 | c >> 2);
    o += 3 - pads;
  }
  out[out_len] = '\0';

  /* Strict UTF-8: a WTF-8 surrogate has no business in JSON text, where
   * lone surrogates travel as \u escapes. Past an ASCII prefix the check
   * starts on a code point boundary, so skipping the prefix is exact. */
  size_t ascii = lr__first_non_ascii(out, out_len);
  if (!lr__utf8_valid((const char *)out + ascii, out_len - ascii, false)) {
    if (!in_place) free(out);
    return lr__errf(err, "frame: decoded bytes are not valid UTF-8");
  }
  char jerr[LR_ERR_MAX];
  int rc = lr__json_parse((const char *)out, out_len, msg, jerr);
  if (!in_place) free(out);
  if (rc) return lr__errf(err, "frame: invalid JSON: %s", jerr);
  return 0;

bad_quad:
  if (!in_place) free(out);
  /* The culprit is in the quad at u, still intact even in place: a stray
   * '=' or a printable byte outside the alphabet. */
  for (size_t k = 0; k < 4; k++) {
    size_t i = (size_t)(u - (const unsigned char *)s) + k;
    unsigned char ch = u[k];
    if (t[ch] != 0xFF || i >= n - pads) continue;
    if (ch == '=') return lr__errf(err, "frame: malformed base64: '=' at offset %zu", i);
    return lr__errf(err, "frame: malformed base64: byte '%c' at offset %zu", ch, i);
  }
  return lr__errf(err, "frame: malformed base64");
}

static int lr__frame_deliver(lr_frame_decoder *d, char *s, size_t n, bool in_place,
                             lr_frame_cb cb, void *ud, char err[LR_ERR_MAX]) {
  lr_json msg;
  if (d->token_len) {
    if (n < d->token_len || memcmp(s, d->token, d->token_len) != 0)
      return lr__errf(err, "the sandbox broke the frame channel (a line without the channel token)");
    /* In place, the decoded bytes go over the token: still ahead of what
     * is read. */
    s += d->token_len;
    n -= d->token_len;
  }
  if (lr__frame_decode_line(d, s, n, in_place, &msg, err)) return -1;
  return cb(ud, &msg) ? 1 : 0;
}

int lr__frame_feed(lr_frame_decoder *d, const char *data, size_t len, lr_frame_cb cb, void *ud,
                   char err[LR_ERR_MAX]) {
  if (d->failed) return lr__errf(err, "frame: decoder already failed");
  size_t pos = 0;
  while (pos < len) {
    const char *seg = data + pos;
    const char *nl = memchr(seg, '\n', len - pos);
    size_t seg_len = nl ? (size_t)(nl - seg) : len - pos;

    /* Length first, so an endless line is refused without scanning or
     * buffering more than max_line bytes. */
    if (seg_len > d->max_line - d->line.len) {
      lr__errf(err, "frame: line longer than %zu bytes (the base64 length of maxFrameBytes %zu)",
               d->max_line, d->max_frame);
      return lr__frame_fail(d);
    }
    size_t bad = lr__first_unprintable((const unsigned char *)seg, seg_len);
    if (bad < seg_len) {
      lr__errf(err, "frame: byte 0x%02X outside printable ASCII at offset %zu of a line",
               (unsigned char)seg[bad], d->line.len + bad);
      return lr__frame_fail(d);
    }
    if (!nl) {
      lr__buf_append(&d->line, seg, seg_len);
      break;
    }
    int rc;
    if (d->line.len == 0) {
      /* The whole line is in this chunk: decode it in place, no copy. */
      rc = lr__frame_deliver(d, (char *)seg, seg_len, false, cb, ud, err);
    } else {
      lr__buf_append(&d->line, seg, seg_len);
      rc = lr__frame_deliver(d, d->line.data, d->line.len, true, cb, ud, err);
      if (d->line.cap > LR_FRAME_KEEP_CAP) lr__buf_free(&d->line);
      else d->line.len = 0;
    }
    if (rc < 0) return lr__frame_fail(d);
    pos += seg_len + 1;
    /* The caller stops here; the rest of this chunk is not consumed. */
    if (rc > 0) return 1;
  }
  return 0;
}

int lr__frame_finish(lr_frame_decoder *d, char err[LR_ERR_MAX]) {
  if (d->failed) return lr__errf(err, "frame: decoder already failed");
  if (d->line.len) {
    lr__errf(err, "frame: stream ended mid-frame (%zu bytes without a newline)", d->line.len);
    return lr__frame_fail(d);
  }
  return 0;
}

/* Encodes the n bytes at p into base64 at dst. dst may be p itself when the
 * region is large enough: going backwards, quad i writes dst[4i..4i+3], which
 * only overlaps input of quads already done (input of quad j is at 3j..3j+2). */
static void lr__b64_encode_backward(const unsigned char *p, size_t n, char *dst) {
  const char *A = lr__b64_alphabet;
  size_t full = n / 3, rest = n % 3;
  if (rest) {
    unsigned a = p[full * 3], b = rest == 2 ? p[full * 3 + 1] : 0;
    char *q = dst + full * 4;
    q[0] = A[a >> 2];
    q[1] = A[(a & 3) << 4 | b >> 4];
    q[2] = rest == 2 ? A[(b & 0x0F) << 2] : '=';
    q[3] = '=';
  }
  for (size_t i = full; i-- > 0;) {
    const unsigned char *s = p + i * 3;
    uint32_t v = (uint32_t)s[0] << 16 | (uint32_t)s[1] << 8 | s[2];
    char *q = dst + i * 4;
    q[0] = A[v >> 18];
    q[1] = A[(v >> 12) & 63];
    q[2] = A[(v >> 6) & 63];
    q[3] = A[v & 63];
  }
}

int lr__frame_encode_text(const char *json, size_t len, size_t max_frame, lr_buf *out,
                          char err[LR_ERR_MAX]) {
  /* An empty line is refused by every decoder, so never send one. */
  if (len == 0) return lr__errf(err, "frame: empty message");
  if (len > max_frame)
    return lr__errf(err, "frame: message of %zu bytes is over maxFrameBytes %zu", len, max_frame);
  size_t b64 = lr__base64_len(len);
  lr__buf_reserve(out, b64 + 1);
  lr__b64_encode_backward((const unsigned char *)json, len, out->data + out->len);
  out->len += b64;
  out->data[out->len++] = '\n';
  out->data[out->len] = '\0';
  return 0;
}

int lr__frame_encode(const lr_json *msg, size_t max_frame, lr_buf *out, char err[LR_ERR_MAX]) {
  size_t len = lr__json_size(msg);
  if (len > max_frame)
    return lr__errf(err, "frame: message of %zu bytes is over maxFrameBytes %zu", len, max_frame);
  /* Write the JSON where its base64 goes and encode it in place: no second
   * copy of a message that may be tens of megabytes. */
  size_t start = out->len;
  lr__buf_reserve(out, lr__base64_len(len) + 1);
  lr__json_write(msg, out);
  len = out->len - start; /* what was written is what gets sent */
  size_t b64 = lr__base64_len(len);
  lr__buf_reserve(out, b64 - len + 1);
  char *base = out->data + start;
  lr__b64_encode_backward((const unsigned char *)base, len, base);
  out->len = start + b64;
  out->data[out->len++] = '\n';
  out->data[out->len] = '\0';
  return 0;
}

void lr__base64_append(lr_buf *out, const void *data, size_t len) {
  size_t b64 = lr__base64_len(len);
  lr__buf_reserve(out, b64);
  lr__b64_encode_backward((const unsigned char *)data, len, out->data + out->len);
  out->len += b64;
  out->data[out->len] = '\0';
}

int lr__base64_decode_append(lr_buf *out, const char *s, size_t n, char err[LR_ERR_MAX]) {
  if (n % 4) return lr__errf(err, "malformed base64: length %zu is not a multiple of 4", n);
  const unsigned char *u = (const unsigned char *)s, *t = lr__b64_table;
  size_t pads = n == 0 || u[n - 1] != '=' ? 0 : u[n - 2] != '=' ? 1 : 2;
  lr__buf_reserve(out, n / 4 * 3);
  unsigned char *o = (unsigned char *)out->data + out->len;
  for (size_t i = 0; i < n; i += 4) {
    bool last = i + 4 == n;
    unsigned a = t[u[i]], b = t[u[i + 1]];
    unsigned c = last && pads == 2 ? 0 : t[u[i + 2]];
    unsigned e = last && pads ? 0 : t[u[i + 3]];
    if ((a | b | c | e) & 0x80) return lr__errf(err, "malformed base64 near offset %zu", i);
    uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | e;
    *o++ = (unsigned char)(v >> 16);
    if (!(last && pads == 2)) *o++ = (unsigned char)(v >> 8);
    if (!(last && pads)) *o++ = (unsigned char)v;
  }
  out->len = (size_t)((char *)o - out->data);
  out->data[out->len] = '\0';
  return 0;
}

