/* The E2B backend (README, "E2B"; ../shared/E2B.md). Every run of a runtime
 * runs in one remote E2B sandbox, made at the runtime's first run: the
 * runner's files are uploaded once and the remote Node is checked. Per run
 * the runner's launcher starts there through envd's process service, as the
 * leader of a process group of its own (setsid); frames go in with
 * SendInput and come out of its stdout events; its stderr becomes log text.
 * Ending a run kills the launcher's group and its children's groups (envd
 * signals one pid only, E2B issue #1034), TERM then KILL after the grace,
 * and awaits the process's end event. Everything is HTTP on the runtime's
 * loop (http.c): nothing here blocks.
 *
 * The launcher's callbacks from the process stream run inside libcurl, so
 * they only record and hand bytes to the run; every new request starts from
 * the sandbox's prepare handle or from another request's callback. */
#define _GNU_SOURCE
#include "sandbox.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"
#include "frame.h"
#include "http.h"
#include "json.h"
#include "node_version.h"

#define LR_E2B_ENVD_PORT "49983"
#define LR_E2B_MAX_ENVELOPE ((size_t)16 << 20)
#define LR_E2B_INPUT_CHUNK ((size_t)4 << 20)
#define LR_E2B_CONTROL_TIMEOUT_MS 60000
#define LR_E2B_UNARY_TIMEOUT_MS 30000
#define LR_E2B_KILL_TIMEOUT_MS 10000
#define LR_E2B_GIVE_UP_MS 10000 /* after KILL, how long the end event is awaited */
/* The files the launcher role needs (strip.mjs stays on the host). */
static const char *const lr__e2b_runner_files[] = {"launcher.mjs", "controller.mjs", "worker.mjs", "codec.mjs",
                                                   "channel.mjs", NULL};

typedef struct lr_e2b_sb lr_e2b_sb;

typedef enum { LR_REMOTE_NONE, LR_REMOTE_PREPARING, LR_REMOTE_READY } lr_remote_state;

struct lr_e2b {
  uv_loop_t *loop;
  lr_http_client *http;
  char *api_key;
  char *api_url;     /* the control plane's base, no trailing slash */
  char *sandbox_url; /* envd's base when configured; NULL: from the sandbox's domain */
  char *domain, *template_id, *user;
  uint64_t timeout_ms;
  bool internet;
  char runner_dir[48]; /* relative to the remote user's home */
  char h_api_key[LR_ERR_MAX], h_auth[256];
  /* The remote sandbox. */
  lr_remote_state state;
  char *sandbox_id, *envd_url;
  char h_token[LR_ERR_MAX], h_id[256];
  unsigned prep_pending;  /* uploads in flight */
  char *prep_error;       /* the first failure of the preparation */
  lr_e2b_sb *waiting;     /* runs waiting for the remote */
  size_t active;          /* runs started on it, not yet gone */
  uint64_t used_at;       /* when a run last used it (its lifetime counts from then) */
  uv_timer_t refresh;
  unsigned requests;      /* the client's own requests in flight */
  bool closing, refresh_closed;
  void (*on_closed)(void *ud);
  void *closed_ud;
};

typedef enum { LR_SB_WAITING, LR_SB_STARTING, LR_SB_RUNNING, LR_SB_ENDED } lr_sb_state;

struct lr_e2b_sb {
  lr_sandbox base;
  lr_e2b *e2b;
  lr_e2b_sb *next, *prev; /* in e2b->waiting */
  const lr_sandbox_events *ev;
  void *ud;
  void (*on_gone)(void *owner);
  void *owner;
  uint64_t grace_ms, stream_timeout_ms;
  bool allow_children;
  uint64_t memory_mb; /* maxProcessMemoryMb */
  lr_sb_state state;
  lr_http_request *stream;
  lr_connect_reader reader;
  lr_buf err_body; /* a refused Start's body */
  long status;
  bool end_stream_seen, end_event_seen;
  char *stream_error; /* a flag-2 envelope's error */
  int64_t pid;
  lr_utf8_stream err_utf8;
  lr_buf outbox;
  lr_http_request *input;
  unsigned kills; /* kill commands in flight */
  uv_timer_t timer;
  uv_prepare_t kick;
  char *failure; /* to tell the run, from the prepare handle */
  bool counted; /* in e2b->active */
  bool terminating, term_sent, kill_sent, released, gone;
  int open_handles;
};

static const lr_sandbox_ops lr__e2b_ops;
static void lr__sb_poke(lr_e2b_sb *sb);
static void lr__e2b_prepare(lr_e2b *e);
static void lr__e2b_maybe_closed(lr_e2b *e);

/* ---- small helpers ------------------------------------------------------- */

static char *lr__strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *lr__strf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) abort();
  va_end(ap);
  return s;
}

static char *lr__trim_slash(const char *s) {
  char *t = lr__xstrdup(s);
  size_t n = strlen(t);
  while (n > 0 && t[n - 1] == '/') t[--n] = '\0';
  return t;
}

/* A reply body as one short printable line for a message; the API key never
 * appears in it even if a server echoes it. */
static void lr__snippet(const lr_e2b *e, const char *body, size_t len, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < len && o + 4 < cap; i++) {
    unsigned char c = (unsigned char)body[i];
    out[o++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
  }
  if (o + 4 >= cap) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = '\0';
  size_t klen = e->api_key ? strlen(e->api_key) : 0;
  for (char *k; klen && (k = strstr(out, e->api_key));) {
    memset(k, '*', 3);
    memmove(k + 3, k + klen, strlen(k + klen) + 1);
  }
}

/* "HTTP 401: {...}" or the transport's error, for a failed step. */
static char *lr__http_failure(const lr_e2b *e, const char *step, const lr_http_response *res,
                              const lr_http_error *error) {
  if (error) return lr__strf("e2b: %s: %s (%s)", step, error->message, lr__http_err_name(error->code));
  char snip[240];
  lr__snippet(e, res->body, res->body_len, snip, sizeof snip);
  return lr__strf("e2b: %s: HTTP %ld%s%s", step, res->status, snip[0] ? ": " : "", snip);
}

