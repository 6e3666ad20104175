/* The sandbox's command line (bubblewrap or plain), the check that bwrap
 * can make its namespaces here, and the sandbox's /etc. See isolation.h. */
#define _GNU_SOURCE
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- argv building ------------------------------------------------------ */

typedef struct lr_argv {
  char **v;
  size_t n, cap;
} lr_argv;

static void lr__arg(lr_argv *a, const char *s) {
  if (a->n + 2 > a->cap) {
    a->cap = a->cap ? a->cap * 2 : 64;
    a->v = lr__xrealloc(a->v, a->cap * sizeof *a->v);
  }
  a->v[a->n++] = lr__xstrdup(s);
  a->v[a->n] = NULL;
}

static void lr__argf(lr_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lr__argf(lr_argv *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) abort();
  va_end(ap);
  lr__arg(a, s);
  free(s);
}

static void lr__args(lr_argv *a, const char *const *list) {
  for (; *list; list++) lr__arg(a, *list);
}

static void lr__argv_free(char **v) {
  for (size_t i = 0; v && v[i]; i++) free(v[i]);
  free(v);
}

void lr__sandbox_cmd_free(lr_sandbox_cmd *cmd) {
  lr__argv_free(cmd->argv);
  cmd->argv = NULL;
}

static bool lr__exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static bool lr__is_symlink(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/* The namespaces, the identity, /usr with the merged-usr links, /proc,
 * /dev: what both the check and a sandbox get. */
static void lr__bwrap_base(lr_argv *a, const char *bwrap, bool network_host) {
  lr__arg(a, bwrap);
  static const char *const base[] = {
      "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
      "--cap-drop", "ALL", "--clearenv", "--hostname", "sandbox", NULL};
  lr__args(a, base);
  lr__argf(a, "--uid");
  lr__argf(a, "%d", LR_SANDBOX_UID);
  lr__argf(a, "--gid");
  lr__argf(a, "%d", LR_SANDBOX_GID);
  if (network_host) lr__arg(a, "--share-net");
  static const char *const usr[] = {"--ro-bind", "/usr", "/usr", NULL};
  lr__args(a, usr);
  /* Merged /usr: /bin -> usr/bin and so on, as the host has them. */
  static const char *const links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
  for (const char *const *l = links; *l; l++) {
    char host[32], target[64];
    snprintf(host, sizeof host, "/%s", *l);
    if (!lr__is_symlink(host)) continue;
    ssize_t n = readlink(host, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strncmp(target, "usr/", 4) != 0 && strncmp(target, "/usr/", 5) != 0) continue;
    lr__arg(a, "--symlink");
    lr__arg(a, target);
    lr__arg(a, host);
  }
}

/* "<dir>/<name>" */
static char *lr__join(const char *dir, const char *name) {
  char *s = NULL;
  if (asprintf(&s, "%s/%s", dir, name) < 0) abort();
  return s;
}

static bool lr__safe_name(const char *s) {
  return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int lr__sandbox_command(const lr_sandbox_cmd_spec *spec, lr_sandbox_cmd *out, char err[LR_ERR_MAX]) {
  const lr_config *cfg = spec->cfg;
  out->argv = NULL;
  out->uid = out->gid = -1;
  if (!lr__safe_name(spec->script)) return lr__errf(err, "sandbox: bad runner file name");
  lr_argv a = {0};
  uint64_t as_bytes = cfg->max_process_memory_mb * 1024 * 1024;

  if (cfg->isolation == LR_ISOLATION_NONE) {
    /* Today's command: prlimit applies the address-space cap, then execs
     * Node, so it holds for the runner and everything it starts. */
    if (as_bytes && spec->prlimit_path) {
      lr__arg(&a, spec->prlimit_path);
      lr__argf(&a, "--as=%llu", (unsigned long long)as_bytes);
      lr__arg(&a, "--core=0");
      lr__arg(&a, "--");
    }
    lr__arg(&a, spec->node_path);
    lr__arg(&a, "--disable-warning=ExperimentalWarning");
    char *runner = lr__join(spec->runtime_dir, "runner");
    char *script = lr__join(runner, spec->script);
    lr__arg(&a, script);
    free(script);
    free(runner);
    if (spec->script_args) lr__args(&a, spec->script_args);
    out->argv = a.v;
    return 0;
  }

  if (!spec->bwrap_path) return lr__errf(err, "sandbox: isolation \"bwrap\" without a checked bwrap");
  if (geteuid() == 0) {
    out->uid = LR_SANDBOX_HOST_UID;
    out->gid = LR_SANDBOX_HOST_GID;
  }
  lr__bwrap_base(&a, spec->bwrap_path, cfg->network_host);
  /* Node and the runner's folder (its files only), read-only. */
  lr__arg(&a, "--ro-bind");
  lr__arg(&a, spec->node_path);
  lr__arg(&a, "/opt/node/bin/node");
  char *runner = lr__join(spec->runtime_dir, "runner");
  lr__arg(&a, "--ro-bind");
  lr__arg(&a, runner);
  lr__arg(&a, "/opt/lunarun");
  free(runner);
  /* A minimal /etc: the prepared files, the loader's cache, the time zone;
   * the resolver and certificates only with the network. */
  static const char *const prepared[] = {"passwd", "group", "hosts", "nsswitch.conf", NULL};
  for (const char *const *f = prepared; *f; f++) {
    char *host = NULL;
    if (asprintf(&host, "%s/etc/%s", spec->runtime_dir, *f) < 0) abort();
    lr__arg(&a, "--ro-bind");
    lr__arg(&a, host);
    lr__argf(&a, "/etc/%s", *f);
    free(host);
  }
  const char *host_etc[] = {"/etc/ld.so.cache", "/etc/localtime", NULL, NULL, NULL};
  if (cfg->network_host) {
    host_etc[2] = "/etc/resolv.conf";
    host_etc[3] = "/etc/ssl";
  }
  for (size_t i = 0; i < sizeof host_etc / sizeof host_etc[0]; i++) {
    if (!host_etc[i] || !lr__exists(host_etc[i])) continue;
    lr__arg(&a, "--ro-bind");
    lr__arg(&a, host_etc[i]);
    lr__arg(&a, host_etc[i]);
  }
  static const char *const fs[] = {"--proc", "/proc", "--dev", "/dev", NULL};
  lr__args(&a, fs);
  lr__arg(&a, "--size");
  lr__argf(&a, "%llu", (unsigned long long)cfg->tmp_mb * 1024 * 1024);
  static const char *const tmp[] = {"--perms", "1777", "--tmpfs", "/tmp", NULL};
  lr__args(&a, tmp);
  for (size_t i = 0; i < cfg->nmounts; i++) {
    lr__arg(&a, cfg->mounts[i].write ? "--bind" : "--ro-bind");
    lr__arg(&a, cfg->mounts[i].host);
    lr__arg(&a, cfg->mounts[i].at);
  }
  /* Read-only last: a later bind would fail with EROFS. */
  static const char *const tail[] = {"--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp",
                                     "--unsetenv", "PWD", NULL};
  lr__args(&a, tail);
  if (spec->info_fd >= 0) {
    lr__arg(&a, "--info-fd");
    lr__argf(&a, "%d", spec->info_fd);
  }
  lr__arg(&a, "--");
  /* RLIMIT_NPROC is set inside the sandbox's user namespace: since Linux
   * 5.14 the count is per (user namespace, uid), so it counts this
   * sandbox's tasks only. */
  lr__arg(&a, "/usr/bin/prlimit");
  if (as_bytes) lr__argf(&a, "--as=%llu", (unsigned long long)as_bytes);
  lr__arg(&a, "--core=0");
  lr__argf(&a, "--nproc=%llu:%llu", (unsigned long long)cfg->max_processes,
           (unsigned long long)cfg->max_processes);
  lr__arg(&a, "--");
  static const char *const node[] = {"/opt/node/bin/node", "--permission", "--allow-fs-read=/opt/lunarun/",
                                     "--allow-fs-read=/tmp/", "--allow-fs-write=/tmp/", NULL};
  lr__args(&a, node);
  for (size_t i = 0; i < cfg->nmounts; i++) {
    lr__argf(&a, "--allow-fs-read=%s", cfg->mounts[i].at);
    if (cfg->mounts[i].write) lr__argf(&a, "--allow-fs-write=%s", cfg->mounts[i].at);
  }
  lr__arg(&a, "--allow-worker");
  if (cfg->allow_child_processes) lr__arg(&a, "--allow-child-process");
  lr__arg(&a, "--disable-warning=ExperimentalWarning");
  lr__arg(&a, "--disable-warning=PERM0006"); /* --allow-worker's caution */
  if (cfg->allow_child_processes) lr__arg(&a, "--disable-warning=PERM0002"); /* --allow-child-process's */
  lr__argf(&a, "/opt/lunarun/%s", spec->script);
  if (spec->script_args) lr__args(&a, spec->script_args);
  out->argv = a.v;
  return 0;
}

/* ---- the check ---------------------------------------------------------- */

static char *lr__find_bwrap(void) {
  const char *path = getenv("PATH");
  char *dirs = NULL;
  if (asprintf(&dirs, "%s:/usr/bin:/bin:/usr/local/bin", path ? path : "") < 0) abort();
  char *save = NULL, *found = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    if (*d != '/') continue; /* the sandbox's binary must not depend on the cwd */
    char *p = lr__join(d, "bwrap");
    if (access(p, X_OK) == 0) found = p;
    else free(p);
  }
  free(dirs);
  return found;
}

/* Runs argv (as uid/gid when >= 0) with an empty environment and returns
 * its exit status (-1: could not run); the first line of its stderr in
 * line. */
static int lr__run_sync(char **argv, int uid, int gid, char *line, size_t line_size) {
  line[0] = '\0';
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    /* Only async-signal-safe calls here: the host may have threads. */
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
    }
    dup2(fds[1], 2);
    if (gid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)gid) != 0)) _exit(126);
    if (uid >= 0 && setuid((uid_t)uid) != 0) _exit(126);
    char *env[] = {NULL};
    execve(argv[0], argv, env);
    _exit(127);
  }
  close(fds[1]);
  char buf[1024];
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fds[0], buf + len, sizeof buf - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
    if (len == sizeof buf - 1) {
      char sink[4096]; /* drain the rest so the child cannot block */
      while (read(fds[0], sink, sizeof sink) > 0) {}
      break;
    }
  }
  close(fds[0]);
  buf[len] = '\0';
  snprintf(line, line_size, "%.*s", (int)strcspn(buf, "\n"), buf);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static char *lr__checked_bwrap; /* a success, remembered for the process */
