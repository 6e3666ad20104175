/* What a backend gives the run state machine: start a process, write its
 * stdin, read its stdout/stderr, signal its process group(s), and say when
 * everything of it is gone. Frames, ledger and run state live above this
 * line and are shared by every backend. */
#ifndef LR_SANDBOX_H
#define LR_SANDBOX_H

#include <uv.h>
#include "util.h"

typedef struct lr_sandbox lr_sandbox;

typedef struct lr_sandbox_events {
  void (*on_stdout)(void *ud, const char *data, size_t len);
  void (*on_stdout_end)(void *ud);
  void (*on_stderr)(void *ud, const char *data, size_t len);
  /* The main process exited (exit status, or the signal that ended it). */
  void (*on_exit)(void *ud, int64_t status, int term_signal);
  /* A write failed (e.g. the process is gone). */
  void (*on_write_error)(void *ud, const char *message);
  /* Everything is gone: the process reaped, its pipes closed, every process
   * group it was given empty. The sandbox is freed after this returns. */
  void (*on_closed)(void *ud);
} lr_sandbox_events;

typedef struct lr_sandbox_spec {
  const char *node_path;
  const char *script; /* the .mjs to run */
  uint64_t kill_grace_ms;
  uint64_t max_memory_bytes; /* RLIMIT_AS of the process and its children; 0 = none */
  const char *prlimit_path;  /* util-linux's prlimit, which applies it */
  /* The isolation (core/isolation.h). cfg NULL: a plain Node process on
   * script (the strip helper). Else script is runtime_dir/<name>, and cfg's
   * isolation, network, tmpMb, maxProcesses, mounts and
   * maxProcessMemoryMb (instead of max_memory_bytes) shape the sandbox. */
  const struct lr_config *cfg;
  const char *runtime_dir;
  const char *bwrap_path;
  const char *const *script_args; /* NULL-terminated, may be NULL */
} lr_sandbox_spec;

/* Starts the process in its own process group. On failure nothing is left
 * and err says why. */
int lr__sandbox_local_start(uv_loop_t *loop, const lr_sandbox_spec *spec,
                            const lr_sandbox_events *events, void *ud,
                            lr_sandbox **out, char err[LR_ERR_MAX]);

/* Writes to stdin; takes ownership of data (malloc'd). */
void lr__sandbox_write(lr_sandbox *sb, char *data, size_t len);

/* Another process group that belongs to this sandbox (the runner's
 * controller): it is signalled and awaited with the main one. */
void lr__sandbox_add_group(lr_sandbox *sb, int pgid);

/* Ends the sandbox: SIGTERM to every group, SIGKILL after the grace, stops
 * reading, and reports on_closed once nothing is left. Idempotent. */
void lr__sandbox_terminate(lr_sandbox *sb);


#endif
