/* The wire shape of SPEC §6: a value as a flat JSON array of tokens in
 * pre-order. Containers are markers {"kind":"array","length":n} or
 * {"kind":"object","keys":[...]} followed by their children. */
#ifndef LR_WIRE_H
#define LR_WIRE_H

#include "json.h"

/* Builds the token array of v into *tokens (an LR_JARRAY the caller frees).
 * Refuses values that are not lossless: non-finite numbers and -0, strings
 * that are not UTF-8/WTF-8, duplicate object keys. Never recursive. */
int lr__wire_encode(const lr_json *v, lr_json *tokens, char err[LR_ERR_MAX]);

/* Appends the JSON text of the token array of v directly (no intermediate
 * tree); the same refusals as lr__wire_encode. On failure, out is restored
 * to its length at entry. */
int lr__wire_write(const lr_json *v, lr_buf *out, char err[LR_ERR_MAX]);

/* Decodes a token array into one value. Consumes *tokens (moves strings and
 * so on out of it and frees the rest; *tokens is null afterwards, success or
 * not). Refuses: tokens that are not an array, a marker with missing or extra
 * keys or a wrong kind, a length beyond the tokens left or not a safe
 * integer, keys that are not strings or repeat, a bare array token, -0,
 * trailing tokens, and anything that is not exactly one complete root.
 * Never recursive: depth 5000 and far beyond is fine. */
int lr__wire_decode(lr_json *tokens, lr_json *out, char err[LR_ERR_MAX]);

#endif
