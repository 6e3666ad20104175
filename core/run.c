/* One run's state machine: strip → start the sandbox → boot frame → frames
 * (logs, calls, the terminal frame) → settle → the sandbox is gone → the
 * result. The backend below only starts processes and moves bytes; the
 * ledger, the frames and the failure kinds are decided here. */
#define _GNU_SOURCE /* memmem */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "wire.h"

static const char *const lr__kind_names[] = {
#define LR_KIND_NAME(e, s) s,
    LR_KIND_MAP(LR_KIND_NAME)
#undef LR_KIND_NAME
};

#define LR_NKINDS (sizeof lr__kind_names / sizeof lr__kind_names[0])

const char *lr_isolation_name(int isolation) {
  return isolation == LR_ISOLATION_NONE ? "none" : isolation == LR_ISOLATION_E2B ? "e2b" : "bwrap";
}

const char *lr_kind_name(lr_kind kind) {
  return (unsigned)kind < LR_NKINDS ? lr__kind_names[kind] : "unknown";
}

static void lr__run_maybe_finish(lr_run *run);

static void lr__settlef(lr_run *run, lr_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void lr__settlef(lr_run *run, lr_kind kind, const char *fmt, ...) {
  char msg[LR_ERR_MAX + 512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg) n = (int)sizeof msg - 1;
  lr__run_settle(run, kind, msg, (size_t)n);
}

/* Sends a frame with the JSON text json; a frame over maxFrameBytes is not
 * sent and fails the run (SPEC §7). */
static void lr__run_send(lr_run *run, const char *json, size_t len) {
  if (run->state != LR_RUN_RUNNING) return;
  lr_buf frame = {0};
  char err[LR_ERR_MAX];
  if (lr__frame_encode_text(json, len, run->cfg.max_frame_bytes, &frame, err) != 0) {
    lr__settlef(run, LR_WORKER_EXIT, "a frame to the runner was refused: %s", err);
    return;
  }
  size_t n;
  char *data = lr__buf_steal(&frame, &n);
  lr__sandbox_write(run->sb, data, n);
}

/* The replies of one loop turn leave as one `replies` frame, queued just
 * before the sandbox's writes of the turn (on_flush); a lone reply leaves as
 * a `reply` frame. A batch that would pass maxFrameBytes leaves first. */
#define LR_REPLIES_HEAD "{\"type\":\"replies\",\"replies\":["

static void lr__run_flush_replies(lr_run *run) {
  if (!run->nreplies) return;
  const size_t head = sizeof LR_REPLIES_HEAD - 1;
  if (run->nreplies == 1) {
    lr__run_send(run, run->replies.data + head, run->replies.len - head);
  } else {
    lr__buf_append_str(&run->replies, "]}");
    lr__run_send(run, run->replies.data, run->replies.len);
  }
  run->replies.len = 0;
  run->nreplies = 0;
}

void lr__run_send_reply(lr_run *run, const lr_buf *json) {
  if (run->state != LR_RUN_RUNNING) return;
  const size_t head = sizeof LR_REPLIES_HEAD - 1;
  if (run->nreplies && run->replies.len + 1 + json->len + 2 > run->cfg.max_frame_bytes) lr__run_flush_replies(run);
  if (run->nreplies == 0) {
    lr__buf_append(&run->replies, LR_REPLIES_HEAD, head);
    lr__sandbox_kick(run->sb);
  } else {
    lr__buf_append_char(&run->replies, ',');
  }
  lr__buf_append(&run->replies, json->data, json->len);
  run->nreplies++;
}

static void lr__reply_error(lr_run *run, uint64_t id, const char *message) {
  lr_buf json = {0};
  char num[32];
  lr__json_number((double)id, num);
  lr__buf_append_str(&json, "{\"type\":\"reply\",\"id\":");
  lr__buf_append_str(&json, num);
  lr__buf_append_str(&json, ",\"ok\":false,\"message\":");
  lr__json_write_string(message, strlen(message), &json);
  lr__buf_append_char(&json, '}');
  lr__run_send_reply(run, &json);
  lr__buf_free(&json);
}

static void lr__run_add_log(lr_run *run, const char *text, size_t len) {
  run->stats.log_entries++;
  /* Past the cap only the entry that crossed it matters (its prefix may be
   * kept); later ones, drained after the end, are counted and dropped. */
  if (run->ledger_over) return;
  if (run->nlogs == run->logs_cap) {
    run->logs_cap = run->logs_cap ? run->logs_cap * 2 : 16;
    run->logs = lr__xrealloc(run->logs, run->logs_cap * sizeof *run->logs);
    run->log_lens = lr__xrealloc(run->log_lens, run->logs_cap * sizeof *run->log_lens);
  }
  run->logs[run->nlogs] = lr__xmemdup(text, len);
  run->log_lens[run->nlogs] = len;
  run->nlogs++;
  if (!lr__ledger_add_log(&run->ledger, text, len)) {
    run->ledger_over = true;
    lr__run_settle(run, LR_OUTPUT_LIMIT, NULL, 0);
  }
  /* Shown live only when every outcome keeps it: a stream never shows
   * more than the result (the result may keep entries shown to nobody). */
  if (run->on_log && lr__ledger_sure(&run->ledger)) run->on_log(run->ud, text, len);
}

/* Tells the namespace about a call it will never see (audit, metrics). */
static void lr__tell_refused(lr_run *run, const lr_namespace *ns, size_t member, uint64_t call_id,
                             const lr_json *args, const char *message) {
  if (!ns->refused || run->state != LR_RUN_RUNNING) return;
  lr_call_refusal r = {
      .run_id = run->id, .call_id = call_id, .member = member, .args = args, .message = message};
  ns->refused(ns->ud, &r);
}

static bool lr__safe_id(const lr_json *v) {
  return v && v->type == LR_JNUMBER && v->u.num >= 1 && v->u.num <= LR_MAX_SAFE_INTEGER &&
         (double)(uint64_t)v->u.num == v->u.num;
}

static void lr__on_call(lr_run *run, lr_json *id, lr_json *global, lr_json *name, lr_json *args) {
  if (run->state != LR_RUN_RUNNING) return;
  /* Malformed calls are dropped; ids only grow, so each gets one reply. */
  if (!lr__safe_id(id) || !global || global->type != LR_JSTRING || !name ||
      name->type != LR_JSTRING || !args || args->type != LR_JARRAY)
    return;
  uint64_t call_id = (uint64_t)id->u.num;
  if (call_id <= run->last_call_id) return;
  run->last_call_id = call_id;
  run->stats.binding_calls++;
  const lr_namespace *ns = lr__runtime_find_namespace(run->rt, global->u.str, global->len);
  if (ns && (ns->index >= run->nnamespaces || !run->visible[ns->index])) ns = NULL;
  size_t member = 0;
  bool found = false;
  for (; ns && member < ns->nmembers; member++) {
    if (ns->member_lens[member] == name->len && memcmp(ns->members[member], name->u.str, name->len) == 0) {
      found = true;
      break;
    }
  }
  if (!found) {
    lr_buf m = {0};
    lr__buf_append_str(&m, "unknown binding \"");
    lr__buf_append(&m, global->u.str, global->len);
    lr__buf_append_char(&m, '.');
    lr__buf_append(&m, name->u.str, name->len);
    lr__buf_append_char(&m, '"');
    lr__reply_error(run, call_id, m.data);
    lr__buf_free(&m);
    return;
  }
  lr_json value;
  char err[LR_ERR_MAX];
  if (lr__wire_decode(args, &value, err) != 0) {
    static const char lossy[] = "binding arguments must be lossless JSON";
    lr__reply_error(run, call_id, lossy);
    lr__tell_refused(run, ns, member, call_id, NULL, lossy);
    return;
  }
  uint64_t limit = ns->policies[member].max_calls;
  if (!run->call_counts[ns->index]) run->call_counts[ns->index] = lr__xcalloc(ns->nmembers, sizeof(uint64_t));
  if (limit && ++run->call_counts[ns->index][member] > limit) {
    char msg[256];
    snprintf(msg, sizeof msg, "binding \"%s.%.*s\" may be called at most %" PRIu64 " time%s per run",
             ns->global, (int)(name->len > 100 ? 100 : name->len), name->u.str, limit, limit == 1 ? "" : "s");
    lr__reply_error(run, call_id, msg);
    lr__tell_refused(run, ns, member, call_id, &value, msg);
    lr__json_free(&value);
    return;
  }
  lr__call_submit(run, ns, member, call_id, &value);
}

static void lr__on_done(lr_run *run, lr_json *msg) {
  lr_json *error = lr__json_get(msg, "error");
  if (error) {
    lr_json *kind = lr__json_get(error, "kind"), *message = lr__json_get(error, "message");
    if (!kind || kind->type != LR_JSTRING || !message || message->type != LR_JSTRING) {
      lr__run_settle(run, LR_WORKER_EXIT, "the runner sent a malformed done message", 41);
      return;
    }
    for (size_t k = 1; k < LR_NKINDS; k++) {
      if (strcmp(kind->u.str, lr__kind_names[k]) == 0) {
        lr__run_settle(run, (lr_kind)k, message->u.str, message->len);
        return;
      }
    }
    lr__settlef(run, LR_WORKER_EXIT, "the runner reported an unknown failure kind");
    return;
  }
  lr_json *tokens = lr__json_get(msg, "value");
  if (tokens) {
    char err[LR_ERR_MAX];
    lr_json value;
    if (lr__wire_decode(tokens, &value, err) != 0) {
      lr__settlef(run, LR_INVALID_OUTPUT, "the completion value is not lossless JSON: %s", err);
      return;
    }
    run->value = value;
    run->has_value = true;
  }
  lr__run_settle(run, LR_OK, NULL, 0);
}

static int lr__on_frame(void *ud, lr_json *msg) {
  lr_run *run = ud;
  lr_json *type = lr__json_get(msg, "type");
  const char *t = type && type->type == LR_JSTRING ? type->u.str : "";
  if (strcmp(t, "logs") == 0) {
    /* A batch: the ledger still counts entry by entry. */
    lr_json *texts = lr__json_get(msg, "texts");
    for (size_t i = 0; texts && texts->type == LR_JARRAY && i < texts->len; i++) {
      lr_json *text = &texts->u.items[i];
      if (text->type == LR_JSTRING && run->state == LR_RUN_RUNNING) lr__run_add_log(run, text->u.str, text->len);
    }
  } else if (strcmp(t, "calls") == 0) {
    lr_json *calls = lr__json_get(msg, "calls");
    for (size_t i = 0; calls && calls->type == LR_JARRAY && i < calls->len; i++) {
      lr_json *c = &calls->u.items[i];
      if (c->type == LR_JARRAY && c->len == 4)
        lr__on_call(run, &c->u.items[0], &c->u.items[1], &c->u.items[2], &c->u.items[3]);
    }
  } else if (strcmp(t, "log") == 0) {
    lr_json *text = lr__json_get(msg, "text");
    if (text && text->type == LR_JSTRING) lr__run_add_log(run, text->u.str, text->len);
  } else if (strcmp(t, "call") == 0) {
    lr__on_call(run, lr__json_get(msg, "id"), lr__json_get(msg, "global"), lr__json_get(msg, "name"),
                lr__json_get(msg, "args"));
  } else if (strcmp(t, "done") == 0) {
    run->terminal_seen = true;
    lr__on_done(run, msg);
  } else if (strcmp(t, "output-limit") == 0) {
    run->terminal_seen = true;
    lr__run_settle(run, LR_OUTPUT_LIMIT, NULL, 0);
  } else if (strcmp(t, "stats") == 0) {
    lr_json *cms = lr__json_get(msg, "computeMs");
    if (cms && cms->type == LR_JNUMBER && cms->u.num >= 0 && cms->u.num <= LR_MAX_SAFE_INTEGER)
      run->stats.compute_ms = (uint64_t)cms->u.num;
  }
  /* Anything else is malformed and dropped. */
  lr__json_free(msg);
  return run->state == LR_RUN_RUNNING ? 0 : 1;
}

static void lr__on_frames(void *ud, const char *data, size_t len) {
  lr_run *run = ud;
  if (run->state != LR_RUN_RUNNING) return;
  char err[LR_ERR_MAX];
  if (lr__frame_feed(&run->dec, data, len, lr__on_frame, run, err) < 0)
    lr__settlef(run, LR_WORKER_EXIT, "broken frame from the runner: %s", err);
}

/* The sandbox's stdout and stderr: one read is one log entry, also while
 * its output is drained after the end (what it printed before it was killed
 * counts). */
static void lr__on_output(void *ud, const char *text, size_t len) {
  lr_run *run = ud;
  if (!run->oom_hint && len > 17 && (memmem(text, len, "heap out of memory", 18) || memmem(text, len, "Reached heap limit", 18)))
    run->oom_hint = true;
  lr__run_add_log(run, text, len);
}

static const char *lr__signal_name(int sig) {
  static const char *const names[] = {[1] = "SIGHUP", [2] = "SIGINT", [3] = "SIGQUIT", [4] = "SIGILL",
                                      [5] = "SIGTRAP", [6] = "SIGABRT", [7] = "SIGBUS", [8] = "SIGFPE",
                                      [9] = "SIGKILL", [11] = "SIGSEGV", [13] = "SIGPIPE", [14] = "SIGALRM",
                                      [15] = "SIGTERM", [24] = "SIGXCPU", [25] = "SIGXFSZ"};
  return sig > 0 && sig < (int)(sizeof names / sizeof names[0]) && names[sig] ? names[sig] : "a signal";
}

/* The sandbox's frame channel ended and its process exited: if no terminal
 * frame came, it died without settling. */
static void lr__bridge_ended(lr_run *run) {
  if (run->state != LR_RUN_RUNNING || !run->frames_ended || !run->exited) return;
  char err[LR_ERR_MAX];
  if (lr__frame_finish(&run->dec, err) != 0) {
    lr__settlef(run, LR_WORKER_EXIT, "broken frame from the runner: %s", err);
    return;
  }
  const char *oom = run->oom_hint ? "the worker ran out of memory (JavaScript heap out of memory); " : "";
  if (run->exit_signal)
    lr__settlef(run, LR_WORKER_EXIT, "%sthe sandbox process was killed by signal %d (%s) before the program settled",
                oom, run->exit_signal, lr__signal_name(run->exit_signal));
  else
    lr__settlef(run, LR_WORKER_EXIT, "%sthe sandbox process exited with code %" PRId64 " before the program settled",
                oom, run->exit_status);
}

static void lr__on_frames_end(void *ud) {
  lr_run *run = ud;
  run->frames_ended = true;
  lr__bridge_ended(run);
}

static void lr__on_exit(void *ud, int64_t status, int sig) {
  lr_run *run = ud;
  run->exited = true;
  run->exit_status = status;
  run->exit_signal = sig;
  lr__bridge_ended(run);
}

static void lr__on_write_error(void *ud, const char *message) {
  lr_run *run = ud;
  if (run->state == LR_RUN_RUNNING && !run->terminal_seen)
    lr__settlef(run, LR_WORKER_EXIT, "cannot write to the runner: %s", message);
}

static void lr__on_failed(void *ud, const char *message) {
  lr_run *run = ud;
  if (run->state == LR_RUN_RUNNING && !run->terminal_seen) lr__run_settle(run, LR_WORKER_EXIT, message, strlen(message));
}

static void lr__on_released(void *ud) {
  lr_run *run = ud;
  run->sb = NULL;
  run->sandbox_gone = true;
  lr__run_maybe_finish(run);
}

static void lr__on_flush(void *ud) { lr__run_flush_replies(ud); }

static const lr_sandbox_events lr__run_events = {
    .on_frames = lr__on_frames,
    .on_frames_end = lr__on_frames_end,
    .on_output = lr__on_output,
    .on_exit = lr__on_exit,
    .on_write_error = lr__on_write_error,
    .on_failed = lr__on_failed,
    .on_released = lr__on_released,
    .on_flush = lr__on_flush,
};

static void lr__on_wall(uv_timer_t *t) {
  lr_run *run = t->data;
  lr__settlef(run, LR_TIMEOUT, "wall-clock limit of %" PRIu64 " ms reached", run->cfg.max_wall_ms);
}

/* The boot frame; with code NULL it goes without the program, which a
 * `program` frame brings later (lr__write_program). */
static void lr__write_boot(lr_run *run, const char *code, size_t len) {
  lr_buf json = {0};
  char num[32];
  lr__buf_append_str(&json, "{\"type\":\"boot\",");
  if (code) {
    lr__buf_append_str(&json, "\"program\":");
    lr__json_write_string(code, len, &json);
    lr__buf_append_char(&json, ',');
  }
  lr__buf_append_str(&json, "\"namespaces\":[");
  for (size_t i = 0, n = 0; i < run->nnamespaces; i++) {
    if (!run->visible[i]) continue;
    if (n++) lr__buf_append_char(&json, ',');
    lr__runtime_describe_namespace(run->rt->namespaces[i], &json);
  }
  lr__buf_append_char(&json, ']');
  const struct { const char *key; uint64_t v; } nums[] = {
      {"computeMs", run->cfg.compute_ms},
      {"maxOutputBytes", run->cfg.max_output_bytes},
      {"maxOldGenerationSizeMb", run->cfg.max_old_generation_size_mb},
      {"maxFrameBytes", run->cfg.max_frame_bytes},
  };
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    lr__buf_append_str(&json, ",\"");
    lr__buf_append_str(&json, nums[i].key);
    lr__buf_append_str(&json, "\":");
    lr__json_number((double)nums[i].v, num);
    lr__buf_append_str(&json, num);
  }
  lr__buf_append_char(&json, '}');
  lr__run_send(run, json.data, json.len);
  lr__buf_free(&json);
}

