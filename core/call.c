/* One binding call: created from a `call` frame, queued behind the run's
 * read/write gate, handed to its handler, completed exactly once (now or
 * later), which writes the `reply` frame unless the engine is already done
 * with the call (its run settled, or it timed out). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "wire.h"

static void lr__unlink(lr_call **head, lr_call **tail, lr_call *c) {
  if (c->prev) c->prev->next = c->next;
  else *head = c->next;
  if (c->next) c->next->prev = c->prev;
  else if (tail) *tail = c->prev;
  c->next = c->prev = NULL;
}

static void lr__on_timer_closed(uv_handle_t *h) { free(h); }

static void lr__call_free(lr_call *call) {
  if (call->timer) uv_close((uv_handle_t *)call->timer, lr__on_timer_closed);
  free(call->cancel_reason);
  lr__json_free(&call->args);
  free(call->args_json);
  free(call);
}

static void lr__reply_head(lr_buf *json, uint64_t id, bool ok) {
  char num[32];
  lr__json_number((double)id, num);
  lr__buf_append_str(json, "{\"type\":\"reply\",\"id\":");
  lr__buf_append_str(json, num);
  lr__buf_append_str(json, ok ? ",\"ok\":true,\"value\":" : ",\"ok\":false,\"message\":");
}

static void lr__send_error(lr_run *run, uint64_t id, const char *message, size_t len) {
  lr_buf json = {0};
  lr__reply_head(&json, id, false);
  lr__json_write_string(message, len, &json);
  lr__buf_append_char(&json, '}');
  lr__run_send_reply(run, &json);
  lr__buf_free(&json);
}

static void lr__pump(lr_run *run);

/* The engine is done with a dispatched call: off the run, gate released.
 * The caller pumps the gate once it has sent what it had to send. */
static lr_run *lr__release(lr_call *call) {
  lr_run *run = call->run;
  lr__unlink(&run->calls, NULL, call);
  if (call->read_only) run->active_readers--;
  else run->writer_active = false;
  call->run = NULL;
  if (call->timer) uv_timer_stop(call->timer);
  return run;
}

static void lr__on_timeout(uv_timer_t *t) {
  lr_call *call = t->data;
  lr_run *run = call->run;
  if (!run) return;
  char msg[256];
  size_t mlen;
  const char *member = lr_call_member(call, &mlen);
  int n = snprintf(msg, sizeof msg, "binding \"%s.%.*s\" timed out after %" PRIu64 " ms", call->ns->global,
                   (int)(mlen > 100 ? 100 : mlen), member, call->ns->policies[call->member].timeout_ms);
  lr__release(call);
  lr__send_error(run, call->id, msg, (size_t)n);
  call->cancel_reason = lr__xstrdup(msg);
  if (call->ns->cancel) call->ns->cancel(call->ns->ud, call);
  lr__pump(run);
}

static void lr__dispatch(lr_run *run, lr_call *call) {
  call->dispatched = true;
  call->next = run->calls;
  if (run->calls) run->calls->prev = call;
  run->calls = call;
  uint64_t timeout = call->ns->policies[call->member].timeout_ms;
  if (timeout) {
    call->timer = lr__xmalloc(sizeof *call->timer);
    uv_timer_init(run->rt->loop, call->timer);
    call->timer->data = call;
    uv_timer_start(call->timer, lr__on_timeout, timeout, 0);
  }
  call->ns->call(call->ns->ud, call);
}

/* Dispatches what the gate allows, in issue order: read-only calls overlap;
 * a mutating call waits for everything before it and holds back everything
 * after it. Re-entrant calls (a handler that completes at once) only mark
 * that another pass is needed. */
static void lr__pump(lr_run *run) {
  if (run->pumping) return;
  run->pumping = true;
  while (run->queue && run->state == LR_RUN_RUNNING) {
    lr_call *c = run->queue;
    if (run->writer_active || (!c->read_only && run->active_readers > 0)) break;
    lr__unlink(&run->queue, &run->queue_tail, c);
    if (c->read_only) run->active_readers++;
    else run->writer_active = true;
    lr__dispatch(run, c);
  }
  run->pumping = false;
}

