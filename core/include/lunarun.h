/* lunarun — run model-written TypeScript programs in a sandboxed Node worker
 * and let them call host functions ("bindings").
 *
 * This is the one public header of the engine. Everything happens on a libuv
 * loop the caller owns; no function blocks, and none is thread-safe: call
 * them all from the loop's thread. Misuse (a bad config key, a bad name, a
 * run on a disposed runtime) is reported by a return code (0 = done, -1 =
 * refused) with a one-line message in `err` (a buffer of LR_ERR_MAX bytes;
 * may be NULL); nothing is started then. A run that starts always ends with
 * exactly one call of its completion callback, never from inside the call
 * that started or aborted it.
 *
 * The life of an embedding:
 *
 *   lr_runtime_new(loop, &cfg, &rt, err);          // or cfg = NULL: defaults
 *   lr_runtime_add_namespace(rt, &def, err);       // C bindings, and/or
 *   lr_runtime_load_bindings(rt, "tools.lua", err); // Lua bindings
 *   lr_run_start(rt, program, len, &opts, &run, err); // any number at once
 *   uv_run(loop, UV_RUN_DEFAULT);                   // results reach opts.on_done
 *   lr_runtime_dispose(rt, on_disposed, ud);        // e.g. from on_done
 *   ...uv_run returns once the runtime is gone; then uv_loop_close(loop).
 *
 * A runtime keeps handles on the loop (its type-stripping helper, once a run
 * started) until it is disposed: uv_run(UV_RUN_DEFAULT) does not return
 * before. After on_disposed, let the loop run once more (uv_run returns by
 * itself): the Lua state of the bindings files closes its handles then.
 *
 * Ownership:
 * - Everything passed in (configs, namespace definitions and their names,
 *   programs, run options) is copied; the caller may free it on return.
 * - Everything passed to a callback (an lr_result and its strings, a log
 *   entry) is lunarun's and valid only during the callback: copy what you
 *   keep. An lr_call and what it carries (lr_call_args_json, its names) is
 *   valid from the handler's call until the handler completes it.
 * - The caller frees (with free()) the strings of lr_result_json and
 *   lr_log_json and the text of lr_describe, and releases an lr_config
 *   with lr_config_free.
 * - An lr_run is valid from lr_run_start until its on_done returns; an
 *   lr_runtime until its on_disposed is called (it is freed just before).
 */
#ifndef LUNARUN_H
#define LUNARUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LR_ERR_MAX 512

/* ---- Configuration (SPEC §2) ------------------------------------------ */

#define LR_ISOLATION_BWRAP 0 /* bubblewrap: namespaces, a minimal read-only filesystem */
#define LR_ISOLATION_NONE 1  /* a plain Node process with the host user's rights */
#define LR_ISOLATION_E2B 2   /* in results only: the run was in an E2B microVM */

/* Where sandboxes run (the `backend` key). */
#define LR_BACKEND_LOCAL 0 /* processes on this machine */
#define LR_BACKEND_E2B 1   /* E2B cloud sandboxes (README, "E2B") */

/* A host path shown inside the sandbox at `at` (read-only unless write). */
typedef struct lr_mount {
  char *host, *at;
  bool write;
} lr_mount;

/* Every limit of a run, plus where Node and the runtime's files are.
 * Strings are owned by the config: set them with lr_config_set and release
 * them with lr_config_free. */
