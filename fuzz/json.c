/* Fuzz target: the JSON parser and writer (core/json.c).
 *
 * Whatever the input, parsing ends in a value or a clean refusal. A parsed
 * value written out is JSON.stringify's text of JSON.parse(input), which is
 * a fixed point: parsing that text and writing it again gives the same
 * bytes. The writer's size, a deep copy, the ledger's cost and the wire
 * shape (when the value is lossless) all agree with the text. */
#include "json.h"
#include "ledger.h"
#include "wire.h"
#include "fuzz_input.h"

static void lr_fuzz_text(const lr_json *v, lr_buf *out) {
  out->len = 0;
  lr__json_write(v, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly the input's size, so ASan sees any overread. */
  char *text = lr__xmemdup(data, size);
  char err[LR_ERR_MAX] = "";
  lr_json v;
  int rc = lr__json_parse(text, size, &v, err);
  free(text);
  if (rc) {
    LR_FUZZ_ASSERT(v.type == LR_JNULL, "a refusal left a value");
    LR_FUZZ_ASSERT(strncmp(err, "invalid JSON: ", 14) == 0, "refusal message \"%s\"", err);
    return 0;
  }

  lr_buf t1 = {0}, t2 = {0};
  lr_fuzz_text(&v, &t1);
  LR_FUZZ_ASSERT(lr__json_size(&v) == t1.len, "size %zu, text %zu", lr__json_size(&v), t1.len);
  LR_FUZZ_ASSERT(lr__ledger_value_cost(&v) == t1.len, "ledger cost differs from the text");
  /* Everything the writer prints is UTF-8: lone surrogates become escapes. */
  LR_FUZZ_ASSERT(lr__utf8_valid(t1.data, t1.len, false), "written text is not UTF-8");

  lr_json w;
  rc = lr__json_parse(t1.data, t1.len, &w, err);
  LR_FUZZ_ASSERT(rc == 0, "the writer's own text does not parse: %s: %s", err, t1.data);
  lr_fuzz_text(&w, &t2);
  LR_FUZZ_ASSERT(t1.len == t2.len && memcmp(t1.data, t2.data, t1.len) == 0,
                 "not byte-stable:\n  %s\n  %s", t1.data, t2.data);
  lr__json_free(&w);

  lr_json c = lr__json_copy(&v);
  lr_fuzz_text(&c, &t2);
  LR_FUZZ_ASSERT(t1.len == t2.len && memcmp(t1.data, t2.data, t1.len) == 0, "a copy writes differently");
  lr__json_free(&c);

  /* The wire shape: tokens as a tree and as direct text must agree, and
   * decode back to the same value. */
  lr_json tokens;
  lr_buf direct = {0};
  int erc = lr__wire_encode(&v, &tokens, err);
  int wrc = lr__wire_write(&v, &direct, err);
  LR_FUZZ_ASSERT(erc == wrc, "wire encode %d, wire write %d", erc, wrc);
  if (erc == 0) {
    lr_fuzz_text(&tokens, &t2);
    LR_FUZZ_ASSERT(t2.len == direct.len && memcmp(t2.data, direct.data, direct.len) == 0,
                   "wire tree and wire text differ");
    lr_json back;
    rc = lr__wire_decode(&tokens, &back, err);
    LR_FUZZ_ASSERT(rc == 0, "own tokens refused: %s", err);
    lr_fuzz_text(&back, &t2);
    LR_FUZZ_ASSERT(t1.len == t2.len && memcmp(t1.data, t2.data, t1.len) == 0, "wire round trip differs");
    lr__json_free(&back);
  } else {
    LR_FUZZ_ASSERT(direct.len == 0, "a refused wire write left %zu bytes", direct.len);
  }
  lr__buf_free(&direct);
  lr__buf_free(&t1);
  lr__buf_free(&t2);
  lr__json_free(&v);
  return 0;
}
