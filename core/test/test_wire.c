/* The wire shape of SPEC §6: exact token texts, round trips (deep ones
 * too), and one test per refusal of the encoder and the decoder. */
#include "check.h"
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lr_json parse(const char *text) {
  lr_json v;
  char err[LR_ERR_MAX];
  if (lr__json_parse(text, strlen(text), &v, err)) {
    fprintf(stderr, "test input does not parse: %s: %s\n", text, err);
    CHECK(0);
  }
  return v;
}

static char *text_of(const lr_json *v) {
  lr_buf b = {0};
  lr__json_write(v, &b);
  return lr__buf_steal(&b, NULL);
}

/* Encodes v both ways (tree and direct text), checks they agree and equal
 * want, then decodes the text back and checks it writes like v. */
static void roundtrip_value(const lr_json *v, const char *want) {
  char err[LR_ERR_MAX] = "";
  lr_json tokens;
  CHECK(lr__wire_encode(v, &tokens, err) == 0);
  char *tt = text_of(&tokens);
  lr_buf direct = {0};
  CHECK(lr__wire_write(v, &direct, err) == 0);
  CHECK_STR(direct.data, tt);
  if (want) CHECK_STR(tt, want);
  /* decode from the parsed text, as a receiver does */
  lr_json back_tokens = parse(direct.data), back;
  CHECK(lr__wire_decode(&back_tokens, &back, err) == 0);
  CHECK(back_tokens.type == LR_JNULL);
  char *a = text_of(v), *b = text_of(&back);
  CHECK_STR(b, a);
  /* and from the encoder's tree directly */
  lr_json back2;
  CHECK(lr__wire_decode(&tokens, &back2, err) == 0);
  CHECK(tokens.type == LR_JNULL);
  char *c = text_of(&back2);
  CHECK_STR(c, a);
  free(a), free(b), free(c), free(tt);
  lr__json_free(&back);
  lr__json_free(&back2);
  lr__buf_free(&direct);
}

static void roundtrip(const char *json, const char *want) {
  lr_json v = parse(json);
  roundtrip_value(&v, want);
  lr__json_free(&v);
}

static void test_shapes(void) {
  roundtrip("null", "[null]");
  roundtrip("true", "[true]");
  roundtrip("false", "[false]");
  roundtrip("0", "[0]");
  roundtrip("-1.5e-7", "[-1.5e-7]");
  roundtrip("9007199254740991", "[9007199254740991]");
  roundtrip("1e300", "[1e+300]");
  roundtrip("\"hi\"", "[\"hi\"]");
  roundtrip("[]", "[{\"kind\":\"array\",\"length\":0}]");
  roundtrip("{}", "[{\"kind\":\"object\",\"keys\":[]}]");
  roundtrip("[1,[2,3],{\"a\":[]}]",
            "[{\"kind\":\"array\",\"length\":3},1,{\"kind\":\"array\",\"length\":2},2,3,"
            "{\"kind\":\"object\",\"keys\":[\"a\"]},{\"kind\":\"array\",\"length\":0}]");
  roundtrip("{\"b\":1,\"a\":{\"x\":null,\"y\":[true]},\"\":\"\"}",
            "[{\"kind\":\"object\",\"keys\":[\"b\",\"a\",\"\"]},1,{\"kind\":\"object\",\"keys\":[\"x\",\"y\"]},"
            "null,{\"kind\":\"array\",\"length\":1},true,\"\"]");
  /* a value that looks like a marker is just an object on the wire */
  roundtrip("{\"kind\":\"array\",\"length\":1}",
            "[{\"kind\":\"object\",\"keys\":[\"kind\",\"length\"]},\"array\",1]");
  roundtrip("[[[]],[{}]]", NULL);
  /* escapes, controls, astral characters, lone surrogates, in keys too */
  roundtrip("[\"\\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\\u007f\\u2028\"]",
            "[{\"kind\":\"array\",\"length\":1},\"\\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\x7f\xe2\x80\xa8\"]");
  roundtrip("{\"\\ud83d\\ude00\":\"\\ud800\",\"\\udc00\":\"\xf0\x9f\x98\x80\"}",
            "[{\"kind\":\"object\",\"keys\":[\"\xf0\x9f\x98\x80\",\"\\udc00\"]},\"\\ud800\",\"\xf0\x9f\x98\x80\"]");
  roundtrip("{\"k\\n\\\"\":\"\xe2\x82\xac\"}", "[{\"kind\":\"object\",\"keys\":[\"k\\n\\\"\"]},\"\xe2\x82\xac\"]");
  /* a string with NUL bytes survives as bytes */
  {
    lr_json s = lr__json_string("a\0b", 3);
    char err[LR_ERR_MAX];
    lr_json t, back;
    CHECK(lr__wire_encode(&s, &t, err) == 0);
    CHECK(lr__wire_decode(&t, &back, err) == 0);
    CHECK(back.type == LR_JSTRING && back.len == 3 && memcmp(back.u.str, "a\0b", 4) == 0);
    lr__json_free(&s);
    lr__json_free(&back);
  }
  /* many keys: the hash path of the duplicate check, no false positives */
  {
    lr_json o = lr__json_object(500);
    for (int i = 0; i < 500; i++) {
      char k[16];
      snprintf(k, sizeof k, "k%d", i);
      o.u.items[2 * i] = lr__json_string(k, strlen(k));
      o.u.items[2 * i + 1] = lr__json_number_value(i);
    }
    roundtrip_value(&o, NULL);
    lr__json_free(&o);
  }
}