static void lr__write_program(lr_run *run, const char *code, size_t len) {
  lr_buf json = {0};
  lr__buf_append_str(&json, "{\"type\":\"program\",\"program\":");
  lr__json_write_string(code, len, &json);
  lr__buf_append_char(&json, '}');
  lr__run_send(run, json.data, json.len);
  lr__buf_free(&json);
}

static void lr__run_attach(lr_run *run, lr_sandbox *sb) {
  run->sb = sb;
  lr__sandbox_attach(sb, &lr__run_events, run);
  lr__frame_decoder_set_token(&run->dec, lr__sandbox_token(sb), strlen(lr__sandbox_token(sb)));
  run->state = LR_RUN_RUNNING;
}

static void lr__on_stripped(void *ud, bool ok, bool broken, const char *text, size_t len) {
  lr_run *run = ud;
  run->strip_id = 0;
  if (run->state == LR_RUN_SETTLED) return;
  if (!ok) {
    if (broken)
      lr__settlef(run, LR_WORKER_EXIT, "type stripping failed: %.*s", (int)(len > 1000 ? 1000 : len), text);
    else
      lr__run_settle(run, LR_EXCEPTION, text, len);
    return;
  }
  if (run->sb) { /* a pooled sandbox, booted while the program was stripped */
    lr__write_program(run, text, len);
    return;
  }
  char err[LR_ERR_MAX];
  lr_sandbox *sb = lr__runtime_take_sandbox(run->rt, &run->cfg, err);
  if (!sb) {
    lr__settlef(run, LR_WORKER_EXIT, "the sandbox did not start: %s", err);
    return;
  }
  lr__run_attach(run, sb);
  lr__write_boot(run, text, len);
}

