/* Tests of the output ledger (SPEC §5): string costs, the running ledger,
 * the limit message and the cut of an over-cap result. */
#include "ledger.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

#define COST(lit) lr__ledger_string_cost(lit, sizeof(lit) - 1)

static void test_string_costs(void) {
  CHECK(COST("") == 2);
  CHECK(COST("abc") == 5);
  CHECK(COST("\"") == 4);
  CHECK(COST("\\") == 4);
  CHECK(COST("\n") == 4);
  CHECK(COST("\b\t\f\r") == 10);
  CHECK(COST("\x01") == 8);
  CHECK(COST("\x1f") == 8);
  CHECK(COST("\x0b") == 8); /* \v has no short escape in JSON */
  CHECK(lr__ledger_string_cost("\0", 1) == 8);
  CHECK(COST("\x7f") == 3); /* DEL is not escaped */
  CHECK(COST("/") == 3);    /* nor is the slash */
  CHECK(COST("\xc3\xa9") == 4);         /* é */
  CHECK(COST("\xe2\x82\xac") == 5);     /* € */
  CHECK(COST("\xe2\x80\xa8") == 5);     /* U+2028 is not escaped either */
  CHECK(COST("\xf0\x9f\x98\x80") == 6); /* astral: 4 */
  CHECK(COST("\xed\xa0\x80") == 8);     /* lone high surrogate */
  CHECK(COST("\xed\xbf\xbf") == 8);     /* lone low surrogate */
  CHECK(COST("\xed\x9f\xbf") == 5);     /* U+D7FF is an ordinary character */
  CHECK(COST("a\"b\\c\nd\x02\xed\xb0\x80\xe2\x82\xac") == 2 + 1 + 2 + 1 + 2 + 1 + 2 + 1 + 6 + 6 + 3);
  /* Malformed input never reads past the end and counts bytes as themselves. */
  CHECK(COST("\xe2\x82") == 4);
  CHECK(COST("\xed") == 3);
  CHECK(COST("\x80\x80") == 4);
}

static void test_running_ledger(void) {
  lr_ledger l;
  /* Worked figure: cap 11, logs ["abc"], value "xy". */
  lr__ledger_init(&l, 11);
  CHECK(l.logs_cost == 2 && l.nlogs == 0);
  CHECK(lr__ledger_add_log(&l, "abc", 3));
  CHECK(l.logs_cost == 7);
  CHECK(lr__ledger_fits(&l, COST("xy")));
  lr__ledger_init(&l, 10);
  CHECK(lr__ledger_add_log(&l, "abc", 3));
  CHECK(!lr__ledger_fits(&l, COST("xy")));

  /* "€" costs 5: with empty logs it fits 7, not 6. */
  CHECK(COST("\xe2\x82\xac") == 5);
  lr__ledger_init(&l, 7);
  CHECK(lr__ledger_fits(&l, 5));
  lr__ledger_init(&l, 6);
  CHECK(!lr__ledger_fits(&l, 5));

  /* Commas between entries, none before the first. */
  lr__ledger_init(&l, 100);
  CHECK(lr__ledger_add_log(&l, "a", 1));
  CHECK(lr__ledger_add_log(&l, "b", 1));
  CHECK(lr__ledger_add_log(&l, "", 0));
  CHECK(l.logs_cost == 2 + 3 + 1 + 3 + 1 + 2 && l.nlogs == 3);

  /* Over the cap: false, and the entry is counted anyway. */
  lr__ledger_init(&l, 8);
  CHECK(lr__ledger_add_log(&l, "abcd", 4)); /* 8 */
  CHECK(!lr__ledger_add_log(&l, "e", 1));   /* 12 */
  CHECK(l.logs_cost == 12 && l.nlogs == 2);
  CHECK(!lr__ledger_fits(&l, 0));

  /* No value at all costs 0. */
  lr__ledger_init(&l, 4);
  CHECK(lr__ledger_fits(&l, 0));
  CHECK(lr__ledger_fits(&l, 2));
  CHECK(!lr__ledger_fits(&l, 3));
  /* Huge final costs never wrap. */
  CHECK(!lr__ledger_fits(&l, UINT64_MAX));
  lr__ledger_init(&l, UINT64_MAX);
  CHECK(lr__ledger_fits(&l, UINT64_MAX - 2));
  CHECK(!lr__ledger_fits(&l, UINT64_MAX - 1));

  /* The default cap: "x".repeat(67108860) fits, 67108861 does not. */
  size_t big = 67108861;
  char *x = malloc(big);
  memset(x, 'x', big);
  lr__ledger_init(&l, 67108864);
  CHECK(lr__ledger_string_cost(x, big - 1) == 67108862);
  CHECK(lr__ledger_fits(&l, lr__ledger_string_cost(x, big - 1)));
  CHECK(!lr__ledger_fits(&l, lr__ledger_string_cost(x, big)));
  /* The same as a log entry plus a value of nothing. */
  CHECK(lr__ledger_add_log(&l, x, big - 3));
  CHECK(l.logs_cost == 67108862 && lr__ledger_fits(&l, 2) && !lr__ledger_fits(&l, 3));
  free(x);
}

