/* The JSON tree: parser strictness and error offsets, writer output equal to
 * JSON.stringify, size equal to write, copy/free, depth without recursion. */
#include "check.h"
#include "json.h"

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Text of v as lr__json_write gives it; also checks size == written bytes. */
static char *text_of(const lr_json *v) {
  lr_buf b = {0};
  lr__json_write(v, &b);
  CHECK(lr__json_size(v) == b.len);
  return lr__buf_steal(&b, NULL);
}

/* Parses in and checks that writing it gives want (NULL: want == in). */
static void roundtrip(const char *in, const char *want) {
  lr_json v;
  char err[LR_ERR_MAX] = "";
  int rc = lr__json_parse(in, strlen(in), &v, err);
  CHECK(rc == 0);
  if (rc) {
    fprintf(stderr, "  parse of %s failed: %s\n", in, err);
    return;
  }
  char *t = text_of(&v);
  CHECK_STR(t, want ? want : in);
  free(t);
  lr__json_free(&v);
}

/* Parses a text that must be refused, with an error naming the offset. */
static void refuse_n(const char *in, size_t len, size_t offset) {
  lr_json v = lr__json_bool(true);
  char err[LR_ERR_MAX] = "";
  CHECK(lr__json_parse(in, len, &v, err) == -1);
  CHECK(v.type == LR_JNULL);
  char at[64];
  snprintf(at, sizeof at, "at byte %zu", offset);
  if (!strstr(err, at)) {
    CHECK(!"error names the offset");
    fprintf(stderr, "  input %.*s: error \"%s\", want \"%s\"\n", (int)len, in, err, at);
  } else {
    CHECK(1);
  }
}

static void refuse(const char *in, size_t offset) { refuse_n(in, strlen(in), offset); }

/* The same, and the error says what went wrong. */
static void refuse_what(const char *in, size_t offset, const char *what) {
  refuse(in, offset);
  lr_json v;
  char err[LR_ERR_MAX] = "";
  lr__json_parse(in, strlen(in), &v, err);
  if (!strstr(err, what)) {
    CHECK(!"error says what");
    fprintf(stderr, "  input %s: error \"%s\", want \"%s\"\n", in, err, what);
  } else {
    CHECK(1);
  }
}

static void check_number(double d, const char *want) {
  char buf[32];
  size_t n = lr__json_number(d, buf);
  CHECK_STR(buf, want);
  CHECK(n == strlen(want));
  lr_json v = lr__json_number_value(d);
  char *t = text_of(&v);
  CHECK_STR(t, want);
  free(t);
  /* reading the text back gives the same double (sign of zero aside) */
  lr_json back;
  char err[LR_ERR_MAX];
  CHECK(lr__json_parse(buf, n, &back, err) == 0 && back.type == LR_JNUMBER && back.u.num == d);
}

