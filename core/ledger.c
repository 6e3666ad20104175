/* The output ledger of SPEC §5: JSON costs of logs and results, and the cut
 * of a result that goes over the cap. */
#include "ledger.h"

#include <inttypes.h>
#include <stdio.h>


/* One code point at s (n > 0 bytes left): sets *bytes to its length and
 * returns its cost. Input is UTF-8/WTF-8; a malformed byte counts as one
 * byte costing 1, so the walk always advances and never reads past n. */
static unsigned lr__cp_cost(const unsigned char *s, size_t n, size_t *bytes) {
  unsigned c = s[0];
  if (c < 0x80) {
    *bytes = 1;
    return lr__json_escape_len[c];
  }
  size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (k > n) k = n;
  for (size_t i = 1; i < k; i++)
    if ((s[i] & 0xC0) != 0x80) k = i; /* stops the loop too */
  *bytes = k;
  /* A lone surrogate (ED A0..BF xx) is written as \uDXXX. */
  if (k == 3 && c == 0xED && s[1] >= 0xA0) return 6;
  return (unsigned)k;
}

uint64_t lr__ledger_string_cost(const char *str, size_t len) { return lr__json_string_size(str, len); }

uint64_t lr__ledger_value_cost(const lr_json *v) { return lr__json_size(v); }

void lr__ledger_init(lr_ledger *l, uint64_t cap) {
  l->cap = cap;
  l->logs_cost = 2;
  l->nlogs = 0;
  /* lr__ledger_cut keeps whole the entries that fit beside the limit message. */
  lr_buf msg = {0};
  lr__ledger_limit_message(cap, &msg);
  uint64_t msg_cost = lr__ledger_string_cost(msg.data, msg.len);
  lr__buf_free(&msg);
  l->sure_cost = cap > msg_cost ? cap - msg_cost : 0;
}

bool lr__ledger_sure(const lr_ledger *l) { return l->logs_cost <= l->sure_cost; }

bool lr__ledger_add_log(lr_ledger *l, const char *text, size_t len) {
  l->logs_cost += lr__ledger_string_cost(text, len) + (l->nlogs ? 1 : 0);
  l->nlogs++;
  return l->logs_cost <= l->cap;
}

bool lr__ledger_fits(const lr_ledger *l, uint64_t final_cost) {
  /* Written so that neither sum can wrap. */
  return l->logs_cost <= l->cap && final_cost <= l->cap - l->logs_cost;
}

void lr__ledger_limit_message(uint64_t cap, lr_buf *out) {
  char tmp[64];
  int n = snprintf(tmp, sizeof tmp, "outer output exceeded %" PRIu64 " bytes", cap);
  lr__buf_append(out, tmp, (size_t)n);
}

/* Longest code-point-aligned prefix of s[0..len) whose characters cost at
 * most budget (quotes not included). */
static size_t lr__prefix_within(const char *str, size_t len, uint64_t budget) {
  const unsigned char *s = (const unsigned char *)str;
  uint64_t cost = 0;
  size_t i = 0;
  while (i < len) {
    size_t k;
    unsigned c = lr__cp_cost(s + i, len - i, &k);
    if (c > budget - cost) break;
    cost += c;
    i += k;
  }
  return i;
}

void lr__ledger_cut(uint64_t cap, const char *const *texts, const size_t *lens, size_t n,
                    const char *msg, size_t msg_len_full, size_t *keep, size_t *partial,
                    size_t *msg_len) {
  *keep = 0;
  *partial = 0;
  uint64_t msg_cost = lr__ledger_string_cost(msg, msg_len_full);

  /* Not even `[]` plus the whole message: no logs, and the message is cut
   * (its quotes cost 2, the empty array 2). */
  if (cap < 2 || msg_cost > cap - 2) {
    *msg_len = cap < 4 ? 0 : lr__prefix_within(msg, msg_len_full, cap - 4);
    return;
  }
  *msg_len = msg_len_full;

  uint64_t budget = cap - msg_cost; /* for the logs array, brackets included */
  uint64_t used = 2;
  size_t i = 0;
  for (; i < n; i++) {
    uint64_t c = lr__ledger_string_cost(texts[i], lens[i]) + (i ? 1 : 0);
    if (c > budget - used) break;
    used += c;
  }
  *keep = i;
  if (i == n) return;

  /* The first entry that does not fit: keep what of it fits after its comma
   * and quotes, only if that is at least one code point. */
  uint64_t overhead = 2 + (i ? 1 : 0);
  if (overhead > budget - used) return;
  *partial = lr__prefix_within(texts[i], lens[i], budget - used - overhead);
}
