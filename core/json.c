/* JSON values: the strict parser, the JSON.stringify-exact writer, size,
 * copy and free. Everything that walks a tree uses an explicit stack, so
 * nesting depth is bounded only by memory. */
#include "json.h"

#include <langinfo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- constructors ---- */

lr_json lr__json_null(void) { return (lr_json){.type = LR_JNULL}; }

lr_json lr__json_bool(bool b) { return (lr_json){.type = b ? LR_JTRUE : LR_JFALSE}; }

lr_json lr__json_number_value(double d) {
  return (lr_json){.type = LR_JNUMBER, .u.num = d};
}

lr_json lr__json_string(const char *s, size_t len) {
  return (lr_json){.type = LR_JSTRING, .len = len, .u.str = lr__xmemdup(s, len)};
}

/* LR_JNULL is 0, so zeroed memory is a run of nulls. */
lr_json lr__json_array(size_t n) {
  return (lr_json){.type = LR_JARRAY, .len = n, .u.items = n ? lr__xcalloc(n, sizeof(lr_json)) : NULL};
}

lr_json lr__json_object(size_t n) {
  if (n > SIZE_MAX / 2) n = SIZE_MAX / 2; /* calloc then aborts rather than wrapping */
  return (lr_json){.type = LR_JOBJECT, .len = n, .u.items = n ? lr__xcalloc(2 * n, sizeof(lr_json)) : NULL};
}

lr_json *lr__json_get(const lr_json *v, const char *key) {
  if (!v || v->type != LR_JOBJECT) return NULL;
  size_t klen = strlen(key);
  for (size_t i = 0; i < v->len; i++) {
    const lr_json *k = &v->u.items[2 * i];
    /* a key slot may still be null while a caller fills the object */
    if (k->type == LR_JSTRING && k->len == klen && memcmp(k->u.str, key, klen) == 0)
      return &v->u.items[2 * i + 1];
  }
  return NULL;
}

/* Number of item slots a container owns. */
static size_t lr__json_slots(const lr_json *v) {
  return v->type == LR_JOBJECT ? 2 * v->len : v->len;
}

static bool lr__json_is_container(const lr_json *v) {
  return v->type == LR_JARRAY || v->type == LR_JOBJECT;
}

/* ---- free and copy ---- */

typedef struct lr__jframe {
  lr_json *items;
  size_t n, i;
  bool obj; /* the writer needs to know which bracket closes the frame */
} lr__jframe;

/* Doubles the capacity of a vector whose first elements live in a buffer
 * of the caller's (local, local_cap of them): shallow values, most of
 * them, need no allocation. Returns the vector's new storage. */
static void *lr__grow(void *data, size_t *cap, void *local, size_t local_cap, size_t elem) {
  size_t n = *cap;
  *cap = n * 2;
  if (data != local) return lr__xrealloc(data, *cap * elem);
  void *heap = lr__xmalloc(*cap * elem);
  memcpy(heap, local, local_cap * elem);
  return heap;
}

typedef struct lr__jstack {
  lr__jframe *f;
  size_t n, cap;
  lr__jframe local[16]; /* shallow values (most of them) need no allocation */
} lr__jstack;

static void lr__jstack_push(lr__jstack *s, lr_json *items, size_t n) {
  if (!s->f) {
    s->f = s->local;
    s->cap = sizeof s->local / sizeof s->local[0];
  }
  if (s->n == s->cap)
    s->f = lr__grow(s->f, &s->cap, s->local, sizeof s->local / sizeof s->local[0], sizeof *s->f);
  s->f[s->n++] = (lr__jframe){items, n, 0, false};
}

static void lr__jstack_free(lr__jstack *s) {
  if (s->f != s->local) free(s->f);
  s->f = NULL;
}

void lr__json_free(lr_json *v) {
  if (!v) return;
  if (v->type == LR_JSTRING) {
    free(v->u.str);
  } else if (lr__json_is_container(v) && v->u.items) {
    /* A frame frees its item array once every child has been released. */
    lr__jstack s = {0};
    lr__jstack_push(&s, v->u.items, lr__json_slots(v));
    while (s.n) {
      lr__jframe *f = &s.f[s.n - 1];
      if (f->i == f->n) {
        free(f->items);
        s.n--;
        continue;
      }
      lr_json *c = &f->items[f->i++];
      if (c->type == LR_JSTRING) free(c->u.str);
      else if (lr__json_is_container(c) && c->u.items) lr__jstack_push(&s, c->u.items, lr__json_slots(c));
    }
    lr__jstack_free(&s);
  }
  *v = lr__json_null();
}