static void test_numbers(void) {
  check_number(0, "0");
  check_number(-0.0, "0");
  check_number(1, "1");
  check_number(-1, "-1");
  check_number(0.1, "0.1");
  check_number(0.1 + 0.2, "0.30000000000000004");
  check_number(1e21, "1e+21");
  check_number(1e20, "100000000000000000000");
  check_number(123456789012345680000.0, "123456789012345680000");
  check_number(5e-324, "5e-324");
  check_number(-5e-324, "-5e-324");
  check_number(1.7976931348623157e308, "1.7976931348623157e+308");
  check_number(-1.7976931348623157e308, "-1.7976931348623157e+308");
  check_number(1e-7, "1e-7");
  check_number(0.000001, "0.000001");
  check_number(0.0000012345, "0.0000012345");
  check_number(1.2345e-7, "1.2345e-7");
  check_number(9007199254740992.0, "9007199254740992");
  check_number(9007199254740991.0, "9007199254740991");
  check_number(-9007199254740994.0, "-9007199254740994");
  check_number(18014398509481984.0, "18014398509481984");
  check_number(1.5e-10, "1.5e-10");
  check_number(123.456, "123.456");
  check_number(-123.456, "-123.456");
  check_number(1.5, "1.5");
  check_number(100, "100");
  check_number(1e100, "1e+100");
  check_number(1.2e21, "1.2e+21");
  check_number(999999999999999900000.0, "999999999999999900000");
  check_number(2.5e-5, "0.000025");
  check_number(4.35, "4.35");
  check_number(0.5, "0.5");
  check_number(1.0 / 3, "0.3333333333333333");
  check_number(2.0 / 3, "0.6666666666666666");
  check_number(1e23, "1e+23");
  check_number(2.2250738585072014e-308, "2.2250738585072014e-308");
  check_number(2.225073858507201e-308, "2.225073858507201e-308");
  check_number(4294967296.5, "4294967296.5");
  check_number(0x1p-1022, "2.2250738585072014e-308");
  check_number(0x1p60, "1152921504606847000");
  check_number(0x1p70, "1.1805916207174113e+21");
  check_number(0x1p-20, "9.5367431640625e-7");
  check_number(0x1p-10, "0.0009765625");
  /* powers of two whose shortest text is not the nearest decimal of its
   * length (the rounding interval is narrower below); values from Node */
  check_number(0x1p-1017, "7.120236347223045e-307");
  check_number(0x1p-957, "8.209073602596753e-289");
  check_number(0x1p-791, "7.678447687145631e-239");
  /* NaN and infinities are written as null, as JSON.stringify does */
  lr_json v = lr__json_number_value(NAN);
  char *t = text_of(&v);
  CHECK_STR(t, "null");
  free(t);
  v = lr__json_number_value(-INFINITY);
  t = text_of(&v);
  CHECK_STR(t, "null");
  free(t);

  /* parsing: correctly rounded, exact integers, -0 kept */
  roundtrip("[0,-0,1,-1,0.1,1e21,1E21,1e+21,5e-324,1.7976931348623157e308]",
            "[0,0,1,-1,0.1,1e+21,1e+21,1e+21,5e-324,1.7976931348623157e+308]");
  roundtrip("[123456789012345678,1e-400,-1e-400,0.30000000000000004,2.5E-5,1e-7]",
            "[123456789012345680,0,0,0.30000000000000004,0.000025,1e-7]");
  roundtrip("[100000000000000000000000000000000000000000000000000000000000000000000000000.5]",
            "[1e+74]");
  roundtrip("-0.0", "0");
  lr_json z;
  char err[LR_ERR_MAX];
  CHECK(lr__json_parse("-0", 2, &z, err) == 0 && z.type == LR_JNUMBER && z.u.num == 0 && signbit(z.u.num));
  CHECK(lr__json_parse("9007199254740993", 16, &z, err) == 0 && z.u.num == 9007199254740992.0);
  CHECK(lr__json_parse("2.2250738585072011e-308", 23, &z, err) == 0 && z.u.num == 2.225073858507201e-308);
  CHECK(lr__json_parse("999999999999999", 15, &z, err) == 0 && z.u.num == 999999999999999.0);
  CHECK(lr__json_parse("-999999999999999", 16, &z, err) == 0 && z.u.num == -999999999999999.0);
  refuse_what("1e400", 0, "out of range");
  refuse_what("[-1e400]", 1, "out of range");
  refuse_what("[1,17976931348623159e292]", 3, "out of range");
  refuse("01", 1);
  refuse("-01", 2);
  refuse_what("1.", 2, "bad number");
  refuse(".1", 0);
  refuse("+1", 0);
  refuse("-", 1);
  refuse("-a", 1);
  refuse("1e", 2);
  refuse("1e+", 3);
  refuse("1.e5", 2);
  refuse("0x10", 1);
  refuse("NaN", 0);
  refuse("Infinity", 0);
  refuse("-Infinity", 1);
}