/* Decides the result (first decision wins), then ends the sandbox. The
 * result reaches the caller once the sandbox is gone. */
void lr__run_settle(lr_run *run, lr_kind kind, const char *message, size_t len) {
  if (run->state == LR_RUN_SETTLED) return;
  bool had_sandbox = run->state == LR_RUN_RUNNING;
  run->state = LR_RUN_SETTLED;
  run->kind = kind;
  if (message) {
    run->message = lr__xmemdup(message, len);
    run->message_len = len;
  }
  run->stats.wall_ms = uv_now(run->rt->loop) - run->started_ms;
  lr__call_detach_all(run);
  if (run->strip_id) lr__stripper_cancel(run->rt->stripper, run->strip_id);
  uv_timer_stop(&run->wall);
  if (had_sandbox && run->sb)
    lr__sandbox_terminate(run->sb);
  else
    run->sandbox_gone = true;
  lr__run_maybe_finish(run);
}

/* Applies the ledger to the decided result: a value or message that does not
 * fit turns the run into output-limit, and an output-limit result is cut. */
static void lr__apply_ledger(lr_run *run) {
  uint64_t final_cost;
  if (run->kind == LR_OK)
    final_cost = run->has_value ? lr__ledger_value_cost(&run->value) : 0;
  else if (run->kind != LR_OUTPUT_LIMIT)
    final_cost = lr__ledger_string_cost(run->message, run->message_len);
  else
    final_cost = UINT64_MAX;
  if (final_cost != UINT64_MAX && lr__ledger_fits(&run->ledger, final_cost)) {
    run->stats.output_bytes = run->ledger.logs_cost + final_cost;
    return;
  }
  /* Over the cap: output-limit, never a truncated success. */
  run->kind = LR_OUTPUT_LIMIT;
  if (run->has_value) lr__json_free(&run->value);
  run->has_value = false;
  free(run->message);
  lr_buf msg = {0};
  lr__ledger_limit_message(run->cfg.max_output_bytes, &msg);
  size_t keep, partial, msg_len;
  lr__ledger_cut(run->cfg.max_output_bytes, (const char *const *)run->logs, run->log_lens,
                 run->nlogs, msg.data, msg.len, &keep, &partial, &msg_len);
  for (size_t i = keep + (partial ? 1 : 0); i < run->nlogs; i++) free(run->logs[i]);
  if (partial) run->log_lens[keep] = partial;
  run->nlogs = keep + (partial ? 1 : 0);
  msg.len = msg_len;
  run->message = lr__buf_steal(&msg, &run->message_len);
  run->message[run->message_len] = '\0';
  uint64_t logs = 2;
  for (size_t i = 0; i < run->nlogs; i++)
    logs += lr__ledger_string_cost(run->logs[i], run->log_lens[i]) + (i ? 1 : 0);
  run->stats.output_bytes = logs + lr__ledger_string_cost(run->message, run->message_len);
}

