/* The wire shape (SPEC §6): values as flat pre-order token arrays. Encoding
 * checks that a value is lossless; decoding checks that tokens describe
 * exactly one value. Both walk with explicit stacks. */
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- key sets ---- */

static uint64_t lr__wire_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* Index of the first key that repeats an earlier one among n strings found
 * every `stride` items from keys, or n when all differ. */
static size_t lr__wire_dup(const lr_json *keys, size_t n, size_t stride) {
  if (n < 2) return n;
  if (n <= 8) { /* small objects: a hash table costs more than comparing */
    for (size_t i = 1; i < n; i++)
      for (size_t j = 0; j < i; j++) {
        const lr_json *a = &keys[i * stride], *b = &keys[j * stride];
        if (a->len == b->len && memcmp(a->u.str, b->u.str, a->len) == 0) return i;
      }
    return n;
  }
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  size_t *tab = lr__xcalloc(cap, sizeof *tab); /* key index + 1, 0 = empty */
  size_t found = n;
  for (size_t i = 0; i < n && found == n; i++) {
    const lr_json *k = &keys[i * stride];
    size_t h = (size_t)lr__wire_hash(k->u.str, k->len) & (cap - 1);
    for (; tab[h]; h = (h + 1) & (cap - 1)) {
      const lr_json *o = &keys[(tab[h] - 1) * stride];
      if (o->len == k->len && memcmp(o->u.str, k->u.str, k->len) == 0) {
        found = i;
        break;
      }
    }
    tab[h] = i + 1;
  }
  free(tab);
  return found;
}

/* ---- walking a value in pre-order ---- */

typedef struct lr__wframe {
  const lr_json *c;
  size_t i; /* next child */
} lr__wframe;

typedef struct lr__wwalk {
  lr__wframe *f;
  size_t n, cap;
  const lr_json *next;
  size_t index; /* token number of the node lr__wire_next returns */
} lr__wwalk;

/* Returns the next node in pre-order, or NULL when the walk is over. */
static const lr_json *lr__wire_next(lr__wwalk *w) {
  const lr_json *v = w->next;
  if (!v) return NULL;
  w->index++;
  if ((v->type == LR_JARRAY || v->type == LR_JOBJECT) && v->len) {
    if (w->n == w->cap) {
      w->cap = w->cap ? w->cap * 2 : 16;
      w->f = lr__xrealloc(w->f, w->cap * sizeof *w->f);
    }
    w->f[w->n++] = (lr__wframe){v, 0};
  }
  w->next = NULL;
  while (w->n) {
    lr__wframe *f = &w->f[w->n - 1];
    if (f->i < f->c->len) {
      size_t i = f->i++;
      w->next = f->c->type == LR_JOBJECT ? &f->c->u.items[2 * i + 1] : &f->c->u.items[i];
      break;
    }
    w->n--;
  }
  return v;
}

/* Refuses what JSON cannot carry exactly. `token` is 0-based. */
static int lr__wire_check(const lr_json *v, size_t token, char *err) {
  switch (v->type) {
    case LR_JNUMBER:
      if (!isfinite(v->u.num)) return lr__errf(err, "not lossless JSON: non-finite number (token %zu)", token);
      if (v->u.num == 0 && signbit(v->u.num)) return lr__errf(err, "not lossless JSON: -0 (token %zu)", token);
      return 0;
    case LR_JSTRING:
      if (!lr__utf8_valid(v->u.str, v->len, true))
        return lr__errf(err, "not lossless JSON: string is not UTF-8 (token %zu)", token);
      return 0;
    case LR_JOBJECT: {
      for (size_t i = 0; i < v->len; i++) {
        const lr_json *k = &v->u.items[2 * i];
        if (k->type != LR_JSTRING) return lr__errf(err, "not lossless JSON: object key is not a string (token %zu)", token);
        if (!lr__utf8_valid(k->u.str, k->len, true))
          return lr__errf(err, "not lossless JSON: object key is not UTF-8 (token %zu)", token);
      }
      size_t d = lr__wire_dup(v->u.items, v->len, 2);
      if (d < v->len) return lr__errf(err, "not lossless JSON: duplicate object key (token %zu)", token);
      return 0;
    }
    default:
      return 0;
  }
}

/* ---- encoding ---- */

static lr_json lr__wire_cstr(const char *s) { return lr__json_string(s, strlen(s)); }

