/* Buffers, checked allocation, error text and UTF-8 checks. */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void lr__oom(void) {
  fputs("lunarun: out of memory\n", stderr);
  abort();
}

void *lr__xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) lr__oom();
  return p;
}

void *lr__xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) lr__oom();
  return p;
}

void *lr__xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) lr__oom();
  return p;
}

char *lr__xstrdup(const char *s) { return lr__xmemdup(s, strlen(s)); }

char *lr__xmemdup(const void *p, size_t n) {
  char *d = lr__xmalloc(n + 1);
  if (n) memcpy(d, p, n);
  d[n] = '\0';
  return d;
}

void lr__buf_reserve(lr_buf *b, size_t extra) {
  size_t need = b->len + extra + 1; /* room for the NUL */
  if (need <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap = cap * 2;
  b->data = lr__xrealloc(b->data, cap);
  b->cap = cap;
}

void lr__buf_append(lr_buf *b, const void *data, size_t len) {
  lr__buf_reserve(b, len);
  if (len) memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
}

void lr__buf_append_str(lr_buf *b, const char *s) { lr__buf_append(b, s, strlen(s)); }

void lr__buf_append_char(lr_buf *b, char c) {
  lr__buf_reserve(b, 1);
  b->data[b->len++] = c;
  b->data[b->len] = '\0';
}

char *lr__buf_steal(lr_buf *b, size_t *len) {
  if (!b->data) lr__buf_reserve(b, 0), b->data[0] = '\0';
  char *d = b->data;
  if (len) *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return d;
}

void lr__buf_free(lr_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int lr__errf(char *err, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, LR_ERR_MAX, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Length of the UTF-8 sequence at s (n bytes left), or 0 if it is not
 * well-formed. */
static size_t lr__utf8_seq(const unsigned char *s, size_t n, bool allow_surrogates) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
  if (c < 0xF0) {
    if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;
    if (c == 0xED && s[1] >= 0xA0 && !allow_surrogates) return 0;
    return 3;
  }
  if (c < 0xF5) {
    if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
      return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;
    if (c == 0xF4 && s[1] >= 0x90) return 0;
    return 4;
  }
  return 0;
}

bool lr__utf8_valid(const char *str, size_t len, bool allow_surrogates) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  bool prev_high = false; /* a WTF-8 high surrogate followed by a low one is ill-formed */
  while (i < len) {
    if (s[i] < 0x80) { /* fast path for ASCII */
      i++;
      prev_high = false;
      continue;
    }
    size_t k = lr__utf8_seq(s + i, len - i, allow_surrogates);
    if (!k) return false;
    if (k == 3 && s[i] == 0xED && s[i + 1] >= 0xA0) {
      bool high = s[i + 1] < 0xB0;
      if (!high && prev_high) return false;
      prev_high = high;
    } else {
      prev_high = false;
    }
    i += k;
  }
  return true;
}

size_t lr__utf8_prefix_valid(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < len) {
    if (s[i] < 0x80) {
      i++;
      continue;
    }
    size_t k = lr__utf8_seq(s + i, len - i, false);
    if (!k) return i;
    i += k;
  }
  return len;
}

size_t lr__utf8_prefix(const char *str, size_t len, size_t max) {
  const unsigned char *s = (const unsigned char *)str;
  if (len <= max) return len;
  size_t i = max;
  while (i > 0 && (s[i] & 0xC0) == 0x80) i--;
  return i;
}