typedef struct lr_config {
  uint64_t compute_ms;                 /* computeMs, default 60000 */
  uint64_t max_wall_ms;                /* maxWallMs, default 600000 */
  uint64_t max_output_bytes;           /* maxOutputBytes, default 64 MiB */
  uint64_t max_old_generation_size_mb; /* maxOldGenerationSizeMb, default 512 */
  uint64_t max_frame_bytes;            /* maxFrameBytes, default 256 MiB */
  uint64_t kill_grace_ms;              /* killGraceMs, default 2000 */
  uint64_t max_process_memory_mb;      /* maxProcessMemoryMb: the address-space cap
                                          (RLIMIT_AS) of every sandbox process,
                                          default 4096; Buffers and ArrayBuffers,
                                          which the heap cap does not bound, fail
                                          to allocate beyond it */
  char *node_path;    /* nodePath: the Node binary (>= 22.13); NULL = built-in default */
  char *runtime_root; /* runtimeRoot: where a runtime installs its files; NULL = $TMPDIR or /tmp */
  /* Isolation of the local sandbox (README, "Isolation"). isolation is the
   * runtime's: it is checked once when the runtime is created, and a run's
   * own config cannot change it. */
  int isolation;              /* isolation: LR_ISOLATION_BWRAP (default) or LR_ISOLATION_NONE */
  bool network_host;          /* network = "host" (true) or "none" (false, default) */
  uint64_t tmp_mb;            /* tmpMb: size cap of the sandbox's private /tmp, default 64 */
  uint64_t max_processes;     /* maxProcesses: tasks (processes + threads) of one sandbox,
                                 default 256 (RLIMIT_NPROC inside its own user namespace) */
  bool allow_child_processes; /* allowChildProcesses: default true */
  lr_mount *mounts;           /* mounts: host folders or files shown inside; add with
                                 lr_config_add_mount */
  size_t nmounts;
  uint64_t pool_size;         /* poolSize: warm sandboxes kept ready, default 2 (0 = none) */
  uint64_t pool_idle_ms;      /* poolIdleMs: a pooled sandbox unused this long is ended,
                                 default 300000 */
  /* The backend is the runtime's, like isolation. The E2B API key is read
   * from $E2B_API_KEY only, never from a config. */
  int backend;                /* backend: LR_BACKEND_LOCAL (default) or LR_BACKEND_E2B */
  char *e2b_template;         /* e2bTemplate: NULL = "base" */
  char *e2b_domain;           /* e2bDomain: NULL = $E2B_DOMAIN, else "e2b.app" */
  char *e2b_api_url;          /* e2bApiUrl: NULL = $E2B_API_URL, else https://api.<domain> */
  char *e2b_sandbox_url;      /* e2bSandboxUrl: NULL = $E2B_SANDBOX_URL, else
                                 https://49983-<sandbox>.<domain> */
  char *e2b_user;             /* e2bUser: the remote user; NULL = "user" */
  uint64_t e2b_timeout_ms;    /* e2bTimeoutMs: the remote sandbox's lifetime, refreshed
                                 while runs use it, default 300000 */
} lr_config;

/* Fills c with the defaults. */
void lr_config_init(lr_config *c);

/* Sets one key from its text, as the CLI's --set key=value does: numeric
 * keys take a decimal integer. Unknown keys and bad values are refused with
 * a message naming the key. */
int lr_config_set(lr_config *c, const char *key, const char *value, char *err);

/* Sets a numeric key from a number (as a Lua config file gives it). */
int lr_config_set_number(lr_config *c, const char *key, double value, char *err);

/* Checks the rules between keys (maxFrameBytes >= maxOutputBytes, ...).
 * Each value alone is checked when it is set. */
int lr_config_check(const lr_config *c, char *err);

/* Sets keys from a Lua config file (a chunk returning {key = value}). */
int lr_config_load_file(lr_config *c, const char *path, char *err);

/* Adds a mount (the `mounts` key): host and at are absolute paths, host
 * exists, at is not `/`, `/tmp`, nor under /proc, /dev, /usr, /opt/lunarun
 * or /opt/node. Refused with a message naming `mounts`. */
int lr_config_add_mount(lr_config *c, const char *host, const char *at, bool write, char *err);

/* Copies src into dst (dst's old strings are not freed: init it first). */
void lr_config_copy(lr_config *dst, const lr_config *src);

/* Releases the strings and mounts of c. */
void lr_config_free(lr_config *c);

/* ---- Results (SPEC §4) ------------------------------------------------- */

/* The failure kinds, from one table: X(enum, "kind"). */
#define LR_KIND_MAP(X)                     \
  X(LR_OK, "ok")                           \
  X(LR_EXCEPTION, "exception")             \
  X(LR_TIMEOUT, "timeout")                 \
  X(LR_ABORT, "abort")                     \
  X(LR_WORKER_EXIT, "worker-exit")         \
  X(LR_INVALID_OUTPUT, "invalid-output")   \
  X(LR_OUTPUT_LIMIT, "output-limit")