static void test_literals_and_structure(void) {
  roundtrip("null", NULL);
  roundtrip("true", NULL);
  roundtrip("false", NULL);
  roundtrip(" \t\r\n[ 1 , {\"a\" : [ ] , \"b\":{ }} ,\"x\" ] \n", "[1,{\"a\":[],\"b\":{}},\"x\"]");
  roundtrip("[[],{},[[]],[{}],{\"\":{}}]", NULL);
  roundtrip("{\"a\":null,\"b\":true,\"c\":false,\"d\":[1,2,3],\"e\":{\"f\":\"g\"}}", NULL);
  roundtrip("\"\"", NULL);
  roundtrip("{}", NULL);
  roundtrip("[]", NULL);

  refuse("", 0);
  refuse("   ", 3);
  refuse("nul", 3);
  refuse("nulL", 3);
  refuse("tru", 3);
  refuse("trUe", 2);
  refuse("fals", 4);
  refuse("[1,]", 3);
  refuse("[,1]", 1);
  refuse_what("[1 2]", 3, "expected ',' or ']'");
  refuse_what("[1", 2, "end of input");
  refuse("[", 1);
  refuse("]", 0);
  refuse("{", 1);
  refuse_what("{\"a\"}", 4, "expected ':'");
  refuse("{\"a\":}", 5);
  refuse("{\"a\":1,}", 7);
  refuse("{\"a\":1", 6);
  refuse_what("{a:1}", 1, "unexpected 'a'");
  refuse("{'a':1}", 1);
  refuse("{\"a\":1]", 6);
  refuse("[1}", 2);
  refuse_what("1 2", 2, "trailing");
  refuse("[] []", 3);
  refuse("{}x", 2);
  refuse("\"a\"\"", 3);
  refuse("/* c */ 1", 0);
  refuse("[1]\x0b", 3);    /* vertical tab is not JSON whitespace */
  refuse_what("\xc2\xa0" "1", 0, "unexpected byte 0xc2"); /* nor is NBSP */
  refuse_n("[1]\0", 4, 3); /* a NUL after the value */
  refuse_n("\0", 1, 0);

  /* duplicate keys: the last value at the first key's place, as JSON.parse */
  roundtrip("{\"a\":1,\"b\":2,\"a\":3}", "{\"a\":3,\"b\":2}");
  roundtrip("{\"x\":{\"k\":1},\"y\":0,\"x\":[1,2],\"z\":5,\"x\":null}", "{\"x\":null,\"y\":0,\"z\":5}");
  roundtrip("{\"a\":1,\"a\":2,\"b\":3,\"c\":4,\"d\":5,\"e\":6,\"f\":7,\"g\":8,\"h\":9,\"b\":10}",
            "{\"a\":2,\"b\":10,\"c\":4,\"d\":5,\"e\":6,\"f\":7,\"g\":8,\"h\":9}");
  roundtrip("{\"a\":1,\"a\":2}", "{\"a\":2}");
  roundtrip("{\"\":1,\"\\u0000\":2,\"\":3}", "{\"\":3,\"\\u0000\":2}");
  /* many members, all different or repeated: the hash path */
  {
    lr_buf in = {0}, want = {0};
    lr__buf_append_char(&in, '{');
    lr__buf_append_char(&want, '{');
    for (int i = 0; i < 1000; i++) {
      char m[64];
      snprintf(m, sizeof m, "%s\"k%d\":%d", i ? "," : "", i, i);
      lr__buf_append_str(&in, m);
      snprintf(m, sizeof m, "%s\"k%d\":%d", i ? "," : "", i, i + (i % 3 == 0 ? 5000 : 0));
      lr__buf_append_str(&want, m);
    }
    for (int i = 0; i < 1000; i += 3) {
      char m[64];
      snprintf(m, sizeof m, ",\"k%d\":%d", i, i + 5000);
      lr__buf_append_str(&in, m);
    }
    lr__buf_append_char(&in, '}');
    lr__buf_append_char(&want, '}');
    roundtrip(in.data, want.data);
    lr__buf_free(&in);
    lr__buf_free(&want);
  }
}

