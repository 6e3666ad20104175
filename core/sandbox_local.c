/* The local backend: the host itself plays the launcher. It spawns the
 * runner's controller (under bubblewrap, or in a process group of its own
 * with isolation = none), reads its stdout/stderr as log text, and talks
 * frames with it on two private pipes (its fd 3 in, fd 4 out). Ending it
 * means SIGKILL to everything of it, draining its output, then waiting until
 * nothing of it is left. */
#define _GNU_SOURCE
#include "sandbox.h"
#include "isolation.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* What is read from the sandbox's pipes once it is killed: what they hold
 * then, up to this much (a writer racing its own SIGKILL is not waited for,
 * nor is a descendant that holds the pipes). */
#define LR_DRAIN_MAX ((size_t)8 << 20)

enum { LR_FD_IN = 3, LR_FD_OUT = 4, LR_FD_INFO = 5 };

typedef struct lr_out_pipe {
  uv_pipe_t pipe;
  lr_utf8_stream utf8;
  bool open;
} lr_out_pipe;

typedef struct lr_local {
  lr_sandbox base;     /* the backend-neutral part (sandbox.h) */
  uv_loop_t *loop;
  uv_process_t proc;
  lr_out_pipe out[2];  /* the sandbox's stdout and stderr */
  uv_pipe_t to;        /* host -> sandbox (its fd 3) */
  uv_pipe_t from;      /* sandbox -> host (its fd 4) */
  uv_pipe_t info;      /* bubblewrap's --info-fd: the namespace's init pid */
  uv_poll_t init_poll; /* a pidfd of that init: readable once the namespace is gone */
  uv_timer_t timer;    /* kill grace, drain deadline, group polling */
  uv_prepare_t flush;  /* one write per loop turn, just before the loop waits */
  lr_buf outbox;
  lr_buf info_text;
  const lr_sandbox_events *ev;
  void *ud;
  void (*on_gone)(void *owner);
  void *owner;
  int pgid;
  int init_pidfd;
  bool isolated, from_open, to_open, info_open, init_polling;
  int open_handles;
  uint64_t grace_ms, term_at;
  unsigned polls;
  bool exited, terminating, killed, released, closing;
} lr_local;

static const lr_sandbox_ops lr__local_ops;
static void lr__local_write(lr_sandbox *base, char *data, size_t len);
static void lr__local_kick(lr_sandbox *base);

typedef struct lr_write_req {
  uv_write_t req;
  char *data;
} lr_write_req;

static void lr__maybe_gone(lr_local *sb) {
  if (sb->open_handles > 0) return;
  lr__buf_free(&sb->outbox);
  lr__buf_free(&sb->info_text);
  if (sb->init_pidfd >= 0) close(sb->init_pidfd);
  void (*cb)(void *) = sb->on_gone;
  void *owner = sb->owner;
  free(sb);
  if (cb) cb(owner);
}

static void lr__on_handle_closed(uv_handle_t *h) {
  lr_local *sb = h->data;
  sb->open_handles--;
  lr__maybe_gone(sb);
}

static void lr__close(lr_local *sb, uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, lr__on_handle_closed);
}

static void lr__kill_all(lr_local *sb, int sig) {
  if (sb->isolated) {
    /* The outer bubblewrap: its death takes the namespace's init with it
     * (--die-with-parent), and the init's death every process inside. The
     * init too, through its pidfd (a host pid, never reused under us): a
     * bwrap killed right after its start may not have armed the
     * parent-death signal yet. */
    if (!sb->exited) kill(sb->proc.pid, sig);
    if (sb->init_pidfd >= 0 && sig == SIGKILL) syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0);
  } else {
    kill(-sb->pgid, sig);
  }
}

static void lr__emit_output(lr_local *sb, lr_out_pipe *op, const char *data, size_t n, bool end) {
  lr_buf text = {0};
  lr__utf8_stream_feed(&op->utf8, data, n, end, &text);
  if (text.len && sb->ev && sb->ev->on_output) sb->ev->on_output(sb->ud, text.data, text.len);
  lr__buf_free(&text);
}