/* The marker of a container, or a copy of a scalar. */
static lr_json lr__wire_token(const lr_json *v) {
  if (v->type == LR_JARRAY) {
    lr_json m = lr__json_object(2);
    m.u.items[0] = lr__wire_cstr("kind");
    m.u.items[1] = lr__wire_cstr("array");
    m.u.items[2] = lr__wire_cstr("length");
    m.u.items[3] = lr__json_number_value((double)v->len);
    return m;
  }
  if (v->type == LR_JOBJECT) {
    lr_json keys = lr__json_array(v->len);
    for (size_t i = 0; i < v->len; i++) {
      const lr_json *k = &v->u.items[2 * i];
      keys.u.items[i] = lr__json_string(k->u.str, k->len);
    }
    lr_json m = lr__json_object(2);
    m.u.items[0] = lr__wire_cstr("kind");
    m.u.items[1] = lr__wire_cstr("object");
    m.u.items[2] = lr__wire_cstr("keys");
    m.u.items[3] = keys;
    return m;
  }
  return lr__json_copy(v); /* a scalar: no recursion inside */
}

int lr__wire_encode(const lr_json *v, lr_json *tokens, char err[LR_ERR_MAX]) {
  *tokens = lr__json_null();
  lr__wwalk w = {.next = v};
  lr_json *items = NULL;
  size_t n = 0, cap = 0;
  const lr_json *node;
  while ((node = lr__wire_next(&w))) {
    if (lr__wire_check(node, w.index - 1, err)) {
      lr_json partial = {.type = LR_JARRAY, .len = n, .u.items = items};
      lr__json_free(&partial);
      free(w.f);
      return -1;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      items = lr__xrealloc(items, cap * sizeof *items);
    }
    items[n++] = lr__wire_token(node);
  }
  free(w.f);
  *tokens = (lr_json){.type = LR_JARRAY, .len = n, .u.items = lr__xrealloc(items, n * sizeof *items)};
  return 0;
}

int lr__wire_write(const lr_json *v, lr_buf *out, char err[LR_ERR_MAX]) {
  size_t start = out->len;
  lr__wwalk w = {.next = v};
  const lr_json *node;
  lr__buf_append_char(out, '[');
  while ((node = lr__wire_next(&w))) {
    if (lr__wire_check(node, w.index - 1, err)) {
      free(w.f);
      out->len = start;
      if (out->data) out->data[start] = '\0';
      return -1;
    }
    if (w.index > 1) lr__buf_append_char(out, ',');
    if (node->type == LR_JARRAY) {
      char num[32];
      lr__buf_append_str(out, "{\"kind\":\"array\",\"length\":");
      lr__buf_append(out, num, lr__json_number((double)node->len, num));
      lr__buf_append_char(out, '}');
    } else if (node->type == LR_JOBJECT) {
      lr__buf_append_str(out, "{\"kind\":\"object\",\"keys\":[");
      for (size_t i = 0; i < node->len; i++) {
        const lr_json *k = &node->u.items[2 * i];
        if (i) lr__buf_append_char(out, ',');
        lr__json_write_string(k->u.str, k->len, out);
      }
      lr__buf_append_str(out, "]}");
    } else {
      lr__json_write(node, out);
    }
  }
  free(w.f);
  lr__buf_append_char(out, ']');
  return 0;
}

/* ---- decoding ---- */

static bool lr__wire_is(const lr_json *s, const char *lit) {
  size_t n = strlen(lit);
  return s->type == LR_JSTRING && s->len == n && memcmp(s->u.str, lit, n) == 0;
}

/* A container being filled: its slot in the output and the next child. */
typedef struct lr__dframe {
  lr_json *c;
  size_t i;
} lr__dframe;

/* Checks marker m (token t, `left` tokens after it) and turns it into an
 * empty container in *slot, moving the keys out of m. */