/* One subtree referenced from several places (no ownership: built by
 * struct copy) is written as separate copies and decodes to independent
 * ones. */
static void test_shared(void) {
  lr_json inner = parse("{\"x\":[1,\"s\"]}");
  lr_json outer = lr__json_array(3);
  outer.u.items[0] = inner;
  outer.u.items[1] = inner;
  outer.u.items[2] = lr__json_array(1);
  outer.u.items[2].u.items[0] = inner;
  const char *want =
      "[{\"kind\":\"array\",\"length\":3},"
      "{\"kind\":\"object\",\"keys\":[\"x\"]},{\"kind\":\"array\",\"length\":2},1,\"s\","
      "{\"kind\":\"object\",\"keys\":[\"x\"]},{\"kind\":\"array\",\"length\":2},1,\"s\","
      "{\"kind\":\"array\",\"length\":1},"
      "{\"kind\":\"object\",\"keys\":[\"x\"]},{\"kind\":\"array\",\"length\":2},1,\"s\"]";
  roundtrip_value(&outer, want);
  char err[LR_ERR_MAX];
  lr_json t, back;
  CHECK(lr__wire_encode(&outer, &t, err) == 0);
  CHECK(lr__wire_decode(&t, &back, err) == 0);
  CHECK(back.u.items[0].u.items != back.u.items[1].u.items);
  CHECK(back.u.items[0].u.items[1].u.items != inner.u.items[1].u.items);
  lr__json_free(&back);
  free(outer.u.items[2].u.items); /* only the arrays outer itself owns */
  free(outer.u.items);
  lr__json_free(&inner);
}

/* depth nested arrays [[[...0...]]] or objects {"k":{"k":...}} */
static lr_json nested(size_t depth, bool objects) {
  lr_json root = lr__json_number_value(0);
  for (size_t i = 0; i < depth; i++) {
    lr_json c;
    if (objects) {
      c = lr__json_object(1);
      c.u.items[0] = lr__json_string("k", 1);
      c.u.items[1] = root;
    } else {
      c = lr__json_array(1);
      c.u.items[0] = root;
    }
    root = c;
  }
  return root;
}