/* Everything of the sandbox was sent SIGKILL: what its pipes hold now is
 * what it printed before the end. Read it at once, then close them. */
static void lr__drain_now(lr_local *sb) {
  size_t total = 0;
  char *buf = lr__xmalloc(256 * 1024);
  for (int i = 0; i < 2; i++) {
    lr_out_pipe *op = &sb->out[i];
    if (!op->open) continue;
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&op->pipe, &fd) == 0) {
      ssize_t n;
      while (total < LR_DRAIN_MAX && (n = read(fd, buf, 256 * 1024)) > 0) {
        total += (size_t)n;
        lr__emit_output(sb, op, buf, (size_t)n, false);
      }
    }
    lr__emit_output(sb, op, NULL, 0, true);
    op->open = false;
    lr__close(sb, (uv_handle_t *)&op->pipe);
  }
  free(buf);
}

/* Everything of the sandbox was sent SIGKILL and its output read: the run
 * may deliver. Then wait until nothing is left. */
static void lr__check(lr_local *sb) {
  if (!sb->terminating || sb->closing) return;
  if (!sb->killed && (sb->exited || uv_now(sb->loop) >= sb->term_at + sb->grace_ms)) {
    lr__kill_all(sb, SIGKILL);
    sb->killed = true;
  }
  if (!sb->released && sb->killed) {
    lr__drain_now(sb);
    sb->released = true;
    if (sb->ev && sb->ev->on_released) sb->ev->on_released(sb->ud);
    sb->ev = NULL;
  }
  if (!sb->released || !sb->exited || sb->info_open) return;
  if (sb->isolated ? sb->init_polling : lr__group_alive(sb->pgid)) return;
  sb->closing = true;
  uv_timer_stop(&sb->timer);
  lr__close(sb, (uv_handle_t *)&sb->timer);
  lr__close(sb, (uv_handle_t *)&sb->flush);
  lr__close(sb, (uv_handle_t *)&sb->proc);
}

static void lr__on_timer(uv_timer_t *t) {
  lr_local *sb = t->data;
  /* Fast at first (a killed sandbox is gone within a few ms), then back off:
   * without a namespace each poll may read /proc. */
  if (++sb->polls == 50) uv_timer_set_repeat(t, 10);
  lr__check(sb);
}

static void lr__on_exit(uv_process_t *p, int64_t status, int term_signal) {
  lr_local *sb = p->data;
  sb->exited = true;
  /* bubblewrap reports a child killed by signal n as exit status 128+n. */
  if (sb->isolated && term_signal == 0 && status > 128 && status < 128 + 65) {
    term_signal = (int)(status - 128);
    status = 0;
  }
  if (sb->ev && sb->ev->on_exit) sb->ev->on_exit(sb->ud, status, term_signal);
  lr__check(sb);
}

static void lr__alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  (void)suggested;
  /* Big reads: frames of tens of megabytes are normal. */
  static const size_t size = 256 * 1024;
  buf->base = lr__xmalloc(size);
  buf->len = size;
}

static void lr__on_output(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  lr_local *sb = s->data;
  lr_out_pipe *op = (uv_pipe_t *)s == &sb->out[0].pipe ? &sb->out[0] : &sb->out[1];
  if (n > 0 || n == UV_EOF) lr__emit_output(sb, op, buf->base, n > 0 ? (size_t)n : 0, n < 0);
  free(buf->base);
  if (n < 0) {
    op->open = false;
    lr__close(sb, (uv_handle_t *)s);
    lr__check(sb);
  }
}

static void lr__on_frames(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  lr_local *sb = s->data;
  if (n > 0 && sb->ev && sb->ev->on_frames) sb->ev->on_frames(sb->ud, buf->base, (size_t)n);
  free(buf->base);
  if (n < 0) {
    sb->from_open = false;
    lr__close(sb, (uv_handle_t *)s);
    if (sb->ev && sb->ev->on_frames_end) sb->ev->on_frames_end(sb->ud);
  }
}