typedef enum lr_kind {
#define LR_KIND_ENUM(e, s) e,
  LR_KIND_MAP(LR_KIND_ENUM)
#undef LR_KIND_ENUM
} lr_kind;

/* "bwrap", "none" or "e2b": stats.isolation as results name it. */
const char *lr_isolation_name(int isolation);

/* "exception", "timeout", ... ("ok" for LR_OK). */
const char *lr_kind_name(lr_kind kind);

typedef struct lr_stats {
  uint64_t wall_ms;       /* from lr_run_start to the result */
  uint64_t compute_ms;    /* the worker's active time, as the runner measured it */
  uint64_t output_bytes;  /* what the result's logs + value/message cost (SPEC §5) */
  uint64_t binding_calls; /* calls the program made */
  uint64_t log_entries;   /* log entries the program emitted (kept or not) */
  int isolation;          /* the isolation in force: LR_ISOLATION_BWRAP, _NONE or _E2B */
} lr_stats;

typedef struct lr_result {
  lr_kind kind;             /* LR_OK when the run succeeded */
  const char *value_json;   /* compact JSON of the value; NULL when there is none */
  size_t value_len;
  size_t nlogs;             /* the kept log entries, in emission order */
  const char *const *logs;  /* UTF-8 (lone surrogates as 3-byte WTF-8) */
  const size_t *log_lens;
  const char *message;      /* the failure message; NULL when kind == LR_OK */
  size_t message_len;
  lr_stats stats;
} lr_result;

/* The result as one JSON object ({value?, logs, error?, stats}, SPEC §4), in
 * a malloc'd NUL-terminated string the caller frees; its length in *len
 * (len may be NULL). */
char *lr_result_json(const lr_result *r, size_t *len);

/* One log entry as a JSON string, exactly as lr_result_json writes it in
 * `logs` (lone surrogates as \uDXXX), for callers that stream entries as
 * JSON (`lunarun run --json --stream`). malloc'd, NUL-terminated; the
 * caller frees it. out_len may be NULL. */
char *lr_log_json(const char *text, size_t len, size_t *out_len);

/* ---- Runtime, namespaces, runs ---------------------------------------- */

typedef struct lr_runtime lr_runtime;
typedef struct lr_run lr_run;
typedef struct lr_call lr_call;

/* Creates a runtime on the caller's loop: checks the config (NULL: the
 * defaults), finds Node (nodePath, else $LUNARUN_NODE, else the build's
 * default, else PATH) and refuses one older than 22.13 (it runs `node
 * --version` once per binary, a few ms), installs the runner into a fresh
 * folder under runtimeRoot. The config is copied. On misuse *out is NULL, nothing is
 * left behind, and err names the key. */
int lr_runtime_new(uv_loop_t *loop, const lr_config *config, lr_runtime **out, char *err);

/* The loop and config the runtime was made with. */
uv_loop_t *lr_runtime_loop(lr_runtime *rt);
const lr_config *lr_runtime_config(lr_runtime *rt);

/* A binding's handler: called on the loop with the call; it must complete
 * the call exactly once, now (synchronous binding) or later from the loop
 * (asynchronous binding: keep `call`, e.g. with lr_call_set_user, and
 * complete it from a timer, a process exit...), with lr_call_resolve_json
 * or lr_call_reject. ud is the namespace's lr_namespace_def.ud. */
typedef void (*lr_binding_fn)(void *ud, lr_call *call);

/* Called when the runtime is disposed, so a namespace can release ud. */
typedef void (*lr_namespace_free_fn)(void *ud);

/* Called when the engine no longer needs a call the handler still holds: its
 * run settled (returned, failed, was aborted, the runtime is being
 * disposed), or the call timed out (the program already got the timeout).
 * The handler should stop its work and complete the call soon (completing
 * it now, from inside this callback, only frees it; nothing is sent). From
 * here on only lr_call_resolve*, lr_call_reject* and lr_call_user may be
 * used on the call: its namespace goes away with the runtime. */
typedef void (*lr_binding_cancel_fn)(void *ud, lr_call *call);

/* A call the engine refused before any handler saw it: over the member's
 * maxCalls, or arguments that are not lossless JSON. The program got
 * `message`. Everything is valid during the callback only. */
