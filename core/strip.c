/* The client of runner/strip.mjs: frames out, frames back, matched by id.
 * The helper is started on first use and again after it dies. */
#include "strip.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "helper_proc.h"

/* Programs are text a model wrote: 64 MiB is far beyond any, and bounds
 * what a broken helper could make us buffer. */
#define LR_STRIP_MAX_FRAME (256u * 1024 * 1024)

typedef struct lr_strip_req {
  uint64_t id;
  lr_strip_cb cb;
  void *ud;
  char *failure; /* set when the request fails before reaching the helper */
  struct lr_strip_req *next;
} lr_strip_req;

/* One helper process. Events of a process that was given up on are ignored
 * until it is gone. */
typedef struct lr_strip_proc {
  struct lr_stripper *st;
  lr_proc *sb;
  bool dead;
  lr_frame_decoder dec;
  lr_buf stderr_tail;
} lr_strip_proc;

struct lr_stripper {
  uv_loop_t *loop;
  char *node_path, *script;
  lr_strip_proc *proc;   /* the live helper, or NULL */
  int nprocs;            /* helpers not yet gone, live or dying */
  lr_strip_req *pending; /* sent, waiting for an answer */
  lr_strip_req *failed;  /* to be answered with a failure on the next idle turn */
  uv_idle_t idle;
  uint64_t next_id;
  bool closing;
  void (*on_closed)(void *ud);
  void *closed_ud;
};

static void lr__strip_fail_all(lr_stripper *st, const char *why);

static void lr__strip_answer(lr_stripper *st, uint64_t id, bool ok, bool broken,
                             const char *text, size_t len) {
  for (lr_strip_req **p = &st->pending; *p; p = &(*p)->next) {
    if ((*p)->id != id) continue;
    lr_strip_req *r = *p;
    *p = r->next;
    if (r->cb) r->cb(r->ud, ok, broken, text, len);
    free(r);
    return;
  }
}

static int lr__strip_on_frame(void *ud, lr_json *msg) {
  lr_strip_proc *p = ud;
  lr_json *id = lr__json_get(msg, "id"), *ok = lr__json_get(msg, "ok");
  lr_json *text = lr__json_get(msg, ok && ok->type == LR_JTRUE ? "code" : "message");
  if (!p->dead && id && id->type == LR_JNUMBER && ok && text && text->type == LR_JSTRING) {
    lr__strip_answer(p->st, (uint64_t)id->u.num, ok->type == LR_JTRUE, false, text->u.str,
                     text->len);
  } else if (!p->dead) {
    /* An answer to no request (the helper could not read one): nobody would
     * get an answer, so every waiting request fails and a fresh helper
     * serves the next. */
    char why[LR_ERR_MAX];
    lr__errf(why, "the type stripper could not read a request%s%.*s", text && text->type == LR_JSTRING ? ": " : "",
             text && text->type == LR_JSTRING ? (int)(text->len > 300 ? 300 : text->len) : 0,
             text && text->type == LR_JSTRING ? text->u.str : "");
    lr__json_free(msg);
    lr__strip_fail_all(p->st, why);
    return 1;
  }
  lr__json_free(msg);
  return 0;
}

static void lr__strip_on_stdout(void *ud, const char *data, size_t len) {
  lr_strip_proc *p = ud;
  char err[LR_ERR_MAX];
  if (p->dead) return;
  if (lr__frame_feed(&p->dec, data, len, lr__strip_on_frame, p, err) < 0)
    lr__strip_fail_all(p->st, err);
}

static void lr__strip_on_stderr(void *ud, const char *data, size_t len) {
  lr_strip_proc *p = ud;
  /* Keep the last few KiB: they explain a helper that died. */
  if (p->stderr_tail.len > 4096) p->stderr_tail.len = 0;
  lr__buf_append(&p->stderr_tail, data, len);
}

static void lr__strip_on_exit(void *ud, int64_t status, int sig) {
  lr_strip_proc *p = ud;
  if (p->dead) return;
  char why[LR_ERR_MAX];
  int n = (int)(p->stderr_tail.len > 400 ? 400 : p->stderr_tail.len);
  lr__errf(why, "the type stripper exited (status %lld, signal %d)%s%.*s", (long long)status, sig,
           n ? ": " : "", n, n ? p->stderr_tail.data : "");
  lr__strip_fail_all(p->st, why);
}

static void lr__strip_on_idle_closed(uv_handle_t *h) {
  lr_stripper *st = h->data;
  void (*cb)(void *) = st->on_closed;
  void *cud = st->closed_ud;
  free(st->node_path);
  free(st->script);
  free(st);
  if (cb) cb(cud);
}

static void lr__strip_on_closed(void *ud) {
  lr_strip_proc *p = ud;
  lr_stripper *st = p->st;
  if (st->proc == p) st->proc = NULL;
  lr__frame_decoder_free(&p->dec);
  lr__buf_free(&p->stderr_tail);
  free(p);
  if (--st->nprocs == 0 && st->closing) uv_close((uv_handle_t *)&st->idle, lr__strip_on_idle_closed);
}