static void lr__on_init_gone(uv_poll_t *p, int status, int events) {
  lr_local *sb = p->data;
  sb->init_polling = false;
  uv_poll_stop(p);
  lr__close(sb, (uv_handle_t *)p);
  lr__check(sb);
}

/* bubblewrap's info: {"child-pid": N}, the namespace's init as the host
 * sees it. A pidfd of it becomes readable once it is gone, and a PID
 * namespace's init is gone only after every process inside it. */
static void lr__on_info(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  lr_local *sb = s->data;
  if (n > 0 && sb->info_text.len < 4096) lr__buf_append(&sb->info_text, buf->base, (size_t)n);
  free(buf->base);
  if (n >= 0) return;
  sb->info_open = false;
  lr__close(sb, (uv_handle_t *)s);
  const char *p = sb->info_text.data ? strstr(sb->info_text.data, "\"child-pid\"") : NULL;
  int pid = 0;
  if (p && sscanf(p, "\"child-pid\" : %d", &pid) != 1) sscanf(p, "\"child-pid\":%d", &pid);
  int fd = pid > 1 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
  if (fd >= 0 && uv_poll_init(sb->loop, &sb->init_poll, fd) == 0) {
    sb->init_pidfd = fd;
    sb->init_poll.data = sb;
    sb->open_handles++;
    sb->init_polling = true;
    uv_poll_start(&sb->init_poll, UV_READABLE, lr__on_init_gone);
  } else if (fd >= 0) {
    close(fd);
  }
  if (sb->terminating && !sb->killed) {
    lr__kill_all(sb, SIGKILL);
    sb->killed = true;
  }
  lr__check(sb);
}

static void lr__on_write(uv_write_t *req, int status) {
  lr_write_req *w = (lr_write_req *)req;
  lr_local *sb = req->handle->data;
  free(w->data);
  free(w);
  if (status < 0 && status != UV_ECANCELED && !sb->terminating && sb->ev && sb->ev->on_write_error)
    sb->ev->on_write_error(sb->ud, uv_strerror(status));
}

static void lr__on_flush(uv_prepare_t *c) {
  lr_local *sb = c->data;
  /* Still active while the run adds its batch: its write does not re-arm. */
  if (sb->ev && sb->ev->on_flush && !sb->terminating) sb->ev->on_flush(sb->ud);
  uv_prepare_stop(c);
  if (!sb->outbox.len) return;
  size_t len;
  char *data = lr__buf_steal(&sb->outbox, &len);
  if (sb->terminating || !sb->to_open) {
    free(data);
    return;
  }
  lr_write_req *w = lr__xmalloc(sizeof *w);
  w->data = data;
  uv_buf_t buf = uv_buf_init(data, (unsigned)len);
  int rc = uv_write(&w->req, (uv_stream_t *)&sb->to, &buf, 1, lr__on_write);
  if (rc != 0) {
    free(data);
    free(w);
    if (sb->ev && sb->ev->on_write_error) sb->ev->on_write_error(sb->ud, uv_strerror(rc));
  }
}

static void lr__make_token(char out[LR_TOKEN_LEN + 1]) {
  unsigned char raw[LR_TOKEN_LEN / 2];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n > 0) got += (size_t)n;
    else if (errno != EINTR) break;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof raw; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[LR_TOKEN_LEN] = '\0';
}