static void lr__run_free(lr_run *run) {
  for (size_t i = 0; i < run->nnamespaces; i++) free(run->call_counts[i]);
  free(run->call_counts);
  free(run->visible);
  for (size_t i = 0; i < run->nlogs; i++) free(run->logs[i]);
  free(run->logs);
  free(run->log_lens);
  free(run->message);
  if (run->has_value) lr__json_free(&run->value);
  lr__frame_decoder_free(&run->dec);
  lr__buf_free(&run->replies);
  lr_config_free(&run->cfg);
  free(run);
}

/* Runs from the wall timer's close callback, so the result never reaches the
 * caller from inside one of its own calls (lr_run_start, lr_run_abort). */
static void lr__run_deliver(uv_handle_t *h) {
  lr_run *run = h->data;
  lr__apply_ledger(run);
  lr_buf value = {0};
  if (run->has_value) lr__json_write(&run->value, &value);
  lr_result r = {
      .kind = run->kind,
      .value_json = run->has_value ? value.data : NULL,
      .value_len = value.len,
      .nlogs = run->nlogs,
      .logs = (const char *const *)run->logs,
      .log_lens = run->log_lens,
      .message = run->kind == LR_OK ? NULL : (run->message ? run->message : ""),
      .message_len = run->kind == LR_OK ? 0 : run->message_len,
      .stats = run->stats,
  };
  lr_runtime *rt = run->rt;
  run->on_done(run->ud, &r);
  lr__buf_free(&value);
  lr__runtime_run_finished(rt, run);
  lr__run_free(run);
}