static void test_limit_message(void) {
  lr_buf b = {0};
  lr__ledger_limit_message(10, &b);
  CHECK_STR(b.data, "outer output exceeded 10 bytes");
  b.len = 0;
  lr__ledger_limit_message(67108864, &b);
  CHECK_STR(b.data, "outer output exceeded 67108864 bytes");
  b.len = 0;
  lr__ledger_limit_message(9007199254740991ULL, &b);
  CHECK_STR(b.data, "outer output exceeded 9007199254740991 bytes");
  lr__buf_free(&b);
}

/* Cost of what a cut keeps: the logs array plus the message string. */
static uint64_t kept_cost(const char *const *texts, const size_t *lens, size_t keep,
                          size_t partial, const char *msg, size_t msg_len) {
  uint64_t c = 2;
  for (size_t i = 0; i < keep; i++) c += lr__ledger_string_cost(texts[i], lens[i]) + (i ? 1 : 0);
  if (partial) c += lr__ledger_string_cost(texts[keep], partial) + (keep ? 1 : 0);
  return c + lr__ledger_string_cost(msg, msg_len);
}

typedef struct cut {
  size_t keep, partial, msg_len;
} cut;

static cut do_cut(uint64_t cap, const char *const *texts, size_t n, const char *msg) {
  size_t lens[16];
  for (size_t i = 0; i < n; i++) lens[i] = strlen(texts[i]);
  cut c;
  lr__ledger_cut(cap, texts, lens, n, msg, strlen(msg), &c.keep, &c.partial, &c.msg_len);
  /* Below 4 even `[]` + `""` is over: such a cap is refused as config. */
  CHECK(cap < 4 || kept_cost(texts, lens, c.keep, c.partial, msg, c.msg_len) <= cap);
  return c;
}

static void test_cut_worked(void) {
  lr_buf m = {0};
  /* cap 10, logs ["abc"]: the message itself is cut to "outer ". */
  lr__ledger_limit_message(10, &m);
  const char *abc[] = {"abc"};
  cut c = do_cut(10, abc, 1, m.data);
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 6);
  CHECK(memcmp(m.data, "outer ", 6) == 0);

  /* cap 4: `[]` + `""`; cap 5: `[]` + `"o"`. */
  m.len = 0;
  lr__ledger_limit_message(4, &m);
  c = do_cut(4, abc, 1, m.data);
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 0);
  m.len = 0;
  lr__ledger_limit_message(5, &m);
  c = do_cut(5, abc, 1, m.data);
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 1);
  /* Below 4 (not a valid config, still safe): nothing at all. */
  c = do_cut(3, abc, 1, "m");
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 0);
  c = do_cut(0, abc, 1, "m");
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 0);

  /* cap 100: the message (31 chars, 33) fits, leaving 67 for the logs. */
  m.len = 0;
  lr__ledger_limit_message(100, &m);
  CHECK(m.len == 31);
  char z[61];
  memset(z, 'z', 60);
  z[60] = '\0';
  const char *logs[] = {"hello", "world", z, "after"};
  c = do_cut(100, logs, 4, m.data);
  /* ["hello","world" is 17; ,"zzz…" keeps 67 - 17 - 3 = 47 z. */
  CHECK(c.keep == 2 && c.partial == 47 && c.msg_len == 31);
  /* Everything fits: all kept, the whole message too. */
  const char *few[] = {"a", "b"};
  c = do_cut(100, few, 2, m.data);
  CHECK(c.keep == 2 && c.partial == 0 && c.msg_len == 31);
  /* No logs at all. */
  c = do_cut(100, NULL, 0, m.data);
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 31);
  /* `[]` + the whole message is exactly the cap: the message stays whole. */
  m.len = 0;
  lr__ledger_limit_message(34, &m);
  CHECK(m.len == 30);
  c = do_cut(34, abc, 1, m.data);
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 30);
  c = do_cut(33, abc, 1, m.data);
  CHECK(c.keep == 0 && c.partial == 0 && c.msg_len == 29);
  lr__buf_free(&m);
}