static uint64_t lr__fnv1a(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

static const struct lr_embedded *lr__runner_file(const char *name) {
  for (const struct lr_embedded *f = lr__runner_files; f->name; f++)
    if (strcmp(f->name, name) == 0) return f;
  return NULL;
}

/* ---- requests -------------------------------------------------------------- */

typedef struct lr_e2b_req {
  const char *method;
  char *url;
  const char *headers[8];
  size_t nheaders;
  const char *body;
  size_t body_len;
  uint64_t timeout_ms;
  int (*on_data)(void *ud, long status, const char *data, size_t len);
} lr_e2b_req;

static void lr__envd_headers(lr_e2b *e, lr_e2b_req *r, const char *content_type) {
  r->headers[r->nheaders++] = content_type;
  r->headers[r->nheaders++] = e->h_id;
  r->headers[r->nheaders++] = "E2b-Sandbox-Port: " LR_E2B_ENVD_PORT;
  r->headers[r->nheaders++] = e->h_auth;
  if (e->h_token[0]) r->headers[r->nheaders++] = e->h_token;
}

static lr_http_request *lr__send(lr_e2b *e, lr_e2b_req *r, lr_http_cb cb, void *ud, char err[LR_ERR_MAX]) {
  lr_http_options o = {
      .method = r->method,
      .url = r->url,
      .headers = r->headers,
      .nheaders = r->nheaders,
      .body = r->body,
      .body_len = r->body_len,
      .timeout_ms = r->timeout_ms,
      .max_response_bytes = (size_t)4 << 20,
      .on_data = r->on_data,
  };
  lr_http_request *req = lr__http_start(e->http, &o, cb, ud, err);
  free(r->url);
  r->url = NULL;
  return req;
}

/* A Start request's body: one envelope around the process's JSON. */
static void lr__start_body(lr_buf *out, const char *script, bool with_stdin) {
  lr_buf json = {0};
  lr__buf_append_str(&json, "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",");
  lr__json_write_string(script, strlen(script), &json);
  lr__buf_append_str(&json, "],\"envs\":{}}");
  if (with_stdin) lr__buf_append_str(&json, ",\"stdin\":true");
  lr__buf_append_char(&json, '}');
  lr__connect_envelope(out, 0, json.data, json.len);
  lr__buf_free(&json);
}

static lr_http_request *lr__start_process(lr_e2b *e, const char *script, bool with_stdin, uint64_t timeout_ms,
                                          int (*on_data)(void *, long, const char *, size_t), lr_http_cb cb,
                                          void *ud, char err[LR_ERR_MAX]) {
  lr_buf body = {0};
  lr__start_body(&body, script, with_stdin);
  lr_e2b_req r = {.method = "POST", .url = lr__strf("%s/process.Process/Start", e->envd_url),
                  .body = body.data, .body_len = body.len, .timeout_ms = timeout_ms, .on_data = on_data};
  lr__envd_headers(e, &r, "Content-Type: application/connect+json");
  r.headers[r.nheaders++] = "Connect-Protocol-Version: 1";
  lr_http_request *req = lr__send(e, &r, cb, ud, err);
  lr__buf_free(&body);
  return req;
}

/* The events of a process stream, for one envelope's JSON. */
typedef struct lr_proc_event {
  const char *kind; /* "start", "data", "end", "keepalive", or NULL */
  int64_t pid;
  const lr_json *stdout_b64, *stderr_b64;
  int64_t exit_code;
  int signal;
  const char *status;
} lr_proc_event;

static int lr__signal_number(const char *status) {
  static const struct { const char *name; int sig; } names[] = {
      {"killed", 9}, {"terminated", 15}, {"aborted", 6}, {"segmentation fault", 11}, {"hangup", 1},
      {"interrupt", 2}, {"broken pipe", 13}, {"bus error", 7}, {"floating point exception", 8}};
  if (!status || strncmp(status, "signal: ", 8) != 0) return 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(status + 8, names[i].name) == 0) return names[i].sig;
  return 9;
}

static void lr__read_event(const lr_json *msg, lr_proc_event *ev) {
  memset(ev, 0, sizeof *ev);
  const lr_json *event = lr__json_get(msg, "event");
  if (!event || event->type != LR_JOBJECT) return;
  const lr_json *v;
  if ((v = lr__json_get(event, "start"))) {
    ev->kind = "start";
    const lr_json *pid = lr__json_get(v, "pid");
    if (pid && pid->type == LR_JNUMBER) ev->pid = (int64_t)pid->u.num;
  } else if ((v = lr__json_get(event, "data"))) {
    ev->kind = "data";
    const lr_json *s = lr__json_get(v, "stdout"), *e = lr__json_get(v, "stderr");
    ev->stdout_b64 = s && s->type == LR_JSTRING ? s : NULL;
    ev->stderr_b64 = e && e->type == LR_JSTRING ? e : NULL;
  } else if ((v = lr__json_get(event, "end"))) {
    ev->kind = "end";
    const lr_json *code = lr__json_get(v, "exitCode"), *status = lr__json_get(v, "status");
    if (code && code->type == LR_JNUMBER) ev->exit_code = (int64_t)code->u.num;
    ev->status = status && status->type == LR_JSTRING ? status->u.str : NULL;
    ev->signal = lr__signal_number(ev->status);
  } else if (lr__json_get(event, "keepalive")) {
    ev->kind = "keepalive";
  }
}

/* The error of a flag-2 envelope, or NULL for a clean end. */
static char *lr__end_stream_error(const char *msg, size_t len) {
  lr_json v;
  char err[LR_ERR_MAX];
  if (lr__json_parse(msg, len, &v, err) != 0) return lr__strf("an end message that is not JSON");
  char *out = NULL;
  const lr_json *error = lr__json_get(&v, "error");
  if (error && error->type != LR_JNULL) {
    const lr_json *code = lr__json_get(error, "code"), *m = lr__json_get(error, "message");
    out = lr__strf("%s: %.300s", code && code->type == LR_JSTRING ? code->u.str : "error",
                   m && m->type == LR_JSTRING ? m->u.str : "");
  }
  lr__json_free(&v);
  return out;
}

/* ---- short commands: the Node check and the kills -------------------------- */

typedef struct lr_cmd {
  lr_e2b *e2b;
  lr_e2b_sb *sb; /* a kill's run, or NULL for the Node check */
  lr_connect_reader reader;
  lr_buf out;
  int64_t exit_code;
  bool ended;
} lr_cmd;

static int lr__cmd_on_envelope(void *ud, unsigned flags, const char *msg, size_t len) {
  lr_cmd *c = ud;
  if (flags & LR_CONNECT_END_STREAM) return 0;
  lr_json v;
  char err[LR_ERR_MAX];
  if (lr__json_parse(msg, len, &v, err) != 0) return 0;
  lr_proc_event ev;
  lr__read_event(&v, &ev);
  if (ev.kind && strcmp(ev.kind, "data") == 0 && ev.stdout_b64 && c->out.len < 4096)
    (void)lr__base64_decode_append(&c->out, ev.stdout_b64->u.str, ev.stdout_b64->len, err);
  if (ev.kind && strcmp(ev.kind, "end") == 0) {
    c->ended = true;
    c->exit_code = ev.signal ? 128 + ev.signal : ev.exit_code;
  }
  lr__json_free(&v);
  return 0;
}

static int lr__cmd_on_data(void *ud, long status, const char *data, size_t len) {
  lr_cmd *c = ud;
  if (status != 200) return 0; /* the body is kept by nobody: the status says it */
  char err[LR_ERR_MAX];
  return lr__connect_feed(&c->reader, data, len, lr__cmd_on_envelope, c, err) < 0 ? 1 : 0;
}

static lr_cmd *lr__cmd_new(lr_e2b *e, lr_e2b_sb *sb) {
  lr_cmd *c = lr__xcalloc(1, sizeof *c);
  c->e2b = e;
  c->sb = sb;
  lr__connect_reader_init(&c->reader, LR_E2B_MAX_ENVELOPE);
  return c;
}

static void lr__cmd_free(lr_cmd *c) {
  lr__connect_reader_free(&c->reader);
  lr__buf_free(&c->out);
  free(c);
}

/* ---- the remote sandbox: create, upload, check ----------------------------- */

static void lr__sb_fail(lr_e2b_sb *sb, const char *message);
static void lr__sb_begin(lr_e2b_sb *sb);

static void lr__waiting_remove(lr_e2b_sb *sb) {
  lr_e2b *e = sb->e2b;
  if (sb->prev) sb->prev->next = sb->next;
  else if (e->waiting == sb) e->waiting = sb->next;
  if (sb->next) sb->next->prev = sb->prev;
  sb->next = sb->prev = NULL;
}

static void lr__e2b_forget(lr_e2b *e) {
  free(e->sandbox_id);
  free(e->envd_url);
  e->sandbox_id = e->envd_url = NULL;
  e->h_token[0] = e->h_id[0] = '\0';
  e->state = LR_REMOTE_NONE;
}

static void lr__on_deleted(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_e2b *e = ud;
  e->requests--;
  lr__e2b_maybe_closed(e);
}

/* Deletes the remote sandbox (404: already gone) and forgets it. */
static void lr__e2b_delete(lr_e2b *e) {
  if (!e->sandbox_id) return;
  char err[LR_ERR_MAX];
  lr_e2b_req r = {.method = "DELETE", .url = lr__strf("%s/sandboxes/%s", e->api_url, e->sandbox_id),
                  .timeout_ms = LR_E2B_UNARY_TIMEOUT_MS};
  r.headers[r.nheaders++] = e->h_api_key;
  if (lr__send(e, &r, lr__on_deleted, e, err)) e->requests++;
  lr__e2b_forget(e);
}

/* The preparation ended: the waiting runs start, or fail with its error. */
static void lr__prep_done(lr_e2b *e) {
  if (e->prep_pending > 0) return;
  char *error = e->prep_error;
  e->prep_error = NULL;
  if (error) {
    lr__e2b_delete(e);
    e->state = LR_REMOTE_NONE;
  } else {
    e->state = LR_REMOTE_READY;
    e->used_at = uv_now(e->loop);
  }
  while (e->waiting) {
    lr_e2b_sb *sb = e->waiting;
    lr__waiting_remove(sb);
    if (error) lr__sb_fail(sb, error);
    else lr__sb_begin(sb);
  }
  free(error);
  lr__e2b_maybe_closed(e);
}

static void lr__prep_fail(lr_e2b *e, char *message) {
  if (!e->prep_error) e->prep_error = message;
  else free(message);
}

static void lr__on_node_checked(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_cmd *c = ud;
  lr_e2b *e = c->e2b;
  e->requests--;
  e->prep_pending--;
  if (error || res->status != 200) {
    lr__prep_fail(e, lr__http_failure(e, "check the sandbox's Node", res, error));
  } else if (!c->ended) {
    lr__prep_fail(e, lr__strf("e2b: check the sandbox's Node: the command's stream ended without its end event"));
  } else {
    /* "v22.13.0\n" */
    char version[64] = "";
    snprintf(version, sizeof version, "%.*s", (int)strcspn(c->out.data ? c->out.data : "", "\r\n"),
             c->out.data ? c->out.data : "");
    /* The host's own rule (node_version.c); the host strips types, so the
     * remote needs the runner's features only, which come with the same
     * versions. */
    if (c->exit_code != 0 || version[0] != 'v')
      lr__prep_fail(e, lr__strf("e2b: check the sandbox's Node: `node --version` in template \"%s\" %s%s%s "
                                "(lunarun needs Node >= " LR_NODE_MIN_TEXT " on the sandbox's PATH; README, \"E2B\")",
                                e->template_id, c->exit_code == 127 ? "found no node" : "failed",
                                version[0] ? ", printing " : "", version));
    else if (!lr__node_version_ok(version))
      lr__prep_fail(e, lr__strf("e2b: the sandbox's Node is %s, lunarun's runner needs Node >= " LR_NODE_MIN_TEXT
                                " (template \"%s\"; README, \"E2B\", says which templates carry one)",
                                version, e->template_id));
  }
  lr__cmd_free(c);
  lr__prep_done(e);
}

static void lr__check_node(lr_e2b *e) {
  char err[LR_ERR_MAX];
  lr_cmd *c = lr__cmd_new(e, NULL);
  if (lr__start_process(e, "exec node --version", false, LR_E2B_UNARY_TIMEOUT_MS, lr__cmd_on_data,
                        lr__on_node_checked, c, err)) {
    e->requests++;
    e->prep_pending++;
  } else {
    lr__prep_fail(e, lr__strf("e2b: check the sandbox's Node: %s", err));
    lr__cmd_free(c);
  }
}

typedef struct lr_upload {
  lr_e2b *e2b;
  const char *name;
} lr_upload;

static void lr__on_uploaded(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_upload *u = ud;
  lr_e2b *e = u->e2b;
  e->requests--;
  e->prep_pending--;
  if (error || res->status != 200) {
    char step[96];
    snprintf(step, sizeof step, "upload the runner (%s)", u->name);
    lr__prep_fail(e, lr__http_failure(e, step, res, error));
  }
  free(u);
  /* The check runs once the files are there, on the same connection pool. */
  if (e->prep_pending == 0 && !e->prep_error) lr__check_node(e);
  lr__prep_done(e);
}

static void lr__upload_runner(lr_e2b *e) {
  static const char boundary[] = "lunarun-e2b-upload-7f3a9c";
  for (const char *const *name = lr__e2b_runner_files; *name; name++) {
    const struct lr_embedded *f = lr__runner_file(*name);
    if (!f) {
      lr__prep_fail(e, lr__strf("e2b: upload the runner: %s is not embedded", *name));
      continue;
    }
    lr_buf body = {0};
    lr__buf_append_str(&body, "--");
    lr__buf_append_str(&body, boundary);
    lr__buf_append_str(&body, "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"");
    lr__buf_append_str(&body, *name);
    lr__buf_append_str(&body, "\"\r\nContent-Type: application/octet-stream\r\n\r\n");
    lr__buf_append(&body, f->data, f->len);
    lr__buf_append_str(&body, "\r\n--");
    lr__buf_append_str(&body, boundary);
    lr__buf_append_str(&body, "--\r\n");
    lr_e2b_req r = {.method = "POST",
                    .url = lr__strf("%s/files?path=%s/%s&username=%s", e->envd_url, e->runner_dir, *name, e->user),
                    .body = body.data, .body_len = body.len, .timeout_ms = LR_E2B_CONTROL_TIMEOUT_MS};
    lr__envd_headers(e, &r, "Content-Type: multipart/form-data; boundary=lunarun-e2b-upload-7f3a9c");
    lr_upload *u = lr__xcalloc(1, sizeof *u);
    u->e2b = e;
    u->name = *name;
    char err[LR_ERR_MAX];
    if (lr__send(e, &r, lr__on_uploaded, u, err)) {
      e->requests++;
      e->prep_pending++;
    } else {
      lr__prep_fail(e, lr__strf("e2b: upload the runner (%s): %s", *name, err));
      free(u);
    }
    lr__buf_free(&body);
  }
}

static void lr__on_created(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_e2b *e = ud;
  e->requests--;
  e->prep_pending--;
  char step[160];
  snprintf(step, sizeof step, "create a sandbox (template \"%.100s\")", e->template_id);
  lr_json v;
  char err[LR_ERR_MAX];
  bool parsed = !error && (res->status == 200 || res->status == 201) &&
                lr__json_parse(res->body, res->body_len, &v, err) == 0;
  if (!parsed) {
    if (!error && (res->status == 200 || res->status == 201))
      lr__prep_fail(e, lr__strf("e2b: %s: the reply is not JSON", step));
    else
      lr__prep_fail(e, lr__http_failure(e, step, res, error));
    lr__prep_done(e);
    return;
  }
  const lr_json *id = lr__json_get(&v, "sandboxID"), *token = lr__json_get(&v, "envdAccessToken"),
                *domain = lr__json_get(&v, "domain");
  bool id_ok = id && id->type == LR_JSTRING && id->len > 0 && id->len < 128 &&
               strspn(id->u.str, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == id->len;
  if (!id_ok) {
    lr__prep_fail(e, lr__strf("e2b: %s: the reply has no usable sandboxID", step));
  } else {
    e->sandbox_id = lr__xstrdup(id->u.str);
    snprintf(e->h_id, sizeof e->h_id, "E2b-Sandbox-Id: %s", e->sandbox_id);
    if (token && token->type == LR_JSTRING && token->len < 400 && !strpbrk(token->u.str, "\r\n"))
      snprintf(e->h_token, sizeof e->h_token, "X-Access-Token: %s", token->u.str);
    const char *d = domain && domain->type == LR_JSTRING && domain->len > 0 && !strpbrk(domain->u.str, "/\r\n ")
                        ? domain->u.str
                        : e->domain;
    e->envd_url = e->sandbox_url ? lr__xstrdup(e->sandbox_url)
                                 : lr__strf("https://" LR_E2B_ENVD_PORT "-%s.%s", e->sandbox_id, d);
    lr__upload_runner(e);
  }
  lr__json_free(&v);
  lr__prep_done(e);
}

/* Makes the remote sandbox; the waiting runs start once it is ready. */
static void lr__e2b_prepare(lr_e2b *e) {
  if (e->state != LR_REMOTE_NONE || e->closing) return;
  e->state = LR_REMOTE_PREPARING;
  lr_buf body = {0};
  char num[32];
  lr__buf_append_str(&body, "{\"templateID\":");
  lr__json_write_string(e->template_id, strlen(e->template_id), &body);
  lr__json_number((double)((e->timeout_ms + 999) / 1000), num);
  lr__buf_append_str(&body, ",\"timeout\":");
  lr__buf_append_str(&body, num);
  lr__buf_append_str(&body, ",\"secure\":true,\"allow_internet_access\":");
  lr__buf_append_str(&body, e->internet ? "true" : "false");
  lr__buf_append_str(&body, ",\"metadata\":{\"createdBy\":\"lunarun\"}}");
  lr_e2b_req r = {.method = "POST", .url = lr__strf("%s/sandboxes", e->api_url), .body = body.data,
                  .body_len = body.len, .timeout_ms = LR_E2B_CONTROL_TIMEOUT_MS};
  r.headers[r.nheaders++] = e->h_api_key;
  r.headers[r.nheaders++] = "Content-Type: application/json";
  char err[LR_ERR_MAX];
  if (lr__send(e, &r, lr__on_created, e, err)) {
    e->requests++;
    e->prep_pending++;
  } else {
    lr__prep_fail(e, lr__strf("e2b: create a sandbox: %s", err));
    lr__prep_done(e);
  }
  lr__buf_free(&body);
}

/* ---- keeping the remote sandbox alive ---------------------------------------- */

static void lr__on_refreshed(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_e2b *e = ud;
  e->requests--;
  lr__e2b_maybe_closed(e);
}

static void lr__on_refresh(uv_timer_t *t) {
  lr_e2b *e = t->data;
  if (e->state != LR_REMOTE_READY || e->active == 0 || e->closing) {
    uv_timer_stop(t);
    return;
  }
  e->used_at = uv_now(e->loop);
  char num[32], err[LR_ERR_MAX];
  lr__json_number((double)((e->timeout_ms + 999) / 1000), num);
  char *body = lr__strf("{\"timeout\":%s}", num);
  lr_e2b_req r = {.method = "POST", .url = lr__strf("%s/sandboxes/%s/timeout", e->api_url, e->sandbox_id),
                  .body = body, .body_len = strlen(body), .timeout_ms = LR_E2B_UNARY_TIMEOUT_MS};
  r.headers[r.nheaders++] = e->h_api_key;
  r.headers[r.nheaders++] = "Content-Type: application/json";
  if (lr__send(e, &r, lr__on_refreshed, e, err)) e->requests++;
  free(body);
}

/* ---- one run's launcher ------------------------------------------------------ */

static void lr__sb_on_handle_closed(uv_handle_t *h) {
  lr_e2b_sb *sb = h->data;
  if (--sb->open_handles > 0) return;
  lr_e2b *e = sb->e2b;
  void (*cb)(void *) = sb->on_gone;
  void *owner = sb->owner;
  lr__connect_reader_free(&sb->reader);
  lr__buf_free(&sb->err_body);
  lr__buf_free(&sb->outbox);
  free(sb->stream_error);
  free(sb->failure);
  free(sb);
  lr__e2b_maybe_closed(e);
  if (cb) cb(owner);
}

/* Gone: released, and no request of it in flight. */
static void lr__sb_maybe_gone(lr_e2b_sb *sb) {
  if (sb->gone || !sb->released || sb->stream || sb->input || sb->kills) return;
  sb->gone = true;
  if (sb->counted) sb->e2b->active--;
  uv_close((uv_handle_t *)&sb->timer, lr__sb_on_handle_closed);
  uv_close((uv_handle_t *)&sb->kick, lr__sb_on_handle_closed);
}

/* Something failed that the run must hear about (from the prepare handle,
 * never from inside libcurl). */
static void lr__sb_fail(lr_e2b_sb *sb, const char *message) {
  if (!sb->failure && !sb->terminating) sb->failure = lr__xstrdup(message);
  if (sb->state == LR_SB_WAITING && !sb->stream) sb->state = LR_SB_ENDED;
  lr__sb_poke(sb);
}

static void lr__sb_ended(lr_e2b_sb *sb) {
  sb->state = LR_SB_ENDED;
  uv_timer_stop(&sb->timer);
  lr__sb_poke(sb);
}

static int lr__sb_on_envelope(void *ud, unsigned flags, const char *msg, size_t len) {
  lr_e2b_sb *sb = ud;
  if (flags & LR_CONNECT_END_STREAM) {
    sb->end_stream_seen = true;
    sb->stream_error = lr__end_stream_error(msg, len);
    return 0;
  }
  lr_json v;
  char err[LR_ERR_MAX];
  if (lr__json_parse(msg, len, &v, err) != 0) {
    lr__sb_fail(sb, "e2b: the runner's process stream sent an event that is not JSON");
    return 1;
  }
  lr_proc_event ev;
  lr__read_event(&v, &ev);
  const lr_sandbox_events *h = sb->ev;
  if (!ev.kind) {
    /* Unknown events are for newer clients. */
  } else if (strcmp(ev.kind, "start") == 0) {
    if (ev.pid > 0 && sb->state == LR_SB_STARTING) {
      sb->pid = ev.pid;
      sb->state = LR_SB_RUNNING;
      lr__sb_poke(sb); /* input waiting for the pid, or a kill */
    }
  } else if (strcmp(ev.kind, "data") == 0) {
    lr_buf bytes = {0};
    if (ev.stdout_b64) {
      if (lr__base64_decode_append(&bytes, ev.stdout_b64->u.str, ev.stdout_b64->len, err) != 0) {
        lr__sb_fail(sb, "e2b: the runner's stdout event is not base64");
      } else if (bytes.len && h && h->on_frames) {
        h->on_frames(sb->ud, bytes.data, bytes.len);
      }
      bytes.len = 0;
    }
    if (ev.stderr_b64 && lr__base64_decode_append(&bytes, ev.stderr_b64->u.str, ev.stderr_b64->len, err) == 0) {
      lr_buf text = {0};
      lr__utf8_stream_feed(&sb->err_utf8, bytes.data, bytes.len, false, &text);
      if (text.len && h && h->on_output) h->on_output(sb->ud, text.data, text.len);
      lr__buf_free(&text);
    }
    lr__buf_free(&bytes);
  } else if (strcmp(ev.kind, "end") == 0 && !sb->end_event_seen) {
    sb->end_event_seen = true;
    lr_buf text = {0};
    lr__utf8_stream_feed(&sb->err_utf8, "", 0, true, &text);
    if (text.len && h && h->on_output) h->on_output(sb->ud, text.data, text.len);
    lr__buf_free(&text);
    if (h && h->on_frames_end) h->on_frames_end(sb->ud);
    if (h && h->on_exit) h->on_exit(sb->ud, ev.signal ? 0 : ev.exit_code, ev.signal);
  }
  lr__json_free(&v);
  return 0;
}

static int lr__sb_on_data(void *ud, long status, const char *data, size_t len) {
  lr_e2b_sb *sb = ud;
  sb->status = status;
  if (status != 200) {
    if (sb->err_body.len < 4096) lr__buf_append(&sb->err_body, data, len);
    return 0;
  }
  char err[LR_ERR_MAX];
  if (lr__connect_feed(&sb->reader, data, len, lr__sb_on_envelope, sb, err) < 0) {
    char *m = lr__strf("e2b: the runner's process stream is broken: %s", err);
    lr__sb_fail(sb, m);
    free(m);
    return 1;
  }
  return 0;
}

static void lr__sb_on_stream_done(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_e2b_sb *sb = ud;
  lr_e2b *e = sb->e2b;
  sb->stream = NULL;
  char *why = NULL;
  if (error) {
    why = lr__strf("e2b: the runner's process stream broke off: %s (%s)", error->message,
                   lr__http_err_name(error->code));
  } else if (res->status != 200) {
    char snip[240];
    lr__snippet(e, sb->err_body.data ? sb->err_body.data : "", sb->err_body.len, snip, sizeof snip);
    why = lr__strf("e2b: start the runner: HTTP %ld%s%s", res->status, snip[0] ? ": " : "", snip);
    /* The sandbox is gone (expired, killed): the next run makes a new one. */
    if ((res->status == 404 || res->status == 502) && e->state == LR_REMOTE_READY) lr__e2b_delete(e);
  } else if (!lr__connect_at_boundary(&sb->reader)) {
    why = lr__strf("e2b: the runner's process stream ended inside an envelope");
  } else if (sb->stream_error) {
    why = lr__strf("e2b: envd ended the runner's process stream with an error: %s", sb->stream_error);
  } else if (!sb->end_stream_seen) {
    why = lr__strf("e2b: the runner's process stream ended without its end message");
  } else if (!sb->end_event_seen) {
    why = lr__strf("e2b: the runner's process ended without an end event");
  }
  if (why && !sb->end_event_seen) lr__sb_fail(sb, why);
  free(why);
  lr__sb_ended(sb);
}

/* Starts the launcher; the remote is ready. */
static void lr__sb_begin(lr_e2b_sb *sb) {
  lr_e2b *e = sb->e2b;
  if (sb->terminating) {
    lr__sb_ended(sb);
    return;
  }
  sb->state = LR_SB_STARTING;
  sb->counted = true;
  e->active++;
  e->used_at = uv_now(e->loop);
  if (!uv_is_active((uv_handle_t *)&e->refresh)) {
    uint64_t every = e->timeout_ms / 3 > 1000 ? e->timeout_ms / 3 : 1000;
    uv_timer_start(&e->refresh, lr__on_refresh, every, every);
  }
  /* setsid: envd starts commands in its own group and signals one pid; as
   * a group leader the launcher and its children can be killed at once.
   * The permission model keeps the program to the runner and /tmp. */
  /* maxProcessMemoryMb as locally (RLIMIT_AS bounds Buffers, which the
   * heap cap does not), where the template has util-linux's prlimit. */
  char *script = lr__strf(
      "d=\"$PWD/%s\"; cap=; command -v prlimit >/dev/null 2>&1 && cap=\"prlimit --as=%" PRIu64 " --core=0 --\"; "
      "exec setsid $cap node --permission --allow-fs-read=\"$d/\" --allow-fs-read=/tmp/ "
      "--allow-fs-write=/tmp/ --allow-worker --allow-child-process --disable-warning=ExperimentalWarning "
      "--disable-warning=PERM0006 --disable-warning=PERM0002 \"$d/launcher.mjs\"%s",
      e->runner_dir, sb->memory_mb * 1024 * 1024, sb->allow_children ? "" : " --no-child-processes");
  char err[LR_ERR_MAX];
  sb->stream = lr__start_process(e, script, true, sb->stream_timeout_ms, lr__sb_on_data, lr__sb_on_stream_done,
                                 sb, err);
  free(script);
  if (!sb->stream) {
    char *m = lr__strf("e2b: start the runner: %s", err);
    lr__sb_fail(sb, m);
    free(m);
    lr__sb_ended(sb);
  }
}

static void lr__sb_on_input_sent(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_e2b_sb *sb = ud;
  sb->input = NULL;
  if ((error || res->status != 200) && !sb->terminating && sb->state == LR_SB_RUNNING) {
    char *m = lr__http_failure(sb->e2b, "send input to the runner", res, error);
    lr__sb_fail(sb, m);
    free(m);
  }
  lr__sb_poke(sb);
}

static void lr__sb_send_input(lr_e2b_sb *sb) {
  lr_e2b *e = sb->e2b;
  size_t n = sb->outbox.len < LR_E2B_INPUT_CHUNK ? sb->outbox.len : LR_E2B_INPUT_CHUNK;
  lr_buf body = {0};
  char num[32];
  lr__json_number((double)sb->pid, num);
  lr__buf_append_str(&body, "{\"process\":{\"pid\":");
  lr__buf_append_str(&body, num);
  lr__buf_append_str(&body, "},\"input\":{\"stdin\":\"");
  lr__base64_append(&body, sb->outbox.data, n);
  lr__buf_append_str(&body, "\"}}");
  memmove(sb->outbox.data, sb->outbox.data + n, sb->outbox.len - n);
  sb->outbox.len -= n;
  lr_e2b_req r = {.method = "POST", .url = lr__strf("%s/process.Process/SendInput", e->envd_url),
                  .body = body.data, .body_len = body.len, .timeout_ms = LR_E2B_UNARY_TIMEOUT_MS};
  lr__envd_headers(e, &r, "Content-Type: application/json");
  r.headers[r.nheaders++] = "Connect-Protocol-Version: 1";
  char err[LR_ERR_MAX];
  sb->input = lr__send(e, &r, lr__sb_on_input_sent, sb, err);
  lr__buf_free(&body);
  if (!sb->input) {
    char *m = lr__strf("e2b: send input to the runner: %s", err);
    lr__sb_fail(sb, m);
    free(m);
  }
}

static void lr__on_kill_done(void *ud, const lr_http_response *res, const lr_http_error *error) {
  lr_cmd *c = ud;
  lr_e2b_sb *sb = c->sb;
  sb->kills--;
  lr__cmd_free(c);
  lr__sb_poke(sb);
}

/* Signals the launcher's group and the groups of its children (the
 * controller runs in a group of its own). procps' kill: dash's builtin
 * takes no "--" and reads "-PID" as an option. */
static void lr__sb_kill(lr_e2b_sb *sb, const char *sig) {
  char *script = lr__strf("p=%" PRId64 "; g=\"-$p\"; for c in $(pgrep -P $p 2>/dev/null); do g=\"$g -$c\"; done; "
                          "env kill -%s -- $g 2>/dev/null; exit 0",
                          sb->pid, sig);
  lr_cmd *c = lr__cmd_new(sb->e2b, sb);
  char err[LR_ERR_MAX];
  if (lr__start_process(sb->e2b, script, false, LR_E2B_KILL_TIMEOUT_MS, lr__cmd_on_data, lr__on_kill_done, c, err))
    sb->kills++;
  else
    lr__cmd_free(c);
  free(script);
}

static void lr__sb_on_timer(uv_timer_t *t) {
  lr_e2b_sb *sb = t->data;
  if (sb->state == LR_SB_ENDED) return;
  if (sb->state == LR_SB_RUNNING && !sb->kill_sent) {
    /* The grace is over. */
    sb->kill_sent = true;
    lr__sb_kill(sb, "KILL");
    uv_timer_start(&sb->timer, lr__sb_on_timer, LR_E2B_GIVE_UP_MS, 0);
    return;
  }
  /* No start event, or no end event after KILL: stop waiting. */
  if (sb->stream) {
    lr__http_cancel(sb->stream);
    sb->stream = NULL;
  }
  lr__sb_ended(sb);
}

/* The sandbox's deferred work, once per loop turn while there is some. */
static void lr__sb_on_kick(uv_prepare_t *p) {
  lr_e2b_sb *sb = p->data;
  uv_prepare_stop(p);
  if (sb->failure && !sb->terminating) {
    char *m = sb->failure;
    sb->failure = NULL;
    if (sb->ev && sb->ev->on_failed) sb->ev->on_failed(sb->ud, m);
    free(m);
  }
  if (!sb->terminating) {
    if (sb->ev && sb->ev->on_flush) sb->ev->on_flush(sb->ud);
    if (sb->state == LR_SB_RUNNING && sb->outbox.len && !sb->input) lr__sb_send_input(sb);
    return;
  }
  if (sb->state == LR_SB_WAITING) {
    lr__waiting_remove(sb);
    sb->state = LR_SB_ENDED;
  }
  if (sb->state == LR_SB_RUNNING && !sb->term_sent) {
    sb->term_sent = true;
    if (sb->grace_ms == 0) {
      sb->kill_sent = true;
      lr__sb_kill(sb, "KILL");
      uv_timer_start(&sb->timer, lr__sb_on_timer, LR_E2B_GIVE_UP_MS, 0);
    } else {
      lr__sb_kill(sb, "TERM");
      uv_timer_start(&sb->timer, lr__sb_on_timer, sb->grace_ms, 0);
    }
  }
  if (sb->state == LR_SB_ENDED && !sb->released) {
    sb->released = true;
    if (sb->ev && sb->ev->on_released) sb->ev->on_released(sb->ud);
    sb->ev = NULL;
  }
  lr__sb_maybe_gone(sb);
}

static void lr__sb_poke(lr_e2b_sb *sb) {
  if (!sb->gone) uv_prepare_start(&sb->kick, lr__sb_on_kick);
}

static void lr__e2b_attach(lr_sandbox *base, const lr_sandbox_events *events, void *ud) {
  lr_e2b_sb *sb = (lr_e2b_sb *)base;
  sb->ev = events;
  sb->ud = ud;
  lr__sb_poke(sb); /* a failure may be waiting for its run */
}

static bool lr__e2b_alive(const lr_sandbox *base) {
  const lr_e2b_sb *sb = (const lr_e2b_sb *)base;
  return !sb->terminating && sb->state != LR_SB_ENDED;
}

static void lr__e2b_write(lr_sandbox *base, char *data, size_t len) {
  lr_e2b_sb *sb = (lr_e2b_sb *)base;
  if (!sb->terminating && sb->state != LR_SB_ENDED) {
    lr__buf_append(&sb->outbox, data, len);
    lr__sb_poke(sb);
  }
  free(data);
}

static void lr__e2b_kick(lr_sandbox *base) {
  lr_e2b_sb *sb = (lr_e2b_sb *)base;
  if (!sb->terminating && sb->state != LR_SB_ENDED) lr__sb_poke(sb);
}

static void lr__e2b_terminate(lr_sandbox *base) {
  lr_e2b_sb *sb = (lr_e2b_sb *)base;
  if (sb->terminating) return;
  sb->terminating = true;
  free(sb->failure);
  sb->failure = NULL;
  lr__buf_free(&sb->outbox);
  if (sb->state == LR_SB_STARTING) uv_timer_start(&sb->timer, lr__sb_on_timer, sb->grace_ms + LR_E2B_GIVE_UP_MS, 0);
  lr__sb_poke(sb);
}

static const lr_sandbox_ops lr__e2b_ops = {
    .attach = lr__e2b_attach,
    .alive = lr__e2b_alive,
    .write = lr__e2b_write,
    .kick = lr__e2b_kick,
    .terminate = lr__e2b_terminate,
};

int lr__sandbox_e2b_start(lr_e2b *e, const lr_sandbox_spec *spec, lr_sandbox **out, char err[LR_ERR_MAX]) {
  *out = NULL;
  if (e->closing) return lr__errf(err, "e2b: the runtime is closing");
  lr_e2b_sb *sb = lr__xcalloc(1, sizeof *sb);
  sb->base.ops = &lr__e2b_ops;
  sb->base.token[0] = '\0'; /* the launcher checks the controller's token */
  sb->e2b = e;
  sb->on_gone = spec->on_gone;
  sb->owner = spec->owner;
  sb->grace_ms = spec->cfg->kill_grace_ms;
  sb->allow_children = spec->cfg->allow_child_processes;
  sb->memory_mb = spec->cfg->max_process_memory_mb;
  sb->stream_timeout_ms = spec->cfg->max_wall_ms + 2 * spec->cfg->kill_grace_ms + LR_E2B_GIVE_UP_MS;
  lr__connect_reader_init(&sb->reader, LR_E2B_MAX_ENVELOPE);
  uv_timer_init(e->loop, &sb->timer);
  uv_prepare_init(e->loop, &sb->kick);
  sb->timer.data = sb->kick.data = sb;
  sb->open_handles = 2;
  /* A sandbox idle for nearly its lifetime may have expired: start anew. */
  if (e->state == LR_REMOTE_READY && e->active == 0 &&
      uv_now(e->loop) - e->used_at + 5000 > e->timeout_ms)
    lr__e2b_delete(e);
  if (e->state == LR_REMOTE_READY) {
    lr__sb_begin(sb);
  } else {
    /* In arrival order: the first run waiting starts first. */
    lr_e2b_sb **tail = &e->waiting;
    while (*tail) {
      sb->prev = *tail;
      tail = &(*tail)->next;
    }
    *tail = sb;
    lr__e2b_prepare(e);
  }
  *out = &sb->base;
  return 0;
}

/* ---- the client ------------------------------------------------------------- */

lr_e2b *lr__e2b_new(uv_loop_t *loop, const lr_config *cfg, char err[LR_ERR_MAX]) {
  const char *key = getenv("E2B_API_KEY");
  if (!key || !*key)
    return lr__errf(err, "config: backend \"e2b\" needs an E2B API key in $E2B_API_KEY (it is never read from a "
                         "config)"), NULL;
  if (strpbrk(key, "\r\n")) return lr__errf(err, "config: $E2B_API_KEY must be one line"), NULL;
  const char *domain = cfg->e2b_domain;
  if (!domain || !*domain) domain = getenv("E2B_DOMAIN");
  if (!domain || !*domain) domain = "e2b.app";
  const char *api = cfg->e2b_api_url;
  if (!api || !*api) api = getenv("E2B_API_URL");
  const char *sbx = cfg->e2b_sandbox_url;
  if (!sbx || !*sbx) sbx = getenv("E2B_SANDBOX_URL");
  const char *user = cfg->e2b_user && *cfg->e2b_user ? cfg->e2b_user : "user";
  if (strpbrk(user, ":&=/?#%+ \r\n")) return lr__errf(err, "config: e2bUser \"%.100s\" is not a user name", user), NULL;
  const char *tmpl = cfg->e2b_template && *cfg->e2b_template ? cfg->e2b_template : "base";
  lr_http_url parts;
  char inner[LR_ERR_MAX];
  char *api_url = api && *api ? lr__trim_slash(api) : lr__strf("https://api.%s", domain);
  if (lr__http_url_parse(api_url, &parts, inner) != 0) {
    lr__errf(err, "config: e2bApiUrl: %s", inner);
    free(api_url);
    return NULL;
  }
  if (sbx && *sbx && lr__http_url_parse(sbx, &parts, inner) != 0) {
    lr__errf(err, "config: e2bSandboxUrl: %s", inner);
    free(api_url);
    return NULL;
  }
  lr_http_client *http = lr__http_client_new(loop, err);
  if (!http) {
    free(api_url);
    return NULL;
  }
  lr_e2b *e = lr__xcalloc(1, sizeof *e);
  e->loop = loop;
  e->http = http;
  e->api_key = lr__xstrdup(key);
  e->api_url = api_url;
  e->sandbox_url = sbx && *sbx ? lr__trim_slash(sbx) : NULL;
  e->domain = lr__xstrdup(domain);
  e->template_id = lr__xstrdup(tmpl);
  e->user = lr__xstrdup(user);
  e->timeout_ms = cfg->e2b_timeout_ms;
  e->internet = cfg->network_host;
  snprintf(e->h_api_key, sizeof e->h_api_key, "X-API-Key: %s", key);
  lr_buf cred = {0}, b64 = {0};
  lr__buf_append_str(&cred, user);
  lr__buf_append_char(&cred, ':');
  lr__base64_append(&b64, cred.data, cred.len);
  snprintf(e->h_auth, sizeof e->h_auth, "Authorization: Basic %s", b64.data);
  lr__buf_free(&cred);
  lr__buf_free(&b64);
  /* The runner's folder is named by its content: a runtime of another
   * lunarun version never runs these files. */
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *const *name = lr__e2b_runner_files; *name; name++) {
    const struct lr_embedded *f = lr__runner_file(*name);
    if (f) h = lr__fnv1a(lr__fnv1a(h, f->name, strlen(f->name)), f->data, f->len);
  }
  snprintf(e->runner_dir, sizeof e->runner_dir, ".lunarun/runner-%016" PRIx64, h);
  uv_timer_init(loop, &e->refresh);
  e->refresh.data = e;
  return e;
}

static void lr__e2b_on_http_closed(void *ud) {
  lr_e2b *e = ud;
  void (*cb)(void *) = e->on_closed;
  void *cud = e->closed_ud;
  free(e->api_key);
  free(e->api_url);
  free(e->sandbox_url);
  free(e->domain);
  free(e->template_id);
  free(e->user);
  free(e->prep_error);
  free(e);
  if (cb) cb(cud);
}

static void lr__e2b_on_refresh_closed(uv_handle_t *h) {
  lr_e2b *e = h->data;
  e->refresh_closed = true;
  lr__e2b_maybe_closed(e);
}

/* Closing: once no run and no preparation is left, the remote sandbox is
 * deleted, then the client closes. */
static void lr__e2b_maybe_closed(lr_e2b *e) {
  if (!e->closing || e->active > 0 || e->waiting || e->state == LR_REMOTE_PREPARING) return;
  if (e->sandbox_id) lr__e2b_delete(e); /* counted in requests */
  if (e->requests > 0) return;
  if (!e->refresh_closed) {
    if (!uv_is_closing((uv_handle_t *)&e->refresh)) uv_close((uv_handle_t *)&e->refresh, lr__e2b_on_refresh_closed);
    return;
  }
  lr_http_client *http = e->http;
  if (!http) return;
  e->http = NULL;
  lr__http_client_close(http, lr__e2b_on_http_closed, e);
}

void lr__e2b_close(lr_e2b *e, void (*on_closed)(void *ud), void *ud) {
  if (e->closing) return;
  e->closing = true;
  e->on_closed = on_closed;
  e->closed_ud = ud;
  uv_timer_stop(&e->refresh);
  lr__e2b_maybe_closed(e);
}