static uid_t lr__checked_euid;

int lr__isolation_check(const lr_config *cfg, char **bwrap_path, char err[LR_ERR_MAX]) {
  *bwrap_path = NULL;
  static const char *const opt_out = "or set isolation = \"none\" to run programs without isolation";
  if (lr__checked_bwrap && lr__checked_euid == geteuid()) {
    *bwrap_path = lr__xstrdup(lr__checked_bwrap);
    return 0;
  }
  char *bwrap = lr__find_bwrap();
  if (!bwrap)
    return lr__errf(err,
                    "isolation \"bwrap\" needs bubblewrap (bwrap), which is not installed: install it "
                    "(Debian: apt-get install bubblewrap), %s",
                    opt_out);
  if (access("/usr/bin/prlimit", X_OK) != 0) {
    free(bwrap);
    return lr__errf(err, "isolation \"bwrap\" needs util-linux's /usr/bin/prlimit, which is not installed: "
                         "install it, %s", opt_out);
  }
  lr_argv a = {0};
  lr__bwrap_base(&a, bwrap, cfg->network_host);
  static const char *const rest[] = {"--proc", "/proc", "--dev", "/dev", "--size", "1048576", "--tmpfs", "/tmp",
                                     "--remount-ro", "/", "--", "/usr/bin/prlimit", "--nproc=64:64", "--",
                                     "/usr/bin/true", NULL};
  lr__args(&a, rest);
  bool root = geteuid() == 0;
  char line[400];
  int rc = lr__run_sync(a.v, root ? LR_SANDBOX_HOST_UID : -1, root ? LR_SANDBOX_HOST_GID : -1, line, sizeof line);
  lr__argv_free(a.v);
  if (rc != 0) {
    char why[600];
    if (rc < 0)
      snprintf(why, sizeof why, "cannot run %s: %s", bwrap, strerror(errno));
    else if (line[0])
      snprintf(why, sizeof why, "%s", line);
    else
      snprintf(why, sizeof why, "%s exited with status %d", bwrap, rc);
    bool userns = strstr(line, "uid map") || strstr(line, "namespace") || strstr(line, "Operation not permitted") ||
                  strstr(line, "Permission denied") || strstr(line, "No space left");
    free(bwrap);
    return lr__errf(err, "isolation \"bwrap\" cannot create its sandbox here (%.220s)%s; %s", why,
                    userns ? ": unprivileged user namespaces are refused (e.g. Ubuntu >= 23.10's AppArmor "
                             "restriction, or user.max_user_namespaces = 0): allow them"
                           : "",
                    opt_out);
  }
  free(lr__checked_bwrap);
  lr__checked_bwrap = lr__xstrdup(bwrap);
  lr__checked_euid = geteuid();
  *bwrap_path = bwrap;
  return 0;
}