/* Copies the node itself: a string's bytes, or a container with a fresh
 * (still null-filled) item array the caller then fills. */
static lr_json lr__json_copy_node(const lr_json *src) {
  lr_json d = *src;
  if (src->type == LR_JSTRING) {
    d.u.str = lr__xmemdup(src->u.str, src->len);
  } else if (lr__json_is_container(src)) {
    size_t n = lr__json_slots(src);
    d.u.items = n ? lr__xcalloc(n, sizeof(lr_json)) : NULL;
  }
  return d;
}

lr_json lr__json_copy(const lr_json *v) {
  lr_json out = lr__json_copy_node(v);
  if (!lr__json_is_container(v) || !lr__json_slots(v)) return out;
  /* Frames hold destination arrays; sources are found through a parallel
   * stack of source arrays. */
  lr__jstack dst = {0}, src = {0};
  lr__jstack_push(&dst, out.u.items, lr__json_slots(v));
  lr__jstack_push(&src, v->u.items, lr__json_slots(v));
  while (dst.n) {
    lr__jframe *df = &dst.f[dst.n - 1], *sf = &src.f[src.n - 1];
    if (df->i == df->n) {
      dst.n--, src.n--;
      continue;
    }
    const lr_json *c = &sf->items[df->i];
    lr_json *d = &df->items[df->i];
    df->i++;
    *d = lr__json_copy_node(c);
    if (lr__json_is_container(c) && lr__json_slots(c)) {
      lr__jstack_push(&dst, d->u.items, lr__json_slots(c));
      lr__jstack_push(&src, c->u.items, lr__json_slots(c));
    }
  }
  lr__jstack_free(&dst);
  lr__jstack_free(&src);
  return out;
}

/* ---- numbers ---- */

/* strtod and printf follow LC_NUMERIC; the engine may run inside a host that
 * set a locale with a decimal comma, so texts are translated both ways.
 * nl_langinfo, unlike localeconv, writes no shared state: safe on threads. */
static char lr__decimal_point(void) {
  const char *dp = nl_langinfo(RADIXCHAR);
  return (dp && dp[0] && !dp[1]) ? dp[0] : '.';
}

/* strtod of a NUL-terminated C-locale number text (modified in place). */
static double lr__strtod_c(char *s) {
  char dp = lr__decimal_point();
  if (dp != '.') {
    char *p = strchr(s, '.');
    if (p) *p = dp;
  }
  return strtod(s, NULL);
}

/* "%.*e" of d with prec significant digits, read back into digits (no point)
 * and a decimal exponent; returns the digit count. */
static int lr__sci(double d, int prec, char digits[32], int *exp10) {
  char tmp[48];
  snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
  int k = 0;
  const char *p = tmp;
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits[k++] = *p;
  digits[k] = '\0';
  *exp10 = atoi(p + 1);
  return k;
}

/* Reads k digits times 10^(exp10 - k + 1) back as a double. */
static double lr__sci_value(const char *digits, int k, int exp10) {
  char tmp[48];
  int o = 0;
  tmp[o++] = digits[0];
  tmp[o++] = '.';
  memcpy(tmp + o, digits + 1, (size_t)k - 1), o += k - 1;
  tmp[o++] = 'e';
  snprintf(tmp + o, sizeof tmp - (size_t)o, "%d", exp10);
  return lr__strtod_c(tmp);
}

/* Steps a k-digit decimal (value digits * 10^(exp10-k+1)) to its neighbour
 * one unit in the last place up or down, renormalizing at powers of ten. */
static void lr__sci_step(char *digits, int k, int *exp10, int dir) {
  int i = k - 1;
  if (dir > 0) {
    while (i >= 0 && digits[i] == '9') digits[i--] = '0';
    if (i >= 0) {
      digits[i]++;
    } else { /* 99..9 + 1 = 100..0 one decade up */
      digits[0] = '1';
      ++*exp10;
    }
  } else {
    while (i >= 0 && digits[i] == '0') digits[i--] = '9';
    digits[i]--; /* digits[0] is never '0', so i >= 0 here */
    if (digits[0] == '0') { /* 100..0 - 1 = 99..9 one decade down */
      memset(digits, '9', (size_t)k);
      --*exp10;
    }
  }
}