static void lr__run_maybe_finish(lr_run *run) {
  if (run->state != LR_RUN_SETTLED || !run->sandbox_gone || run->timer_closed) return;
  run->timer_closed = true;
  uv_close((uv_handle_t *)&run->wall, lr__run_deliver);
}

int lr_run_start(lr_runtime *rt, const char *program, size_t len, const lr_run_options *opts,
                 lr_run **out, char *err) {
  if (out) *out = NULL;
  if (rt->disposing) return lr__errf(err, "run: the runtime is disposed");
  if (!opts || !opts->on_done) return lr__errf(err, "run: on_done is required");
  const lr_config *cfg = opts->config ? opts->config : &rt->cfg;
  if (lr_config_check(cfg, err) != 0) return -1;
  bool *visible = lr__xcalloc(rt->nnamespaces + 1, sizeof *visible);
  for (size_t i = 0; i < rt->nnamespaces; i++) visible[i] = opts->namespaces == NULL;
  for (size_t i = 0; opts->namespaces && i < opts->nnamespaces; i++) {
    const char *g = opts->namespaces[i];
    const lr_namespace *ns = g ? lr__runtime_find_namespace(rt, g, strlen(g)) : NULL;
    if (!ns) {
      free(visible);
      return lr__errf(err, "run: no namespace \"%s\" to make visible", g ? g : "(null)");
    }
    visible[ns->index] = true;
  }
  lr_run *run = lr__xcalloc(1, sizeof *run);
  run->rt = rt;
  run->stats.isolation = rt->cfg.backend == LR_BACKEND_E2B ? LR_ISOLATION_E2B : rt->cfg.isolation;
  run->id = ++rt->next_run_id;
  run->nnamespaces = rt->nnamespaces;
  run->visible = visible;
  run->call_counts = lr__xcalloc(rt->nnamespaces + 1, sizeof *run->call_counts);
  lr_config_copy(&run->cfg, cfg);
  run->on_log = opts->on_log;
  run->on_done = opts->on_done;
  run->ud = opts->ud;
  run->state = LR_RUN_STRIPPING;
  run->started_ms = uv_now(rt->loop);
  lr__ledger_init(&run->ledger, run->cfg.max_output_bytes);
  lr__frame_decoder_init(&run->dec, run->cfg.max_frame_bytes);
  uv_timer_init(rt->loop, &run->wall);
  run->wall.data = run;
  uv_timer_start(&run->wall, lr__on_wall, run->cfg.max_wall_ms, 0);
  /* Link before stripping: the strip callback may come on any later turn. */
  run->next = rt->runs;
  if (rt->runs) rt->runs->prev = run;
  rt->runs = run;
  rt->nruns++;
  if (out) *out = run;
  /* Program text is the model's output, not the caller's misuse: text that
   * is not UTF-8 fails the run (kind exception), and nothing is spawned. */
  size_t bad = lr__utf8_prefix_valid(program, len);
  if (bad < len) {
    lr__settlef(run, LR_EXCEPTION, "program.ts: the program is not valid UTF-8 text (at byte %zu)", bad);
    return 0;
  }
  run->strip_id = lr__stripper_strip(rt->stripper, program, len, lr__on_stripped, run);
  /* A warm sandbox from the pool gets its boot frame at once: its worker
   * sets the run up while the program is stripped, and the program follows
   * in a `program` frame. (A strip failure then costs that sandbox; a cold
   * one is only started once the program stripped.) */
  if (run->state == LR_RUN_STRIPPING) {
    lr_sandbox *sb = lr__pool_take(rt, &run->cfg);
    if (sb) {
      lr__run_attach(run, sb);
      lr__write_boot(run, NULL, 0);
    }
  }
  return 0;
}

