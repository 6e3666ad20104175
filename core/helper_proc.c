/* A helper process of the host (the type-stripping helper): Node on a script,
 * in a session and process group of its own, talking on its stdio. Ending it
 * means SIGTERM to its group, SIGKILL after the grace, and waiting until the
 * process is reaped, its pipes are closed and its group is empty. */
#include "helper_proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct lr_proc {
  uv_loop_t *loop;
  uv_process_t proc;
  uv_pipe_t in, out, err;
  uv_timer_t timer; /* kill grace and group polling */
  lr_proc_events ev;
  void *ud;
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

static void lr__maybe_closed(lr_proc *sb) {
  if (sb->open_handles == 0) {
    if (sb->ev.on_closed) sb->ev.on_closed(sb->ud);
    free(sb);
  }
}

static void lr__on_handle_closed(uv_handle_t *h) {
  lr_proc *sb = h->data;
  sb->open_handles--;
  lr__maybe_closed(sb);
}

static void lr__close(lr_proc *sb, uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, lr__on_handle_closed);
}

static void lr__signal_group(lr_proc *sb, int sig) { kill(-sb->proc.pid, sig); }

/* Once terminating: escalate after the grace, finish when all is gone. */
static void lr__check_gone(lr_proc *sb) {
  if (!sb->terminating || sb->closing_timer) return;
  if (!sb->killed && uv_now(sb->loop) >= sb->term_at + sb->grace_ms) {
    lr__signal_group(sb, SIGKILL);
    sb->killed = true;
  }
  if (!sb->exited || lr__group_alive(sb->proc.pid)) return;
  sb->closing_timer = true;
  uv_timer_stop(&sb->timer);
  lr__close(sb, (uv_handle_t *)&sb->timer);
  lr__close(sb, (uv_handle_t *)&sb->proc);
}

static void lr__on_timer(uv_timer_t *t) {
  lr_proc *sb = t->data;
  /* Poll fast at first (a finished runner is gone within a few ms), then
   * back off. */
  if (++sb->polls == 50) uv_timer_set_repeat(t, 10);
  lr__check_gone(sb);
}

static void lr__on_exit(uv_process_t *p, int64_t status, int term_signal) {
  lr_proc *sb = p->data;
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
  lr_proc *sb = s->data;
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
  lr_proc *sb = req->handle->data;
  free(w->data);
  free(w);
  if (status < 0 && status != UV_ECANCELED && !sb->terminating && sb->ev.on_write_error)
    sb->ev.on_write_error(sb->ud, uv_strerror(status));
}

int lr__proc_start(uv_loop_t *loop, const lr_proc_spec *spec,
                            const lr_proc_events *events, void *ud, lr_proc **out,
                            char err[LR_ERR_MAX]) {
  lr_proc *sb = lr__xcalloc(1, sizeof *sb);
  sb->loop = loop;
  sb->ev = *events;
  sb->ud = ud;
  sb->grace_ms = spec->kill_grace_ms;
  uv_pipe_init(loop, &sb->in, 0);
  uv_pipe_init(loop, &sb->out, 0);
  uv_pipe_init(loop, &sb->err, 0);
  uv_timer_init(loop, &sb->timer);
  sb->in.data = sb->out.data = sb->err.data = sb->timer.data = sb->proc.data = sb;

  /* The address-space cap is applied by prlimit, which then execs Node: the
   * cap holds for the runner and everything it starts (libuv has no hook to
   * set it between fork and exec). */
  char as_arg[48];
  snprintf(as_arg, sizeof as_arg, "--as=%llu", (unsigned long long)spec->max_memory_bytes);
  char *plain[] = {(char *)spec->node_path, "--disable-warning=ExperimentalWarning", (char *)spec->script, NULL};
  char *capped[] = {(char *)spec->prlimit_path, as_arg, "--core=0", "--", (char *)spec->node_path,
                    "--disable-warning=ExperimentalWarning", (char *)spec->script, NULL};
  bool cap = spec->max_memory_bytes && spec->prlimit_path;
  char **args = cap ? capped : plain;
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
  int rc = uv_spawn(loop, &sb->proc, &opts);
  if (rc != 0) {
    lr__errf(err, "cannot start %s: %s", spec->node_path, uv_strerror(rc));
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
  uv_read_start((uv_stream_t *)&sb->out, lr__alloc, lr__on_read);
  uv_read_start((uv_stream_t *)&sb->err, lr__alloc, lr__on_read);
  *out = sb;
  return 0;
}

void lr__proc_write(lr_proc *sb, char *data, size_t len) {
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

void lr__proc_terminate(lr_proc *sb) {
  if (sb->terminating) return;
  sb->terminating = true;
  sb->term_at = uv_now(sb->loop);
  lr__signal_group(sb, SIGTERM);
  if (sb->grace_ms == 0) {
    lr__signal_group(sb, SIGKILL);
    sb->killed = true;
  }
  lr__close(sb, (uv_handle_t *)&sb->in);
  lr__close(sb, (uv_handle_t *)&sb->out);
  lr__close(sb, (uv_handle_t *)&sb->err);
  uv_timer_start(&sb->timer, lr__on_timer, 1, 1);
  lr__check_gone(sb);
}
