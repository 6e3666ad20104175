/* Fuzz target: the output ledger of SPEC §5 (core/ledger.c), where a
 * result over the cap is cut: whole log entries that fit, then a
 * code-point-aligned prefix of the first that does not, then the message,
 * itself cut when the cap is smaller than it.
 *
 * The input gives the cap, the message and the log entries (arbitrary
 * bytes made WTF-8 the way the host makes them: pipes through
 * lr__utf8_stream_feed). What is kept must cost at most the cap, end on code
 * point boundaries, and be as much as fits: one more code point (or entry)
 * would not. */
#include "ledger.h"
#include "fuzz_input.h"

/* Text the host could hold: the pipe decoder turns any bytes into UTF-8. */
static char *lr_fuzz_text(lr_fuzz_in *in, size_t max, size_t *len) {
  size_t n;
  const uint8_t *p = lr_fuzz_bytes(in, max, &n);
  lr_utf8_stream st = {0};
  lr_buf b = {0};
  lr__utf8_stream_feed(&st, (const char *)p, n, true, &b);
  *len = b.len;
  return b.data ? b.data : lr__xmemdup("", 0);
}

/* Length of the code point starting at s[0] (s valid UTF-8, n > 0). */
static size_t lr_fuzz_cp_len(const char *s, size_t n) {
  size_t k = 1;
  while (k < n && ((unsigned char)s[k] & 0xC0) == 0x80) k++;
  return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lr_fuzz_in in = {data, size};
  uint8_t how = lr_fuzz_u8(&in);
  /* Caps near the sizes involved, or anywhere (maxOutputBytes >= 4). */
  uint64_t cap = how & 1 ? 4u + lr_fuzz_u8(&in) : 4u + (lr_fuzz_u64(&in) >> (how >> 1 & 63));
  if (cap < 4) cap = 4;
  size_t msg_len;
  char *msg = lr_fuzz_text(&in, 60, &msg_len);
  size_t n = lr_fuzz_u8(&in) % 12;
  char *texts[12];
  size_t lens[12];
  for (size_t i = 0; i < n; i++) texts[i] = lr_fuzz_text(&in, 80, &lens[i]);

  size_t keep, partial, kept_msg;
  lr__ledger_cut(cap, (const char *const *)texts, lens, n, msg, msg_len, &keep, &partial, &kept_msg);
  LR_FUZZ_ASSERT(keep <= n && kept_msg <= msg_len, "keep %zu of %zu, message %zu of %zu", keep, n, kept_msg, msg_len);
  LR_FUZZ_ASSERT(partial == 0 || (keep < n && partial < lens[keep]), "partial %zu", partial);
  LR_FUZZ_ASSERT(lr__utf8_valid(msg, kept_msg, false), "the message is cut inside a code point");
  if (partial) LR_FUZZ_ASSERT(lr__utf8_valid(texts[keep], partial, false), "an entry is cut inside a code point");

  /* What is kept costs at most the cap. */
  lr_ledger l;
  lr__ledger_init(&l, cap);
  for (size_t i = 0; i < keep; i++) lr__ledger_add_log(&l, texts[i], lens[i]);
  if (partial) lr__ledger_add_log(&l, texts[keep], partial);
  uint64_t msg_cost = lr__ledger_string_cost(msg, kept_msg);
  LR_FUZZ_ASSERT(lr__ledger_fits(&l, msg_cost), "cap %llu: logs %llu + message %llu", (unsigned long long)cap,
                 (unsigned long long)l.logs_cost, (unsigned long long)msg_cost);

  /* And it is as much as fits. */
  uint64_t full_msg = lr__ledger_string_cost(msg, msg_len);
  if (kept_msg < msg_len) {
    LR_FUZZ_ASSERT(keep == 0 && partial == 0, "logs kept beside a cut message");
    size_t more = kept_msg + lr_fuzz_cp_len(msg + kept_msg, msg_len - kept_msg);
    LR_FUZZ_ASSERT(2 + lr__ledger_string_cost(msg, more) > cap, "the message could keep one more code point");
  } else if (keep < n) {
    LR_FUZZ_ASSERT(2 + full_msg <= cap, "the whole message kept where it does not fit");
    lr_ledger m = l;
    if (!partial) { /* the entry as one code point (or empty) does not fit */
      size_t one = lens[keep] ? lr_fuzz_cp_len(texts[keep], lens[keep]) : 0;
      lr__ledger_add_log(&m, texts[keep], one);
    } else {
      m = (lr_ledger){0};
      lr__ledger_init(&m, cap);
      for (size_t i = 0; i < keep; i++) lr__ledger_add_log(&m, texts[i], lens[i]);
      size_t more = partial + lr_fuzz_cp_len(texts[keep] + partial, lens[keep] - partial);
      lr__ledger_add_log(&m, texts[keep], more);
    }
    LR_FUZZ_ASSERT(!lr__ledger_fits(&m, full_msg), "entry %zu could keep one more code point", keep);
  }
  for (size_t i = 0; i < n; i++) free(texts[i]);
  free(msg);
  return 0;
}