static void lr__close_fds(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

int lr__sandbox_local_start(uv_loop_t *loop, const lr_sandbox_spec *spec, lr_sandbox **out,
                            char err[LR_ERR_MAX]) {
  *out = NULL;
  bool isolated = spec->bwrap_path != NULL;
  /* [0,1]: host -> sandbox, [2,3]: sandbox -> host, [4,5]: bubblewrap's info. */
  int fds[6] = {-1, -1, -1, -1, -1, -1};
  if (pipe2(fds, O_CLOEXEC) != 0 || pipe2(fds + 2, O_CLOEXEC) != 0 ||
      (isolated && pipe2(fds + 4, O_CLOEXEC) != 0)) {
    lr__close_fds(fds, 6);
    return lr__errf(err, "cannot make the sandbox's pipes: %s", strerror(errno));
  }
  /* Fewer wake-ups for big frames; refused for unprivileged users at times,
   * which only costs speed. */
  (void)fcntl(fds[2], F_SETPIPE_SZ, 1 << 20);

  char heap[24];
  snprintf(heap, sizeof heap, "%llu", (unsigned long long)spec->cfg->max_old_generation_size_mb);
  const char *args[] = {heap, NULL};
  lr_sandbox_cmd_spec cs = {
      .cfg = spec->cfg,
      .node_path = spec->node_path,
      .runtime_dir = spec->runtime_dir,
      .bwrap_path = spec->bwrap_path,
      .prlimit_path = spec->prlimit_path,
      .script = "controller.mjs",
      .script_args = args,
      .info_fd = isolated ? LR_FD_INFO : -1,
  };
  lr_sandbox_cmd cmd = {0};
  if (lr__sandbox_command(&cs, &cmd, err) != 0) {
    lr__close_fds(fds, 6);
    return -1;
  }

  lr_local *sb = lr__xcalloc(1, sizeof *sb);
  sb->base.ops = &lr__local_ops;
  sb->loop = loop;
  sb->isolated = isolated;
  sb->grace_ms = spec->cfg->kill_grace_ms;
  sb->on_gone = spec->on_gone;
  sb->owner = spec->owner;
  sb->init_pidfd = -1;
  lr__make_token(sb->base.token);
  for (int i = 0; i < 2; i++) {
    uv_pipe_init(loop, &sb->out[i].pipe, 0);
    sb->out[i].pipe.data = sb;
  }
  uv_timer_init(loop, &sb->timer);
  uv_prepare_init(loop, &sb->flush);
  sb->timer.data = sb->flush.data = sb->proc.data = sb;

  char *env[] = {NULL}; /* the sandbox sees none of the host's environment */
  uv_stdio_container_t stdio[6] = {
      {.flags = UV_IGNORE},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&sb->out[0].pipe},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&sb->out[1].pipe},
      {.flags = UV_INHERIT_FD, .data.fd = fds[0]},
      {.flags = UV_INHERIT_FD, .data.fd = fds[3]},
      {.flags = UV_INHERIT_FD, .data.fd = fds[5]},
  };
  uv_process_options_t opts = {
      .exit_cb = lr__on_exit,
      .file = cmd.argv[0],
      .args = cmd.argv,
      .env = env,
      .flags = UV_PROCESS_DETACHED, /* setsid: its own session and group */
      .stdio_count = isolated ? 6 : 5,
      .stdio = stdio,
  };
  if (cmd.uid >= 0) {
    opts.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
    opts.uid = (uv_uid_t)cmd.uid;
    opts.gid = (uv_gid_t)cmd.gid;
  }
  int rc = uv_spawn(loop, &sb->proc, &opts);
  /* The sandbox's ends are its own now (or nobody's). */
  close(fds[0]);
  close(fds[3]);
  if (fds[5] >= 0) close(fds[5]);
  if (rc != 0) {
    lr__errf(err, "cannot start %s: %s", cmd.argv[0], uv_strerror(rc));
    lr__sandbox_cmd_free(&cmd);
    close(fds[1]);
    close(fds[2]);
    if (fds[4] >= 0) close(fds[4]);
    /* Nothing was started: close the handles, free without callbacks. */
    sb->on_gone = NULL;
    sb->open_handles = 4;
    sb->closing = true;
    lr__close(sb, (uv_handle_t *)&sb->out[0].pipe);
    lr__close(sb, (uv_handle_t *)&sb->out[1].pipe);
    lr__close(sb, (uv_handle_t *)&sb->timer);
    lr__close(sb, (uv_handle_t *)&sb->flush);
    return -1;
  }
  lr__sandbox_cmd_free(&cmd);
  sb->pgid = sb->proc.pid;
  sb->open_handles = 5; /* proc, out, err, timer, flush */
  sb->out[0].open = sb->out[1].open = true;
  uv_pipe_init(loop, &sb->to, 0);
  uv_pipe_init(loop, &sb->from, 0);
  sb->to.data = sb->from.data = sb;
  uv_pipe_open(&sb->to, fds[1]);
  uv_pipe_open(&sb->from, fds[2]);
  sb->open_handles += 2;
  sb->to_open = sb->from_open = true;
  if (isolated) {
    uv_pipe_init(loop, &sb->info, 0);
    sb->info.data = sb;
    uv_pipe_open(&sb->info, fds[4]);
    sb->open_handles++;
    sb->info_open = true;
    uv_read_start((uv_stream_t *)&sb->info, lr__alloc, lr__on_info);
  }
  for (int i = 0; i < 2; i++) uv_read_start((uv_stream_t *)&sb->out[i].pipe, lr__alloc, lr__on_output);
  uv_read_start((uv_stream_t *)&sb->from, lr__alloc, lr__on_frames);
  /* The token first: the worker reads it before anything else. */
  char *line = lr__xmalloc(LR_TOKEN_LEN + 1);
  memcpy(line, sb->base.token, LR_TOKEN_LEN);
  line[LR_TOKEN_LEN] = '\n';
  lr__local_write(&sb->base, line, LR_TOKEN_LEN + 1);
  *out = &sb->base;
  return 0;
}