static void test_strings(void) {
  /* the writer's escapes are JSON.stringify's */
  roundtrip("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\\"\\\\/\\b\\f\\n\\r\\t\"");
  roundtrip("\"\\u0000\\u0001\\u001f\\u001F\\u000b\\u0020\\u007f\"", "\"\\u0000\\u0001\\u001f\\u001f\\u000b \x7f\"");
  roundtrip("\"\\u00e9\\u20AC\\u2028\\u2029\\uFEFF\"", "\"\xc3\xa9\xe2\x82\xac\xe2\x80\xa8\xe2\x80\xa9\xef\xbb\xbf\"");
  roundtrip("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xef\xbf\xbf\"", NULL);
  /* surrogate pairs combine; lone ones stay lone, written lowercase */
  roundtrip("\"\\uD83D\\uDE00\"", "\"\xf0\x9f\x98\x80\"");
  roundtrip("\"\\ud800\"", "\"\\ud800\"");
  roundtrip("\"\\uDFFF\"", "\"\\udfff\"");
  roundtrip("\"\\udc00\\ud800\"", "\"\\udc00\\ud800\"");
  roundtrip("\"\\ud800\\ud800\\udc00\"", "\"\\ud800\xf0\x90\x80\x80\"");
  roundtrip("\"\\ud800x\\udc00\"", "\"\\ud800x\\udc00\"");
  roundtrip("\"\\ud800\\n\"", "\"\\ud800\\n\"");
  roundtrip("\"\\ud800\\u0041\"", "\"\\ud800A\"");
  roundtrip("\"a\\ud800\"", "\"a\\ud800\"");
  {
    lr_json v;
    char err[LR_ERR_MAX];
    const char *in = "[\"\\ud800\",\"a\\u0000b\",\"\\udbff\\udfff\"]";
    CHECK(lr__json_parse(in, strlen(in), &v, err) == 0);
    CHECK(v.len == 3);
    CHECK(v.u.items[0].len == 3 && memcmp(v.u.items[0].u.str, "\xed\xa0\x80", 4) == 0);
    CHECK(v.u.items[1].len == 3 && memcmp(v.u.items[1].u.str, "a\0b", 4) == 0);
    CHECK(v.u.items[2].len == 4 && memcmp(v.u.items[2].u.str, "\xf4\x8f\xbf\xbf", 5) == 0);
    CHECK(lr__utf8_valid(v.u.items[0].u.str, v.u.items[0].len, true));
    lr__json_free(&v);
    CHECK(v.type == LR_JNULL);
  }
  /* a string with a NUL and a lone surrogate written from a C value */
  {
    lr_json s = lr__json_string("x\0\xed\xbf\xbfy\xed", 7);
    char *t = text_of(&s);
    CHECK_STR(t, "\"x\\u0000\\udfffy\xed\"");
    free(t);
    lr__json_free(&s);
    lr_buf b = {0};
    lr__json_write_string("\x1f\x7f\xe2\x80\xa8", 5, &b);
    CHECK_STR(b.data, "\"\\u001f\x7f\xe2\x80\xa8\"");
    lr__buf_free(&b);
    lr__json_write_string("", 0, &b);
    CHECK_STR(b.data, "\"\"");
    lr__buf_free(&b);
  }

  refuse_what("\"abc", 4, "unterminated string");
  refuse("\"abc\\", 5);
  refuse_what("\"\\x\"", 1, "bad escape");
  refuse("\"\\'\"", 1);
  refuse("\"\\u12\"", 1);
  refuse_what("\"\\u12G4\"", 1, "bad \\u escape");
  refuse("\"ab\\U0041\"", 3);
  refuse_what("\"a\tb\"", 2, "control character 0x09");
  refuse("\"a\nb\"", 2);
  refuse_n("\"a\0b\"", 5, 2);
  refuse("\"\x1f\"", 1);
  /* invalid UTF-8, with the offset of the bad sequence */
  refuse_what("\"ab\x80\"", 3, "invalid UTF-8");
  refuse("\"\xc0\xaf\"", 1);           /* overlong */
  refuse("\"\xc1\xbf\"", 1);
  refuse("\"\xe0\x80\xaf\"", 1);       /* overlong */
  refuse_what("\"\xed\xa0\x80\"", 1, "invalid UTF-8");       /* raw surrogate: not UTF-8 */
  refuse("\"\xed\xbf\xbf\"", 1);
  refuse("\"\xf0\x80\x80\xaf\"", 1);   /* overlong */
  refuse("\"\xf4\x90\x80\x80\"", 1);   /* above U+10FFFF */
  refuse("\"\xf5\x80\x80\x80\"", 1);
  refuse("\"\xff\"", 1);
  refuse("\"x\xe2\x82\"", 2);          /* truncated by the quote */
  refuse_n("\"x\xe2\x82", 4, 2);       /* truncated by the end */
  refuse("\"\xc3\"", 1);
  refuse("\xef\xbb\xbf" "1", 0);       /* no byte order mark */
}