/* Many more digits than a double needs, printed once per number: rounding
 * them to k digits gives the nearest k-digit decimal unless the dropped part
 * is exactly a half (then printf decides, it rounds the exact value). */
#define LR_WIDE 25

typedef struct lr__wide {
  double d;
  bool pow2; /* the rounding interval is lopsided at a power of two */
  char digits[32];
  int exp10;
} lr__wide;

static void lr__nearest(const lr__wide *w, int prec, char digits[32], int *exp10) {
  const char *t = w->digits + prec;
  bool up = *t > '5', tie = *t == '5';
  if (tie)
    for (const char *q = t + 1; *q; q++)
      if (*q != '0') up = true, tie = false;
  if (tie) {
    lr__sci(w->d, prec, digits, exp10);
    return;
  }
  memcpy(digits, w->digits, (size_t)prec);
  digits[prec] = '\0';
  *exp10 = w->exp10;
  if (up) lr__sci_step(digits, prec, exp10, 1);
}

/* Finds prec-digit digits that read back as d, if any: the nearest, or at a
 * power of two the neighbour on the other side of d. */
static bool lr__sci_try(const lr__wide *w, int prec, char digits[32], int *exp10) {
  lr__nearest(w, prec, digits, exp10);
  double r = lr__sci_value(digits, prec, *exp10);
  if (r == w->d) return true;
  if (!w->pow2) return false;
  char alt[32];
  int e = *exp10;
  memcpy(alt, digits, (size_t)prec + 1);
  lr__sci_step(alt, prec, &e, r > w->d ? -1 : 1);
  if (lr__sci_value(alt, prec, e) != w->d) return false;
  memcpy(digits, alt, (size_t)prec + 1);
  *exp10 = e;
  return true;
}

/* Shortest digits that read back as d (finite, positive). Whether some
 * k-digit decimal reads back is monotonic in k (a k-digit decimal is also a
 * (k+1)-digit one) and lr__sci_try tests exactly that, so binary search. */
static int lr__shortest(double d, char digits[32], int *exp10) {
  lr__wide w = {.d = d};
  int m;
  w.pow2 = frexp(d, &m) == 0.5;
  lr__sci(d, LR_WIDE, w.digits, &w.exp10);
  int lo = 1, hi = 17; /* 17 digits always read back */
  char best[32];
  int best_e = 0;
  lr__sci_try(&w, 17, best, &best_e);
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    char cand[32];
    int e;
    if (lr__sci_try(&w, mid, cand, &e)) {
      hi = mid;
      memcpy(best, cand, sizeof cand);
      best_e = e;
    } else {
      lo = mid + 1;
    }
  }
  int k = (int)strlen(best);
  while (k > 1 && best[k - 1] == '0') best[--k] = '\0';
  memcpy(digits, best, (size_t)k + 1);
  *exp10 = best_e;
  return k;
}