static void test_depth(size_t depth, bool objects) {
  lr_json v = nested(depth, objects);
  char err[LR_ERR_MAX] = "";
  lr_buf text = {0};
  CHECK(lr__wire_write(&v, &text, err) == 0);
  lr_json tokens;
  CHECK(lr__wire_encode(&v, &tokens, err) == 0);
  CHECK(tokens.len == depth + 1);
  lr__json_free(&tokens);
  /* the other way: parse the token text and decode it */
  lr_json parsed = parse(text.data), back;
  CHECK(parsed.len == depth + 1);
  CHECK(lr__wire_decode(&parsed, &back, err) == 0);
  lr_buf a = {0}, b = {0};
  lr__json_write(&v, &a);
  lr__json_write(&back, &b);
  CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
  lr__json_free(&back);
  /* the same tokens less the last: incomplete, refused, nothing leaks */
  lr_json cut = parse(text.data);
  lr__json_free(&cut.u.items[--cut.len]);
  CHECK(lr__wire_decode(&cut, &back, err) == -1 || (lr__json_free(&back), 0));
  lr__json_free(&v);
  lr__json_free(&back);
  lr__buf_free(&text);
  lr__buf_free(&a);
  lr__buf_free(&b);
}

/* The encoder refuses v, says so in err, and lr__wire_write leaves out as
 * it was. */
static void encode_refuses(const lr_json *v, const char *what) {
  char err[LR_ERR_MAX] = "";
  lr_json t = lr__json_bool(true);
  CHECK(lr__wire_encode(v, &t, err) == -1);
  CHECK(t.type == LR_JNULL);
  if (!strstr(err, what)) {
    CHECK(!"encoder error says what");
    fprintf(stderr, "  error \"%s\", want \"%s\"\n", err, what);
  }
  lr_buf out = {0};
  lr__buf_append_str(&out, "keep");
  err[0] = '\0';
  CHECK(lr__wire_write(v, &out, err) == -1);
  CHECK(out.len == 4 && strcmp(out.data, "keep") == 0);
  CHECK(strstr(err, what) != NULL);
  lr__buf_free(&out);
}

static void test_encode_refusals(void) {
  /* each refused value, alone and deep inside a container */
  lr_json bad[6];
  const char *what[6] = {"non-finite", "non-finite", "non-finite", "-0", "not UTF-8", "not UTF-8"};
  bad[0] = lr__json_number_value(NAN);
  bad[1] = lr__json_number_value(INFINITY);
  bad[2] = lr__json_number_value(-INFINITY);
  bad[3] = lr__json_number_value(-0.0);
  bad[4] = lr__json_string("a\xff", 2);
  bad[5] = lr__json_string("\xed\xa0\x80\xed\xb0\x80", 6); /* a WTF-8 pair must be one code point */
  for (int i = 0; i < 6; i++) {
    encode_refuses(&bad[i], what[i]);
    lr_json wrap = parse("[1,{\"a\":[null]}]");
    lr_json *slot = &lr__json_get(&wrap.u.items[1], "a")->u.items[0];
    *slot = lr__json_copy(&bad[i]);
    encode_refuses(&wrap, what[i]);
    lr__json_free(&wrap);
    lr__json_free(&bad[i]);
  }
  /* a lone surrogate alone is fine (WTF-8), and +0 is fine */
  roundtrip("[\"\\ud800\",0,-0.5]", NULL);
  /* keys: not UTF-8, duplicates (small and hashed) */
  lr_json o = lr__json_object(1);
  o.u.items[0] = lr__json_string("\xc0\x80", 2);
  encode_refuses(&o, "not UTF-8");
  lr__json_free(&o);
  o = lr__json_object(3);
  o.u.items[0] = lr__json_string("a", 1);
  o.u.items[2] = lr__json_string("b", 1);
  o.u.items[4] = lr__json_string("a", 1);
  encode_refuses(&o, "duplicate object key");
  lr__json_free(&o);
  o = lr__json_object(100);
  for (int i = 0; i < 100; i++) {
    char k[16];
    snprintf(k, sizeof k, "k%d", i == 99 ? 42 : i);
    o.u.items[2 * i] = lr__json_string(k, strlen(k));
  }
  encode_refuses(&o, "duplicate object key");
  lr__json_free(&o);
  /* a refusal deep down: nothing built so far leaks */
  lr_json deep = nested(5000, false), *p = &deep;
  while (p->type == LR_JARRAY) p = &p->u.items[0];
  *p = lr__json_number_value(-0.0);
  encode_refuses(&deep, "-0");
  lr__json_free(&deep);
}