static void test_size_matches_write(void) {
  const char *texts[] = {
      "null", "true", "false", "0", "-0", "1.5", "-1e-7", "1e21", "123456789012345680000",
      "\"\"", "\"\\u0000\\u001f\\b\\f\\n\\r\\t\\\"\\\\/\"", "\"\\ud800\\udfff\\udc00\"",
      "\"\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"", "[]", "{}", "[[],{}]",
      "{\"a\\n\":[1,2,{\"b\":[null,true,false,\"\\u2028\"]}],\"c\":0.1}",
      "[5e-324,1.7976931348623157e308,0.000001,1e-7,-0.0]",
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    lr_json v;
    char err[LR_ERR_MAX];
    CHECK(lr__json_parse(texts[i], strlen(texts[i]), &v, err) == 0);
    char *t = text_of(&v); /* checks size == write */
    free(t);
    lr__json_free(&v);
  }
  /* values built in C, including ones no parser makes */
  lr_json a = lr__json_array(6);
  a.u.items[0] = lr__json_number_value(NAN);
  a.u.items[1] = lr__json_number_value(INFINITY);
  a.u.items[2] = lr__json_string("\xed\xa0\x80\xed", 4);
  a.u.items[3] = lr__json_object(1);
  a.u.items[3].u.items[0] = lr__json_string("k\x01", 2);
  a.u.items[3].u.items[1] = lr__json_bool(false);
  a.u.items[4] = lr__json_array(0);
  a.u.items[5] = lr__json_object(0);
  char *t = text_of(&a);
  CHECK_STR(t, "[null,null,\"\\ud800\xed\",{\"k\\u0001\":false},[],{}]");
  free(t);
  /* write appends */
  lr_buf b = {0};
  lr__buf_append_str(&b, "x=");
  lr__json_write(&a, &b);
  CHECK(b.len == 2 + lr__json_size(&a));
  CHECK(strncmp(b.data, "x=[null", 7) == 0);
  lr__buf_free(&b);
  lr__json_free(&a);
  CHECK(a.type == LR_JNULL);
  lr__json_free(&a); /* freeing null is fine */
  /* every byte value in a string */
  char all[256];
  for (int i = 0; i < 256; i++) all[i] = (char)i;
  lr_json s = lr__json_string(all, 256);
  t = text_of(&s);
  CHECK(strncmp(t, "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e", 70) == 0);
  free(t);
  lr__json_free(&s);
}

static void test_constructors_get_copy(void) {
  lr_json o = lr__json_object(3);
  CHECK(o.type == LR_JOBJECT && o.len == 3);
  CHECK(o.u.items[0].type == LR_JNULL && o.u.items[5].type == LR_JNULL);
  o.u.items[0] = lr__json_string("type", 4);
  o.u.items[1] = lr__json_string("log", 3);
  o.u.items[2] = lr__json_string("id", 2);
  o.u.items[3] = lr__json_number_value(7);
  o.u.items[4] = lr__json_string("list", 4);
  o.u.items[5] = lr__json_array(2);
  o.u.items[5].u.items[0] = lr__json_bool(true);
  o.u.items[5].u.items[1] = lr__json_null();
  lr_json *g = lr__json_get(&o, "id");
  CHECK(g && g->type == LR_JNUMBER && g->u.num == 7);
  CHECK(lr__json_get(&o, "i") == NULL);
  CHECK(lr__json_get(&o, "idx") == NULL);
  CHECK(lr__json_get(&o.u.items[5], "id") == NULL);
  CHECK(lr__json_get(NULL, "id") == NULL);
  lr_json c = lr__json_copy(&o);
  CHECK(c.u.items != o.u.items);
  CHECK(c.u.items[1].u.str != o.u.items[1].u.str);
  char *t1 = text_of(&o), *t2 = text_of(&c);
  CHECK_STR(t1, "{\"type\":\"log\",\"id\":7,\"list\":[true,null]}");
  CHECK_STR(t2, t1);
  free(t1);
  free(t2);
  lr__json_free(&o);
  t2 = text_of(&c); /* the copy outlives the original */
  CHECK_STR(t2, "{\"type\":\"log\",\"id\":7,\"list\":[true,null]}");
  free(t2);
  lr__json_free(&c);
  lr_json s = lr__json_string("a\0b", 3);
  CHECK(s.len == 3 && s.u.str[3] == '\0' && s.u.str[1] == '\0');
  lr_json sc = lr__json_copy(&s);
  CHECK(sc.len == 3 && memcmp(sc.u.str, "a\0b", 4) == 0);
  lr__json_free(&s);
  lr__json_free(&sc);
  lr_json e = lr__json_array(0), ec = lr__json_copy(&e);
  CHECK(ec.type == LR_JARRAY && ec.len == 0);
  lr__json_free(&e);
  lr__json_free(&ec);
  lr_json n = lr__json_number_value(-2.5), nc = lr__json_copy(&n);
  CHECK(nc.type == LR_JNUMBER && nc.u.num == -2.5);
  CHECK(lr__json_bool(false).type == LR_JFALSE && lr__json_bool(true).type == LR_JTRUE);
  CHECK(lr__json_null().type == LR_JNULL);
}

