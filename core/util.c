/* Buffers, checked allocation, error text and UTF-8 checks. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
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

/* One sequence at p[0..n): 0 and *used = its length when valid; 1 and *used
 * = the maximal subpart to replace when invalid; 2 when p is a valid start
 * that the bytes after n may complete. */
static int lr__utf8_step(const unsigned char *p, size_t n, size_t *used) {
  unsigned b = p[0];
  size_t need;
  unsigned lo = 0x80, hi = 0xBF;
  if (b < 0x80) return *used = 1, 0;
  if (b >= 0xC2 && b <= 0xDF) need = 1;
  else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return *used = 1, 1;
  }
  for (size_t i = 1; i <= need; i++) {
    if (i >= n) return 2;
    unsigned c = p[i];
    if (c < lo || c > hi) return *used = i, 1;
    lo = 0x80, hi = 0xBF;
  }
  return *used = need + 1, 0;
}

void lr__utf8_stream_feed(lr_utf8_stream *s, const char *data, size_t len, bool end, lr_buf *out) {
  const unsigned char *p = (const unsigned char *)data;
  unsigned char *joined = NULL;
  if (s->npend) {
    joined = lr__xmalloc(s->npend + len);
    memcpy(joined, s->pend, s->npend);
    if (len) memcpy(joined + s->npend, data, len);
    p = joined;
    len += s->npend;
    s->npend = 0;
  }
  size_t i = 0, run = 0; /* run: start of valid bytes not yet appended */
  while (i < len) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    size_t used;
    int r = lr__utf8_step(p + i, len - i, &used);
    if (r == 0) {
      i += used;
      continue;
    }
    lr__buf_append(out, p + run, i - run);
    if (r == 2 && !end) {
      s->npend = len - i;
      memcpy(s->pend, p + i, s->npend);
      i = run = len;
      break;
    }
    if (r == 2) used = len - i;
    lr__buf_append(out, "\xEF\xBF\xBD", 3);
    i += used;
    run = i;
  }
  lr__buf_append(out, p + run, i - run);
  free(joined);
}

/* True while a process that is not a zombie is in group pgid. kill(-g, 0)
 * answers for most cases; zombies (orphans the init of a container may never
 * reap) still count for kill, so a hit is confirmed by reading /proc. */
bool lr__group_alive(int pgid) {
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR *d = opendir("/proc");
  if (!d) return true;
  bool alive = false;
  struct dirent *e;
  while (!alive && (e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* pid (comm) state ppid pgrp ...; comm may hold spaces and parens. */
    char *rp = strrchr(buf, ')');
    char state;
    int ppid, pgrp;
    if (rp && sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid &&
        state != 'Z' && state != 'X')
      alive = true;
  }
  closedir(d);
  return alive;
}