/* The decoder refuses the token text (after parsing it), says what, and
 * consumes the tokens either way. */
static void decode_refuses_value(lr_json tokens, const char *what) {
  char err[LR_ERR_MAX] = "";
  lr_json out = lr__json_bool(true);
  CHECK(lr__wire_decode(&tokens, &out, err) == -1);
  CHECK(tokens.type == LR_JNULL);
  CHECK(out.type == LR_JNULL);
  if (!strstr(err, what)) {
    CHECK(!"decoder error says what");
    fprintf(stderr, "  error \"%s\", want \"%s\"\n", err, what);
  }
}

static void decode_refuses(const char *text, const char *what) { decode_refuses_value(parse(text), what); }

static void test_decode_refusals(void) {
  decode_refuses("{\"kind\":\"array\",\"length\":0}", "not an array");
  decode_refuses("null", "not an array");
  decode_refuses("\"x\"", "not an array");
  decode_refuses("[]", "no tokens");
  /* markers: extra, missing or wrong keys */
  decode_refuses("[{\"kind\":\"array\",\"length\":0,\"x\":1}]", "exactly two keys");
  decode_refuses("[{\"kind\":\"object\",\"keys\":[],\"length\":0}]", "exactly two keys");
  decode_refuses("[{\"kind\":\"array\"}]", "exactly two keys");
  decode_refuses("[{}]", "exactly two keys");
  decode_refuses("[{\"length\":0,\"keys\":[]}]", "without \"kind\"");
  decode_refuses("[{\"kind\":\"array\",\"keys\":[]}]", "without \"length\"");
  decode_refuses("[{\"kind\":\"object\",\"length\":0}]", "without \"keys\"");
  decode_refuses("[{\"kind\":\"map\",\"length\":0}]", "unknown marker kind");
  decode_refuses("[{\"kind\":\"Array\",\"length\":0}]", "unknown marker kind");
  decode_refuses("[{\"kind\":1,\"length\":0}]", "unknown marker kind");
  decode_refuses("[{\"kind\":null,\"keys\":[]}]", "unknown marker kind");
  /* lengths */
  decode_refuses("[{\"kind\":\"array\",\"length\":-1}]", "non-negative safe integer");
  decode_refuses("[{\"kind\":\"array\",\"length\":-0}]", "non-negative safe integer");
  decode_refuses("[{\"kind\":\"array\",\"length\":0.5},1]", "non-negative safe integer");
  decode_refuses("[{\"kind\":\"array\",\"length\":\"1\"},1]", "non-negative safe integer");
  decode_refuses("[{\"kind\":\"array\",\"length\":null}]", "non-negative safe integer");
  decode_refuses("[{\"kind\":\"array\",\"length\":9007199254740992}]", "non-negative safe integer");
  decode_refuses("[{\"kind\":\"array\",\"length\":1e300}]", "non-negative safe integer");
  decode_refuses("[{\"kind\":\"array\",\"length\":9007199254740991}]", "beyond");
  decode_refuses("[{\"kind\":\"array\",\"length\":2},1]", "beyond");
  decode_refuses("[{\"kind\":\"object\",\"keys\":[\"a\",\"b\"]},1]", "beyond");
  /* each child fits alone, but not both: the decoder never allocates more
   * than the tokens can fill */
  decode_refuses("[{\"kind\":\"array\",\"length\":2},{\"kind\":\"array\",\"length\":2},1,2]", "more children than tokens");
  /* keys */
  decode_refuses("[{\"kind\":\"object\",\"keys\":{}}]", "keys are not an array");
  decode_refuses("[{\"kind\":\"object\",\"keys\":\"a\"},1]", "keys are not an array");
  decode_refuses("[{\"kind\":\"object\",\"keys\":[1]},1]", "not a string");
  decode_refuses("[{\"kind\":\"object\",\"keys\":[\"a\",null]},1,2]", "not a string");
  decode_refuses("[{\"kind\":\"object\",\"keys\":[\"a\",\"b\",\"a\"]},1,2,3]", "duplicate object key");
  {
    lr_buf t = {0};
    lr__buf_append_str(&t, "[{\"kind\":\"object\",\"keys\":[");
    for (int i = 0; i < 50; i++) {
      char k[16];
      snprintf(k, sizeof k, "%s\"k%d\"", i ? "," : "", i == 49 ? 7 : i);
      lr__buf_append_str(&t, k);
    }
    lr__buf_append_str(&t, "]}");
    for (int i = 0; i < 50; i++) lr__buf_append_str(&t, ",0");
    lr__buf_append_str(&t, "]");
    decode_refuses(t.data, "duplicate object key");
    lr__buf_free(&t);
  }
  /* bare arrays, -0, non-finite */
  decode_refuses("[[]]", "an array is not a token");
  decode_refuses("[{\"kind\":\"array\",\"length\":1},[1]]", "an array is not a token");
  decode_refuses("[-0]", "-0");
  decode_refuses("[{\"kind\":\"array\",\"length\":2},1,-0.0]", "-0");
  decode_refuses("[{\"kind\":\"object\",\"keys\":[\"a\"]},-0e5]", "-0");
  {
    lr_json t = lr__json_array(1);
    t.u.items[0] = lr__json_number_value(NAN);
    decode_refuses_value(t, "non-finite");
    t = lr__json_array(1);
    t.u.items[0] = lr__json_number_value(-INFINITY);
    decode_refuses_value(t, "non-finite");
  }
  /* exactly one complete root */
  decode_refuses("[1,2]", "trailing");
  decode_refuses("[null,null]", "trailing");
  decode_refuses("[{\"kind\":\"array\",\"length\":0},1]", "trailing");
  decode_refuses("[{\"kind\":\"array\",\"length\":1},1,\"x\"]", "trailing");
  decode_refuses("[{\"kind\":\"object\",\"keys\":[]},{\"kind\":\"object\",\"keys\":[]}]", "trailing");
  /* strings moved into a partly built tree are freed on refusal */
  decode_refuses("[{\"kind\":\"object\",\"keys\":[\"a\",\"b\"]},\"x\",[]]", "an array is not a token");
  /* valid edge cases around the refusals */
  roundtrip("[-0.0001,0,1e-300]", NULL);
  {
    lr_json t = parse("[{\"length\":1,\"kind\":\"array\"},\"x\"]"), v; /* any key order */
    char err[LR_ERR_MAX];
    CHECK(lr__wire_decode(&t, &v, err) == 0);
    CHECK(v.type == LR_JARRAY && v.len == 1 && v.u.items[0].type == LR_JSTRING);
    lr__json_free(&v);
  }
  {
    lr_json t = parse("[0]"), v;
    char err[LR_ERR_MAX];
    CHECK(lr__wire_decode(&t, &v, err) == 0);
    CHECK(v.type == LR_JNUMBER && v.u.num == 0 && !signbit(v.u.num));
  }
}

/* Decoding moves strings out of the tokens instead of copying them. */
static void test_decode_moves(void) {
  lr_json t = parse("[{\"kind\":\"object\",\"keys\":[\"key\"]},\"value\"]");
  const char *key = t.u.items[0].u.items[3].u.items[0].u.str;
  const char *val = t.u.items[1].u.str;
  lr_json v;
  char err[LR_ERR_MAX];
  CHECK(lr__wire_decode(&t, &v, err) == 0);
  CHECK(v.u.items[0].u.str == key);
  CHECK(v.u.items[1].u.str == val);
  lr__json_free(&v);
}

int main(void) {
  test_shapes();
  test_shared();
  test_depth(5000, false);
  test_depth(5000, true);
  test_depth(100000, false);
  test_depth(100000, true);
  test_encode_refusals();
  test_decode_refusals();
  test_decode_moves();
  return CHECK_DONE();
}
