/* The output ledger of SPEC §5: what the logs plus the value (or failure
 * message) cost as JSON, and how a result is cut to fit the cap. */
#ifndef LR_LEDGER_H
#define LR_LEDGER_H

#include "json.h"

/* Cost of s[0..len) (UTF-8/WTF-8) as a JSON string: quotes plus, per code
 * point, `"` and `\` 2; \b \t \n \f \r 2; other controls below 0x20 6; a
 * lone surrogate 6; anything else its UTF-8 length. */
uint64_t lr__ledger_string_cost(const char *s, size_t len);

/* Cost of a value as compact JSON (equal to lr__json_size). */
uint64_t lr__ledger_value_cost(const lr_json *v);

/* Running cost of the logs array of one run. */
typedef struct lr_ledger {
  uint64_t cap;       /* maxOutputBytes */
  uint64_t logs_cost; /* JSON size of the logs array so far: 2 when empty */
  size_t nlogs;
  uint64_t sure_cost; /* logs up to this cost are kept by every result */
} lr_ledger;

void lr__ledger_init(lr_ledger *l, uint64_t cap);

/* Adds one log entry. Returns true while logs alone are within the cap,
 * false once they exceed it (the entry is counted either way). */
bool lr__ledger_add_log(lr_ledger *l, const char *text, size_t len);

/* True while every entry added so far is in the result whatever the run's
 * outcome: the logs fit with room left for the output-limit message, so
 * even a cut result keeps them whole. What is shown live (lr_log_fn) is
 * what this admits; the result may keep more. */
bool lr__ledger_sure(const lr_ledger *l);

/* True when logs plus a final part costing `final_cost` fit the cap. */
bool lr__ledger_fits(const lr_ledger *l, uint64_t final_cost);

/* The message of an output-limit failure: "outer output exceeded N bytes". */
void lr__ledger_limit_message(uint64_t cap, lr_buf *out);

/* Cuts a failing result to fit the cap, as SPEC §5 says. Given the logs
 * (texts[i], lens[i], i < n) and the full message, computes:
 *   *keep     how many whole log entries are kept,
 *   *partial  the byte length of a code-point-aligned prefix of entry *keep
 *             that is kept too (0 = none; only when *keep < n),
 *   *msg_len  the byte length of the message prefix kept (the whole message
 *             when it fits; when the cap is smaller than `[]` plus the whole
 *             message, no logs are kept and the message is cut to fit).
 * The kept logs as a JSON array plus the kept message as a JSON string cost
 * at most cap. An entry is kept partially only with at least one code point. */
void lr__ledger_cut(uint64_t cap, const char *const *texts, const size_t *lens,
                    size_t n, const char *msg, size_t msg_len_full,
                    size_t *keep, size_t *partial, size_t *msg_len);

#endif
