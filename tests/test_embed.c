/* Embeds lunarun through its public header only, as a C host would: a loop
 * of our own, a runtime, a namespace with a synchronous C binding, one with
 * an asynchronous C binding (completed from a uv_timer, with a cancel
 * callback), a Lua bindings file, streaming logs, misuse, abort, several
 * runs at once, and disposal with runs in flight. After disposal the loop
 * must close cleanly (no handle left) and no process of ours may be left.
 *
 * Everything runs under a private folder (runtimeRoot), so the leftover
 * check sees this test's processes only. Needs Node: LUNARUN_NODE or the
 * build's default. */
#include <lunarun.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/check.h"

#define CHECK_HAS(hay, needle)                                                          \
  do {                                                                                  \
    const char *h_ = (hay), *n_ = (needle);                                             \
    if (h_ && strstr(h_, n_)) {                                                         \
      lr_check_passed++;                                                                \
    } else {                                                                            \
      lr_check_failed++;                                                                \
      fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,    \
              h_ ? h_ : "(null)", n_);                                                  \
    }                                                                                   \
  } while (0)

static uv_loop_t loop;
static char root[256]; /* the private runtimeRoot */

static char *xstrndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* ---- one run, as the test sees it ---------------------------------------- */

#define MAX_LOGS 16

typedef struct job {
  const char *name;
  lr_run *run;
  bool done;
  int done_order;          /* 1, 2, ... in completion order */
  lr_kind kind;
  char *value;             /* copies: what a callback gets is valid only during it */
  char *message;
  char *json;              /* lr_result_json */
  size_t nlogs;
  char *logs[MAX_LOGS];
  size_t nstreamed;
  char *streamed[MAX_LOGS];
  size_t streamed_at_done; /* how many entries on_log had delivered by then */
  lr_stats stats;
} job;

static int done_counter;

static void on_log(void *ud, const char *text, size_t len) {
  job *j = ud;
  CHECK(!j->done); /* streamed while the run is in flight, never after */
  if (j->nstreamed < MAX_LOGS) j->streamed[j->nstreamed++] = xstrndup(text, len);
}

static void on_done(void *ud, const lr_result *r) {
  job *j = ud;
  CHECK(!j->done); /* exactly once */
  j->done = true;
  j->done_order = ++done_counter;
  j->kind = r->kind;
  j->value = r->value_json ? xstrndup(r->value_json, r->value_len) : NULL;
  j->message = r->message ? xstrndup(r->message, r->message_len) : NULL;
  CHECK((r->kind == LR_OK) == (r->message == NULL));
  for (size_t i = 0; i < r->nlogs && i < MAX_LOGS; i++) j->logs[i] = xstrndup(r->logs[i], r->log_lens[i]);
  j->nlogs = r->nlogs;
  j->streamed_at_done = j->nstreamed;
  j->stats = r->stats;
  size_t len;
  j->json = lr_result_json(r, &len); /* ours to free */
  CHECK(j->json && strlen(j->json) == len);
}

static void job_free(job *j) {
  free(j->value);
  free(j->message);
  free(j->json);
  for (size_t i = 0; i < j->nlogs && i < MAX_LOGS; i++) free(j->logs[i]);
  for (size_t i = 0; i < j->nstreamed; i++) free(j->streamed[i]);
  memset(j, 0, sizeof *j);
}

static int start_job(lr_runtime *rt, job *j, const char *name, const char *program, const lr_config *cfg,
                     const char *const *namespaces, size_t nnamespaces) {
  char err[LR_ERR_MAX];
  j->name = name;
  lr_run_options opts = {
      .config = cfg,
      .namespaces = namespaces,
      .nnamespaces = nnamespaces,
      .on_log = on_log,
      .on_done = on_done,
      .ud = j,
  };
  int rc = lr_run_start(rt, program, strlen(program), &opts, &j->run, err);
  if (rc != 0) fprintf(stderr, "%s: lr_run_start: %s\n", name, err);
  CHECK(rc == 0);
  return rc;
}

