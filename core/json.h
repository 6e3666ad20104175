/* JSON values in C: one tree type, a strict iterative parser and a writer
 * that prints exactly what JavaScript's JSON.stringify prints. */
#ifndef LR_JSON_H
#define LR_JSON_H

#include "util.h"

typedef enum lr_jtype {
  LR_JNULL,
  LR_JFALSE,
  LR_JTRUE,
  LR_JNUMBER,
  LR_JSTRING,
  LR_JARRAY,
  LR_JOBJECT
} lr_jtype;

/* One JSON value. Strings are UTF-8 (WTF-8 for lone surrogates, see
 * lr__utf8_valid), may contain NUL bytes and are NUL-terminated as well.
 * An array holds `len` items; an object holds `len` members stored as 2*len
 * items: items[2i] is the key (always LR_JSTRING), items[2i+1] the value.
 * A value owns its string and its items; lr__json_free releases them. */
typedef struct lr_json lr_json;
struct lr_json {
  lr_jtype type;
  size_t len; /* string bytes, array items or object members */
  union {
    double num;
    char *str;
    lr_json *items;
  } u;
};

/* Parses exactly one JSON text (RFC 8259, no extensions, whitespace around it
 * allowed). Refuses invalid UTF-8, unpaired-surrogate escapes are kept as
 * WTF-8, numbers that overflow to infinity are refused. Never recursive. On
 * failure *out is left as null and err says what and where. */
int lr__json_parse(const char *text, size_t len, lr_json *out, char err[LR_ERR_MAX]);

/* Appends the compact JSON text of v, byte for byte what JSON.stringify
 * gives for the same value (numbers as Number.prototype.toString, the same
 * escapes). Never recursive. NaN and infinities are written as null, as
 * JSON.stringify does; the wire refuses them before they get here. */
void lr__json_write(const lr_json *v, lr_buf *out);

/* Length of what lr__json_write would append, without writing it. */
size_t lr__json_size(const lr_json *v);

/* Releases what v owns (not v itself) and sets it to null. Never recursive. */
void lr__json_free(lr_json *v);

/* Writes the ECMAScript Number::toString text of a finite d (shortest
 * round-trip digits; "1e+21", "5e-324", "0.1", "-0" prints as "0") into buf,
 * NUL-terminated; returns its length. */
size_t lr__json_number(double d, char buf[32]);

/* Appends s[0..len) as a JSON string literal (quotes included) exactly as
 * JSON.stringify escapes it. */
void lr__json_write_string(const char *s, size_t len, lr_buf *out);

/* Length of what lr__json_write_string appends for s[0..len). */
size_t lr__json_string_size(const char *s, size_t len);

/* Bytes JSON.stringify writes for each byte of a string: 1, 2 (\n, \", ...)
 * or 6 (\u00xx); 0 for 0xED, which may start a lone surrogate (6). */
extern const unsigned char lr__json_escape_len[256];

/* Constructors. Strings are copied. */
lr_json lr__json_null(void);
lr_json lr__json_bool(bool b);
lr_json lr__json_number_value(double d);
lr_json lr__json_string(const char *s, size_t len);
/* An array or object with room for n items/members, all null; fill
 * items[...] in place. */
lr_json lr__json_array(size_t n);
lr_json lr__json_object(size_t n);

/* Looks up a key in an object; NULL when absent or v is not an object. */
lr_json *lr__json_get(const lr_json *v, const char *key);

/* Deep copy, never recursive. */
lr_json lr__json_copy(const lr_json *v);

#endif
