/* The runtime's and the run's inner state, shared by runtime.c (namespaces,
 * installation, disposal), run.c (one run's state machine) and call.c (one
 * binding call). Not part of the public API. */
#ifndef LR_RUNTIME_H
#define LR_RUNTIME_H

#include "lunarun.h"
#include "frame.h"
#include "json.h"
#include "ledger.h"
#include "sandbox.h"
#include "strip.h"

typedef struct lr_namespace {
  char *global;
  char *error_class;          /* NULL for plain Error */
  char *member_name_property; /* NULL without an error class */
  char **members;
  size_t *member_lens;
  size_t nmembers;
  lr_member_policy *policies; /* nmembers entries */
  size_t index;               /* in rt->namespaces */
  lr_binding_fn call;
  lr_binding_cancel_fn cancel;
  lr_binding_refused_fn refused;
  void *ud;
  lr_namespace_free_fn free_ud;
} lr_namespace;

struct lr_runtime {
  uv_loop_t *loop;
  lr_config cfg;
  char *node_path;   /* resolved, absolute */
  char *prlimit_path; /* util-linux's prlimit, for maxProcessMemoryMb */
  char *bwrap_path;  /* bubblewrap, checked at creation; NULL with isolation = none */
  char *dir;         /* the folder the runner is installed into */
  char *strip_path;
  lr_namespace **namespaces; /* pointers: calls hold them across additions */
  size_t nnamespaces;
  lr_stripper *stripper;
  size_t nsandboxes;  /* started and not yet entirely gone (pooled ones too) */
  struct lr_pool *pool;
  lr_e2b *e2b;        /* backend = e2b: the remote client, until it has closed */
  lr_run *runs; /* runs in flight, linked by run->next/prev */
  size_t nruns;
  uint64_t next_run_id;
  bool disposing, stripper_closed;
  void *ext;                    /* see runtime_ext.h */
  void (*close_ext)(void *ext);
  void (*on_disposed)(void *ud);
  void *disposed_ud;
};

typedef enum lr_run_state {
  LR_RUN_STRIPPING, /* waiting for the stripped program */
  LR_RUN_RUNNING,   /* the sandbox is up, frames flow (a pooled one may still
                       wait for its program: strip_id != 0) */
  LR_RUN_SETTLED,   /* the result is decided; waiting for the sandbox to be gone */
} lr_run_state;

struct lr_call {
  lr_run *run;       /* NULL once the engine is done with it: completing only frees */
  uint64_t run_id;
  const lr_namespace *ns;
  uint64_t id;
  size_t member;     /* index in ns->members */
  bool read_only;
  bool dispatched;   /* the handler has it */
  lr_json args;
  char *args_json;   /* made on first request */
  size_t args_json_len;
  uv_timer_t *timer; /* the policy timeout, when there is one */
  void *user;        /* the handler's */
  char *cancel_reason; /* why the engine gave up on the call, once it has */
  lr_call *next, *prev; /* in run->queue (waiting) or run->calls (dispatched) */
};

struct lr_run {
  lr_runtime *rt;
  lr_run *next, *prev;
  lr_config cfg;
  lr_log_fn on_log;
  lr_done_fn on_done;
  void *ud;
  lr_run_state state;
  uint64_t strip_id;
  lr_sandbox *sb;
  bool sandbox_gone, timer_closed;
  lr_frame_decoder dec;
  lr_buf replies;         /* this turn's replies, as one `replies` frame's JSON so far */
  size_t nreplies;
  uv_timer_t wall;
  uint64_t started_ms;
  /* What the program printed, as received. */
  char **logs;
  size_t *log_lens;
  size_t nlogs, logs_cap;
  lr_ledger ledger;
  /* Bridge state. */
  bool frames_ended, exited, terminal_seen, oom_hint, ledger_over;
  int64_t exit_status;
  int exit_signal;
  uint64_t last_call_id;
  uint64_t id;
  size_t nnamespaces;     /* the runtime's namespaces when the run started */
  bool *visible;          /* per namespace index: may this run see it */
  uint64_t **call_counts; /* per namespace index, per member: calls so far */
  lr_call *calls;         /* dispatched, not completed */
  lr_call *queue, *queue_tail; /* waiting for the read/write gate, in issue order */
  size_t active_readers;
  bool writer_active, pumping;
  /* The result. */
  lr_kind kind;
  char *message;
  size_t message_len;
  lr_json value;
  bool has_value;
  lr_stats stats;
};

/* run.c */
void lr__run_settle(lr_run *run, lr_kind kind, const char *message, size_t len);
void lr__run_send_reply(lr_run *run, const lr_buf *json);

/* runtime.c */
const lr_namespace *lr__runtime_find_namespace(const lr_runtime *rt, const char *global, size_t len);
/* Appends the boot descriptor of one namespace. */
void lr__runtime_describe_namespace(const lr_namespace *ns, lr_buf *b);
void lr__runtime_run_finished(lr_runtime *rt, lr_run *run);
/* A new sandbox for a run with config cfg (counted until it is gone). */
lr_sandbox *lr__runtime_start_sandbox(lr_runtime *rt, const lr_config *cfg, char err[LR_ERR_MAX]);
/* A warm one from the pool when one fits cfg, else a new one. */
lr_sandbox *lr__runtime_take_sandbox(lr_runtime *rt, const lr_config *cfg, char err[LR_ERR_MAX]);

/* pool.c: warm sandboxes, started before their program is known. */
lr_sandbox *lr__pool_take(lr_runtime *rt, const lr_config *cfg);
void lr__pool_refill(lr_runtime *rt);
void lr__pool_close(lr_runtime *rt);
/* runtime.c: the pool's handles are closed. */
void lr__runtime_pool_closed(lr_runtime *rt);

/* call.c */
/* Queues a call behind the run's read/write gate and dispatches what the
 * gate allows. Takes ownership of *args. */
void lr__call_submit(lr_run *run, const lr_namespace *ns, size_t member, uint64_t id, lr_json *args);
/* The run settled: queued calls are dropped, dispatched ones cancelled. */
void lr__call_detach_all(lr_run *run);

#endif