static const lr_proc_events lr__strip_events = {
    .on_stdout = lr__strip_on_stdout,
    .on_stderr = lr__strip_on_stderr,
    .on_exit = lr__strip_on_exit,
    .on_closed = lr__strip_on_closed,
};

/* Answers every waiting request with a failure and gives up on the helper,
 * so the next request starts a fresh one. */
static void lr__strip_fail_all(lr_stripper *st, const char *why) {
  lr_strip_proc *p = st->proc;
  if (p) {
    st->proc = NULL;
    p->dead = true;
    lr__proc_terminate(p->sb);
  }
  lr_strip_req *r = st->pending;
  st->pending = NULL;
  while (r) {
    lr_strip_req *next = r->next;
    if (r->cb) r->cb(r->ud, false, true, why, strlen(why));
    free(r);
    r = next;
  }
}

static void lr__strip_on_idle(uv_idle_t *h) {
  lr_stripper *st = h->data;
  uv_idle_stop(h);
  lr_strip_req *r = st->failed;
  st->failed = NULL;
  while (r) {
    lr_strip_req *next = r->next;
    if (r->cb) r->cb(r->ud, false, true, r->failure, strlen(r->failure));
    free(r->failure);
    free(r);
    r = next;
  }
}

static lr_strip_proc *lr__strip_spawn(lr_stripper *st, char err[LR_ERR_MAX]) {
  lr_strip_proc *p = lr__xcalloc(1, sizeof *p);
  p->st = st;
  lr__frame_decoder_init(&p->dec, LR_STRIP_MAX_FRAME);
  lr_proc_spec spec = {.node_path = st->node_path, .script = st->script, .kill_grace_ms = 500};
  if (lr__proc_start(st->loop, &spec, &lr__strip_events, p, &p->sb, err) != 0) {
    lr__frame_decoder_free(&p->dec);
    free(p);
    return NULL;
  }
  st->nprocs++;
  return p;
}

lr_stripper *lr__stripper_new(uv_loop_t *loop, const char *node_path, const char *script) {
  lr_stripper *st = lr__xcalloc(1, sizeof *st);
  st->loop = loop;
  st->node_path = lr__xstrdup(node_path);
  st->script = lr__xstrdup(script);
  uv_idle_init(loop, &st->idle);
  st->idle.data = st;
  return st;
}

void lr__stripper_start(lr_stripper *st) {
  char err[LR_ERR_MAX];
  /* A failure here is reported by the first strip, which tries again. */
  if (!st->proc && !st->closing) st->proc = lr__strip_spawn(st, err);
}

uint64_t lr__stripper_strip(lr_stripper *st, const char *program, size_t len, lr_strip_cb cb,
                            void *ud) {
  lr_strip_req *r = lr__xcalloc(1, sizeof *r);
  r->id = ++st->next_id;
  r->cb = cb;
  r->ud = ud;
  char err[LR_ERR_MAX] = "the runtime is being disposed";
  if (!st->proc && !st->closing) st->proc = lr__strip_spawn(st, err);
  lr_buf json = {0}, frame = {0};
  bool sent = false;
  if (st->proc && !st->closing) {
    char num[32];
    lr__json_number((double)r->id, num);
    lr__buf_append_str(&json, "{\"id\":");
    lr__buf_append_str(&json, num);
    lr__buf_append_str(&json, ",\"program\":");
    lr__json_write_string(program, len, &json);
    lr__buf_append_char(&json, '}');
    if (lr__frame_encode_text(json.data, json.len, LR_STRIP_MAX_FRAME, &frame, err) == 0) {
      size_t n;
      char *data = lr__buf_steal(&frame, &n);
      r->next = st->pending;
      st->pending = r;
      lr__proc_write(st->proc->sb, data, n);
      sent = true;
    }
  }
  lr__buf_free(&json);
  lr__buf_free(&frame);
  if (!sent) {
    r->failure = lr__xstrdup(err);
    r->next = st->failed;
    st->failed = r;
    uv_idle_start(&st->idle, lr__strip_on_idle);
  }
  return r->id;
}

void lr__stripper_cancel(lr_stripper *st, uint64_t id) {
  for (lr_strip_req *r = st->pending; r; r = r->next)
    if (r->id == id) r->cb = NULL;
  for (lr_strip_req *r = st->failed; r; r = r->next)
    if (r->id == id) r->cb = NULL;
}

void lr__stripper_close(lr_stripper *st, void (*on_closed)(void *ud), void *ud) {
  st->closing = true;
  st->on_closed = on_closed;
  st->closed_ud = ud;
  lr__strip_on_idle(&st->idle); /* answers queued failures */
  lr__strip_fail_all(st, "the runtime is being disposed");
  if (st->nprocs == 0) uv_close((uv_handle_t *)&st->idle, lr__strip_on_idle_closed);
}