/* [[[...]]] or {"a":{"a":...}} nested depth deep: parse, write, size, copy,
 * free, all without recursion. */
static void test_depth(size_t depth, bool objects) {
  lr_buf in = {0};
  for (size_t i = 0; i < depth; i++) lr__buf_append_str(&in, objects ? "{\"a\":" : "[");
  lr__buf_append_str(&in, "0");
  for (size_t i = 0; i < depth; i++) lr__buf_append_char(&in, objects ? '}' : ']');
  lr_json v;
  char err[LR_ERR_MAX];
  CHECK(lr__json_parse(in.data, in.len, &v, err) == 0);
  lr_json c = lr__json_copy(&v);
  lr__json_free(&v);
  lr_buf out = {0};
  lr__json_write(&c, &out);
  CHECK(out.len == in.len && memcmp(out.data, in.data, in.len) == 0);
  CHECK(lr__json_size(&c) == in.len);
  lr__json_free(&c);
  /* the same, unterminated: refused, and the partial tree is released */
  CHECK(lr__json_parse(in.data, in.len - 1, &v, err) == -1);
  CHECK(strstr(err, "end of input") != NULL);
  lr__buf_free(&in);
  lr__buf_free(&out);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A 64 MiB string: linear-time parse and write. The time is printed, not
 * checked, since sanitizers and valgrind slow it down many times over. */
static void test_big_string(void) {
  size_t n = (size_t)64 << 20;
  char *t = lr__xmalloc(n + 2);
  t[0] = '"';
  for (size_t i = 1; i <= n; i++) t[i] = (char)('a' + i % 26);
  memcpy(t + n - 11, "\\n\xe2\x82\xac\\u00e9", 11); /* escapes at the end */
  t[n + 1] = '"';
  lr_json v;
  char err[LR_ERR_MAX];
  double a = now();
  int rc = lr__json_parse(t, n + 2, &v, err);
  double b = now();
  CHECK(rc == 0);
  CHECK(v.len == n - 11 + 1 + 3 + 2);
  lr_buf out = {0};
  lr__json_write(&v, &out);
  double c = now();
  CHECK(lr__json_size(&v) == out.len);
  CHECK(out.len == n - 11 + 2 + 2 + 3 + 2);
  CHECK(memcmp(out.data, t, n - 11) == 0);
  fprintf(stderr, "64 MiB string: parse %.3f s, write %.3f s\n", b - a, c - b);
  lr__json_free(&v);
  lr__buf_free(&out);
  /* a bad byte at the very end is found, with its offset */
  t[n / 2] = (char)0xff;
  refuse_n(t, n + 2, n / 2);
  free(t);
}

/* A host may set a locale with a decimal comma; numbers must not care. Runs
 * only where such a locale is installed (LOCPATH can point at one). */
static void test_locale(void) {
  const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
  const char *got = NULL;
  for (size_t i = 0; i < 4 && !got; i++) got = setlocale(LC_NUMERIC, names[i]);
  if (!got) {
    fprintf(stderr, "no decimal-comma locale installed: locale test skipped\n");
    return;
  }
  roundtrip("[1.5,0.1,1e-7,123.456,5e-324,1.7976931348623157e308,2.5e21,-0.000001]",
            "[1.5,0.1,1e-7,123.456,5e-324,1.7976931348623157e+308,2.5e+21,-0.000001]");
  check_number(0x1p-1017, "7.120236347223045e-307");
  setlocale(LC_NUMERIC, "C");
}

int main(void) {
  test_numbers();
  test_locale();
  test_literals_and_structure();
  test_strings();
  test_size_matches_write();
  test_constructors_get_copy();
  test_depth(5000, false);
  test_depth(5000, true);
  test_depth(100000, false);
  test_depth(100000, true);
  test_big_string();
  return CHECK_DONE();
}