/* Turns the loop until every job is done (the runtime keeps the loop alive,
 * so UV_RUN_DEFAULT would not return). */
static void wait_jobs(job *jobs, size_t n) {
  for (;;) {
    size_t done = 0;
    for (size_t i = 0; i < n; i++) done += jobs[i].done;
    if (done == n) return;
    uv_run(&loop, UV_RUN_ONCE);
  }
}

static bool wait_flag(const int *flag, int want) {
  while (*flag < want) uv_run(&loop, UV_RUN_ONCE);
  return true;
}

/* ---- the synchronous namespace: completes every call at once ------------ */

static const char *const sync_members[] = {"add", "echo", "fail", "lossy"};
static int sync_freed;

static void sync_call(void *ud, lr_call *call) {
  size_t alen;
  const char *args = lr_call_args_json(call, &alen);
  switch (lr_call_member_index(call)) {
  case 0: { /* add({a, b}) -> a + b */
    long a = 0, b = 0;
    const char *pa = strstr(args, "\"a\":"), *pb = strstr(args, "\"b\":");
    if (pa) a = strtol(pa + 4, NULL, 10);
    if (pb) b = strtol(pb + 4, NULL, 10);
    char out[64];
    int n = snprintf(out, sizeof out, "%ld", a + b);
    lr_call_resolve_json(call, out, (size_t)n);
    break;
  }
  case 1: /* echo(x) -> x */
    lr_call_resolve_json(call, args, alen);
    break;
  case 2: { /* fail -> rejects */
    static const char msg[] = "add failed on purpose";
    lr_call_reject(call, msg, sizeof msg - 1);
    break;
  }
  default: /* lossy -> not JSON at all */
    lr_call_resolve_json(call, "NaN", 3);
    break;
  }
}

static void sync_free(void *ud) { sync_freed++; }

/* ---- the asynchronous namespace: completes from a timer ------------------ */

typedef struct pending {
  uv_timer_t timer;
  lr_call *call;
  long value;
  bool counted; /* in slow_in_flight */
} pending;

static int slow_calls, slow_in_flight, slow_cancelled, slow_completed;
static job *slow_expect_streamed; /* a job whose "before" log must have streamed already */

static void pending_closed(uv_handle_t *h) { free(h->data); }

static void pending_finish(pending *p) {
  if (p->counted) slow_in_flight--;
  p->counted = false;
  uv_timer_stop(&p->timer);
  uv_close((uv_handle_t *)&p->timer, pending_closed);
}

static void slow_fire(uv_timer_t *t) {
  pending *p = t->data;
  char out[64];
  int n = snprintf(out, sizeof out, "{\"waited\":%ld}", p->value);
  lr_call *call = p->call;
  pending_finish(p);
  slow_completed++;
  lr_call_resolve_json(call, out, (size_t)n);
}

static void slow_call(void *ud, lr_call *call) {
  const char *args = lr_call_args_json(call, NULL);
  const char *pm = strstr(args, "\"ms\":"), *pv = strstr(args, "\"v\":");
  long ms = pm ? strtol(pm + 5, NULL, 10) : 0, v = pv ? strtol(pv + 4, NULL, 10) : 0;
  slow_calls++;
  if (slow_expect_streamed && lr_call_run_id(call) == lr_run_id(slow_expect_streamed->run)) {
    /* The program logged "before" and then called us: the entry must have
     * reached on_log already, while the run is still waiting on this call. */
    CHECK(slow_expect_streamed->nstreamed == 1);
    if (slow_expect_streamed->nstreamed == 1) CHECK_STR(slow_expect_streamed->streamed[0], "before");
  }
  pending *p = calloc(1, sizeof *p);
  p->call = call;
  p->value = v;
  p->counted = true;
  slow_in_flight++;
  lr_call_set_user(call, p);
  uv_timer_init(lr_runtime_loop(ud), &p->timer);
  p->timer.data = p;
  uv_timer_start(&p->timer, slow_fire, (uint64_t)ms, 0);
}

