/* Fuzz target: the wire decoder of SPEC §6 (core/wire.c).
 *
 * The input is parsed as JSON and handed to the decoder as tokens. It must
 * end in exactly one value or a clean refusal, never allocate beyond what
 * the tokens can fill (a lying length), and a value it accepts is lossless:
 * encoding it gives tokens that decode to the same value, and those tokens
 * are a fixed point. */
#include "json.h"
#include "wire.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[LR_ERR_MAX] = "";
  lr_json tokens;
  if (lr__json_parse((const char *)data, size, &tokens, err)) return 0;
  lr_json v;
  int rc = lr__wire_decode(&tokens, &v, err);
  LR_FUZZ_ASSERT(tokens.type == LR_JNULL, "the decoder did not consume its tokens");
  if (rc) {
    LR_FUZZ_ASSERT(v.type == LR_JNULL, "a refusal left a value");
    LR_FUZZ_ASSERT(strncmp(err, "bad wire tokens: ", 17) == 0, "refusal message \"%s\"", err);
    return 0;
  }
  lr_buf t1 = {0}, t2 = {0}, w1 = {0}, w2 = {0};
  lr__json_write(&v, &t1);
  rc = lr__wire_write(&v, &w1, err);
  LR_FUZZ_ASSERT(rc == 0, "a decoded value is not lossless: %s", err);

  lr_json again;
  rc = lr__json_parse(w1.data, w1.len, &again, err);
  LR_FUZZ_ASSERT(rc == 0, "own wire text does not parse: %s", err);
  lr_json back;
  rc = lr__wire_decode(&again, &back, err);
  LR_FUZZ_ASSERT(rc == 0, "own wire tokens refused: %s", err);
  lr__json_write(&back, &t2);
  LR_FUZZ_ASSERT(t1.len == t2.len && memcmp(t1.data, t2.data, t1.len) == 0, "wire round trip differs");
  rc = lr__wire_write(&back, &w2, err);
  LR_FUZZ_ASSERT(rc == 0 && w1.len == w2.len && memcmp(w1.data, w2.data, w1.len) == 0, "wire text not stable");
  lr__json_free(&back);
  lr__json_free(&v);
  lr__buf_free(&t1);
  lr__buf_free(&t2);
  lr__buf_free(&w1);
  lr__buf_free(&w2);
  return 0;
}
