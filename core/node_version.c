/* The Node version check of lr_runtime_new: `node --version`, run once per
 * binary. Synchronous on purpose: lr_runtime_new reports misuse by its
 * return code, and `--version` answers before Node initializes V8. */
#define _GNU_SOURCE /* pipe2 */
#include "node_version.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A Node that does not answer --version within this is not usable. */
#define LR_NODE_VERSION_TIMEOUT_MS 10000

/* The last binary that passed, on this thread (runtimes of one loop share
 * it; a program that makes many runtimes pays for the check once). */
static _Thread_local struct {
  char path[PATH_MAX];
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} lr__passed;

static bool lr__same_binary(const char *path, const struct stat *st) {
  return strcmp(lr__passed.path, path) == 0 && lr__passed.dev == st->st_dev && lr__passed.ino == st->st_ino &&
         lr__passed.size == st->st_size && lr__passed.mtime.tv_sec == st->st_mtim.tv_sec &&
         lr__passed.mtime.tv_nsec == st->st_mtim.tv_nsec;
}

bool lr__node_version_ok(const char *text) {
  unsigned long major, minor;
  char *end;
  if (text[0] != 'v') return false;
  major = strtoul(text + 1, &end, 10);
  if (end == text + 1 || *end != '.') return false;
  const char *m = end + 1;
  minor = strtoul(m, &end, 10);
  if (end == m) return false;
  /* stripTypeScriptTypes came with 23.2 and was backported to 22.13. */
  if (major == 22) return minor >= 13;
  if (major == 23) return minor >= 2;
  return major > 23;
}

static uint64_t lr__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs `node --version` with an empty environment and reads its first
 * line into out. Returns 0, or -1 with why (what went wrong, for the
 * message). */
static int lr__read_version(const char *node_path, char *out, size_t cap, char *why, size_t why_cap) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    snprintf(why, why_cap, "cannot make a pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  char *argv[] = {(char *)node_path, "--version", NULL};
  char *envp[] = {NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, node_path, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    snprintf(why, why_cap, "cannot start it: %s", strerror(rc));
    return -1;
  }
  size_t n = 0;
  bool timed_out = false;
  uint64_t deadline = lr__now_ms() + LR_NODE_VERSION_TIMEOUT_MS;
  for (;;) {
    uint64_t now = lr__now_ms();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    int ready = poll(&p, 1, (int)(deadline - now));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue; /* the deadline check ends it */
    ssize_t got = read(fds[0], out + n, cap - 1 - n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += (size_t)got;
    if (n == cap - 1) break;
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out[n] = '\0';
  out[strcspn(out, "\r\n")] = '\0';
  if (timed_out) {
    snprintf(why, why_cap, "it did not answer --version within %d s", LR_NODE_VERSION_TIMEOUT_MS / 1000);
    return -1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out[0] != 'v') {
    if (WIFSIGNALED(status))
      snprintf(why, why_cap, "--version was ended by signal %d", WTERMSIG(status));
    else
      snprintf(why, why_cap, "--version printed \"%.40s\" and exited with status %d", out,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return -1;
  }
  return 0;
}

int lr__node_check_version(const char *node_path, char err[LR_ERR_MAX]) {
  struct stat st;
  if (stat(node_path, &st) != 0)
    return lr__errf(err, "Node %s: %s; lunarun needs Node >= " LR_NODE_MIN_TEXT, node_path, strerror(errno));
  if (lr__same_binary(node_path, &st)) return 0;
  char version[64], why[160];
  if (lr__read_version(node_path, version, sizeof version, why, sizeof why) != 0)
    return lr__errf(err, "%s is not a usable Node (%s); lunarun needs Node >= " LR_NODE_MIN_TEXT
                         " (set nodePath or $LUNARUN_NODE)", node_path, why);
  if (!lr__node_version_ok(version))
    return lr__errf(err, "Node %s is %s; lunarun needs Node >= " LR_NODE_MIN_TEXT
                         "%s (set nodePath or $LUNARUN_NODE to a newer one)",
                    node_path, version, strncmp(version, "v23.", 4) == 0 ? " (on the 23 line, >= 23.2)" : "");
  if (strlen(node_path) < sizeof lr__passed.path) {
    snprintf(lr__passed.path, sizeof lr__passed.path, "%s", node_path);
    lr__passed.dev = st.st_dev;
    lr__passed.ino = st.st_ino;
    lr__passed.size = st.st_size;
    lr__passed.mtime = st.st_mtim;
  }
  return 0;
}