/* The engine is done with the call (its run settled): stop the timer and
 * complete the call now, which only frees it. */
static void slow_cancel(void *ud, lr_call *call) {
  pending *p = lr_call_user(call);
  slow_cancelled++;
  pending_finish(p);
  static const char msg[] = "cancelled";
  lr_call_reject(call, msg, sizeof msg - 1);
}

/* ---- helpers -------------------------------------------------------------- */

static const char lua_bindings[] =
    "local lunarun = require('lunarun')\n"
    "return {\n"
    "  global = 'lua',\n"
    "  errorClass = { name = 'LuaError', memberNameProperty = 'fn' },\n"
    "  functions = {\n"
    "    twice = function(a) return a.v * 2 end,\n"
    "    nap = function(a) lunarun.sleep(a.ms) return lunarun.array({ a.v, 'slept' }) end,\n"
    "    boom = function() error({ message = 'lua says no' }) end,\n"
    "  },\n"
    "}\n";

static char *write_file(const char *name, const char *text) {
  char *path = malloc(strlen(root) + strlen(name) + 2);
  sprintf(path, "%s/%s", root, name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
  return path;
}

/* Processes whose command line names our folder (the runners, the strip
 * helper); pgrep's own shell is left out. */
static int leftovers(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "pgrep -af '%s/lunarun-' 2>/dev/null", root);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, p)) {
    if (strstr(line, "pgrep")) continue;
    fprintf(stderr, "left over: %s", line);
    n++;
  }
  pclose(p);
  return n;
}

static bool logs_are(const job *j, const char *const *want, size_t n) {
  if (j->nlogs != n || j->nstreamed != n || j->streamed_at_done != n) return false;
  for (size_t i = 0; i < n; i++)
    if (strcmp(j->logs[i], want[i]) != 0 || strcmp(j->streamed[i], want[i]) != 0) return false;
  return true;
}

/* ---- disposal ---------------------------------------------------------- */

static int disposed_calls;
static int done_before_disposed;
static job *dispose_jobs;
static size_t dispose_njobs;

static void on_disposed(void *ud) {
  disposed_calls++;
  CHECK(ud == &loop);
  CHECK(sync_freed == 1); /* namespaces released their ud before this */
  for (size_t i = 0; i < dispose_njobs; i++) done_before_disposed += dispose_jobs[i].done;
}

/* ---- the test ------------------------------------------------------------- */

