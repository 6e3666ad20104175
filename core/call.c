/* One binding call: created from a `call` frame, completed exactly once by
 * its handler (now or later), which writes the `reply` frame unless the run
 * has settled in the meantime. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "wire.h"

lr_call *lr__call_new(lr_run *run, const lr_namespace *ns, size_t member, uint64_t id, lr_json *args) {
  lr_call *call = lr__xcalloc(1, sizeof *call);
  call->run = run;
  call->ns = ns;
  call->member = member;
  call->id = id;
  call->args = *args;
  *args = lr__json_null();
  call->next = run->calls;
  if (run->calls) run->calls->prev = call;
  run->calls = call;
  return call;
}

void lr__call_detach_all(lr_run *run) {
  for (lr_call *c = run->calls; c; c = c->next) c->run = NULL;
  run->calls = NULL;
}

/* Unlinks and frees the call. */
static void lr__call_finish(lr_call *call) {
  lr_run *run = call->run;
  if (run) {
    if (call->prev) call->prev->next = call->next;
    else run->calls = call->next;
    if (call->next) call->next->prev = call->prev;
  }
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

void lr_call_reject(lr_call *call, const char *message, size_t len) {
  if (call->run) {
    lr_buf json = {0};
    lr__reply_head(&json, call->id, false);
    /* A message that is not UTF-8 could not cross; say so instead. */
    if (!lr__utf8_valid(message, len, true)) {
      message = "the binding's error message is not valid UTF-8";
      len = strlen(message);
    }
    lr__json_write_string(message, len, &json);
    lr__buf_append_char(&json, '}');
    lr__run_send_reply(call->run, &json);
    lr__buf_free(&json);
  }
  lr__call_finish(call);
}

void lr_call_reject_lossy(lr_call *call) {
  static const char msg[] = "binding resolution must be lossless JSON";
  lr_call_reject(call, msg, sizeof msg - 1);
}

void lr_call_resolve(lr_call *call, lr_json *value) {
  if (call->run) {
    lr_buf json = {0};
    char err[LR_ERR_MAX];
    lr__reply_head(&json, call->id, true);
    if (lr__wire_write(value, &json, err) != 0) {
      lr__buf_free(&json);
      lr__json_free(value);
      lr_call_reject_lossy(call);
      return;
    }
    lr__buf_append_char(&json, '}');
    lr__run_send_reply(call->run, &json);
    lr__buf_free(&json);
  }
  lr__json_free(value);
  lr__call_finish(call);
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
