/* The local backend: the runner is a child process of the host in a session
 * and process group of its own. Ending it means SIGTERM to every group it
 * owns, SIGKILL after the grace, and waiting until the process is reaped,
 * its pipes are closed and no living process is left in those groups. */
#include "sandbox.h"
#include "isolation.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define LR_MAX_GROUPS 4

struct lr_sandbox {
  uv_loop_t *loop;
  uv_process_t proc;
  uv_pipe_t in, out, err;
  uv_timer_t timer; /* kill grace and group polling */
  lr_sandbox_events ev;
  void *ud;
  int groups[LR_MAX_GROUPS];
  int ngroups;
  int open_handles;
  uint64_t grace_ms;
  uint64_t term_at;
  unsigned polls;
  bool exited, terminating, killed, closing_timer;
};

typedef struct lr_write_req {
  uv_write_t req;
  char *data;
} lr_write_req;

/* True while a process that is not a zombie is in group pgid. kill(-g, 0)
 * answers for most cases; zombies (orphans the init of a container may never
 * reap) still count for kill, so a hit is confirmed by reading /proc. */
static bool lr__group_alive(int pgid) {
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR *d = opendir("/proc");
  if (!d) return true;
  bool alive = false;
  struct dirent *e;
  while (!alive && (e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* pid (comm) state ppid pgrp ...; comm may hold spaces and parens. */
    char *rp = strrchr(buf, ')');
    char state;
    int ppid, pgrp;
    if (rp && sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid &&
        state != 'Z' && state != 'X')
      alive = true;
  }
  closedir(d);
  return alive;
}

static void lr__maybe_closed(lr_sandbox *sb) {
  if (sb->open_handles == 0) {
    if (sb->ev.on_closed) sb->ev.on_closed(sb->ud);
    free(sb);
  }
}

static void lr__on_handle_closed(uv_handle_t *h) {
  lr_sandbox *sb = h->data;
  sb->open_handles--;
  lr__maybe_closed(sb);
}

static void lr__close(lr_sandbox *sb, uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, lr__on_handle_closed);
}

static void lr__signal_groups(lr_sandbox *sb, int sig) {
  for (int i = 0; i < sb->ngroups; i++) kill(-sb->groups[i], sig);
}

static bool lr__any_group_alive(lr_sandbox *sb) {
  for (int i = 0; i < sb->ngroups; i++)
    if (lr__group_alive(sb->groups[i])) return true;
  return false;
}

/* Once terminating: escalate after the grace, finish when all is gone. */
static void lr__check_gone(lr_sandbox *sb) {
  if (!sb->terminating || sb->closing_timer) return;
  if (!sb->killed && uv_now(sb->loop) >= sb->term_at + sb->grace_ms) {
    lr__signal_groups(sb, SIGKILL);
    sb->killed = true;
  }
  if (!sb->exited || lr__any_group_alive(sb)) return;
  sb->closing_timer = true;
  uv_timer_stop(&sb->timer);
  lr__close(sb, (uv_handle_t *)&sb->timer);
  lr__close(sb, (uv_handle_t *)&sb->proc);
}

static void lr__on_timer(uv_timer_t *t) {
  lr_sandbox *sb = t->data;
  /* Poll fast at first (a finished runner is gone within a few ms), then
   * back off. */
  if (++sb->polls == 50) uv_timer_set_repeat(t, 10);
  lr__check_gone(sb);
}

static void lr__on_exit(uv_process_t *p, int64_t status, int term_signal) {
  lr_sandbox *sb = p->data;
  sb->exited = true;
  if (sb->ev.on_exit) sb->ev.on_exit(sb->ud, status, term_signal);
  lr__check_gone(sb);
}

static void lr__alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  (void)suggested;
  /* Big reads: frames of tens of megabytes are normal. */
  static const size_t size = 256 * 1024;
  buf->base = lr__xmalloc(size);
  buf->len = size;
}

static void lr__on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  lr_sandbox *sb = s->data;
  bool is_out = s == (uv_stream_t *)&sb->out;
  if (n > 0 && !sb->terminating) {
    if (is_out)
      sb->ev.on_stdout(sb->ud, buf->base, (size_t)n);
    else
      sb->ev.on_stderr(sb->ud, buf->base, (size_t)n);
  }
  free(buf->base);
  if (n < 0) {
    lr__close(sb, (uv_handle_t *)s);
    if (is_out && !sb->terminating && sb->ev.on_stdout_end) sb->ev.on_stdout_end(sb->ud);
  }
}

static void lr__on_write(uv_write_t *req, int status) {
  lr_write_req *w = (lr_write_req *)req;
  lr_sandbox *sb = req->handle->data;
  free(w->data);
  free(w);
  if (status < 0 && status != UV_ECANCELED && !sb->terminating && sb->ev.on_write_error)
    sb->ev.on_write_error(sb->ud, uv_strerror(status));
}