static int lr__wire_marker(lr_json *m, size_t t, size_t left, lr_json *slot, char *err) {
  if (m->len != 2) return lr__errf(err, "bad wire tokens: token %zu: a marker has exactly two keys", t);
  lr_json *kind = lr__json_get(m, "kind");
  if (!kind) return lr__errf(err, "bad wire tokens: token %zu: marker without \"kind\"", t);
  if (lr__wire_is(kind, "array")) {
    lr_json *len = lr__json_get(m, "length");
    if (!len) return lr__errf(err, "bad wire tokens: token %zu: array marker without \"length\"", t);
    double d = len->type == LR_JNUMBER ? len->u.num : -1;
    if (!(d >= 0 && d <= LR_MAX_SAFE_INTEGER && d == floor(d)) || signbit(d))
      return lr__errf(err, "bad wire tokens: token %zu: array length is not a non-negative safe integer", t);
    if (d > (double)left)
      return lr__errf(err, "bad wire tokens: token %zu: array length %.0f is beyond the %zu tokens left", t, d, left);
    *slot = lr__json_array((size_t)d);
    return 0;
  }
  if (lr__wire_is(kind, "object")) {
    lr_json *keys = lr__json_get(m, "keys");
    if (!keys) return lr__errf(err, "bad wire tokens: token %zu: object marker without \"keys\"", t);
    if (keys->type != LR_JARRAY) return lr__errf(err, "bad wire tokens: token %zu: object keys are not an array", t);
    for (size_t i = 0; i < keys->len; i++)
      if (keys->u.items[i].type != LR_JSTRING)
        return lr__errf(err, "bad wire tokens: token %zu: object key %zu is not a string", t, i);
    if (keys->len > left)
      return lr__errf(err, "bad wire tokens: token %zu: %zu keys are beyond the %zu tokens left", t, keys->len, left);
    size_t d = lr__wire_dup(keys->u.items, keys->len, 1);
    if (d < keys->len) return lr__errf(err, "bad wire tokens: token %zu: duplicate object key (key %zu)", t, d);
    *slot = lr__json_object(keys->len);
    for (size_t i = 0; i < keys->len; i++) { /* move, don't copy */
      slot->u.items[2 * i] = keys->u.items[i];
      keys->u.items[i] = lr__json_null();
    }
    return 0;
  }
  return lr__errf(err, "bad wire tokens: token %zu: unknown marker kind", t);
}

int lr__wire_decode(lr_json *tokens, lr_json *out, char err[LR_ERR_MAX]) {
  *out = lr__json_null();
  if (tokens->type != LR_JARRAY) {
    lr__json_free(tokens);
    return lr__errf(err, "bad wire tokens: not an array");
  }
  size_t n = tokens->len;
  lr_json *tok = tokens->u.items;
  if (!n) {
    lr__json_free(tokens);
    return lr__errf(err, "bad wire tokens: no tokens");
  }
  lr__dframe *st = NULL;
  size_t depth = 0, cap = 0;
  /* Children still owed by open containers; kept within the tokens left so a
   * lying length cannot make the decoder allocate more than the input. */
  size_t need = 0;
  lr_json root = lr__json_null();
  int rc = 0;
  size_t t = 0;
  for (; t < n; t++) {
    lr_json *slot;
    if (depth) {
      lr__dframe *f = &st[depth - 1];
      slot = f->c->type == LR_JOBJECT ? &f->c->u.items[2 * f->i + 1] : &f->c->u.items[f->i];
      f->i++;
      need--;
    } else if (t == 0) {
      slot = &root;
    } else {
      rc = lr__errf(err, "bad wire tokens: %zu trailing tokens after the value", n - t);
      break;
    }
    lr_json *k = &tok[t];
    size_t left = n - t - 1;
    if (k->type == LR_JARRAY) {
      rc = lr__errf(err, "bad wire tokens: token %zu: an array is not a token", t);
      break;
    }
    if (k->type == LR_JNUMBER && (!isfinite(k->u.num) || (k->u.num == 0 && signbit(k->u.num)))) {
      rc = lr__errf(err, "bad wire tokens: token %zu: %s", t, isfinite(k->u.num) ? "-0" : "non-finite number");
      break;
    }
    if (k->type == LR_JOBJECT) {
      if (lr__wire_marker(k, t, left, slot, err)) {
        rc = -1;
        break;
      }
      if (need + slot->len > left) {
        rc = lr__errf(err, "bad wire tokens: token %zu: more children than tokens left", t);
        break;
      }
      if (slot->len) {
        if (depth == cap) {
          cap = cap ? cap * 2 : 16;
          st = lr__xrealloc(st, cap * sizeof *st);
        }
        st[depth++] = (lr__dframe){slot, 0};
        need += slot->len;
        continue;
      }
    } else {
      *slot = *k; /* scalars move: a string's bytes change owner */
      *k = lr__json_null();
    }
    while (depth && st[depth - 1].i == st[depth - 1].c->len) depth--;
  }
  if (!rc && depth) rc = lr__errf(err, "bad wire tokens: the tokens end inside a container");
  free(st);
  lr__json_free(tokens);
  if (rc) {
    lr__json_free(&root);
    return -1;
  }
  *out = root;
  return 0;
}