size_t lr__json_number(double d, char buf[32]) {
  if (!isfinite(d)) { /* not for this function, but never garbage */
    memcpy(buf, "null", 5);
    return 4;
  }
  if (d == 0) { /* -0 too */
    buf[0] = '0', buf[1] = '\0';
    return 1;
  }
  size_t o = 0;
  if (d < 0) buf[o++] = '-', d = -d;
  /* Safe integers print exactly; the fast path skips the digit search. */
  if (d <= LR_MAX_SAFE_INTEGER && d == floor(d)) {
    char rev[20];
    size_t n = 0;
    for (uint64_t u = (uint64_t)d; u; u /= 10) rev[n++] = (char)('0' + u % 10);
    while (n) buf[o++] = rev[--n];
    buf[o] = '\0';
    return o;
  }
  char digits[32];
  int e;
  int k = lr__shortest(d, digits, &e);
  int n = e + 1; /* ECMA-262's n: the decimal point sits after n digits */
  if (k <= n && n <= 21) {
    memcpy(buf + o, digits, (size_t)k), o += (size_t)k;
    for (int i = k; i < n; i++) buf[o++] = '0';
  } else if (0 < n && n <= 21) {
    memcpy(buf + o, digits, (size_t)n), o += (size_t)n;
    buf[o++] = '.';
    memcpy(buf + o, digits + n, (size_t)(k - n)), o += (size_t)(k - n);
  } else if (-6 < n && n <= 0) {
    buf[o++] = '0', buf[o++] = '.';
    for (int i = 0; i < -n; i++) buf[o++] = '0';
    memcpy(buf + o, digits, (size_t)k), o += (size_t)k;
  } else {
    buf[o++] = digits[0];
    if (k > 1) {
      buf[o++] = '.';
      memcpy(buf + o, digits + 1, (size_t)(k - 1)), o += (size_t)(k - 1);
    }
    o += (size_t)snprintf(buf + o, 32 - o, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
  }
  buf[o] = '\0';
  return o;
}

/* ---- writing ---- */

/* Output bytes per input byte: 1 raw, 2 short escape, 6 \u00xx. A lone
 * surrogate (ED A0..BF xx) is handled apart. The ledger counts with it too:
 * SPEC §5's costs are exactly what JSON.stringify writes. */
const unsigned char lr__json_escape_len[256] = {
    6, 6, 6, 6, 6, 6, 6, 6, 2, 2, 2, 6, 2, 2, 6, 6, /* \b \t \n \f \r */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* '"' */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, /* '\\' */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, /* 0xED: maybe a surrogate */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

static bool lr__is_surrogate(const unsigned char *s, size_t i, size_t len) {
  return i + 2 < len && s[i + 1] >= 0xA0 && s[i + 1] <= 0xBF;
}

size_t lr__json_string_size(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  size_t n = 2;
  for (size_t i = 0; i < len; i++) {
    unsigned e = lr__json_escape_len[s[i]];
    if (e) {
      n += e;
    } else if (lr__is_surrogate(s, i, len)) {
      n += 6, i += 2;
    } else {
      n += 1;
    }
  }
  return n;
}

void lr__json_write_string(const char *str, size_t len, lr_buf *out) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  lr__buf_reserve(out, len + 2);
  out->data[out->len++] = '"';
  size_t i = 0;
  while (i < len) {
    size_t run = i; /* copy runs of raw bytes in one go */
    while (run < len && lr__json_escape_len[s[run]] == 1) run++;
    if (run > i) lr__buf_append(out, s + i, run - i);
    i = run;
    if (i == len) break;
    unsigned char c = s[i];
    char esc[6] = {'\\', 'u', '0', '0', 0, 0};
    size_t n = 2;
    switch (c) {
      case '"': esc[1] = '"'; break;
      case '\\': esc[1] = '\\'; break;
      case '\b': esc[1] = 'b'; break;
      case '\f': esc[1] = 'f'; break;
      case '\n': esc[1] = 'n'; break;
      case '\r': esc[1] = 'r'; break;
      case '\t': esc[1] = 't'; break;
      case 0xED:
        if (lr__is_surrogate(s, i, len)) {
          unsigned cp = 0xD000u | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
          esc[2] = 'd', esc[3] = hex[(cp >> 8) & 15], esc[4] = hex[(cp >> 4) & 15], esc[5] = hex[cp & 15];
          lr__buf_append(out, esc, 6);
          i += 3;
        } else {
          lr__buf_append_char(out, (char)c);
          i++;
        }
        continue;
      default: /* other controls */
        esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
        n = 6;
    }
    lr__buf_append(out, esc, n);
    i++;
  }
  lr__buf_append_char(out, '"');
}

/* Appends the text of a scalar, or the opening bracket of a container. */
static void lr__write_open(const lr_json *v, lr_buf *out) {
  char num[32];
  switch (v->type) {
    case LR_JNULL: lr__buf_append(out, "null", 4); break;
    case LR_JFALSE: lr__buf_append(out, "false", 5); break;
    case LR_JTRUE: lr__buf_append(out, "true", 4); break;
    case LR_JNUMBER:
      if (isfinite(v->u.num)) lr__buf_append(out, num, lr__json_number(v->u.num, num));
      else lr__buf_append(out, "null", 4);
      break;
    case LR_JSTRING: lr__json_write_string(v->u.str, v->len, out); break;
    case LR_JARRAY: lr__buf_append_char(out, '['); break;
    case LR_JOBJECT: lr__buf_append_char(out, '{'); break;
  }
}

/* Size of what lr__write_open appends. */
static size_t lr__size_open(const lr_json *v) {
  char num[32];
  switch (v->type) {
    case LR_JNULL: return 4;
    case LR_JFALSE: return 5;
    case LR_JTRUE: return 4;
    case LR_JNUMBER: return isfinite(v->u.num) ? lr__json_number(v->u.num, num) : 4;
    case LR_JSTRING: return lr__json_string_size(v->u.str, v->len);
    default: return 1;
  }
}

/* Walks a tree in document order, calling back per node; shared by write and
 * size so that both count exactly the same bytes. A frame is one open
 * container; `i` counts item slots (keys and values for objects). */
typedef struct lr__walker {
  lr__jstack s;
  size_t total;
  lr_buf *out;
} lr__walker;

static void lr__emit_open(lr__walker *w, const lr_json *v) {
  if (w->out) lr__write_open(v, w->out);
  else w->total += lr__size_open(v);
}

static void lr__emit_char(lr__walker *w, char c) {
  if (w->out) lr__buf_append_char(w->out, c);
  else w->total++;
}

static void lr__walk(lr__walker *w, const lr_json *v) {
  lr__emit_open(w, v);
  if (!lr__json_is_container(v)) return;
  lr__jstack_push(&w->s, v->u.items, lr__json_slots(v));
  w->s.f[0].obj = v->type == LR_JOBJECT;
  while (w->s.n) {
    lr__jframe *f = &w->s.f[w->s.n - 1];
    if (f->i == f->n) {
      lr__emit_char(w, f->obj ? '}' : ']');
      w->s.n--;
      continue;
    }
    /* in an object, odd slots are values and follow their key's ':' */
    if (f->i > 0) lr__emit_char(w, (f->obj && f->i % 2) ? ':' : ',');
    const lr_json *c = &f->items[f->i++];
    lr__emit_open(w, c);
    if (lr__json_is_container(c)) {
      lr__jstack_push(&w->s, c->u.items, lr__json_slots(c));
      w->s.f[w->s.n - 1].obj = c->type == LR_JOBJECT;
    }
  }
  lr__jstack_free(&w->s);
  w->s = (lr__jstack){0};
}

void lr__json_write(const lr_json *v, lr_buf *out) {
  lr__walker w = {.out = out};
  lr__walk(&w, v);
}

size_t lr__json_size(const lr_json *v) {
  lr__walker w = {0};
  lr__walk(&w, v);
  return w.total;
}

/* ---- parsing ---- */

/* 1 for bytes a string holds as they are: printable ASCII except '"' '\\'. */
static const unsigned char lr__plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

typedef struct lr__parser {
  const unsigned char *s;
  size_t len, pos;
  char *err;
} lr__parser;

static int lr__perr(lr__parser *p, const char *what) {
  if (p->pos >= p->len) return lr__errf(p->err, "invalid JSON: %s: unexpected end of input at byte %zu", what, p->pos);
  unsigned c = p->s[p->pos];
  if (c > 0x20 && c < 0x7F)
    return lr__errf(p->err, "invalid JSON: %s: unexpected '%c' at byte %zu", what, (char)c, p->pos);
  return lr__errf(p->err, "invalid JSON: %s: unexpected byte 0x%02x at byte %zu", what, c, p->pos);
}

static void lr__skip_ws(lr__parser *p) {
  while (p->pos < p->len) {
    unsigned char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

/* Length of the strict UTF-8 sequence at s[i] (n bytes in all), 0 if bad. */
static size_t lr__utf8_len(const unsigned char *s, size_t i, size_t n) {
  unsigned c = s[i];
  size_t left = n - i;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return (left >= 2 && (s[i + 1] & 0xC0) == 0x80) ? 2 : 0;
  if (c < 0xF0) {
    if (left < 3 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[i + 1] < 0xA0) return 0;
    if (c == 0xED && s[i + 1] >= 0xA0) return 0; /* raw surrogates are not UTF-8 */
    return 3;
  }
  if (c < 0xF5) {
    if (left < 4 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
      return 0;
    if (c == 0xF0 && s[i + 1] < 0x90) return 0;
    if (c == 0xF4 && s[i + 1] >= 0x90) return 0;
    return 4;
  }
  return 0;
}

static int lr__hex4(const unsigned char *s, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = s[i], d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return -1;
    v = v * 16 + d;
  }
  *out = v;
  return 0;
}

static size_t lr__put_utf8(unsigned char *d, unsigned cp) {
  if (cp < 0x80) {
    d[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    d[0] = (unsigned char)(0xC0 | (cp >> 6)), d[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) { /* lone surrogates land here too: WTF-8 */
    d[0] = (unsigned char)(0xE0 | (cp >> 12)), d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    d[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  d[0] = (unsigned char)(0xF0 | (cp >> 18)), d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)), d[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

/* One pass over a string body starting after the opening quote. With dst
 * NULL it validates, finds the closing quote and counts the decoded bytes;
 * with dst it decodes (the text is then known to be good). Returns the
 * decoded length, or (size_t)-1 after setting the error. */
static size_t lr__string_pass(lr__parser *p, unsigned char *dst, size_t *end) {
  const unsigned char *s = p->s;
  size_t n = p->len, i = p->pos, o = 0;
  for (;;) {
    size_t run = i; /* plain ASCII run: the common case, kept tight */
    while (run < n && lr__plain[s[run]]) run++;
    if (dst && run > i) memcpy(dst + o, s + i, run - i);
    o += run - i;
    i = run;
    if (i >= n) {
      p->pos = i;
      lr__perr(p, "unterminated string");
      return (size_t)-1;
    }
    unsigned c = s[i];
    if (c == '"') {
      *end = i + 1;
      return o;
    }
    if (c >= 0x80) {
      size_t k = lr__utf8_len(s, i, n);
      if (!k) {
        lr__errf(p->err, "invalid JSON: invalid UTF-8 in string at byte %zu", i);
        return (size_t)-1;
      }
      if (dst) memcpy(dst + o, s + i, k);
      o += k, i += k;
      continue;
    }
    if (c < 0x20) {
      lr__errf(p->err, "invalid JSON: control character 0x%02x in string at byte %zu", c, i);
      return (size_t)-1;
    }
    /* a backslash */
    if (i + 1 >= n) {
      p->pos = i + 1;
      lr__perr(p, "unterminated string");
      return (size_t)-1;
    }
    unsigned e = s[i + 1], ch;
    switch (e) {
      case '"': ch = '"'; break;
      case '\\': ch = '\\'; break;
      case '/': ch = '/'; break;
      case 'b': ch = '\b'; break;
      case 'f': ch = '\f'; break;
      case 'n': ch = '\n'; break;
      case 'r': ch = '\r'; break;
      case 't': ch = '\t'; break;
      case 'u': {
        unsigned cp;
        if (i + 6 > n || lr__hex4(s + i + 2, &cp)) {
          lr__errf(p->err, "invalid JSON: bad \\u escape in string at byte %zu", i);
          return (size_t)-1;
        }
        i += 6;
        unsigned lo;
        /* A high surrogate directly followed by an escaped low one is a pair. */
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= n && s[i] == '\\' && s[i + 1] == 'u' &&
            lr__hex4(s + i + 2, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        }
        unsigned char tmp[4];
        size_t k = lr__put_utf8(dst ? dst + o : tmp, cp);
        o += k;
        continue;
      }
      default:
        lr__errf(p->err, "invalid JSON: bad escape in string at byte %zu", i);
        return (size_t)-1;
    }
    if (dst) dst[o] = (unsigned char)ch;
    o++, i += 2;
  }
}

/* Parses a string at p->pos (the opening quote) into v. */
static int lr__parse_string(lr__parser *p, lr_json *v) {
  size_t start = ++p->pos, end = 0;
  size_t n = lr__string_pass(p, NULL, &end);
  if (n == (size_t)-1) return -1;
  char *str = lr__xmalloc(n + 1);
  if (n == end - 1 - start) memcpy(str, p->s + start, n); /* no escapes */
  else lr__string_pass(p, (unsigned char *)str, &end);
  str[n] = '\0';
  *v = (lr_json){.type = LR_JSTRING, .len = n, .u.str = str};
  p->pos = end;
  return 0;
}

static bool lr__digit(unsigned c) { return c >= '0' && c <= '9'; }

static int lr__parse_number(lr__parser *p, lr_json *v) {
  const unsigned char *s = p->s;
  size_t n = p->len, i = p->pos, start = i;
  bool neg = false, frac = false;
  if (s[i] == '-') neg = true, i++;
  if (i >= n || !lr__digit(s[i])) {
    p->pos = i;
    return lr__perr(p, "bad number");
  }
  if (s[i] == '0') i++;
  else
    while (i < n && lr__digit(s[i])) i++;
  size_t int_end = i;
  if (i < n && s[i] == '.') {
    i++, frac = true;
    if (i >= n || !lr__digit(s[i])) {
      p->pos = i;
      return lr__perr(p, "bad number");
    }
    while (i < n && lr__digit(s[i])) i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++, frac = true;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || !lr__digit(s[i])) {
      p->pos = i;
      return lr__perr(p, "bad number");
    }
    while (i < n && lr__digit(s[i])) i++;
  }
  double d;
  size_t ndig = int_end - start - neg;
  if (!frac && ndig <= 15) { /* exact in a double: skip strtod */
    uint64_t u = 0;
    for (size_t j = start + neg; j < int_end; j++) u = u * 10 + (s[j] - '0');
    d = (double)u;
    if (neg) d = -d;
  } else {
    char small[64], *buf = i - start < sizeof small ? small : lr__xmalloc(i - start + 1);
    memcpy(buf, s + start, i - start);
    buf[i - start] = '\0';
    d = lr__strtod_c(buf);
    if (buf != small) free(buf);
    if (isinf(d)) return lr__errf(p->err, "invalid JSON: number out of range at byte %zu", start);
  }
  *v = lr__json_number_value(d);
  p->pos = i;
  return 0;
}

static int lr__parse_literal(lr__parser *p, const char *word, lr_json v, lr_json *out) {
  size_t k = strlen(word);
  if (p->len - p->pos < k || memcmp(p->s + p->pos, word, k) != 0) {
    /* point at the first byte that differs */
    size_t j = 0;
    while (p->pos + j < p->len && j < k && p->s[p->pos + j] == (unsigned char)word[j]) j++;
    p->pos += j;
    return lr__perr(p, "bad literal");
  }
  p->pos += k;
  *out = v;
  return 0;
}

/* An open container while parsing: its items sit on the parser's item
 * stack from `start` on (a nested container's items above them leave it
 * when it closes), so a container costs one allocation, of its final size. */
typedef struct lr__pframe {
  size_t start;
  bool object;
} lr__pframe;

typedef struct lr__items {
  lr_json *v;
  size_t n, cap;
  lr_json local[64];
} lr__items;

static void lr__items_push(lr__items *it, lr_json v) {
  if (!it->v) {
    it->v = it->local;
    it->cap = sizeof it->local / sizeof it->local[0];
  }
  if (it->n == it->cap)
    it->v = lr__grow(it->v, &it->cap, it->local, sizeof it->local / sizeof it->local[0], sizeof *it->v);
  it->v[it->n++] = v;
}

static void lr__items_free(lr__items *it) {
  for (size_t i = 0; i < it->n; i++) lr__json_free(&it->v[i]);
  if (it->v != it->local) free(it->v);
  it->v = NULL;
  it->n = 0;
}

static uint64_t lr__hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static bool lr__key_eq(const lr_json *a, const lr_json *b) {
  return a->len == b->len && memcmp(a->u.str, b->u.str, a->len) == 0;
}

/* JSON.parse keeps the last value of a repeated key at the place of its
 * first occurrence; do the same so that writing a parsed text gives what
 * JSON.stringify(JSON.parse(text)) gives. Returns the member count left. */
static size_t lr__dedupe(lr_json *items, size_t m) {
  if (m < 2) return m;
  bool dup = false;
  if (m <= 8) {
    for (size_t i = 1; i < m && !dup; i++)
      for (size_t j = 0; j < i && !dup; j++) dup = lr__key_eq(&items[2 * i], &items[2 * j]);
    if (!dup) return m;
  }
  size_t cap = 16;
  while (cap < 2 * m) cap *= 2;
  size_t *tab = lr__xcalloc(cap, sizeof *tab); /* member index + 1, 0 = empty */
  size_t out = 0;
  for (size_t i = 0; i < m; i++) {
    lr_json *k = &items[2 * i];
    size_t h = (size_t)lr__hash(k->u.str, k->len) & (cap - 1);
    while (tab[h] && !lr__key_eq(&items[2 * (tab[h] - 1)], k)) h = (h + 1) & (cap - 1);
    if (tab[h]) { /* repeat: move the value into the first occurrence */
      lr_json *first = &items[2 * (tab[h] - 1) + 1];
      lr__json_free(first);
      *first = items[2 * i + 1];
      lr__json_free(k);
      items[2 * i + 1] = lr__json_null();
      continue;
    }
    /* keep: compact in place; earlier slots are already moved out */
    if (out != i) {
      items[2 * out] = items[2 * i];
      items[2 * out + 1] = items[2 * i + 1];
    }
    tab[h] = out + 1;
    out++;
  }
  free(tab);
  return out;
}

/* Turns a finished frame into its value: its items leave the stack. */
static lr_json lr__pframe_close(lr__items *it, const lr__pframe *f) {
  lr_json v = {.type = f->object ? LR_JOBJECT : LR_JARRAY};
  lr_json *items = it->v + f->start;
  size_t slots = it->n - f->start;
  if (f->object) {
    v.len = lr__dedupe(items, slots / 2);
    slots = 2 * v.len;
  } else {
    v.len = slots;
  }
  if (slots) {
    v.u.items = lr__xmalloc(slots * sizeof(lr_json));
    memcpy(v.u.items, items, slots * sizeof(lr_json));
  }
  it->n = f->start;
  return v;
}

/* After '{' or ',' in an object: a key string then ':'. */
static int lr__parse_key(lr__parser *p, lr__items *it) {
  lr__skip_ws(p);
  if (p->pos >= p->len || p->s[p->pos] != '"') return lr__perr(p, "expected a string key");
  lr_json k;
  if (lr__parse_string(p, &k)) return -1;
  lr__items_push(it, k);
  lr__skip_ws(p);
  if (p->pos >= p->len || p->s[p->pos] != ':') return lr__perr(p, "expected ':'");
  p->pos++;
  return 0;
}

int lr__json_parse(const char *text, size_t len, lr_json *out, char err[LR_ERR_MAX]) {
  lr__parser p = {.s = (const unsigned char *)text, .len = len, .err = err};
  lr__pframe local[32];
  lr__pframe *st = local;
  size_t depth = 0, cap = sizeof local / sizeof local[0];
  lr__items it = {0};
  lr_json v = lr__json_null();
  *out = lr__json_null();
  for (;;) {
    /* parse one value into v, or open a container and loop */
    lr__skip_ws(&p);
    if (p.pos >= p.len) {
      lr__perr(&p, "expected a value");
      goto fail;
    }
    unsigned c = p.s[p.pos];
    if (c == '[' || c == '{') {
      p.pos++;
      lr__skip_ws(&p);
      if (p.pos < p.len && p.s[p.pos] == (c == '[' ? ']' : '}')) {
        p.pos++;
        v = (lr_json){.type = c == '[' ? LR_JARRAY : LR_JOBJECT};
      } else {
        if (depth == cap) st = lr__grow(st, &cap, local, sizeof local / sizeof local[0], sizeof *st);
        st[depth++] = (lr__pframe){.start = it.n, .object = c == '{'};
        if (c == '{' && lr__parse_key(&p, &it)) goto fail;
        continue;
      }
    } else if (c == '"') {
      if (lr__parse_string(&p, &v)) goto fail;
    } else if (c == '-' || lr__digit(c)) {
      if (lr__parse_number(&p, &v)) goto fail;
    } else if (c == 't') {
      if (lr__parse_literal(&p, "true", lr__json_bool(true), &v)) goto fail;
    } else if (c == 'f') {
      if (lr__parse_literal(&p, "false", lr__json_bool(false), &v)) goto fail;
    } else if (c == 'n') {
      if (lr__parse_literal(&p, "null", lr__json_null(), &v)) goto fail;
    } else {
      lr__perr(&p, "expected a value");
      goto fail;
    }
    /* place v; closing brackets may finish several containers */
    for (;;) {
      if (!depth) goto done;
      lr__pframe *f = &st[depth - 1];
      lr__items_push(&it, v);
      v = lr__json_null();
      lr__skip_ws(&p);
      if (p.pos < p.len && p.s[p.pos] == ',') {
        p.pos++;
        if (f->object && lr__parse_key(&p, &it)) goto fail;
        break;
      }
      if (p.pos < p.len && p.s[p.pos] == (f->object ? '}' : ']')) {
        p.pos++;
        v = lr__pframe_close(&it, f);
        depth--;
        continue;
      }
      lr__perr(&p, f->object ? "expected ',' or '}'" : "expected ',' or ']'");
      goto fail;
    }
  }
done:
  lr__skip_ws(&p);
  if (p.pos < p.len) {
    lr__perr(&p, "trailing data after the value");
    goto fail;
  }
  if (st != local) free(st);
  lr__items_free(&it); /* empty by now: frees a grown stack only */
  *out = v;
  return 0;
fail:
  lr__json_free(&v);
  lr__items_free(&it); /* the partial containers' items */
  if (st != local) free(st);
  *out = lr__json_null();
  return -1;
}