/* ---- /etc --------------------------------------------------------------- */

static int lr__write_etc(const char *dir, const char *name, const char *text, char *err) {
  char *path = NULL;
  if (asprintf(&path, "%s/etc/%s", dir, name) < 0) abort();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  size_t len = strlen(text);
  bool ok = fd >= 0 && write(fd, text, len) == (ssize_t)len && fchmod(fd, 0644) == 0;
  int e = errno;
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (!ok) lr__errf(err, "cannot write %s: %s", path, strerror(e));
  free(path);
  return ok ? 0 : -1;
}

int lr__isolation_prepare(const lr_config *cfg, const char *dir, char err[LR_ERR_MAX]) {
  (void)cfg;
  /* mkdtemp made dir 0700: the dropped uid must reach the files below. */
  if (chmod(dir, 0711) != 0) return lr__errf(err, "cannot change the mode of %s: %s", dir, strerror(errno));
  char *etc = lr__join(dir, "etc");
  if (mkdir(etc, 0755) != 0 && errno != EEXIST) {
    lr__errf(err, "cannot make %s: %s", etc, strerror(errno));
    free(etc);
    return -1;
  }
  int rc = chmod(etc, 0755);
  free(etc);
  if (rc != 0) return lr__errf(err, "cannot change the mode of %s/etc: %s", dir, strerror(errno));
  char passwd[256], group[256];
  snprintf(passwd, sizeof passwd,
           "sandbox:x:%d:%d:sandbox:/tmp:/usr/sbin/nologin\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
           LR_SANDBOX_UID, LR_SANDBOX_GID);
  snprintf(group, sizeof group, "sandbox:x:%d:\nnogroup:x:65534:\n", LR_SANDBOX_GID);
  if (lr__write_etc(dir, "passwd", passwd, err) != 0 || lr__write_etc(dir, "group", group, err) != 0 ||
      lr__write_etc(dir, "hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                    err) != 0 ||
      lr__write_etc(dir, "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n", err) != 0)
    return -1;
  return 0;
}

void lr__isolation_cleanup(const char *dir) {
  static const char *const names[] = {"passwd", "group", "hosts", "nsswitch.conf", NULL};
  for (const char *const *n = names; *n; n++) {
    char *path = NULL;
    if (asprintf(&path, "%s/etc/%s", dir, *n) < 0) abort();
    unlink(path);
    free(path);
  }
  char *etc = lr__join(dir, "etc");
  rmdir(etc);
  free(etc);
}

int lr__isolation_readable(const char *path, const char *what, char err[LR_ERR_MAX]) {
  if (geteuid() != 0) return 0;
  char *p = realpath(path, NULL);
  if (!p) return lr__errf(err, "%s %s: %s", what, path, strerror(errno));
  struct stat st;
  int rc = 0;
  if (stat(p, &st) != 0 || !(st.st_mode & S_IROTH))
    rc = lr__errf(err,
                  "isolation \"bwrap\": %s %s is not readable by others, so the sandbox's uid %d cannot read it: "
                  "make it readable (chmod o+r), or set isolation = \"none\"",
                  what, p, LR_SANDBOX_HOST_UID);
  for (char *slash = strrchr(p, '/'); rc == 0 && slash && slash != p; slash = strrchr(p, '/')) {
    *slash = '\0';
    if (stat(p, &st) == 0 && !(st.st_mode & S_IXOTH))
      rc = lr__errf(err,
                    "isolation \"bwrap\": the folder %s (above %s %s) is not searchable by others, so the "
                    "sandbox's uid %d cannot reach it: chmod o+x it, or set isolation = \"none\"",
                    p, what, path, LR_SANDBOX_HOST_UID);
  }
  free(p);
  return rc;
}
