/* What a backend gives the run state machine: a sandbox process that runs
 * the runner's controller, a private frame channel to it (the sandbox's fd 3
 * in, fd 4 out, every line out carrying the channel token), its stdout and
 * stderr as log text, and its end. The host plays the launcher: frames,
 * ledger and run state live above this line and are shared by every backend.
 *
 * A sandbox may be started before its run exists (the warm pool): until a
 * run attaches, its output is dropped. */
#ifndef LR_SANDBOX_H
#define LR_SANDBOX_H

#include <uv.h>
#include "lunarun.h"
#include "util.h"

typedef struct lr_sandbox lr_sandbox;

#define LR_TOKEN_LEN 32

typedef struct lr_sandbox_events {
  /* Bytes of the frame channel (the sandbox's fd 4). */
  void (*on_frames)(void *ud, const char *data, size_t len);
  void (*on_frames_end)(void *ud);
  /* One read of the sandbox's stdout or stderr, as UTF-8 text (complete
   * code points; invalid bytes as U+FFFD): one log entry. */
  void (*on_output)(void *ud, const char *text, size_t len);
  /* The sandbox's process exited (exit status, or the signal that ended it;
   * under bubblewrap a status 128+n is reported as signal n). */
  void (*on_exit)(void *ud, int64_t status, int term_signal);
  void (*on_write_error)(void *ud, const char *message);
  /* The backend lost the sandbox (a remote step failed); message names the
   * step. The run fails as worker-exit with it. */
  void (*on_failed)(void *ud, const char *message);
  /* After lr__sandbox_terminate: every process of the sandbox has been sent
   * SIGKILL (or is gone) and its output is drained. The run may deliver. */
  void (*on_released)(void *ud);
  /* Just before this loop turn's writes leave (after lr__sandbox_kick): the
   * run queues what it batched over the turn (its replies). */
  void (*on_flush)(void *ud);
} lr_sandbox_events;

/* The runner's files, embedded by cmake/embed.cmake (NULL name ends the table). */
struct lr_embedded {
  const char *name;
  const char *data;
  size_t len;
};
extern const struct lr_embedded lr__runner_files[];

/* What a sandbox depends on; two sandboxes with equal keys are
 * interchangeable (the pool's key). */
typedef struct lr_sandbox_spec {
  const lr_config *cfg;      /* heap cap, memory cap, isolation settings, kill grace */
  const char *node_path;
  const char *runtime_dir;   /* the runner files (and the sandbox's /etc files) */
  const char *bwrap_path;    /* NULL with isolation = none */
  const char *prlimit_path;
  /* Called once the sandbox is entirely gone (reaped, its namespace or
   * group empty, every handle closed), just before it is freed. */
  void (*on_gone)(void *owner);
  void *owner;
} lr_sandbox_spec;

/* Starts the sandbox (its controller starts the program's worker at once and
 * waits for the boot frame). On failure nothing is left and err says why. */
int lr__sandbox_local_start(uv_loop_t *loop, const lr_sandbox_spec *spec, lr_sandbox **out,
                            char err[LR_ERR_MAX]);

/* What each backend implements (sandbox_local.c, sandbox_e2b.c). */
typedef struct lr_sandbox_ops {
  /* Routes the sandbox's events to a run (events may be NULL: drop them). */
  void (*attach)(lr_sandbox *sb, const lr_sandbox_events *events, void *ud);
  /* True while the sandbox's process has not exited and it is not ending. */
  bool (*alive)(const lr_sandbox *sb);
  /* Queues data (malloc'd; ownership taken) for the sandbox's frame input.
   * Writes queued in one loop turn leave as one write. */
  void (*write)(lr_sandbox *sb, char *data, size_t len);
  /* Asks for on_flush before this loop turn's writes leave. */
  void (*kick)(lr_sandbox *sb);
  /* Ends the sandbox: its processes are killed (TERM, then KILL after the
   * kill grace where a grace applies), its output drained, then
   * on_released; on_gone follows once everything is reaped. Idempotent. */
  void (*terminate)(lr_sandbox *sb);
} lr_sandbox_ops;

/* The backend-neutral head of every sandbox. */
struct lr_sandbox {
  const lr_sandbox_ops *ops;
  /* Every frame line from the sandbox starts with this token; "" when the
   * frames come from a launcher the host trusts (a remote backend, whose
   * launcher checks the controller's token itself). */
  char token[LR_TOKEN_LEN + 1];
};

static inline void lr__sandbox_attach(lr_sandbox *sb, const lr_sandbox_events *events, void *ud) {
  sb->ops->attach(sb, events, ud);
}
static inline const char *lr__sandbox_token(const lr_sandbox *sb) { return sb->token; }
static inline bool lr__sandbox_alive(const lr_sandbox *sb) { return sb->ops->alive(sb); }
static inline void lr__sandbox_write(lr_sandbox *sb, char *data, size_t len) { sb->ops->write(sb, data, len); }
static inline void lr__sandbox_kick(lr_sandbox *sb) { sb->ops->kick(sb); }
static inline void lr__sandbox_terminate(lr_sandbox *sb) { sb->ops->terminate(sb); }

/* sandbox_e2b.c: the E2B backend. One client per runtime; every run of the
 * runtime runs in the one remote sandbox it makes at the first run. */
typedef struct lr_e2b lr_e2b;

/* Reads $E2B_API_KEY and the e2b* keys of cfg; NULL with err (naming the
 * key or the variable) when they are missing or unusable. */
lr_e2b *lr__e2b_new(uv_loop_t *loop, const lr_config *cfg, char err[LR_ERR_MAX]);

/* A run's sandbox on the remote one (made first if needed). */
int lr__sandbox_e2b_start(lr_e2b *e2b, const lr_sandbox_spec *spec, lr_sandbox **out, char err[LR_ERR_MAX]);

/* Once every run's sandbox is gone: deletes the remote sandbox, closes the
 * client, then on_closed(ud), from the loop. */
void lr__e2b_close(lr_e2b *e2b, void (*on_closed)(void *ud), void *ud);

#endif
