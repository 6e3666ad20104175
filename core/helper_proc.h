/* A helper process of the host (the type-stripping helper, core/strip.c):
 * start Node on a script, write its stdin, read its stdout/stderr, end it
 * and say when everything of it is gone. Runs have their sandbox
 * (core/sandbox.h). */
#ifndef LR_HELPER_PROC_H
#define LR_HELPER_PROC_H

#include <uv.h>
#include "util.h"

typedef struct lr_proc lr_proc;

typedef struct lr_proc_events {
  void (*on_stdout)(void *ud, const char *data, size_t len);
  void (*on_stdout_end)(void *ud);
  void (*on_stderr)(void *ud, const char *data, size_t len);
  /* The main process exited (exit status, or the signal that ended it). */
  void (*on_exit)(void *ud, int64_t status, int term_signal);
  /* A write failed (e.g. the process is gone). */
  void (*on_write_error)(void *ud, const char *message);
  /* Everything is gone: the process reaped, its pipes closed, every process
   * group empty. It is freed after this returns. */
  void (*on_closed)(void *ud);
} lr_proc_events;

typedef struct lr_proc_spec {
  const char *node_path;
  const char *script; /* the .mjs to run */
  uint64_t kill_grace_ms;
  uint64_t max_memory_bytes; /* RLIMIT_AS of the process and its children; 0 = none */
  const char *prlimit_path;  /* util-linux's prlimit, which applies it */
} lr_proc_spec;

/* Starts the process in its own process group. On failure nothing is left
 * and err says why. */
int lr__proc_start(uv_loop_t *loop, const lr_proc_spec *spec,
                            const lr_proc_events *events, void *ud,
                            lr_proc **out, char err[LR_ERR_MAX]);

/* Writes to stdin; takes ownership of data (malloc'd). */
void lr__proc_write(lr_proc *sb, char *data, size_t len);

/* Ends the process: SIGTERM to its group, SIGKILL after the grace, stops
 * reading, and reports on_closed once nothing is left. Idempotent. */
void lr__proc_terminate(lr_proc *sb);


#endif