static void lr__local_attach(lr_sandbox *base, const lr_sandbox_events *events, void *ud) {
  lr_local *sb = (lr_local *)base;
  sb->ev = events;
  sb->ud = ud;
}

static bool lr__local_alive(const lr_sandbox *base) {
  const lr_local *sb = (const lr_local *)base;
  return !sb->exited && !sb->terminating && sb->from_open;
}

static void lr__local_kick(lr_sandbox *base) {
  lr_local *sb = (lr_local *)base;
  if (!sb->terminating && sb->to_open && !uv_is_active((uv_handle_t *)&sb->flush))
    uv_prepare_start(&sb->flush, lr__on_flush);
}

static void lr__local_write(lr_sandbox *base, char *data, size_t len) {
  lr_local *sb = (lr_local *)base;
  if (sb->terminating || !sb->to_open) {
    free(data);
    return;
  }
  if (!sb->outbox.len && !sb->outbox.cap) {
    /* Nothing queued: take the buffer as it is. */
    sb->outbox.data = data;
    sb->outbox.len = sb->outbox.cap = len;
  } else {
    lr__buf_append(&sb->outbox, data, len);
    free(data);
  }
  if (!uv_is_active((uv_handle_t *)&sb->flush)) uv_prepare_start(&sb->flush, lr__on_flush);
}

static void lr__local_terminate(lr_sandbox *base) {
  lr_local *sb = (lr_local *)base;
  if (sb->terminating) return;
  sb->terminating = true;
  sb->term_at = uv_now(sb->loop);
  /* Under bubblewrap nothing inside needs a grace: the host already has what
   * it needs. But not before bwrap said which process is the namespace's
   * init (within a few ms of its start): a bwrap killed before its child
   * armed the parent-death signal would leave that child behind, so the
   * init is killed through its pidfd too. */
  if (sb->isolated && sb->info_open) {
    /* lr__on_info kills once it knows. */
  } else if (sb->isolated || sb->grace_ms == 0 || sb->exited) {
    lr__kill_all(sb, SIGKILL);
    sb->killed = true;
  } else {
    lr__kill_all(sb, SIGTERM);
  }
  lr__buf_free(&sb->outbox);
  uv_prepare_stop(&sb->flush);
  if (sb->to_open) {
    sb->to_open = false;
    lr__close(sb, (uv_handle_t *)&sb->to);
  }
  if (sb->from_open) {
    sb->from_open = false;
    lr__close(sb, (uv_handle_t *)&sb->from);
  }
  uv_timer_start(&sb->timer, lr__on_timer, 1, 2);
  lr__check(sb);
}

static const lr_sandbox_ops lr__local_ops = {
    .attach = lr__local_attach,
    .alive = lr__local_alive,
    .write = lr__local_write,
    .kick = lr__local_kick,
    .terminate = lr__local_terminate,
};