void lr_run_abort(lr_run *run) { lr__run_settle(run, LR_ABORT, "the run was aborted", 19); }

uint64_t lr_run_id(const lr_run *run) { return run->id; }

lr_stats lr_run_stats(const lr_run *run) {
  lr_stats s = run->stats;
  if (run->state != LR_RUN_SETTLED) s.wall_ms = uv_now(run->rt->loop) - run->started_ms;
  s.output_bytes = run->ledger.logs_cost;
  return s;
}

char *lr_log_json(const char *text, size_t len, size_t *out_len) {
  lr_buf b = {0};
  lr__json_write_string(text, len, &b);
  return lr__buf_steal(&b, out_len);
}

/* The result as one JSON object, keys in the order of SPEC §4. */
char *lr_result_json(const lr_result *r, size_t *len) {
  lr_buf b = {0};
  char num[32];
  lr__buf_append_char(&b, '{');
  if (r->kind == LR_OK && r->value_json) {
    lr__buf_append_str(&b, "\"value\":");
    lr__buf_append(&b, r->value_json, r->value_len);
    lr__buf_append_char(&b, ',');
  }
  lr__buf_append_str(&b, "\"logs\":[");
  for (size_t i = 0; i < r->nlogs; i++) {
    if (i) lr__buf_append_char(&b, ',');
    lr__json_write_string(r->logs[i], r->log_lens[i], &b);
  }
  lr__buf_append_char(&b, ']');
  if (r->kind != LR_OK) {
    lr__buf_append_str(&b, ",\"error\":{\"kind\":\"");
    lr__buf_append_str(&b, lr_kind_name(r->kind));
    lr__buf_append_str(&b, "\",\"message\":");
    lr__json_write_string(r->message ? r->message : "", r->message ? r->message_len : 0, &b);
    lr__buf_append_char(&b, '}');
  }
  const struct { const char *key; uint64_t v; } stats[] = {
      {"wallMs", r->stats.wall_ms},
      {"computeMs", r->stats.compute_ms},
      {"outputBytes", r->stats.output_bytes},
      {"bindingCalls", r->stats.binding_calls},
      {"logEntries", r->stats.log_entries},
  };
  lr__buf_append_str(&b, ",\"stats\":{");
  for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
    if (i) lr__buf_append_char(&b, ',');
    lr__buf_append_char(&b, '"');
    lr__buf_append_str(&b, stats[i].key);
    lr__buf_append_str(&b, "\":");
    lr__json_number((double)stats[i].v, num);
    lr__buf_append_str(&b, num);
  }
  lr__buf_append_str(&b, ",\"isolation\":\"");
  lr__buf_append_str(&b, lr_isolation_name(r->stats.isolation));
  lr__buf_append_str(&b, "\"");
  lr__buf_append_str(&b, "}}");
  return lr__buf_steal(&b, len);
}