typedef struct lr_call_refusal {
  uint64_t run_id;
  uint64_t call_id;
  size_t member;                 /* index in the lr_namespace_def's members */
  const struct lr_json *args;    /* the decoded args; NULL when not lossless */
  const char *message;
} lr_call_refusal;

/* Tells a namespace about a refused call (for audit logs and metrics). */
typedef void (*lr_binding_refused_fn)(void *ud, const lr_call_refusal *refusal);

/* How the engine schedules one member's calls within a run. */
typedef struct lr_member_policy {
  int read_only;       /* nonzero: may overlap other read-only calls; else the
                          call runs alone, in the order the program issued it */
  uint64_t timeout_ms; /* wall-clock limit of one call; 0 = none */
  uint64_t max_calls;  /* calls allowed per run; 0 = unlimited */
} lr_member_policy;

typedef struct lr_namespace_def {
  const char *global;               /* the program's name for it, e.g. "tools" */
  const char *error_class;          /* e.g. "ToolCallError"; NULL for plain Error */
  const char *member_name_property; /* e.g. "toolName"; required with error_class */
  const char *const *members;       /* the member names (arbitrary strings) */
  size_t nmembers;
  const lr_member_policy *policies; /* nmembers entries, or NULL: every member
                                       mutating, no timeout, no call limit */
  lr_binding_fn call;               /* handles every member */
  lr_binding_cancel_fn cancel;      /* may be NULL */
  lr_binding_refused_fn refused;    /* may be NULL */
  void *ud;
  lr_namespace_free_fn free_ud;     /* may be NULL */
} lr_namespace_def;

/* Checks a namespace against SPEC §9 (names) and the policy bounds, without
 * a runtime (uniqueness across namespaces is lr_runtime_add_namespace's). */
int lr_namespace_def_check(const lr_namespace_def *def, char *err);

/* Adds a namespace to the runtime (visible to runs started afterwards).
 * Names are checked against SPEC §9, including uniqueness across every
 * global and error class of the runtime. */
int lr_runtime_add_namespace(lr_runtime *rt, const lr_namespace_def *def, char *err);

/* Runs a bindings file (SPEC §10: a Lua chunk returning one namespace or a
 * list of them; docs/BINDINGS.md has policy and declared types) and adds its
 * namespaces. Its handlers run in a Lua state the runtime owns, on the
 * runtime's loop (luv shares it); the state is closed when the runtime is
 * disposed. Misuse names the file, the namespace and the field. */
int lr_runtime_load_bindings(lr_runtime *rt, const char *path, char *err);

/* The TypeScript declarations (and a usage note for a model) of the
 * namespaces of the given bindings files, checked as a run would check them.
 * *out is malloc'd; the caller frees it. */
int lr_describe(const char *const *paths, size_t npaths, char **out, char *err);

/* What a call carries. */
const char *lr_call_global(const lr_call *call);
const char *lr_call_member(const lr_call *call, size_t *len);
/* The args as compact JSON text, owned by the call. */
const char *lr_call_args_json(const lr_call *call, size_t *len);
/* Internal-tree access for the Lua glue and other in-tree users (json.h). */
const struct lr_json *lr_call_args(const lr_call *call);
/* The id of the call's run (unique within the runtime, from 1), and the
 * call's id within its run. */
uint64_t lr_call_run_id(const lr_call *call);
uint64_t lr_call_id(const lr_call *call);
/* The member's index in the lr_namespace_def's members array. */
size_t lr_call_member_index(const lr_call *call);
/* Why the engine gave up on a call (in a cancel callback: "binding
 * \"ns.f\" timed out after N ms", "the run ended before the call did");
 * NULL before. Owned by the call. */
const char *lr_call_cancel_reason(const lr_call *call);
/* One pointer of the handler's own, carried by the call. */
void lr_call_set_user(lr_call *call, void *user);
void *lr_call_user(const lr_call *call);

/* Completes a call with a value given as JSON text, json[0..len) (checked:
 * must be lossless JSON, else the program sees "binding resolution must be
 * lossless JSON"). Frees the call. Safe after the run ended (the reply is
 * dropped). The text is copied. */