static void test_cut_code_points(void) {
  /* logs ["€€€"], message "m" (3): the partial never splits a €. The room
   * left for characters is cap - 3 (message) - 2 (brackets) - 2 (quotes). */
  const char *eur[] = {"\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"};
  static const struct { uint64_t cap; size_t partial; } want[] = {
      {16, 0}, {15, 6}, {14, 6}, {13, 6}, {12, 3}, {11, 3}, {10, 3}, {9, 0}, {8, 0}, {7, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    cut c = do_cut(want[i].cap, eur, 1, "m");
    if (want[i].cap == 16) {
      CHECK(c.keep == 1 && c.partial == 0 && c.msg_len == 1);
    } else {
      CHECK(c.keep == 0 && c.partial == want[i].partial && c.msg_len == 1);
    }
  }
  /* Astral characters (4 bytes each). */
  const char *emo[] = {"\xf0\x9f\x98\x80\xf0\x9f\x98\x80"};
  CHECK(do_cut(2 + 3 + 2 + 7, emo, 1, "m").partial == 4);
  CHECK(do_cut(2 + 3 + 2 + 3, emo, 1, "m").partial == 0);

  /* Escapes cost their real size: "\n" 2, a control 6, a lone surrogate 6. */
  const char *nl[] = {"a\nb"};
  CHECK(do_cut(7 + 2, nl, 1, "m").partial == 1);
  CHECK(do_cut(7 + 3, nl, 1, "m").partial == 2);
  const char *ctl[] = {"a\x01" "b"};
  CHECK(do_cut(7 + 6, ctl, 1, "m").partial == 1);
  CHECK(do_cut(7 + 7, ctl, 1, "m").partial == 2);
  const char *sur[] = {"a\xed\xa0\x80" "b"};
  CHECK(do_cut(7 + 6, sur, 1, "m").partial == 1);
  CHECK(do_cut(7 + 7, sur, 1, "m").partial == 4);
  CHECK(do_cut(7 + 8, sur, 1, "m").keep == 1);
  const char *q[] = {"\"\"\""};
  CHECK(do_cut(7 + 3, q, 1, "m").partial == 1);
  CHECK(do_cut(7 + 1, q, 1, "m").partial == 0);

  /* The message cut obeys the same costs. */
  CHECK(do_cut(6, NULL, 0, "a\"b").msg_len == 1);
  CHECK(do_cut(7, NULL, 0, "a\"b").msg_len == 2);
  CHECK(do_cut(8, NULL, 0, "a\"b").msg_len == 3);
  CHECK(do_cut(7, NULL, 0, "x\xe2\x82\xacy").msg_len == 1);
  CHECK(do_cut(8, NULL, 0, "x\xe2\x82\xacy").msg_len == 4);
  CHECK(do_cut(8, NULL, 0, "\x01\x01").msg_len == 0);
  CHECK(do_cut(10, NULL, 0, "\x01\x01").msg_len == 1);
}

static void test_cut_commas(void) {
  /* ["ab"] is 6, message "m" 3. A partial "cd" would need a comma, quotes
   * and a character: with only the comma and quotes room it is omitted, and
   * nothing is charged for the comma. */
  const char *two[] = {"ab", "cd"};
  cut c = do_cut(12, two, 2, "m");
  CHECK(c.keep == 1 && c.partial == 0 && c.msg_len == 1);
  c = do_cut(13, two, 2, "m");
  CHECK(c.keep == 1 && c.partial == 1);
  c = do_cut(14, two, 2, "m");
  CHECK(c.keep == 2 && c.partial == 0);
  /* Whole entries stop at the first that does not fit, even if a later,
   * smaller one would. */
  const char *mix[] = {"a", "bbbbbbbbbb", "c"};
  c = do_cut(2 + 3 + 3 + 3, mix, 3, "m");
  CHECK(c.keep == 1 && c.partial == 0);
  c = do_cut(2 + 3 + 3 + 3 + 1, mix, 3, "m");
  CHECK(c.keep == 1 && c.partial == 1);
  /* Empty entries cost 2 and are kept whole. */
  const char *empty[] = {"", "", "xyz"};
  c = do_cut(2 + 2 + 3 + 1 + 3, empty, 3, "m");
  CHECK(c.keep == 2 && c.partial == 0);
}

/* Brute force reference for the cut, by growing the kept result one code
 * point at a time. */
static size_t cp_len(const char *s) {
  unsigned char c = (unsigned char)s[0];
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

static void test_cut_random(void) {
  static const char *pieces[] = {"a", "\"", "\\", "\n", "\x01", "\x7f", "\xc3\xa9",
                                 "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80",
                                 "\xed\xbf\xbf", " "};
  const size_t npieces = sizeof pieces / sizeof pieces[0];
  srand(12345);
  int mismatches = 0;
  for (int iter = 0; iter < 3000; iter++) {
    size_t n = (size_t)(rand() % 5);
    char store[5][64];
    const char *texts[5];
    size_t lens[5];
    for (size_t i = 0; i < n; i++) {
      store[i][0] = '\0';
      int k = rand() % 8;
      for (int j = 0; j < k; j++) strcat(store[i], pieces[rand() % npieces]);
      texts[i] = store[i];
      lens[i] = strlen(store[i]);
    }
    char msg[64] = "";
    int mk = rand() % 8;
    for (int j = 0; j < mk; j++) strcat(msg, pieces[rand() % npieces]);
    size_t ml = strlen(msg);
    uint64_t cap = (uint64_t)(rand() % 60);

    size_t keep, partial, msg_len;
    lr__ledger_cut(cap, texts, lens, n, msg, ml, &keep, &partial, &msg_len);

    /* Reference. */
    size_t rk = 0, rp = 0, rm = ml;
    uint64_t mc = lr__ledger_string_cost(msg, ml);
    if (2 + mc > cap) {
      rm = 0;
      while (rm < ml && 4 + lr__ledger_string_cost(msg, rm + cp_len(msg + rm)) - 2 <= cap)
        rm += cp_len(msg + rm);
      if (cap < 4) rm = 0;
    } else {
      uint64_t used = 2 + mc;
      while (rk < n && used + lr__ledger_string_cost(texts[rk], lens[rk]) + (rk ? 1 : 0) <= cap)
        used += lr__ledger_string_cost(texts[rk], lens[rk]) + (rk ? 1 : 0), rk++;
      if (rk < n) {
        while (rp < lens[rk] &&
               used + (rk ? 1 : 0) + lr__ledger_string_cost(texts[rk], rp + cp_len(texts[rk] + rp)) <= cap)
          rp += cp_len(texts[rk] + rp);
      }
    }
    if (keep != rk || partial != rp || msg_len != rm) mismatches++;
    if (cap >= 4 && kept_cost(texts, lens, keep, partial, msg, msg_len) > cap) mismatches++;
  }
  CHECK(mismatches == 0);
}

/* The value cost is the compact JSON size, and a string's cost is exactly
 * the length of what JSON.stringify (lr__json_write_string) prints. */
static void test_value_cost(void) {
  static const char *pieces[] = {"a", "\"", "\\", "\n", "\b", "\x01", "\x1f", "\x7f", "/",
                                 "\xc3\xa9", "\xe2\x82\xac", "\xe2\x80\xa8", "\xf0\x9f\x98\x80",
                                 "\xed\xa0\x80", "\xed\xbf\xbf", "\xed\x9f\xbf"};
  const size_t npieces = sizeof pieces / sizeof pieces[0];
  srand(777);
  int bad = 0;
  for (int iter = 0; iter < 2000; iter++) {
    char str[256] = "";
    int k = rand() % 20;
    for (int j = 0; j < k; j++) strcat(str, pieces[rand() % npieces]);
    size_t len = strlen(str);
    if (!lr__utf8_valid(str, len, true)) continue; /* a WTF-8 pair: not a JS string */
    lr_buf out = {0};
    lr__json_write_string(str, len, &out);
    lr_json v = lr__json_string(str, len);
    if (lr__ledger_string_cost(str, len) != out.len || lr__ledger_value_cost(&v) != out.len) bad++;
    lr__json_free(&v);
    lr__buf_free(&out);
  }
  CHECK(bad == 0);

  lr_json v;
  char err[LR_ERR_MAX];
  static const char text[] = "{\"a\":[1,true,false,null,\"\\u00e9\\n\"],\"b\":{}}";
  CHECK(lr__json_parse(text, sizeof text - 1, &v, err) == 0);
  static const char compact[] = "{\"a\":[1,true,false,null,\"\xc3\xa9\\n\"],\"b\":{}}";
  CHECK(lr__ledger_value_cost(&v) == sizeof compact - 1);
  CHECK(sizeof compact - 1 == 39);
  lr__json_free(&v);
  CHECK(lr__json_parse("1e21", 4, &v, err) == 0);
  CHECK(lr__ledger_value_cost(&v) == 5); /* 1e+21 */
  lr__json_free(&v);
  CHECK(lr__json_parse("0.1", 3, &v, err) == 0);
  CHECK(lr__ledger_value_cost(&v) == 3);
  lr__json_free(&v);

  /* The default cap with the value as a JSON value. */
  size_t big = 67108861;
  char *x = malloc(big);
  memset(x, 'x', big);
  lr_ledger l;
  lr__ledger_init(&l, 67108864);
  v = lr__json_string(x, big - 1);
  CHECK(lr__ledger_value_cost(&v) == 67108862 && lr__ledger_fits(&l, lr__ledger_value_cost(&v)));
  lr__json_free(&v);
  v = lr__json_string(x, big);
  CHECK(!lr__ledger_fits(&l, lr__ledger_value_cost(&v)));
  lr__json_free(&v);
  free(x);
}

int main(void) {
  test_value_cost();
  test_string_costs();
  test_running_ledger();
  test_limit_message();
  test_cut_worked();
  test_cut_code_points();
  test_cut_commas();
  test_cut_random();
  return CHECK_DONE();
}