int lr__sandbox_local_start(uv_loop_t *loop, const lr_sandbox_spec *spec,
                            const lr_sandbox_events *events, void *ud, lr_sandbox **out,
                            char err[LR_ERR_MAX]) {
  /* The command (core/isolation.h): prlimit applies the address-space cap,
   * then execs Node (or bwrap, then prlimit, then Node), so the cap holds
   * for the runner and everything it starts. */
  lr_config plain_cfg;
  const lr_config *cfg = spec->cfg;
  const char *dir = spec->runtime_dir, *name = spec->script;
  char *dir_copy = NULL;
  if (!cfg) {
    lr_config_init(&plain_cfg);
    plain_cfg.isolation = LR_ISOLATION_NONE;
    plain_cfg.max_process_memory_mb = 0;
    cfg = &plain_cfg;
  }
  if (!dir) {
    const char *slash = strrchr(spec->script, '/');
    dir = dir_copy = slash ? lr__xmemdup(spec->script, (size_t)(slash - spec->script)) : lr__xstrdup(".");
    name = slash ? slash + 1 : spec->script;
  }
  lr_sandbox_cmd_spec cs = {
      .cfg = cfg,
      .node_path = spec->node_path,
      .runtime_dir = dir,
      .bwrap_path = spec->bwrap_path,
      .prlimit_path = spec->prlimit_path,
      .script = name,
      .script_args = spec->script_args,
      .info_fd = -1,
  };
  lr_sandbox_cmd cmd;
  int crc = lr__sandbox_command(&cs, &cmd, err);
  free(dir_copy);
  if (crc != 0) return -1;
  char **args = cmd.argv;
  lr_sandbox *sb = lr__xcalloc(1, sizeof *sb);
  sb->loop = loop;
  sb->ev = *events;
  sb->ud = ud;
  sb->grace_ms = spec->kill_grace_ms;
  uv_pipe_init(loop, &sb->in, 0);
  uv_pipe_init(loop, &sb->out, 0);
  uv_pipe_init(loop, &sb->err, 0);
  uv_timer_init(loop, &sb->timer);
  sb->in.data = sb->out.data = sb->err.data = sb->timer.data = sb->proc.data = sb;

  char *env[] = {NULL}; /* the sandbox sees none of the host's environment */
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&sb->in},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&sb->out},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&sb->err},
  };
  uv_process_options_t opts = {
      .exit_cb = lr__on_exit,
      .file = args[0],
      .args = args,
      .env = env,
      .flags = UV_PROCESS_DETACHED, /* setsid: its own session and group */
      .stdio_count = 3,
      .stdio = stdio,
  };
  if (cmd.uid >= 0) {
    opts.uid = (uv_uid_t)cmd.uid;
    opts.gid = (uv_gid_t)cmd.gid;
    opts.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
  }
  int rc = uv_spawn(loop, &sb->proc, &opts);
  if (rc != 0) lr__errf(err, "cannot start %s: %s", args[0], uv_strerror(rc));
  lr__sandbox_cmd_free(&cmd);
  if (rc != 0) {
    /* Nothing was started: close the handles and free without callbacks. */
    sb->ev.on_closed = NULL;
    sb->exited = true;
    sb->open_handles = 4;
    lr__close(sb, (uv_handle_t *)&sb->in);
    lr__close(sb, (uv_handle_t *)&sb->out);
    lr__close(sb, (uv_handle_t *)&sb->err);
    lr__close(sb, (uv_handle_t *)&sb->timer);
    return -1;
  }
  sb->open_handles = 5;
  sb->groups[sb->ngroups++] = sb->proc.pid;
  uv_read_start((uv_stream_t *)&sb->out, lr__alloc, lr__on_read);
  uv_read_start((uv_stream_t *)&sb->err, lr__alloc, lr__on_read);
  *out = sb;
  return 0;
}

void lr__sandbox_write(lr_sandbox *sb, char *data, size_t len) {
  if (sb->terminating || uv_is_closing((uv_handle_t *)&sb->in)) {
    free(data);
    return;
  }
  lr_write_req *w = lr__xmalloc(sizeof *w);
  w->data = data;
  uv_buf_t buf = uv_buf_init(data, (unsigned)len);
  int rc = uv_write(&w->req, (uv_stream_t *)&sb->in, &buf, 1, lr__on_write);
  if (rc != 0) {
    free(data);
    free(w);
    if (sb->ev.on_write_error) sb->ev.on_write_error(sb->ud, uv_strerror(rc));
  }
}

void lr__sandbox_add_group(lr_sandbox *sb, int pgid) {
  if (pgid <= 1 || sb->ngroups == LR_MAX_GROUPS) return;
  for (int i = 0; i < sb->ngroups; i++)
    if (sb->groups[i] == pgid) return;
  sb->groups[sb->ngroups++] = pgid;
  if (sb->terminating) kill(-pgid, sb->killed ? SIGKILL : SIGTERM);
}

void lr__sandbox_terminate(lr_sandbox *sb) {
  if (sb->terminating) return;
  sb->terminating = true;
  sb->term_at = uv_now(sb->loop);
  lr__signal_groups(sb, SIGTERM);
  if (sb->grace_ms == 0) {
    lr__signal_groups(sb, SIGKILL);
    sb->killed = true;
  }
  lr__close(sb, (uv_handle_t *)&sb->in);
  lr__close(sb, (uv_handle_t *)&sb->out);
  lr__close(sb, (uv_handle_t *)&sb->err);
  uv_timer_start(&sb->timer, lr__on_timer, 1, 1);
  lr__check_gone(sb);
}