void lr_call_resolve_json(lr_call *call, const char *json, size_t len);
/* The same with an in-tree value; takes ownership of *value. */
void lr_call_resolve(lr_call *call, struct lr_json *value);
/* Rejects a call: the program sees an error with this message (UTF-8,
 * copied), an instance of the namespace's error class when it has one.
 * Frees the call. */
void lr_call_reject(lr_call *call, const char *message, size_t len);
/* Fails a call whose resolution was not lossless. */
void lr_call_reject_lossy(lr_call *call);

/* Called with each log entry as it arrives, in emission order, while the
 * run is in flight, once the output ledger has admitted it: only entries
 * that the result keeps whatever the outcome (the logs so far fit
 * maxOutputBytes with room left for the output-limit message). So what a
 * caller shows live never exceeds the result; the result's logs start with
 * exactly the entries seen here and may hold more (the last ones near the
 * cap, or a cut prefix of one). */
typedef void (*lr_log_fn)(void *ud, const char *text, size_t len);
/* Called exactly once with the result, after the run's sandbox is gone (no
 * process of the run is left); the run is freed when it returns. */
typedef void (*lr_done_fn)(void *ud, const lr_result *result);

typedef struct lr_run_options {
  const lr_config *config; /* NULL: the runtime's config; copied */
  const char *const *namespaces; /* the globals this run may see; NULL: all */
  size_t nnamespaces;
  lr_log_fn on_log;        /* may be NULL */
  lr_done_fn on_done;      /* required */
  void *ud;
} lr_run_options;

/* Starts one run of program[0..len) (TypeScript; copied). *out (out may be
 * NULL) is valid until on_done returns. The completion callback is never
 * called from inside this function. Misuse: no on_done, a config that
 * breaks a rule, a namespace to make visible that the runtime lacks, a
 * runtime being disposed. Runs of one runtime are independent: each has its
 * own sandbox, limits and visible namespaces. */
int lr_run_start(lr_runtime *rt, const char *program, size_t len,
                 const lr_run_options *opts, lr_run **out, char *err);

/* Aborts a run in flight: it resolves with kind "abort" (message "the run
 * was aborted") once its sandbox is gone; calls its bindings hold are
 * cancelled (their cancel callbacks run from inside this function). Does
 * nothing if the run already settled; do not call it after on_done returned
 * (the run is freed). */
void lr_run_abort(lr_run *run);

/* The run's figures so far (output_bytes: the logs kept so far). */
lr_stats lr_run_stats(const lr_run *run);

/* The run's id (unique within the runtime, from 1). */
uint64_t lr_run_id(const lr_run *run);

/* Disposes the runtime: aborts every run in flight (kind "abort", message
 * "the runtime was disposed"; calls their bindings hold are cancelled),
 * waits for their sandboxes to be gone (each completion callback is called,
 * all before on_disposed), stops the strip helper, releases the namespaces
 * (free_ud), closes the bindings files' Lua state, removes the installed
 * files, and then calls on_disposed (may be NULL). Only the cancel callbacks
 * are called from inside this function; completion callbacks and
 * on_disposed come on later turns of the loop. Until on_disposed,
 * lr_run_start and lr_runtime_add_namespace refuse (misuse) and another
 * lr_runtime_dispose does nothing; the runtime is freed before on_disposed
 * runs. */
void lr_runtime_dispose(lr_runtime *rt, void (*on_disposed)(void *ud), void *ud);

/* ---- MCP server (`lunarun mcp`) ---------------------------------------- */

/* Serves the Model Context Protocol on in_fd (requests) and out_fd
 * (replies), one JSON-RPC message per line, with a `run` tool that runs
 * programs on rt (README, "MCP"). Takes ownership of rt, whose bindings were
 * loaded from paths[0..npaths) (read again to describe them). out_fd must
 * be the protocol's alone: the CLI points descriptor 1 at standard error
 * before anything is loaded. Unlike the rest of this API it blocks: it runs
 * rt's loop until in_fd ends or SIGTERM/SIGINT arrives, disposes rt, and
 * returns the exit code (0), or -1 with err when it cannot start (rt is
 * disposed then too). */
int lr_mcp_serve(lr_runtime *rt, const char *const *paths, size_t npaths, int in_fd, int out_fd, char *err);

#ifdef __cplusplus
}
#endif

#endif