void lr__call_submit(lr_run *run, const lr_namespace *ns, size_t member, uint64_t id, lr_json *args) {
  lr_call *call = lr__xcalloc(1, sizeof *call);
  call->run = run;
  call->run_id = run->id;
  call->ns = ns;
  call->member = member;
  call->id = id;
  call->read_only = ns->policies[member].read_only != 0;
  call->args = *args;
  *args = lr__json_null();
  call->prev = run->queue_tail;
  if (run->queue_tail) run->queue_tail->next = call;
  else run->queue = call;
  run->queue_tail = call;
  lr__pump(run);
}

void lr__call_detach_all(lr_run *run) {
  /* Calls the handlers never saw are dropped. */
  while (run->queue) {
    lr_call *c = run->queue;
    lr__unlink(&run->queue, &run->queue_tail, c);
    lr__call_free(c);
  }
  /* Calls the handlers hold are theirs to complete; tell them to stop. */
  while (run->calls) {
    lr_call *c = run->calls;
    lr__unlink(&run->calls, NULL, c);
    c->run = NULL;
    if (c->timer) uv_timer_stop(c->timer);
    c->cancel_reason = lr__xstrdup("the run ended before the call did");
    if (c->ns->cancel) c->ns->cancel(c->ns->ud, c);
  }
  run->active_readers = 0;
  run->writer_active = false;
}

/* Completion: sends nothing when the engine is done with the call. */
static void lr__complete(lr_call *call, const lr_buf *reply) {
  if (call->run) {
    lr_run *run = lr__release(call);
    lr__run_send_reply(run, reply); /* may settle the run */
    lr__pump(run);
  }
  lr__call_free(call);
}

void lr_call_reject(lr_call *call, const char *message, size_t len) {
  lr_buf json = {0};
  if (call->run) {
    lr__reply_head(&json, call->id, false);
    /* A message that is not UTF-8 could not cross; say so instead. */
    if (!lr__utf8_valid(message, len, true)) {
      message = "the binding's error message is not valid UTF-8";
      len = strlen(message);
    }
    lr__json_write_string(message, len, &json);
    lr__buf_append_char(&json, '}');
  }
  lr__complete(call, &json);
  lr__buf_free(&json);
}

void lr_call_reject_lossy(lr_call *call) {
  static const char msg[] = "binding resolution must be lossless JSON";
  lr_call_reject(call, msg, sizeof msg - 1);
}

void lr_call_resolve(lr_call *call, lr_json *value) {
  lr_buf json = {0};
  if (call->run) {
    char err[LR_ERR_MAX];
    lr__reply_head(&json, call->id, true);
    if (lr__wire_write(value, &json, err) != 0) {
      lr__buf_free(&json);
      lr__json_free(value);
      lr_call_reject_lossy(call);
      return;
    }
    lr__buf_append_char(&json, '}');
  }
  lr__json_free(value);
  lr__complete(call, &json);
  lr__buf_free(&json);
}

void lr_call_resolve_json(lr_call *call, const char *json, size_t len) {
  lr_json value;
  char err[LR_ERR_MAX];
  if (lr__json_parse(json, len, &value, err) != 0) {
    lr_call_reject_lossy(call);
    return;
  }
  lr_call_resolve(call, &value);
}

const char *lr_call_global(const lr_call *call) { return call->ns->global; }

const char *lr_call_member(const lr_call *call, size_t *len) {
  if (len) *len = call->ns->member_lens[call->member];
  return call->ns->members[call->member];
}

const char *lr_call_args_json(const lr_call *call, size_t *len) {
  lr_call *c = (lr_call *)call; /* made once, on first request */
  if (!c->args_json) {
    lr_buf b = {0};
    lr__json_write(&c->args, &b);
    c->args_json = lr__buf_steal(&b, &c->args_json_len);
  }
  if (len) *len = c->args_json_len;
  return c->args_json;
}

const struct lr_json *lr_call_args(const lr_call *call) { return &call->args; }
uint64_t lr_call_run_id(const lr_call *call) { return call->run_id; }
uint64_t lr_call_id(const lr_call *call) { return call->id; }
size_t lr_call_member_index(const lr_call *call) { return call->member; }
void lr_call_set_user(lr_call *call, void *user) { call->user = user; }
void *lr_call_user(const lr_call *call) { return call->user; }
const char *lr_call_cancel_reason(const lr_call *call) { return call->cancel_reason; }