static void test_misuse(void) {
  char err[LR_ERR_MAX];
  lr_config cfg;
  lr_config_init(&cfg);
  CHECK(lr_config_set(&cfg, "noSuchKey", "1", err) != 0);
  CHECK_HAS(err, "noSuchKey");
  CHECK(lr_config_set(&cfg, "computeMs", "-3", err) != 0);
  CHECK_HAS(err, "computeMs");
  cfg.max_output_bytes = 2; /* below the minimum of 4 */
  lr_runtime *rt = (lr_runtime *)1;
  CHECK(lr_runtime_new(&loop, &cfg, &rt, err) != 0);
  CHECK(rt == NULL);
  CHECK_HAS(err, "maxOutputBytes");
  lr_config_free(&cfg);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(root, sizeof root, "%s/lunarun-embed-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  /* Under isolation = bwrap as root, the sandbox's uid (65534) must reach
   * the runtime folders below: searchable, not listable. */
  chmod(root, 0711);
  uv_loop_init(&loop);
  char err[LR_ERR_MAX];

  test_misuse();

  lr_config cfg;
  lr_config_init(&cfg);
  CHECK(lr_config_set(&cfg, "runtimeRoot", root, err) == 0);
  CHECK(lr_config_set(&cfg, "computeMs", "20000", err) == 0);
  CHECK(lr_config_set(&cfg, "killGraceMs", "500", err) == 0);
  CHECK(lr_config_check(&cfg, err) == 0);
  lr_runtime *rt = NULL;
  if (lr_runtime_new(&loop, &cfg, &rt, err) != 0) {
    fprintf(stderr, "lr_runtime_new: %s\n", err);
    CHECK(0);
    return CHECK_DONE();
  }
  CHECK(lr_runtime_loop(rt) == &loop);
  CHECK(lr_runtime_config(rt)->compute_ms == 20000);

  /* Namespaces: sync (C, at once), slow (C, later), lua (a bindings file). */
  lr_namespace_def sync_def = {
      .global = "sync",
      .error_class = "SyncError",
      .member_name_property = "op",
      .members = sync_members,
      .nmembers = 4,
      .call = sync_call,
      .ud = rt,
      .free_ud = sync_free,
  };
  CHECK(lr_runtime_add_namespace(rt, &sync_def, err) == 0);
  static const char *const slow_members[] = {"wait"};
  static const lr_member_policy slow_policy[] = {{.read_only = 1}};
  lr_namespace_def slow_def = {
      .global = "slow",
      .members = slow_members,
      .nmembers = 1,
      .policies = slow_policy,
      .call = slow_call,
      .cancel = slow_cancel,
      .ud = rt,
  };
  CHECK(lr_runtime_add_namespace(rt, &slow_def, err) == 0);
  char *lua_path = write_file("bindings.lua", lua_bindings);
  int loaded = lr_runtime_load_bindings(rt, lua_path, err);
  if (loaded != 0) fprintf(stderr, "load_bindings: %s\n", err);
  CHECK(loaded == 0);

  /* Misuse of namespaces and runs: a return code and a message. */
  lr_namespace_def dup = slow_def;
  CHECK(lr_runtime_add_namespace(rt, &dup, err) != 0);
  CHECK_HAS(err, "slow");
  dup.global = "class";
  CHECK(lr_runtime_add_namespace(rt, &dup, err) != 0);
  CHECK_HAS(err, "class");
  dup.global = "LuaError"; /* taken by the bindings file's error class */
  CHECK(lr_runtime_add_namespace(rt, &dup, err) != 0);
  lr_run_options bad = {.on_done = on_done};
  static const char *const ghost[] = {"ghost"};
  bad.namespaces = ghost;
  bad.nnamespaces = 1;
  lr_run *none = (lr_run *)1;
  CHECK(lr_run_start(rt, "return 1", 8, &bad, &none, err) != 0);
  CHECK(none == NULL);
  CHECK_HAS(err, "ghost");
  lr_config tiny;
  lr_config_init(&tiny);
  tiny.max_frame_bytes = 10; /* below maxOutputBytes */
  bad.namespaces = NULL;
  bad.config = &tiny;
  CHECK(lr_run_start(rt, "return 1", 8, &bad, NULL, err) != 0);
  CHECK_HAS(err, "maxFrameBytes");
  lr_config_free(&tiny);

  /* describe: a malloc'd text the caller frees. */
  char *decl = NULL;
  const char *paths[] = {lua_path};
  CHECK(lr_describe(paths, 1, &decl, err) == 0);
  CHECK_HAS(decl, "declare const lua");
  free(decl);

  /* 1. Every kind of binding, logs streamed in order. */
  {
    job j = {0};
    slow_expect_streamed = &j;
    start_job(rt, &j, "bindings",
              "console.log('before');\n"
              "const w = await slow.wait({ ms: 150, v: 5 });\n"
              "console.log('after', w.waited);\n"
              "const s: number = await sync.add({ a: 2, b: 40 });\n"
              "const e = await sync.echo({ deep: [1, { x: 'y' }], n: null });\n"
              "let caught = '';\n"
              "try { await sync.fail(null); } catch (err) {\n"
              "  caught = (err instanceof SyncError) + ':' + (err as any).op + ':' + (err as Error).message;\n"
              "}\n"
              "let lossy = '';\n"
              "try { await sync.lossy(null); } catch (err) { lossy = (err as Error).message; }\n"
              "const l = await lua.twice({ v: 21 });\n"
              "const n = await lua.nap({ ms: 20, v: 9 });\n"
              "let le = '';\n"
              "try { await lua.boom(null); } catch (err) { le = (err as any).fn + ':' + (err as Error).message; }\n"
              "console.error('last');\n"
              "return { s, e, caught, lossy, l, n, le };\n",
              NULL, NULL, 0);
    wait_jobs(&j, 1);
    slow_expect_streamed = NULL;
    CHECK(j.kind == LR_OK);
    CHECK_STR(j.value,
              "{\"s\":42,\"e\":{\"deep\":[1,{\"x\":\"y\"}],\"n\":null},"
              "\"caught\":\"true:fail:add failed on purpose\","
              "\"lossy\":\"binding resolution must be lossless JSON\","
              "\"l\":42,\"n\":[9,\"slept\"],\"le\":\"boom:lua says no\"}");
    static const char *const want[] = {"before", "after 5", "last"};
    CHECK(logs_are(&j, want, 3));
    CHECK(j.stats.binding_calls == 8);
    CHECK(j.stats.log_entries == 3);
    CHECK(j.stats.wall_ms >= 150);
    CHECK_HAS(j.json, "\"logs\":[\"before\",\"after 5\",\"last\"]");
    CHECK_HAS(j.json, "\"bindingCalls\":8");
    if (j.kind != LR_OK) fprintf(stderr, "run 1: %s\n", j.json);
    job_free(&j);
  }

  /* 2. Failures keep their logs; line numbers are the program's. */
  {
    job j[3] = {{0}};
    start_job(rt, &j[0], "throw", "console.log('one');\nconst x: number = 1;\nthrow new Error('bad ' + x);\n", NULL,
              NULL, 0);
    start_job(rt, &j[1], "strip", "enum E { A }\nreturn 1;\n", NULL, NULL, 0);
    /* A call left in flight when the program returns is cancelled. */
    start_job(rt, &j[2], "early", "slow.wait({ ms: 60000, v: 1 }).catch(() => {});\nreturn 'early';\n", NULL,
              NULL, 0);
    int cancelled_before = slow_cancelled;
    wait_jobs(j, 3);
    CHECK(j[0].kind == LR_EXCEPTION);
    CHECK_HAS(j[0].message, "bad 1");
    CHECK_HAS(j[0].message, ":3:");
    static const char *const one[] = {"one"};
    CHECK(logs_are(&j[0], one, 1));
    CHECK(j[1].kind == LR_EXCEPTION);
    CHECK(j[1].nlogs == 0);
    CHECK(j[2].kind == LR_OK);
    CHECK_STR(j[2].value, "\"early\"");
    CHECK(slow_cancelled == cancelled_before + 1);
    for (int i = 0; i < 3; i++) job_free(&j[i]);
  }

  /* 3. Abort a run in flight, while a C binding holds a call. */
  {
    job j = {0};
    int calls_before = slow_calls, cancelled_before = slow_cancelled;
    start_job(rt, &j, "abort", "console.log('waiting');\nawait slow.wait({ ms: 60000, v: 1 });\nreturn 'never';\n",
              NULL, NULL, 0);
    wait_flag(&slow_calls, calls_before + 1);
    lr_stats s = lr_run_stats(j.run);
    CHECK(s.binding_calls == 1);
    CHECK(s.log_entries == 1);
    CHECK(!j.done);
    lr_run_abort(j.run);
    CHECK(!j.done); /* never from inside lr_run_abort */
    CHECK(slow_cancelled == cancelled_before + 1);
    wait_jobs(&j, 1);
    CHECK(j.kind == LR_ABORT);
    CHECK_STR(j.message, "the run was aborted");
    CHECK(j.value == NULL);
    static const char *const w[] = {"waiting"};
    CHECK(logs_are(&j, w, 1));
    job_free(&j);
  }

  /* 4. Several runs at once, each with its own limits and namespaces; one
   * failure or abort never touches the others. */
  {
    enum { N = 8 };
    job j[N] = {{0}};
    lr_config c[N];
    char prog[N][512];
    static const char *const only_sync[] = {"sync"};
    static const char *const only_lua[] = {"lua", "slow"};
    for (int i = 0; i < N; i++) {
      lr_config_init(&c[i]);
      lr_config_copy(&c[i], lr_runtime_config(rt));
      snprintf(prog[i], sizeof prog[i],
               "console.log('run %d');\n"
               "const w = await slow.wait({ ms: %d, v: %d });\n"
               "return { i: %d, w: w.waited, t: await lua.twice({ v: %d }) };\n",
               i, 50 + 20 * i, i * 10, i, i);
    }
    /* 2: sees only sync, so slow is not a binding it may call. */
    snprintf(prog[2], sizeof prog[2], "return [typeof slow, await sync.add({ a: 2, b: 2000 })];\n");
    /* 3: a tight output cap. */
    c[3].max_output_bytes = 20;
    snprintf(prog[3], sizeof prog[3], "console.log('x'.repeat(100));\nreturn 3;\n");
    /* 4: a compute budget spent. */
    c[4].compute_ms = 300;
    snprintf(prog[4], sizeof prog[4], "console.log('spin');\nwhile (true) {}\n");
    /* 5: aborted below. */
    snprintf(prog[5], sizeof prog[5], "await slow.wait({ ms: 60000, v: 5 });\n");
    /* 6: throws a non-Error. */
    snprintf(prog[6], sizeof prog[6], "await slow.wait({ ms: 30, v: 6 });\nthrow 'six';\n");
    int calls_before = slow_calls;
    for (int i = 0; i < N; i++) {
      const char *const *ns = i == 2 ? only_sync : i == 7 ? only_lua : NULL;
      size_t nns = i == 2 ? 1 : i == 7 ? 2 : 0;
      start_job(rt, &j[i], "many", prog[i], &c[i], ns, nns);
    }
    for (int i = 0; i < N; i++) lr_config_free(&c[i]); /* copied by lr_run_start */
    /* Abort 5 once it waits on its call. */
    while (!j[5].done && lr_run_stats(j[5].run).binding_calls == 0) uv_run(&loop, UV_RUN_ONCE);
    lr_run_abort(j[5].run);
    wait_jobs(j, N);
    CHECK(slow_calls == calls_before + 5); /* 0, 1, 5, 6, 7 */
    for (int i = 0; i < N; i++) {
      char want[256];
      switch (i) {
      case 2:
        CHECK(j[i].kind == LR_OK);
        CHECK_STR(j[i].value, "[\"undefined\",2002]");
        break;
      case 3:
        CHECK(j[i].kind == LR_OUTPUT_LIMIT);
        CHECK(j[i].stats.output_bytes <= 20);
        /* The runner keeps the ledger too: what streams is at most the
         * entry, cut to what fits; the result keeps no more than that. */
        CHECK(j[i].nstreamed <= 1);
        CHECK(j[i].nstreamed == 0 || strspn(j[i].streamed[0], "x") == strlen(j[i].streamed[0]));
        CHECK(j[i].nlogs == 0);
        CHECK_STR(j[i].message, "outer output exc"); /* cut to fit the cap (SPEC §5) */
        break;
      case 4:
        CHECK(j[i].kind == LR_TIMEOUT);
        CHECK_HAS(j[i].message, "compute budget");
        break;
      case 5:
        CHECK(j[i].kind == LR_ABORT);
        break;
      case 6:
        CHECK(j[i].kind == LR_EXCEPTION);
        CHECK_STR(j[i].message, "six");
        break;
      default:
        snprintf(want, sizeof want, "{\"i\":%d,\"w\":%d,\"t\":%d}", i, i * 10, 2 * i);
        CHECK(j[i].kind == LR_OK);
        CHECK_STR(j[i].value, want);
        snprintf(want, sizeof want, "run %d", i);
        const char *const wl[] = {want};
        CHECK(logs_are(&j[i], wl, 1));
        break;
      }
    }
    for (int i = 0; i < N; i++) job_free(&j[i]);
  }

  /* 5. Dispose with runs in flight: waiting on a C call, on a Lua call,
   * spinning, and one just started (still being stripped). */
  {
    enum { N = 4 };
    job j[N] = {{0}};
    int calls_before = slow_calls;
    start_job(rt, &j[0], "d0", "console.log('d0');\nawait slow.wait({ ms: 60000, v: 0 });\n", NULL, NULL, 0);
    start_job(rt, &j[1], "d1", "await lua.nap({ ms: 60000, v: 1 });\n", NULL, NULL, 0);
    start_job(rt, &j[2], "d2", "console.log('d2');\nwhile (true) {}\n", NULL, NULL, 0);
    wait_flag(&slow_calls, calls_before + 1);
    while (j[1].run && lr_run_stats(j[1].run).binding_calls == 0) uv_run(&loop, UV_RUN_ONCE);
    while (lr_run_stats(j[2].run).log_entries == 0) uv_run(&loop, UV_RUN_ONCE);
    start_job(rt, &j[3], "d3", "return 3;\n", NULL, NULL, 0);
    for (int i = 0; i < N; i++) CHECK(!j[i].done);
    dispose_jobs = j;
    dispose_njobs = N;
    int cancelled_before = slow_cancelled;
    lr_runtime_dispose(rt, on_disposed, &loop);
    CHECK(slow_cancelled == cancelled_before + 1);
    CHECK(slow_in_flight == 0);
    /* Misuse after disposal began: refused, nothing started. */
    lr_run_options o = {.on_done = on_done};
    CHECK(lr_run_start(rt, "return 1", 8, &o, NULL, err) != 0);
    CHECK_HAS(err, "disposed");
    CHECK(lr_runtime_add_namespace(rt, &dup, err) != 0);
    for (int i = 0; i < N; i++) CHECK(!j[i].done); /* never from inside lr_runtime_dispose */
    wait_flag(&disposed_calls, 1);
    rt = NULL;
    CHECK(disposed_calls == 1);
    CHECK(done_before_disposed == N);
    for (int i = 0; i < N; i++) {
      CHECK(j[i].kind == LR_ABORT);
      CHECK_STR(j[i].message, "the runtime was disposed");
    }
    static const char *const d0[] = {"d0"};
    CHECK(logs_are(&j[0], d0, 1));
    for (int i = 0; i < N; i++) job_free(&j[i]);
  }

  /* Disposal closed the bindings' Lua state, whose handles finish closing
   * on the next turns: then nothing may be left on the loop. */
  uv_run(&loop, UV_RUN_DEFAULT);
  int close_rc = uv_loop_close(&loop);
  CHECK(close_rc == 0);
  if (close_rc != 0) uv_print_all_handles(&loop, stderr);
  CHECK(slow_in_flight == 0);
  CHECK(leftovers() == 0);

  unlink(lua_path);
  free(lua_path);
  lr_config_free(&cfg);
  /* The runtime removed its folder: ours is empty again. */
  int rm = rmdir(root);
  if (rm != 0) fprintf(stderr, "rmdir %s: %s\n", root, strerror(errno));
  CHECK(rm == 0);
  return CHECK_DONE();
}
